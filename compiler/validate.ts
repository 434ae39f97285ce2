import { parse, TomlError } from "smol-toml";
import type { z } from "zod";
import {
  MODEL_LEGACY_TUNE_KEYS, NAME_GRAMMARS, SLOT_LEGACY_ROOT_KEYS, TUNE_KEYS, isCode,
  type Code, type FileKind, type KeyPath,
} from "../schema/index.js";
import { MAX_DEPTH } from "./locate.js";
import { tooLarge, type Reporter } from "./report.js";
import { MAX_FILE_BYTES } from "./sources.js";
import { fastParse, REFUSED } from "./fast-validate.js";
import { mayHoldOddScalars, normalizeScalars } from "./scalars.js";
import { didYouMean } from "./suggest.js";
import { describeExpected, describeValue, displayValue, explainName, quoteName, unusualCharacter } from "./explain.js";
import { isIntegerAt, keysAt, patternAt } from "./schema-walk.js";

type Issue = z.core.$ZodIssue;

/** Parses one file's text; a syntax error becomes `config.parse_error`. */
export function parseToml(rel: string, text: string, reporter: Reporter): Record<string, unknown> | undefined {
  // A change's text (loadTree leaves a file this large on disk unread). A UTF-16 code unit is at most 3 bytes of UTF-8.
  const bytes = text.length > MAX_FILE_BYTES / 3 ? Buffer.byteLength(text, "utf8") : 0;
  if (bytes > MAX_FILE_BYTES) return void reporter.add([tooLarge(rel, bytes)]);
  try {
    // Most files hold no float, date-time or huge integer: a scan of the text
    // decides whether the exact (bigint) parse and its rewrite are needed.
    const exact = mayHoldOddScalars(text);
    const parsed = (exact ? parse(text, { integersAsBigInt: true }) : parse(text)) as Record<string, unknown>;
    // Checked before anything walks the data: a dotted key or table header of thousands of parts is valid TOML.
    const deep = tooDeep(text, parsed);
    if (deep !== undefined) {
      reporter.report("config.parse_error", { file: rel, path: deep }, `invalid TOML: nested more than ${MAX_DEPTH} levels deep`,
        `A key here sits more than ${MAX_DEPTH} tables or arrays deep; no file hal0 reads nests half as deep. Nothing in this file is used until it is flatter.`);
      return undefined;
    }
    const data = exact ? normalizeScalars(parsed) : parsed;
    // TOML writes a NUL only as an escape: a file without one holds none.
    if (/\\(?:u0000|U00000000)/.test(text) && reportNuls(rel, data, [], reporter)) return undefined;
    return data;
  } catch (err) {
    if (!(err instanceof TomlError)) throw err;
    // smol-toml ends some reasons with a period; the summary and detail add their own.
    const reason = err.message.split("\n")[0]!.replace(/^Invalid TOML document: /, "").replace(/\.+$/, "");
    reporter.add([
      {
        code: "config.parse_error", severity: "error", summary: `invalid TOML: ${reason}`,
        detail: `The TOML parser stopped here: ${reason}. Nothing in this file is used until it parses.`,
        file: rel, line: Math.max(1, err.line), column: Math.max(1, err.column), path: [], related: [],
      },
    ]);
    return undefined;
  }
}

/**
 * The path of the first value nested deeper than `MAX_DEPTH` tables and
 * arrays (cut to `MAX_DEPTH + 1` parts), or undefined. It stops there: the
 * data of a 100 000-part dotted key is that deep, which any unbounded walk
 * (and the locator, quadratic in a key's parts) would not survive; this one
 * never goes more than `MAX_DEPTH + 1` calls deep. Every file is walked once
 * whole, so the walk allocates nothing until it finds one: the path is built
 * only on the way back out.
 */
function tooDeep(text: string, data: Record<string, unknown>): KeyPath | undefined {
  return mayNestDeep(text) ? deepPath(data, 0) : undefined;
}

/**
 * Whether `text` may nest deeper than `MAX_DEPTH`: each level below the top
 * is written with a `.` (a dotted key), a `[` (a table header, an array) or a
 * `{` (an inline table), so a text with fewer than `MAX_DEPTH` of them holds
 * no value that deep, and its data need not be walked (a slot file has a few).
 */
