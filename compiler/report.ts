import { CODES, type Code, type Diagnostic, type KeyPath, type RelatedPosition } from "../schema/index.js";
import { Locator, type Point, type Target } from "./locate.js";
import { MAX_FILE_BYTES } from "./sources.js";

/** Builds a diagnostic at a known position, with the code's default severity. */
export function diagnosticAt(
  code: Code,
  file: string,
  at: Point,
  path: KeyPath,
  summary: string,
  detail: string,
  related: RelatedPosition[] = [],
): Diagnostic {
  return { code, severity: CODES[code].severity, summary, detail, file, line: at.line, column: at.column, path: [...path], related };
}

/**
 * `config.read_error` at `rel`: the file (or folder) could not be read, and
 * why — in brief in the summary (what a sweep's log line and `hal0 reconcile`
 * print, one line per diagnostic), in full in the detail.
 */
export function readError(rel: string, why: string, brief: string, at: { line: number; column: number } = { line: 1, column: 1 }): Diagnostic {
  return diagnosticAt("config.read_error", rel, { line: at.line, column: at.column }, [], `cannot read ${rel}: ${brief}`, `hal0 could not read this ${rel.endsWith(".toml") ? "file" : "folder"}: ${why}.`);
}

/** A file system error in a few words, for a read error's summary: "permission denied", not the errno's message with its absolute path. */
export function errnoBrief(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  switch (code) {
    case "EACCES":
    case "EPERM":
      return "permission denied";
    case "ENOENT":
      return "it is gone";
    case "EISDIR":
      return "it is a folder";
    case "ELOOP":
      return "a loop of symbolic links";
    case "EIO":
      return "an I/O error";
    default:
      return typeof code === "string" ? code : "an error";
  }
}

/** A file larger than hal0 reads (`MAX_FILE_BYTES`), on disk or as a change's text: `config.read_error`. */
export function tooLarge(rel: string, bytes: number): Diagnostic {
  return readError(rel, `it is ${bytes} bytes, more than the ${MAX_FILE_BYTES} (1 MiB) hal0 reads of one file`, "it is larger than 1 MiB");
}

/** A place in the tree a diagnostic or related note points at. */
export interface Site {
  file: string;
  path: KeyPath;
  target?: Target;
  /**
   * One word of a string value that holds several (a profile's `flags`, a
   * slot's `extra_args`): the `index`-th whitespace-separated word, `text`.
   * The diagnostic points at that word when the value is a one-line string
   * that spells it so, else at the value.
   */
  word?: { readonly text: string; readonly index: number };
}

/**
 * The most diagnostics one compile lists. A real tree has a handful; a hostile
 * one (a write of 10,000 unknown keys, a file of 100,000 bad values) would
 * otherwise cost a located diagnostic each, in work and in every reply that
 * carries them. Beyond it they are counted, not placed, and one
 * `config.too_many_diagnostics` says how many more there were; it sorts
 * first, its file being `.`.
 */
export const MAX_DIAGNOSTICS = 200;

/**
 * Collects diagnostics for one compile and places them. Locators are built
 * lazily, once per file, only for files that get a diagnostic. The first
 * `MAX_DIAGNOSTICS` are kept; the rest only counted (`full`).
 */
export class Reporter {
  readonly diagnostics: Diagnostic[] = [];
  private readonly locators = new Map<string, Locator>();
  private readonly omitted = { error: 0, warning: 0 };

  constructor(private readonly texts: ReadonlyMap<string, string>) {}

  /** True once `MAX_DIAGNOSTICS` are kept: a further report is only counted, so a caller may skip the work of wording one (`count`). */
  get full(): boolean {
    return this.diagnostics.length >= MAX_DIAGNOSTICS;
  }

  /** Counts one diagnostic of `code` past the limit, without wording or placing it. */
  count(code: Code): void {
    this.omitted[CODES[code].severity]++;
  }

  /** Reports `code` at `site`; `related` sites are placed the same way. */
  report(code: Code, site: Site, summary: string, detail: string, related: Array<Site & { message: string }> = []): void {
    if (this.full) return this.count(code);
    const at = this.point(site);
    const rel = related.map((r) => ({ file: r.file, ...this.point(r), message: r.message }));
    this.diagnostics.push(diagnosticAt(code, site.file, at, site.path, summary, detail, rel));
  }

