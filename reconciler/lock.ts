import { mkdir, open, readFile, rm } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { isOurs, procStat } from "./drivers/proc.js";

/** Who holds the apply lock. */
export interface LockHolder {
  readonly pid: number;
  /** Start time of the holder (/proc/<pid>/stat field 22), so a reused pid is not mistaken for it. */
  readonly pid_start?: number;
  readonly host: string;
  readonly started_at: string;
  readonly command: string;
}

/** A second apply while one runs: `apply.locked`, naming the holder. */
export class LockedError extends Error {
  readonly code = "apply.locked";
  constructor(readonly holder: LockHolder) {
    super(`another apply holds the lock: pid ${holder.pid} on ${holder.host}, \`${holder.command}\`, since ${holder.started_at}`);
  }
}

/**
 * One apply at a time per state folder: `apply.lock` is created exclusively
 * and names its holder. A lock whose holder is dead (or whose pid now belongs
 * to another program) is taken over. Returns the release function.
 */
export async function acquireLock(stateDir: string, command: string): Promise<() => Promise<void>> {
  await mkdir(stateDir, { recursive: true });
  const path = join(stateDir, "apply.lock");
  const me: LockHolder = { pid: process.pid, pid_start: (await procStat(process.pid))?.startTime, host: hostname(), started_at: new Date().toISOString(), command };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const handle = await open(path, "wx", 0o644);
      await handle.writeFile(`${JSON.stringify(me)}\n`);
      await handle.close();
      return () => rm(path, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const holder = await readHolder(path);
      if (holder && (await isAlive(holder))) throw new LockedError(holder);
      await rm(path, { force: true });
    }
  }
  throw new Error(`could not take the apply lock at ${path}`);
}

/** Who holds the apply lock now (an apply or a sweep under way), or nothing; a dead holder's lock is no holder. */
export async function lockHolder(stateDir: string): Promise<LockHolder | undefined> {
  const holder = await readHolder(join(stateDir, "apply.lock"));
  return holder && (await isAlive(holder)) ? holder : undefined;
}

async function readHolder(path: string): Promise<LockHolder | undefined> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as LockHolder;
  } catch {
    return undefined;
  }
}

async function isAlive(holder: LockHolder): Promise<boolean> {
  if (holder.host !== hostname()) return true;
  if (holder.pid_start !== undefined) return isOurs(holder.pid, holder.pid_start);
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
