import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { renderJsonSchemas } from "../../schema/index.js";
import { captureIo } from "./helpers.js";

describe("hal0 schema", () => {
  it("writes one schema per file kind to --out and removes stale ones", async () => {
    const out = mkdtempSync(join(tmpdir(), "hal0-schema-"));
    writeFileSync(join(out, "old.schema.json"), "{}");
    writeFileSync(join(out, "keep.txt"), "mine");
    const io = captureIo();
    expect(await main(["schema", "--out", out], io)).toBe(0);
    const expected = renderJsonSchemas();
    expect(readdirSync(out).sort()).toEqual([...expected.keys(), "keep.txt"].sort());
    for (const [name, text] of expected) expect(readFileSync(join(out, name), "utf8")).toBe(text);
    expect(io.out()).toContain(`wrote ${expected.size} JSON Schemas to ${out}`);
  });
});
