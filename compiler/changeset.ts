import { parse as parseToml, parseDocument, patch as patchToml, stringify as stringifyToml } from "@decimalturn/toml-patch";
import { createHash } from "node:crypto";
import { posix } from "node:path";
import { classifyPath, FILE_KINDS } from "../schema/index.js";
import { sourceTree, type SourceTree } from "./sources.js";

/**
 * A ChangeSet: edits to files of the tree, as JSON data (plans and approvals
 * store them). Every write — editor save, REST, MCP, stack apply, an agent's
 * proposal — is one; it is applied to a copy of the tree in memory, compiled
 * and planned before anything is written. Pure: no I/O here.
 *
 * - `set`: one key at `path` (tables created as needed); `null` removes it
 *   (nothing to do when it is absent). Inside a table value, a `null` member
 *   means the key is absent; a list cannot hold `null`.
 * - `put`: the whole document; keys that survive keep their comments and layout.
 * - `text`: the file's new text as is (an editor save, an import).
 * - `delete`: the file goes.
 * - `rename`: the file moves to `to`, its text (comments and all) kept; refused
 *   when `to` exists. Commit observers see the move (a slot keeps its stable id).
 *
 * A file the change set creates (absent before, not the target of a rename)
 * gets the `#:schema` line of its kind as its first line (see ApplyOptions);
 * a file that existed is never given one.
 */
export type FileEdit =
  | { readonly file: string; readonly op: "set"; readonly path: readonly string[]; readonly value: unknown }
  | { readonly file: string; readonly op: "put"; readonly doc: Readonly<Record<string, unknown>> }
  | { readonly file: string; readonly op: "text"; readonly text: string }
  | { readonly file: string; readonly op: "delete" }
  | { readonly file: string; readonly op: "rename"; readonly to: string };

export interface ChangeSet {
  readonly edits: readonly FileEdit[];
  /** What a person reads in a plan or an approval card. */
  readonly summary?: string;
  /** Lets the change stop or delete a pinned slot (the routes' `?force=true`). */
  readonly force?: boolean;
  /**
   * What the change applies, when a builder made it so: `stack` = stack
   * `<slug>`'s projection (compiler/edits/stack.ts `applyStackChanges`). Data
   * only, saved with a plan; the commit observer (server/stack-pointer.ts)
   * moves the stack pointer only when the committed tree holds that projection.
   */
  readonly stack?: { readonly slug: string };
}

/** The tree after a ChangeSet, and per touched file its text before and after (null = absent). */
export interface AppliedChangeSet {
  readonly tree: SourceTree;
  readonly files: ReadonlyArray<{ readonly file: string; readonly before: string | null; readonly after: string | null }>;
}

/**
 * Where a new file's `#:schema` line points. The compiler does not know where
 * hal0's package (and its schema/json/) lives, so the caller says it, or the
 * tree does:
 * - `schemaDir` given: `#:schema <schemaDir>/<kind>.schema.json` (an absolute
 *   folder or a URL, written as given).
 * - absent: the folder the tree's own `#:schema` lines name (a file of the
 *   same kind first, else the first file in path order that has one), written
 *   the way they write it: an absolute path or URL as is, a relative one
 *   re-based on the new file's folder. `hal0 init` writes absolute lines to the
 *   package's schema/json/, so a box it made keeps giving new files working
 *   lines. A tree whose files carry no such line gets none.
 */
export interface ApplyOptions {
  readonly schemaDir?: string;
}

/** An edit that cannot apply (its file does not parse, a set on a missing file's array…): nothing is applied. */
export class ChangeSetError extends Error {
  constructor(
    readonly code: "config.parse_error" | "config.invalid_name" | "config.invalid_value" | "slot.exists",
    readonly file: string,
    message: string,
    /** The key path of the `set` edit that failed, when one did. */
    readonly path: ReadonlyArray<string | number> = [],
  ) {
    super(message);
  }
}

const FILE_RE = /^(?:[a-z0-9][a-z0-9._-]{0,63}\.toml|(?:slots|stacks|mcp-servers|agents)\/[a-z0-9][a-z0-9._-]{0,63}\.toml)$/;

