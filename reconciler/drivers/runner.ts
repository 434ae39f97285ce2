import { once } from "node:events";
import { accessSync, closeSync, constants, existsSync, openSync, readSync, statSync } from "node:fs";
import { open } from "node:fs/promises";
import { delimiter, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DriverError, whenAborted, type StartPhase } from "./driver.js";
import { lazyChildProcess } from "./builtins.js";
import { httpStatus } from "./proc.js";
import { capRunnerLog, RUNNER_LOG_MAX_BYTES } from "./runtime-record.js";
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
  const path = runnerPath(env);
  return path === (env.PATH ?? "") ? env : { ...env, PATH: path };
}

/** The PATH a runner is looked up on: `env.PATH`, then hal0's bin/ (`bin`, default HAL0_BIN) unless PATH already holds it. */
export function runnerPath(env: Readonly<Record<string, string | undefined>>, bin: string | undefined = HAL0_BIN): string {
  const path = env.PATH ?? "";
  if (bin === undefined || path.split(delimiter).includes(bin)) return path;
  return path === "" ? bin : `${path}${delimiter}${bin}`;
}

/** Where a runner word was found, or why it was not. */
export type RunnerLookup =
  | { readonly found: true; readonly word: string; readonly path: string; readonly via: "path" | "bin" | "file" }
  | { readonly found: false; readonly word: string; readonly problem: "not_found" | "not_executable"; readonly candidate?: string; readonly searched: readonly string[] };

/**
 * Finds `word` the way spawnRunner's spawn does, without running it: a word
 * with a `/` is a file (relative to `cwd`, the config folder); a bare word is
 * the first executable regular file named so in a folder of the runner's PATH
 * (`runnerPath(env, bin)`: PATH, then hal0's bin/; an empty or relative entry
 * is taken against `cwd`). `via` says whether it came from PATH or hal0's
 * bin/. `not_executable` when files of that name exist but none may be run (or
 * the path is a folder). One stat and one access per folder tried.
 */
export async function findRunner(word: string, cwd: string, env: Readonly<Record<string, string | undefined>>, bin: string | undefined = HAL0_BIN): Promise<RunnerLookup> {
  if (word.includes("/")) {
    const path = resolve(cwd, word);
    const kind = executable(path);
    return kind === "yes" ? { found: true, word, path, via: "file" } : { found: false, word, problem: kind === "absent" ? "not_found" : "not_executable", candidate: kind === "absent" ? undefined : path, searched: [path] };
  }
  // No PATH at all (and no bin/ to add): the spawn searches the system's default path, as execvp does.
  const path = env.PATH === undefined && bin === undefined ? DEFAULT_PATH : runnerPath(env, bin);
  const folders = path.split(delimiter).map((dir) => resolve(cwd, dir));
  const searched: string[] = [];
  let candidate: string | undefined;
  for (const dir of folders) {
    if (searched.includes(dir)) continue;
    searched.push(dir);
    const path = join(dir, word);
    const kind = executable(path);
    if (kind === "yes") return { found: true, word, path, via: bin !== undefined && dir === resolve(cwd, bin) && !pathHas(env, dir, cwd) ? "bin" : "path" };
    if (kind === "no") candidate ??= path;
  }
  return { found: false, word, problem: candidate === undefined ? "not_found" : "not_executable", candidate, searched };
}

/** libuv's `_PATH_DEFPATH`: where a spawn without PATH in its environment looks. */
const DEFAULT_PATH = "/usr/bin:/bin";

function pathHas(env: Readonly<Record<string, string | undefined>>, dir: string, cwd: string): boolean {
  return (env.PATH ?? "").split(delimiter).some((d) => resolve(cwd, d) === dir);
}

/**
 * "yes": a regular file this process may execute; "no": something is there
 * but is not that; "absent": nothing is. Synchronous, as the tree cache's
 * stats are: a stat is a few µs, where fs.promises costs a thread-pool round
 * trip per call (and a PATH walk is a dozen of them in a row).
 */
function executable(path: string): "yes" | "no" | "absent" {
  let info;
  try {
    info = statSync(path, { throwIfNoEntry: false });
  } catch {
    return "absent"; // ENOTDIR (a PATH entry that is a file), EACCES on a folder: the spawn finds nothing there either
  }
  if (info === undefined) return "absent";
  if (!info.isFile()) return "no";
  try {
    accessSync(path, constants.X_OK);
    return "yes";
  } catch {
    return "no";
  }
}

export async function spawnRunner(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv, logPath: string, logMaxBytes = RUNNER_LOG_MAX_BYTES): Promise<Spawned> {
  const [command, ...args] = argv;
  env = runnerEnv(env);
  if (command === undefined) throw new DriverError("slot.spawn_failed", "the slot's argv is empty: there is no runner to start");
  // A log over its cap moves aside before this start appends to it.
  if (logMaxBytes > 0) await capRunnerLog(logPath, logMaxBytes);
  const log = await open(logPath, "a");
  try {
    await log.write(`=== ${new Date().toISOString()} hal0 starts: ${argv.join(" ")}\n`);
    const logOffset = (await log.stat()).size;
    const child = lazyChildProcess().spawn(command, args, { cwd, env, detached: true, stdio: ["ignore", log.fd, log.fd] });
    const exited = new Promise<RunnerExit>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    if (child.pid === undefined) {
      const [err] = (await once(child, "error")) as [NodeJS.ErrnoException];
      const found = err.code === "ENOENT" ? await findRunner(command, cwd, env, undefined) : undefined;
      throw new DriverError("slot.spawn_failed", `cannot run \`${command}\` (in ${cwd}): ${found?.found ? spawnErrorWords(found.path, err) : err.code ?? err.message}`);
    }
    child.on("error", () => {}); // later errors (a failed kill) are not the starter's to crash on
    child.unref();
    return { pid: child.pid, exited, logOffset };
  } finally {
    await log.close(); // the child holds its own copy of the descriptor
  }
}

