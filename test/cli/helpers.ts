import { spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll } from "vitest";
import { main, type CliIo } from "../../cli/index.js";
import { freePort, PROJECT, RUNNER } from "../reconciler/process-helpers.js";

/**
 * Every `hal0 serve` a test file started and did not stop (a test that failed
 * before its own SIGTERM): stopped when the file's tests are done, so no
 * server outlives its suite.
 */
const served = new Set<ChildProcess>();
afterAll(async () => {
  await Promise.all([...served].map(async (child) => {
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
    await exited;
    clearTimeout(killer);
  }));
});

/** An in-process io that records what a command prints. */
export function captureIo(env: Record<string, string> = {}, cwd = process.cwd()): CliIo & { out: () => string; err: () => string } {
  let out = "";
  let err = "";
  return {
    stdout: { write: (s: string) => (out += s), isTTY: false },
    stderr: { write: (s: string) => (err += s), isTTY: false },
    env,
    cwd,
    out: () => out,
    err: () => err,
  };
}

/** `hal0 <args> --config <config> --state <state>` in process, with what it printed: a box's command line, as a suite runs it. */
export function boxCommand(config: string, state: string, env: Record<string, string> = {}, cwd = process.cwd()): (...args: string[]) => Promise<{ code: number; out: string; err: string }> {
  return async (...args) => {
    const io = captureIo(env, cwd);
    const code = await main([...args, "--config", config, "--state", state], io);
    return { code, out: io.out(), err: io.err() };
  };
}

const HAL0 = join(import.meta.dirname, "../../bin/hal0.js");

/** Runs `hal0 apply --yes` as its own process and SIGKILLs it after `ms` (if it has not finished). */
export async function applyKilledAfter(ms: number, config: string, state: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const child = spawn(process.execPath, [HAL0, "apply", "--yes", "--config", config, "--state", state], { env, stdio: "ignore" });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  await Promise.race([sleep(ms), exited]);
  child.kill("SIGKILL");
  await exited;
}

/** The status of GET /health on `port` once it is 200, or the last one after `ms`. */
export async function healthWithin(port: number, ms: number): Promise<number> {
  const end = Date.now() + ms;
  for (;;) {
    const status = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.status, () => 0);
    if (status === 200 || Date.now() > end) return status;
    await sleep(100);
  }
}

/** Starts the built `hal0 serve --port 0` (with `env`) and resolves with its URL once it logs that it listens (`onSpawn` sees the child at once, e.g. to kill it after the test). */
export function startServe(config: string, state: string, extra: string[] = [], onSpawn?: (child: ChildProcess) => void, env: NodeJS.ProcessEnv = process.env): Promise<{ child: ChildProcess; url: string; lines: () => any[] }> {
  const child = spawn(process.execPath, [join(import.meta.dirname, "../../bin/hal0.js"), "serve", "--config", config, "--state", state, "--port", "0", ...extra], { stdio: ["ignore", "pipe", "pipe"], env });
  served.add(child);
  child.once("exit", () => served.delete(child));
  onSpawn?.(child);
  let out = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  const lines = () => out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line: ${out}`)), 15_000);
    child.stdout!.on("data", () => {
      const listening = lines().find((l) => l.msg === "hal0 serve listening");
      if (listening) {
        clearTimeout(timer);
        resolve({ child, url: listening.url.replace(/\/$/, ""), lines });
      }
    });
    child.once("exit", (code) => reject(new Error(`hal0 serve exited ${code}: ${out}`)));
  });
}

/**
 * A small process-runtime box at `config`: one `fake` profile running the
 * stand-in llama-server, one tiny model, and a slot per name on a free
 * loopback port (each with `env` as its `[server] env`). The ports, in the
 * names' order.
 */
export async function writeFakeBox(config: string, names: readonly string[], env: Record<string, string> = {}): Promise<number[]> {
  mkdirSync(join(config, "slots"), { recursive: true });
  copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
  writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
  writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
  writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
  const serverEnv = Object.keys(env).length === 0 ? "" : `[server]\nenv = { ${Object.entries(env).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")} }\n`;
  const ports: number[] = [];
  for (const name of names) {
    let port = await freePort();
    while (ports.includes(port)) port = await freePort(); // free, and not already one of this box's
    ports.push(port);
    writeFileSync(join(config, "slots", `${name}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n${serverEnv}`);
  }
  return ports;
}


/** A box with no slots under a new temporary folder (what serves the API is all that matters), and the state folder beside it. */
export function emptyServeBox(prefix: string): { config: string; state: string } {
  const base = mkdtempSync(join(tmpdir(), prefix));
  const config = join(base, "box");
  mkdirSync(join(config, "slots"), { recursive: true });
  copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
  writeFileSync(join(config, "hal0.toml"), `[reconcile]\ninterval_s = 3600\n`);
  writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
  return { config, state: join(base, "state") };
}

/** hal0's bin/hal0.js where the user nobody may run it (test/global-setup.ts: this checkout, or a copy when the checkout is in a private folder). */
export function hal0ForNobody(file = "bin/hal0.js"): string {
  return join(process.env.HAL0_TEST_NOBODY_PROJECT ?? PROJECT, file);
}