/**
 * Applies `changes` to a copy of `tree`; the input is not touched. Edits of one
 * file apply in order. Never throws anything but a ChangeSetError: whatever
 * toml-patch refuses becomes `config.invalid_value` naming the file.
 *
 * The `set` and `put` edits of one file are made on its parsed document and
 * the text is patched once, when something else reads or replaces the file
 * (a `text`, `delete` or `rename` edit) or at the end: a change set of 500
 * edits to one file parses and patches it once, not 500 times. An edit that
 * cannot apply is found by applying the change set again edit by edit, so its
 * refusal names that edit as before.
 */
export function applyChangeSet(tree: SourceTree, changes: ChangeSet, options: ApplyOptions = {}): AppliedChangeSet {
  try {
    return applyEdits(tree, changes, options, true);
  } catch (err) {
    if (!(err instanceof ChangeSetError)) throw err;
    return applyEdits(tree, changes, options, false);
  }
}

/** A file's `set` and `put` edits not yet written back to its text (see applyChangeSet). */
interface PendingDoc {
  readonly text: string | undefined;
  readonly before: Record<string, unknown>;
  doc: Record<string, unknown>;
  /** Whether the file exists after the edits so far: a `set` of null on an absent file leaves it absent. */
  exists: boolean;
}

function applyEdits(tree: SourceTree, changes: ChangeSet, options: ApplyOptions, coalesce: boolean): AppliedChangeSet {
  const files = new Map(tree.files);
  const before = new Map<string, string | null>();
  const moved = new Set<string>();
  const pending = new Map<string, PendingDoc>();
  const flush = (file: string) => {
    const p = pending.get(file);
    if (p === undefined) return;
    pending.delete(file);
    const next = p.exists ? guarded(file, () => patchParsed(p.text, file, p.before, p.doc), []) : null;
    if (next === null) files.delete(file);
    else files.set(file, next);
  };
  for (const edit of changes.edits) {
    if (!FILE_RE.test(edit.file) || edit.file.includes("..")) throw new ChangeSetError("config.invalid_name", edit.file, `${edit.file} is not a file of the tree`);
    if (!before.has(edit.file)) before.set(edit.file, files.get(edit.file) ?? null);
    if (edit.op === "rename") {
      if (!FILE_RE.test(edit.to) || edit.to.includes("..")) throw new ChangeSetError("config.invalid_name", edit.to, `${edit.to} is not a file of the tree`);
      flush(edit.file);
      flush(edit.to);
      const text = files.get(edit.file);
      if (text === undefined) throw new ChangeSetError("config.invalid_value", edit.file, `${edit.file} does not exist, so it cannot be renamed`);
      if (files.has(edit.to)) throw new ChangeSetError("slot.exists", edit.to, `${edit.to} already exists`);
      if (!before.has(edit.to)) before.set(edit.to, null);
      moved.add(edit.to);
      files.delete(edit.file);
      files.set(edit.to, text);
      continue;
    }
    if (coalesce && (edit.op === "set" || edit.op === "put")) {
      let p = pending.get(edit.file);
      if (p === undefined) {
        const text = files.get(edit.file);
        const doc = parseText(text, edit.file);
        pending.set(edit.file, (p = { text, before: structuredClone(doc), doc, exists: text !== undefined }));
      }
      const target = p;
      if (edit.op === "put") {
        target.doc = guarded(edit.file, () => withoutNulls(edit.doc, edit.file, []) as Record<string, unknown>, []);
        target.exists = true;
      } else if (target.exists || edit.value !== null) {
        // Removing a key of a file that does not exist leaves it absent (no empty file appears).
        guarded(edit.file, () => setPath(target.doc, edit.path, edit.value, edit.file), edit.path);
        target.exists = true;
      }
      continue;
    }
    flush(edit.file);
    const next = guarded(edit.file, () => applyEdit(files.get(edit.file), edit), edit.op === "set" ? edit.path : []);
    if (next === null) files.delete(edit.file);
    else files.set(edit.file, next);
  }
  for (const file of [...pending.keys()]) flush(file);
  let schemaLines: SchemaLines | undefined;
  for (const [file, was] of before) {
    const text = files.get(file);
    if (was !== null || text === undefined || moved.has(file)) continue;
    schemaLines ??= new SchemaLines(tree, options);
    files.set(file, schemaLines.add(file, text));
  }
  const touched = [...before.keys()].sort().map((file) => ({ file, before: before.get(file)!, after: files.get(file) ?? null }));
  return { tree: sourceTree(tree.root, files), files: touched.filter((f) => f.before !== f.after) };
}

