import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { boxCommand, captureIo } from "./helpers.js";

/**
 * A refusal quotes the name it was given (an argument, a file's name) as it was given: its control characters are
 * written out (`\u001b`) in what hal0 prints, so a name cannot recolour, clear or rewrite the terminal it is read on.
 */
const BOX = join(import.meta.dirname, "../../fixtures/box");
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/;

describe("a CLI refusal quoting a name with control characters", () => {
  let run: ReturnType<typeof boxCommand>;

  beforeAll(() => {
    const base = mkdtempSync(join(tmpdir(), "hal0-printable-"));
    cpSync(BOX, join(base, "box"), { recursive: true });
    run = boxCommand(join(base, "box"), join(base, "state"));
  });

  it("hal0 status of an unknown slot named with an escape sequence", async () => {
    const { code, err } = await run("status", "a\u001b[31mb\r\u202ec");
    expect(code).toBe(1);
    expect(err).toContain("slot.not_found");
    expect(err).toContain("a\\u001b[31mb\\u000d\\u202ec");
    expect(err.slice(0, -1)).not.toMatch(RAW);
    expect(err.endsWith("\n")).toBe(true);
  });

  it("the same under --json, in the diagnostic's message", async () => {
    const { code, out } = await run("status", "a\u001b[2J", "--json");
    expect(code).toBe(1);
    const doc = JSON.parse(out);
    expect(doc.diagnostics[0].code).toBe("slot.not_found");
    expect(doc.diagnostics[0].detail).toContain("a\\u001b[2J");
    expect(doc.diagnostics[0].detail).not.toMatch(RAW);
  });

  it("an unknown command", async () => {
    const io = captureIo();
    expect(await main(["x\u001b]0;title\u0007"], io)).toBe(64);
    expect(io.err()).toContain("unknown command 'x\\u001b]0;title\\u0007'");
    expect(io.err()).not.toMatch(RAW);
  });

  it("hal0 validate of a file named with an escape sequence, and of a line the parser refused for one", async () => {
    const base = mkdtempSync(join(tmpdir(), "hal0-printable-tree-"));
    const config = join(base, "box");
    mkdirSync(join(config, "slots"), { recursive: true });
    writeFileSync(join(config, "hal0.toml"), "[meta]\nschema_version = 1\n# hi \u001b]0;title\u0007 there\n");
    writeFileSync(join(config, "slots", "a\u001b[31mb.toml"), "x = 1\n");
    const { code, out, err } = await boxCommand(config, join(base, "state"), { GITHUB_ACTIONS: "true" })("validate");
    expect(code).toBe(1);
    expect(out).not.toMatch(RAW);
    expect(err).not.toMatch(RAW);
    expect(out).toContain("slots/a\\u001b[31mb.toml:1:1: error[");
    // The refused line shown with its escapes, the caret under the first.
    expect(out).toContain("   3 | # hi \\u001b]0;title\\u0007 there\n     |      ^");
    // The pull request's annotations too.
    expect(out).toMatch(/::error file=[^\n]*slots\/a\\u001b\[31mb\.toml,/);
  });

  it("hal0 plan's warnings after the plan, and hal0 reconcile --once's report, name such a file escaped", async () => {
    const base = mkdtempSync(join(tmpdir(), "hal0-printable-plan-"));
    cpSync(BOX, join(base, "box"), { recursive: true });
    writeFileSync(join(base, "box", "x\u001b[31m.toml"), "x = 1\n");
    const plan = await boxCommand(join(base, "box"), join(base, "state"))("plan");
    expect(plan.code).toBe(0);
    expect(plan.out).toContain("x\\u001b[31m.toml:1:1: warning[config.unknown_file]");
    expect(plan.out).not.toMatch(RAW);
    const broken = join(base, "broken");
    mkdirSync(join(broken, "slots"), { recursive: true });
    writeFileSync(join(broken, "hal0.toml"), "[meta]\nschema_version = 1\n");
    writeFileSync(join(broken, "slots", "a\u001b[31m.toml"), "x = 1\n");
    const sweep = await boxCommand(broken, join(base, "state2"))("reconcile", "--once");
    expect(sweep.code).toBe(1);
    expect(sweep.out).toContain("slots/a\\u001b[31m.toml:1:1: error[config.invalid_name]");
    expect(sweep.out).not.toMatch(RAW);
  });
});
