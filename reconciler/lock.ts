import { mkdir, open, readFile, rm } from "node:fs/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { processStartTime } from "./proc.js";

/** Who holds the apply lock. */
export interface LockHolder {
  readonly pid: number;
  readonly pid_start?: string;
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
  const me: LockHolder = { pid: process.pid, pid_start: await processStartTime(process.pid), host: hostname(), started_at: new Date().toISOString(), command };
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

async function readHolder(path: string): Promise<LockHolder | undefined> {
  try {
    return JSON.parse(await readFile(path, "utf8")) as LockHolder;
  } catch {
    return undefined;
  }
}

async function isAlive(holder: LockHolder): Promise<boolean> {
  if (holder.host !== hostname()) return true;
  try {
    process.kill(holder.pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  return holder.pid_start === undefined || (await processStartTime(holder.pid)) === holder.pid_start;
}