/** Runs one edit; anything but a ChangeSetError it throws (toml-patch's refusals, a value nested past the stack) becomes `config.invalid_value`. */
function guarded<T>(file: string, run: () => T, path: ReadonlyArray<string | number>): T {
  try {
    return run();
  } catch (err) {
    if (err instanceof ChangeSetError) throw err.path.length > 0 || path.length === 0 ? err : new ChangeSetError(err.code, err.file, err.message, path);
    const why = err instanceof Error ? err.message.split("\n")[0] : String(err);
    throw new ChangeSetError("config.invalid_value", file, `${file} cannot be written with this edit: ${why}`, path);
  }
}

const SCHEMA_LINE = /^#:schema[ \t]+(\S+)/;
const SCHEMA_FILES = new Set(FILE_KINDS.map((k) => k.jsonSchema));

/** The `#:schema` lines of new files, as ApplyOptions describes; pure path arithmetic, no disk. */
class SchemaLines {
  private readonly named: ReadonlyArray<{ file: string; kind: string; target: string }>;

  constructor(private readonly tree: SourceTree, private readonly options: ApplyOptions) {
    this.named = options.schemaDir !== undefined ? [] : [...tree.files].flatMap(([file, text]) => {
      const target = SCHEMA_LINE.exec(text)?.[1];
      const kind = classifyPath(file)?.kind.id;
      return target !== undefined && kind !== undefined && SCHEMA_FILES.has(target.slice(target.lastIndexOf("/") + 1)) ? [{ file, kind, target }] : [];
    });
  }

  /** `text` with the `#:schema` line of `file`'s kind on top; as is for an unknown kind, a text that has one, or no known folder. */
  add(file: string, text: string): string {
    // A text that starts with a byte-order mark keeps it first (a mark after the line is no TOML), and its line ends stay its own.
    const bom = text.startsWith("\uFEFF") ? "\uFEFF" : "";
    const body = text.slice(bom.length);
    const kind = classifyPath(file)?.kind;
    if (kind === undefined || SCHEMA_LINE.test(body)) return text;
    const target = this.targetFor(file, kind.id, kind.jsonSchema);
    return target === undefined ? text : `${bom}#:schema ${target}${/^[^\n]*\r\n/.test(body) ? "\r\n" : "\n"}${body}`;
  }

  private targetFor(file: string, kindId: string, jsonSchema: string): string | undefined {
    if (this.options.schemaDir !== undefined) return `${this.options.schemaDir.replace(/\/+$/, "")}/${jsonSchema}`;
    const from = this.named.find((n) => n.kind === kindId) ?? this.named[0];
    if (from === undefined) return undefined;
    const folder = from.target.slice(0, from.target.lastIndexOf("/") + 1);
    // An absolute path or a URL names the same folder from anywhere.
    if (folder.startsWith("/") || /^[A-Za-z][A-Za-z0-9+.-]*:/.test(folder)) return `${folder}${jsonSchema}`;
    const root = posix.resolve("/", this.tree.root);
    const abs = posix.resolve(root, posix.dirname(from.file), folder === "" ? "." : folder);
    const rel = posix.relative(posix.resolve(root, posix.dirname(file)), abs);
    return rel === "" ? jsonSchema : `${rel}/${jsonSchema}`;
  }
}

function applyEdit(current: string | undefined, edit: Exclude<FileEdit, { op: "rename" }>): string | null {
  switch (edit.op) {
    case "delete":
      return null;
    case "text":
      return edit.text;
    case "put":
      return patchDoc(current, edit.file, () => withoutNulls(edit.doc, edit.file, []) as Record<string, unknown>);
    case "set":
      // Removing a key of a file that does not exist leaves it absent (no empty file appears).
      if (current === undefined && edit.value === null) return null;
      return patchDoc(current, edit.file, (doc) => setPath(doc, edit.path, edit.value, edit.file));
  }
}

