import { parse as parseDoc, patch as patchToml, stringify as stringifyToml } from "@decimalturn/toml-patch";
import { parse as parseToml } from "smol-toml";
import type { FileEdit } from "../changeset.js";

/** Capability changes as edits of capabilities.toml (a slot's child selection). Pure. */

export const CAPABILITIES_FILE = "capabilities.toml";
const FILE = CAPABILITIES_FILE;

/**
 * An existing selection is edited key by key (`set`: its comments stay). A new
 * one is appended as its own `[selection.<slot>.<child>]` table: toml-patch
 * would add it as a dotted key among the root keys. When the file already
 * writes that slot's selections (or `selection` itself) inline or as dotted
 * keys, TOML forbids a header that reopens it; the new selection then goes
 * where those are written (into the inline table, beside the dotted keys).
 */
export function selectionEdits(text: string | undefined, slot: string, child: string, given: Record<string, unknown>): FileEdit[] {
  const existing = (() => {
    try {
      return text === undefined ? undefined : (parseToml(text) as { selection?: Record<string, Record<string, unknown>> }).selection?.[slot]?.[child];
    } catch {
      return null; // unparseable: the set edits report it
    }
  })();
  if (existing !== undefined) {
    return Object.entries(given).map(([key, value]) => ({ file: FILE, op: "set", path: ["selection", slot, child, key], value }));
  }
  const keys = Object.fromEntries(["model", "backend", "device", "enabled"].filter((k) => given[k] !== undefined && given[k] !== null).map((k) => [k, given[k]]));
  const head = text === undefined || text.trim() === "" ? "" : `${text.replace(/\n*$/, "\n")}\n`;
  const appended = `${head}[selection.${slot}.${child}]\n${stringifyToml(keys)}`.replace(/\n*$/, "\n");
  return [{ file: FILE, op: "text", text: existing === null || parses(appended) ? appended : (insertedInPlace(text!, slot, child, keys) ?? appended) }];
}

function parses(text: string): boolean {
  try {
    parseToml(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * The file with the new selection written into the tables that hold its slot's selections, comments and layout
 * kept; undefined when those are not tables (the appended text is refused then, with the parser's own position).
 */
function insertedInPlace(text: string, slot: string, child: string, keys: Record<string, unknown>): string | undefined {
  const isTable = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  try {
    const doc = parseDoc(text) as Record<string, unknown>;
    const selection = doc.selection ?? (doc.selection = {});
    if (!isTable(selection)) return undefined;
    const children = selection[slot] ?? (selection[slot] = {});
    if (!isTable(children)) return undefined;
    children[child] = keys;
    return patchToml(text, doc);
  } catch {
    return undefined;
  }
}
