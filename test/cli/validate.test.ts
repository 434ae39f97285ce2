import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { HAL0_BIN } from "../../reconciler/drivers/runner.js";
import { modelKvs, writeGguf } from "../server/gguf-writer.js";
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
  it("an integer too large to hold exactly is named so, not as an integer", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-huge-"));
    try {
      writeFileSync(join(dir, "hal0.toml"), "[server]\nport = 99999999999999999999\n");
      const io = captureIo();
      expect(await main(["validate", "--config", dir], io)).toBe(1);
      expect(io.out()).toContain("hal0.toml:2:8: error[config.invalid_type]: expected an integer, found a number too large to hold exactly (beyond ±2^53)");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

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

  it("a long line's code frame is a window of it around the column, cut with …, the caret under the key or value", async () => {
    const long = `port = "${"y".repeat(50)}" # ${"z".repeat(300)}`;
    const dir = tree({ "hal0.toml": `[server]\n${long}\n`, "slots/s.toml": `port = ${"[".repeat(3000)}${"]".repeat(3000)}\n` });
    const io = captureIo({}, dir);
    expect(await main(["validate", "--config", dir], io)).toBe(1);
    expect(io.out()).toContain(`hal0.toml:2:8: error[config.invalid_type]: expected an integer, found a string
   2 | ${long.slice(0, 120)}…
     |        ^${"^".repeat(51)}
`);
    // A parse error deep in a 6,000-character line: the window starts 40 columns before it; the caret stops at the cut.
    const parse = io.out().split("\n").findIndex((l) => l.includes("error[config.parse_error]"));
    const [head, frame, caret] = io.out().split("\n").slice(parse, parse + 3);
    const column = Number(/^slots\/s\.toml:1:(\d+):/.exec(head!)![1]);
    expect(column).toBeGreaterThan(200);
    expect(head).not.toContain("..");
    expect(frame).toBe(`   1 | …${`port = ${"[".repeat(3000)}`.slice(column - 41, column - 41 + 120)}…`);
    expect(caret).toBe(`     | ${" ".repeat(41)}${"^".repeat(80)}`);
  });

  it("a code frame masks a secret on the line it shows (a parse error beside an API key, an MCP server's env value), the caret still under what is wrong", async () => {
    const dir = tree({
      "slots/chat.toml": `profile = "rocm"\nport = 8081\n[server]\nenv = { API_KEY = "framekey-7f3a" "stray", MODE = fast }\n`,
      "mcp-servers/db.toml": `name = "db"\ntransport = "stdio"\ncommand = "db-mcp"\nenv = { DATABASE_URL = "postgres://u:framepw@db/x", PORT = [1, }\n`,
    });
    for (const args of [["validate"], ["plan", "--state", join(dir, "state")]]) {
      const io = captureIo({}, dir);
      expect(await main([...args, "--config", dir], io)).toBe(1);
      const text = io.out() + io.err();
      expect(text).not.toMatch(/framekey|framepw/);
      const lines = text.split("\n");
      const at = lines.findIndex((l) => l.startsWith("slots/chat.toml:4:"));
      expect(lines[at + 1]).toBe(`   4 | env = { API_KEY = "[redacted]" "stray", MODE = fast }`);
      // The caret stands under `"stray"`, which the parser stopped at, moved with the mask.
      expect(lines[at + 2]!.indexOf("^")).toBe(lines[at + 1]!.indexOf(`"stray"`));
      expect(lines[lines.findIndex((l) => l.startsWith("mcp-servers/db.toml:4:")) + 1]).toContain(`DATABASE_URL = "[redacted]"`);
    }
  });

  it("20,000 diagnostics on one long line print in seconds, each frame a window of the line; the first 200 are listed, the rest counted", async () => {
    const dir = tree({ "stacks/s.toml": `tags = [${Array(20_000).fill("1").join(",")}]\n` });
    const io = captureIo({}, dir);
    const started = Date.now();
    expect(await main(["validate", "--config", dir], io)).toBe(1);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(io.out()).toContain(`stacks/s.toml:1:399: error[config.invalid_type]: expected a string, found an integer
   1 | …${"1,".repeat(60)}…
     | ${" ".repeat(41)}^
   = \`tags.195\` must be a string.`);
    expect(io.out()).not.toContain("tags.200`");
    expect(io.out()).toContain("error[config.too_many_diagnostics]: 19801 more diagnostics not listed");
    expect(io.out().match(/error\[/g)).toHaveLength(201);
    expect(io.out().trimEnd().split("\n").at(-1)).toBe(".: 20001 errors");
  }, 120_000);

  it("--json prints the stable document", async () => {
    const dir = tree(BROKEN);
    const io = captureIo();
    expect(await main(["validate", "--config", dir, "--json"], io)).toBe(1);
    const doc = JSON.parse(io.out());
    expect(Object.keys(doc)).toEqual(["ok", "exit_code", "valid", "error_count", "warning_count", "diagnostics", "runners"]);
    expect(doc).toMatchObject({ ok: false, exit_code: 1, valid: false, error_count: 2, warning_count: 0 });
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

  it("--json under GITHUB_ACTIONS=true: stdout stays the one JSON document, the annotations go to stderr", async () => {
    const dir = tree(BROKEN);
    const io = captureIo({ GITHUB_ACTIONS: "true" }, dir);
    expect(await main(["validate", "--config", dir, "--json"], io)).toBe(1);
    expect(JSON.parse(io.out())).toMatchObject({ ok: false, error_count: 2 });
    expect(io.err()).toContain("::error file=slots/chat.toml,line=1,col=11,title=slot.unknown_profile::");
  });

  it("escapes a GitHub annotation's properties as the runner reads them: a file name with %, : or , keeps its annotation whole", async () => {
    const dir = tree({ "slots/a,b:c%d.toml": "profile = 1\n" });
    const io = captureIo({ GITHUB_ACTIONS: "true" }, dir);
    await main(["validate", "--config", dir], io);
    expect(io.out()).toContain("::error file=slots/a%2Cb%3Ac%25d.toml,line=1,col=11,title=");
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

  it("exits 0 on an empty tree, 64 on usage errors and 1 on a missing config folder, each with one line", async () => {
    expect(await main(["validate", "--config", tree({})], captureIo())).toBe(0);
    for (const [args, exit] of [[["validate", "--bogus"], 64], [["validate", "--config", "/nonexistent/hal0"], 1], [["validate", "extra"], 64], [["frobnicate"], 64]] as const) {
      const io = captureIo();
      expect(await main([...args], io), args.join(" ")).toBe(exit);
      expect(io.err().trimEnd().split("\n")).toHaveLength(1);
    }
  });

  it("--json on a missing config folder: the validate document with one config.not_found error, exit 1", async () => {
    const io = captureIo();
    expect(await main(["validate", "--json", "--config", "/nonexistent/hal0"], io)).toBe(1);
    expect(io.err()).toBe("");
    const doc = JSON.parse(io.out());
    expect(Object.keys(doc)).toEqual(["ok", "exit_code", "valid", "error_count", "warning_count", "diagnostics", "runners"]);
    expect(doc).toMatchObject({ valid: false, error_count: 1, warning_count: 0 });
    expect(doc.diagnostics).toEqual([{
      code: "config.not_found", severity: "error", summary: "config folder not found: /nonexistent/hal0", detail: expect.stringContaining("/nonexistent/hal0"),
      file: null, line: null, column: null, path: [], related: [],
    }]);
  });

  it("finds the config folder through HAL0_CONFIG and HAL0_HOME", async () => {
    const dir = tree(BROKEN);
    expect(await main(["validate"], captureIo({ HAL0_CONFIG: dir }))).toBe(1);
    const home = tree({ "etc/hal0/slots/a.toml": `profile = "rocm"\nport = 8081\nenabled = false\n` });
    expect(await main(["validate"], captureIo({ HAL0_HOME: home }))).toBe(0);
  });
});

/** Trees that compile but would fail at apply: a runner no PATH has, a model file that is not there. */
const NO_RUNNER = {
  "profiles.toml": `[profile.fake]\nrunner = ["no-such-runner-xyz"]\ndevice_class = "cpu"\n`,
  "models.toml": `[model.tiny]\npath = "tiny.gguf"\n`,
  "tiny.gguf": "GGUF",
  "slots/chat.toml": `profile = "fake"\nmodel = "tiny"\nport = 8081\n`,
};
const NO_MODEL = {
  ...NO_RUNNER,
  "profiles.toml": `[profile.fake]\nrunner = ["hal0-fake-llama-server"]\ndevice_class = "cpu"\n`,
  "models.toml": `[model.tiny]\npath = "models/nope.gguf"\n`,
};

describe("hal0 validate: the host checks after the compile", () => {
  it("warns (exit 0) of a runner on no PATH nor hal0's bin/, at profiles.toml's runner key", async () => {
    const dir = tree(NO_RUNNER);
    const io = captureIo({}, dir);
    expect(await main(["validate", "--config", dir], io)).toBe(0);
    expect(io.out()).toContain(`profiles.toml:2:10: warning[slot.runner_missing]: the runner \`no-such-runner-xyz\` of slot chat is not on PATH nor in hal0's bin/
   2 | runner = ["no-such-runner-xyz"]`);
    expect(io.out()).toContain(`${HAL0_BIN}. Install it, put its folder on hal0's PATH, or set profile \`fake\`'s runner (profiles.toml)`);
    expect(io.out().trimEnd().split("\n").at(-1)).toBe(".: valid (1 warning)");
  });

  it("warns (exit 0) of a model file that does not exist, at models.toml's path, naming the file", async () => {
    const dir = tree(NO_MODEL);
    const io = captureIo({}, dir);
    expect(await main(["validate", "--config", dir], io)).toBe(0);
    expect(io.out()).toContain(`models.toml:2:8: warning[slot.model_missing]: the model file of slot chat does not exist: ${join(dir, "models/nope.gguf")}`);
    expect(io.out()).toContain("related: slots/chat.toml:2:9: slot chat serves model `tiny`");
  });

  it("--strict makes them errors: exit 1; --json lists them as diagnostics", async () => {
    for (const files of [NO_RUNNER, NO_MODEL]) {
      const dir = tree(files);
      const strict = captureIo({}, dir);
      expect(await main(["validate", "--config", dir, "--strict"], strict)).toBe(1);
      expect(strict.out()).toMatch(/error\[slot\.(runner_missing|model_missing)\]/);
      expect(strict.out().trimEnd().split("\n").at(-1)).toBe(".: 1 error");
    }
    const json = captureIo();
    expect(await main(["validate", "--config", tree(NO_MODEL), "--json"], json)).toBe(0);
    const doc = JSON.parse(json.out());
    expect(doc).toMatchObject({ ok: true, exit_code: 0, valid: true, error_count: 0, warning_count: 1 });
    expect(doc.diagnostics[0]).toMatchObject({ code: "slot.model_missing", severity: "warning", file: "models.toml", line: 2, column: 8, path: ["model", "tiny", "path"] });
    expect(Object.keys(doc.diagnostics[0]).sort()).toEqual(["code", "column", "detail", "file", "line", "path", "related", "severity", "summary"]);
    const strictJson = captureIo();
    expect(await main(["validate", "--config", tree(NO_RUNNER), "--json", "--strict"], strictJson)).toBe(1);
    expect(JSON.parse(strictJson.out())).toMatchObject({ ok: false, exit_code: 1, valid: false, error_count: 1, warning_count: 0, diagnostics: [{ code: "slot.runner_missing", severity: "error", file: "profiles.toml", line: 2, column: 10 }] });
  });

  it("warns of a ctx_size above the GGUF's training context and of a models.toml fact its header contradicts; --strict: errors", async () => {
    const dir = tree({
      ...NO_MODEL,
      "models.toml": `[model.tiny]\npath = "tiny.gguf"\ncontext_length = 32768\n`,
      "slots/chat.toml": `profile = "fake"\nmodel = "tiny"\nport = 8081\n[tune]\nctx_size = 16384\n`,
    });
    writeGguf(join(dir, "tiny.gguf"), { kvs: modelKvs({ arch: "llama", ctx: 8192 }) });
    const io = captureIo({}, dir);
    expect(await main(["validate", "--config", dir], io)).toBe(0);
    expect(io.out()).toContain(`models.toml:3:18: warning[slot.model_fact_mismatch]: models.toml says context_length = 32768 for model \`tiny\` (slot chat), but its GGUF header says 8192 (llama.context_length in ${join(dir, "tiny.gguf")})`);
    expect(io.out()).toContain(`slots/chat.toml:5:12: warning[slot.ctx_exceeds_training]: slot chat asks ctx_size 16384 > the model's training context 8192 (n_ctx_train in ${join(dir, "tiny.gguf")})`);
    expect(io.out().trimEnd().split("\n").at(-1)).toBe(".: valid (2 warnings)");
    const strict = captureIo({}, dir);
    expect(await main(["validate", "--config", dir, "--strict"], strict)).toBe(1);
    expect(strict.out()).toContain("error[slot.ctx_exceeds_training]");
    expect(strict.out().trimEnd().split("\n").at(-1)).toBe(".: 2 errors");
  });
});

describe("the hal0 binary", () => {
  it("validate --strict of a tree whose runner is not installed: exit 1; without --strict: 0", async () => {
    const dir = tree(NO_RUNNER);
    const warned = await run("node", [join(ROOT, "bin/hal0.js"), "validate", "--config", dir]);
    expect(warned.stdout).toContain("warning[slot.runner_missing]");
    const strict = await run("node", [join(ROOT, "bin/hal0.js"), "validate", "--strict", "--config", dir]).catch((e: { code: number; stdout: string }) => e);
    expect((strict as { code: number }).code).toBe(1);
    expect((strict as { stdout: string }).stdout).toContain("error[slot.runner_missing]");
  });

  it("validates fixtures/box: exit 0; with no runner facts cached it says so on stderr, and asks no runner", async () => {
    const state = mkdtempSync(join(tmpdir(), "hal0-validate-state-"));
    const { stdout, stderr } = await run("node", [join(ROOT, "bin/hal0.js"), "validate", "--config", "fixtures/box", "--state", state], { cwd: ROOT });
    expect(stdout.trim()).toBe("fixtures/box: valid");
    expect(stderr).toContain("note: runner `hal0-fake-llama-server`: no facts cached (run hal0 validate --runners, or hal0 plan); its slots' flags are not checked");
    expect(existsSync(join(state, "runners.json"))).toBe(false);
  });

  it("a profile whose flags carry a removed flag (--draft-max): validate --runners, plain validate from the cache, and hal0 plan each report slot.runner_flag_removed at the flags' line, before anything starts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-validate-box-"));
    cpSync(join(ROOT, "fixtures/box"), dir, { recursive: true });
    const profiles = readFileSync(join(dir, "profiles.toml"), "utf8");
    const flags = 'flags = "-fa on -ctk q8_0 -ctv q8_0 -b 512 -ub 512 --parallel 1 --load-mode none"';
    const where = profiles.indexOf(flags, profiles.indexOf("[profile.rocm-moe]"));
    expect(where).toBeGreaterThan(0);
    writeFileSync(join(dir, "profiles.toml"), profiles.slice(0, where) + flags.replace('none"', 'none --draft-max 16"') + profiles.slice(where + flags.length));
    const line = profiles.slice(0, where).split("\n").length;
    const at = `profiles.toml:${line}:${flags.length + 1}: error[slot.runner_flag_removed]`;
    const state = mkdtempSync(join(tmpdir(), "hal0-validate-state-"));
    const hal0 = (args: string[]) => run("node", [join(ROOT, "bin/hal0.js"), ...args], { cwd: dir }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);

    // Plain validate is pure and fast: no facts yet, so it cannot know (and says so).
    expect((await hal0(["validate", "--config", dir, "--state", state])).code).toBe(0);
    const asked = await hal0(["validate", "--config", dir, "--state", state, "--runners", "--json"]);
    expect(asked.code).toBe(1);
    const doc = JSON.parse(asked.stdout) as { diagnostics: Array<{ code: string; file: string; line: number; detail: string }>; runners: Array<{ runner: string; status: string; version: string | null }> };
    expect(doc.diagnostics.find((d) => d.code === "slot.runner_flag_removed")).toMatchObject({ file: "profiles.toml", line });
    expect(doc.diagnostics.find((d) => d.code === "slot.runner_flag_removed")!.detail).toContain("--spec-draft-n-max");
    expect(doc.runners).toContainEqual(expect.objectContaining({ runner: "hal0-fake-llama-server", status: "checked", version: expect.stringContaining("9749") }));
    expect(doc.runners).toContainEqual(expect.objectContaining({ runner: "hal0-fake-runner", status: "not_checked" }));
    // Now cached: plain validate reports it too, without running anything.
    const cached = await hal0(["validate", "--config", dir, "--state", state]);
    expect(cached.code).toBe(1);
    expect(cached.stdout).toContain(at);
    expect(cached.stderr).not.toContain("no facts cached");

    const planState = mkdtempSync(join(tmpdir(), "hal0-plan-state-"));
    const plan = await hal0(["plan", "--config", dir, "--state", planState]);
    expect(plan.code).toBe(1);
    expect(plan.stdout + plan.stderr).toContain(at);
    expect(plan.stdout + plan.stderr).toContain("Did you mean `--spec-draft-n-max`?");
    // Nothing started: no inventory, no runner record.
    expect(readdirSync(planState).filter((f) => f !== "runners.json" && !f.startsWith("."))).toEqual([]);
  });

  it("a profile whose env sets PATH is checked against the runner that PATH finds (the one the process driver starts), not the one on hal0's PATH", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-validate-path-"));
    // An older llama-server (build 4748) under the stand-in's name, found first on the profile's PATH: it has no --load-mode.
    mkdirSync(join(dir, "older"));
    writeFileSync(join(dir, "older/hal0-fake-llama-server"), `#!/bin/sh\nHAL0_FAKE_BUILD=older exec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, "fixtures/runner/fake-llama-server.mjs"))} "$@"\n`, { mode: 0o755 });
    const files = (env: string) => ({
      "hal0.toml": "[slots]\nport_range_start = 24001\nport_range_end = 24100\n",
      "profiles.toml": `[profile.cpu]\nrunner = ["hal0-fake-llama-server"]\nflags = "--load-mode none"\ndevice_class = "cpu"\n${env}`,
      "models.toml": `[model.tiny]\npath = "tiny.gguf"\n`,
      "slots/chat.toml": `profile = "cpu"\nmodel = "tiny"\nport = 24001\n`,
    });
    for (const [rel, text] of Object.entries(files(`env = { PATH = ${JSON.stringify(`${join(dir, "older")}:${process.env.PATH}`)} }\n`))) {
      mkdirSync(join(dir, rel, ".."), { recursive: true });
      writeFileSync(join(dir, rel), text);
    }
    writeFileSync(join(dir, "tiny.gguf"), readFileSync(join(ROOT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf")));
    const state = mkdtempSync(join(tmpdir(), "hal0-validate-state-"));
    const hal0 = (args: string[]) => run("node", [join(ROOT, "bin/hal0.js"), ...args], { cwd: dir }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
    const older = await hal0(["validate", "--config", dir, "--state", state, "--runners"]);
    expect(older.code).toBe(1);
    expect(older.stdout).toContain("error[slot.runner_flag_unknown]: `--load-mode` is not a flag of llama-server b4748");
    // Without the profile's PATH, hal0's own finds the current stand-in: the same flags pass.
    writeFileSync(join(dir, "profiles.toml"), files("")["profiles.toml"]);
    const current = await hal0(["validate", "--config", dir, "--state", state, "--runners"]);
    expect(current.stdout.trim()).toBe(".: valid");
  });

  it("a runner that needs its profile's env to run (a library path, a variable its wrapper reads) is probed with that env, as the process driver starts it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-validate-env-"));
    // A wrapper that fails as a binary missing its libraries does unless the profile's env says where they are; with it, an older llama-server (no --load-mode).
    writeFileSync(join(dir, "wrapped-llama"), `#!/bin/sh\n[ "$WRAPPED_LIBS" = "/opt/wrapped/lib" ] || { echo "wrapped-llama: error while loading shared libraries: libggml.so: cannot open shared object file" >&2; exit 127; }\nHAL0_FAKE_BUILD=older exec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, "fixtures/runner/fake-llama-server.mjs"))} "$@"\n`, { mode: 0o755 });
    const files: Record<string, string> = {
      "hal0.toml": "[slots]\nport_range_start = 24001\nport_range_end = 24100\n",
      "profiles.toml": `[profile.cpu]\nrunner = ["./wrapped-llama"]\nflags = "--load-mode none"\ndevice_class = "cpu"\nenv = { WRAPPED_LIBS = "/opt/wrapped/lib" }\n`,
      "models.toml": `[model.tiny]\npath = "tiny.gguf"\n`,
      "slots/chat.toml": `profile = "cpu"\nmodel = "tiny"\nport = 24001\n`,
    };
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(join(dir, rel, ".."), { recursive: true });
      writeFileSync(join(dir, rel), text);
    }
    writeFileSync(join(dir, "tiny.gguf"), readFileSync(join(ROOT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf")));
    const state = mkdtempSync(join(tmpdir(), "hal0-validate-state-"));
    const hal0 = (args: string[]) => run("node", [join(ROOT, "bin/hal0.js"), ...args], { cwd: dir }).then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
    const checked = await hal0(["validate", "--config", dir, "--state", state, "--runners"]);
    expect(checked.stdout).not.toContain("could not be asked");
    expect(checked.stdout).toContain("error[slot.runner_flag_unknown]: `--load-mode` is not a flag of llama-server b4748");
    expect(checked.code).toBe(1);
  });

  it("exits 1 on an invalid tree and on a missing folder (config.not_found)", async () => {
    const bad = await run("node", [join(ROOT, "bin/hal0.js"), "validate", "--config", tree(BROKEN)]).catch((e: { code: number }) => e);
    expect((bad as { code: number }).code).toBe(1);
    const missing = await run("node", [join(ROOT, "bin/hal0.js"), "validate", "--config", "/nonexistent"]).catch((e: { code: number; stderr: string }) => e);
    expect((missing as { code: number }).code).toBe(1);
    expect((missing as { stderr: string }).stderr).toBe("hal0 validate: config.not_found: config folder not found: /nonexistent\n");
  });
});