/** Rewrites a document format-preservingly: comments and layout of every key that stays survive. */
function patchDoc(current: string | undefined, file: string, change: (doc: Record<string, unknown>) => Record<string, unknown>): string {
  const doc = parseText(current, file);
  const before = structuredClone(doc);
  return patchParsed(current, file, before, change(doc));
}

/** The document of a file's text (`{}` for an absent file); config.parse_error when it is not TOML. */
function parseText(current: string | undefined, file: string): Record<string, unknown> {
  try {
    return parseToml(current ?? "") as Record<string, unknown>;
  } catch (err) {
    throw new ChangeSetError("config.parse_error", file, `${file} is not valid TOML, so it can't be edited key by key: ${(err as Error).message.split("\n")[0]}`);
  }
}

/** `current` (whose document is `before`) patched to the document `next`, keeping comments and layout of every key that stays. */
function patchParsed(current: string | undefined, file: string, before: Record<string, unknown>, next: Record<string, unknown>): string {
  const text = current ?? "";
  let out: string;
  if (text.trim() === "") out = stringifyToml(next);
  else {
    // One read of the text's tables: removing deleted tables below keeps every other header, which is all the layout is asked here.
    const layout = tableLayout(text);
    dropEmptied(before, next, [], layout);
    out = patchAppendingNew(removeTables(text, deletedTables(before, next)), before, next, layout);
  }
  out = out.length > 0 && !out.endsWith("\n") ? `${out}\n` : out;
  // A file written with CRLF keeps them: what the patch adds (a new table, a key, the last newline) comes with LF.
  return /^[^\n]*\r\n/.test(text) ? out.replace(/\r?\n/g, "\r\n") : out;
}

/**
 * Patches `text` to `next`, except what toml-patch places badly: a new
 * table under a parent table (`[model.new]` comes out as a dotted inline
 * line at the top) and a file's first array of tables (it throws) are
 * appended at the end as sections, as a person would write them; a new key
 * of a `[header]` table (or of the top level, where it has keys) goes right
 * after that table's last key, where toml-patch would put it after the
 * comments that introduce the next table (and a later removal of the key
 * would take those comments with it).
 */
function patchAppendingNew(text: string, before: Record<string, unknown>, next: Record<string, unknown>, layout: TableLayout): string {
  const added: Array<{ path: string[]; value: unknown }> = [];
  const keys: Array<{ table: string[]; key: string; value: unknown }> = [];
  const rest = withoutAdded(before, next, [], added, keys, layout);
  if (added.length === 0 && keys.length === 0) return patchToml(text, next);
  const patched = patchToml(text, rest);
  const head = keys.length === 0 ? patched : insertKeys(patched, keys);
  if (added.length === 0) return head;
  return `${head.replace(/\n*$/, "\n")}\n${added.map((a) => renderSection(a.path, a.value)).join("\n")}`;
}

/** `next` minus its new nested tables and new arrays of tables (collected in `added`) and its new keys of `[header]` tables (collected in `keys`). */
function withoutAdded(
  before: Record<string, unknown>,
  next: Record<string, unknown>,
  prefix: string[],
  added: Array<{ path: string[]; value: unknown }>,
  keys: Array<{ table: string[]; key: string; value: unknown }>,
  layout: TableLayout,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(next)) {
    const old = before[key];
    const path = [...prefix, key];
    if (old === undefined && isTable(value) && prefix.length > 0) added.push({ path, value });
    else if (old === undefined && Array.isArray(value) && value.length > 0 && value.every(isTable)) added.push({ path, value });
    else if (old === undefined && !isTable(value) && layout.has(prefix.join("\u0000"))) keys.push({ table: prefix, key, value });
    else if (isTable(value) && isTable(old)) out[key] = withoutAdded(old, value, path, added, keys, layout);
    else out[key] = value;
  }
  return out;
}

interface CstKeyValue {
  readonly type: string;
  readonly key: { value: string[] };
  readonly loc: { start: { line: number; column: number }; end: { line: number } };
}

/**
 * The tables of `text` a new key can be written into by hand: each
 * `[header]` table, and the top level when it has keys of its own; for each,
 * the line a new key goes after (its last key, or its header) and the
 * indentation of its keys. Keyed by the table's path joined with NUL.
 */
