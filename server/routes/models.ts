import { basename } from "node:path";
import { z } from "zod";
import { usage } from "../../compiler/edits/models.js";
import { draftCandidates, entryFor, proposeModelId, scanModels } from "../../reconciler/host/model-scan.js";
import { DEVICES, ResourceId, SLOT_TYPES } from "../../schema/index.js";
import type { Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import { inspectHubRepo } from "../pulls/inspect.js";
import { repoNotFound } from "../pulls/service.js";
import { defineRoute } from "../route.js";
import { HubRepo, HubRevision } from "./models-pull.js";
import { absolutePath, findModel, headerOf, headerReport, inspectable, modelRow, ROW_FIELDS, type ModelRow } from "./models-common.js";
import { modelWriteRoutes } from "./models-write.js";
import { queryInt } from "../query.js";

/** A list parameter: a comma-separated string, or the key repeated (`?capability=chat&capability=tools`). */
const list = <T extends string>(item: z.ZodType<T, string>) =>
  z.union([z.string(), z.array(z.string())])
    .transform((v) => (Array.isArray(v) ? v : [v]).flatMap((s) => s.split(",")).map((s) => s.trim()).filter((s) => s !== ""))
    .pipe(z.array(item));

const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");

const ListQuery = z.strictObject({
  installed: bool.optional(),
  type: list(z.enum(SLOT_TYPES)).optional(),
  capability: list(z.string().min(1)).optional(),
  device: list(z.enum(DEVICES)).optional(),
  q: z.string().max(200).optional(),
  fields: list(z.enum(ROW_FIELDS)).optional(),
  limit: queryInt(1, 500).optional(),
  offset: queryInt(0, Number.MAX_SAFE_INTEGER, 0),
});
type ListQuery = z.infer<typeof ListQuery>;

export const ModelIdParams = z.strictObject({ model_id: ResourceId });
/** A local file (`path`), or a Hub repository (`hf_repo` [+ `revision`], or an `hf_url` under HF_ENDPOINT). */
const InspectBody = z.union([
  z.strictObject({ path: z.string().min(1).max(4096) }),
  z.strictObject({ hf_repo: HubRepo, revision: HubRevision.optional() }),
  z.strictObject({ hf_url: z.string().url().max(4096) }),
]);

/**
 * Models: the `[model.<id>]` entries of models.toml as rows, filtered and
 * paged; one model with its users and its file's GGUF header; a local
 * file's header; and what a scan of `[models] roots` would register.
 */
export const modelRoutes = [
  defineRoute({
    method: "GET", path: "/api/models", kind: "read", query: ListQuery, tools: ["model_list"], listKey: "models",
    summary: "Models, filtered by installed, type, capability (all of), device (any of), q; fields projects the rows; total counts matches before paging",
    handle: async ({ query, box }) => {
      const model = await box.model();
      const rows = await Promise.all(Object.values(model.models).map(modelRow));
      const matches = rows.filter((r) => matchesQuery(r, query));
      const page = matches.slice(query.offset, query.limit === undefined ? undefined : query.offset + query.limit);
      return { models: query.fields ? page.map((r) => project(r, query.fields!)) : page, total: matches.length };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/models/{model_id}", kind: "read", params: ModelIdParams, tools: ["model_show"],
    summary: "One model: its file facts, whether its file is here, the slots and stacks that use it, its GGUF header",
    handle: async ({ params, box }) => {
      const model = await box.model();
      const m = findModel(model, params.model_id);
      const row = await modelRow(m);
      const header = row.installed && m.path_abs!.toLowerCase().endsWith(".gguf") ? await headerReport(m.path_abs!) : {};
      return { ...row, path_abs: m.path_abs ?? null, used_by: usage(model, m.id), ...header };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/models/inspect", kind: "read", body: InspectBody, tools: ["model_inspect"],
    summary: "A local file's GGUF header facts, the model entry a register would write, and drafter candidates beside it; or a Hub repository's GGUF files (hf_repo, hf_url): size, quant, split groups, drafts, projectors",
    handle: async ({ body, box, services, caller }) => {
      if (!("path" in body)) return inspectHub(services, body);
      const model = await box.model();
      const path = await inspectable(model, body.path, caller);
      const facts = await headerOf(path);
      const registered = Object.values(model.models).find((m) => m.path_abs === path)?.id ?? null;
      const proposed = { id: registered ?? proposeModelId(basename(path), new Set(Object.keys(model.models))), entry: entryFor(model.root, path, facts) };
      return { path, ...facts, registered_as: registered, proposed, drafts: await draftCandidates(path, facts) };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/models/scan/preview", kind: "read", body: z.strictObject({ prune: z.boolean().default(false) }), tools: ["model_scan_preview"],
    summary: "What a scan of [models] roots would register (and, with prune, remove); nothing is written",
    handle: async ({ body, box }) => {
      const report = await scanModels(await box.model());
      return { ...report, would_register: report.new.map((n) => n.id), would_prune: body.prune ? report.missing.map((m) => m.id) : [] };
    },
  }),
  ...modelWriteRoutes,
];

function matchesQuery(r: ModelRow, q: ListQuery): boolean {
  if (q.installed !== undefined && r.installed !== q.installed) return false;
  if (q.type && q.type.length > 0 && !q.type.includes(r.type as never)) return false;
  const caps = r.capabilities as string[];
  if (q.capability && !q.capability.every((c) => caps.includes(c))) return false;
  const devices = r.devices as string[];
  // A model that lists no devices runs on any.
  if (q.device && q.device.length > 0 && devices.length > 0 && !q.device.some((d) => devices.includes(d))) return false;
  if (q.q !== undefined && q.q !== "") {
    const needle = q.q.toLowerCase();
    if (![r.id, r.name, r.hf_repo].some((v) => typeof v === "string" && v.toLowerCase().includes(needle))) return false;
  }
  return true;
}

function project(r: ModelRow, fields: readonly string[]): Record<string, unknown> {
  const keep = new Set(["id", ...fields]);
  return Object.fromEntries(Object.entries(r).filter(([k]) => keep.has(k)));
}

/** `model_inspect` of a Hub repository: its listing, read through the Hub client (HF_ENDPOINT, HF_TOKEN). */
async function inspectHub(services: Dispatcher, body: { hf_repo: string; revision?: string } | { hf_url: string }) {
  if (services.pulls === undefined) throw new ApiError("system.internal", "the Hub is not reachable from here");
  const hub = services.pulls.hub();
  const target = "hf_url" in body ? hubTarget(hub, body.hf_url) : { repo: body.hf_repo, revision: body.revision ?? "main", file: null };
  const inspected = await inspectHubRepo(hub, target.repo, target.revision).catch((err: Error & { code?: string }) => {
    if (err.code === "model.not_found") throw repoNotFound(hub, target.repo, target.revision);
    if (err.code === "validation.invalid") throw new ApiError("validation.invalid", err.message, { fields: [{ loc: ["body"], msg: err.message, type: "value_error" }] });
    if (err.code === "hub.denied") throw new ApiError("model.hub_denied", err.message, { endpoint: hub.endpoint, hf_repo: target.repo });
    throw new ApiError("model.hub_unreachable", err.message, { endpoint: hub.endpoint });
  });
  return target.file === null ? inspected : { ...inspected, file: inspected.files.find((f) => f.file === target.file) ?? null };
}

function hubTarget(hub: ReturnType<NonNullable<Dispatcher["pulls"]>["hub"]>, url: string) {
  try {
    return hub.parseHfUrl(url);
  } catch (err) {
    throw new ApiError("validation.invalid", (err as Error).message, { fields: [{ loc: ["body", "hf_url"], msg: "not a URL under HF_ENDPOINT", type: "value_error" }] });
  }
}
