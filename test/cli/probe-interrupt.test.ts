import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { alive, freePort, PROJECT } from "../reconciler/process-helpers.js";
import { until, untilTrue } from "../helpers/until.js";

/**
 * Ctrl-C (SIGINT) or SIGTERM to hal0 while it asks a runner `--version`
 * (the runner probe of `hal0 plan`, the doctor's version row): the runner
 * runs in its own process group, so the signal does not reach it; hal0
 * kills that group before it ends, so a runner that hangs on `--version`
 * (and what it started) does not outlive hal0.
 */
const HAL0 = join(PROJECT, "bin/hal0.cjs");
const dirs: string[] = [];
const leftovers: number[] = [];

afterEach(() => {
  for (const pid of leftovers.splice(0)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
});

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A box whose one slot's runner is `./hang`: a script that starts a sleeper, writes both pids, and waits (never answers). */
async function hangingBox(): Promise<{ config: string; state: string; pids: string }> {
  const base = mkdtempSync(join(tmpdir(), "hal0-probe-int-"));
  dirs.push(base);
  const config = join(base, "box");
  mkdirSync(join(config, "slots"), { recursive: true });
  const pids = join(base, "pids");
  writeFileSync(join(config, "hang"), `#!/bin/sh\nsleep 60 &\necho "$$ $!" > ${JSON.stringify(pids)}\nwait\n`);
  chmodSync(join(config, "hang"), 0o755);
  writeFileSync(join(config, "tiny.gguf"), readFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf")));
  writeFileSync(join(config, "hal0.toml"), "[slots]\nport_range_start = 1024\nport_range_end = 65535\n");
  writeFileSync(join(config, "profiles.toml"), `[profile.hang]\nrunner = ["./hang"]\ndevice_class = "cpu"\n`);
  writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
  writeFileSync(join(config, "slots", "s.toml"), `profile = "hang"\nmodel = "tiny"\nport = ${await freePort()}\n`);
  return { config, state: join(base, "state"), pids };
}

describe("a signal to hal0 while a runner hangs on --version", () => {
  it.each([
    ["plan", "SIGINT"],
    ["plan", "SIGTERM"],
    ["doctor", "SIGINT"],
  ] as const)("hal0 %s, %s: hal0 ends by the signal, and the runner and its child are killed", async (command, sig) => {
    const box = await hangingBox();
    const child = spawn(process.execPath, [HAL0, command, "--config", box.config, "--state", box.state], { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    await untilTrue(() => existsSync(box.pids) && readFileSync(box.pids, "utf8").endsWith("\n"), 10_000);
    const [shell, sleeper] = readFileSync(box.pids, "utf8").trim().split(" ").map(Number) as [number, number];
    leftovers.push(shell, sleeper);
    expect(await alive(shell)).toBe(true);
    child.kill(sig);
    expect(await ended, err).toEqual({ code: null, signal: sig });
    await until(async () => !(await alive(shell)) && !(await alive(sleeper)), (v) => v, 2000);
  });

  it("kill -9 of hal0 mid-probe: the runner and its child are left, and the next hal0 that runs a probe kills them", async () => {
    const box = await hangingBox();
    const child = spawn(process.execPath, [HAL0, "plan", "--config", box.config, "--state", box.state], { stdio: "ignore" });
    const ended = new Promise((resolve) => child.once("exit", resolve));
    await untilTrue(() => existsSync(box.pids) && readFileSync(box.pids, "utf8").endsWith("\n"), 10_000);
    const [shell, sleeper] = readFileSync(box.pids, "utf8").trim().split(" ").map(Number) as [number, number];
    leftovers.push(shell, sleeper);
    child.kill("SIGKILL");
    await ended;
    expect(await alive(shell)).toBe(true); // nothing in hal0 ran to stop it
    // Another box, another state folder: its runner (the stand-in) is asked, and what the dead hal0 left is killed first.
    const other = await hangingBox();
    writeFileSync(join(other.config, "profiles.toml"), `[profile.hang]\nrunner = ["hal0-fake-llama-server"]\ndevice_class = "cpu"\n`);
    const next = spawn(process.execPath, [HAL0, "validate", "--runners", "--config", other.config, "--state", other.state], { stdio: "ignore" });
    expect(await new Promise((resolve) => next.once("exit", resolve))).toBe(0);
    await until(async () => !(await alive(shell)) && !(await alive(sleeper)), (v) => v, 2000);
  });
});