function mayNestDeep(text: string): boolean {
  let marks = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c === 46 /* . */ || c === 91 /* [ */ || c === 123 /* { */) && ++marks >= MAX_DEPTH) return true;
  }
  return false;
}

function deepPath(value: unknown, depth: number): Array<string | number> | undefined {
  if (value === null || typeof value !== "object" || value instanceof Date) return undefined;
  if (depth > MAX_DEPTH) return [];
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = deepPath(value[i], depth + 1);
      if (found !== undefined) return (found.unshift(i), found);
    }
    return undefined;
  }
  const keys = Object.keys(value);
  for (let i = 0; i < keys.length; i++) {
    const found = deepPath((value as Record<string, unknown>)[keys[i]!], depth + 1);
    if (found !== undefined) return (found.unshift(keys[i]!), found);
  }
  return undefined;
}

/**
 * Reports each key and string value holding a NUL character (`"\u0000"`,
 * valid TOML): no path, argument or environment variable can carry one, so
 * such a value would pass every check and fail only when a runner is
 * started. Returns whether any was found.
 */
function reportNuls(rel: string, value: unknown, path: KeyPath, reporter: Reporter): boolean {
  if (typeof value === "string") {
    if (!value.includes("\0")) return false;
    reporter.report("config.invalid_value", { file: rel, path, target: "value" }, "a string holds a NUL character (\\u0000)",
      `\`${path.join(".")}\` holds a NUL character: no file path, program argument or environment variable can carry one. Remove it.`);
    return true;
  }
  if (value === null || typeof value !== "object") return false;
  let found = false;
  for (const [key, child] of Array.isArray(value) ? value.entries() : Object.entries(value)) {
    if (typeof key === "string" && key.includes("\0")) {
      reporter.report("config.invalid_name", { file: rel, path: [...path, key] }, "a key holds a NUL character (\\u0000)", "Keys are names: a NUL character has no place in one. Remove it.");
      found = true;
      continue;
    }
    found = reportNuls(rel, child, [...path, key], reporter) || found;
  }
  return found;
}

/**
 * Validates parsed data against its kind's schema and reports every issue at
 * the offending key or value. Returns the parsed output when the file is valid.
 */
export function validateFile<T>(kind: FileKind, rel: string, raw: Record<string, unknown>, reporter: Reporter): T | undefined {
  const { data, refused } = refuseLegacyShapes(kind, rel, raw, reporter);
  if (data === undefined) return undefined;
  // A valid file is vouched for by the fast path; anything else is parsed by zod itself, which reports the issues.
  const fast = fastParse(kind.schema, data);
  if (fast !== REFUSED) return refused ? undefined : (fast as T);
  const result = kind.schema.safeParse(data);
  if (result.success) return refused ? undefined : (result.data as T);
  for (const issue of result.error.issues) reportIssue(kind, rel, issue, valueAt(data, issue.path as KeyPath), reporter);
  return undefined;
}

/**
 * Old slot shapes are refused with a hint before the schema sees them. A file
 * nested under `[slot]` is old throughout: nothing else in it is checked (no
 * data). Beside a `[model]` table the rest is still checked, without the table.
 */
function refuseLegacyShapes(kind: FileKind, rel: string, raw: Record<string, unknown>, reporter: Reporter): { data?: Record<string, unknown>; refused: boolean } {
  if (kind.id !== "slot") return { data: raw, refused: false };
  if (isTable(raw.slot)) {
    reporter.report("slot.legacy_shape", { file: rel, path: ["slot"] }, "the [slot] table is the old slot shape", LEGACY_SLOT_TABLE_HINT);
    return { refused: true };
  }
  if (!isTable(raw.model)) return { data: raw, refused: false };
  reporter.report(
    "slot.legacy_shape", { file: rel, path: ["model"] }, "the [model] table is the old slot shape",
    "Slots name their model by id: write `model = \"<model id>\"` at the top of the file; context goes in `[tune] ctx_size`, and file facts live in models.toml.",
  );
  const { model: _legacy, ...rest } = raw;
  return { data: rest, refused: true };
}

