import { spawn } from "node:child_process";
import { once } from "node:events";
import { open } from "node:fs/promises";
import { delimiter, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DriverError, type StartPhase } from "./driver.js";
import { httpStatus } from "./proc.js";
import { findPackageRoot } from "../package-root.js";

/**
 * Launching one runner and waiting for it to become healthy. The runner is
 * detached (its own process group, stdio on runner.log, unref'd), so it
 * outlives whoever started it: hal0's CLI exits while its slots keep running.
 */

export interface RunnerExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface Spawned {
  readonly pid: number;
  /** Settles when the runner exits, if the starter is still alive then. */
  readonly exited: Promise<RunnerExit>;
  /** Byte offset in runner.log where this run's output begins. */
  readonly logOffset: number;
}

/** Spawns `argv` with its output appended to `logPath`; a runner that can't be executed (ENOENT, EACCES) is `slot.spawn_failed`. */
/**
 * hal0's own bin/ folder (the runner words it ships, such as
 * `hal0-fake-llama-server`), found from this module wherever it runs
 * (source or dist/): the folder beside the package.json above it
 * (`package-root.ts`, the one walk hal0's code does to find its package).
 */
export const HAL0_BIN = ((): string | undefined => {
  const root = findPackageRoot();
  return root === undefined ? undefined : join(root, "bin");
})();

/**
 * How a runner word is found: a word with a `/` is a path (relative ones
 * against the config folder, the runner's working directory); a bare word is
 * looked up on the runner's PATH, and then in hal0's own bin/ folder — so a
 * box that names `hal0-fake-llama-server` starts wherever it is copied, and
 * an installed `llama-server` on PATH always wins over anything hal0 ships.
 */
export function runnerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (HAL0_BIN === undefined) return env;
  const path = env.PATH ?? "";
  return path.split(delimiter).includes(HAL0_BIN) ? env : { ...env, PATH: path === "" ? HAL0_BIN : `${path}${delimiter}${HAL0_BIN}` };
}

export async function spawnRunner(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv, logPath: string): Promise<Spawned> {
  const [command, ...args] = argv;
  env = runnerEnv(env);
  if (command === undefined) throw new DriverError("slot.spawn_failed", "the slot's argv is empty: there is no runner to start");
  const log = await open(logPath, "a");
  try {
    await log.write(`=== ${new Date().toISOString()} hal0 starts: ${argv.join(" ")}\n`);
    const logOffset = (await log.stat()).size;
    const child = spawn(command, args, { cwd, env, detached: true, stdio: ["ignore", log.fd, log.fd] });
    const exited = new Promise<RunnerExit>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    if (child.pid === undefined) {
      const [err] = (await once(child, "error")) as [NodeJS.ErrnoException];
      throw new DriverError("slot.spawn_failed", `cannot run \`${command}\` (in ${cwd}): ${err.code ?? err.message}`);
    }
    child.on("error", () => {}); // later errors (a failed kill) are not the starter's to crash on
    child.unref();
    return { pid: child.pid, exited, logOffset };
  } finally {
    await log.close(); // the child holds its own copy of the descriptor
  }
}

export type HealthOutcome =
  | { readonly kind: "ready" }
  | { readonly kind: "exited"; readonly exit: RunnerExit }
  | { readonly kind: "timeout"; readonly lastStatus: number | undefined };

const POLL_MS = 100;
const PROBE_TIMEOUT_MS = 1000;

/**
 * Polls `GET /health` until 200 (`ready`), the runner exits (`exited`, noticed
 * at once, not at the next poll) or `timeoutMs` passes (`timeout`). Phases:
 * `warming` once, on the first 503; `ready` on 200.
 */
export async function waitHealthy(port: number, path: string, spawned: Pick<Spawned, "exited">, timeoutMs: number, onPhase?: (phase: StartPhase) => void): Promise<HealthOutcome> {
  const deadline = Date.now() + timeoutMs;
  let exit: RunnerExit | undefined;
  void spawned.exited.then((e) => (exit = e));
  let warming = false;
  let lastStatus: number | undefined;
  while (exit === undefined) {
    const left = deadline - Date.now();
    if (left <= 0) return { kind: "timeout", lastStatus };
    const status = await httpStatus(port, path, Math.min(PROBE_TIMEOUT_MS, left));
    // A probe cut short by the deadline is not an answer: keep the last one the runner gave.
    if (status !== undefined) lastStatus = status;
    if (exit !== undefined) break;
    if (status === 200) {
      onPhase?.("ready");
      return { kind: "ready" };
    }
    if (status === 503 && !warming) {
      warming = true;
      onPhase?.("warming");
    }
    await Promise.race([sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now()))), spawned.exited]);
  }
  return { kind: "exited", exit };
}

export function describeExit(exit: RunnerExit): string {
  return exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}
