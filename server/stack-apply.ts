import type { FileEdit } from "../compiler/changeset.js";
import type { Model } from "../compiler/index.js";
import type { Stack, StackSlot } from "../schema/index.js";
import type { z } from "zod";

type Entry = z.infer<typeof StackSlot>;

export interface SlotChange {
  readonly slot: string;
  readonly before_model: string | null;
  readonly after_model: string | null;
  /** True when the apply edits this slot's file (model, profile, tune or enabled). */
  readonly changed: boolean;
  /** The keys it edits, dotted (`model`, `tune.ctx_size`, `enabled`). */
  readonly keys: readonly string[];
}

export interface StackProjection {
  readonly edits: FileEdit[];
  readonly summary: string[];
  readonly changes: SlotChange[];
  readonly creates: Array<{ slot: string; file: string; profile: string; model: string | null; port: number; enabled: boolean }>;
  /** Every enabled slot the apply disables, with why. */
  readonly disables: Array<{ slot: string; reason: string }>;
  /** Enabled slots outside a replace stack that stay up, with why (pinned). */
  readonly kept: Array<{ slot: string; reason: string }>;
}

/** The profile a created slot gets when the entry names none: the slot's default device is gpu-vulkan. */
const DEFAULT_PROFILE = "vulkan";

/**
 * One stack apply as file edits: each entry projected onto its slot file
 * (model, profile, each tune key, enabled — an entry enables its slot unless
 * it says `enabled = false`); a slot file the stack names but the tree lacks
 * is created; for `replace`, every other enabled slot is disabled unless
 * pinned. Pure: reads the compiled tree only.
 */
export function projectStack(slug: string, stack: Stack, model: Model, options: { createEnabled?: boolean } = {}): StackProjection {
  const out: StackProjection = { edits: [], summary: [], changes: [], creates: [], disables: [], kept: [] };
  const ports = usedPorts(model);
  for (const entry of stack.slot) {
    const slot = model.slots[entry.slot];
    if (slot) projectEntry(entry, slot, out);
    else createSlot(entry, model, ports, options.createEnabled ?? true, out);
  }
  if (stack.mode === "replace") disableOthers(slug, stack, model, out);
  if (out.summary.length === 0) out.summary.push(`stack ${slug}: every slot already matches, nothing to change`);
  return out;
}

function projectEntry(entry: Entry, slot: Model["slots"][string], out: StackProjection): void {
  const file = slot.file;
  const keys: string[] = [];
  const set = (path: string[], value: unknown): void => {
    out.edits.push({ file, op: "set", path, value });
    keys.push(path.join("."));
  };
  if (entry.model !== undefined && entry.model !== slot.model) set(["model"], entry.model);
  if (entry.profile !== undefined && entry.profile !== slot.profile) set(["profile"], entry.profile);
  for (const [key, value] of Object.entries(entry.tune ?? {})) {
    if (value !== undefined && (slot.tune as Record<string, unknown>)[key] !== value) set(["tune", key], value);
  }
  const enabled = entry.enabled ?? true;
  if (slot.enabled !== enabled) set(["enabled"], enabled);
  const after = entry.model ?? slot.model ?? null;
  out.changes.push({ slot: slot.name, before_model: slot.model ?? null, after_model: after, changed: keys.length > 0, keys });
  if (keys.length === 0) return;
  const modelPart = after !== (slot.model ?? null) ? `model ${slot.model ?? "none"} → ${after}` : undefined;
  const rest = keys.filter((k) => k !== "model");
  out.summary.push(`${slot.name}: ${[modelPart, rest.length > 0 ? `sets ${rest.join(", ")}` : undefined].filter(Boolean).join("; ")}`);
}

function createSlot(entry: Entry, model: Model, ports: Set<number>, enabledDefault: boolean, out: StackProjection): void {
  const file = `slots/${entry.slot}.toml`;
  const port = freePort(model, ports);
  const profile = entry.profile ?? DEFAULT_PROFILE;
  const enabled = entry.enabled ?? enabledDefault;
  const type = entry.model ? (model.models[entry.model]?.type ?? "llm") : "llm";
  const doc: Record<string, unknown> = { profile, ...(entry.model ? { model: entry.model } : {}), port, type, enabled };
  if (entry.tune && Object.keys(entry.tune).length > 0) doc.tune = entry.tune;
  out.edits.push({ file, op: "put", doc });
  out.creates.push({ slot: entry.slot, file, profile, model: entry.model ?? null, port, enabled });
  out.changes.push({ slot: entry.slot, before_model: null, after_model: entry.model ?? null, changed: true, keys: Object.keys(doc) });
  out.summary.push(`${entry.slot}: created (${file}, profile ${profile}, port ${port}${entry.model ? `, model ${entry.model}` : ""}${enabled ? "" : ", disabled"})`);
}

function disableOthers(slug: string, stack: Stack, model: Model, out: StackProjection): void {
  const named = new Set(stack.slot.map((e) => e.slot));
  for (const slot of Object.values(model.slots)) {
    if (named.has(slot.name) || !slot.enabled) continue;
    if (slot.pinned) {
      out.kept.push({ slot: slot.name, reason: `pinned: not in stack ${slug} (mode replace), but a pinned slot is never disabled by a stack` });
      out.summary.push(`${slot.name}: kept (pinned)`);
      continue;
    }
    const reason = `not in stack ${slug} (mode replace)`;
    out.edits.push({ file: slot.file, op: "set", path: ["enabled"], value: false });
    out.disables.push({ slot: slot.name, reason });
    out.summary.push(`${slot.name}: disabled (${reason})`);
  }
}

function usedPorts(model: Model): Set<number> {
  return new Set([model.settings.server.port, ...Object.values(model.slots).map((s) => s.port)]);
}

/** The lowest port of `[slots]` port range that no slot and not hal0 itself uses; taken once found. */
function freePort(model: Model, used: Set<number>): number {
  const { port_range_start: start, port_range_end: end } = model.settings.slots;
  for (let p = start; p <= end; p++) {
    if (!used.has(p)) {
      used.add(p);
      return p;
    }
  }
  return end + 1; // the compiler refuses it (slot.port_out_of_range) with a diagnostic naming the file
}
