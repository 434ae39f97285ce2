import { ApiError } from "./errors.js";

/**
 * How deep a request's JSON may nest (objects and arrays; the body itself is
 * level 1). Far above anything hal0 takes (a plan edit's table value is a
 * handful of levels); below what the recursive code behind the routes
 * (ChangeSet paths, redaction, restoring masked values) and JSON.stringify
 * can walk without running out of stack.
 */
export const MAX_DEPTH = 64;

/** Keys that name an object's prototype machinery: never data, refused anywhere in a body or a tool's arguments. */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);

/** At most this many forbidden keys are named in one refusal. */
const MAX_NAMED = 20;

interface Frame {
  readonly value: object;
  /** Own keys of an object; null for an array (walked by index). */
  readonly keys: readonly string[] | null;
  /** The key this container sits under in its parent (undefined for the root). */
  readonly key: string | number | undefined;
  next: number;
}

/**
 * Whether a parsed JSON value may go on to a route or a tool: nested no
 * deeper than {@link MAX_DEPTH} (`request.too_deep`, 400) and without a
 * `__proto__`, `constructor` or `prototype` key at any depth
 * (`validation.invalid`, 422, `details.fields` naming each path under
 * `root`). The walk is iterative, holds one frame per level and stops at
 * the first level too deep, so it is safe on any input `JSON.parse` made.
 * `undefined` when the value is fine.
 */
export function inputRefusal(value: unknown, root: readonly string[] = ["body"]): ApiError | undefined {
  if (!isContainer(value)) return undefined;
  const frames: Frame[] = [frameOf(value, undefined)];
  const named: string[][] = [];
  const pathTo = (key: string | number): string[] => [...root, ...frames.slice(1).map((f) => String(f.key)), String(key)];
  while (frames.length > 0) {
    const f = frames[frames.length - 1]!;
    const size = f.keys === null ? (f.value as unknown[]).length : f.keys.length;
    if (f.next >= size) {
      frames.pop();
      continue;
    }
    const key = f.keys === null ? f.next : f.keys[f.next]!;
    f.next++;
    if (typeof key === "string" && FORBIDDEN_KEYS.has(key) && named.length < MAX_NAMED) named.push(pathTo(key));
    // An own `__proto__` (JSON.parse makes one) shadows the accessor: this reads the data, never the prototype.
    const child = (f.value as Record<string | number, unknown>)[key];
    if (!isContainer(child)) continue;
    if (frames.length >= MAX_DEPTH) {
      const loc = pathTo(key);
      return new ApiError("request.too_deep", `the JSON nests deeper than ${MAX_DEPTH} levels (at ${shortLoc(loc)})`, { max_depth: MAX_DEPTH, loc: loc.slice(0, root.length + 8) });
    }
    frames.push(frameOf(child, key));
  }
  if (named.length === 0) return undefined;
  const fields = named.map((loc) => ({ loc, msg: `the key ${JSON.stringify(loc[loc.length - 1])} is not allowed: it names the object prototype, never data`, type: "forbidden_key" }));
  return new ApiError("validation.invalid", `invalid request: ${fields.map((f) => `${f.loc.join(".")}: forbidden key`).join("; ")}`, { fields });
}

/**
 * Why `JSON.parse` refused a text, without the text: V8 quotes it around the fault (`Unexpected token 's', "{"value": sk-…"...
 * is not valid JSON`), so a credential sent without its quotes, or a document fetched for a caller, would come back in a reply.
 */
export function jsonFault(err: unknown): string {
  return (err as Error).message.replace(/, (?:\.\.\.)?"[\s\S]*"(?:\.\.\.)? is not valid JSON$/, "");
}

/**
 * Refuses a query string with a `__proto__`, `constructor` or `prototype`
 * parameter (`validation.invalid`, 422, `details.fields` naming `query.<key>`),
 * as a body with such a key is refused. h3's query reader drops the first two
 * without a word, so `?__proto__=x` would otherwise reach the route as if it
 * had never been sent. `search` is the raw query, with or without its `?`.
 */
export function queryRefusal(search: string): ApiError | undefined {
  const named = new Set<string>();
  for (const pair of search.replace(/^\?/, "").split("&")) {
    const raw = pair.split("=", 1)[0]!;
    if (raw === "") continue;
    const key = decodeQueryKey(raw);
    if (FORBIDDEN_KEYS.has(key)) named.add(key);
  }
  if (named.size === 0) return undefined;
  const fields = [...named].map((key) => ({ loc: ["query", key], msg: `the parameter ${JSON.stringify(key)} is not allowed: it names the object prototype, never data`, type: "forbidden_key" }));
  return new ApiError("validation.invalid", `invalid request: ${fields.map((f) => `${f.loc.join(".")}: forbidden key`).join("; ")}`, { fields });
}

/** A query key as h3 (ufo) decodes it: `+` is a space, then percent-decoding (a broken escape left as it is). */
function decodeQueryKey(raw: string): string {
  const text = raw.replace(/\+/g, " ");
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** `JSON.parse`, then {@link inputRefusal}: a body that is not JSON is `request.invalid_json`; one a route must not see is refused. */
export function parseJsonInput(text: string, root: readonly string[] = ["body"]): unknown {
  let value: unknown;
  try {
    // V8's JSON.parse does not recurse on the native stack: any nesting parses, and is judged after.
    value = JSON.parse(text);
  } catch (err) {
    throw new ApiError("request.invalid_json", `the body is not JSON: ${jsonFault(err)}`);
  }
  const refusal = inputRefusal(value, root);
  if (refusal) throw refusal;
  return value;
}

function frameOf(value: object, key: string | number | undefined): Frame {
  return { value, keys: Array.isArray(value) ? null : Object.keys(value), key, next: 0 };
}

function isContainer(v: unknown): v is object {
  return typeof v === "object" && v !== null;
}

/** `body.tune.a.a.…` — a path too deep to print whole, cut after its first levels. */
function shortLoc(loc: readonly string[]): string {
  return loc.length <= 6 ? loc.join(".") : `${loc.slice(0, 5).join(".")}.…`;
}
