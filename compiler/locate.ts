import { parseDocument } from "@decimalturn/toml-patch";
import type { KeyPath } from "../schema/index.js";

/** A 1-based line and column in a file. */
export interface Point {
  line: number;
  column: number;
}

/** Where a key and its value sit. Tables record their header as `key`. */
interface Spot {
  key: Point;
  value?: Point;
}

/** What a diagnostic points at: the key itself, or the value after `=`. */
export type Target = "key" | "value";

const FILE_START: Point = { line: 1, column: 1 };

/**
 * The deepest a key of a file hal0 reads may sit (tables and arrays); a file
 * nested deeper is a parse error (validate.ts). The locator marks paths only
 * this deep, plus one level: marking every prefix of a dotted key of
 * thousands of parts costs time and memory quadratic in their number.
 */
export const MAX_DEPTH = 64;

/**
 * Maps key paths of one file to positions, from toml-patch's CST. Built only
 * when a file has a diagnostic to place, so valid trees never pay for it.
 * Array-of-tables elements are indexed (`["upstream", 1, "url"]`), as zod paths are.
 */
export class Locator {
  private readonly spots = new Map<string, Spot>();
  private readonly arrayCounts = new Map<string, number>();

  constructor(text: string) {
    let cst: readonly unknown[] = [];
    try {
      cst = parseDocument(text).cst;
    } catch {
      // A file the CST parser refuses (smol-toml accepted it, or reported the
      // syntax error itself) is located at its start.
    }
    for (const block of cst) this.visitBlock(block as CstNode);
  }

  /** The position for `path`, or for its closest ancestor that the file spells out. */
  locate(path: KeyPath, target: Target): Point {
    const exact = this.spots.get(keyOf(path));
    if (exact) return target === "value" ? (exact.value ?? exact.key) : exact.key;
    for (let n = path.length - 1; n > 0; n--) {
      const spot = this.spots.get(keyOf(path.slice(0, n)));
      if (spot) return spot.key;
    }
    return FILE_START;
  }

  /** True when the file spells out `path` (a key, a table header or an element). */
  has(path: KeyPath): boolean {
    return this.spots.has(keyOf(path));
  }

  private visitBlock(node: CstNode): void {
    if (node.type === "KeyValue") this.visitKeyValue([], node);
    else if (node.type === "Table" || node.type === "TableArray") {
      const header = this.resolveHeader(node.key.item.value.slice(0, MAX_DEPTH + 1));
      const at = lastPartPoint(node.key.item);
      this.markHeaderParts(node.key.item, header);
      let path = header;
      if (node.type === "TableArray") {
        const id = keyOf(header);
        const index = (this.arrayCounts.get(id) ?? -1) + 1;
        this.arrayCounts.set(id, index);
        this.mark(header, { key: at });
        path = [...header, index];
      }
      this.mark(path, { key: at });
      for (const item of node.items) if (item.type === "KeyValue") this.visitKeyValue(path, item);
    }
  }

  private visitKeyValue(prefix: KeyPath, node: KeyValueNode): void {
    const full = [...prefix, ...node.key.value];
    const path = full.slice(0, MAX_DEPTH + 1);
    for (let n = prefix.length + 1; n < path.length; n++) this.mark(path.slice(0, n), { key: point(node.key.loc.start) });
    if (path.length < full.length) return void this.mark(path, { key: point(node.key.loc.start) });
    this.mark(path, { key: point(node.key.loc.start), value: point(node.value.loc.start) });
    this.visitValue(path, node.value);
  }

  private visitValue(path: KeyPath, value: CstNode): void {
    if (path.length > MAX_DEPTH) return;
    if (value.type === "InlineTable") {
      for (const item of value.items) this.visitKeyValue(path, item.item as KeyValueNode);
    } else if (value.type === "InlineArray") {
      value.items.forEach((item, index) => {
        const at = point(item.item.loc.start);
        this.mark([...path, index], { key: at, value: at });
        this.visitValue([...path, index], item.item);
      });
    }
  }

  /** `[a.b.c]` also spells out the implicit tables `a` and `a.b`: each points at its part of the header. */
  private markHeaderParts(key: KeyNode, header: KeyPath): void {
    if (header.length !== key.value.length) return; // under an array of tables: the element is marked by its own header
    const start = point(key.loc.start);
    const offsets = partOffsets(key.raw);
    if (offsets.length !== key.value.length) return;
    for (let n = 1; n < header.length; n++) this.mark(header.slice(0, n), { key: { line: start.line, column: start.column + offsets[n - 1]! } });
  }

  /** `[a.b]` under an earlier `[[a]]` means the last element of `a`. */
  private resolveHeader(parts: readonly string[]): Array<string | number> {
    const out: Array<string | number> = [];
    for (const part of parts) {
      out.push(part);
      const index = this.arrayCounts.get(keyOf(out));
      if (index !== undefined && out.length < parts.length + countNumbers(out)) out.push(index);
    }
    return out;
  }

  private mark(path: KeyPath, spot: Spot): void {
    const id = keyOf(path);
    if (!this.spots.has(id)) this.spots.set(id, spot);
  }
}

function countNumbers(path: KeyPath): number {
  return path.filter((p) => typeof p === "number").length;
}

function keyOf(path: KeyPath): string {
  return path.join("\u0000");
}

function point(p: { line: number; column: number }): Point {
  return { line: p.line, column: p.column + 1 };
}

/**
 * Where a table header's last key part starts: `[model."../x"]` names table
 * `../x`, so diagnostics about that table point at `"../x"`, not at `model`.
 */
function lastPartPoint(key: KeyNode): Point {
  const start = point(key.loc.start);
  const offsets = partOffsets(key.raw);
  if (offsets.length !== key.value.length) return start;
  return { line: start.line, column: start.column + offsets[offsets.length - 1]! };
}

/** Offsets of the parts of a dotted key's raw text; whitespace may surround the dots. */
function partOffsets(raw: string): number[] {
  const offsets: number[] = [];
  let i = 0;
  while (i < raw.length) {
    while (raw[i] === " " || raw[i] === "\t") i++;
    offsets.push(i);
    const quote = raw[i];
    if (quote === '"' || quote === "'") {
      for (i++; i < raw.length && raw[i] !== quote; i++) if (quote === '"' && raw[i] === "\\") i++;
    }
    while (i < raw.length && raw[i] !== ".") i++;
    i++;
  }
  return offsets;
}

// The slice of toml-patch's CST node types that the locator walks.
interface Loc {
  start: { line: number; column: number };
}
interface KeyNode {
  value: string[];
  raw: string;
  loc: Loc;
}
interface KeyValueNode {
  type: "KeyValue";
  loc: Loc;
  key: { value: string[]; loc: Loc };
  value: CstNode;
}
type CstNode =
  | KeyValueNode
  | { type: "Table" | "TableArray"; loc: Loc; key: { item: KeyNode }; items: Array<KeyValueNode | { type: "Comment" }> }
  | { type: "InlineTable"; loc: Loc; items: Array<{ item: KeyValueNode }> }
  | { type: "InlineArray"; loc: Loc; items: Array<{ item: CstNode }> }
  | { type: "String" | "Integer" | "Float" | "Boolean" | "DateTime" | "Comment"; loc: Loc };
