import { join, relative } from "node:path";
import type { Diagnostic } from "../schema/index.js";
import { printableMessage } from "../server/errors.js";
import { isMcpServerFile, redactToml } from "../server/redact.js";

/**
 * Compiler-style text for diagnostics:
 *   slots/chat.toml:4:11: error[slot.unknown_profile]: unknown profile `rocmm`
 *      4 | profile = "rocmm"
 *        |           ^^^^^^^
 *     = No profile `rocmm` in … Did you mean `rocm`?
 *     = related: profiles.toml:3:1: …
 * Paths are shown relative to the working folder so editors can jump to them.
 */
export interface TextOptions {
  readonly root: string;
  readonly cwd: string;
  readonly color: boolean;
  readonly texts: ReadonlyMap<string, string>;
}

export function formatDiagnostic(d: Diagnostic, o: TextOptions): string {
  const paint = painter(o.color);
  const sev = d.severity === "error" ? paint.red("error") : paint.yellow("warning");
  // A file's name and the words quoting it are the tree's, as written: their control characters are written out (`\u001b`), not sent to the terminal.
  const lines = [`${paint.bold(`${printableMessage(shown(d.file, o))}:${d.line}:${d.column}`)}: ${sev}[${d.code}]: ${paint.bold(printableMessage(d.summary))}`];
  const frame = codeFrame(o.texts.get(d.file), d.file, d.line, d.column);
  if (frame) lines.push(frame[0]!, paint.cyan(frame[1]!));
  lines.push(`   = ${printableMessage(d.detail)}`);
  for (const r of d.related) lines.push(`   = related: ${printableMessage(`${shown(r.file, o)}:${r.line}:${r.column}: ${r.message}`)}`);
  return lines.join("\n");
}

export function formatSummary(errors: number, warnings: number, root: string, o: TextOptions): string {
  const where = printableMessage(shown("", { ...o, root }) || ".");
  if (errors === 0) return `${where}: valid${warnings ? ` (${plural(warnings, "warning")})` : ""}`;
  return `${where}: ${plural(errors, "error")}${warnings ? `, ${plural(warnings, "warning")}` : ""}`;
}

/** `::error file=…,line=…,col=…::…` workflow commands for GitHub Actions, escaped as the runner reads them (a property's value also escapes `:` and `,`). */
export function formatAnnotation(d: Diagnostic, o: TextOptions): string {
  const file = printableMessage(relative(o.cwd, join(o.root, d.file)));
  const data = (v: string) => v.replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
  const property = (v: string) => data(v).replace(/:/g, "%3A").replace(/,/g, "%2C");
  return `::${d.severity === "error" ? "error" : "warning"} file=${property(file)},line=${d.line},col=${d.column},title=${property(d.code)}::${data(printableMessage(`[${d.code}] ${d.summary}. ${d.detail}`))}`;
}

/** A source line wider than this is shown as a window of it around the column, `…` where it is cut. */
const FRAME_WIDTH = 120;
/** How much of the line before the column the window keeps. */
const FRAME_BEFORE = 40;

/**
 * The last text split into lines, as written and with its secrets masked: a file's diagnostics come one after another,
 * so each is not split again (20,000 in one file took a minute).
 */
let split: { text: string; file: string; lines: string[]; masked: string[] } | undefined;

function linesOf(text: string, file: string): { lines: string[]; masked: string[] } {
  if (split?.text !== text || split.file !== file) {
    split = { text, file, lines: text.split(/\r?\n/), masked: redactToml(text, { allEnv: isMcpServerFile(file) }).split(/\r?\n/) };
  }
  return split;
}

/**
 * The line shown under a diagnostic, secrets masked as every reply masks them (an `API_KEY = "…"` the parser stopped at,
 * an MCP server's env value): what `hal0 validate` prints goes to terminals and CI logs. The column moves with the mask.
 */
function codeFrame(text: string | undefined, file: string, line: number, column: number): string[] | undefined {
  const both = text === undefined ? undefined : linesOf(text, file);
  const written = both?.lines[line - 1];
  if (written === undefined) return undefined;
  const masked = both!.masked[line - 1] ?? written;
  const w = Math.max(4, String(line).length + 1);
  // Its control characters written out (`\u001b`: a line the parser refused for one holds it raw), the caret moved with them.
  const rawAt = maskedColumn(written, masked, Math.max(0, column - 1));
  const full = printableMessage(masked);
  const at = full === masked ? rawAt : printableMessage(masked.slice(0, rawAt)).length;
  let source = full;
  let shift = 0;
  let cutEnd = false;
  if (full.length > FRAME_WIDTH) {
    const start = Math.max(0, Math.min(at - FRAME_BEFORE, full.length - FRAME_WIDTH));
    const end = start + FRAME_WIDTH;
    cutEnd = end < full.length;
    source = `${start > 0 ? "…" : ""}${full.slice(start, end)}${cutEnd ? "…" : ""}`;
    shift = start - (start > 0 ? 1 : 0);
  }
  // The caret stays inside what is shown: up to the `…` of a cut line.
  const room = source.length - (cutEnd ? 1 : 0) - (at - shift);
  // Only what the window can show is measured, so each of a long line's many diagnostics costs the window, not the line.
  const caret = "^".repeat(Math.max(1, Math.min(tokenWidth(full.slice(at, at + FRAME_WIDTH + 2)), room)));
  return [`${String(line).padStart(w)} | ${source.replace(/\t/g, " ")}`, `${" ".repeat(w)} | ${" ".repeat(at - shift)}${caret}`];
}

/** Where column `at` of `written` is in `masked` (the same line with secrets masked): unmoved before the first change, shifted after the last, at the mask inside it. */
function maskedColumn(written: string, masked: string, at: number): number {
  if (written === masked) return at;
  let head = 0;
  while (head < written.length && head < masked.length && written[head] === masked[head]) head++;
  if (at < head) return at;
  let tail = 0;
  while (tail < written.length - head && tail < masked.length - head && written[written.length - 1 - tail] === masked[masked.length - 1 - tail]) tail++;
  if (at >= written.length - tail) return at + masked.length - written.length;
  return head;
}

/** How many columns the key or value at the start of `rest` spans (a quoted string, or a bare word). */
function tokenWidth(text: string): number {
  const rest = [...text];
  if (rest.length === 0) return 1;
  if (rest[0] === '"' || rest[0] === "'") {
    const close = rest.indexOf(rest[0], 1);
    return close > 0 ? close + 1 : rest.length;
  }
  const stop = rest.findIndex((ch) => /[\s=,\]}"']/.test(ch));
  return Math.max(1, stop === -1 ? rest.length : stop);
}

function shown(file: string, o: { root: string; cwd: string }): string {
  return relative(o.cwd, join(o.root, file)) || ".";
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function painter(on: boolean) {
  const wrap = (code: number) => (s: string) => (on ? `\u001b[${code}m${s}\u001b[0m` : s);
  return { red: wrap(31), yellow: wrap(33), cyan: wrap(36), bold: wrap(1) };
}
