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

/** `value` with every object's keys in sorted order: `value` itself when they already are. */
function sortedKeys(value: unknown): unknown {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const sorted = sortedKeys(item);
      if (sorted !== item) (copy ??= value.slice())[i] = sorted;
    }
    return copy ?? value;
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return sortedKeys((value as { toJSON: () => unknown }).toJSON());
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  let inOrder = true;
  for (let i = 1; i < keys.length && inOrder; i++) inOrder = keys[i - 1]! < keys[i]!;
  let children: unknown[] | undefined;
  for (let i = 0; i < keys.length; i++) {
    const child = record[keys[i]!];
    const sorted = sortedKeys(child);
    if (sorted !== child) (children ??= keys.map((k) => record[k]))[i] = sorted;
  }
  if (inOrder && children === undefined) return value;
  const order = keys.map((_, i) => i);
  if (!inOrder) order.sort((a, b) => (keys[a]! < keys[b]! ? -1 : 1));
  // A null-prototype copy: a `__proto__` key is an own member like any other.
  const out: Record<string, unknown> = Object.create(null);
  for (const i of order) out[keys[i]!] = children === undefined ? record[keys[i]!] : children[i];
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
