/**
 * Pure parsers for what a runner says of itself: llama.cpp's
 * `llama-server --version` (stderr) and `--help`. Text in, facts out
 * (compiler/runner-facts.ts); nothing here reads a file or runs a process.
 *
 * The help format (llama.cpp common/arg.cpp `common_arg::to_string`):
 *
 *     ----- common params -----                      section header
 *                                                    blank lines
 *     -c,    --ctx-size N                     size of the prompt context (default: 0, …)
 *                                             (env: LLAMA_ARG_CTX_SIZE)
 *     --spec-draft-model, -md, --model-draft FNAME
 *                                             draft model for speculative decoding …
 *
 * An entry starts at column 0 with `-`: comma-separated spellings, the last
 * one possibly followed by one value placeholder (which may hold spaces:
 * `<tensor name pattern>=<buffer type>,...`, `START END`). The description
 * starts at column 40: on the same line when the names part is at most 37
 * characters long (llama.cpp pads it to column 40, so at least three spaces
 * separate the two), otherwise on the next line. Continuation lines are
 * indented (40 spaces, sometimes 41).
 */

import { closest } from "./suggest.js";
import type { Dialect, FlagTable, RunnerFacts, RunnerFlag, RunnerVersion } from "./runner-facts.js";

// ---------------------------------------------------------------- version

const VERSION_LINE = /^version: (\d+) \(([0-9a-fA-F]+)\)$/;
const LINE_CAP = 200;

/**
 * `version: 9749 (d32676d77)` followed by `built with …` → kind "llama-server"
 * with build and commit. Lines before the version line are allowed (CUDA and
 * other backends log to stderr first); `line` is then the version line itself.
 * Anything else → kind "other", `line` = the first non-empty line, trimmed.
 */
export function parseRunnerVersion(text: string): RunnerVersion {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "");
  for (let i = 0; i < lines.length - 1; i++) {
    const m = VERSION_LINE.exec(lines[i]!);
    if (m && lines[i + 1]!.startsWith("built with ")) {
      return { kind: "llama-server", build: Number(m[1]), commit: m[2]!, line: cap(lines[i]!) };
    }
  }
  return { kind: "other", build: null, commit: null, line: cap(lines[0] ?? "") };
}

function cap(line: string): string {
  return line.length > LINE_CAP ? line.slice(0, LINE_CAP) : line;
}

// ------------------------------------------------------------------- help

