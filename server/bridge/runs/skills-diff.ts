import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readlinkSync, readSync } from "node:fs";
import { join } from "node:path";

/**
 * What a Hermes run did to its profile's skills/: Hermes's own skill_manage
 * (and its file and terminal tools) write there directly, past hal0's gated
 * profile_skill_put. hal0 cannot stop that without sandboxing Hermes, but it
 * can see it: the folder is read (names and content hashes, bounded) as the
 * run starts and again as it ends, and the difference is recorded on the run
 * and in the audit log. A change made and undone within the run, or made by
 * anything else while it ran, is not told apart.
 */

/** At most this many entries (files, links, folders) are read under skills/; past it the snapshot is partial. */
export const SKILLS_MAX_ENTRIES = 2000;
/** A file larger than this is known by its size and modification time, not its content. */
export const SKILLS_MAX_FILE_BYTES = 1024 * 1024;
/** At most this many bytes are hashed in one snapshot; past it further files are known by size and time. */
export const SKILLS_MAX_TOTAL_BYTES = 32 * 1024 * 1024;
/** Folders deeper than this under skills/ are not read. */
export const SKILLS_MAX_DEPTH = 8;
/** At most this many changed skills are listed (and audited); `more` counts the rest. */
export const SKILLS_MAX_LISTED = 200;

export interface SkillsSnapshot {
  /** Path under skills/ (`ops/deploy/SKILL.md`) → a hash of its content (or of its size and time, or its link target). */
  readonly files: Map<string, string>;
  /** Some of skills/ was not read (a bound was reached, or a folder could not be read). */
  readonly partial: boolean;
  /** The first entry (path parts) the entry bound left unread: it and everything after it (in the walk's sorted order) were not read. */
  readonly cut?: readonly string[];
}

export interface SkillChange {
  /** The skill as hal0 names it: `<name>` or `<category>/<name>` (a loose file under skills/: its path). */
  readonly skill: string;
  readonly change: "added" | "changed" | "removed";
}

export interface SkillChanges {
  readonly changes: readonly SkillChange[];
  /** Changed skills past {@link SKILLS_MAX_LISTED}, not listed. */
  readonly more: number;
  /** False when either snapshot was partial: a change in what was not read is not seen. */
  readonly complete: boolean;
  /**
   * Other runs of the same profile that ran at some time during this one (at most 20): a change
   * either made is reported by both, as the folder cannot tell whose it was. Set by the run service.
   */
  readonly overlapping?: readonly string[];
}

/** A snapshot as a run's row keeps it while the run runs (`skills_before`), with the profile folder it read. */
export function snapshotToJson(profileDir: string, snap: SkillsSnapshot): string {
  return JSON.stringify({ home: profileDir, files: [...snap.files], partial: snap.partial, cut: snap.cut ?? null });
}

/** A snapshot read back from a run's row, and the profile folder it read; undefined when the text is not one. */
export function snapshotFromJson(text: string | null): { home: string; snap: SkillsSnapshot } | undefined {
  if (text === null) return undefined;
  try {
    const o = JSON.parse(text) as { home: string; files: Array<[string, string]>; partial: boolean; cut: string[] | null };
    if (typeof o.home !== "string" || !Array.isArray(o.files)) return undefined;
    return { home: o.home, snap: { files: new Map(o.files), partial: o.partial === true, cut: o.cut ?? undefined } };
  } catch {
    return undefined;
  }
}

