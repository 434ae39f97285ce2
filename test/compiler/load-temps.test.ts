import { cpSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compile, loadTree } from "../../compiler/index.js";

const FIXTURE_BOX = join(import.meta.dirname, "../../fixtures/box");

describe("loadTree: temp files are not part of the tree (issue 16)", () => {
  it("ignores hal0's temps and any dotfile, even one ending in .toml, so none becomes a diagnostic", async () => {
    const root = mkdtempSync(join(tmpdir(), "hal0-load-"));
    cpSync(FIXTURE_BOX, root, { recursive: true });
    const clean = await loadTree(root);
    const partial = "profile = \"llama-cpu\"\nmodel = "; // a copy cut off mid-write: a parse error if it were read
    for (const name of [
      `slots/.chat.toml.${process.pid}.0123456789ab.hal0.tmp`, // hal0's own (reconciler/atomic.ts)
      "slots/.chat.toml.0123456789ab.tmp", // hal0's before the pid was in the name
      "slots/.chat.toml", // an editor's or sync tool's hidden copy
      "stacks/.#dev.toml",
      ".hal0.toml",
    ]) writeFileSync(join(root, name), partial);
    const loaded = await loadTree(root);
    expect([...loaded.tree.files.keys()]).toEqual([...clean.tree.files.keys()]);
    expect(loaded.diagnostics).toEqual([]);
    const { model, diagnostics } = compile(loaded.tree, loaded.diagnostics);
    expect(model).toBeDefined();
    expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);
  });
});
