import { createHash } from "node:crypto";
import { chown, lstat, mkdir, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { removeStaleTemps, replaceFileKeeping, tempPathFor } from "../../../reconciler/atomic.js";
import { ApiError } from "../../errors.js";
import { Mutex } from "../../mutex.js";
import { redactText } from "../../redact.js";
import { lineDiff } from "../../web/render.js";

/**
 * The write path of the teaching tools: a change to one Hermes profile's
 * files (the Hermes home as a second tree beside hal0's config tree), in the
 * shape of the config tree's ChangeSet → propose → commit (server/box.ts),
 * but its own: box.propose compiles and plans hal0's TOML tree and its
 * FileEdit grammar only names files of that tree, while a profile's files are
 * Markdown that hal0 does not compile. What is shared with the box: the
 * atomic write and the stale-temp sweep (reconciler/atomic.ts), the line diff
 * the plan page shows (server/web/render.ts), the redactor for what a reader
 * sees (server/redact.ts), and the rule that a commit writes only when every
 * file is still what the proposal saw (`teach.stale`, as `config.stale`).
 *
 * Files are named relative to the profile folder (`skills/ops/deploy/SKILL.md`,
 * `memories/MEMORY.md`); the tools build them from checked names only.
 */
export type ProfileEdit =
  /** The file's new text as is (created with its folders when absent). */
  | { readonly op: "text"; readonly file: string; readonly text: string }
  /** The text the caller computed from the file as it was (an appended memory entry): written only if the file is still `before`. */
  | { readonly op: "derived"; readonly file: string; readonly before: string | null; readonly text: string }
  /** A skill folder goes, with every file in it. */
  | { readonly op: "delete_dir"; readonly dir: string };

export interface ProfileChange {
  readonly profile: string;
  /** The profile folder: `<[hermes] home>/profiles/<profile>`. */
  readonly root: string;
  readonly edits: readonly ProfileEdit[];
  /** What a person reads on the approval card. */
  readonly summary: string;
}

export interface PlannedFile {
  readonly file: string;
  readonly before: string | null;
  readonly after: string | null;
  readonly before_sha256: string | null;
  readonly after_sha256: string | null;
}

/** A change planned against the files as they are now: nothing written yet. */
export interface ProfilePlan {
  readonly change: ProfileChange;
  readonly files: readonly PlannedFile[];
  /** Each touched file's hash as the plan saw it (null = absent): what the commit checks, and what a caller may send back as `base`. */
  readonly base: Readonly<Record<string, string | null>>;
  /** Folders the commit removes whole. */
  readonly dirs: readonly string[];
}

/** What a caller, a reply or an approval card sees of a plan: hashes and a redacted unified diff per file, no whole texts. */
export interface PlanView {
  readonly profile: string;
  readonly summary: string;
  readonly files: ReadonlyArray<{ file: string; action: "create" | "update" | "delete"; before_sha256: string | null; after_sha256: string | null; diff: string }>;
  readonly base: Readonly<Record<string, string | null>>;
}

export function sha256(text: string | Buffer): string {
  return `sha256:${createHash("sha256").update(text).digest("hex")}`;
}

/** A text as an audit row keeps it: `<key>_bytes` and `<key>_sha256`, never its words. */
export function textRecord(text: string, key = "text"): Record<string, unknown> {
  return { [`${key}_bytes`]: Buffer.byteLength(text, "utf8"), [`${key}_sha256`]: sha256(text) };
}

/**
 * A bridge call's arguments as its audit rows keep them (any caller reads the
 * audit log): each of `keys` (a skill's or memory entry's `text`, a run's
 * `prompt`) as its size and hash (`textRecord`), anything but a text there as
 * `[not recorded]`; the other arguments as sent.
 */
export function withoutWords(args: unknown, keys: readonly string[]): unknown {
  if (typeof args !== "object" || args === null || Array.isArray(args)) return args;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(args)) {
    if (keys.includes(k) && typeof v === "string") Object.assign(out, textRecord(v, k));
    else Object.defineProperty(out, k, { value: keys.includes(k) ? "[not recorded]" : v, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/**
 * Plans `change`: reads each file it touches, applies the edits in memory,
 * and, when `base` is given (the hashes a proposal or an earlier read saw),
 * refuses with `teach.stale` if any touched file moved since.
 */
export async function planChange(change: ProfileChange, base?: Readonly<Record<string, string | null>>): Promise<ProfilePlan> {
  const files = new Map<string, { before: string | null; after: string | null }>();
  const dirs: string[] = [];
  const read = async (file: string) => {
    const seen = files.get(file);
    if (seen) return seen.after;
    const before = await readProfileFile(change.root, file);
    files.set(file, { before, after: before });
    return before;
  };
  for (const edit of change.edits) {
    if (edit.op === "delete_dir") {
      await safePath(change.root, edit.dir, "dir");
      for (const file of await filesUnder(change.root, edit.dir)) {
        await read(file);
        files.get(file)!.after = null;
      }
      dirs.push(edit.dir);
      continue;
    }
    await safePath(change.root, edit.file, "file");
    const now = await read(edit.file);
    if (edit.op === "derived" && now !== edit.before) throw stale([edit.file]);
    files.get(edit.file)!.after = edit.text;
  }
  const planned = [...files].sort(([a], [b]) => (a < b ? -1 : 1)).map(([file, f]) => ({
    file, before: f.before, after: f.after, before_sha256: hashOrNull(f.before), after_sha256: hashOrNull(f.after),
  }));
  const plan: ProfilePlan = { change, files: planned, dirs, base: Object.fromEntries(planned.map((f) => [f.file, f.before_sha256])) };
  if (base !== undefined) checkBase(plan, base);
  return plan;
}

/** A plan as its reader sees it. */
export function viewOf(plan: ProfilePlan): PlanView {
  return {
    profile: plan.change.profile,
    summary: plan.change.summary,
    files: plan.files.filter((f) => f.before !== f.after).map((f) => ({
      file: f.file,
      action: f.before === null ? "create" : f.after === null ? "delete" : "update",
      before_sha256: f.before_sha256,
      after_sha256: f.after_sha256,
      diff: redactText(unifiedDiff(f.file, f.before, f.after)),
    })),
    base: plan.base,
  };
}

const writes = new Mutex();

/**
 * Writes a plan: under one lock, every touched file is read again and must
 * still hash as the plan saw it (else `teach.stale`, nothing written); then
 * each file is written atomically (a temp beside it, fsync, rename), removed
 * folders are renamed aside first and then deleted, and a failure puts back
 * what was already written (`teach.write_failed`).
 */
export async function commitPlan(plan: ProfilePlan): Promise<void> {
  await writes.run(() => writePlan(plan));
}

/**
 * Runs `work` under the commit lock, with `commit` writing a plan as
 * commitPlan does: a change planned inside it (an appended memory entry) is
 * planned against the files as no other write can move them before it lands,
 * so two such changes at once both land, one after the other.
 */
export function underCommitLock<T>(work: (commit: (plan: ProfilePlan) => Promise<void>) => Promise<T>): Promise<T> {
  return writes.run(() => work(writePlan));
}

/** commitPlan's work, with the lock held. */
async function writePlan(plan: ProfilePlan): Promise<void> {
  const root = plan.change.root;
  const moved: string[] = [];
  for (const f of plan.files) {
    await safePath(root, f.file, "file");
    if ((await readProfileFile(root, f.file)) !== f.before) moved.push(f.file);
  }
  for (const dir of plan.dirs) {
    await safePath(root, dir, "dir");
    for (const file of await filesUnder(root, dir)) if (!plan.files.some((p) => p.file === file)) moved.push(file); // appeared since
  }
  if (moved.length > 0) throw stale(moved);
  const changed = plan.files.filter((f) => f.after !== null && f.after !== f.before);
  // What a writer that died here left (a temp, a folder set aside to remove) goes, from each folder on the way to what this changes.
  await removeStaleTemps([...changed.map((f) => f.file), ...plan.dirs].flatMap((f) => foldersTo(root, f))).catch(() => undefined);
  const done: PlannedFile[] = [];
  try {
    for (const f of changed) {
      await writeKeeping(root, f.file, f.after!);
      done.push(f);
    }
    for (const dir of plan.dirs) {
      const aside = tempPathFor(join(root, dir), "removed");
      await rename(join(root, dir), aside);
      await rm(aside, { recursive: true, force: true });
    }
  } catch (err) {
    for (const f of done.reverse()) {
      if (f.before === null) await rm(join(root, f.file), { force: true }).catch(() => undefined);
      else await writeKeeping(root, f.file, f.before).catch(() => undefined);
    }
    throw new ApiError("teach.write_failed", `writing ${plan.files.map((f) => f.file).join(", ")} in profile ${plan.change.profile} failed; what was written was put back: ${(err as Error).message}`, { profile: plan.change.profile });
  }
}

/** The folders between the profile's folder and `rel` (a file or folder in it), the profile's own included: `skills`, `skills/ops`, … */
function foldersTo(root: string, rel: string): string[] {
  const parts = rel.split("/").slice(0, -1);
  return parts.map((_, i) => join(root, ...parts.slice(0, i + 1))).concat(root);
}

/**
 * Writes one profile file atomically as Hermes's owner would have it: an
 * existing file keeps its mode and (where permitted) its owner; a new file
 * and the folders made for it take the profile folder's owner.
 */
async function writeKeeping(root: string, file: string, text: string): Promise<void> {
  const path = join(root, file);
  const was = await stat(path).catch(() => undefined);
  const owner = was ?? (await stat(root));
  const parts = file.split("/");
  for (let i = 1; i < parts.length; i++) {
    const dir = join(root, ...parts.slice(0, i));
    if (await stat(dir).catch(() => undefined)) continue;
    await mkdir(dir);
    await keepOwner(dir, owner);
  }
  await replaceFileKeeping(path, text, { newMode: 0o644, newOwner: owner }); // safePath refused links before this
}

async function keepOwner(path: string, owner: { uid: number; gid: number }): Promise<void> {
  await chown(path, owner.uid, owner.gid).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== "EPERM") throw err;
  });
}

function checkBase(plan: ProfilePlan, base: Readonly<Record<string, string | null>>): void {
  // Both ways: a file the caller saw that is gone now, and one it never saw that the change now touches (a file new in a folder being removed).
  const files = new Set([...Object.keys(base), ...Object.keys(plan.base)]);
  const moved = [...files].filter((file) => (plan.base[file] ?? null) !== (base[file] ?? null)).sort();
  if (moved.length > 0) throw stale(moved);
}

function stale(files: readonly string[]): ApiError {
  return new ApiError("teach.stale", `changed on disk since the change was proposed: ${files.join(", ")}; read it again and propose again`, { files });
}

function hashOrNull(text: string | null): string | null {
  return text === null ? null : sha256(text);
}

/**
 * A profile file's text; null when absent. Refuses a file that is a link or
 * a folder, or one reached through a linked folder (teach.unsafe_path): a
 * read, like a write, never leaves the profile folder.
 */
export async function readProfileFile(root: string, file: string): Promise<string | null> {
  const parts = file.split("/");
  for (let i = 1; i < parts.length; i++) {
    const sub = parts.slice(0, i).join("/");
    const folder = await lstat(join(root, sub)).catch(() => undefined);
    if (folder === undefined) return null;
    if (!folder.isDirectory()) throw new ApiError("teach.unsafe_path", `${sub} is ${folder.isSymbolicLink() ? "a symbolic link" : "not a folder"}; hal0 does not read through it`, { file: sub });
  }
  const path = join(root, file);
  const info = await lstat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT" || err.code === "ENOTDIR") return undefined;
    throw err;
  });
  if (info === undefined) return null;
  if (!info.isFile()) throw new ApiError("teach.unsafe_path", `${file} is not a plain file (a link or a folder); hal0 does not read or write through it`, { file });
  return readFile(path, "utf8");
}