type TableLayout = Map<string, { after: number; indent: string }>;

function tableLayout(text: string): TableLayout {
  const layout: TableLayout = new Map();
  const lines = text.split("\n");
  const indentOf = (kv: CstKeyValue) => (lines[kv.loc.start.line - 1] ?? "").slice(0, kv.loc.start.column);
  const top = (parseDocument(text).cst as unknown as Array<HeaderNode & CstKeyValue>);
  const rootKeys = top.filter((n) => n.type === "KeyValue");
  const lastRoot = rootKeys[rootKeys.length - 1];
  if (lastRoot) layout.set("", { after: lastRoot.loc.end.line, indent: indentOf(lastRoot) });
  for (const node of top) {
    if (node.type !== "Table" || !node.key) continue;
    const kvs = (node.items ?? []).filter((i) => i.type === "KeyValue") as unknown as CstKeyValue[];
    const last = kvs[kvs.length - 1];
    layout.set(node.key.item.value.join("\u0000"), last ? { after: last.loc.end.line, indent: indentOf(last) } : { after: node.loc.start.line, indent: "" });
  }
  return layout;
}

/** Writes each new key on its own line after its table's last key (`keys` were collected against `text`'s layout, which patching the rest keeps). */
function insertKeys(text: string, keys: ReadonlyArray<{ table: string[]; key: string; value: unknown }>): string {
  const layout = tableLayout(text);
  const at = new Map<number, string[]>();
  for (const { table, key, value } of keys) {
    const spot = layout.get(table.join("\u0000"));
    if (!spot) throw new Error(`${[...table, key].join(".")}: its table is gone from the patched text`);
    const line = `${spot.indent}${stringifyToml({ [key]: value }).trim()}`;
    at.set(spot.after, [...(at.get(spot.after) ?? []), line]);
  }
  const lines = text.split("\n");
  for (const after of [...at.keys()].sort((a, b) => b - a)) lines.splice(after, 0, ...at.get(after)!);
  return lines.join("\n");
}

/**
 * Drops the tables an edit emptied that the text never wrote as a
 * `[header]` (`profile` of `profile.x.a = 1` once `x` is removed): left in,
 * toml-patch would write an empty `[profile]` the person never had. An
 * emptied `[header]` table stays, header and comments.
 */
function dropEmptied(before: Record<string, unknown>, next: Record<string, unknown>, prefix: string[], layout: TableLayout): void {
  for (const [key, value] of Object.entries(next)) {
    const old = before[key];
    if (!isTable(value) || !isTable(old)) continue;
    const path = [...prefix, key];
    dropEmptied(old, value, path, layout);
    if (Object.keys(value).length === 0 && Object.keys(old).length > 0 && !layout.has(path.join("\u0000"))) delete next[key];
  }
}

/** `[a.b]` / `[[a.b]]` sections for a new table or array of tables, sub-tables as their own sections. */
function renderSection(path: string[], value: unknown): string {
  if (Array.isArray(value)) return value.map((item) => renderTable(path, item as Record<string, unknown>, true)).join("\n");
  return renderTable(path, value as Record<string, unknown>, false);
}

function renderTable(path: string[], table: Record<string, unknown>, arrayItem: boolean): string {
  const header = path.map((k) => (/^[A-Za-z0-9_-]+$/.test(k) ? k : JSON.stringify(k))).join(".");
  const lines = [arrayItem ? `[[${header}]]` : `[${header}]`];
  const nested: string[] = [];
  for (const [key, value] of Object.entries(table)) {
    if (isTable(value) || (Array.isArray(value) && value.length > 0 && value.every(isTable))) nested.push(renderSection([...path, key], value));
    else lines.push(stringifyToml({ [key]: value }).trim());
  }
  return [`${lines.join("\n")}\n`, ...nested].join("\n");
}

/** Key paths of tables present in `before` and gone from `after` (their sub-tables are covered by them). */
function deletedTables(before: Record<string, unknown>, after: Record<string, unknown>, prefix: string[] = []): string[][] {
  const out: string[][] = [];
  for (const [key, value] of Object.entries(before)) {
    if (!isTable(value)) continue;
    const next = after[key];
    if (!isTable(next)) out.push([...prefix, key]);
    else out.push(...deletedTables(value, next, [...prefix, key]));
  }
  return out;
}

