import { z } from "zod";
import { createSlotChanges, deleteSlotChanges, editSlotChanges, renameSlotChanges, slotDoc, slotFile as fileOf, SPARSE_TABLES, swapSlotChanges, toggleSlotChanges } from "../../compiler/edits/slots.js";
import { ResourceId, Slot, SlotName } from "../../schema/index.js";
import type { BoxService } from "../box.js";
import { refusing } from "../errors.js";
import { restoreMasked } from "../redact.js";
import { defineRoute, sparseFields, type WriteIntent, type WriteOutcome } from "../route.js";
import { slotIds } from "../slot-ids.js";
import { restartable, restartSlot } from "../slot-restart.js";
import { findSlot, slotFileText } from "../slot-view.js";

const Name = z.strictObject({ name: z.string().min(1).max(64) });
const Force = z.strictObject({
  force: z.enum(["true", "false", "1", "0"]).optional().transform((v) => v === "true" || v === "1"),
});
/**
 * The most fields a create or an edit takes, counting the keys given in
 * `tune`, `placement` and `server` too. A slot file has about 25 such keys;
 * a body with far more is mostly unknown keys, each a diagnostic and, for an
 * edit, one key set after another (1000 of them took 40 s), so it is refused
 * before any of that work.
 */
const MAX_SLOT_FIELDS = 64;

function fieldCount(body: Record<string, unknown>): number {
  let n = 0;
  for (const [key, value] of Object.entries(body)) {
    n++;
    if (SPARSE_TABLES.has(key) && value !== null && typeof value === "object" && !Array.isArray(value)) n += Object.keys(value).length;
  }
  return n;
}

const bounded = { message: `more than ${MAX_SLOT_FIELDS} fields, counting those of tune, placement and server; a slot file has fewer keys` };

/** A slot file's fields pass through: the compiler validates them (an unknown key gets a did-you-mean). */
const Create = z.looseObject({ name: SlotName }).refine((b) => fieldCount(b) <= MAX_SLOT_FIELDS, bounded);
const Edit = z.looseObject({ tune: z.union([z.null(), z.record(z.string(), z.unknown())]).optional() }).refine((b) => fieldCount(b) <= MAX_SLOT_FIELDS, bounded);

/**
 * What slot_create and slot_edit advertise (seed 001: "a profile, model and
 * placement, plus sparse tune overrides"): a slot file's keys. A create
 * needs `profile` and `port` (the slot file does); an edit sets any of them,
 * each key of `tune`, `placement` and `server` on its own, and null removes
 * one, so nothing there has a default.
 */
const CreateHints = z.object({ name: SlotName, ...Slot.shape });
const EditHints = sparseFields(Slot, SPARSE_TABLES);

/**
 * A tool's body that may also name its field as seed 003 does (`model_swap`'s
 * `model_id`, `slot_rename`'s `new_name`): exactly one of the two, sent on
 * under the route's name.
 */
function seedNamed<T extends z.ZodType>(field: string, seedName: string, value: T) {
  return z.strictObject({ [field]: value.optional(), [seedName]: value.optional() })
    .refine((b) => (b[field] === undefined) !== (b[seedName] === undefined), { message: `give ${field} (or ${seedName}, its name in seed 003), one of them` })
    .transform((b) => ({ [field]: b[field] ?? b[seedName] }));
}

/** The slot's file text as on disk now; 404 `slot.not_found` when there is none, 422 `config.invalid` when it cannot be read (slotFileText). */
async function slotText(box: BoxService, name: string): Promise<string> {
  return slotFileText(await box.snapshot(), name);
}

function withSlot(box: BoxService, name: string): (o: WriteOutcome) => unknown {
  return (o) => ({ name, id: o.committed || o.files.length === 0 ? slotIds(box.db).idOf(name) : null, revision: o.revision, files: o.files, committed: o.committed, plan: o.plan, warnings: o.warnings });
}

/** A pinned slot's unload without force is refused inside the pipeline (compiler/change-checks.ts), for a plan applied by id too. */
async function toggle(box: BoxService, name: string, enabled: boolean, force: boolean): Promise<WriteIntent> {
  await slotText(box, name);
  return { changes: toggleSlotChanges(name, enabled, force), reply: withSlot(box, name) };
}

