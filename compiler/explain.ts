import { NAME_GRAMMARS } from "../schema/index.js";

/** Human descriptions used in diagnostic details. */

export function describeValue(value: unknown): string {
  if (value === undefined) return "nothing";
  if (typeof value === "symbol") return value.description ?? "a value";
  if (typeof value === "string") return "a string";
  if (typeof value === "boolean") return "a boolean";
  if (typeof value === "number") return Number.isInteger(value) ? "an integer" : "a float";
  if (typeof value === "bigint") return "an integer";
  if (Array.isArray(value)) return "an array";
  if (value instanceof Date) return "a date-time";
  if (typeof value === "object") return "a table";
  return typeof value;
}

/** A value as a message shows it: JSON, or what a marker stands for (see scalars.ts). */
export function displayValue(value: unknown): string {
  return typeof value === "symbol" ? (value.description ?? "a value") : (JSON.stringify(value) ?? String(value));
}

const EXPECTED: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  object: "a table",
  array: "an array",
  record: "a table",
};

export function describeExpected(expected: string): string {
  return EXPECTED[expected] ?? expected;
}

/** A quoted name with every invisible or non-ASCII character spelled as \uXXXX, so readers see it. */
export function quoteName(value: string): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/gu, (ch) => `\\u${hex(ch.codePointAt(0)!)}`);
}

/**
 * Why a name breaks its grammar, naming invisible and look-alike characters. A pattern that is none of the
 * shared grammars is described by `describe`, the schema's own words for it, when it has some.
 */
export function explainName(value: string, pattern: RegExp | undefined, describe?: string): string {
  const grammar = NAME_GRAMMARS.find((g) => pattern !== undefined && g.pattern.source === pattern.source);
  const rule = grammar ? `A name here is ${grammar.describe}.` : describe ? `A name here is ${describe}.` : "It breaks the name grammar.";
  const odd = unusualCharacter(value);
  if (odd) return `${quoteName(value)} contains ${odd}. ${rule}`;
  if (value.length === 0) return `The name is empty. ${rule}`;
  if (value.includes("/") || value.includes("..")) return `${quoteName(value)} looks like a path; names never contain \`/\` or \`..\`. ${rule}`;
  return `${quoteName(value)} is not a valid name. ${rule}`;
}

const INVISIBLE: Record<number, string> = {
  0xfeff: "a byte-order mark (U+FEFF)",
  0x200b: "a zero-width space (U+200B)",
  0x200c: "a zero-width non-joiner (U+200C)",
  0x200d: "a zero-width joiner (U+200D)",
  0x2060: "a word joiner (U+2060)",
  0x00ad: "a soft hyphen (U+00AD)",
};

/** The first character a reader would not see or would misread, described. */
export function unusualCharacter(value: string): string | undefined {
  for (const ch of value) {
    const cp = ch.codePointAt(0)!;
    const named = INVISIBLE[cp];
    if (named) return named;
    if (cp < 0x20 || cp === 0x7f) return `a control character (U+${hex(cp)})`;
    if ((cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) return `a bidirectional override (U+${hex(cp)})`;
    if (cp > 0x7e) return `the non-ASCII character "${ch}" (U+${hex(cp)}), which may look like an ASCII letter`;
  }
  return undefined;
}

function hex(cp: number): string {
  return cp.toString(16).toUpperCase().padStart(4, "0");
}
