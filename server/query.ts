import { z } from "zod";

/**
 * An integer query parameter: decimal digits (a leading `-` is let through
 * for the range check to name), given once, between `min` and `max`. Query
 * values are strings (MCP tool arguments reach the route as their string
 * form), so `0x10`, `1e2`, `8.0`, an empty value and a repeated parameter
 * are refused with a reason instead of read as some number. Advertised to
 * MCP clients as an integer with its bounds (and its default, if any).
 */
export function queryInt(min: number, max: number): z.ZodType<number, string>;
export function queryInt(min: number, max: number, dflt: number): z.ZodType<number, string | undefined>;
export function queryInt(min: number, max: number, dflt?: number): z.ZodType<number, string | undefined> {
  const int = z
    .string({ error: "one integer (the parameter is given once)" })
    .regex(/^-?\d{1,15}$/, "an integer in decimal digits")
    .transform(Number)
    .pipe(z.int().min(min).max(max));
  const advertised = int.meta({ type: "integer", minimum: min, maximum: max, pattern: undefined });
  // The default is the input's (the text "50", parsed like a sent one); catalog.ts advertises it as the integer.
  return (dflt === undefined ? advertised : advertised.prefault(String(dflt))) as z.ZodType<number, string | undefined>;
}

/** An ISO 8601 date or date-time, nothing after it (V8's Date.parse reads past trailing junk such as a NUL). */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/**
 * `text` as epoch milliseconds when it is an ISO 8601 date or date-time of a day the
 * calendar has, else undefined: Date.parse alone takes `2026-02-30` as March 2nd and
 * reads past trailing junk. A time without an offset is UTC, as every time hal0
 * writes is (and as a bare date is): Date.parse would read it in the server's
 * time zone, so `2026-12-02T14:00:00` meant 14 hours earlier under TZ=Pacific/Kiritimati.
 */
export function isoTimeMs(text: string): number | undefined {
  if (!ISO_TIME.test(text)) return undefined;
  const [y, m, d] = text.slice(0, 10).split("-").map(Number) as [number, number, number];
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  if (m < 1 || m > 12 || d < 1 || d > [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]!) return undefined;
  const utc = text.length > 10 && !/(?:Z|[+-]\d{2}:?\d{2})$/.test(text.slice(11)) ? `${text.slice(0, 10)}T${text.slice(11)}Z` : text;
  const at = Date.parse(utc);
  return Number.isFinite(at) ? at : undefined;
}
