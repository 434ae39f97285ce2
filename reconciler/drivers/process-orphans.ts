import { statSync } from "node:fs";
import { readFile, readdir } from "node:fs/promises";
import { resolve } from "node:path";
import { procStat } from "./proc.js";
import { sameFolder } from "../state-folder.js";

/**
 * Runners carry markers in their environment: which state folder and slot
 * they belong to. A runner whose start was interrupted before its record was
 * written (hal0 killed between spawn and record) is still found by them, so
 * it is stopped rather than left holding its port — the process runtime's
 * counterpart of the docker runtime's labels.
 */
const STATE_KEY = "HAL0_RUNNER_STATE";
const SLOT_KEY = "HAL0_RUNNER_SLOT";

export function markerEnv(stateDir: string, name: string): Record<string, string> {
  return { [STATE_KEY]: resolve(stateDir), [SLOT_KEY]: name };
}

/** The slot `pid` is marked as a runner of, in this state folder; undefined when it carries no such markers (or cannot be read). */
export async function runnerSlotOf(stateDir: string, pid: number): Promise<string | undefined> {
  const environ = await readFile(`/proc/${pid}/environ`, "latin1").catch(() => "");
  const vars = environ.split("\0");
  if (!vars.includes(`${STATE_KEY}=${resolve(stateDir)}`)) return undefined;
  return vars.find((v) => v.startsWith(`${SLOT_KEY}=`))?.slice(SLOT_KEY.length + 1);
}

/**
 * The state folder `pid` is marked as a runner of when that is another folder
 * than `stateDir` and it is still there: the runner of another hal0 box,
 * which this folder's record names only because the folder was copied from
 * that one (`cp -a`, the runtime records with it). Undefined for this
 * folder's runner (under any path that reaches it: a symbolic link, a bind
 * mount), for one with no markers (started by a hal0 before them, or an
 * environment hal0 may not read), and for one whose folder is gone (the
 * folder was moved here: its runners are this folder's).
 */
export async function otherBoxOf(stateDir: string, pid: number): Promise<string | undefined> {
  const other = await otherBoxRunner(stateDir, pid);
  return other !== undefined && isFolder(other.state) ? other.state : undefined;
}

/**
 * The markers of `pid` when they name another state folder than `stateDir`
 * (not this one under another path): a runner another hal0 box on this host
 * started, with its slot. Undefined for one with no markers.
 */
export async function otherBoxRunner(stateDir: string, pid: number): Promise<{ state: string; slot?: string } | undefined> {
  const environ = await readFile(`/proc/${pid}/environ`, "latin1").catch(() => "");
  const vars = environ.split("\0");
  const marked = vars.find((v) => v.startsWith(`${STATE_KEY}=`))?.slice(STATE_KEY.length + 1);
  // One of the two not there: two folders all the same.
  if (marked === undefined || marked === "" || sameFolder(marked, stateDir) === true) return undefined;
  const slot = vars.find((v) => v.startsWith(`${SLOT_KEY}=`))?.slice(SLOT_KEY.length + 1);
  return { state: marked, ...(slot ? { slot } : {}) };
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Live processes marked as `name`'s runner of this state folder, with their start times. */
export async function markedRunners(stateDir: string, name: string): Promise<Array<{ pid: number; startTime: number }>> {
  const want = [`${STATE_KEY}=${resolve(stateDir)}`, `${SLOT_KEY}=${name}`];
  const pids = (await readdir("/proc").catch(() => [] as string[])).filter((d) => /^\d+$/.test(d)).map(Number);
  const found = await Promise.all(pids.map(async (pid) => {
    const environ = await readFile(`/proc/${pid}/environ`, "latin1").catch(() => "");
    if (!environ) return undefined;
    const vars = environ.split("\0");
    if (!want.every((w) => vars.includes(w))) return undefined;
    const stat = await procStat(pid);
    return stat && stat.state !== "Z" ? { pid, startTime: stat.startTime } : undefined;
  }));
  return found.filter((f): f is { pid: number; startTime: number } => f !== undefined);
}
