import type { ChildProcessByStdio } from "node:child_process";
import type { Readable } from "node:stream";
import { lazyChildProcess } from "./drivers/builtins.js";

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
 */

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/** The process groups (by leader pid) of the probes not yet done. */
const live = new Set<number>();

/**
 * Spawns `file args` as a probe: its own process group, stdin closed, both
 * streams piped; its group is killed with hal0 (see above) until the child
 * has exited and its streams have closed, and then: nothing a probe started
 * outlives it.
 */
export function spawnProbe(file: string, args: readonly string[], options: { readonly cwd: string; readonly env: NodeJS.ProcessEnv }): ChildProcessByStdio<null, Readable, Readable> {
  const child = lazyChildProcess().spawn(file, [...args], { cwd: options.cwd, env: options.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
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

/** Probe groups not done yet (for tests). */
export function liveProbes(): number {
  return live.size;
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // already gone
  }
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
