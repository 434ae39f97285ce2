import { ApiError } from "./errors.js";
import type { Route } from "./route.js";

/** `{name}` and `{name:path}` placeholders of a route template, in order. */
export function pathParams(path: string): Array<{ name: string; multi: boolean }> {
  return [...path.matchAll(/\{([a-z_]+)(:path)?\}/g)].map((m) => ({ name: m[1]!, multi: m[2] !== undefined }));
}

// Control characters, and invisible formatting ones: zero-width (U+200B–U+200F), bidi embeddings and
// overrides (U+202A–U+202E), word joiners and invisible operators (U+2060–U+2064), bidi isolates
// (U+2066–U+2069), the byte-order mark, soft hyphen, Arabic letter mark, Mongolian vowel separator.
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/u;

/**
 * Seed 001's path-argument rules, before a gated call is queued, before an
 * autonomous call runs, and again when an approved call executes: a string,
 * or an integer below 2^53; never null, a boolean, a float, a list or an
 * object; never empty, `.`, `..`, containing `/` (a `{x:path}` argument is
 * checked segment by segment instead), a control or invisible formatting
 * character. Returns each argument as the string the handler receives.
 */
export function checkPathArgs(route: Pick<Route, "path">, args: Readonly<Record<string, unknown>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { name, multi } of pathParams(route.path)) {
    if (!Object.hasOwn(args, name) || args[name] === undefined) throw new ApiError("mcp.missing_arg", `missing path argument \`${name}\``, { arg: name });
    const value = args[name];
    let text: string;
    if (typeof value === "string") text = value;
    else if (typeof value === "number" && Number.isInteger(value) && Math.abs(value) < 2 ** 53) text = String(value);
    else throw invalid(name, value, `must be a string or an integer below 2^53, not ${kindOf(value)}`);
    const segments = multi ? text.split("/") : [text];
    if (!multi && text.includes("/")) throw invalid(name, value, "must not contain `/`");
    for (const segment of segments) {
      if (segment === "") throw invalid(name, value, multi ? "has an empty segment (a leading, trailing or doubled `/`)" : "must not be empty");
      if (segment === "." || segment === "..") throw invalid(name, value, `must not be \`${segment}\``);
      if (INVISIBLE.test(segment)) throw invalid(name, value, "must not contain a control or invisible formatting character");
    }
    out[name] = text;
  }
  return out;
}

/** The URL path of a route for checked arguments: each segment percent-encoded on its own. */
export function encodePath(route: Pick<Route, "path">, args: Readonly<Record<string, string>>): string {
  return route.path.replace(/\{([a-z_]+)(:path)?\}/g, (_m, name: string, multi?: string) =>
    multi ? args[name]!.split("/").map(encodeURIComponent).join("/") : encodeURIComponent(args[name]!));
}

function invalid(name: string, value: unknown, why: string): ApiError {
  return new ApiError("mcp.invalid_arg", `path argument \`${name}\` ${why}`, { arg: name, value: typeof value === "string" ? value : (JSON.stringify(value) ?? String(value)) });
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "number") return Number.isInteger(value) ? "an integer of 2^53 or more" : "a float";
  if (typeof value === "object") return "an object";
  return `a ${typeof value}`;
}
