import { closeSync, fchmodSync, fstatSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { redactTyped } from "./redact.js";

/**
 * hal0's own log file: `<state>/logs/hal0.log`, the JSON lines `hal0 serve`
 * logs (already redacted by serveLogger's stream), so an operator can read
 * them over the API when stdout went nowhere they can see.
 */
export function logFilePath(stateDir: string): string {
  return join(stateDir, "logs", "hal0.log");
}

/**
 * At most this many bytes per file: a line that would take `hal0.log` past
 * it first moves it to `hal0.log.1` (replacing the older one), so the logs
 * never hold more than twice this (8 MiB) on disk.
 */
export const LOG_FILE_MAX_BYTES = 4 * 1024 * 1024;

/**
 * Appends lines to a file rotated at a size bound to one `.1` file. Writes
 * are synchronous (a line is on disk when `write` returns: a crash loses
 * nothing already logged); the folder is made 0700 and the file 0600 when
 * opened. A failing disk never fails the logger: the line is dropped and
 * the file opened again for the next one.
 */
export class RotatingLog {
  private fd?: number;
  private size = 0;

  constructor(readonly file: string, readonly maxBytes = LOG_FILE_MAX_BYTES) {}

  write(text: string): void {
    try {
      const bytes = Buffer.from(text, "utf8");
      if (this.fd === undefined) this.open();
      if (this.size > 0 && this.size + bytes.length > this.maxBytes) this.rotate();
      // One line longer than the bound is cut rather than breaking the bound.
      const out = bytes.length > this.maxBytes ? Buffer.concat([bytes.subarray(0, this.maxBytes - 1), Buffer.from("\n")]) : bytes;
      writeSync(this.fd!, out);
      this.size += out.length;
    } catch {
      this.close();
    }
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  private open(): void {
    mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
    this.fd = openSync(this.file, "a", 0o600);
    // A file some other writer made (or an older hal0) is narrowed to its owner too.
    fchmodSync(this.fd, 0o600);
    this.size = fstatSync(this.fd).size;
  }

  private rotate(): void {
    this.close();
    renameSync(this.file, `${this.file}.1`);
    this.open();
  }
}

/** pino's level numbers by name. */
export const LOG_LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;
export type LogLevel = keyof typeof LOG_LEVELS;

function levelName(n: unknown): string {
  return (Object.entries(LOG_LEVELS).find(([, v]) => v === n)?.[0]) ?? String(n);
}

export interface LogFilter {
  /** The lowest level kept. */
  readonly level?: LogLevel;
  /** Only lines logged at or after this time (ms since the epoch). */
  readonly since?: number;
  /** Only lines about this slot (a `slot` field, or its address `slot.<name>` anywhere in the line). */
  readonly slot?: string;
  /** At most this many lines: the newest. */
  readonly lines: number;
}

export interface LogEntry {
  readonly time?: string;
  readonly level: string;
  readonly msg: string;
  readonly [key: string]: unknown;
}

/**
 * The newest lines of hal0's log (`hal0.log.1` then `hal0.log`) that pass
 * `filter`, oldest first, each parsed and its level named; every line kept
 * goes through the one redactor again on the way out (a line written before
 * the file's stream redacted, or by another writer, is masked all the same).
 */
export async function readLog(file: string, filter: LogFilter): Promise<{ file: string; exists: boolean; entries: LogEntry[]; matched: number }> {
  const texts = await Promise.all([`${file}.1`, file].map((f) => readFile(f, "utf8").catch(() => undefined)));
  const exists = texts[1] !== undefined || texts[0] !== undefined;
  const min = filter.level === undefined ? 0 : LOG_LEVELS[filter.level];
  const entries: LogEntry[] = [];
  for (const text of texts) {
    if (text === undefined) continue;
    for (const raw of text.split("\n")) {
      if (raw.trim() === "") continue;
      const entry = parse(raw);
      if (min > 0 && !(typeof entry.level_number === "number" && entry.level_number >= min)) continue;
      if (filter.since !== undefined && !(entry.time !== undefined && Date.parse(entry.time) >= filter.since)) continue;
      if (filter.slot !== undefined && !aboutSlot(entry, raw, filter.slot)) continue;
      const { level_number: _n, ...rest } = entry;
      entries.push(rest as LogEntry);
    }
  }
  // Redacted after filtering: only the lines that leave are masked (the line's text and every value in it).
  return { file, exists, entries: entries.slice(-filter.lines).map((e) => redactTyped(e)), matched: entries.length };
}

function parse(line: string): LogEntry & { level_number?: number } {
  try {
    const v = JSON.parse(line) as Record<string, unknown>;
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      const { level, time, msg, ...rest } = v;
      return { ...rest, time: typeof time === "string" ? time : typeof time === "number" ? new Date(time).toISOString() : undefined, level: levelName(level), level_number: typeof level === "number" ? level : undefined, msg: typeof msg === "string" ? msg : "" };
    }
  } catch {
    // not JSON: kept as its text
  }
  return { level: "unknown", msg: line };
}

/** A `slot` field naming it, or its address `slot.<name>` / the words `slot <name>` anywhere in the line (not a longer name that starts the same). */
function aboutSlot(entry: Record<string, unknown>, line: string, slot: string): boolean {
  if (entry.slot === slot) return true;
  return new RegExp(String.raw`\bslot[. ]${slot.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![\w-])`).test(line);
}