/**
 * Why a spawn of the file at `path` failed, in words: an ENOENT for a file
 * that is there means the program that runs it is not — the interpreter its
 * `#!` line names (a script whose venv moved), or the dynamic loader an ELF
 * binary names (one built for another libc, such as musl's) — and is said so,
 * naming it; anything else is the error's code.
 */
export function spawnErrorWords(path: string, err: NodeJS.ErrnoException): string {
  const code = err.code ?? err.message;
  if (err.code !== "ENOENT") return code;
  const missing = interpreterOf(path);
  if (missing === undefined || existsSync(missing.program)) return code;
  return `${path} is there, but ${missing.kind === "script" ? "the interpreter its #! line names" : "the dynamic loader (ELF interpreter) it names"}, ${missing.program}, is not on this system (${code}); install it, or point the profile's runner at a build for this system`;
}

/** The program a file names to run it: its `#!` line's, or an ELF binary's PT_INTERP; undefined when it names none or cannot be read. */
function interpreterOf(path: string): { kind: "script" | "elf"; program: string } | undefined {
  let head: Buffer;
  try {
    const fd = openSync(path, "r");
    try {
      head = Buffer.alloc(8192);
      head = head.subarray(0, readSync(fd, head, 0, head.length, 0));
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  if (head[0] === 0x23 && head[1] === 0x21) {
    const program = head.subarray(2, head.indexOf(10) === -1 ? head.length : head.indexOf(10)).toString("utf8").trim().split(/\s+/)[0];
    return program ? { kind: "script", program } : undefined;
  }
  // ELF, little-endian (x86-64, arm64, 32-bit x86/arm): the program headers' PT_INTERP (type 3) holds the loader's path.
  if (head.length < 52 || head.readUInt32BE(0) !== 0x7f454c46 || head[5] !== 1) return undefined;
  const wide = head[4] === 2;
  const phoff = wide ? Number(head.readBigUInt64LE(32)) : head.readUInt32LE(28);
  const phentsize = head.readUInt16LE(wide ? 54 : 42);
  const phnum = head.readUInt16LE(wide ? 56 : 44);
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + phentsize > head.length) return undefined;
    if (head.readUInt32LE(at) !== 3) continue;
    const offset = wide ? Number(head.readBigUInt64LE(at + 8)) : head.readUInt32LE(at + 4);
    const size = wide ? Number(head.readBigUInt64LE(at + 32)) : head.readUInt32LE(at + 16);
    if (offset + size > head.length) return undefined;
    const program = head.subarray(offset, offset + size).toString("utf8").replace(/\0+$/, "");
    return program ? { kind: "elf", program } : undefined;
  }
  return undefined;
}

export type HealthOutcome =
  | { readonly kind: "ready" }
  | { readonly kind: "exited"; readonly exit: RunnerExit }
  | { readonly kind: "timeout"; readonly lastStatus: number | undefined }
  /** `signal` aborted (an apply interrupted): the runner is left as it is. */
  | { readonly kind: "interrupted" };

const POLL_MS = 100;
const PROBE_TIMEOUT_MS = 1000;

/**
 * Polls `GET /health` until 200 (`ready`), the runner exits (`exited`, noticed
 * at once, not at the next poll) or `timeoutMs` passes (`timeout`). Phases:
 * `warming` once, on the first 503; `ready` on 200.
 */
export async function waitHealthy(port: number, path: string, spawned: Pick<Spawned, "exited">, timeoutMs: number, onPhase?: (phase: StartPhase) => void, signal?: AbortSignal): Promise<HealthOutcome> {
  const interrupt = whenAborted(signal);
  try {
    return await pollHealth(port, path, spawned, timeoutMs, onPhase, signal, interrupt.aborted);
  } finally {
    interrupt.dispose();
  }
}

async function pollHealth(port: number, path: string, spawned: Pick<Spawned, "exited">, timeoutMs: number, onPhase: ((phase: StartPhase) => void) | undefined, signal: AbortSignal | undefined, aborted: Promise<void>): Promise<HealthOutcome> {
  // On the monotonic clock: a step of the wall clock (NTP, a person's `date -s`) while a model loads neither fails its start nor makes it wait for ever.
  const deadline = performance.now() + timeoutMs;
  let exit: RunnerExit | undefined;
  void spawned.exited.then((e) => (exit = e));
  let warming = false;
  let lastStatus: number | undefined;
  while (exit === undefined) {
    if (signal?.aborted) return { kind: "interrupted" };
    const left = deadline - performance.now();
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
    await Promise.race([sleep(Math.min(POLL_MS, Math.max(0, deadline - performance.now()))), spawned.exited, aborted]);
  }
  return { kind: "exited", exit };
}

export function describeExit(exit: RunnerExit): string {
  return exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}
