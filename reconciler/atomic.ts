import { statSync, type Stats } from "node:fs";
import { lstat, open, readdir, readlink, realpath, rename, rm, stat } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { isLive, procStat } from "./drivers/proc.js";

/**
 * hal0's temp files: `.<base>.<pid>.<12 hex>.hal0.tmp`, beside the file they
 * replace. The writer's pid is in the name so that a temp left by a writer
 * that died mid-write (kill -9, a crash, a power cut) can be told from one a
 * live writer is still filling (`removeStaleTemps`).
 */
const TEMP_NAME = /^\..+\.([0-9]+)\.[0-9a-f]{12}\.hal0\.tmp$/;
/** A folder set aside to be removed (`tempPathFor(path, "removed")`) by a writer that may have died before it was. */
const ASIDE_NAME = /^\..+\.([0-9]+)\.[0-9a-f]{12}\.hal0\.removed$/;
/** The name hal0 used before the pid was in it (`.<base>.<12 hex>.tmp`): removed once it is this old. */
const LEGACY_TEMP_NAME = /^\..+\.[0-9a-f]{12}\.tmp$/;
const LEGACY_STALE_MS = 60 * 60_000;

/** Writes `text` (or bytes) to `path` atomically: a temp file in the same folder, fsync, rename. */
export async function writeFileAtomic(path: string, text: string | Uint8Array, mode = 0o644): Promise<void> {
  await writeAtomically(path, text, mode);
}

/** Who owns a file: what a replaced file keeps. */
export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

export interface KeepOptions {
  /** The mode of a file that was not there (the umask applies). Default 0o644. */
  readonly newMode?: number;
  /** The owner a file that was not there takes, where permitted. Default: the writer. */
  readonly newOwner?: Owner;
  /** The bits a replaced file's mode may keep (0o700: never readable by others). Default: all of them. */
  readonly maxMode?: number;
}

/**
 * Replaces a file that a person or another program has arranged — a file of
 * the config tree, a Hermes profile's — as an editor would: a symbolic link
 * stays a link and the file it leads to is replaced (`linkTarget`); the file
 * keeps its mode exactly and, where permitted, its owner, set on the temp
 * before the rename so that the new bytes are never readable by more people
 * than the old ones were. A file that was not there gets `newMode`. Atomic
 * like writeFileAtomic, in the folder of the file replaced. Returns the path written.
 */
export async function replaceFileKeeping(path: string, text: string | Uint8Array, options: KeepOptions = {}): Promise<string> {
  const target = await linkTarget(path);
  const was = await stat(target).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
  if (was === undefined) await writeAtomically(target, text, options.newMode ?? 0o644, { owner: options.newOwner });
  else await writeAtomically(target, text, was.mode & 0o7777 & (options.maxMode ?? 0o7777), { exact: true, owner: was });
  return target;
}

/**
 * Where a write to `path` lands: `path` itself, or, when it is a symbolic
 * link, the file it leads to (through every link of the chain; a link that
 * leads to nothing yet, to the path it names, so that the write makes it).
 */