  /** Adds diagnostics produced elsewhere (loading, parsing). */
  add(diagnostics: Iterable<Diagnostic>): void {
    for (const d of diagnostics) {
      if (this.full) this.omitted[d.severity]++;
      else this.diagnostics.push(d);
    }
  }

  hasErrors(): boolean {
    return this.omitted.error > 0 || this.diagnostics.some((d) => d.severity === "error");
  }

  /** True when the file spells out `path`; used to pick the most precise site. */
  spells(file: string, path: KeyPath): boolean {
    return this.texts.has(file) && this.locator(file).has(path);
  }

  /** Diagnostics in a stable order: file, line, column, code; past the limit, with the one that counts the rest (at `.`, so first). */
  sorted(): Diagnostic[] {
    const { error, warning } = this.omitted;
    return [...this.diagnostics, ...(error + warning === 0 ? [] : [tooMany(error, warning)])].sort(
      (a, b) => cmp(a.file, b.file) || a.line - b.line || a.column - b.column || cmp(a.code, b.code) || cmp(a.summary, b.summary),
    );
  }

  private point(site: Site): Point {
    if (!this.texts.has(site.file)) return { line: 1, column: 1 };
    const at = this.locator(site.file).locate(site.path, site.target ?? "key");
    return site.word === undefined ? at : wordPoint(this.texts.get(site.file)!, at, site.word);
  }

  private locator(file: string): Locator {
    let loc = this.locators.get(file);
    if (!loc) {
      loc = new Locator(this.texts.get(file) ?? "");
      this.locators.set(file, loc);
    }
    return loc;
  }
}

/** The point of the `index`-th word inside the one-line string value at `at`; `at` itself when the text does not spell it so. */
function wordPoint(text: string, at: Point, word: { readonly text: string; readonly index: number }): Point {
  const line = text.split(/\r?\n/)[at.line - 1];
  const quote = line?.[at.column - 1];
  if (line === undefined || (quote !== '"' && quote !== "'")) return at;
  const close = line.indexOf(quote, at.column);
  const inner = line.slice(at.column, close === -1 ? undefined : close);
  const found = [...inner.matchAll(/\S+/g)][word.index];
  return found?.[0] === word.text ? { line: at.line, column: at.column + 1 + found.index! } : at;
}

/**
 * `config.too_many_diagnostics`: how many diagnostics past `MAX_DIAGNOSTICS`
 * were found and not listed. An error when any of them is one, so the list's
 * severities still say whether the tree is valid.
 */
function tooMany(errors: number, warnings: number): Diagnostic {
  const d = tooManyDiagnostic(errors, warnings);
  UNLISTED.set(d, { errors, warnings });
  return d;
}

/** What each `config.too_many_diagnostics` of this process stands for, so counts include the diagnostics it was not listed with. */
const UNLISTED = new WeakMap<object, { errors: number; warnings: number }>();

/**
 * Errors and warnings in `diagnostics`, a `config.too_many_diagnostics` made
 * by this process counted as the diagnostics it stands for (one copied from
 * elsewhere counts as itself).
 */
export function countDiagnostics(diagnostics: ReadonlyArray<{ readonly severity: string }>): { errors: number; warnings: number } {
  let errors = 0;
  let warnings = 0;
  for (const d of diagnostics) {
    const unlisted = UNLISTED.get(d);
    if (unlisted) {
      errors += unlisted.errors;
      warnings += unlisted.warnings;
    } else if (d.severity === "error") errors++;
    else warnings++;
  }
  return { errors, warnings };
}

function tooManyDiagnostic(errors: number, warnings: number): Diagnostic {
  const count = (n: number, what: string) => (n === 0 ? [] : [`${n} ${what}${n === 1 ? "" : "s"}`]);
  const besides = [...count(errors, "error"), ...count(warnings, "warning")].join(" and ");
  return {
    ...diagnosticAt("config.too_many_diagnostics", ".", { line: 1, column: 1 }, [], `${count(errors + warnings, "more diagnostic")[0]} not listed`,
      `hal0 lists the first ${MAX_DIAGNOSTICS} diagnostics of a tree; it found ${besides} besides. Fix those listed and check again to see the rest.`),
    severity: errors > 0 ? "error" : "warning",
  };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
