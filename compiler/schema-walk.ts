import type { z } from "zod";
import type { KeyPath } from "../schema/index.js";

/**
 * Reads the shape of a zod schema at a key path: which keys a table may have
 * (for "did you mean") and which pattern a string or record key must match
 * (to explain a refused name). Wrappers (optional, default, …) are unwrapped.
 */
type Def = { type: string; format?: string; innerType?: z.ZodType; in?: z.ZodType; shape?: Record<string, z.ZodType>; valueType?: z.ZodType; keyType?: z.ZodType; element?: z.ZodType };

function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  for (;;) {
    const def = defOf(current);
    const inner = def.innerType ?? (def.type === "pipe" ? def.in : undefined);
    if (!inner) return current;
    current = inner;
  }
}

function childAt(schema: z.ZodType, key: string | number): z.ZodType | undefined {
  const def = defOf(unwrap(schema));
  if (def.type === "object") return def.shape?.[String(key)];
  if (def.type === "record") return def.valueType;
  if (def.type === "array") return def.element;
  return undefined;
}

function schemaAt(schema: z.ZodType, path: KeyPath): z.ZodType | undefined {
  let current: z.ZodType | undefined = schema;
  for (const key of path) {
    if (!current) return undefined;
    current = childAt(current, key);
  }
  return current;
}

/** The keys a table at `path` may have, sorted. */
export function keysAt(schema: z.ZodType, path: KeyPath): string[] {
  const at = schemaAt(schema, path);
  if (!at) return [];
  const def = defOf(unwrap(at));
  return def.type === "object" ? Object.keys(def.shape ?? {}).sort() : [];
}

/** The pattern of the string at `path`, or of the record key at `path` when `isKey`. */
export function patternAt(schema: z.ZodType, path: KeyPath, isKey: boolean): RegExp | undefined {
  const target = isKey ? keyTypeAt(schema, path) : schemaAt(schema, path);
  if (!target) return undefined;
  const checks = (unwrap(target) as unknown as { _zod: { def: { checks?: Array<{ _zod: { def: { format?: string; pattern?: RegExp } } }> } } })._zod.def.checks ?? [];
  return checks.map((c) => c._zod.def).find((d) => d.format === "regex")?.pattern;
}

function keyTypeAt(schema: z.ZodType, path: KeyPath): z.ZodType | undefined {
  const parent = schemaAt(schema, path.slice(0, -1));
  return parent ? defOf(unwrap(parent)).keyType : undefined;
}

/** True when the value at `path` must be an integer (`z.int()`), so messages can say so. */
export function isIntegerAt(schema: z.ZodType, path: KeyPath): boolean {
  const at = schemaAt(schema, path);
  return at !== undefined && /int/.test(defOf(unwrap(at)).format ?? "");
}
