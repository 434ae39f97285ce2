import { randomBytes } from "node:crypto";
import { link, lstat, readFile, rm, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { writeFileAtomic } from "./atomic.js";
import { bootId, isOurs, procStat, sameBoot } from "./drivers/proc.js";
import { ensureStateFolder, sameFolder } from "./state-folder.js";

/**
 * What a refusal adds for a holder on another host, whose process hal0
 * cannot look for: its lock is never taken over, so one left by a hal0 that
 * died there (a container since replaced, whose hostname was another) held
 * the state folder for good, with no word of how to free it.
 */
function elsewhere(holder: LockHolder, file: string | undefined): string {
  if (file === undefined || holder.host === hostname()) return "";
  return `. hal0 cannot see the processes of ${holder.host} from ${hostname()}: if no hal0 runs there any more (a container or machine since replaced), remove ${file}`;
}

/** Who holds the apply lock. */
export interface LockHolder {
  readonly pid: number;
  /** Start time of the holder (/proc/<pid>/stat field 22), so a reused pid is not mistaken for it. */
  readonly pid_start?: number;
  /**
   * The boot the holder ran in (/proc/sys/kernel/random/boot_id): a start time counts ticks after boot, so a lock
   * left by a hal0 the host's restart ended never names a process of the new boot that got the same pid at the same tick.
   */
  readonly boot_id?: string;
  readonly host: string;
  readonly started_at: string;
  readonly command: string;
  /**
   * The state folder the lock was taken in (absolute): a lock copied with its folder (`cp -a` of a box whose
   * serve runs) names the original, whose holder holds that folder, not the copy (`heldHere`).
   */
  readonly state?: string;
}

/** A second apply while one runs: `apply.locked`, naming the holder. */
export class LockedError extends Error {
  readonly code = "apply.locked";
  constructor(readonly holder: LockHolder, file?: string) {
    super(`another apply holds the lock: pid ${holder.pid} on ${holder.host}, \`${holder.command}\`, since ${holder.started_at}${elsewhere(holder, file)}`);
  }
}

/**
 * One apply at a time per state folder: `apply.lock` is created exclusively
 * and names its holder. A lock whose holder is dead (or whose pid now belongs
 * to another program) is taken over. Returns the release function.
 */
export async function acquireLock(stateDir: string, command: string): Promise<() => Promise<void>> {
  const held = await holdFile(stateDir, "apply.lock", command);
  if ("holder" in held) throw new LockedError(held.holder, join(stateDir, "apply.lock"));
  return held.release;
}

/**
 * A second sweep loop on a state folder one already runs on (`hal0 reconcile`'s, or a `hal0 serve`'s own):
 * `server.already_running`, naming the holder. Two loops, each converging the box to its own config folder
 * (or to one folder named two ways), would undo each other's sweeps, replacing the slots at every one.
 */
export class LoopLockedError extends Error {
  readonly code = "server.already_running";
  constructor(readonly holder: LockHolder, file?: string) {
    super(`\`${holder.command}\` (pid ${holder.pid} on ${holder.host}, since ${holder.started_at}) already runs the reconcile loop on this state folder; one loop per state folder${elsewhere(holder, file)}`);
  }
}

/**
 * One sweep loop per state folder: `reconcile.lock`, held by `hal0 reconcile`
 * while its loop runs and by a `hal0 serve` that runs its own, taken over
 * from a dead holder as `apply.lock` is. Returns the release function.
 */
export async function acquireLoopLock(stateDir: string, command: string): Promise<() => Promise<void>> {
  const held = await holdFile(stateDir, "reconcile.lock", command);
  if ("holder" in held) throw new LoopLockedError(held.holder, join(stateDir, "reconcile.lock"));
  return held.release;
}

/** The sweep loop running on this state folder, as its `reconcile.lock` names it, or nothing (a dead holder is none). */
export async function loopHolder(stateDir: string): Promise<LockHolder | undefined> {
  return liveHolder(join(stateDir, "reconcile.lock"));
}

/** A second `hal0 model pull` on a state folder one already pulls into: `model.pull_busy`, naming the holder. */
export class PullLockedError extends Error {
  readonly code = "model.pull_busy";
  constructor(readonly holder: LockHolder, file?: string) {
    super(`another hal0 model pull runs on this state folder: pid ${holder.pid} on ${holder.host}, \`${holder.command}\`, since ${holder.started_at}; wait for it to end${elsewhere(holder, file)}`);
  }
}

/**
 * One `hal0 model pull` per state folder at a time (`pull.lock`, taken over
 * from a dead holder): while it holds the lock and no `hal0 serve` runs
 * there, a pull the database says is under way has nobody working on it (a
 * pull that was interrupted), so the command may resume it.
 */
export async function acquirePullLock(stateDir: string, command: string): Promise<() => Promise<void>> {
  const held = await holdFile(stateDir, "pull.lock", command);
  if ("holder" in held) throw new PullLockedError(held.holder, join(stateDir, "pull.lock"));
  return held.release;
}

/** How long a commit waits for another process's commit to the same box's files (`commit.lock`) before it is refused. */
export const COMMIT_WAIT_MS = 10_000;

/** A commit that waited COMMIT_WAIT_MS for another process's (`config.locked`), naming the holder. Nothing was written. */
export class CommitLockedError extends Error {
  readonly code = "config.locked";
  constructor(readonly holder: LockHolder, file?: string) {
    super(`another hal0 process is writing this box's config files: pid ${holder.pid} on ${holder.host}, \`${holder.command}\`, since ${holder.started_at}; nothing was written, try again${elsewhere(holder, file)}`);
  }
}

/**
 * One commit to the config tree at a time among the processes that share a
 * state folder (`hal0 serve`, `hal0 agent approvals approve`, `hal0 model
 * pull`): `commit.lock`, held from a commit's re-read of the files it edits to
 * its last write, so that no other process writes one of them in between
 * (each would check the file before the other's write and overwrite it after:
 * a lost update). Waits for a live holder up to `waitMs`, then throws
 * CommitLockedError; a dead holder's lock is taken over. Returns the release function.
 */
export async function acquireCommitLock(stateDir: string, command: string, waitMs = COMMIT_WAIT_MS): Promise<() => Promise<void>> {
  const end = Date.now() + waitMs;
  for (;;) {
    const held = await holdFile(stateDir, "commit.lock", command);
    if (!("holder" in held)) return held.release;
    if (Date.now() >= end) throw new CommitLockedError(held.holder, join(stateDir, "commit.lock"));
    await sleep(20);
  }
}

/** What `serve.lock` names: its holder, and once the server listens, its URL, whether it runs the sweep loop, and the config folder it serves. */
export type ServeHolder = LockHolder & { url?: string; reconcile?: boolean; config?: string };

/** "hal0 serve (pid 123 at http://127.0.0.1:8080/)": the running server, as messages name it. */
export function serveLabel(holder: ServeHolder): string {
  return `hal0 serve (pid ${holder.pid}${holder.url ? ` at ${holder.url}` : ""})`;
}

/** A second `hal0 serve` on a state folder one already serves: `server.already_running`, naming the holder. */
export class ServeLockedError extends Error {
  readonly code = "server.already_running";
  constructor(readonly holder: ServeHolder, file?: string) {
    super(`another hal0 serve runs on this state folder: pid ${holder.pid} on ${holder.host}${holder.url ? ` at ${holder.url}` : ""}, since ${holder.started_at}; stop it first, or give this one its own --state${elsewhere(holder, file)}`);
  }
}

/**
 * One `hal0 serve` per state folder (its database, tokens, approvals and
 * sweep loop are the folder's): `serve.lock`, held for the server's life and
 * taken over from a dead holder as `apply.lock` is. `describe` adds what the
 * server learns once it listens (its URL, whether it runs the sweep loop, its
 * config folder) to the file.
 */
export async function acquireServeLock(stateDir: string): Promise<{ describe: (extra: { url: string; reconcile: boolean; config?: string }) => Promise<void>; release: () => Promise<void> }> {
  const held = await holdFile(stateDir, "serve.lock", "hal0 serve");
  if ("holder" in held) throw new ServeLockedError(held.holder, join(stateDir, "serve.lock"));
  const path = join(stateDir, "serve.lock");
  return {
    describe: async (extra) => writeFileAtomic(path, `${JSON.stringify({ ...held.me, ...extra })}\n`),
    release: held.release,
  };
}

/**
 * Creates `<stateDir>/<file>` exclusively, naming this process; or the live
 * holder that has it. The holder's record is written whole to a temp file
 * first and linked into place, so a reader never finds the lock empty (an
 * empty one would read as no holder and be taken over). Where the folder's
 * file system has no hard links, the lock is created exclusively and written.
 */
async function holdFile(stateDir: string, file: string, command: string): Promise<{ me: LockHolder; release: () => Promise<void> } | { holder: LockHolder }> {
  await ensureStateFolder(stateDir);
  const path = join(stateDir, file);
  const me: LockHolder = { ...(await thisProcess()), boot_id: bootId(), host: hostname(), started_at: new Date().toISOString(), command, state: resolve(stateDir) };
  const record = `${JSON.stringify(me)}\n`;
  const tmp = join(stateDir, `.${file}.${process.pid}.${randomBytes(6).toString("hex")}.hal0.tmp`);
  await writeFile(tmp, record, { mode: 0o644, flag: "wx" }).catch(async (err: NodeJS.ErrnoException) => {
    // A full disk: the temp was made, its bytes were not. Nothing is left behind, and the refusal names the lock.
    await rm(tmp, { force: true });
    if (err.path === undefined) err.path = path;
    throw err;
  });
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await link(tmp, path).catch(async (err: NodeJS.ErrnoException) => {
          if (err.code !== "EPERM" && err.code !== "ENOTSUP" && err.code !== "EOPNOTSUPP") throw err;
          await writeFile(path, record, { mode: 0o644, flag: "wx" });
        });
        return { me, release: () => rm(path, { force: true }) };
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        const holder = await readHolder(path);
        if (holder && heldHere(holder, stateDir) && (await isAlive(holder))) return { holder };
        // A folder in the lock's place (made by hand, a restore gone wrong) names no holder, and is not hal0's to remove.
        if ((await lstat(path).catch(() => undefined))?.isDirectory()) throw new LockFolderError(path);
        await rm(path, { force: true });
      }
    }
  } finally {
    await rm(tmp, { force: true });
  }
  throw new Error(`could not take the lock at ${path}`);
}

