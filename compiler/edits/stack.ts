import type { z } from "zod";
import { Stack, type StackSlot } from "../../schema/index.js";
import { applyChangeSet, type ChangeSet, type FileEdit } from "../changeset.js";
import type { Model } from "../model.js";
import type { SourceTree } from "../sources.js";
import { appendTables, docEdit, stripUndefined, tomlText } from "./toml.js";

type Entry = z.infer<typeof StackSlot>;

/**
 * Stack changes as file edits (`stacks/<slug>.toml` and the slot files an
 * apply projects onto): pure, from the compiled tree and what a caller sent.
 * The route reads the tree and the request; what the change is, is here.
 */

/** The file of stack `slug`. */
export const stackFile = (slug: string): string => `stacks/${slug}.toml`;

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
  /** Enabled pinned slots that stay up, with why: outside a replace stack, or named with `enabled = false`. */
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
    if (slot) projectEntry(slug, entry, slot, out);
    else createSlot(entry, model, ports, options.createEnabled ?? true, out);
  }
  if (stack.mode === "replace") disableOthers(slug, stack, model, out);
  if (out.summary.length === 0) out.summary.push(`stack ${slug}: every slot already matches, nothing to change`);
  return out;
}

/** A stack apply as a ChangeSet: the projection's edits, marked as applying stack `slug` (the pointer's observer reads the mark). */
export function applyStackChanges(slug: string, projection: Pick<StackProjection, "edits">): ChangeSet {
  return { edits: projection.edits, summary: `apply stack ${slug}`, stack: { slug } };
}

/**
 * Whether `tree` (compiled as `model`) holds exactly what applying stack
 * `slug` would write: its projection, made again from this tree, changes no
 * file. False when the tree has no such stack.
 */
export function holdsStack(slug: string, model: Model, tree: SourceTree): boolean {
  const stack = model.stacks[slug];
  if (!stack) return false;
  try {
    return applyChangeSet(tree, { edits: projectStack(slug, stack, model).edits }).files.length === 0;
  } catch {
    return false;
  }
}

function projectEntry(slug: string, entry: Entry, slot: Model["slots"][string], out: StackProjection): void {
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
  // As in replace mode: a pinned slot is never disabled by a stack (its unload needs force, which a stack has not).
  const keep = !enabled && slot.enabled && slot.pinned;
  if (keep) {
    out.kept.push({ slot: slot.name, reason: `pinned: stack ${slug} says enabled = false, but a pinned slot is never disabled by a stack` });
    out.summary.push(`${slot.name}: kept (pinned)`);
  } else if (slot.enabled !== enabled) set(["enabled"], enabled);
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

/** A new stack file (create, snapshot): the document written afresh. */
export function newStackEdit(slug: string, doc: Record<string, unknown>): FileEdit {
  return { file: stackFile(slug), op: "text", text: tomlText(doc) };
}

/** Deleting a stack's file (slots keep theirs). */
export function deleteStackEdit(slug: string): FileEdit {
  return { file: stackFile(slug), op: "delete" };
}

/** An update: the given fields replace the file's (`raw`, as written; `slot` replaces the whole list); comments of kept keys survive. */
export function updateStackEdit(slug: string, text: string, raw: Record<string, unknown>, patch: Record<string, unknown>): FileEdit {
  return docEdit(stackFile(slug), text, { ...raw, ...stripUndefined(patch) });
}

/** A stack from the live slots: every enabled slot with its model, profile and tune. */
export function snapshotStack(model: Model, options: { slug: string; name?: string; description?: string; mode: "replace" | "merge" }, now: string): Record<string, unknown> {
  const slot = Object.values(model.slots).filter((s) => s.enabled).map((s) => stripUndefined({ slot: s.name, model: s.model, profile: s.profile, tune: Object.keys(stripUndefined(s.tune)).length > 0 ? stripUndefined(s.tune) : undefined }));
  return { name: options.name ?? options.slug, description: options.description ?? `Snapshot of the enabled slots at ${now}`, mode: options.mode, slot };
}

/**
 * An import of an opened envelope as stack `slug`: the stack file, the
 * profiles it carries whose name is free appended to profiles.toml (the
 * others skipped), and the slot files it names that the tree lacks created
 * disabled.
 */
export function importStackEdits(slug: string, envelope: { stack: Record<string, unknown>; profiles: Record<string, Record<string, unknown>> }, model: Model, profilesText: string): { edits: FileEdit[]; added: string[]; skipped: string[]; creates: StackProjection["creates"] } {
  const added = Object.keys(envelope.profiles).filter((n) => !model.profiles[n]).sort();
  const skipped = Object.keys(envelope.profiles).filter((n) => model.profiles[n]).sort();
  const edits: FileEdit[] = [{ file: stackFile(slug), op: "text", text: tomlText(envelope.stack) }];
  if (added.length > 0) edits.push({ file: "profiles.toml", op: "text", text: appendTables(profilesText, { profile: Object.fromEntries(added.map((n) => [n, envelope.profiles[n]])) }) });
  const stack = Stack.parse(envelope.stack);
  const missing = projectStack(slug, { ...stack, mode: "merge", slot: stack.slot.filter((e) => !model.slots[e.slot]) }, model, { createEnabled: false });
  edits.push(...missing.edits);
  return { edits, added, skipped, creates: missing.creates };
}
