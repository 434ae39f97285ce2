import { cpSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { boxCommand } from "./helpers.js";

/**
 * A tree that compiles with a warning (a .toml file hal0 does not read): `hal0 validate` lists it, and so do
 * `hal0 plan` and `hal0 apply` with their plan — after it in text, as `diagnostics` under `plan --json` — with
 * the exit status of the plan alone.
 */
const BOX = join(import.meta.dirname, "../../fixtures/box");

describe("a plan of a tree with warnings", () => {
  let base: string;
  let run: ReturnType<typeof boxCommand>;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), "hal0-plan-warnings-"));
    cpSync(BOX, join(base, "box"), { recursive: true });
    writeFileSync(join(base, "box", "extra.toml"), "x = 1\n");
    run = boxCommand(join(base, "box"), join(base, "state"));
  });

  it("hal0 plan prints them after the plan, and --detailed-exitcode still says 2 for changes", async () => {
    const { code, out } = await run("plan", "--detailed-exitcode");
    expect(code).toBe(2);
    const summary = out.indexOf("Plan: ");
    const warning = out.indexOf("extra.toml:1:1: warning[config.unknown_file]: hal0 does not read extra.toml");
    expect(summary).toBeGreaterThanOrEqual(0);
    expect(warning).toBeGreaterThan(summary);
    expect(out).toContain("1 warning in the configuration");
  });

  it("hal0 plan --json carries them as diagnostics, and the document still applies with --plan", async () => {
    const { code, out } = await run("plan", "--json", "--detailed-exitcode");
    expect(code).toBe(2);
    const doc = JSON.parse(out);
    expect(doc.has_changes).toBe(true);
    expect(doc.diagnostics).toEqual([expect.objectContaining({ code: "config.unknown_file", severity: "warning", file: "extra.toml", line: 1, column: 1 })]);
    // What a pipe would hand apply (hal0 plan --json | hal0 apply --plan /dev/stdin): the plan, not refused as edited.
    const saved = join(base, "plan.json");
    writeFileSync(saved, out);
    const applied = await run("apply", "--plan", saved);
    expect(applied.err).not.toContain("plan.invalid");
    // No terminal to confirm on: refused after the plan (and its warnings) was shown, nothing applied.
    expect(applied.code).toBe(64);
    expect(applied.out).toContain("warning[config.unknown_file]");
  });

  it("hal0 plan --out saves the plan alone", async () => {
    const saved = join(base, "out.json");
    const { code } = await run("plan", "--out", saved);
    expect(code).toBe(0);
    expect(JSON.parse(readFileSync(saved, "utf8")).diagnostics).toBeUndefined();
  });
});