/** Reads `<profile>/skills/` within the bounds above; never throws (a missing folder is an empty one). */
export function snapshotSkills(profileDir: string): SkillsSnapshot {
  const files = new Map<string, string>();
  let partial = false;
  let entries = 0;
  let hashed = 0;
  let cut: string[] | undefined;
  const root = join(profileDir, "skills");
  try {
    const st = lstatSync(root);
    if (st.isSymbolicLink()) return { files: new Map([["", `link:${readlinkSync(root)}`]]), partial: false };
    if (!st.isDirectory()) return { files: new Map([["", `file:${st.size}:${st.mtimeMs}`]]), partial: false };
  } catch {
    return { files, partial: false };
  }
  const walk = (dir: string, rel: string, depth: number): void => {
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch {
      partial = true;
      return;
    }
    for (const name of names) {
      const path = join(dir, name);
      const r = rel === "" ? name : `${rel}/${name}`;
      if (++entries > SKILLS_MAX_ENTRIES) {
        partial = true;
        cut ??= r.split("/");
        return;
      }
      let st;
      try {
        st = lstatSync(path);
      } catch {
        continue; // removed while read
      }
      if (st.isSymbolicLink()) {
        let target = "";
        try {
          target = readlinkSync(path);
        } catch { /* gone */ }
        files.set(r, `link:${target}`);
      } else if (st.isDirectory()) {
        if (depth >= SKILLS_MAX_DEPTH) partial = true;
        else walk(path, r, depth + 1);
        if (entries > SKILLS_MAX_ENTRIES) return;
      } else if (st.isFile()) {
        if (st.size > SKILLS_MAX_FILE_BYTES || hashed + st.size > SKILLS_MAX_TOTAL_BYTES) files.set(r, `stat:${st.size}:${st.mtimeMs}`);
        else {
          const h = hashFile(path);
          hashed += st.size;
          files.set(r, h ?? `stat:${st.size}:${st.mtimeMs}`);
        }
      } else files.set(r, `other:${st.mode}`);
    }
  };
  walk(root, "", 1);
  return { files, partial, cut };
}

/**
 * A regular file's SHA-256. Opened without following a link and without
 * blocking, and checked to be a plain file once open: a file swapped for a
 * FIFO (or a link to one) after the folder was listed would otherwise block
 * hal0's whole process on the open or the read.
 */
export function hashFile(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    if (!fstatSync(fd).isFile()) return undefined;
    const h = createHash("sha256");
    const buf = Buffer.alloc(64 * 1024);
    let total = 0;
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n <= 0) break;
      total += n;
      // A file that grew past the bound while read is not read further.
      if (total > SKILLS_MAX_FILE_BYTES) return `grew:${total}`;
      h.update(buf.subarray(0, n));
    }
    return `sha256:${h.digest("hex")}`;
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** The skills that differ between two snapshots, by skill (all of a skill's files together), sorted. */
export function diffSkills(before: SkillsSnapshot, after: SkillsSnapshot): SkillChanges {
  // Past the entry bound each snapshot read a sorted prefix of the folder: only what both read is compared, so a skill
  // added early in the order (pushing the bound back) does not make the last ones read seem changed or removed.
  const cut = [before.cut, after.cut].filter((c): c is readonly string[] => c !== undefined).sort(compareParts)[0];
  if (cut !== undefined) {
    const read = (snap: SkillsSnapshot): SkillsSnapshot => ({ ...snap, files: new Map([...snap.files].filter(([rel]) => compareParts(rel.split("/"), cut) < 0)) });
    before = read(before);
    after = read(after);
  }
  // A folder holding SKILL.md in either snapshot is a skill; a file is the nearest such folder's, else its first two parts'.
  const skillDirs = new Set<string>();
  for (const snap of [before, after]) {
    for (const rel of snap.files.keys()) if (rel.endsWith("/SKILL.md")) skillDirs.add(rel.slice(0, -"/SKILL.md".length));
  }
  const keyOf = (rel: string): string => {
    const parts = rel.split("/");
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join("/");
      if (skillDirs.has(dir)) return dir;
    }
    return parts.length >= 3 ? parts.slice(0, 2).join("/") : parts[0]!;
  };
  const group = (snap: SkillsSnapshot): Map<string, string> => {
    const by = new Map<string, string[]>();
    for (const [rel, hash] of [...snap.files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const k = rel === "" ? "(skills)" : keyOf(rel);
      const list = by.get(k) ?? [];
      list.push(`${rel}\0${hash}`);
      by.set(k, list);
    }
    return new Map([...by].map(([k, v]) => [k, createHash("sha256").update(v.join("\n")).digest("hex")]));
  };
  const a = group(before);
  const b = group(after);
  const all: SkillChange[] = [];
  for (const [k, h] of b) {
    const was = a.get(k);
    if (was === undefined) all.push({ skill: k, change: "added" });
    else if (was !== h) all.push({ skill: k, change: "changed" });
  }
  for (const k of a.keys()) if (!b.has(k)) all.push({ skill: k, change: "removed" });
  all.sort((x, y) => (x.skill < y.skill ? -1 : x.skill > y.skill ? 1 : 0));
  return { changes: all.slice(0, SKILLS_MAX_LISTED), more: Math.max(0, all.length - SKILLS_MAX_LISTED), complete: !before.partial && !after.partial };
}

/** The walk's order: folder by folder, names sorted, a folder before what it holds. */
function compareParts(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
  }
  return a.length - b.length;
}
