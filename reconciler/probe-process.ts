import type { ChildProcessByStdio } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import type { Readable } from "node:stream";
import { lazyChildProcess } from "./drivers/builtins.js";
import { isLive, killQuietly, procStatNow } from "./drivers/proc.js";

/**
 * The short runs hal0 makes of a runner to ask it something (the runner
 * probe's `--version` and `--help`, the doctor's `--version`). Each runs in
 * its own process group, so that at its timeout the whole group can be
 * killed, whatever the runner started. Being a group of its own, it is not
 * reached by a Ctrl-C at the terminal (which signals the foreground group,
 * hal0's), nor by a SIGTERM to hal0: without more, a runner that hangs on
 * `--version` would outlive a hal0 stopped while it waited.
 *
 * So every probe group still open is SIGKILLed when hal0 exits, and when a
 * SIGINT, SIGTERM or SIGHUP comes that ends hal0 (no other listener of it:
 * node's default), just before hal0 ends by that signal. A command that
 * takes the signal itself (`hal0 serve`'s drain, an apply's first Ctrl-C)
 * goes on, and its probes end at their timeout or with it.
 *
 * A hal0 killed outright (kill -9) runs none of that: each probe carries
 * the pid and start time of the hal0 that started it in its environment
 * (`HAL0_RUNNER_PROBE`, inherited by whatever it starts), and the next hal0
 * to start a probe kills the marked processes whose hal0 is gone.
 */

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
const OWNER_KEY = "HAL0_RUNNER_PROBE";
/** This process, as its probes' marker names it: `pid:start time`. */
let owner: string | undefined;
/** Orphaned probes are looked for before a probe starts, at most this often (a /proc walk). */
const REAP_EVERY_MS = 60_000;
/** On the monotonic clock: a wall clock set back (NTP, `date -s`) would hold the reaping off for as long as its step. */
let reapedAt = -Infinity;

/** The process groups (by leader pid) of the probes not yet done. */
const live = new Set<number>();

/**
 * Spawns `file args` as a probe: its own process group, stdin closed, both
 * streams piped; its group is killed with hal0 (see above) until the child
 * has exited and its streams have closed, and then: nothing a probe started
 * outlives it.
 */
export function spawnProbe(file: string, args: readonly string[], options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv }): ChildProcessByStdio<null, Readable, Readable> {
  owner ??= `${process.pid}:${startTime()}`;
  if (performance.now() - reapedAt >= REAP_EVERY_MS) {
    reapedAt = performance.now();
    reapOrphans(); // those a killed hal0 left
  }
  const env = { ...options.env, [OWNER_KEY]: owner };
  const child = lazyChildProcess().spawn(file, [...args], { cwd: options.cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  const pid = child.pid;
  if (pid === undefined) return child; // not started: 'error' says why
  if (live.size === 0) watch(true);
  live.add(pid);
  child.once("close", () => {
    // Done: what it left in its group (a background child that let go of the pipes) goes too.
    killGroup(pid);
    live.delete(pid);
    if (live.size === 0) watch(false);
  });
  return child;
}

/**
 * SIGKILLs every process marked as a probe of a hal0 that is no longer
 * running (killed before it could end its probes). Synchronous (a few ms,
 * at most once a minute, and only when a probe is to run: a cached runner
 * costs nothing), so a short command finishes it before it exits. Best effort.
 */
function reapOrphans(): void {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return;
  }
  for (const pid of pids) {
    let environ: string;
    try {
      environ = readFileSync(`/proc/${pid}/environ`, "latin1");
    } catch {
      continue;
    }
    const at = environ.indexOf(`${OWNER_KEY}=`);
    if (at < 0 || (at > 0 && environ[at - 1] !== "\0")) continue;
    const value = environ.slice(at + OWNER_KEY.length + 1).split("\0", 1)[0]!;
    const [ownerPid, ownerStart] = value.split(":").map(Number);
    // A start time of 0: the hal0 could not read its own, so whether it still runs cannot be told.
    if (!Number.isSafeInteger(ownerPid) || !Number.isSafeInteger(ownerStart) || ownerStart === 0 || startTime(ownerPid!) === ownerStart) continue;
    killQuietly(Number(pid)); // gone, or not ours to signal: nothing to do
  }
}

/** A live process's start time (/proc/<pid>/stat); 0 when it is not running (or a zombie) or cannot be read. */
function startTime(pid: number = process.pid): number {
  const stat = procStatNow(pid);
  return isLive(stat) ? stat.startTime : 0;
}

function killGroup(pgid: number): void {
  killQuietly(-pgid);
}

function killAll(): void {
  for (const pid of live) killGroup(pid);
}

function onSignal(sig: NodeJS.Signals): void {
  // Another listener takes this signal: hal0 is not ended by it (it drains, or stops starting steps).
  if (process.listenerCount(sig) > 1) return;
  killAll();
  watch(false);
  // node's default for the signal: hal0 ends by it, as it would have without this listener.
  process.kill(process.pid, sig);
}

function watch(on: boolean): void {
  for (const sig of SIGNALS) {
    if (on) process.on(sig, onSignal);
    else process.off(sig, onSignal);
  }
  if (on) process.on("exit", killAll);
  else process.off("exit", killAll);
}
