import { z } from "zod";
import type { ChangeSet } from "../../compiler/changeset.js";
import { npuLoadChanges, npuSlots, npuTarget, npuUnloadChanges } from "../../compiler/edits/npu.js";
import { ResourceId, SlotName } from "../../schema/index.js";
import { ApiError, refusing } from "../errors.js";
import { npuOccupancy, npuSwapStatus } from "../npu-view.js";
import { defineRoute, type WriteOutcome } from "../route.js";
import { readRunner } from "../runner-read.js";
import { findSlot, observeLiveness } from "../slot-view.js";

const Name = z.strictObject({ name: z.string().min(1).max(64) });
const Load = z.strictObject({ slot: SlotName.optional(), model: ResourceId.optional(), force: z.boolean().optional() })
  .refine((b) => (b.slot === undefined) !== (b.model === undefined), { message: "name the NPU slot to load (`slot`) or the model it serves (`model`), not both" });
const Unload = z.strictObject({ force: z.boolean().optional() });

/** The strings of a runner's list, or `slot.runner_error` when it is not one. */
function strings(name: string, path: string, value: unknown): string[] {
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value;
  throw new ApiError("slot.runner_error", `slot \`${name}\`'s runner answered GET ${path} without the expected list`, { name, path, reason: "unexpected_shape" });
}

/** The reply of an NPU load or unload: which slots it enabled and disabled, and the pipeline's outcome. */
function npuReply(changes: ChangeSet): (o: WriteOutcome) => unknown {
  const turned = (on: boolean) => changes.edits.flatMap((e) => (e.op === "set" && e.value === on ? [/^slots\/(.+)\.toml$/.exec(e.file)![1]!] : []));
  return (o) => ({ loaded: turned(true), unloaded: turned(false), revision: o.revision, files: o.files, committed: o.committed, plan: o.plan, warnings: o.warnings });
}

/**
 * Slot extras (issue 19, part 7): reads passed on to a running slot's runner
 * (a TTS slot's voices, the FLM runner's models) and the NPU tools. Who has
 * the NPU is read from the slot view and npu_status; loading and unloading
 * the NPU backend are ChangeSets of slot files like slot_load / slot_unload,
 * so the pipeline compiles, plans and gates them by their effect.
 */
export const slotExtraRoutes = [
  defineRoute({
    method: "GET", path: "/api/slots/{name}/voices", kind: "read", params: Name, tools: ["slot_voices"],
    summary: "A TTS slot's voices, from its running runner's GET /v1/audio/voices (Kokoro's OpenAI-style server)",
    handle: async ({ box, params }) => {
      const model = await box.model();
      const slot = findSlot(model, params.name);
      if (slot.type !== "tts") throw new ApiError("slot.wrong_type", `slot \`${slot.name}\` is a ${slot.type} slot: only a tts slot has voices`, { name: slot.name, type: slot.type, needed: "tts" });
      const reply = (await readRunner(slot, (await observeLiveness(box, model)).get(slot.name), "/v1/audio/voices", await box.driver(model))) as { voices?: unknown };
      const voices = strings(slot.name, "/v1/audio/voices", reply?.voices);
      // The voice the slot's runner speaks with when a request names none (`--voice`), as its file sets it.
      const at = slot.spec.argv.indexOf("--voice");
      return { name: slot.name, model: slot.model ?? null, default_voice: at >= 0 ? (slot.spec.argv[at + 1] ?? null) : null, voices, count: voices.length };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/slots/flm/models", kind: "read", tools: ["flm_model_list"],
    summary: "The models the FLM runners (the slots placed on the NPU) list at their OpenAI-style GET /v1/models",
    handle: async ({ box }) => {
      const model = await box.model();
      const slots = npuSlots(model);
      if (slots.length === 0) throw new ApiError("npu.no_slot", "no slot is placed on the NPU: there is no FLM runner to ask", { npu_slots: [] });
      const seen = await observeLiveness(box, model);
      const running = slots.filter((s) => seen.get(s.name)?.running);
      if (running.length === 0) {
        throw new ApiError("slot.not_ready", "no FLM runner is running: every slot on the NPU is stopped or disabled", {
          state: "stopped", slots: slots.map((s) => ({ name: s.name, enabled: s.enabled })),
        });
      }
      const models: Array<Record<string, unknown>> = [];
      const rows = [];
      for (const s of slots) {
        if (!seen.get(s.name)?.running) {
          rows.push({ name: s.name, model: s.model ?? null, running: false, served: null, error: null });
          continue;
        }
        try {
          const reply = (await readRunner(s, seen.get(s.name), "/v1/models", await box.driver(model))) as { data?: unknown };
          if (!Array.isArray(reply?.data)) throw new ApiError("slot.runner_error", `slot \`${s.name}\`'s runner answered GET /v1/models without a data list`, { name: s.name, reason: "unexpected_shape" });
          const data = reply.data.filter((m): m is Record<string, unknown> => typeof m === "object" && m !== null && typeof (m as { id?: unknown }).id === "string");
          for (const m of data) models.push({ id: m.id, object: m.object ?? "model", created: m.created ?? null, owned_by: m.owned_by ?? null, slot: s.name });
          rows.push({ name: s.name, model: s.model ?? null, running: true, served: data.length, error: null });
        } catch (err) {
          // One runner that fails does not hide the others' lists; it says why beside its name.
          if (!(err instanceof ApiError)) throw err;
          rows.push({ name: s.name, model: s.model ?? null, running: true, served: null, error: { code: err.code, message: err.message } });
        }
      }
      return { models, count: models.length, slots: rows };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/npu/occupancy", kind: "read", tools: ["npu_occupancy"],
    summary: "Which slot holds the NPU now: the NPU's devices (npu_status), each slot placed on it with what runs, the running llm slot and the one the files want",
    handle: async ({ box }) => npuOccupancy(box, await box.model()),
  }),
  defineRoute({
    method: "GET", path: "/api/npu/swap-status", kind: "read", tools: ["npu_swap_status"],
    summary: "Whether the NPU is changing hands (stopping the old llm slot, starting the new one), an apply under way, and gated load/unload requests waiting",
    handle: async ({ box, services }) => npuSwapStatus(box, await box.model(), services),
  }),
  defineRoute({
    method: "POST", path: "/api/backends/npu/load", kind: "write", body: Load, tools: ["npu_backend_load"],
    summary: "Load an NPU slot (by `slot`, or the `model` it serves): enable it and disable the llm slot that has the NPU now; `force` stops a pinned one",
    handle: async ({ box, body }) => {
      const model = await box.model();
      const changes = refusing(() => npuLoadChanges(model, npuTarget(model, body), body.force === true));
      return { changes, reply: npuReply(changes) };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/backends/npu/unload", kind: "write", body: Unload, tools: ["npu_backend_unload"],
    summary: "Unload the NPU: disable the llm slot enabled there (npu.idle when none is); `force` stops a pinned one",
    handle: async ({ box, body }) => {
      const model = await box.model();
      const changes = refusing(() => npuUnloadChanges(model, body.force === true));
      return { changes, reply: npuReply(changes) };
    },
  }),
];