export async function linkTarget(path: string): Promise<string> {
  const info = await lstat(path).catch(() => undefined);
  if (!info?.isSymbolicLink()) return path;
  try {
    return await realpath(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err; // ELOOP: a loop of links is refused, not replaced
    return resolve(dirname(path), await readlink(path));
  }
}

/**
 * The name of a temp that will replace `path`, in its folder, as hal0 names
 * them all (`.<base>.<pid>.<12 hex>.hal0.tmp`): a writer that writes one
 * itself rather than through writeFileAtomic (a synchronous one) uses it, so
 * that removeStaleTemps finds what it leaves when it dies. `removed`: the
 * name a folder is renamed to before it is removed (`.<base>.<pid>.<12
 * hex>.hal0.removed`), so that one a crash leaves half-removed is found too.
 */
export function tempPathFor(path: string, kind: "tmp" | "removed" = "tmp"): string {
  return join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(6).toString("hex")}.hal0.${kind}`);
}

async function writeAtomically(path: string, text: string | Uint8Array, mode: number, keep: { exact?: boolean; owner?: Owner | undefined } = {}): Promise<void> {
  const tmp = tempPathFor(path);
  const handle = await open(tmp, "wx", mode);
  try {
    await handle.writeFile(text);
    if (keep.owner) {
      await handle.chown(keep.owner.uid, keep.owner.gid).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== "EPERM") throw err; // not permitted: the writer keeps it
      });
    }
    if (keep.exact) await handle.chmod(mode); // after chown, which may clear set-id bits
    await handle.sync();
  } catch (err) {
    await handle.close();
    await rm(tmp, { force: true });
    throw named(err, path);
  }
  await handle.close();
  await rename(tmp, path).catch(async (err: unknown) => {
    await rm(tmp, { force: true });
    throw err;
  });
}

/**
 * A write to an open file fails without a path (ENOSPC on a full disk,
 * EDQUOT, EIO): it gets the file it was for, in its `path` and in its message
 * as node words one that has a path (`ENOSPC: no space left on device, write
 * '<path>'`), so the refusal names it wherever it is shown: the CLI's
 * `system.io: could not write <path>: no space left on device`, a slot
 * step's error (`slot.apply_failed`), a log line.
 */
function named(err: unknown, path: string): unknown {
  const e = err as NodeJS.ErrnoException | null;
  if (e instanceof Error && typeof e.code === "string" && e.path === undefined) {
    e.path = path;
    if (!e.message.includes(path)) e.message = `${e.message} '${path}'`;
  }
  return err;
}

/**
 * Removes hal0's own temp files left in `dirs` (not recursive) by writers
 * that are gone: a `.hal0.tmp` whose pid is not a live process (a live one
 * is never touched, whoever it is), and an old-style temp (no pid in its
 * name) an hour old; and, with all it holds, a folder such a writer set
 * aside to remove (a `.hal0.removed`). Nothing else: no other folder, not
 * another program's files.
 * A folder that is missing or unreadable is skipped. Returns the paths removed.
 */
export async function removeStaleTemps(dirs: Iterable<string>): Promise<string[]> {
  const removed: string[] = [];
  for (const dir of new Set(dirs)) {
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names) {
      const aside = ASIDE_NAME.exec(name)?.[1];
      if (aside !== undefined) {
        const path = join(dir, name);
        if (!(await lstat(path).catch(() => undefined))?.isDirectory() || (await writerAlive(Number(aside)))) continue;
        await rm(path, { recursive: true, force: true }).then(() => removed.push(path), () => undefined);
        continue;
      }
      const pid = TEMP_NAME.exec(name)?.[1];
      const legacy = pid === undefined && LEGACY_TEMP_NAME.test(name);
      if (pid === undefined && !legacy) continue;
      const path = join(dir, name);
      const info = await lstat(path).catch(() => undefined);
      if (!info?.isFile()) continue;
      if (pid !== undefined ? await writerAlive(Number(pid)) : Date.now() - info.mtimeMs < LEGACY_STALE_MS) continue;
      await rm(path, { force: true }).then(() => removed.push(path), () => undefined);
    }
  }
  return removed;
}

/** `pid` may still be writing: it exists (or can't be checked), and is not a zombie. */
async function writerAlive(pid: number): Promise<boolean> {
  if (!Number.isSafeInteger(pid) || pid <= 0) return true; // not a pid hal0 writes: leave the file alone
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM"; // EPERM: alive, another user's
  }
  const stat = await procStat(pid);
  return stat === undefined || isLive(stat); // no /proc to ask: assume alive
}

/**
 * The nearest part of `path` that exists (`path` itself, else its parent, …),
 * with its stat: where a folder that is not there yet would be made, or the
 * file that stops it. Undefined when no part exists. A part that cannot be
 * stat'ed (below a file, or behind a folder hal0 may not search) counts as not there.
 */
export function nearestExisting(path: string): { readonly at: string; readonly info: Stats } | undefined {
  for (let at = path; ; at = dirname(at)) {
    let info: Stats | undefined;
    try {
      info = statSync(at, { throwIfNoEntry: false });
    } catch {
      // below a file (ENOTDIR), or not ours to look at: the next part up is asked
    }
    if (info !== undefined) return { at, info };
    if (dirname(at) === at) return undefined;
  }
}
