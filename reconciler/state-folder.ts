import { existsSync, readdirSync, statSync } from "node:fs";
import { chmod, mkdir, rm, rmdir, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";

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
 * A folder that holds other files and none of hal0's (`--state /`, a home
 * folder) is refused (StateFolderForeignError): closed to 0700, `/` locked
 * every other user out of the system. Once per folder per process.
 */
export async function ensureStateFolder(dir: string): Promise<void> {
  if (ensured.has(dir)) return;
  // Another folder (/, a home folder, a project's) is neither closed nor written into: it is not hal0's.
  const foreign = foreignEntries(dir);
  if (foreign !== undefined) throw new StateFolderForeignError(dir, foreign);
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

/**
 * What a state folder holds (docs/operations.md, "The state folder"): a folder
 * with any of these, or none at all, is (or can be) hal0's.
 */
const STATE_ENTRIES: ReadonlySet<string> = new Set([
  "inventory.json", "applied-settings.json", "outcomes.json", "steps.json", "conditions.json", "hermes-managed.json",
  "runners.json", "apply.lock", "serve.lock", "reconcile.lock", "pull.lock", "commit.lock", "label-key", "slots", "stacks-state.json",
  "hal0.db", "memory.db", "operator.token", "tokens", "logs", "credentials", "runs",
]);

/**
 * The first few entries of `dir` when it is a folder that holds entries and
 * none of hal0's (STATE_ENTRIES; a dotfile counts as neither): not a state
 * folder, and not hal0's to make one. Undefined for a folder that is not
 * there, is empty, holds one of hal0's entries, or cannot be listed (its use
 * then fails or succeeds on its own).
 */
export function foreignEntries(dir: string): string[] | undefined {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return undefined;
  }
  const visible = names.filter((n) => !n.startsWith("."));
  if (visible.length === 0 || names.some((n) => STATE_ENTRIES.has(n) || /^memory\.db-|^hal0\.db-/.test(n))) return undefined;
  return visible.sort().slice(0, 4);
}

/** `state.foreign`: the state folder named holds other files and none of hal0's; nothing was written, nor its mode changed. */
export class StateFolderForeignError extends Error {
  readonly code = "state.foreign";
  constructor(readonly dir: string, entries: readonly string[]) {
    super(`state folder ${dir} holds other files (${entries.join(", ")}${entries.length === 4 ? ", …" : ""}) and none of hal0's; hal0 keeps its state folder to itself (it closes it to 0700 and writes its tokens and records there), so it leaves this one as it is: name a folder of its own, such as ${dir === "/" ? "/var/lib/hal0" : `${dir.replace(/\/+$/, "")}/hal0-state`} (hal0 makes it)`);
  }
}

/**
 * Whether `a` and `b` name one folder: the same path, or one reached by
 * another (a symbolic link, `..`, a bind mount: the same device and inode).
 * Undefined when either cannot be looked at (not there): nothing to compare.
 */
export function sameFolder(a: string, b: string): boolean | undefined {
  if (resolve(a) === resolve(b)) return true;
  try {
    const ours = statSync(a);
    const theirs = statSync(b);
    return ours.dev === theirs.dev && ours.ino === theirs.ino;
  } catch {
    return undefined;
  }
}
