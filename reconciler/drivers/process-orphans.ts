import { readFile, readdir } from "node:fs/promises";
import { resolve } from "node:path";
import { procStat } from "./proc.js";

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
