import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { RunnerProbe } from "../../reconciler/runner-probe.js";
import { StateStore } from "../../reconciler/state.js";
import { Sweeper } from "../../reconciler/sweep.js";
import type { SlotChange } from "../../schema/index.js";
import { alive, freePort, RUNNER, until } from "./process-helpers.js";

/**
 * The sweep with the runner probe, on real processes: the runner is a script
 * at an absolute path that runs the stand-in llama-server as the February
 * 2025 build (HAL0_FAKE_BUILD=older) or the current one, so "upgrading" it is
 * rewriting the file (a new size and mtime: the probe asks it again).
 */
const MODEL = join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");

const dirs: string[] = [];
const drivers: ProcessDriver[] = [];
afterEach(async () => {
  for (const d of drivers.splice(0)) {
    for (const s of await d.observe().catch(() => [])) await d.stop(s.name, 1).catch(() => undefined);
  }
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function writeRunner(path: string, build: "older" | "current"): void {
  const env = build === "older" ? "HAL0_FAKE_BUILD=older " : "";
  writeFileSync(path, `#!/bin/sh\n# the stand-in llama-server as the ${build} build\n${env}exec ${JSON.stringify(process.execPath)} ${JSON.stringify(RUNNER)} "$@"\n`);
  chmodSync(path, 0o755);
}

async function box(o: { build: "older" | "current"; extraArgs?: string }) {
  const dir = mkdtempSync(join(tmpdir(), "hal0-runner-sweep-"));
  dirs.push(dir);
  const root = join(dir, "etc");
  mkdirSync(join(root, "slots"), { recursive: true });
  const runner = join(dir, "llama-server");
  writeRunner(runner, o.build);
  writeFileSync(join(root, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 10\nstop_grace_s = 1\n`);
  writeFileSync(join(root, "profiles.toml"), `[profile.cpu]\nrunner = [${JSON.stringify(runner)}]\nflags = "--threads 2"\ndevice_class = "cpu"\n`);
  writeFileSync(join(root, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(MODEL)}\ntype = "llm"\n`);
  const extra = o.extraArgs === undefined ? "" : `\n[server]\nextra_args = ${JSON.stringify(o.extraArgs)}\n`;
  writeFileSync(join(root, "slots/chat.toml"), `profile = "cpu"\nmodel = "tiny"\nport = ${await freePort()}\n\n[tune]\nctx_size = 2048\n${extra}`);
  const state = new StateStore(join(dir, "state"));
  const probe = new RunnerProbe({ stateDir: state.dir, root });
  const driver = new ProcessDriver({ stateDir: state.dir });
  drivers.push(driver);
  const sweeper = new Sweeper({ root, state, runners: probe, driverFor: async () => driver });
  const stalled = () => {
    const all = JSON.parse(readFileSync(join(state.dir, "conditions.json"), "utf8")) as Record<string, { conditions: Array<{ type: string; status: string; reason: string; message: string }> }>;
    return all["slot.chat"]!.conditions.find((c) => c.type === "Stalled")!;
  };
  return { root, runner, sweeper, driver, probe, stalled };
}

const chatChange = (plan: { changes: readonly unknown[] } | undefined) => plan!.changes.find((c) => (c as SlotChange).address === "slot.chat") as SlotChange;

describe("the sweep speaks the runner's dialect and re-plans when the runner changes", () => {
  it("an older llama-server runs the older argv; rewritten as the current build, the slot is replaced with reason observed_changed", async () => {
    const { runner, sweeper, driver, probe } = await box({ build: "older" });
    const first = await sweeper.sweep();
    expect(first.outcome).toBe("converged");
    expect(chatChange(first.plan)).toMatchObject({ action: "create", reason: "new" });
    expect(chatChange(first.plan).after!.spec.observed).toEqual({ runner_dialect: "llama-server:draft-flag=--model-draft" });
    const [before] = await driver.observe();
    expect(before!.running).toBe(true);
    expect(probe.runs).toBe(2); // --version, --help
    // Idle: the probe's cache answers (a stat), nothing runs again.
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
    expect(probe.runs).toBe(2);

    writeRunner(runner, "current");
    const upgraded = await sweeper.sweep();
    expect(probe.runs).toBe(4);
    const change = chatChange(upgraded.plan);
    expect(change).toMatchObject({ action: "replace", reason: "observed_changed" });
    expect(change.changed_paths).toContain("observed.runner_dialect");
    expect(change.after!.spec.observed!.runner_dialect).toMatch(/^llama-server:spec-type,/);
    expect(upgraded.outcome).toBe("converged");
    const [after] = await driver.observe();
    expect(after!.running).toBe(true);
    expect(after!.record!.pid).not.toBe(before!.record!.pid);
    expect(await alive(before!.record!.pid!)).toBe(false);
  });

  it("a flag the runner removed holds the slot back: no start, no crash loop; Stalled RunnerRefusesArgv with the code and the key's position", async () => {
    const { sweeper, driver, stalled, root } = await box({ build: "current", extraArgs: "--draft-max 4" });
    const first = await sweeper.sweep();
    expect(first.diagnostics).toEqual([]);
    expect(chatChange(first.plan)).toMatchObject({ action: "no-op", reason: "argv_refused" });
    expect(first.plan!.warnings).toContainEqual(expect.objectContaining({ address: "slot.chat", code: "slot.runner_flag_removed", message: expect.stringMatching(/^slots\/chat\.toml:9:15: .*--draft-max.*; slot `chat` is not started$/) }));
    for (let i = 0; i < 3; i++) expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
    expect(await driver.observe()).toEqual([]);
    const s = stalled();
    expect(s).toMatchObject({ status: "True", reason: "RunnerRefusesArgv" });
    expect(s.message).toContain("slots/chat.toml:9:15: slot.runner_flag_removed");

    // Fixed by hand: the next sweep starts it, and the condition clears.
    writeFileSync(join(root, "slots/chat.toml"), readFileSync(join(root, "slots/chat.toml"), "utf8").replace("--draft-max 4", "--spec-draft-n-max 4"));
    const fixed = await sweeper.sweep();
    expect(chatChange(fixed.plan)).toMatchObject({ action: "create" });
    await until(async () => (await driver.observe())[0]?.running === true, 5000);
    expect(stalled()).toMatchObject({ status: "False" });
  });
});
