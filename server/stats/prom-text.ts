/**
 * A reader of Prometheus' text exposition format (version 0.0.4), as much of
 * it as hal0 needs to read a runner's `/metrics`: `# HELP` / `# TYPE` lines,
 * other comments, and samples `name{label="value",…} value [timestamp]`.
 * Histograms and summaries come out as their plain `_bucket` / `_sum` /
 * `_count` samples. A line it cannot read is an error naming the line, never
 * a guess: a runner that answers something else is reported, not misread.
 */

export interface PromSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
  /** Milliseconds since the epoch, when the line carries one. */
  readonly timestamp?: number;
}

export interface PromText {
  readonly samples: readonly PromSample[];
  /** `# TYPE` by metric family name: counter, gauge, histogram, summary, untyped. */
  readonly types: Readonly<Record<string, string>>;
  readonly help: Readonly<Record<string, string>>;
}

export class PromParseError extends Error {
  constructor(readonly line: number, message: string) {
    super(`line ${line}: ${message}`);
  }
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
/** Most characters of the runner's text an error quotes: the reason is kept and shown in every stats reply. */
const SHOWN_CHARS = 80;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;
const TYPES = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

export function parsePromText(text: string): PromText {
  const samples: PromSample[] = [];
  const types: Record<string, string> = {};
  const help: Record<string, string> = {};
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, "").trim();
    if (line === "") continue;
    const at = i + 1;
    if (line.startsWith("#")) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(line);
      if (!m) continue; // a plain comment
      const [, kind, name, rest = ""] = m;
      if (!NAME.test(name!) || NAME.exec(name!)![0] !== name) throw new PromParseError(at, `bad metric name in # ${kind}: ${shown(name!)}`);
      if (kind === "TYPE") {
        if (!TYPES.has(rest.trim())) throw new PromParseError(at, `unknown metric type ${shown(rest.trim())}`);
        types[name!] = rest.trim();
      } else help[name!] = unescapeHelp(rest);
      continue;
    }
    samples.push(sampleOf(line, at));
  }
  return { samples, types, help };
}

function sampleOf(line: string, at: number): PromSample {
  const name = NAME.exec(line)?.[0];
  if (!name) throw new PromParseError(at, `expected a metric name: ${shown(line)}`);
  let pos = name.length;
  const labels: Record<string, string> = {};
  if (line[pos] === "{") {
    pos = readLabels(line, pos + 1, labels, at);
  }
  const rest = line.slice(pos);
  if (rest !== "" && !/^[ \t]/.test(rest)) throw new PromParseError(at, `expected a space after ${cut(name)}`);
  const words = rest.trim().split(/[ \t]+/);
  if (words[0] === "" || words.length > 2) throw new PromParseError(at, `expected a value and an optional timestamp after ${cut(name)}`);
  const value = numberOf(words[0]!);
  if (value === undefined) throw new PromParseError(at, `not a number: ${shown(words[0]!)}`);
  if (words.length === 1) return { name, labels, value };
  if (!/^-?\d+$/.test(words[1]!)) throw new PromParseError(at, `not a timestamp: ${shown(words[1]!)}`);
  return { name, labels, value, timestamp: Number(words[1]) };
}

/** Reads `a="x",b="y"}` from `pos` (after the `{`) into `labels`; returns the position after `}`. */
function readLabels(line: string, pos: number, labels: Record<string, string>, at: number): number {
  for (;;) {
    while (line[pos] === " " || line[pos] === "\t") pos++;
    if (line[pos] === "}") return pos + 1;
    const name = LABEL_NAME.exec(line.slice(pos))?.[0];
    if (!name) throw new PromParseError(at, `expected a label name at column ${pos + 1}`);
    pos += name.length;
    while (line[pos] === " " || line[pos] === "\t") pos++;
    if (line[pos] !== "=") throw new PromParseError(at, `expected = after label ${cut(name)}`);
    pos++;
    while (line[pos] === " " || line[pos] === "\t") pos++;
    if (line[pos] !== '"') throw new PromParseError(at, `expected a quoted value for label ${cut(name)}`);
    pos++;
    let value = "";
    for (;;) {
      const ch = line[pos];
      if (ch === undefined) throw new PromParseError(at, `unterminated value of label ${cut(name)}`);
      pos++;
      if (ch === '"') break;
      if (ch !== "\\") {
        value += ch;
        continue;
      }
      const next = line[pos++];
      if (next === "n") value += "\n";
      else if (next === "\\" || next === '"') value += next;
      else throw new PromParseError(at, `bad escape \\${next ?? ""} in label ${cut(name)}`);
    }
    if (Object.hasOwn(labels, name)) throw new PromParseError(at, `label ${cut(name)} given twice`);
    labels[name] = value;
    while (line[pos] === " " || line[pos] === "\t") pos++;
    if (line[pos] === ",") pos++;
    else if (line[pos] !== "}") throw new PromParseError(at, `expected , or } after label ${cut(name)}`);
  }
}

/**
 * A sample value, as Prometheus reads it (Go's ParseFloat): `1.5e3`, and `NaN`, `+Inf`, `-Inf`, `Infinity` in any
 * case. llama-server writes its values with C++ streams, which spell them `nan`, `inf`, `-inf` and `-nan` (a NaN
 * with its sign bit set, as 0/0 gives on x86): `-nan` is read as NaN too, not as a line it cannot read.
 */
function numberOf(word: string): number | undefined {
  const special = /^([+-]?)(inf|infinity|nan)$/i.exec(word);
  if (special) return special[2]!.toLowerCase() === "nan" ? NaN : special[1] === "-" ? -Infinity : Infinity;
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(word)) return undefined;
  return Number(word);
}

/** A name from the runner's text in an error, cut at SHOWN_CHARS (a 1 MiB word is not repeated in every stats reply). */
function cut(text: string): string {
  return text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS)}… (${text.length} characters)` : text;
}

/** The runner's text in an error, quoted and cut at SHOWN_CHARS. */
function shown(text: string): string {
  return text.length > SHOWN_CHARS ? `${JSON.stringify(text.slice(0, SHOWN_CHARS))}… (${text.length} characters)` : JSON.stringify(text);
}

function unescapeHelp(text: string): string {
  return text.replace(/\\(n|\\)/g, (_, c: string) => (c === "n" ? "\n" : "\\"));
}

/** The value of the one sample named `name` with no labels, or undefined when there is none. */
export function valueOf(text: PromText, name: string): number | undefined {
  return text.samples.find((s) => s.name === name && Object.keys(s.labels).length === 0)?.value;
}
