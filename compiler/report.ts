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

/** `config.read_error` at `rel`: the file (or folder) could not be read, and why. */
export function readError(rel: string, why: string, at: { line: number; column: number } = { line: 1, column: 1 }): Diagnostic {
  return diagnosticAt("config.read_error", rel, { line: at.line, column: at.column }, [], `cannot read ${rel}`, `hal0 could not read this ${rel.endsWith(".toml") ? "file" : "folder"}: ${why}.`);
}

/** A file larger than hal0 reads (`MAX_FILE_BYTES`), on disk or as a change's text: `config.read_error`. */
export function tooLarge(rel: string, bytes: number): Diagnostic {
  return readError(rel, `it is ${bytes} bytes, more than the ${MAX_FILE_BYTES} (1 MiB) hal0 reads of one file`);
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
 * Collects diagnostics for one compile and places them. Locators are built
 * lazily, once per file, only for files that get a diagnostic.
 */
export class Reporter {
  readonly diagnostics: Diagnostic[] = [];
  private readonly locators = new Map<string, Locator>();

  constructor(private readonly texts: ReadonlyMap<string, string>) {}

  /** Reports `code` at `site`; `related` sites are placed the same way. */
  report(code: Code, site: Site, summary: string, detail: string, related: Array<Site & { message: string }> = []): void {
    const at = this.point(site);
    const rel = related.map((r) => ({ file: r.file, ...this.point(r), message: r.message }));
    this.diagnostics.push(diagnosticAt(code, site.file, at, site.path, summary, detail, rel));
  }

  /** Adds diagnostics produced elsewhere (loading, parsing). */
  add(diagnostics: Iterable<Diagnostic>): void {
    for (const d of diagnostics) this.diagnostics.push(d);
  }

  hasErrors(): boolean {
    return this.diagnostics.some((d) => d.severity === "error");
  }

  /** True when the file spells out `path`; used to pick the most precise site. */
  spells(file: string, path: KeyPath): boolean {
    return this.texts.has(file) && this.locator(file).has(path);
  }

  /** Diagnostics in a stable order: file, line, column, code. */
  sorted(): Diagnostic[] {
    return [...this.diagnostics].sort(
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

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
