import { z } from "zod";
import { FILE_KINDS } from "./file-kinds.js";

/**
 * One draft-07 JSON Schema per file kind, from the zod schemas (input side, so
 * defaulted keys are optional). Editors running Taplo read them through the
 * `#:schema` line at the top of each file. Returns file name → JSON text.
 */
export function renderJsonSchemas(): Map<string, string> {
  const out = new Map<string, string>();
  for (const kind of FILE_KINDS) {
    const body = z.toJSONSchema(kind.schema, { target: "draft-7", io: "input", unrepresentable: "any" });
    const doc = { ...body, $id: `https://hal0.dev/schema/${kind.jsonSchema}`, title: kind.title };
    out.set(kind.jsonSchema, `${JSON.stringify(doc, null, 2)}\n`);
  }
  return out;
}
