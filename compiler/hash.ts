import { hash } from "node:crypto";

/**
 * Canonical JSON: object keys sorted at every depth, undefined members dropped,
 * no whitespace. Built natively: JSON.stringify with an allow-list replacer
 * writes each object's keys in the list's order, so the sorted union of every
 * key in `value` yields sorted objects at every depth (arrays keep their order).
 */
export function canonicalJson(value: unknown): string {
  const keys = new Set<string>();
  collectKeys(value, keys);
  return JSON.stringify(value, [...keys].sort()) ?? "null";
}

function collectKeys(value: unknown, into: Set<string>): void {
  if (value === null || typeof value !== "object") return;
  if (Array.isArray(value)) {
    for (const item of value) if (item !== null && typeof item === "object") collectKeys(item, into);
    return;
  }
  for (const key of Object.keys(value)) {
    into.add(key);
    collectKeys((value as Record<string, unknown>)[key], into);
  }
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