/** `system.io`: a folder stands where a lock file goes, so no command can take that lock until it is removed. */
export class LockFolderError extends Error {
  readonly code = "system.io";
  constructor(readonly file: string) {
    super(`cannot take the lock ${file}: a folder stands there, not a lock hal0 wrote; remove it (rmdir ${file}), then run the command again`);
  }
}

/** The `hal0 serve` running on this state folder, as its `serve.lock` names it, or nothing. */
export async function serveHolder(stateDir: string): Promise<ServeHolder | undefined> {
  return liveHolder(join(stateDir, "serve.lock"));
}

/** The `hal0 model pull` working on this state folder, as its `pull.lock` names it, or nothing (a dead holder is none). */
export async function pullHolder(stateDir: string): Promise<LockHolder | undefined> {
  return liveHolder(join(stateDir, "pull.lock"));
}

/** Who holds the apply lock now (an apply or a sweep under way), or nothing; a dead holder's lock is no holder. */
export async function lockHolder(stateDir: string): Promise<LockHolder | undefined> {
  return liveHolder(join(stateDir, "apply.lock"));
}

async function liveHolder(path: string): Promise<LockHolder | undefined> {
  const holder = await readHolder(path);
  return holder && heldHere(holder, dirname(path)) && (await isAlive(holder)) ? holder : undefined;
}

/**
 * Whether the lock in `stateDir` was taken there: false for one that names
 * another folder still there (not this one under another path), which the
 * lock was copied from with the folder; its holder holds that one. A lock
 * with no folder (a hal0 before the field), naming a folder since gone (this
 * one, moved), or taken on another host is taken as this folder's.
 */
function heldHere(holder: LockHolder, stateDir: string): boolean {
  // A holder on another host names a path of its own file system: nothing to compare here.
  if (typeof holder.state !== "string" || holder.host !== hostname()) return true;
  return sameFolder(holder.state, stateDir) ?? true;
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
  if (!sameBoot(holder.boot_id)) return false;
  if (holder.pid_start !== undefined) return isOurs(holder.pid, holder.pid_start);
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

let me: Promise<{ pid: number; pid_start?: number }> | undefined;

/** This process as a lock names its holder (pid and start time), asked of /proc once. */
export function thisProcess(): Promise<{ pid: number; pid_start?: number }> {
  me ??= procStat(process.pid).then((stat) => ({ pid: process.pid, pid_start: stat?.startTime }));
  return me;
}
