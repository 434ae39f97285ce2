import { existsSync, statSync } from "node:fs";
import { chmod, mkdir, rm, rmdir, stat } from "node:fs/promises";
import { dirname } from "node:path";

/** State folders this process has already made or tightened. */
const ensured = new Set<string>();

/**
 * Makes the state folder (and any missing parent) if it is not there, and
 * keeps it 0700: it holds tokens, the runners' records with their env and
 * hal0.db, so nobody but its owner may look in (docs/operations.md). One
 * that exists with group or other bits (made by hand, or by an older hal0)
 * is tightened, unless anybody may write it (a shared folder such as /tmp:
 * closed, it would break for everyone else); a folder this process may not
 * chmod is left as it is (its writes then fail or succeed on their own).
 * Once per folder per process.
 */
export async function ensureStateFolder(dir: string): Promise<void> {
  if (ensured.has(dir)) return;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const s = await stat(dir);
  if ((s.mode & 0o077) !== 0 && !sharedMode(s.mode)) await chmod(dir, s.mode & 0o700).catch(() => undefined);
  ensured.add(dir);
}

/** A mode anybody may write into (o+w; /tmp's 1777): a shared folder, never tightened (the CLI refuses it as a state folder, state.shared). */
export function sharedMode(mode: number): boolean {
  return (mode & 0o002) !== 0;
}

/** `dir` exists and is a shared folder (sharedMode). */
export function isShared(dir: string): boolean {
  const s = statSync(dir, { throwIfNoEntry: false });
  return s !== undefined && s.isDirectory() && sharedMode(s.mode);
}

/**
 * The outermost of `dir` and its parents that is not there yet: what
 * ensureStateFolder would make for it (undefined when `dir` exists).
 */
export function missingFolder(dir: string): string | undefined {
  let missing: string | undefined;
  for (let d = dir; !existsSync(d); d = dirname(d)) {
    missing = d;
    if (dirname(d) === d) break;
  }
  return missing;
}

/**
 * Removes the state folder `dir` this process made, with everything in it,
 * then each parent it made up to `made` (what missingFolder named before) while
 * that parent is empty: what a start that failed leaves of a state folder it
 * created. A parent something else has put a file in since is left as it is.
 */
export async function removeMadeFolder(made: string, dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  ensured.delete(dir);
  for (let d = dirname(dir); d.length >= made.length && d !== dirname(d); d = dirname(d)) {
    if (!(await rmdir(d).then(() => true, () => false))) return;
  }
}
