import { z } from "zod";
import { defaultModelEdits, deleteModelEdits, editModelEdits, modelTableEdit, presentFacts as present, scanEdits } from "../../compiler/edits/models.js";
import type { Model } from "../../compiler/index.js";
import { entryFor, scanModels } from "../../reconciler/host/model-scan.js";
import { ModelFacts, ResourceId } from "../../schema/index.js";
import { ApiError, refusing } from "../errors.js";
import { defineRoute, sparseFields, type WriteOutcome } from "../route.js";
import type { Caller } from "../route.js";
import { absolutePath, findModel, headerOf, headerReport, inspectable, refuseLegacyKeys } from "./models-common.js";

const ModelIdParams = z.strictObject({ model_id: ResourceId });
/** File facts as top-level fields; the compiler validates them (unknown keys get a "did you mean"). */
const Facts = z.record(z.string(), z.unknown());
const RegisterBody = z.looseObject({ id: ResourceId });
const ScanBody = z.strictObject({ prune: z.boolean().default(false) });
/**
 * What model_register, model_validate and model_edit advertise (seed 001:
 * they "take file facts as top-level fields"): the keys of a model's table.
 * An edit's null removes a fact (`draft: null` unpairs the drafter).
 */
const FactHints = z.object({ id: ResourceId, ...ModelFacts.shape });
const ValidateHints = z.object({ id: ResourceId.optional(), ...ModelFacts.shape });
const EditHints = sparseFields(ModelFacts);

const written = (o: WriteOutcome) => ({ revision: o.revision, files: o.files, committed: o.committed, plan: o.plan, warnings: o.warnings });

/**
 * Model writes: each one ChangeSet on models.toml (`set` edits, so a
 * person's comments and layout survive), compiled and planned by the
 * pipeline before anything is written.
 */