const LEGACY_SLOT_TABLE_HINT = "Write the slot's keys (profile, model, port, …) at the top of the file; the file name is the slot's name.";

/** The raw value at `path`; zod's `reportInput` would copy it into every issue, at a cost on every parse. */
function valueAt(data: unknown, path: KeyPath): unknown {
  let current = data;
  for (const key of path) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<string | number, unknown>)[key];
  }
  return current;
}

function reportIssue(kind: FileKind, rel: string, issue: Issue, input: unknown, reporter: Reporter): void {
  const path = issue.path as KeyPath;
  switch (issue.code) {
    case "unrecognized_keys":
      for (const key of issue.keys) reportUnknownKey(kind, rel, path, key, reporter);
      return;
    case "invalid_key": {
      const key = String(path[path.length - 1]);
      // The key's own issue carries the schema's words for its grammar (zod's default message starts "Invalid").
      const words = issue.issues.map((i) => i.message).find((m) => m !== undefined && !m.startsWith("Invalid"));
      reporter.report("config.invalid_name", { file: rel, path }, `invalid name ${quoteName(key)}`, explainName(key, patternAt(kind.schema, path, true), words));
      return;
    }
    case "invalid_type": {
      if (input === undefined) {
        const key = String(path[path.length - 1]);
        const wanted = describeExpected(issue.expected === "number" && isIntegerAt(kind.schema, path) ? "int" : issue.expected);
        reporter.report("config.missing_key", { file: rel, path }, `missing required key \`${key}\``, `This file needs \`${key}\` (${wanted}).`);
        return;
      }
      const expected = describeExpected(issue.expected === "number" && isIntegerAt(kind.schema, path) ? "int" : issue.expected);
      reporter.report("config.invalid_type", { file: rel, path, target: "value" }, `expected ${expected}, found ${describeValue(input)}`,
        `\`${path.join(".")}\` must be ${expected}.`);
      return;
    }
    case "too_small":
    case "too_big":
      reporter.report("config.out_of_range", { file: rel, path, target: "value" }, rangeSummary(issue), `\`${path.join(".")}\` ${rangeSummary(issue)}.`);
      return;
    case "invalid_value": {
      const allowed = issue.values.map((v) => JSON.stringify(v));
      if (input === undefined) {
        // A required key whose values are a closed list (an enum), left out.
        const key = String(path[path.length - 1]);
        reporter.report("config.missing_key", { file: rel, path }, `missing required key \`${key}\``, `This file needs \`${key}\` (one of ${allowed.join(", ")}).`);
        return;
      }
      const got = typeof input === "string" ? didYouMean(input, issue.values.map(String)) : "";
      reporter.report("config.invalid_value", { file: rel, path, target: "value" }, `${displayValue(input)} is not allowed here`,
        `\`${path.join(".")}\` must be one of ${allowed.join(", ")}.${got}`);
      return;
    }
    case "invalid_format": {
      const value = String(input);
      const pattern = patternAt(kind.schema, path, false);
      if (isNamePattern(pattern)) {
        reporter.report("config.invalid_name", { file: rel, path, target: "value" }, `invalid name ${quoteName(value)}`, explainName(value, pattern));
        return;
      }
      // Not a name: say what the value must be (the schema's words for its pattern), and any character a reader would not see.
      const odd = unusualCharacter(value);
      const want = issue.message && !issue.message.startsWith("Invalid") ? issue.message : `a string matching ${pattern?.source ?? "its pattern"}`;
      reporter.report("config.invalid_value", { file: rel, path, target: "value" }, `invalid value ${quoteName(value)}`,
        `\`${path.join(".")}\` must be ${want}${odd ? `; ${quoteName(value)} contains ${odd}` : ""}.`);
      return;
    }
    case "custom": {
      const code = issue.params?.code;
      const detail = typeof issue.params?.detail === "string" ? issue.params.detail : `${issue.message}.`;
      const target = issue.params?.target === "value" ? "value" : "key";
      reporter.report(typeof code === "string" && isCode(code) ? code : "config.invalid_value", { file: rel, path, target }, issue.message, detail);
      return;
    }
    default:
      reporter.report("config.invalid_value", { file: rel, path, target: "value" }, issue.message, `${issue.message}.`);
  }
}

