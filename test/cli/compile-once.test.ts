import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeEach, describe, expect, it, vi } from "vitest";
import * as compiler from "../../compiler/index.js";
import { openBox } from "../../cli/box.js";
import { compileFromCache, compileWithRunners, withRunners } from "../../reconciler/runner-observe.js";
import { RunnerProbe } from "../../reconciler/runner-probe.js";
import { PROJECT } from "../reconciler/process-helpers.js";
import { captureIo } from "./helpers.js";

// Every compile the CLI and runner-observe.ts run, counted (the real compile underneath).
vi.mock("../../compiler/index.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../compiler/index.js")>();
  return { ...real, compile: vi.fn(real.compile) };
});
const compile = vi.mocked(compiler.compile);

/**
 * plan and apply compile the tree once when the runner cache already holds
 * the facts of the slots' runners (compileFromCache): the same model the two
 * steps (compile, probe, compile with the facts) give; compiled again when
 * the probe finds other facts than the cache held.
 */
const FACTS = join(PROJECT, "fixtures/llama-server");
const BOX = join(PROJECT, "fixtures/box");
const dirs: string[] = [];
const tempDir = (stem: string) => {
  const dir = mkdtempSync(join(tmpdir(), `hal0-once-${stem}-`));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  compile.mockClear();
});

/** A llama-server-like script at `dir/llama-server`: `--version` on stderr, `--help` from a recorded help file. */
function llamaServer(dir: string, version: string, helpFile: string): void {
  const path = join(dir, "llama-server");
  writeFileSync(path, [
    "#!/bin/sh",
    'case "$1" in',
    `  --version) printf '%s\\n' ${JSON.stringify(version)} 'built with cc (Debian 12.2.0-14+deb12u1) 12.2.0 for x86_64-linux-gnu' >&2 ;;`,
    `  --help) cat ${JSON.stringify(join(FACTS, helpFile))} ;;`,
    "  *) exit 2 ;;",
    "esac",
    "",
  ].join("\n"));
  chmodSync(path, 0o755);
}

describe("one compile when the runner cache knows the slots' runners", () => {
  it("hal0 plan's openBox on the example box: two compiles with a cold cache, one with a warm one, the same model", async () => {
    const state = tempDir("state");
    const io = captureIo({}, PROJECT);
    const cold = await openBox({ config: BOX, state }, io, { checkRunners: true });
    expect(compile).toHaveBeenCalledTimes(2);
    expect(cold.runners.runners.size).toBeGreaterThan(0);
    compile.mockClear();
    const warm = await openBox({ config: BOX, state }, io, { checkRunners: true });
    expect(compile).toHaveBeenCalledTimes(1);
    expect(JSON.stringify(warm.model)).toBe(JSON.stringify(cold.model));
    expect(warm.runners.probe?.probed).toBe(0);
  });

  it("compiles again with the probe's answer when it differs from the cache (a newer runner earlier on PATH): the two steps' model", async () => {
    const root = tempDir("box");
    mkdirSync(join(root, "slots"));
    writeFileSync(join(root, "hal0.toml"), "[slots]\nport_range_start = 31500\nport_range_end = 31510\n");
    writeFileSync(join(root, "profiles.toml"), '[profile.chat]\nrunner = ["llama-server"]\ndevice_class = "cpu"\n');
    writeFileSync(join(root, "models.toml"), '[model.tiny]\npath = "tiny.gguf"\ncontext_length = 8192\n');
    writeFileSync(join(root, "tiny.gguf"), "GGUF");
    writeFileSync(join(root, "slots/chat.toml"), 'profile = "chat"\nmodel = "tiny"\nport = 31500\n');
    const [early, late, state] = [tempDir("early"), tempDir("late"), tempDir("state")];
    llamaServer(late, "version: 4748 (c392e5094)", "older-help.txt");
    const env = { PATH: `${early}:${late}:/usr/bin:/bin` };
    const { tree, diagnostics } = await compiler.loadTree(root);
    const probe = () => new RunnerProbe({ stateDir: state, root, env, bin: null, timeoutMs: 10_000 });

    const cold = await compileWithRunners(tree, diagnostics, probe());
    expect(cold.result.diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    expect(cold.probe?.failed).toEqual(new Map());
    expect(cold.probe?.missing).toEqual(new Map());
    expect(compile).toHaveBeenCalledTimes(2);
    expect(cold.runners.size).toBe(1);
    compile.mockClear();
    const warm = await compileWithRunners(tree, diagnostics, probe());
    expect(compile).toHaveBeenCalledTimes(1);
    expect(JSON.stringify(warm.result)).toBe(JSON.stringify(cold.result));

    // A newer llama-server earlier on PATH: the cache still answers for the older one, the probe finds the newer.
    llamaServer(early, "version: 9749 (d32676d77)", "help.txt");
    compile.mockClear();
    const guessing = probe();
    const { first, given } = compileFromCache(tree, diagnostics, guessing);
    expect(given?.runners.size).toBe(1);
    const moved = await withRunners(first, tree, diagnostics, guessing, "probe", given);
    expect(compile).toHaveBeenCalledTimes(2);
    expect(moved.result).not.toBe(first);
    expect(JSON.stringify(moved.result)).not.toBe(JSON.stringify(first));
    // What the two steps give from the same cache: compile without facts, probe, compile with them.
    const twoSteps = await withRunners(compiler.compile(tree, diagnostics), tree, diagnostics, probe());
    expect(JSON.stringify(moved.result)).toBe(JSON.stringify(twoSteps.result));
    expect([...moved.runners.values()][0]?.version.line).toContain("9749");
  });
});