/** The write side of the slot routes: every one a ChangeSet through the pipeline, except restart (an action on the runtime). */
export const slotWriteRoutes = [
  defineRoute({
    method: "POST", path: "/api/slots", kind: "write", body: Create, bodyHints: CreateHints, status: 201, tools: ["slot_create"],
    summary: "Create slots/<name>.toml from the body's fields (name + the slot file's keys)",
    handle: async ({ box, body }) => {
      const { name, ...fields } = body;
      const snap = await box.snapshot();
      return { changes: refusing(() => createSlotChanges(name, fields, snap.tree.files.has(fileOf(name)))), reply: withSlot(box, name) };
    },
  }),
  defineRoute({
    method: "PUT", path: "/api/slots/{name}/config", kind: "write", params: Name, body: Edit, bodyHints: EditHints, tools: ["slot_edit", "model_assign"],
    // seed 003: model_assign is "name (path), model (required)"; the route's other fields are slot_edit's.
    toolBodies: { model_assign: z.strictObject({ model: ResourceId }) },
    summary: "Edit a slot's file in place (comments kept): fields set, null removes one; sparse `tune`, `tune: null` clears it",
    handle: async ({ box, params, body }) => {
      const text = await slotText(box, params.name);
      // A `[redacted]` sent back (a GET's masked value, e.g. an env secret) keeps the value it stands for.
      const fields = restoreMasked(body, slotDoc(text));
      return { changes: refusing(() => editSlotChanges(params.name, fields)), reply: withSlot(box, params.name) };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/slots/{name}/load", kind: "write", params: Name, tools: ["slot_load"],
    summary: "Enable the slot (enabled = true); the sweep starts it",
    handle: async ({ box, params }) => toggle(box, params.name, true, false),
  }),
  defineRoute({
    method: "POST", path: "/api/slots/{name}/unload", kind: "write", params: Name, query: Force, tools: ["slot_unload"],
    summary: "Disable the slot (enabled = false); the sweep stops it. A pinned slot needs ?force=true",
    handle: async ({ box, params, query }) => toggle(box, params.name, false, query.force),
  }),
  defineRoute({
    method: "POST", path: "/api/slots/{name}/swap", kind: "write", params: Name, body: z.strictObject({ model: ResourceId }), tools: ["model_swap"],
    toolBodies: { model_swap: seedNamed("model", "model_id", ResourceId) },
    summary: "Serve another model (a model id of models.toml)",
    handle: async ({ box, params, body }) => {
      await slotText(box, params.name);
      return { changes: swapSlotChanges(params.name, body.model), reply: withSlot(box, params.name) };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/slots/{name}/rename", kind: "write", params: Name, body: z.strictObject({ to: SlotName }), tools: ["slot_rename"],
    toolBodies: { slot_rename: seedNamed("to", "new_name", SlotName) },
    summary: "Rename the slot: its file moves (text and comments kept) in one change set; the stable id moves with it",
    handle: async ({ box, params, body }) => {
      await slotText(box, params.name);
      // The slot has its id before it moves; the commit observer moves the id with the file (slot-ids.ts), so a plan of this change set does the same.
      slotIds(box.db).idOf(params.name);
      return {
        changes: renameSlotChanges(params.name, body.to),
        reply: (o) => ({ ...(withSlot(box, body.to)(o) as object), from: params.name, to: body.to }),
      };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/slots/{name}/restart", kind: "action", params: Name, tools: ["slot_restart"],
    summary: "Restart the slot's runner now (stop, start the desired spec, wait for health), under the apply lock",
    // A slot that is not there or is disabled is refused before an agent's request is queued for a person.
    precheck: async ({ box, params }) => {
      await slotText(box, params.name);
      restartable(findSlot(await box.model(), params.name));
    },
    handle: async ({ box, params }) => {
      await slotText(box, params.name);
      const model = await box.model();
      const { plan, ...rest } = await restartSlot(box, model, findSlot(model, params.name));
      return { ...rest, plan_id: plan.id };
    },
  }),
  defineRoute({
    method: "DELETE", path: "/api/slots/{name}", kind: "write", params: Name, query: Force, tools: ["slot_delete"],
    summary: "Delete the slot's file; the sweep stops its runner. A pinned slot needs ?force=true",
    handle: async ({ box, params, query }) => {
      await slotText(box, params.name);
      // Pinned without force: refused inside the pipeline; the id goes with the file (the commit observer).
      return { changes: deleteSlotChanges(params.name, query.force) };
    },
  }),
];