export const modelWriteRoutes = [
  defineRoute({
    method: "POST", path: "/api/models", kind: "write", status: 201, body: RegisterBody, bodyHints: FactHints, tools: ["model_register"],
    summary: "Register a model: file facts as top-level fields; facts missing from the body are read from a local GGUF's header",
    handle: async ({ body, box, caller }) => {
      const { id, ...facts } = body as { id: string } & Record<string, unknown>;
      refuseLegacyKeys(facts, id);
      const model = await box.model();
      if (model.models[id]) throw new ApiError("model.already_exists", `model ${id} is already in models.toml; edit it with PUT /api/models/${id}`, { model_id: id });
      const fromHeader = await headerFacts(model, facts.path, caller);
      const entry = { ...fromHeader, ...present(facts) };
      return {
        changes: { edits: [modelTableEdit(id, entry)], summary: `register model ${id}` },
        reply: (o) => ({ model: { id, ...entry }, filled_from_header: Object.keys(fromHeader).filter((k) => !(k in facts)), ...written(o) }),
      };
    },
  }),
  defineRoute({
    method: "PUT", path: "/api/models/{model_id}", kind: "write", params: ModelIdParams, body: Facts, bodyHints: EditHints, tools: ["model_edit"],
    summary: "Edit a model's file facts (top-level fields; null removes one, e.g. draft: null unpairs the drafter)",
    handle: async ({ params, body, box }) => {
      const id = params.model_id;
      refuseLegacyKeys(body, id);
      findModel(await box.model(), id);
      const { id: named, ...facts } = body;
      if (named !== undefined && named !== id) throw new ApiError("validation.invalid", "a model's id is its table name and cannot be edited", { fields: [{ loc: ["body", "id"], msg: "cannot rename a model", type: "custom" }] });
      if (Object.keys(facts).length === 0) throw new ApiError("validation.invalid", "the body names no file fact to change", { fields: [{ loc: ["body"], msg: "no fields", type: "custom" }] });
      const { edits, changed } = editModelEdits(id, facts);
      return { changes: { edits, summary: `edit model ${id}: ${changed.join(", ")}` }, reply: (o) => ({ id, changed, ...written(o) }) };
    },
  }),
  defineRoute({
    method: "DELETE", path: "/api/models/{model_id}", kind: "write", params: ModelIdParams, tools: ["model_delete"],
    summary: "Remove a model from models.toml (its files stay); refused while a slot or a stack names it",
    handle: async ({ params, box }) => {
      const model = await box.model();
      const id = findModel(model, params.model_id).id;
      const edits = refusing(() => deleteModelEdits(model, id));
      return { changes: { edits, summary: `delete model ${id}` }, reply: (o) => ({ deleted: id, ...written(o) }) };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/models/{model_id}/default", kind: "write", params: ModelIdParams, body: z.strictObject({ default: z.boolean().default(true) }), tools: ["model_set_default"],
    summary: "Make a model its type's default (the `default` tag in models.toml; one per type), or clear it with default: false",
    handle: async ({ params, body, box }) => {
      const model = await box.model();
      const m = findModel(model, params.model_id);
      const { edits, cleared, summary } = defaultModelEdits(model, m, body.default);
      return { changes: { edits, summary }, reply: (o) => ({ id: m.id, type: m.type, default: body.default, cleared, ...written(o) }) };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/models/validate", kind: "read", body: z.looseObject({ id: ResourceId.optional() }), bodyHints: ValidateHints, tools: ["model_validate"],
    summary: "Check a model body against the tree (as if registered, or replacing the model of that id); nothing is written",
    handle: async ({ body, box, caller }) => {
      const { id: given, ...facts } = body as { id?: string } & Record<string, unknown>;
      const model = await box.model();
      const id = given ?? unusedId(model);
      const file = typeof facts.path === "string" ? await fileReport(model, facts.path, caller) : undefined;
      const base = { id, exists: model.models[id] !== undefined, ...(file ? { file } : {}) };
      try {
        const proposal = await box.propose({ edits: [modelTableEdit(id, present(facts))] });
        return { valid: true, ...base, diagnostics: proposal.warnings };
      } catch (err) {
        if (!(err instanceof ApiError) || err.code !== "config.invalid") throw err;
        return { valid: false, ...base, diagnostics: err.details.diagnostics ?? [] };
      }
    },
  }),
  defineRoute({
    method: "POST", path: "/api/models/scan", kind: "write", body: ScanBody, tools: ["model_scan"],
    summary: "Register every new model found under [models] roots (one change set); prune removes unused entries whose file under a root is gone",
    handle: async ({ body, box }) => {
      const model = await box.model();
      const report = await scanModels(model);
      const { edits, pruned: prune, kept, summary } = scanEdits(model, report, body.prune);
      return {
        changes: { edits, summary },
        reply: (o) => ({ registered: report.new.map((n) => ({ id: n.id, path: n.path, entry: n.entry })), pruned: prune.map((m) => m.id), kept_in_use: kept, known: report.known.length, skipped: report.skipped, roots: report.roots, ...written(o) }),
      };
    },
  }),
];

/**
 * The file a model body names, for `caller` to read its header: any path for an operator; for anyone else only one
 * model_inspect would open (under `[models] roots`, or a file a model entry names), else undefined and nothing is read
 * (no header, no size, not even whether it is there: an agent learns nothing of a file outside the roots).
 */
async function readableFor(model: Model, path: string, caller: Caller): Promise<string | undefined> {
  try {
    return await inspectable(model, path, caller);
  } catch (err) {
    if (err instanceof ApiError && err.code === "model.path_missing") return absolutePath(model.root, path);
    if (err instanceof ApiError && err.code === "model.path_outside_roots") return undefined;
    throw err;
  }
}

/** What model_validate says of the file a body names: its header's facts or why there are none; outside the roots, for an agent, only that. */
async function fileReport(model: Model, path: string, caller: Caller): Promise<Record<string, unknown>> {
  const abs = absolutePath(model.root, path);
  const readable = await readableFor(model, path, caller);
  if (readable === undefined) {
    return { path_abs: abs, gguf_error: { code: "model.path_outside_roots", message: `${path} is not under any of [models] roots (${model.settings.models.roots.join(", ") || "none set"}); its header is read only for an operator`, reason: "outside_roots" } };
  }
  return { path_abs: abs, ...(await headerReport(readable)) };
}

/** For a register body with a local GGUF path: the entry its header gives (the body's own fields win). Nothing when there is no readable header, or none `caller` may read. */
async function headerFacts(model: Model, path: unknown, caller: Caller): Promise<Record<string, unknown>> {
  if (typeof path !== "string" || !path.toLowerCase().endsWith(".gguf")) return {};
  const abs = await readableFor(model, path, caller);
  if (abs === undefined) return {};
  const facts = await headerOf(abs).catch(() => undefined);
  if (!facts) return {};
  const { path: _written, ...entry } = entryFor(model.root, abs, facts);
  return entry;
}

function unusedId(model: Model): string {
  let id = "candidate";
  for (let i = 2; model.models[id]; i++) id = `candidate-${i}`;
  return id;
}
