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