/**
 * Refuses a target reached through a symbolic link or a non-folder: every
 * existing folder on the way from the profile folder (and the target itself)
 * must be what it claims, so a write never lands outside the profile.
 */
async function safePath(root: string, rel: string, kind: "file" | "dir"): Promise<void> {
  const parts = rel.split("/");
  for (let i = 1; i <= parts.length; i++) {
    const sub = parts.slice(0, i).join("/");
    const info = await lstat(join(root, sub)).catch(() => undefined);
    if (info === undefined) return;
    const want = i < parts.length || kind === "dir" ? info.isDirectory() : info.isFile();
    if (!want || info.isSymbolicLink()) throw new ApiError("teach.unsafe_path", `${sub} in profile folder ${root} is ${info.isSymbolicLink() ? "a symbolic link" : "not of the expected kind"}; hal0 does not write through it`, { file: sub });
  }
}

/** Every file under a profile folder (relative names), refusing links; empty when the folder is absent. */
async function filesUnder(root: string, dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    const entries = await readdir(join(root, rel), { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      const sub = `${rel}/${e.name}`;
      if (e.isSymbolicLink()) throw new ApiError("teach.unsafe_path", `${sub} is a symbolic link; hal0 does not delete through it`, { file: sub });
      if (e.isDirectory()) await walk(sub);
      else out.push(sub);
    }
  };
  await walk(dir);
  return out.sort();
}

