import { stringify as stringifyToml } from "@decimalturn/toml-patch";
import { parse as parseToml } from "smol-toml";
import type { FileEdit } from "../changeset.js";

/** Capability changes as edits of capabilities.toml (a slot's child selection). Pure. */

export const CAPABILITIES_FILE = "capabilities.toml";
const FILE = CAPABILITIES_FILE;

/**
 * An existing selection is edited key by key (`set`: its comments stay). A new
 * one is appended as its own `[selection.<slot>.<child>]` table: toml-patch
 * would add it as a dotted key among the root keys.
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
  return [{ file: FILE, op: "text", text: `${head}[selection.${slot}.${child}]\n${stringifyToml(keys)}`.replace(/\n*$/, "\n") }];
}
