import { createHash } from "node:crypto";

/** Canonical JSON: object keys sorted at every depth, undefined members dropped, no whitespace. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) {
    // Flat arrays of scalars (argv, lists of names) are the bulk of a spec: one native call.
    if (value.every((v) => v === null || typeof v !== "object")) return JSON.stringify(value);
    let out = "[";
    for (let i = 0; i < value.length; i++) out += (i > 0 ? "," : "") + canonicalJson(value[i]);
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  let out = "{";
  for (const key of keys) {
    const member = record[key];
    if (member === undefined) continue;
    out += `${out.length > 1 ? "," : ""}${JSON.stringify(key)}:${canonicalJson(member)}`;
  }
  return `${out}}`;
}

export function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** `sha256:<hex>` of the canonical JSON of `value`. */
export function hashOf(value: unknown): string {
  return `sha256:${sha256(canonicalJson(value))}`;
}