/** A unified diff (`---`/`+++`, `@@` hunks, three lines of context) of two texts; null = absent. */
export function unifiedDiff(file: string, before: string | null, after: string | null, context = 3): string {
  if (before === after) return "";
  const lines = lineDiff(before, after);
  const head = `--- ${before === null ? "/dev/null" : `a/${file}`}\n+++ ${after === null ? "/dev/null" : `b/${file}`}\n`;
  const changed = lines.map((l, i) => (l.op === " " ? -1 : i)).filter((i) => i >= 0);
  const hunks: Array<[number, number]> = [];
  for (const i of changed) {
    const last = hunks[hunks.length - 1];
    if (last && i - context <= last[1] + context + 1) last[1] = i;
    else hunks.push([i, i]);
  }
  let out = head;
  for (const [first, lastChanged] of hunks) {
    const from = Math.max(0, first - context);
    const to = Math.min(lines.length - 1, lastChanged + context);
    const oldStart = lines.slice(0, from).filter((l) => l.op !== "+").length;
    const newStart = lines.slice(0, from).filter((l) => l.op !== "-").length;
    const body = lines.slice(from, to + 1);
    const oldLen = body.filter((l) => l.op !== "+").length;
    const newLen = body.filter((l) => l.op !== "-").length;
    out += `@@ -${oldLen === 0 ? oldStart : oldStart + 1},${oldLen} +${newLen === 0 ? newStart : newStart + 1},${newLen} @@\n`;
    out += body.map((l) => `${l.op}${l.text}\n`).join("");
  }
  return out;
}
