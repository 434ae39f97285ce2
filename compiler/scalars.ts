/**
 * No hal0 file kind has a float or a date-time field, and integers must be
 * safe integers. smol-toml returns a TOML float with an integral value
 * (`port = 8081.0`) as the same JS number as the integer, and a date-time as a
 * Date object that a table schema would accept as an empty table. So right
 * after parsing (integers as bigint), each such scalar is replaced by a symbol
 * that every schema refuses as the wrong type, and messages name it.
 */
export const TOML_FLOAT = Symbol("a float");
export const TOML_DATETIME = Symbol("a date-time");
export const TOML_HUGE_INTEGER = Symbol("a number too large to hold exactly (beyond ±2^53)");

/**
 * True when `text` may hold a float, a date-time or an integer beyond 2^53.
 * Every such TOML literal contains one of these: a digit, `.`, digit (1.5,
 * 1_000.5); an exponent (1e6); inf or nan; a date (1979-05-27); a time
 * (07:32); or a long digit run (decimal, hex, octal or binary beyond 2^53).
 * Each branch starts at a digit, so the scan skips text quickly. A match
 * inside a string or comment only costs the exact parse; no match
 * proves the plain parse returns nothing but strings, booleans, safe integers,
 * arrays and tables.
 */
// The branches after a second digit are grouped behind it (the same pattern as one branch each, which
// tries all six at every digit of the text; test/compiler/scalars.test.ts holds the two equal).
const ODD_NUMBER = /[0-9](?:\.[0-9]|[eE][+-]?[0-9]|x[0-9A-Fa-f_]{13}|[0-9](?::[0-9]{2}|[0-9]{2}-[0-9]{2}-|[0-9A-Fa-f_]{12})|[A-Fa-f_][0-9A-Fa-f_]{12})/;
const INF_OR_NAN = /\b(?:inf|nan)\b/;

export function mayHoldOddScalars(text: string): boolean {
  return ODD_NUMBER.test(text) || ((text.includes("inf") || text.includes("nan")) && INF_OR_NAN.test(text));
}

/** Rewrites parsed TOML in place: bigint → number, floats and date-times → markers. */
export function normalizeScalars<T>(value: T): T {
  return normalize(value) as T;
}

function normalize(value: unknown): unknown {
  switch (typeof value) {
    case "bigint":
      return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : TOML_HUGE_INTEGER;
    case "number":
      return TOML_FLOAT;
    case "object":
      if (value === null) return value;
      if (value instanceof Date) return TOML_DATETIME;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) value[i] = normalize(value[i]);
        return value;
      }
      for (const key of Object.keys(value)) (value as Record<string, unknown>)[key] = normalize((value as Record<string, unknown>)[key]);
      return value;
    default:
      return value;
  }
}
