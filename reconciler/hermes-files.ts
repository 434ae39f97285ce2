import { entryKind } from "../compiler/load.js";
import { constants, lstatSync, statSync, type Dirent } from "node:fs";
import { lstat, open, readdir, readlink } from "node:fs/promises";
import { dirname, isAbsolute, join } from "node:path";
import { removeStaleTemps, replaceFileKeeping } from "./atomic.js";
import { applyHal0Keys, keepFileCredentials } from "./hermes-wire.js";
import type { ObservedHermesProfile } from "./observed.js";

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Reads every named Hermes profile's `config.yaml` under `<home>/profiles/`:
 * the sweep's input for `hermes.<p>`. The default profile (`<home>/config.yaml`)
 * is not read here: it is converged only on demand (`hal0 agent reprovision
 * hermes --repair`). A missing home, a profile folder without a config.yaml,
 * or a folder name that cannot be an agent identity (`hermes__<p>` must match
 * `[A-Za-z0-9_-]{1,64}`) is skipped, and a profiles folder hal0 cannot read
 * (permission denied) holds none it can see. A config.yaml hal0 cannot read (a
 * folder, a pipe, a loop of links, a link to nothing, permission denied, a link to a file its
 * maker does not own) is observed with `unreadable` (why) and left alone by
 * the plan: one profile never stops the sweep, a plan or `hal0 down` from
 * converging the rest of the box.
 */
export const PROFILE_NAME = /^[A-Za-z0-9_-]{1,56}$/;

export async function readHermesProfiles(home: string): Promise<Record<string, ObservedHermesProfile>> {
  const dir = join(home, "profiles");
  // A profiles folder hal0 may not read (a home under another user's 0700 folder, as the default
  // /var/lib/hal0/.hermes is for anyone but root) holds no profile hal0 can see: the home is then
  // unobservable (observeHermesHome says why), which removes nothing, rather than a failure of every plan.
  const entries = await readdir(dir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (typeof err.code === "string") return [];
    throw err;
  });
  const names = profileFolders(dir, entries);
  const read = await Promise.all(names.map((name) => observeHermesFile(join(dir, name, "config.yaml"))));
  const out: Record<string, ObservedHermesProfile> = {};
  names.forEach((name, i) => {
    if (read[i] !== undefined) out[name] = read[i]!;
  });
  return sharedFilesLeftOut(dir, out);
}

/**
 * Profiles whose config.yaml is one file through a symbolic link (a link
 * to another profile's): wired under each name, the file would get each
 * identity's token by turns, every sweep undoing the last one's write. The
 * file is the profile of one name: the one whose config.yaml is the file
 * itself (not a link), else the first; each link to it is observed
 * `unreadable`, saying whose file it is, and left alone. (Hard links are
 * not: hal0's first write replaces the file, which parts them.)
 */
function sharedFilesLeftOut(dir: string, profiles: Record<string, ObservedHermesProfile>): Record<string, ObservedHermesProfile> {
  const byFile = new Map<string, string[]>();
  for (const name of Object.keys(profiles).sort()) {
    if (profiles[name]!.unreadable !== undefined) continue;
    try {
      const info = statSync(join(dir, name, "config.yaml"), { throwIfNoEntry: false });
      if (info !== undefined) byFile.set(`${info.dev}:${info.ino}`, [...(byFile.get(`${info.dev}:${info.ino}`) ?? []), name]);
    } catch {
      // gone since it was read: read alone
    }
  }
  const out = { ...profiles };
  const isLink = (name: string) => {
    try {
      return lstatSync(join(dir, name, "config.yaml")).isSymbolicLink();
    } catch {
      return false;
    }
  };
  for (const names of byFile.values()) {
    if (names.length < 2) continue;
    const own = names.find((name) => !isLink(name)) ?? names[0]!;
    for (const name of names) {
      // A hard link (a file of its own name) is parted from the other by hal0's first write, which replaces the file.
      if (name !== own && isLink(name)) out[name] = { text: "", unreadable: `it is the same file as profile ${own}'s config.yaml (a link), which hal0 wires as ${own}'s: one file cannot hold two profiles' tokens; give profile ${name} a config.yaml of its own` };
    }
  }
  return out;
}

/**
 * Whether `[hermes] home` can be observed, and which profile folders it
 * holds now: a profile hal0 wired whose folder is not among them was removed.
 * A home that is missing, empty or cannot be read (an unmounted disk, a
 * folder briefly gone) cannot be observed (`folders` undefined): nothing may
 * be concluded from a profile's absence then.
 */
