import { parseDocument } from "@decimalturn/toml-patch";
import { parse as parseToml } from "smol-toml";
import type { FileEdit } from "../changeset.js";
import { EditRefusal } from "./refusal.js";

/**
 * Upstream changes as edits of upstreams.toml's `[[upstream]]` rows: every
 * write `put`s the whole document from its raw rows, so kept keys keep their
 * comments and nothing else is rewritten; removing a row that is not the
 * last cuts its block from the text. Pure: from the file's raw document
 * (`doc`, its `rows`, its `text`) and what a caller sent.
 */

export const UPSTREAMS_FILE = "upstreams.toml";
const FILE = UPSTREAMS_FILE;

type Row = Record<string, unknown>;

export interface UpstreamEdits {
  readonly edits: FileEdit[];
  readonly summary: string;
  /** What the reply shows: the row written (or `{name, deleted}`). */
  readonly upstream: Row;
}

/** The `[[upstream]]` rows of a raw document. */
export function upstreamRows(doc: Row): Row[] {
  return Array.isArray(doc.upstream) ? (doc.upstream as Row[]) : [];
}

/** Appends `row` (its `name` first); `upstream.exists` when the name is taken. */
export function createUpstreamEdits(doc: Row, rows: readonly Row[], body: Row): UpstreamEdits {
  if (rows.some((r) => r.name === body.name)) throw upstreamExists(body.name as string, rows);
  const { name, ...rest } = body;
  const row = { name, ...rest };
  return putEdits(doc, [...rows, row], `create upstream ${row.name}`, row);
}

/** Merges `patch` into upstream `name` (RFC 7386; `name` renames, `upstream.exists` when taken). */
export function updateUpstreamEdits(doc: Row, rows: readonly Row[], name: string, patch: Row): UpstreamEdits {
  const index = indexOf(rows, name);
  const renamed = patch.name !== undefined && patch.name !== name;
  if (renamed && rows.some((r) => r.name === patch.name)) throw upstreamExists(patch.name as string, rows);
  const row = mergePatch(rows[index]!, patch);
  return putEdits(doc, rows.map((r, i) => (i === index ? row : r)), `update upstream ${name}`, row);
}

/** Removes upstream `name`: the row's block cut from `text` when it is not the last and the cut parses to the kept rows, else the document put without it. */
export function deleteUpstreamEdits(doc: Row, rows: readonly Row[], text: string | undefined, name: string): UpstreamEdits {
  const index = indexOf(rows, name);
  const kept = rows.filter((_, i) => i !== index);
  const put = putEdits(doc, kept, `delete upstream ${name}`, { name, deleted: true });
  const cut = index < rows.length - 1 ? cutRow(text!, index, kept) : undefined;
  return cut === undefined ? put : { ...put, edits: [{ file: FILE, op: "text", text: cut }] };
}

export function upstreamNotFound(name: string, known: readonly string[]): EditRefusal {
  return new EditRefusal("upstream.not_found", `no upstream named ${name}`, { name, known: [...known].sort() });
}

function upstreamExists(name: string, rows: readonly Row[]): EditRefusal {
  return new EditRefusal("upstream.exists", `an upstream named ${name} already exists`, { name, known: rows.map((r) => String(r.name)).sort() });
}

function indexOf(rows: readonly Row[], name: string): number {
  const index = rows.findIndex((r) => r.name === name);
  if (index < 0) throw upstreamNotFound(name, rows.map((r) => String(r.name)));
  return index;
}

function putEdits(doc: Row, rows: Row[], summary: string, upstream: Row): UpstreamEdits {
  const next: Row = { ...doc, upstream: rows };
  if (rows.length === 0) delete next.upstream;
  return { edits: [{ file: FILE, op: "put", doc: next }], summary, upstream };
}

/**
 * Removing a row that is not the last: toml-patch diffs arrays by position, so
 * a later row would lose its comments to the removed one. This cuts the row's
 * block (header, keys, the comment directly above it) from the text, and is
 * used only when the result parses to exactly the kept rows.
 */
function cutRow(text: string, index: number, kept: readonly Row[]): string | undefined {
  const blocks = (parseDocument(text).cst as unknown as CstBlock[]).filter((n) => n.type === "TableArray" && n.key?.item.value.join(".") === "upstream");
  const block = blocks[index];
  if (!block) return undefined;
  const lines = text.split("\n");
  const keys = (block.items ?? []).filter((i) => i.type === "KeyValue");
  const end = keys.length > 0 ? Math.max(...keys.map((k) => k.loc.end.line)) : block.loc.start.line;
  let start = block.loc.start.line;
  while (start > 2 && lines[start - 2]!.trimStart().startsWith("#")) start--;
  if (start === 2 && lines[0]!.trimStart().startsWith("#")) start = block.loc.start.line; // the file's opening comment stays
  const out = [...lines.slice(0, start - 1), ...lines.slice(end)].join("\n").replace(/\n{3,}/g, "\n\n");
  try {
    const rows = (parseToml(out) as Row).upstream;
    return JSON.stringify(rows ?? []) === JSON.stringify(kept) ? out : undefined;
  } catch {
    return undefined;
  }
}

interface CstBlock {
  readonly type: string;
  readonly key?: { item: { value: string[] } };
  readonly loc: { start: { line: number }; end: { line: number } };
  readonly items?: ReadonlyArray<{ type: string; loc: { end: { line: number } } }>;
}

/** RFC 7386: objects merge key by key, null removes, anything else replaces. */
function mergePatch(target: Row, patch: Row): Row {
  const out: Row = { ...target };
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    if (value === null) delete out[key];
    else if (isTable(value) && isTable(out[key])) out[key] = mergePatch(out[key] as Row, value);
    else out[key] = value;
  }
  return out;
}

function isTable(value: unknown): value is Row {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
