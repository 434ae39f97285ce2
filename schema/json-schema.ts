import { z } from "zod";
import { FILE_KINDS, type FileKind } from "./file-kinds.js";

/**
 * One draft-07 JSON Schema per file kind, from the zod schemas (input side, so
 * defaulted keys are optional). Editors running Taplo read them through the
 * `#:schema` line at the top of each file. Returns file name → JSON text.
 *
 * What the compiler checks and JSON Schema can say is said, so Taplo and
 * `hal0 validate` agree: integers are `"type": "integer"`, name grammars and
 * the agent workspace are patterns (its `.`/`..` segments a `not` pattern),
 * and the cross-field rules (a stdio server's command, a remote upstream's
 * url, a model's source, …) are `if`/`then` or `anyOf` from the schemas'
 * `.meta()`. What it cannot say stays the compiler's: cross-file references,
 * and a float with a zero fraction (`port = 8081.0`), which JSON Schema counts
 * as an integer while hal0 refuses every TOML float (compiler/scalars.ts).
 */
/** Where every hal0 schema's `$id` lies: `hal0 schema` removes a stale schema only when it is hal0's. */
export const HAL0_SCHEMA_ID = "https://hal0.dev/schema/";

export function renderJsonSchemas(): Map<string, string> {
  const out = new Map<string, string>();
  for (const kind of FILE_KINDS) out.set(kind.jsonSchema, `${JSON.stringify(jsonSchemaOf(kind), null, 2)}\n`);
  return out;
}

/** One file kind's JSON Schema as an object (what `GET /api/settings/schema` serves for hal0.toml). */
export function jsonSchemaOf(kind: FileKind): Record<string, unknown> {
  const body = integral(z.toJSONSchema(kind.schema, { target: "draft-7", io: "input", unrepresentable: "any" }));
  return { ...body, $id: `${HAL0_SCHEMA_ID}${kind.jsonSchema}`, title: kind.title };
}

/**
 * No hal0 file kind has a float field (compiler/scalars.ts refuses every TOML
 * float), but zod renders an integer literal (`schema_version = 1`) as
 * `"type": "number"`: every number in these schemas is an integer.
 */
function integral<T>(node: T): T {
  if (Array.isArray(node)) return node.map(integral) as T;
  if (typeof node !== "object" || node === null) return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) out[key] = key === "type" && value === "number" ? "integer" : integral(value);
  return out as T;
}
