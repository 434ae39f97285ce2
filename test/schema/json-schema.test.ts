import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FILE_KINDS, renderJsonSchemas } from "../../schema/index.js";

const committed = join(import.meta.dirname, "../../schema/json");

describe("committed JSON Schemas", () => {
  const rendered = renderJsonSchemas();

  it("has one schema per file kind", () => {
    expect([...rendered.keys()].sort()).toEqual(FILE_KINDS.map((k) => k.jsonSchema).sort());
  });

  it("are current: `npm run schema` regenerates schema/json/", () => {
    const onDisk = readdirSync(committed).filter((f) => f.endsWith(".schema.json")).sort();
    expect(onDisk).toEqual([...rendered.keys()].sort());
    for (const [name, text] of rendered) {
      expect(readFileSync(join(committed, name), "utf8"), `${name} is stale: run npm run schema`).toBe(text);
    }
  });

  it("are draft-07, strict, and keep defaulted keys optional (input side)", () => {
    const slot = JSON.parse(rendered.get("slot.schema.json")!);
    expect(slot.$schema).toBe("http://json-schema.org/draft-07/schema#");
    expect(slot.additionalProperties).toBe(false);
    expect(slot.required.sort()).toEqual(["port", "profile"]);
    expect(slot.properties.priority).toMatchObject({ minimum: 0, maximum: 100, default: 50 });
    const settings = JSON.parse(rendered.get("hal0.schema.json")!);
    expect(settings.required ?? []).toEqual([]);
    expect(settings.properties.slots.properties.runtime.enum).toEqual(["process", "docker"]);
  });
});
