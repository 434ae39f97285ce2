import { execFile } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { captureIo } from "./helpers.js";

const ROOT = join(import.meta.dirname, "../..");
const run = promisify(execFile);

function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "hal0-validate-"));
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(join(dir, rel, ".."), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return dir;
}

const BROKEN = {
  "slots/chat.toml": `profile = "rocmm"\nport = 8081\ntype = "llm"\nenabled = false\n`,
  "slots/embed.toml": `profile = "vulkan"\nport = "8082"\n`,
};

describe("hal0 validate (in process)", () => {
  it("prints compiler-style diagnostics with a code frame, detail and summary, exit 1", async () => {
    const dir = tree(BROKEN);
    const io = captureIo({}, dir);
    expect(await main(["validate", "--config", dir], io)).toBe(1);
    expect(io.out()).toContain(`slots/chat.toml:1:11: error[slot.unknown_profile]: unknown profile \`rocmm\`
   1 | profile = "rocmm"
     |           ^^^^^^^
   = No profile \`rocmm\` in profiles.toml or the built-in seeds. Did you mean \`rocm\`?`);
    expect(io.out()).toContain("slots/embed.toml:2:8: error[config.invalid_type]: expected an integer, found a string");
    expect(io.out().trimEnd().split("\n").at(-1)).toBe(".: 2 errors");
    expect(io.out()).not.toContain("\u001b[");
  });

  it("--json prints the stable document", async () => {
    const dir = tree(BROKEN);
    const io = captureIo();
    expect(await main(["validate", "--config", dir, "--json"], io)).toBe(1);
    const doc = JSON.parse(io.out());
    expect(Object.keys(doc)).toEqual(["valid", "error_count", "warning_count", "diagnostics"]);
    expect(doc).toMatchObject({ valid: false, error_count: 2, warning_count: 0 });
    expect(doc.diagnostics[0]).toEqual({
      code: "slot.unknown_profile", severity: "error", summary: "unknown profile `rocmm`",
      detail: "No profile `rocmm` in profiles.toml or the built-in seeds. Did you mean `rocm`?",
      file: "slots/chat.toml", line: 1, column: 11, path: ["profile"], related: [],
    });
  });

  it("adds GitHub annotations under GITHUB_ACTIONS=true", async () => {
    const dir = tree(BROKEN);
    const io = captureIo({ GITHUB_ACTIONS: "true" }, dir);
    await main(["validate", "--config", dir], io);
    expect(io.out()).toContain("::error file=slots/chat.toml,line=1,col=11,title=slot.unknown_profile::[slot.unknown_profile] unknown profile `rocmm`.");
  });

  it("colours only a TTY, and never with NO_COLOR", async () => {
    const dir = tree(BROKEN);
    const tty = captureIo({}, dir);
    (tty.stdout as { isTTY: boolean }).isTTY = true;
    await main(["validate", "--config", dir], tty);
    expect(tty.out()).toContain("\u001b[31merror\u001b[0m");
    const noColor = captureIo({ NO_COLOR: "1" }, dir);
    (noColor.stdout as { isTTY: boolean }).isTTY = true;
    await main(["validate", "--config", dir], noColor);
    expect(noColor.out()).not.toContain("\u001b[");
  });

  it("exits 0 on an empty tree, 2 on usage errors with one line", async () => {
    expect(await main(["validate", "--config", tree({})], captureIo())).toBe(0);
    for (const args of [["validate", "--bogus"], ["validate", "--config", "/nonexistent/hal0"], ["validate", "extra"], ["frobnicate"]]) {
      const io = captureIo();
      expect(await main(args, io), args.join(" ")).toBe(2);
      expect(io.err().trimEnd().split("\n")).toHaveLength(1);
    }
  });

  it("finds the config folder through HAL0_CONFIG and HAL0_HOME", async () => {
    const dir = tree(BROKEN);
    expect(await main(["validate"], captureIo({ HAL0_CONFIG: dir }))).toBe(1);
    const home = tree({ "etc/hal0/slots/a.toml": `profile = "rocm"\nport = 8081\nenabled = false\n` });
    expect(await main(["validate"], captureIo({ HAL0_HOME: home }))).toBe(0);
  });
});

describe("the hal0 binary", () => {
  it("validates fixtures/box: exit 0", async () => {
    const { stdout } = await run("node", [join(ROOT, "bin/hal0.js"), "validate", "--config", "fixtures/box"], { cwd: ROOT });
    expect(stdout.trim()).toBe("fixtures/box: valid");
  });

  it("exits 1 on an invalid tree and 2 on a missing folder", async () => {
    const bad = await run("node", [join(ROOT, "bin/hal0.js"), "validate", "--config", tree(BROKEN)]).catch((e: { code: number }) => e);
    expect((bad as { code: number }).code).toBe(1);
    const missing = await run("node", [join(ROOT, "bin/hal0.js"), "validate", "--config", "/nonexistent"]).catch((e: { code: number; stderr: string }) => e);
    expect((missing as { code: number }).code).toBe(2);
    expect((missing as { stderr: string }).stderr).toBe("hal0 validate: config folder not found: /nonexistent\n");
  });
});