/** The column llama.cpp starts descriptions at. */
const DESC_COLUMN = 40;
const SECTION_HEADER = /^-{3,} .* -{3,}\s*$/;
const ENV_LINE = /^\(env: ([A-Za-z_][A-Za-z0-9_]*)\)$/;
const ENV_ANY = /\(env: ([A-Za-z_][A-Za-z0-9_]*)\)/;
/** One spelling: `-` then anything but blanks and commas. */
const NAME = /-[^\s,]+/y;
/** Between spellings: a comma, blanks, then the next spelling's `-`. */
const NAME_SEP = /,[ \t]+(?=-)/y;
const VALUE_WORD = /^[A-Za-z0-9_.+-]+$/;
const LOWER_WORD = "[a-z][a-z0-9_+-]*";
const BARE_LIST = new RegExp(`^${LOWER_WORD}(?:,${LOWER_WORD})+$`);
const BRACE_SET = /^\{([^{}\s]+)\}$/;
const BRACKET_CHOICE = /^\[([^[\]|\s]+(?:\|[^[\]|\s]+)+)\]$/;
const ANGLE_CHOICE = /^<([^<>|\s]+(?:\|[^<>|\s]+)+)>$/;
const DASH_ITEM = /^- ([A-Za-z0-9_.+-]+)(?: \(default\))?: /;
const DEPRECATED_FOR = /DEPRECATED in favor of `([^`]+)`/;
const DEPRECATED = /\bDEPRECATED\b/;
const REMOVED = "the argument has been removed.";
const DEFAULT_VALUE = /\(default: '?([A-Za-z0-9_.+-]+)'?[);,\s]/;
/** Placeholders that name a number: no value set from the description for these (`-lv N` lists 0..5 but takes any int). */
const NUMERIC_PLACEHOLDER = /^(?:N|P|INDEX|SEED|SECONDS|SIMILARITY)$/;

interface Entry {
  head: string;
  desc: string[];
}

/**
 * Parses `llama-server --help` into a flag table. Lines that are neither an
 * entry, a continuation, a section header nor blank (a `usage:` line, backend
 * log lines) end the current entry and are otherwise ignored.
 *
 * A spelling printed in two entries: the later entry wins in `byName` (as in
 * llama.cpp's own arg map, filled in print order); `flags` keeps both. The
 * same for `byEnv`.
 */
export function parseLlamaHelp(text: string): FlagTable {
  const entries: Entry[] = [];
  let current: Entry | null = null;
  for (const raw of text.split("\n")) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.startsWith("-")) {
      if (SECTION_HEADER.test(line)) {
        current = null;
        continue;
      }
      const [head, first] = splitEntryLine(line);
      current = { head, desc: first === "" ? [] : [first] };
      entries.push(current);
    } else if (line.trim() === "") {
      // blank (or all-blank padding inside an entry): nothing to keep
    } else if (/^\s/.test(line)) {
      if (current) current.desc.push(line.trim());
    } else {
      current = null;
    }
  }

  const flags: RunnerFlag[] = [];
  for (const entry of entries) {
    const flag = toFlag(entry);
    if (flag) flags.push(flag);
  }
  return flagTable(flags);
}

/**
 * The version of what `parseLlamaHelp` makes of a help text. The runner probe
 * keeps a runner's parsed flags beside its help text (runners.json) and, while
 * this number is the one they were parsed under, reads them back instead of
 * parsing the text again at every command. Bump it whenever the parser would
 * read the same text differently: test/compiler/runner-help.test.ts holds the
 * recorded help's table to a digest saved with this number.
 */
export const FLAG_TABLE_VERSION = 1;

/** The table of parsed flags, in print order: a spelling (or variable) printed twice is the later entry's. */
export function flagTable(flags: readonly RunnerFlag[]): FlagTable {
  const byName = new Map<string, RunnerFlag>();
  const byEnv = new Map<string, RunnerFlag>();
  for (const flag of flags) {
    for (const name of flag.names) byName.set(name, flag);
    if (flag.env !== null) byEnv.set(flag.env, flag);
  }
  return { flags, byName, byEnv };
}

/** An entry's first line → [names part, description start ("" when it starts on the next line)]. */
function splitEntryLine(line: string): [string, string] {
  if (
    line.length > DESC_COLUMN &&
    line.slice(DESC_COLUMN - 3, DESC_COLUMN) === "   " &&
    line[DESC_COLUMN] !== " " &&
    line[DESC_COLUMN] !== "\t"
  ) {
    return [line.slice(0, DESC_COLUMN).trimEnd(), line.slice(DESC_COLUMN).trim()];
  }
  return [line.trimEnd(), ""];
}

/** The names part → spellings and the placeholder; null when it does not start with a spelling. */
function splitHead(head: string): { names: string[]; placeholder: string | null } | null {
  const names: string[] = [];
  let at = 0;
  for (;;) {
    NAME.lastIndex = at;
    const m = NAME.exec(head);
    if (!m) return names.length === 0 ? null : { names, placeholder: head.slice(at).trim() || null };
    names.push(m[0]);
    at = NAME.lastIndex;
    NAME_SEP.lastIndex = at;
    if (NAME_SEP.test(head)) {
      at = NAME_SEP.lastIndex;
      continue;
    }
    const rest = head.slice(at).trim();
    return { names, placeholder: rest === "" ? null : rest };
  }
}

function toFlag(entry: Entry): RunnerFlag | null {
  const head = splitHead(entry.head);
  if (!head) return null;
  const { names, placeholder } = head;

  let env: string | null = null;
  const descLines: string[] = [];
  for (const line of entry.desc) {
    const m = ENV_LINE.exec(line);
    if (m) env ??= m[1]!;
    else descLines.push(line);
  }
  const description = descLines.join(" ");
  if (env === null) env = ENV_ANY.exec(description)?.[1] ?? null;

  const removed = description.startsWith(REMOVED) ? { hint: description.slice(REMOVED.length).trim() } : null;
  const forMatch = DEPRECATED_FOR.exec(description);
  const deprecated = forMatch ? { replacement: forMatch[1]! } : DEPRECATED.test(description) ? { replacement: null } : null;

  const fromPlaceholder = placeholder === null ? null : placeholderValues(placeholder);
  const values = fromPlaceholder?.values ?? (placeholder === null ? null : descriptionValues(placeholder, descLines, description));

  return {
    names,
    canonical: names.find((n) => n.startsWith("--")) ?? names[0]!,
    takes_value: placeholder !== null,
    placeholder,
    values,
    list: fromPlaceholder?.list ?? false,
    deprecated,
    removed,
    env,
    description,
  };
}

/** `{a,b}`, `[a|b]`, `<a|b>` → a set; `a,b-c,d` (lowercase words only) → a list set. Anything else → null. */
function placeholderValues(placeholder: string): { values: string[]; list: boolean } | null {
  const brace = BRACE_SET.exec(placeholder);
  if (brace) return setOf(brace[1]!.split(","), false);
  const choice = BRACKET_CHOICE.exec(placeholder) ?? ANGLE_CHOICE.exec(placeholder);
  if (choice) return setOf(choice[1]!.split("|"), false);
  if (BARE_LIST.test(placeholder)) return setOf(placeholder.split(","), true);
  return null;
}

function setOf(words: string[], list: boolean): { values: string[]; list: boolean } | null {
  const values = unique(words.map((w) => w.trim()));
  return values.every((v) => VALUE_WORD.test(v)) ? { values, list } : null;
}

/**
 * Values the description lists: `allowed values: a, b, c` (up to a `(`, `)`,
 * `;` or the end), or lines `- name: text` (`- layer (default): …`). Either
 * gets the `(default: X)` value added. Not for numeric placeholders. Null
 * unless every listed value is a plain word: a wrong set would reject a
 * valid argv, a missing one only checks less.
 */
function descriptionValues(placeholder: string, lines: string[], description: string): string[] | null {
  if (NUMERIC_PLACEHOLDER.test(placeholder)) return null;
  let values: string[] | null = null;
  const allowedAt = description.indexOf("allowed values:");
  if (allowedAt >= 0) {
    const rest = description.slice(allowedAt + "allowed values:".length);
    const end = rest.search(/[();]/);
    const words = (end < 0 ? rest : rest.slice(0, end)).split(",").map((w) => w.trim());
    if (words.length > 0 && words.every((w) => VALUE_WORD.test(w))) values = words;
    else return null;
  } else {
    const items = lines.map((l) => DASH_ITEM.exec(l)?.[1]).filter((w): w is string => w !== undefined);
    if (items.length > 0) values = items;
  }
  if (values === null) return null;
  const dflt = DEFAULT_VALUE.exec(description + " ")?.[1];
  if (dflt !== undefined) values.push(dflt);
  return unique(values);
}

function unique(words: string[]): string[] {
  return [...new Set(words)];
}

// ---------------------------------------------------------------- dialect

/** The flag by one of its spellings, unless the runner has removed it. */
function live(table: FlagTable, name: string): RunnerFlag | undefined {
  const flag = table.byName.get(name);
  return flag && flag.removed === null ? flag : undefined;
}

/**
 * How hal0 writes for a runner with this flag table. `id` lists the present
 * choices in a fixed order: `spec-type`, `mtp=X`, `draft=X`, `draft-flag=X`,
 * `reasoning`, `budget`, `kwargs` (`llama-server:` alone when none is present).
 * Removed flags count as absent.
 */
export function dialectOf(table: FlagTable): Dialect {
  const specType = live(table, "--spec-type");
  const specValues = specType?.values ?? [];
  const spec_type = specType !== undefined;
  const mtp_type = specValues.includes("draft-mtp") ? "draft-mtp" : specValues.includes("mtp") ? "mtp" : null;
  const draft_type = spec_type && specValues.includes("draft-simple") ? "draft-simple" : null;
  const draft_flag = (live(table, "--spec-draft-model") ?? live(table, "--model-draft"))?.canonical ?? null;
  const reasoning = live(table, "--reasoning");
  const reasoning_flag =
    reasoning !== undefined && reasoning.takes_value && (reasoning.values ?? []).includes("on") && (reasoning.values ?? []).includes("off");
  const reasoning_budget = live(table, "--reasoning-budget") !== undefined;
  const template_kwargs = live(table, "--chat-template-kwargs") !== undefined;
  const mmproj = live(table, "--mmproj") !== undefined;

  const parts: string[] = [];
  if (spec_type) parts.push("spec-type");
  if (mtp_type !== null) parts.push(`mtp=${mtp_type}`);
  if (draft_type !== null) parts.push(`draft=${draft_type}`);
  if (draft_flag !== null) parts.push(`draft-flag=${draft_flag}`);
  if (reasoning_flag) parts.push("reasoning");
  if (reasoning_budget) parts.push("budget");
  if (template_kwargs) parts.push("kwargs");
  return {
    id: `llama-server:${parts.join(",")}`,
    spec_type,
    mtp_type,
    draft_type,
    draft_flag,
    reasoning_flag,
    reasoning_budget,
    template_kwargs,
    mmproj,
  };
}

/**
 * The dialect of the newest llama-server hal0 knows (build 9749,
 * fixtures/llama-server/help.txt), written out: what hal0 writes for a runner
 * it has not probed. A test keeps it equal to `dialectOf(parseLlamaHelp(help.txt))`.
 */
export const NEWEST_DIALECT: Dialect = {
  id: "llama-server:spec-type,mtp=draft-mtp,draft=draft-simple,draft-flag=--spec-draft-model,reasoning,budget,kwargs",
  spec_type: true,
  mtp_type: "draft-mtp",
  draft_type: "draft-simple",
  draft_flag: "--spec-draft-model",
  reasoning_flag: true,
  reasoning_budget: true,
  template_kwargs: true,
  mmproj: true,
};

// ------------------------------------------------------------------ facts

/**
 * One runner's facts. The flag table and dialect only for a llama-server
 * with a help text that lists at least one flag (an empty table would make
 * every flag look unknown; no table means flags are not checked).
 */
export function runnerFacts(versionText: string, helpText: string | null, source: string, parsed?: readonly RunnerFlag[]): RunnerFacts {
  const version = parseRunnerVersion(versionText);
  if (version.kind !== "llama-server" || helpText === null) return { version, flags: null, dialect: null, source };
  // `parsed`: the flags parseLlamaHelp made of this help text before (under FLAG_TABLE_VERSION), kept by the caller.
  const flags = parsed !== undefined ? flagTable(parsed) : parseLlamaHelp(helpText);
  if (flags.flags.length === 0) return { version, flags: null, dialect: null, source };
  return { version, flags, dialect: dialectOf(flags), source };
}

/** "Did you mean": the closest spelling in the table (removed flags left out), or undefined. */
export function suggestFlag(table: FlagTable, name: string): string | undefined {
  // closest() accepts at most max(2, ⌊length/3⌋) edits, and an edit distance is at least the
  // length difference: leave out spellings that cannot be close (same answer, far fewer tables).
  const limit = Math.max(2, Math.floor(name.length / 3));
  const spellings: string[] = [];
  for (const [spelling, flag] of table.byName) {
    if (flag.removed === null && Math.abs(spelling.length - name.length) <= limit) spellings.push(spelling);
  }
  return closest(name, spellings);
}

/**
 * How many argv words a flag's value takes: 0 without a placeholder, 2 for
 * llama.cpp's two-part hints (`START END`, `FNAME SCALE`: words of capitals
 * only, separated by one space), else 1 (`<tensor name pattern>=<buffer type>,...`
 * is one word despite its spaces).
 */
export function valueArity(flag: RunnerFlag): number {
  if (flag.placeholder === null) return 0;
  const words = flag.placeholder.split(" ");
  return words.length > 1 && words.every((w) => /^[A-Z][A-Z0-9_]*$/.test(w)) ? words.length : 1;
}

// ---------------------------------------------------------------- numbers

/**
 * What a numeric value of a flag may be, as its help describes it:
 * `integer` (true: a whole number, which llama.cpp reads with `std::stoi`;
 * false: a decimal, read with `std::stof`; null: the help does not say), the
 * bounds, and the words it takes besides a number (`-ngl`'s `auto`, `all`).
 */
export interface NumericValue {
  readonly integer: boolean | null;
  readonly min: number | null;
  readonly max: number | null;
  /** The largest magnitude the runner's reader takes (`std::stoi`'s int, `std::stof`'s float); null: no limit checked. */
  readonly limit: number | null;
  readonly words: readonly string[];
}

/** Placeholders of a number (`N`, `P`, `INDEX`, …) and whether the name alone says it is whole (null: the default says). */
const NUMBER_KIND: Readonly<Record<string, boolean | null>> = { N: null, P: false, SIMILARITY: false, INDEX: true, SEED: true, SECONDS: true, PORT: true };
/** `<0...100>`: a range, both ends included. */
const RANGE_PLACEHOLDER = /^<(-?\d+(?:\.\d+)?)\.\.\.(-?\d+(?:\.\d+)?)>$/;
/** The number the help gives as the default (`default: -1`, `default: 0.80`, `default: 4096`). */
const NUMERIC_DEFAULT = /\bdefault: '?(-?\d+(\.\d+)?)'?(?=[);,\s]|$)/;
/** A negative number, `< 0` or the word "negative" in the description: the flag takes negative values (`-1 = infinity`, `low(-1)`). */
const NAMES_NEGATIVE = /(?:^|[\s(=:,])-\d|<\s*0\b|\bnegative\b/;
/** A word the description quotes as a value (`either an exact number, 'auto', or 'all'`). */
const QUOTED_WORD = /'([a-z][a-z0-9_-]*)'/g;
/** The largest `int` (`std::stoi` refuses more; a seed is read with `std::stoul`) and the largest finite `float` (`std::stof`). */
const INT_MAX = 2_147_483_647;
const FLOAT_MAX = 3.4028234663852886e38;

/**
 * The numeric value `flag` takes, null when it takes something else (a
 * file, a word from a listed set, a list). Read from the help, so it holds a
 * value only to what the help says: whole where the default is whole, not
 * negative unless the help names a negative value, within a printed range
 * (`<0...100>`).
 */
export function numericValue(flag: RunnerFlag): NumericValue | null {
  if (flag.placeholder === null || flag.values !== null) return null;
  const range = RANGE_PLACEHOLDER.exec(flag.placeholder);
  if (range) {
    const [min, max] = [Number(range[1]), Number(range[2])];
    const integer = Number.isInteger(min) && Number.isInteger(max);
    return { integer, min, max, limit: integer ? INT_MAX : FLOAT_MAX, words: [] };
  }
  if (!Object.hasOwn(NUMBER_KIND, flag.placeholder)) return null;
  const dflt = NUMERIC_DEFAULT.exec(flag.description);
  const integer = NUMBER_KIND[flag.placeholder] ?? (dflt ? dflt[2] === undefined : null);
  const min = NAMES_NEGATIVE.test(flag.description) ? null : 0;
  const limit = integer !== true ? FLOAT_MAX : flag.placeholder === "SEED" ? null : INT_MAX;
  return { integer, min, max: null, limit, words: unique([...flag.description.matchAll(QUOTED_WORD)].map((m) => m[1]!)) };
}

/** What `std::stoi` and `std::stof` read: leading blanks skipped, then the longest number at the start. */
const INTEGER_LEAD = /^[+-]?\d+/;
const DECIMAL_LEAD = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/;

/**
 * What is wrong with `value` as a value of `spec`, null when nothing is:
 * `problem` completes "`N` …", `runs` says what the runner would do with it.
 */
export function numericProblem(spec: NumericValue, value: string, flag: string): { problem: string; runs: string } | null {
  if (spec.words.includes(value)) return null;
  const reader = spec.integer === null ? "" : `: \`error while handling argument "${flag}": ${spec.integer ? "stoi" : "stof"}\``;
  const refuses = `exits 1 at start${reader}`;
  const text = value.trimStart();
  const lead = (spec.integer === true ? INTEGER_LEAD : DECIMAL_LEAD).exec(text)?.[0];
  // `std::stoi` / `std::stof` throw on a value with no number at its start, and read only the number at the start of the others (`1.5` is 1 for stoi).
  if (lead === undefined) return { problem: "is not a number", runs: refuses };
  if (lead !== text) {
    const whole = spec.integer === true && DECIMAL_LEAD.exec(text)?.[0] === text;
    return { problem: whole ? "is not a whole number" : "is not a number", runs: `reads only the number it starts with and would silently run with \`${flag} ${lead}\`` };
  }
  const n = Number(lead);
  if (spec.limit !== null && !(Math.abs(n) <= spec.limit)) return { problem: `is out of range (its magnitude is at most ${spec.limit === INT_MAX ? INT_MAX : "3.4e38"})`, runs: refuses };
  if (spec.min !== null && n < spec.min) return { problem: spec.min === 0 ? "is negative" : `is below ${spec.min}`, runs: `would start with it, though its help names no value below ${spec.min}` };
  if (spec.max !== null && n > spec.max) return { problem: `is above ${spec.max}`, runs: `would start with it, though its help names no value above ${spec.max}` };
  return null;
}
