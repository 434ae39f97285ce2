import { readdirSync, statSync, type Dirent } from "node:fs";
import { join } from "node:path";
import { compile, loadTree, type CompileResult, type SourceTree } from "../compiler/index.js";
import { runnersFingerprint, runnerTargets } from "./runner-observe.js";
import type { RunnerProbe } from "./runner-probe.js";

/** The folders `loadTree` reads `.toml` files from ("" = the tree's top level); the sweep loop watches the same. */
export const TREE_FOLDERS = ["", "slots", "stacks", "mcp-servers", "agents"] as const;

/**
 * Whether a name in the tree's folders is one `loadTree` reads: a `.toml`
 * file that is no dotfile (an editor's lock `.#s.toml`, a copy's AppleDouble
 * `._s.toml`, hal0's own temps). The sweep loop's watcher, its check and the
 * fingerprint go by the same rule, so what hal0 never reads starts no sweep.
 */
export function isTreeFileName(name: string): boolean {
  return name.endsWith(".toml") && !name.startsWith(".");
}

/**
 * A file's stamp must be at least this much older than the fingerprint that
 * holds it before the fingerprint alone is trusted. File timestamps tick
 * coarsely (a jiffy on ext4 without multigrain timestamps, 2 s on FAT), so a
 * same-size rewrite within one tick can keep size, inode, mtime and ctime.
 */
const RACY_MS = 2000;

/** How the last `load` got its result: from stats alone, from equal texts, or by compiling. */
export type TreeReuse = "stat" | "text" | "compiled";

interface Entry {
  readonly fingerprint: string;
  /** No file of the tree changed within RACY_MS of taking `fingerprint`. */
  readonly settled: boolean;
  readonly tree: SourceTree;
  readonly carried: string;
  /** compile without runner facts: what tells which runners the slots use. */
  readonly base: CompileResult;
  /** The runner facts `result` was compiled with (runnersFingerprint). */
  readonly runners: string;
  readonly result: CompileResult;
}

/** A compiled tree and the texts it was compiled from; the same objects while nothing changed. */
export interface LoadedTree {
  readonly tree: SourceTree;
  readonly result: CompileResult;
}

/**
 * `compile(loadTree(root))` that skips the work when no file of the tree
 * changed. Each call takes a fingerprint (the folders' `.toml` names and each
 * file's inode, size, mtime and ctime in ns) *before* reading: equal to the
 * last one and settled → the last result, no file read; otherwise the tree is
 * read, and equal texts (and read errors) → the last result, no compile.
 * `compile` is pure in (texts, carried diagnostics, runner facts), so reuse
 * is exact. With a runner probe, each load also asks it for the facts of the
 * runners the slots use (from its cache: a stat per runner binary; a changed
 * binary is run again) and compiles again only when those facts changed.
 */
export class TreeCache {
  private last?: Entry;
  /** Who read the result of the last `load` (tests and the bench). */
  lastReuse: TreeReuse = "compiled";

  constructor(private readonly root: string, private readonly racyMs = RACY_MS, private readonly runners?: RunnerProbe) {}

  async load(): Promise<CompileResult> {
    return (await this.loadTree()).result;
  }

  /** `load`, with the tree's texts (what the server's revisions and change sets start from). */
  async loadTree(): Promise<LoadedTree> {
    const taken = BigInt(Date.now()) * 1_000_000n;
    const stamp = tryFingerprint(this.root);
    const last = this.last;
    if (stamp !== undefined && last?.settled && last.fingerprint === stamp.text) return this.withFacts("stat", last, last.tree, last.base, last.carried, stamp.text, last.settled);
    const loaded = await loadTree(this.root);
    const carried = JSON.stringify(loaded.diagnostics);
    const settled = stamp !== undefined && taken - stamp.newestNs > BigInt(this.racyMs) * 1_000_000n;
    if (last !== undefined && last.carried === carried && sameTexts(last.tree.files, loaded.tree.files)) return this.withFacts("text", last, last.tree, last.base, carried, stamp?.text, settled);
    return this.withFacts("compiled", undefined, loaded.tree, compile(loaded.tree, loaded.diagnostics), carried, stamp?.text, settled);
  }

  /** The result for `base` with the runner facts of now: the last one when they did not change, else compiled again with them. */
  private async withFacts(how: TreeReuse, last: Entry | undefined, tree: SourceTree, base: CompileResult, carried: string, fingerprint: string | undefined, settled: boolean): Promise<LoadedTree> {
    const targets = this.runners !== undefined && base.model !== undefined ? runnerTargets(base.model) : [];
    const found = targets.length > 0 ? await this.runners!.probe(targets) : undefined;
    const index = found?.index ?? new Map();
    const images = found?.images ?? new Map<string, string>();
    const runners = runnersFingerprint(index, images);
    let result: CompileResult;
    if (last !== undefined && last.runners === runners) {
      result = last.result;
      this.lastReuse = how;
    } else {
      result = index.size === 0 && images.size === 0 ? base : compile(tree, JSON.parse(carried), { runners: index, images });
      this.lastReuse = "compiled";
    }
    this.last = fingerprint === undefined ? undefined : { fingerprint, settled, tree, carried, base, runners, result };
    return { tree, result };
  }
}

function tryFingerprint(root: string): { text: string; newestNs: bigint } | undefined {
  try {
    return fingerprint(root);
  } catch {
    return undefined; // unreadable or missing: loadTree reports it, and nothing is reused next time
  }
}

function sameTexts(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [path, text] of a) if (b.get(path) !== text) return false;
  return true;
}

/**
 * The tree's fingerprint as the sweep loop compares it (see `fingerprint`);
 * a root that cannot be read is a line naming why, never a throw.
 */
export function treeFingerprint(root: string): string {
  try {
    return fingerprint(root).text;
  } catch (err) {
    return `unreadable ${(err as NodeJS.ErrnoException).code ?? "error"}`;
  }
}

/**
 * One line per `.toml` entry of the tree's folders, dotfiles left out as `loadTree` leaves them (kind, inode, size, mtime
 * and ctime in ns), sorted, and the newest of those times. A missing folder
 * reads as empty; a missing root throws (loadTree reports it). Synchronous:
 * one readdir per folder and one stat per file, each a few µs, where
 * fs.promises would cost a thread-pool round trip per call.
 */
function fingerprint(root: string): { text: string; newestNs: bigint } {
  const lines: string[] = [];
  let newestNs = 0n;
  for (const folder of TREE_FOLDERS) {
    const dir = join(root, folder);
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (folder !== "" && (code === "ENOENT" || code === "ENOTDIR")) continue;
      throw err;
    }
    for (const e of entries) {
      if (!isTreeFileName(e.name)) continue;
      const rel = folder === "" ? e.name : `${folder}/${e.name}`;
      const s = statSync(join(dir, e.name), { bigint: true, throwIfNoEntry: false });
      if (s === undefined) {
        lines.push(`${rel} gone`);
        continue;
      }
      const newest = s.mtimeNs > s.ctimeNs ? s.mtimeNs : s.ctimeNs;
      if (newest > newestNs) newestNs = newest;
      lines.push(`${rel} ${e.isFile() ? "f" : e.isDirectory() ? "d" : "o"} ${s.ino} ${s.size} ${s.mtimeNs} ${s.ctimeNs} ${s.mode}`);
    }
  }
  return { text: lines.sort().join("\n"), newestNs };
}
