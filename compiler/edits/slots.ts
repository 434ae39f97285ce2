import { parse as parseToml } from "@decimalturn/toml-patch";
import { SLOT_LEGACY_ROOT_KEYS } from "../../schema/index.js";
import type { ChangeSet, FileEdit } from "../changeset.js";
import { EditRefusal } from "./refusal.js";

/**
 * Slot changes as ChangeSets of `slots/<name>.toml`: create, a sparse edit,
 * load / unload, swap, rename, delete. Pure: from the request's fields and
 * what the tree holds. The route reads the request and the box (the slot's
 * file, 404 when absent) and replies; what the change is, is here. Rules on
 * the compiled change (a pinned slot is not stopped or deleted without
 * `force`) are the pipeline's (compiler/change-checks.ts), not a builder's.
 */

/** The file of slot `name`. */
export const slotFile = (name: string): string => `slots/${name}.toml`;

/** A slot file's parsed TOML, or nothing when it does not parse (an edit of it is then refused by the pipeline). */
export function slotDoc(text: string): Record<string, unknown> {
  try {
    return parseToml(text) as Record<string, unknown>;
  } catch {
    return {};
  }
}

/** Root-level tuning keys (the old flat shapes): `slot.tuning_key_denied`, refused before anything is planned. */
export function denyRootTuning(fields: Record<string, unknown>): void {
  const keys = Object.keys(fields).filter((k) => (SLOT_LEGACY_ROOT_KEYS as readonly string[]).includes(k));
  if (keys.length === 0) return;
  const key = keys[0]!;
  const target = key === "context_size" ? "ctx_size" : key;
  throw new EditRefusal("slot.tuning_key_denied", `\`${keys.join("`, `")}\` at the slot's root: tuning lives in the slot's \`tune\` table (e.g. {"tune": {"${target}": …}})`, { keys });
}

/** A new slot file from the fields (name aside); `slot.exists` when the tree has one of that name. */
export function createSlotChanges(name: string, fields: Record<string, unknown>, exists: boolean): ChangeSet {
  if (exists) throw new EditRefusal("slot.exists", `slot \`${name}\` already exists (${slotFile(name)})`, { name, file: slotFile(name) });
  denyRootTuning(fields);
  return { edits: [{ file: slotFile(name), op: "put", doc: fields }], summary: `create slot ${name}` };
}

/** The slot file's tables: an edit of one sets its keys one by one (sparse), like `tune`. */
export const SPARSE_TABLES = new Set(["tune", "placement", "server"]);

/**
 * Sparse edit: each field set (null removes it). The tables `tune`,
 * `placement` and `server` are sparse too: each key given is set on its own
 * (null drops that key, e.g. `{"server": {"env": null}}` removes
 * `server.env` and keeps `extra_args`), and `<table>: null` clears the table.
 * A key's value inside a table (`server.env`) is replaced whole.
 */
export function editSlotChanges(name: string, fields: Record<string, unknown>): ChangeSet {
  denyRootTuning(fields);
  const file = slotFile(name);
  const edits: FileEdit[] = [];
  for (const [key, value] of Object.entries(fields)) {
    if (SPARSE_TABLES.has(key) && value !== null && typeof value === "object" && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) edits.push({ file, op: "set", path: [key, k], value: v });
    } else {
      edits.push({ file, op: "set", path: [key], value });
    }
  }
  return { edits, summary: `edit slot ${name}` };
}

/** Load (`enabled = true`) or unload; `force` lets an unload stop a pinned slot. */
export function toggleSlotChanges(name: string, enabled: boolean, force: boolean): ChangeSet {
  return { edits: [{ file: slotFile(name), op: "set", path: ["enabled"], value: enabled }], summary: `${enabled ? "load" : "unload"} slot ${name}`, ...(force ? { force } : {}) };
}

/** Serve another model. */
export function swapSlotChanges(name: string, model: string): ChangeSet {
  return { edits: [{ file: slotFile(name), op: "set", path: ["model"], value: model }], summary: `slot ${name}: serve ${model}` };
}

/** The slot's file moves, text and comments kept (the commit observer moves its stable id). */
export function renameSlotChanges(name: string, to: string): ChangeSet {
  return { edits: [{ file: slotFile(name), op: "rename", to: slotFile(to) }], summary: `rename slot ${name} to ${to}` };
}

/** The slot's file goes; `force` lets a pinned slot go. */
export function deleteSlotChanges(name: string, force: boolean): ChangeSet {
  return { edits: [{ file: slotFile(name), op: "delete" }], summary: `delete slot ${name}`, ...(force ? { force: true } : {}) };
}
