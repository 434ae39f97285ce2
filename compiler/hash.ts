import { hash } from "node:crypto";

/**
 * Canonical JSON: object keys sorted at every depth, undefined members dropped,
 * no whitespace. The value is copied only where an object's keys are out of
 * order (a sorted subtree, such as a slot's spec, is used as it is), then
 * written by the native JSON.stringify. Values JSON cannot write are dropped
 * as JSON.stringify drops them; a value with `toJSON` (a Date) is written as
 * its `toJSON` gives it.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortedKeys(value)) ?? "null";
}

/**
 * `value` with every object's keys in sorted order: `value` itself when they
 * already are. Written for code that runs once per process (a CLI's plan id),
 * where V8 has not optimised it yet: indexed loops (an iterator allocates a
 * result per step there), primitives skipped without a call, the few keys of
 * an object insertion-sorted by index, and a plain object for the copy (a
 * null-prototype one, a dictionary from the start, only for a `__proto__` key).
 */
function sortedKeys(value: unknown): unknown {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === null || typeof item !== "object") continue;
      const sorted = sortedKeys(item);
      if (sorted !== item) (copy ??= value.slice())[i] = sorted;
    }
    return copy ?? value;
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return sortedKeys((value as { toJSON: () => unknown }).toJSON());
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const n = keys.length;
  let inOrder = true;
  let children: unknown[] | undefined;
  for (let i = 0; i < n; i++) {
    if (inOrder && i > 0 && !(keys[i - 1]! < keys[i]!)) inOrder = false;
    const child = record[keys[i]!];
    if (child === null || typeof child !== "object") continue;
    const sorted = sortedKeys(child);
    if (sorted === child) continue;
    if (children === undefined) {
      children = new Array<unknown>(n);
      for (let j = 0; j < n; j++) children[j] = record[keys[j]!];
    }
    children[i] = sorted;
  }
  if (inOrder && children === undefined) return value;
  const order = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    let j = i;
    for (; j > 0 && keys[order[j - 1]!]! > keys[i]!; j--) order[j] = order[j - 1]!;
    order[j] = i;
  }
  const out: Record<string, unknown> = keys.includes("__proto__") ? Object.create(null) : {};
  for (let k = 0; k < n; k++) {
    const i = order[k]!;
    out[keys[i]!] = children === undefined ? record[keys[i]!] : children[i];
  }
  return out;
}

export function sha256(text: string): string {
  return hash("sha256", text, "hex");
}

/** `sha256:<hex>` of the canonical JSON of `value`. */
export function hashOf(value: unknown): string {
  return `sha256:${sha256(canonicalJson(value))}`;
}

/**
 * sha256 hex of a secret: hal0's tokens, login codes and session cookies carry
 * 192 bits of randomness, so a fast hash is enough. The token store keeps
 * only these.
 */
export function hashSecret(secret: string): string {
  return sha256(secret);
}

/**
 * A short, non-reversible fingerprint of a secret. The Hermes wiring compares
 * these (the token hal0 hands on against the bearer in a profile file), so
 * plans and the planner never carry the token itself.
 */
export function fingerprint(secret: string): string {
  return hashSecret(`fingerprint:${secret}`).slice(0, 16);
}

/** Deep equality of JSON-like values (key order ignored). */
export function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== "object" || typeof b !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && same((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
