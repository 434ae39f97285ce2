import { readFileSync } from "node:fs";
import { open, rm, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../atomic.js";
import type { SlotView } from "../observed.js";

/**
 * The process runtime's state folder, one folder per slot:
 *
 *   <state>/slots/<name>/runtime.json   what hal0 started (written atomically; removed on stop)
 *   <state>/slots/<name>/runner.log     the runner's stdout and stderr, appended across starts
 *   <state>/slots/<name>/runner.log.1   the log before, once runner.log passed RUNNER_LOG_MAX_BYTES
 *
 * `pid` + `pid_start` name one process for the life of the boot: a pid whose
 * start time differs is a later process that was given a reused pid. A record
 * of another boot (`boot_id`) names no process of this one.
 */
export interface RuntimeRecord {
  readonly pid: number;
  /** Field 22 (starttime) of /proc/<pid>/stat when hal0 started the runner. */
  readonly pid_start: number;
  /** The boot the runner was started in (`/proc/sys/kernel/random/boot_id`); absent in a record of an older hal0. */
  readonly boot_id?: string;
  readonly view: SlotView;
  /** ISO 8601. */
  readonly started_at: string;
  /** Absolute path of runner.log. */
  readonly log: string;
}

export interface SlotPaths {
  readonly dir: string;
  readonly record: string;
  readonly log: string;
}

export function slotsDir(stateDir: string): string {
  return join(stateDir, "slots");
}

export function slotPaths(stateDir: string, name: string): SlotPaths {
  const dir = join(slotsDir(stateDir), name);
  return { dir, record: join(dir, "runtime.json"), log: join(dir, "runner.log") };
}

export async function writeRecord(path: string, record: RuntimeRecord): Promise<void> {
  await writeFileAtomic(path, `${JSON.stringify(record, null, 2)}\n`);
}

export async function removeRecord(path: string): Promise<void> {
  await rm(path, { force: true });
}

/** undefined: no record. `error`: a record that can't be trusted, with why. */
export type RecordRead = { readonly record: RuntimeRecord } | { readonly error: string } | undefined;

/** Read synchronously: a record is a few hundred bytes and observe reads one per slot (see procStat). */
export async function readRecord(path: string): Promise<RecordRead> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    return { error: (err as Error).message };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { error: `not JSON (${(err as Error).message})` };
  }
  const problem = recordProblem(value);
  return problem === undefined ? { record: value as RuntimeRecord } : { error: problem };
}

/** Why `value` is not a RuntimeRecord, or undefined when it is one (checked as deep as observe and stop read it). */
function recordProblem(value: unknown): string | undefined {
  if (typeof value !== "object" || value === null) return "not an object";
  const r = value as Record<string, unknown>;
  if (!Number.isSafeInteger(r.pid) || (r.pid as number) <= 0) return "`pid` is not a positive integer";
  if (!Number.isSafeInteger(r.pid_start)) return "`pid_start` is not an integer";
  if (r.boot_id !== undefined && typeof r.boot_id !== "string") return "`boot_id` is not a string";
  if (typeof r.started_at !== "string") return "`started_at` is not a string";
  if (typeof r.log !== "string") return "`log` is not a string";
  const view = r.view as { spec?: { port?: unknown; health_path?: unknown } } | null;
  if (typeof view !== "object" || view === null || typeof view.spec !== "object" || view.spec === null) return "`view.spec` is missing";
  if (!Number.isSafeInteger(view.spec.port)) return "`view.spec.port` is not an integer";
  if (typeof view.spec.health_path !== "string") return "`view.spec.health_path` is not a string";
  return undefined;
}

/** The last `maxLines` lines of `path` from byte `offset` on (what one run wrote), at most 4 KiB. */
export async function logTail(path: string, offset: number, maxLines = 15): Promise<string> {
  const handle = await open(path, "r").catch(() => undefined);
  if (handle === undefined) return "";
  try {
    const size = (await handle.stat()).size;
    const start = Math.max(offset, size - 4096);
    if (size <= start) return "";
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(size - start), 0, size - start, start);
    const lines = buffer.subarray(0, bytesRead).toString("utf8").split("\n").filter((line) => line.trim() !== "");
    return lines.slice(-maxLines).join("\n");
  } finally {
    await handle.close();
  }
}