export async function observeHermesHome(home: string): Promise<{ folders?: readonly string[]; unobservable?: string }> {
  const top = await readdir(home).catch((err: NodeJS.ErrnoException) => err);
  if (top instanceof Error) return { unobservable: top.code === "ENOENT" ? "it does not exist" : top.code === "ENOTDIR" ? "it is not a folder" : `it cannot be read (${top.code ?? top.message})` };
  if (top.length === 0) return { unobservable: "it is empty (not mounted?)" };
  const dir = join(home, "profiles");
  const entries = await readdir(dir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => err);
  if (entries instanceof Error) {
    if (entries.code === "ENOENT") return { folders: [] };
    return { unobservable: `${dir} cannot be read (${entries.code ?? entries.message})` };
  }
  return { folders: profileFolders(dir, entries) };
}

/**
 * A line for each of `named` (profile names, never `*`) that `home` holds no
 * folder of (names are case-sensitive: `Work` is not `work`), saying so and
 * what is there: an admission to it stands (a profile may be made later) but
 * reaches nothing until a folder of that name is there. None when the home
 * cannot be observed. `hal0 bridge admit` and the Agents page's form say these.
 */
export async function missingProfileLines(home: string, named: readonly string[]): Promise<string[]> {
  const { folders } = await observeHermesHome(home);
  if (folders === undefined) return [];
  return named.filter((p) => !folders.includes(p)).map((p) => {
    const like = folders.filter((f) => f.toLowerCase() === p.toLowerCase());
    return `no Hermes profile ${p} in ${home}/profiles${like.length > 0 ? ` (profile names are case-sensitive: did you mean ${like.join(" or ")}?)` : folders.length > 0 ? ` (there are: ${folders.join(", ")})` : ""}; the admission reaches it only once a folder of that name is there`;
  });
}

/**
 * The profiles of a profiles folder `dir` (its `entries`), sorted: each name
 * that can be an identity and leads to a folder (a symbolic link to one kept
 * elsewhere counts as what it leads to). A folder reached under two names (a
 * link to another profile's folder, two links to one folder) is one profile:
 * wired under both, its config.yaml would get two identities' tokens by
 * turns, each sweep undoing the last one's write. It is the profile of one
 * name: the folder's own, else the first of its links; the others are none.
 */
function profileFolders(dir: string, entries: readonly Dirent[]): string[] {
  const byFolder = new Map<string, { readonly name: string; readonly own: boolean }>();
  for (const entry of [...entries].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const path = join(dir, entry.name);
    if (!PROFILE_NAME.test(entry.name) || entryKind(path, entry) !== "folder") continue;
    let folder = entry.name;
    try {
      const info = statSync(path, { throwIfNoEntry: false });
      if (info !== undefined) folder = `${info.dev}:${info.ino}`;
    } catch {
      // gone or not ours to look at since it was listed: its own name
    }
    const kept = byFolder.get(folder);
    if (kept === undefined || (!kept.own && entry.isDirectory())) byFolder.set(folder, { name: entry.name, own: entry.isDirectory() });
  }
  return [...byFolder.values()].map((p) => p.name).sort();
}

/** A Hermes config file as observed: its text, or why it cannot be read; undefined when it does not exist. */
export async function observeHermesFile(file: string): Promise<ObservedHermesProfile | undefined> {
  try {
    const text = await readHermesFile(file);
    return text === undefined ? undefined : { text };
  } catch (err) {
    if (err instanceof HermesReadError) return { text: "", unreadable: err.why };
    throw err;
  }
}

/** A Hermes config file that is there but cannot be read as a file: `why` says what it is instead. */
export class HermesReadError extends Error {
  constructor(readonly file: string, readonly why: string) {
    super(`cannot read ${file}: ${why}`);
  }
}

/**
 * A Hermes config file's text; undefined when it does not exist (a symbolic
 * link to nothing is there, and refused as below). Anything
 * else that is not a readable regular file of UTF-8 text is
 * `HermesReadError`: opened without blocking, so a pipe in its place is
 * refused rather than waited on for ever; bytes that are not UTF-8 are not
 * decoded into replacement characters that a write would put in their place.
 * A byte-order mark stays in the text, so a write keeps it.
 */
