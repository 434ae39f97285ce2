import { z } from "zod";
import { ResourceId } from "../../schema/index.js";
import type { Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import type { PullService } from "../pulls/service.js";
import type { PullView } from "../pulls/worker.js";
import { defineRoute } from "../route.js";
import { serveEvents } from "../sse.js";
import { queryInt } from "../query.js";

const ModelIdParams = z.strictObject({ model_id: ResourceId });
/** A Hub repository id: `org/name`. */
export const HubRepo = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/, "an org/name repository id");
const HubFile = z.string().min(1).max(512);
/** A Hub revision: a branch, tag or commit. */
export const HubRevision = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$/, "a branch, tag or commit of 1–128 characters: letters, digits, `.`, `_`, `/` and `-`, starting with a letter or digit");
const PullBody = z.strictObject({
  hf_repo: HubRepo,
  hf_filename: HubFile,
  revision: HubRevision.optional(),
  draft_repo: HubRepo.optional(),
  draft_filename: HubFile.optional(),
  mmproj_filename: HubFile.optional(),
});
const SearchQuery = z.strictObject({ q: z.string().min(1).max(200), limit: queryInt(1, 100, 20) });

function pulls(services: Dispatcher): PullService {
  if (services.pulls === undefined) throw new ApiError("system.internal", "model pulls are not served here");
  return services.pulls;
}

/**
 * Model pulls from the Hugging Face Hub: a gated action that queues a
 * durable job (server/pulls/), its status, list, cancel and delete, a
 * server-sent-events stream of their progress, and a search of the Hub.
 * A finished pull registers the model through the pipeline as `system:pull`.
 */
export const modelPullRoutes = [
  defineRoute({
    method: "POST", path: "/api/models/{model_id}/pull", kind: "action", status: 202, params: ModelIdParams, body: PullBody, tools: ["model_pull"],
    summary: "Pull a model file (and its draft / mmproj files) from the Hub into [models] store, verified by sha256, then register it as model_id",
    precheck: async ({ params, body, services }) => {
      await pulls(services).precheck(params.model_id, body);
    },
    // Judged by the model it registers once done: which Hub file its bytes come from is a person's call.
    proposes: async ({ params, body, services }) => pulls(services).registration(params.model_id, body),
    handle: async ({ params, body, services, caller }) => ({ pull: await pulls(services).start(params.model_id, body, caller) }),
  }),
  defineRoute({
    method: "GET", path: "/api/models/pulls", kind: "read", tools: ["model_pulls_list"], listKey: "pulls",
    summary: "Every pull hal0 knows: state (queued, downloading, verifying, done, failed, cancelled), bytes, rate and ETA",
    handle: ({ services }) => ({ pulls: pulls(services).list() }),
  }),
  defineRoute({
    method: "GET", path: "/api/models/pulls/events", kind: "stream",
    summary: "Server-sent events: a snapshot of every pull, then state and progress (at most every 250 ms per pull); 15 s keep-alive",
    handle: ({ services }, event) => serveEvents(event, (send) => {
      let seq = 0;
      const service = pulls(services);
      send("snapshot", { pulls: service.list() }, ++seq);
      const onState = (p: PullView) => send("state", { pull: p }, ++seq);
      const onProgress = (p: PullView) => send("progress", { pull: p }, ++seq);
      service.worker.events.on("state", onState);
      service.worker.events.on("progress", onProgress);
      return () => {
        service.worker.events.off("state", onState);
        service.worker.events.off("progress", onProgress);
      };
    }),
  }),
  defineRoute({
    method: "GET", path: "/api/models/{model_id}/pull/status", kind: "read", params: ModelIdParams, tools: ["model_pull_status"],
    summary: "One pull: its state, bytes, rate and ETA, and the reason when it failed",
    handle: ({ params, services }) => ({ pull: pulls(services).status(params.model_id) }),
  }),
  defineRoute({
    method: "POST", path: "/api/models/{model_id}/pull/cancel", kind: "action", params: ModelIdParams, tools: ["model_pull_cancel"],
    summary: "Cancel a queued or downloading pull; its partial files are removed",
    handle: async ({ params, services }) => ({ pull: await pulls(services).cancel(params.model_id) }),
  }),
  defineRoute({
    method: "DELETE", path: "/api/models/pulls/{model_id}", kind: "action", params: ModelIdParams, tools: ["model_pull_delete"],
    summary: "Forget a pull (a live one is cancelled first); a registered model and its file stay",
    handle: ({ params, services }) => pulls(services).remove(params.model_id),
  }),
  defineRoute({
    method: "GET", path: "/api/models/updates/check", kind: "read", query: z.strictObject({ model_id: ResourceId.optional() }), tools: ["model_update_check"], listKey: "models",
    summary: "For each model pulled from the Hub: the recorded revision and sha256 beside the Hub's now, and whether an update is available (a split model: any of its parts changed; changed names the files that differ)",
    handle: async ({ query, services }) => {
      const rows = await pulls(services).updates(query.model_id);
      return { models: rows, updates_available: rows.filter((r) => r.update_available).length };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/models/{model_id}/update", kind: "action", status: 202, params: ModelIdParams, tools: ["model_update"],
    summary: "Pull the Hub's newer file of a model: downloaded beside the old one, verified, renamed over it, the model's revision and sha256 edited (one change: its slots are replaced)",
    precheck: async ({ params, services }) => {
      await pulls(services).precheckUpdate(params.model_id);
    },
    // Judged by the change it commits once done (the commit the model's bytes come from), as model_edit's revision is.
    proposes: async ({ params, services }) => pulls(services).updateChange(params.model_id),
    handle: async ({ params, services, caller }) => ({ pull: await pulls(services).startUpdate(params.model_id, caller) }),
  }),
  defineRoute({
    method: "GET", path: "/api/hf/search", kind: "read", query: SearchQuery, tools: ["hf_search"],
    summary: "Search the Hub (HF_ENDPOINT) for GGUF model repositories: id, downloads, likes, last update",
    handle: async ({ query, services }) => {
      const hub = pulls(services).hub();
      const results = await hub.search(query.q, { limit: query.limit }).catch((err: Error & { code?: string }) => {
        throw new ApiError(err.code === "hub.denied" ? "model.hub_denied" : "model.hub_unreachable", err.message, { endpoint: hub.endpoint });
      });
      return { endpoint: hub.endpoint, results };
    },
  }),
];

