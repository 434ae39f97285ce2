import { readFileSync, statSync, type Dirent } from "node:fs";
import { open, readdir, readFile, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Diagnostic } from "../schema/index.js";
import { MAX_FILE_BYTES, sourceTree, type SourceTree } from "./sources.js";
import { diagnosticAt, errnoBrief, readError, tooLarge } from "./report.js";

/** Folders of the tree that hold one resource per `.toml` file. */
const RESOURCE_FOLDERS = ["slots", "stacks", "mcp-servers", "agents"];
const utf8 = new TextDecoder("utf-8", { fatal: true });

export interface LoadResult {
  tree: SourceTree;
  /** Files that could not be read or are not UTF-8 (`config.read_error`). */
  diagnostics: Diagnostic[];
}

/**
 * One file of the tree as `loadTree` reads it — UTF-8, its byte-order mark
 * (if any) dropped — or null when it is missing or not such text: what a
 * writer compares with the text it planned from.
 */
export async function readTreeFile(path: string): Promise<string | null> {
  const bytes = await readFile(path).catch(() => null);
  if (bytes === null) return null;
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

/** Whether the file at `path` starts with a UTF-8 byte-order mark (which `loadTree` drops and a write puts back). */
export async function startsWithBom(path: string): Promise<boolean> {
  const handle = await open(path, "r").catch(() => undefined);
  if (handle === undefined) return false;
  try {
    const head = Buffer.alloc(3);
    const { bytesRead } = await handle.read(head, 0, 3, 0);
    return bytesRead === 3 && head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf;
  } finally {
    await handle.close();
  }
}

/** Thrown only when the folder itself is missing: a usage error, not a diagnostic. */
export class ConfigNotFoundError extends Error {
  readonly code = "config.not_found";
  constructor(readonly dir: string) {
    super(configNotFoundMessage(dir));
  }
}

/**
 * "config folder not found: <dir>", and when `dir` is a file (`--config
 * box/hal0.toml`, as other tools take a file), which folder was meant; when
 * the path cannot be followed (a loop of symbolic links, a folder on the way
 * hal0 may not enter), why. Never throws: it words the error of a folder gone.
 */
export function configNotFoundMessage(dir: string): string {
  let found;
  try {
    found = statSync(dir, { throwIfNoEntry: false });
  } catch (err) {
    // A path below a file (`--config box/hal0.toml/x`): no such folder, said as for any other.
    if ((err as NodeJS.ErrnoException).code === "ENOTDIR") return `config folder not found: ${dir}`;
    return `config folder not found: ${dir} (${errnoBrief(err)})`;
  }
  if (found === undefined || found.isDirectory()) return `config folder not found: ${dir}`;
  return `config folder not found: ${dir} is a file; the config is the folder that holds hal0.toml and the other files${dir.endsWith(".toml") ? `: ${dirname(dir)}` : ""}`;
}

/**
 * The compiler's only I/O: read every `.toml` file of the tree at `dir` (its
 * top level and the resource folders). Unreadable files become diagnostics.
 * Dotfiles are not part of the tree: hal0's temp files
 * (`.<name>.<pid>.<random>.hal0.tmp`, reconciler/atomic.ts) and the hidden
 * copies editors and sync tools leave (`.chat.toml`, `.#dev.toml`).
 */
export async function loadTree(dir: string): Promise<LoadResult> {
  const info = await stat(dir).catch(() => undefined);
  if (!info?.isDirectory()) throw new ConfigNotFoundError(dir);
  const listed = await listTomlFiles(dir);
  const files: Array<[string, string]> = [];
  const diagnostics: Diagnostic[] = [...listed.problems];
  // Read one after another, synchronously: a tree is tens of small files, which a blocking
  // read takes in ~15 µs each, where the promise API's open, stat, read and close through
  // the thread pool took ~10× as long for a 50-slot tree.
  for (const rel of listed.files) {
    let bytes: Buffer | undefined;
    try {
      const size = statSync(join(dir, rel)).size;
      if (size > MAX_FILE_BYTES) {
        diagnostics.push(tooLarge(rel, size));
        continue;
      }
      bytes = readFileSync(join(dir, rel));
      files.push([rel, utf8.decode(bytes)]);
    } catch (err) {
      if (err instanceof TypeError && bytes !== undefined && utf16Mark(bytes) !== undefined) {
        // Saved as UTF-16 (Windows PowerShell's `>` and Set-Content, an editor's "Unicode"): said as such, not as a bad byte.
        diagnostics.push(readError(rel, `it is UTF-16 text (it starts with the byte-order mark ${utf16Mark(bytes)}), not UTF-8: save it as UTF-8`, "it is UTF-16 text, not UTF-8"));
      } else if (err instanceof TypeError && bytes !== undefined) {
        // Said where: the line and column of the first byte that is not UTF-8 (after the valid text before it).
        const at = firstInvalidUtf8(bytes);
        diagnostics.push(readError(rel, `it is not valid UTF-8 text: byte 0x${bytes[at.offset]!.toString(16).padStart(2, "0")} at line ${at.line}, column ${at.column}`, "it is not UTF-8 text", at));
      } else diagnostics.push(readError(rel, (err as Error).message, errnoBrief(err)));
    }
  }
  return { tree: sourceTree(dir, files), diagnostics: diagnostics.sort((a, b) => (a.file! < b.file! ? -1 : a.file! > b.file! ? 1 : 0)) };
}

/**
 * The tree's `.toml` files, and what is wrong with the entries that are not
 * readable files. A symbolic link counts as what it leads to (a file, or a
 * resource folder); one that leads nowhere, a `.toml` name that is a folder
 * or a device, a resource folder's name that is not a folder (`slots` a link
 * that leads nowhere) or that cannot be listed is `config.read_error` at its
 * path — so a slot whose file is there but unreadable is never planned as
 * removed. `.toml` files hal0 does
 * not read (in a folder that is not a resource folder, or below one) are
 * `config.unknown_file` warnings, one level down.
 */
async function listTomlFiles(dir: string): Promise<{ files: string[]; problems: Diagnostic[] }> {
  const files: string[] = [];
  const problems: Diagnostic[] = [];
  const visit = async (rel: string, entry: Dirent, inResourceFolder: boolean): Promise<void> => {
    if (entry.name.startsWith(".")) return;
    const kind = entryKind(join(dir, rel), entry);
    if (entry.name.endsWith(".toml")) {
      if (kind === "file") files.push(rel);
      else if (kind === "folder") problems.push(readError(rel, "it is a folder, not a file", "it is a folder"));
      else if (kind === "missing") problems.push(readError(rel, "it is a symbolic link that leads to no file", "a symbolic link that leads to no file"));
      else problems.push(readError(rel, "it is not a regular file", "it is not a regular file"));
      return;
    }
    const resource = !inResourceFolder && !rel.includes("/") && RESOURCE_FOLDERS.includes(entry.name);
    // A resource folder's name that is not a folder (a link that leads nowhere or loops, a file): its files are unknown, not gone.
    if (resource && kind !== "folder") problems.push(kind === "missing" ? readError(rel, "it is a symbolic link that leads to no folder", "a symbolic link that leads to no folder") : readError(rel, "it is not a folder", "it is not a folder"));
    if (kind !== "folder") return;
    let children: Dirent[];
    try {
      children = await readdir(join(dir, rel), { withFileTypes: true });
    } catch (err) {
      // A resource folder that cannot be listed (permission denied, a stale mount) holds files that are unknown, not gone;
      // another folder is only looked into.
      if (resource) problems.push(readError(rel, `it cannot be listed: ${(err as Error).message}`, `it cannot be listed: ${errnoBrief(err)}`));
      return;
    }
    for (const child of children) {
      const childRel = `${rel}/${child.name}`;
      if (resource) await visit(childRel, child, true);
      else if (child.name.endsWith(".toml") && !child.name.startsWith(".") && entryKind(join(dir, childRel), child) === "file") problems.push(notRead(childRel));
    }
  };
  let entries: Dirent[];
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    // The folder is there (loadTree stat it) and cannot be listed (permission denied): a tree that cannot be known, not an empty one.
    return { files: [], problems: [readError(".", `the config folder cannot be listed: ${(err as Error).message}`, `the config folder cannot be listed: ${errnoBrief(err)}`)] };
  }
  for (const entry of entries) await visit(entry.name, entry, false);
  return { files: files.sort(), problems };
}