/**
 * How large a runner's log grows before it moves to runner.log.1 (which it
 * replaces), by default (`[slots] log_max_mb`): a slot's logs take at most
 * about twice this, however long the runner runs and however much it writes.
 */
export const RUNNER_LOG_MAX_BYTES = 16 * 1024 * 1024;

/**
 * Moves `log` to `log.1` when it is over `maxBytes`. The runner keeps its
 * descriptor (it outlives hal0, so its output cannot pass through hal0), so
 * the log is copied and then cut to nothing in place, as logrotate's
 * copytruncate does: the runner appends (O_APPEND) at the new end. Lines
 * written between the copy and the cut are lost. Only the last `maxBytes`
 * (from the first whole line in them) are copied: a runner that wrote far
 * more since the last move (a sweep's interval of a chatty runner) never
 * makes `log.1` larger than the cap, nor needs as much free disk again for
 * the copy. A disk too full for the copy (ENOSPC, EDQUOT: often the log
 * itself filled it, a runner writing on while no sweep ran) does not keep
 * the log over its cap: the newest FULL_DISK_KEEP_BYTES of it (from a whole
 * line) are held in memory, the log is cut, which frees its space, and
 * they are written to `log.1` (what does not fit then is lost). Returns
 * whether it moved.
 */
export async function capRunnerLog(log: string, maxBytes = RUNNER_LOG_MAX_BYTES): Promise<boolean> {
  const size = await stat(log).then((s) => s.size, () => 0);
  if (size <= maxBytes) return false;
  const source = await open(log, "r");
  let newest: Buffer | undefined;
  try {
    const start = await lineStart(source, size - maxBytes, size);
    const target = await open(`${log}.1`, "w");
    try {
      const buffer = Buffer.alloc(Math.min(COPY_CHUNK_BYTES, size - start));
      for (let at = start; at < size;) {
        const { bytesRead } = await source.read(buffer, 0, Math.min(buffer.length, size - at), at);
        if (bytesRead === 0) break; // cut meanwhile (by hand): nothing more to keep
        // A write may take less than it was given (a disk with a page left): the rest is written again, or refused.
        for (let done = 0; done < bytesRead;) done += (await target.write(buffer, done, bytesRead - done)).bytesWritten;
        at += bytesRead;
      }
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOSPC" && code !== "EDQUOT") throw err;
      await target.truncate(0);
      const from = await lineStart(source, Math.max(start, size - FULL_DISK_KEEP_BYTES), size);
      newest = Buffer.alloc(size - from);
      const { bytesRead } = await source.read(newest, 0, newest.length, from);
      newest = newest.subarray(0, bytesRead);
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
  await truncate(log, 0);
  if (newest !== undefined) await writeFile(`${log}.1`, newest).catch(() => undefined); // what fits now that the log's space is free
  return true;
}

/** On a disk too full to copy a runner's log, at most this much of its newest output is kept in runner.log.1 (held in memory while the log is cut). */
export const FULL_DISK_KEEP_BYTES = 4 * 1024 * 1024;

const COPY_CHUNK_BYTES = 1024 * 1024;
/** How far past the cut a line's end is looked for; a longer line is kept from the cut on. */
const LINE_SEARCH_BYTES = 64 * 1024;

/** The offset of the first line that begins at or after `from` (`from` itself when it is one, or no line ends within LINE_SEARCH_BYTES of it). */
async function lineStart(file: Awaited<ReturnType<typeof open>>, from: number, size: number): Promise<number> {
  if (from === 0) return 0;
  const window = Buffer.alloc(Math.min(LINE_SEARCH_BYTES, size - from + 1));
  const { bytesRead } = await file.read(window, 0, window.length, from - 1);
  const newline = window.subarray(0, bytesRead).indexOf(10);
  return newline === -1 ? from : from + newline;
}
