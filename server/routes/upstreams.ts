import { treeFileText } from "../box.js";
import { parse as parseToml } from "smol-toml";
import { z } from "zod";
import { createUpstreamEdits, deleteUpstreamEdits, updateUpstreamEdits, upstreamNotFound, upstreamRows, UPSTREAMS_FILE as FILE, type UpstreamEdits } from "../../compiler/edits/upstreams.js";
import type { Model } from "../../compiler/index.js";
import { SlotName, Upstream } from "../../schema/index.js";
import type { BoxService } from "../box.js";
import { ApiError, apiErrorOf, refusing } from "../errors.js";
import { probeUpstream, providersOf, slotRunning } from "../providers/probe.js";
import { restoreMasked } from "../redact.js";
import { defineRoute, type WriteIntent } from "../route.js";
import { queryInt } from "../query.js";

type Row = Record<string, unknown>;

/** Upstream's keys with no defaults (what is written is what was sent); `nullable` for a merge patch. */
function sparse(schema: z.ZodType, nullable: boolean): z.ZodType {
  let s = schema as z.ZodType & { _zod: { def: { type: string; innerType?: z.ZodType } } };
  while (["default", "prefault", "optional"].includes(s._zod.def.type)) s = s._zod.def.innerType as typeof s;
  const inner = s._zod.def.type === "object" ? sparseObject((s as unknown as z.ZodObject).shape, nullable) : s;
  return nullable ? inner.nullable().optional() : inner.optional();
}
function sparseObject(shape: Record<string, z.ZodType>, nullable: boolean, keep: readonly string[] = []): z.ZodObject {
  return z.strictObject(Object.fromEntries(Object.entries(shape).filter(([k]) => !keep.includes(k)).map(([k, v]) => [k, sparse(v, nullable)])));
}

const fields = (Upstream as unknown as z.ZodObject).shape as Record<string, z.ZodType>;
const CreateBody = sparseObject(fields, false, ["name"]).extend({ name: SlotName });
/** JSON merge patch: a value replaces, null removes the key, `model_filters` merges key by key; `name` renames. */
const PatchBody = sparseObject(fields, true, ["name"]).extend({ name: SlotName.optional() });
/**
 * upstream_update's arguments: `name` is the upstream's path argument there, so a rename is `new_name`
 * (as slot_rename's seed name), sent on to the route as the patch's `name`.
 */
const ToolPatchBody = sparseObject(fields, true, ["name"]).extend({ new_name: SlotName.optional() })
  .transform(({ new_name, ...patch }) => (new_name === undefined ? patch : { ...patch, name: new_name }));
const Name = z.strictObject({ name: z.string().min(1).max(64) });
const TestQuery = z.strictObject({ timeout_ms: queryInt(50, 30_000).optional() });

/**
 * Upstreams: `[[upstream]]` rows of upstreams.toml. Reads come from the
 * compiled tree (defaults filled); writes `put` the whole document from its
 * raw rows, so kept keys keep their comments and nothing else is rewritten.
 */
export const upstreamRoutes = [
  defineRoute({
    method: "GET", path: "/api/upstreams", kind: "read", tools: ["upstream_list"], listKey: "upstreams",
    summary: "Every upstream of upstreams.toml, with its defaults",
    handle: async ({ box }) => {
      const upstreams = (await box.model()).upstreams;
      return { upstreams, count: upstreams.length };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/upstreams/{name}", kind: "read", params: Name, tools: ["upstream_get"],
    summary: "One upstream, with its defaults",
    handle: async ({ params, box }) => compiled(await box.model(), params.name),
  }),
  defineRoute({
    method: "POST", path: "/api/upstreams", kind: "write", status: 201, body: CreateBody, tools: ["upstream_create"],
    summary: "Append an upstream to upstreams.toml (409 upstream.exists when the name is taken)",
    handle: async ({ body, box }) => {
      const { doc, rows } = await readDoc(box);
      return putIntent(refusing(() => createUpstreamEdits(doc, rows, body as Row)));
    },
  }),
  defineRoute({
    method: "PATCH", path: "/api/upstreams/{name}", kind: "write", params: Name, body: PatchBody, tools: ["upstream_update"],
    toolBodies: { upstream_update: ToolPatchBody },
    summary: "Merge into an upstream: a value replaces a key, null removes it, model_filters merges; name renames",
    handle: async ({ params, body, box }) => {
      const { doc, rows } = await readDoc(box);
      // A `[redacted]` sent back (a GET's masked url `?key=`) keeps the value it stands for.
      const sent = restoreMasked(body as Row, rows.find((r) => r.name === params.name));
      return putIntent(refusing(() => updateUpstreamEdits(doc, rows, params.name, sent)));
    },
  }),
  defineRoute({
    method: "DELETE", path: "/api/upstreams/{name}", kind: "write", params: Name, tools: ["upstream_delete"],
    summary: "Remove an upstream from upstreams.toml",
    handle: async ({ params, box }) => {
      const { doc, rows, text } = await readDoc(box);
      return putIntent(refusing(() => deleteUpstreamEdits(doc, rows, text, params.name)));
    },
  }),
  defineRoute({
    method: "POST", path: "/api/upstreams/{name}/test", kind: "action", params: Name, query: TestQuery, tools: ["upstream_test"],
    summary: "GET <url>/models with the upstream's auth (sent only to its own origin, SSRF-guarded): reachable, status, latency and model count",
    handle: async ({ params, query, box, services }) => {
      const model = await box.model();
      const up = compiled(model, params.name);
      return { name: up.name, kind: up.kind, ...(await probeUpstream(up, model, providersOf(services), query.timeout_ms ?? Math.min(up.timeout_seconds * 1000, 5000), slotRunning(box, model))) };
    },
  }),
];

async function readDoc(box: BoxService): Promise<{ doc: Row; rows: Row[]; text?: string }> {
  const snapshot = await box.snapshot();
  const text = treeFileText(snapshot, FILE);
  if (text === undefined) return { doc: {}, rows: [] };
  let doc: Row;
  try {
    doc = parseToml(text) as Row;
  } catch (err) {
    throw new ApiError("config.invalid", `${FILE} is not valid TOML; fix it before editing upstreams: ${(err as Error).message.split("\n")[0]}`,
      { diagnostics: snapshot.diagnostics.filter((d) => d.file === FILE) });
  }
  return { doc, text, rows: upstreamRows(doc) };
}

function putIntent({ edits, summary, upstream }: UpstreamEdits): WriteIntent {
  return {
    changes: { edits, summary },
    reply: (o) => ({ upstream, revision: o.revision, files: o.files, committed: o.committed, plan: o.plan, warnings: o.warnings }),
  };
}

function compiled(model: Model, name: string): Upstream {
  const up = model.upstreams.find((u) => u.name === name);
  if (!up) throw apiErrorOf(upstreamNotFound(name, model.upstreams.map((u) => u.name)));
  return up;
}