/** What an entry is, a symbolic link followed: "missing" when it leads nowhere (or loops). */
export function entryKind(path: string, entry: Dirent): "file" | "folder" | "other" | "missing" {
  if (entry.isFile()) return "file";
  if (entry.isDirectory()) return "folder";
  if (!entry.isSymbolicLink()) return "other";
  let target: ReturnType<typeof statSync>;
  try {
    target = statSync(path, { throwIfNoEntry: false });
  } catch {
    return "missing"; // a loop of links (ELOOP), a link into a folder hal0 may not enter
  }
  return target === undefined ? "missing" : target.isFile() ? "file" : target.isDirectory() ? "folder" : "other";
}


/** The UTF-16 byte-order mark `bytes` start with ("0xff 0xfe" little-endian, "0xfe 0xff" big-endian), if any. */
function utf16Mark(bytes: Buffer): string | undefined {
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) return "0xff 0xfe";
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) return "0xfe 0xff";
  return undefined;
}

/** Where the first byte that does not decode as UTF-8 is: its offset, and its 1-based line and column (in UTF-16 code units of the valid text before it, as every other diagnostic's column counts). */
function firstInvalidUtf8(bytes: Buffer): { offset: number; line: number; column: number } {
  const strict = new TextDecoder("utf-8", { fatal: true });
  let offset = 0;
  // Character by character: its length from the lead byte, then the decoder's word on it (overlong forms, surrogates).
  while (offset < bytes.length) {
    const lead = bytes[offset]!;
    const size = lead < 0x80 ? 1 : (lead & 0xe0) === 0xc0 ? 2 : (lead & 0xf0) === 0xe0 ? 3 : (lead & 0xf8) === 0xf0 ? 4 : 0;
    if (size === 0 || offset + size > bytes.length) break;
    if (size > 1) {
      try {
        strict.decode(bytes.subarray(offset, offset + size));
      } catch {
        break;
      }
    }
    offset += size;
  }
  const before = bytes.subarray(0, offset).toString("utf8");
  const lines = before.split("\n");
  return { offset, line: lines.length, column: lines[lines.length - 1]!.length + 1 };
}

function notRead(rel: string): Diagnostic {
  return diagnosticAt("config.unknown_file", rel, { line: 1, column: 1 }, [], `hal0 does not read ${rel}`,
    "This file is ignored: hal0 reads the .toml files at the top of the tree and directly in slots/, stacks/, mcp-servers/ and agents/.");
}