export async function readHermesFile(file: string): Promise<string | undefined> {
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // A symbolic link to nothing (a dotfiles checkout moved) is a profile whose file is broken, not one that has none.
    const target = code === "ENOENT" ? await readlink(file).catch(() => undefined) : undefined;
    if (target !== undefined) throw new HermesReadError(file, `it is a symbolic link to ${target}, which does not exist`);
    if (code === "ENOENT" || code === "ENOTDIR") return undefined;
    throw new HermesReadError(file, code === "ELOOP" ? "it is a loop of symbolic links (ELOOP)" : code === "EACCES" || code === "EPERM" ? `permission denied (${code})` : `${code ?? (err as Error).message}`);
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new HermesReadError(file, info.isDirectory() ? "it is a folder, not a file" : "it is not a regular file");
    const foreign = await foreignLink(file, info.uid);
    if (foreign !== undefined) throw new HermesReadError(file, foreign);
    const bytes = await handle.readFile();
    try {
      return utf8.decode(bytes);
    } catch {
      // Decoded with replacement characters, the bytes that are not UTF-8 would be rewritten on the next write.
      throw new HermesReadError(file, "it is not UTF-8 text");
    }
  } catch (err) {
    if (err instanceof HermesReadError) throw err;
    throw new HermesReadError(file, (err as NodeJS.ErrnoException).code ?? (err as Error).message);
  } finally {
    await handle.close();
  }
}

/**
 * Why `file` (owned by `owner`) is not to be followed to, or undefined: a
 * symbolic link on its path owned by someone other than root, hal0's own user
 * or the file's owner. hal0 often runs as root while the Hermes home belongs
 * to a less trusted user; followed, such a link would have hal0 edit (and
 * narrow the mode of) a file its owner never offered, such as another user's
 * or a system YAML file. A link its owner made to their own file (a dotfiles
 * checkout) is followed. Walks the path as the kernel does, at most 40 links.
 */
async function foreignLink(file: string, owner: number): Promise<string | undefined> {
  const trusted = new Set([0, owner, process.getuid?.() ?? 0]);
  const pending = file.split("/").filter((part) => part !== "");
  let at = "/";
  for (let hops = 0; pending.length > 0;) {
    const path = join(at, pending.shift()!);
    const info = await lstat(path).catch(() => undefined);
    if (info === undefined || !info.isSymbolicLink()) {
      at = path;
      continue;
    }
    if (!trusted.has(info.uid)) return `it is reached through ${path}, a symbolic link of user ${info.uid} to a file of user ${owner}: hal0 follows a link only to a file of the link's owner`;
    if (++hops > 40) return "it is a loop of symbolic links (ELOOP)";
    const target = await readlink(path);
    if (isAbsolute(target)) at = "/";
    pending.unshift(...target.split("/").filter((part) => part !== ""));
  }
  return undefined;
}

/**
 * Sets hal0's keys in one Hermes file to `desired`, removing those of
 * `ownedIds` (and hal0's two servers) that are not desired: re-read, edited
 * in memory (`applyHal0Keys`), written atomically with the file's mode (less
 * the bits for others once it carries the profile's token) and, where
 * permitted, its owner; a symbolic link (a dotfiles checkout) stays a
 * link to the file written. An unchanged file is not written. A write also
 * removes the temps a dead writer left beside that file (a hal0 killed
 * mid-write), as a commit does in the tree's folders.
 */
export async function convergeHermesFile(file: string, desired: Readonly<Record<string, unknown>>, ownedIds: readonly string[]): Promise<boolean> {
  const text = await readHermesFile(file);
  if (text === undefined) throw new HermesReadError(file, "it does not exist (it was removed)");
  // Entries kept as a person edited them hold their credentials only redacted: the file's own values go back in.
  const next = applyHal0Keys(text, keepFileCredentials(text, desired), ownedIds);
  if (next === text) return false;
  // The profile's token is a secret: a file that carries it keeps its owner's and group's bits, never others'.
  const written = await replaceFileKeeping(file, next, carriesToken(desired) ? { maxMode: 0o770 } : {});
  await removeStaleTemps([dirname(written)]).catch(() => undefined);
  return true;
}

/** Whether hal0's entries as written hold a credential (the profile's bearer token). */
function carriesToken(desired: Readonly<Record<string, unknown>>): boolean {
  return Object.values(desired).some((entry) => {
    const headers = (entry as { headers?: unknown } | null)?.headers;
    return headers !== null && typeof headers === "object" && "Authorization" in headers;
  });
}
