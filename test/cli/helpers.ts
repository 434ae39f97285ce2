import { spawn } from "node:child_process";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { CliIo } from "../../cli/index.js";

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