function reportUnknownKey(kind: FileKind, rel: string, parent: KeyPath, key: string, reporter: Reporter): void {
  const path = [...parent, key];
  const legacy = legacyKey(kind, parent, key);
  if (legacy) {
    reporter.report(legacy.code, { file: rel, path }, legacy.summary, legacy.detail);
    return;
  }
  // Past the limit the key is only counted: its did-you-mean would cost an edit distance per known key, for nothing.
  if (reporter.full) return reporter.count("config.unknown_key");
  const known = keysAt(kind.schema, parent);
  const moved = Object.hasOwn(MOVED_SLOT_KEYS, key) ? MOVED_SLOT_KEYS[key] : undefined;
  const hint = kind.id === "slot" && parent.length === 0 && moved ? ` It moved: write it as ${moved}.` : didYouMean(key, known);
  reporter.report("config.unknown_key", { file: rel, path }, `unknown key \`${key}\``,
    `${where(parent)} has no key \`${key}\`.${hint}${hint ? "" : ` Known keys: ${known.map((k) => `\`${k}\``).join(", ")}.`}`);
}

/** Keys of the slot's old flat shape that live elsewhere now. */
const MOVED_SLOT_KEYS: Record<string, string> = {
  device: "`[placement] device`",
  gpu_index: "`[placement] gpu_index`",
  extra_args: "`[server] extra_args`",
  env: "`[server] env`",
};

function legacyKey(kind: FileKind, parent: KeyPath, key: string): { code: Code; summary: string; detail: string } | undefined {
  if (kind.id === "slot" && parent.length === 0) {
    if (key === "slot") {
      return { code: "slot.legacy_shape", summary: "`slot` is the old slot shape", detail: LEGACY_SLOT_TABLE_HINT };
    }
    if ((SLOT_LEGACY_ROOT_KEYS as readonly string[]).includes(key)) {
      const target = key === "context_size" ? "ctx_size" : key;
      const into = (TUNE_KEYS as readonly string[]).includes(target) ? `Put it in the slot's \`[tune]\` table as \`${target}\`.` : "It is not a slot key any more: set it on the profile (flags) or the model (file facts).";
      return { code: "slot.tuning_key_denied", summary: `tuning key \`${key}\` at the slot's root`, detail: `Slots no longer take tuning keys at their root. ${into}` };
    }
  }
  if (kind.id === "models" && parent.length === 2 && parent[0] === "model") {
    if (key === "defaults") {
      return { code: "model.defaults_removed", summary: "models no longer carry defaults", detail: "Remove the defaults table: the base tune comes from the profile, per-slot overrides from the slot's `[tune]`." };
    }
    if ((MODEL_LEGACY_TUNE_KEYS as readonly string[]).includes(key)) {
      return { code: "model.tune_key_removed", summary: `tuning key \`${key}\` on a model`, detail: "Models hold file facts only. Set tuning on the profile's `[tune]` or the slot's `[tune]`." };
    }
  }
  return undefined;
}

function rangeSummary(issue: Extract<Issue, { code: "too_small" | "too_big" }>): string {
  const small = issue.code === "too_small";
  const bound = String(issue.code === "too_small" ? issue.minimum : issue.maximum);
  const inclusive = issue.inclusive !== false;
  const cmpWord = small ? (inclusive ? "at least" : "more than") : inclusive ? "at most" : "less than";
  switch (issue.origin) {
    case "string": return `must be ${cmpWord} ${bound} characters long`;
    case "array": return `must have ${cmpWord} ${bound} entries`;
    default: return `must be ${cmpWord} ${bound}`;
  }
}

function where(parent: KeyPath): string {
  return parent.length === 0 ? "The file's top level" : `\`[${parent.join(".")}]\``;
}

function isNamePattern(pattern: RegExp | undefined): boolean {
  return pattern !== undefined && NAME_GRAMMARS.some((g) => g.pattern.source === pattern.source);
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}
