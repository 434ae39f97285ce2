import { z } from "zod";
import { SlotName } from "../../schema/index.js";
import type { Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import type { ImagePulls, ImagePullView } from "../image-pulls.js";
import { defineRoute } from "../route.js";
import { serveEvents } from "../sse.js";

const SlotParams = z.strictObject({ name: SlotName });

function images(services: Dispatcher): ImagePulls {
  if (services.images === undefined) throw new ApiError("system.internal", "runner image pulls are not served here");
  return services.images;
}

/**
 * Runner images: the images the profiles name and what the engine holds of
 * each (local id, registry digest, size, build time, or `present: false`),
 * and pulling them — all at once (`runner_image_sync`) or one slot's — only
 * when `[slots] pull = true`, each pull's state and progress over
 * server-sent events. A pull that moves an image re-plans its slots
 * (server/image-pulls.ts).
 */
export const runnerImageRoutes = [
  defineRoute({
    method: "GET", path: "/api/runner-images", kind: "read", tools: ["runner_image_list"],
    summary: "Every image a profile names: its profiles and enabled slots, and the engine's local id, registry digest, size and build time (or present: false)",
    handle: async ({ services }) => {
      const { model, engine, images: rows } = await images(services).images();
      return { runtime: model.settings.slots.runtime, engine, pull: model.settings.slots.pull, images: rows };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/runner-images/downloaded", kind: "read", tools: ["runner_image_downloaded"],
    summary: "The images the profiles name that the engine holds",
    handle: async ({ services }) => {
      const { engine, images: rows } = await images(services).images();
      return { engine, images: rows.filter((r) => r.present) };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/runner-images/pulls/list", kind: "read", tools: ["runner_image_pulls"], listKey: "pulls",
    summary: "The image pulls this server ran or runs, newest first: state (pulling, done, failed), layers and bytes, the image id before and after",
    handle: ({ services }) => images(services).list(),
  }),
  defineRoute({
    method: "GET", path: "/api/runner-images/pulls/events", kind: "stream",
    summary: "Server-sent events: a snapshot of every image pull, then state and progress (at most every 250 ms per pull); 15 s keep-alive",
    handle: ({ services }, event) => serveEvents(event, (send) => {
      let seq = 0;
      const pulls = images(services);
      send("snapshot", { pulls: pulls.list() }, ++seq);
      const onState = (p: ImagePullView) => send("state", { pull: p }, ++seq);
      const onProgress = (p: ImagePullView) => send("progress", { pull: p }, ++seq);
      pulls.events.on("state", onState);
      pulls.events.on("progress", onProgress);
      return () => {
        pulls.events.off("state", onState);
        pulls.events.off("progress", onProgress);
      };
    }),
  }),
  defineRoute({
    method: "POST", path: "/api/runner-images/sync", kind: "action", status: 202, tools: ["runner_image_sync"],
    summary: "Pull every image the profiles name (not those built on this engine), when [slots] pull = true; progress on GET /api/runner-images/pulls/events",
    precheck: async ({ services }) => {
      await images(services).precheck();
    },
    handle: ({ services, caller }) => images(services).sync(caller),
  }),
  defineRoute({
    method: "POST", path: "/api/slots/{name}/pull", kind: "action", status: 202, params: SlotParams, tools: ["slot_pull_image"],
    summary: "Pull the image of the slot's profile, when [slots] pull = true; progress on GET /api/runner-images/pulls/events",
    precheck: async ({ params, services, box }) => {
      const pulls = images(services);
      const model = await box.model();
      pulls.slotImage(model, params.name);
      await pulls.precheck(model);
    },
    handle: async ({ params, services, caller }) => ({ pull: await images(services).pullSlot(params.name, caller) }),
  }),
  defineRoute({
    method: "GET", path: "/api/slots/{name}/pull/status", kind: "read", params: SlotParams, tools: ["slot_pull_status"],
    summary: "The slot's image: what the engine holds of it, and its newest pull (null when none ran)",
    handle: async ({ params, services, box }) => {
      const pulls = images(services);
      const model = await box.model();
      const image = pulls.slotImage(model, params.name);
      const row = (await pulls.images()).images.find((r) => r.image === image)!;
      return { slot: params.name, ...row, pull: pulls.latest(image) };
    },
  }),
];