function isTable(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

interface HeaderNode {
  readonly type: string;
  readonly key?: { item: { value: string[] } };
  readonly loc: { start: { line: number }; end: { line: number } };
  readonly items?: ReadonlyArray<{ type: string; loc: { end: { line: number } } }>;
}

/**
 * Removes deleted `[header]` tables as a person would: the header and its
 * keys (with comments between them), but not the comments after its last
 * key — those introduce what follows. toml-patch alone would take those,
 * and the comment above the first table, with it.
 */
function removeTables(text: string, paths: readonly string[][]): string {
  if (paths.length === 0) return text;
  const drop = new Set<number>();
  for (const node of parseDocument(text).cst as unknown as HeaderNode[]) {
    if (node.type !== "Table" || !node.key) continue;
    const header = node.key.item.value;
    if (!paths.some((p) => p.length <= header.length && p.every((k, i) => header[i] === k))) continue;
    const keys = (node.items ?? []).filter((i) => i.type === "KeyValue");
    const end = keys.length > 0 ? Math.max(...keys.map((k) => k.loc.end.line)) : node.loc.start.line;
    for (let line = node.loc.start.line; line <= end; line++) drop.add(line);
  }
  const kept = text.split("\n").filter((_, i) => !drop.has(i + 1));
  return kept.join("\n").replace(/\n{3,}/g, "\n\n");
}

function setPath(doc: Record<string, unknown>, path: readonly string[], value: unknown, file: string): Record<string, unknown> {
  if (path.length === 0) throw new ChangeSetError("config.invalid_value", file, "a set edit needs a key path");
  let table: Record<string, unknown> = doc;
  for (const key of path.slice(0, -1)) {
    const child = table[key];
    if (child === undefined || child === null) {
      if (value === null) return doc; // removing under a missing table: nothing to do
      table[key] = {};
    } else if (typeof child !== "object" || Array.isArray(child)) {
      throw new ChangeSetError("config.invalid_value", file, `${path.join(".")}: ${key} is not a table in ${file}`);
    }
    table = table[key] as Record<string, unknown>;
  }
  const last = path[path.length - 1]!;
  if (value === null) delete table[last];
  else table[last] = withoutNulls(value, file, path);
  return doc;
}

/**
 * A copy of a JSON value for a TOML document: TOML has no null, so a table
 * member that is `null` is left out (the key is absent), and a list holding
 * `null` is refused (`config.invalid_value`), never handed to toml-patch.
 */
function withoutNulls(value: unknown, file: string, path: readonly (string | number)[]): unknown {
  if (Array.isArray(value)) {
    return value.map((item, i) => {
      if (item === null) throw new ChangeSetError("config.invalid_value", file, `${[...path, i].join(".")}: a TOML list cannot hold null`);
      return withoutNulls(item, file, [...path, i]);
    });
  }
  if (!isTable(value)) return value instanceof Date ? new Date(value) : value;
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) if (member !== null && member !== undefined) out[key] = withoutNulls(member, file, [...path, key]);
  return out;
}

/** sha256 of one file's text, `absent` when it does not exist: what a revision records per file. */
export function fileHash(text: string | null | undefined): string {
  return text === null || text === undefined ? "absent" : createHash("sha256").update(text).digest("hex").slice(0, 32);
}

/** Per-file hashes of a tree: a revision. Two trees with the same map are the same revision. */
export function revisionFiles(tree: SourceTree): Record<string, string> {
  return Object.fromEntries([...tree.files].map(([file, text]) => [file, fileHash(text)]));
}

/** The files of `changes` whose text moved between a base revision and now (absent counts). Sorted. */
export function movedFiles(base: Readonly<Record<string, string>>, now: Readonly<Record<string, string>>, files: Iterable<string>): string[] {
  return [...new Set(files)].filter((f) => (base[f] ?? "absent") !== (now[f] ?? "absent")).sort();
}

/** The renames a change set makes, `from → to` by tree-relative file. */
export function renamesOf(changes: ChangeSet): Array<{ from: string; to: string }> {
  return changes.edits.flatMap((e) => (e.op === "rename" ? [{ from: e.file, to: e.to }] : []));
}
