import type { FileEdit } from "../changeset.js";
import type { CompiledModelFacts, Model } from "../model.js";
import { EditRefusal } from "./refusal.js";

/**
 * Model changes as edits of models.toml: `set` edits only, so a person's
 * comments and layout survive. Pure: from the compiled tree and the facts a
 * caller sent or a header gave.
 */

export const MODELS_FILE = "models.toml";
const FILE = MODELS_FILE;

/** The tag that marks a type's default model (hal0.toml has no default-model key; models.toml `tags` carries it). */
export const DEFAULT_TAG = "default";

/** The slots, stack entries and capability selections (`<slot>.<child>`) that name model `id`. */
export function usage(model: Model, id: string): { slots: string[]; stacks: string[]; selections: string[] } {
  const slots = Object.values(model.slots).filter((s) => s.model === id).map((s) => s.name);
  const stacks = Object.values(model.stacks).filter((st) => st.slot.some((e) => e.model === id)).map((st) => st.slug);
  const selections = Object.entries(model.capabilities.selections)
    .flatMap(([slot, children]) => Object.entries(children).filter(([, sel]) => sel.model === id).map(([child]) => `${slot}.${child}`));
  return { slots, stacks, selections };
}

export function inUse(u: ReturnType<typeof usage>): boolean {
  return u.slots.length > 0 || u.stacks.length > 0 || u.selections.length > 0;
}

/** A body's fields without the nulls (TOML has no null: an absent key is the absent fact). */
export function presentFacts(facts: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(facts).filter(([, v]) => v !== null && v !== undefined));
}

/** `[model.<id>]` written whole (register, validate). */
export function modelTableEdit(id: string, entry: Record<string, unknown>): FileEdit {
  return { file: FILE, op: "set", path: ["model", id], value: entry };
}

/** One `set` per fact, in sorted key order (null removes the fact). */
export function editModelEdits(id: string, facts: Record<string, unknown>): { edits: FileEdit[]; changed: string[] } {
  const changed = Object.keys(facts).sort();
  return { edits: changed.map((k) => ({ file: FILE, op: "set", path: ["model", id, k], value: facts[k] ?? null })), changed };
}

/** Removing `[model.<id>]` (its files stay); `model.in_use` while a slot, a stack or a capability selection names it. */
export function deleteModelEdits(model: Model, id: string): FileEdit[] {
  const users = usage(model, id);
  if (inUse(users)) {
    const named = [...users.slots.map((s) => `slot ${s}`), ...users.stacks.map((s) => `stack ${s}`), ...users.selections.map((s) => `capability selection ${s}`)].join(", ");
    throw new EditRefusal("model.in_use", `model ${id} is in use by ${named}; point them at another model first`, { model_id: id, ...users });
  }
  return [{ file: FILE, op: "set", path: ["model", id], value: null }];
}

/** Making `m` its type's default (one per type: the others of its type lose the tag), or clearing it. */
export function defaultModelEdits(model: Model, m: CompiledModelFacts, makeDefault: boolean): { edits: FileEdit[]; cleared: string[]; summary: string } {
  const edits: FileEdit[] = [];
  const cleared: string[] = [];
  const retag = (id: string, tags: readonly string[]) => edits.push({ file: FILE, op: "set", path: ["model", id, "tags"], value: tags.length > 0 ? tags : null });
  if (makeDefault && !m.tags.includes(DEFAULT_TAG)) retag(m.id, [...m.tags, DEFAULT_TAG]);
  if (!makeDefault && m.tags.includes(DEFAULT_TAG)) retag(m.id, m.tags.filter((t) => t !== DEFAULT_TAG));
  for (const other of Object.values(model.models)) {
    if (!makeDefault || other.id === m.id || other.type !== m.type || !other.tags.includes(DEFAULT_TAG)) continue;
    retag(other.id, other.tags.filter((t) => t !== DEFAULT_TAG));
    cleared.push(other.id);
  }
  const summary = makeDefault ? `default ${m.type} model: ${m.id}` : `${m.id} is no longer the default ${m.type} model`;
  return { edits, cleared, summary };
}

/**
 * A scan's registrations (every new model's entry) and, with `prune`, the
 * removal of registered models whose file under a root is gone and that
 * nothing uses (the used ones are kept and listed with their users).
 */
export function scanEdits<M extends { readonly id: string }>(
  model: Model,
  report: { readonly new: ReadonlyArray<{ readonly id: string; readonly entry: Record<string, unknown> }>; readonly missing: readonly M[] },
  prune: boolean,
): { edits: FileEdit[]; pruned: M[]; kept: Array<M & { used_by: ReturnType<typeof usage> }>; summary: string } {
  const pruned = prune ? report.missing.filter((m) => !inUse(usage(model, m.id))) : [];
  const kept = prune ? report.missing.filter((m) => !pruned.includes(m)).map((m) => ({ ...m, used_by: usage(model, m.id) })) : [];
  const edits: FileEdit[] = [
    ...report.new.map((n): FileEdit => ({ file: FILE, op: "set", path: ["model", n.id], value: n.entry })),
    ...pruned.map((m): FileEdit => ({ file: FILE, op: "set", path: ["model", m.id], value: null })),
  ];
  const summary = `model scan: ${report.new.length} new${prune ? `, ${pruned.length} pruned` : ""}`;
  return { edits, pruned, kept, summary };
}
