import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { renderJsonSchemas } from "../../schema/index.js";
import { captureIo } from "./helpers.js";

describe("hal0 schema", () => {
  it("writes one schema per file kind to --out and removes hal0's stale ones, never another's schema", async () => {
    const out = mkdtempSync(join(tmpdir(), "hal0-schema-"));
    writeFileSync(join(out, "old.schema.json"), JSON.stringify({ $id: "https://hal0.dev/schema/old.schema.json", type: "object" }));
    // --out may name a folder of other schemas (an editor's, another tool's): not hal0's to remove.
    writeFileSync(join(out, "package.schema.json"), JSON.stringify({ $id: "https://json.schemastore.org/package.json", type: "object" }));
    writeFileSync(join(out, "notes.schema.json"), "not json");
    writeFileSync(join(out, "keep.txt"), "mine");
    const io = captureIo();
    expect(await main(["schema", "--out", out], io)).toBe(0);
    const expected = renderJsonSchemas();
    expect(readdirSync(out).sort()).toEqual([...expected.keys(), "keep.txt", "notes.schema.json", "package.schema.json"].sort());
    for (const [name, text] of expected) expect(readFileSync(join(out, name), "utf8")).toBe(text);
    expect(io.out()).toContain(`wrote ${expected.size} JSON Schemas to ${out}`);
  });
});
