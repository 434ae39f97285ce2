import { treeFileText } from "../box.js";
import { z } from "zod";
import { CAPABILITIES_FILE as FILE, selectionEdits } from "../../compiler/edits/capabilities.js";
import type { CompiledCapabilities } from "../../compiler/model.js";
import { ChildName, DEVICES, ResourceId, SlotName } from "../../schema/index.js";
import { ApiError } from "../errors.js";
import { defineRoute } from "../route.js";

const SECTIONS = ["backends", "catalogs", "selections"] as const;
type Section = (typeof SECTIONS)[number];

const ListQuery = z.strictObject({
  /** Checked by the handler, so an unknown one is 400 capability.unknown_section (not a shape error). */
  section: z.string().optional(),
  summary: z.enum(["true", "false", "1", "0"]).optional().transform((v) => v === "true" || v === "1"),
});
const SlotChild = z.strictObject({ slot: SlotName, child: ChildName });
/** One selection row; null on `backend` or `device` removes that key. */
const SetBody = z.strictObject({
  model: ResourceId,
  enabled: z.boolean().optional(),
  backend: ResourceId.nullable().optional(),
  device: z.enum(DEVICES).nullable().optional(),
});

/**
 * Capabilities: capabilities.toml's backends, catalogs and per-slot child
 * selections. A selection is written key by key under
 * `[selection.<slot>.<child>]`; the compiler's rules (slot, child, model,
 * backend) refuse a bad row with 422 config.invalid and its diagnostics.
 */
export const capabilityRoutes = [
  defineRoute({
    method: "GET", path: "/api/capabilities", kind: "read", query: ListQuery, tools: ["capability_list"],
    summary: "Backends, catalogs and selections of capabilities.toml; ?section= one of them, ?summary=true counts only",
    handle: async ({ query, box }) => {
      const caps = (await box.model()).capabilities;
      const sections = pickSections(query.section);
      const all = { backends: caps.backends, catalogs: caps.catalogs, selections: selectionRows(caps) };
      const out: Record<string, unknown> = {};
      for (const s of sections) out[s] = query.summary ? count(s, all[s]) : all[s];
      return query.summary ? { summary: out } : out;
    },
  }),
  defineRoute({
    method: "POST", path: "/api/capabilities/{slot}/{child}", kind: "write", params: SlotChild, body: SetBody, tools: ["capability_set"],
    summary: "Set the model (and optionally backend, device, enabled) a slot's child capability uses",
    handle: async ({ params, body, box }) => {
      const text = treeFileText(await box.snapshot(), FILE);
      const given = Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
      const row = { slot: params.slot, child: params.child, ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== null)) };
      return {
        changes: { edits: selectionEdits(text, params.slot, params.child, given), summary: `capability ${params.slot}.${params.child} → ${body.model}` },
        reply: (o) => ({ selection: row, revision: o.revision, files: o.files, committed: o.committed, plan: o.plan, warnings: o.warnings }),
      };
    },
  }),
];

function pickSections(section: string | undefined): readonly Section[] {
  if (section === undefined) return SECTIONS;
  if (!(SECTIONS as readonly string[]).includes(section)) {
    throw new ApiError("capability.unknown_section", `unknown section ${JSON.stringify(section)}; use one of ${SECTIONS.join(", ")}`, { section, known: [...SECTIONS] });
  }
  return [section as Section];
}

/** Selections as rows, slot then child in sorted order. */
function selectionRows(caps: CompiledCapabilities): Array<Record<string, unknown>> {
  return Object.entries(caps.selections).flatMap(([slot, children]) =>
    Object.entries(children).map(([child, s]) => ({ slot, child, model: s.model, backend: s.backend ?? null, device: s.device ?? null, enabled: s.enabled })));
}

function count(section: Section, rows: ReadonlyArray<{ enabled?: unknown }>): Record<string, number> {
  const enabled = rows.filter((r) => r.enabled !== false).length;
  return section === "selections" ? { total: rows.length, enabled, slots: new Set(rows.map((r) => (r as { slot: string }).slot)).size } : { total: rows.length, enabled };
}
