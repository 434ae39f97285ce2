import { patch as patchToml } from "@decimalturn/toml-patch";
import { stringify as stringifyToml } from "smol-toml";
import type { FileEdit } from "../changeset.js";

/**
 * Whole-document edits shared by the builders: a document written afresh,
 * tables appended after a file's bytes, and `put` where toml-patch can keep
 * the file's comments. Pure.
 */

/** A document as the text of a new file (undefined members dropped, a final newline). */
export function tomlText(doc: Record<string, unknown>): string {
  return withNewline(stringifyToml(stripUndefined(doc)));
}

/** New tables appended after the file's text, which stays byte for byte. */
export function appendTables(current: string, tables: Record<string, unknown>): string {
  const head = current.length === 0 || current.endsWith("\n") ? current : `${current}\n`;
  return withNewline(`${head}${head.length > 0 ? "\n" : ""}${stringifyToml(stripUndefined(tables))}`);
}

/** `put` keeps the file's comments; toml-patch cannot add a first array of tables to a file, so that case writes the document afresh. */
export function docEdit(file: string, current: string, doc: Record<string, unknown>): FileEdit {
  try {
    patchToml(current, doc);
    return { file, op: "put", doc };
  } catch {
    return { file, op: "text", text: tomlText(doc) };
  }
}

/** A JSON value without its undefined members (a JSON round trip). */
export function stripUndefined<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function withNewline(text: string): string {
  return text.endsWith("\n") ? text : `${text}\n`;
}
