import { constants } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { containerLogPath } from "../reconciler/drivers/container-log.js";
import type { SlotDriver } from "../reconciler/drivers/driver.js";
import { ApiError } from "./errors.js";
import { redactText } from "./redact.js";

/** Bytes read per step while walking back from the end of a log. */
const CHUNK = 64 * 1024;
/** Never read more than this much of a log for one tail. */
const MAX_BYTES = 4 * 1024 * 1024;

export interface LogTail {
  /** Absolute path of the log read. */
  readonly file: string;
  /** False when the slot has no log yet (never started under the process runtime). */
  readonly exists: boolean;
  /** The last lines, oldest first, each with secrets masked. */
  readonly lines: readonly string[];
  /** More lines precede these. */
  readonly truncated: boolean;
  readonly size_bytes: number;
}

/**
 * Where the process runtime appends a runner's stdout and stderr, across
 * starts (reconciler/drivers/runtime-record.ts: `<state>/slots/<name>/runner.log`,
 * and `runner.log.1` before it).
 */
export function runnerLogPath(stateDir: string, name: string): string {
  return join(stateDir, "slots", name, "runner.log");
}

/** A slot's runner output, from where its runtime keeps it. */
export interface SlotLog {
  /** The container the engine's log belongs to, or the runner.log file's path. */
  readonly source: string;
  /**
   * The file read (absolute): the runner.log, or the container.log of the
   * containers hal0 removed whose last lines precede the engine's; null when
   * only the engine's log was read.
   */
  readonly file: string | null;
  /** False when the slot has no log yet (never started). */
  readonly exists: boolean;
  /** The last lines, oldest first, each with secrets masked. */
  readonly lines: readonly string[];
  /** More lines precede these. */
  readonly truncated: boolean;
  /** The runner.log's size; null for an engine's log. */
  readonly size_bytes: number | null;
}

/**
 * The last `count` lines of a slot's runner output, secrets masked: its
 * container's log where the engine keeps it (the docker runtime, or a former
 * one still running it: SlotDriver.logs), else the process runtime's
 * runner.log (and its `.1`). The engine deletes a container's log with the
 * container (and Swarm a service's with the service), so the docker and
 * swarm runtimes keep the last output of each one they remove (crashed,
 * replaced, stopped, a failed start) in `container.log`
 * (reconciler/drivers/container-log.ts): its lines come before the current
 * container's, as runner.log.1's before runner.log's, and alone when the slot
 * has no container now and no runner.log.
 */
export async function slotLog(driver: SlotDriver, stateDir: string, name: string, count: number): Promise<SlotLog> {
  const kept = await driver.logs?.(name, count);
  if (kept !== undefined) {
    const lines = kept.lines.map(redactText);
    const saved = lines.length < count && !kept.truncated ? await tailLog(containerLogPath(stateDir, name), count - lines.length, false) : undefined;
    if (saved?.exists === true && saved.lines.length > 0) return { source: kept.source, file: saved.file, exists: true, lines: [...saved.lines, ...lines], truncated: saved.truncated, size_bytes: null };
    return { source: kept.source, file: null, exists: true, lines, truncated: kept.truncated, size_bytes: null };
  }
  const tail = await tailLog(runnerLogPath(stateDir, name), count);
  if (!tail.exists) {
    const saved = await tailLog(containerLogPath(stateDir, name), count, false);
    if (saved.exists) return { source: saved.file, ...saved };
  }
  return { source: tail.file, ...tail };
}

/**
 * The last `count` lines of `file`, read backwards from its end in chunks
 * (a long log is never read whole), with bearer tokens, `*_TOKEN=` /
 * `*_KEY=` values and `sk-…` style keys masked (server/redact.ts). Lines
 * the log holds too few of come from `<file>.1` (the log before it passed
 * its cap: reconciler/drivers/runtime-record.ts). Only a regular file is
 * read: a link (whose target could be any file hal0 may read), a folder or
 * a pipe (whose read would wait for ever) in its place is
 * `slot.log_unreadable`.
 */
export async function tailLog(file: string, count: number, withPrevious = true): Promise<LogTail> {
  const handle = await openLog(file);
  if (!handle) return { file, exists: false, lines: [], truncated: false, size_bytes: 0 };
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) throw notALog(file, stat.isDirectory() ? "a folder" : stat.isFIFO() ? "a pipe" : "not a regular file");
    const size = stat.size;
    let start = size;
    const chunks: Buffer[] = [];
    let seen = 0;
    // One line more than asked: the first one may be cut at the chunk edge.
    // Bytes are decoded once, at the end, so no character is split between chunks.
    while (start > 0 && size - start < MAX_BYTES && seen <= count) {
      const from = Math.max(0, start - CHUNK);
      const { buffer, bytesRead } = await handle.read(Buffer.alloc(start - from), 0, start - from, from);
      const chunk = buffer.subarray(0, bytesRead);
      chunks.unshift(chunk);
      seen += newlines(chunk);
      start = from;
    }
    const all = Buffer.concat(chunks).toString("utf8").split("\n");
    if (all[all.length - 1] === "") all.pop();
    if (start > 0 && all.length > 0) all.shift(); // partial first line
    const lines = all.slice(-count).map(redactText);
    // The whole log is fewer lines than asked: the ones before it are in `<file>.1`, where a log over its cap moved.
    if (start === 0 && lines.length < count && withPrevious) {
      const before = await tailLog(`${file}.1`, count - lines.length, false);
      if (before.exists) return { file, exists: true, lines: [...before.lines, ...lines], truncated: before.truncated, size_bytes: size };
    }
    return { file, exists: true, lines, truncated: start > 0 || all.length > count, size_bytes: size };
  } finally {
    await handle.close();
  }
}

/** `file` opened to read, not through a link, and without waiting on a pipe; undefined when there is none. */
async function openLog(file: string): Promise<FileHandle | undefined> {
  try {
    return await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ELOOP") throw notALog(file, "a symbolic link");
    return undefined;
  }
}

function notALog(file: string, what: string): ApiError {
  return new ApiError("slot.log_unreadable", `${file} is ${what}, not the log file a runner writes: hal0 reads only a regular file there (remove it; the runner's next start writes a new log)`, { file });
}

function newlines(bytes: Buffer): number {
  let n = 0;
  for (let i = bytes.indexOf(10); i !== -1; i = bytes.indexOf(10, i + 1)) n++;
  return n;
}
