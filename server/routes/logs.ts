import { spawn } from "node:child_process";
import { z } from "zod";
import { SlotName } from "../../schema/index.js";
import { LOG_FILE_MAX_BYTES, LOG_LEVELS, logFilePath, readLog, type LogLevel } from "../log-file.js";
import { redactText } from "../redact.js";
import { defineRoute } from "../route.js";
import { slotLog } from "../slot-logs.js";
import { findSlot } from "../slot-view.js";
import { isoTimeMs, queryInt } from "../query.js";

/** At most this many lines per reply (logs_tail, journal_snapshot). */
export const MAX_LOG_LINES = 1000;

const Lines = (dflt: number) => queryInt(1, MAX_LOG_LINES, dflt);

/** `2026-12-02T14:00:00Z` (any ISO 8601 time), or a time ago: `90s`, `15m`, `2h`, `1d` (one further back than 1970 is every line). */
const Since = z.string().max(64).transform((v, ctx) => {
  const ago = /^(\d{1,9})([smhd])$/.exec(v);
  // Not before the epoch: 999999999d ago is no date at all (the reply's filters.since could not be written).
  if (ago) return Math.max(0, Date.now() - Number(ago[1]) * { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[ago[2] as "s" | "m" | "h" | "d"]);
  const at = isoTimeMs(v);
  if (at === undefined) {
    ctx.addIssue({ code: "custom", message: "since is an ISO 8601 time (2026-12-02T14:00:00Z) or a time ago (90s, 15m, 2h, 1d)" });
    return z.NEVER;
  }
  return at;
});

const TailQuery = z.strictObject({
  level: z.enum(Object.keys(LOG_LEVELS) as [LogLevel, ...LogLevel[]]).optional(),
  since: Since.optional(),
  slot: SlotName.optional(),
  lines: Lines(200),
});

/** How long journalctl may take, and how much of its output is read. */
const JOURNAL_TIMEOUT_MS = 5000;
const JOURNAL_MAX_BYTES = 8 * 1024 * 1024;

/**
 * hal0's own logs: its bounded file in the state folder (server/log-file.ts)
 * and, under systemd, the journal of its unit. Every line that leaves goes
 * through server/redact.ts (and the reply through `invoke`'s redaction too).
 */
export const logRoutes = [
  defineRoute({
    method: "GET", path: "/api/logs", kind: "read", query: TailQuery, tools: ["logs_tail"],
    // With ?slot= it adds that slot's runner log, what slot_logs reads: judged with slot_logs too.
    reveals: "hal0-log", alsoReveals: ["slot-log"],
    summary: "The newest lines of hal0's log (<state>/logs/hal0.log and .1), filtered by level / since / slot; with slot, also that slot's runner log; secret-redacted",
    handle: async ({ box, query }) => {
      const model = query.slot === undefined ? undefined : await box.model();
      if (model && query.slot !== undefined) findSlot(model, query.slot);
      const log = await readLog(logFilePath(box.options.stateDir), { level: query.level, since: query.since, slot: query.slot, lines: query.lines });
      const runner = model === undefined || query.slot === undefined ? undefined : await slotLog(await box.driver(model), box.options.stateDir, query.slot, query.lines);
      return {
        file: log.file, exists: log.exists, max_bytes: LOG_FILE_MAX_BYTES,
        filters: { level: query.level ?? null, since: query.since === undefined ? null : new Date(query.since).toISOString(), slot: query.slot ?? null, lines: query.lines },
        lines: log.entries, count: log.entries.length, truncated: log.matched > log.entries.length,
        // A runner's own output has no level or time of hal0's: only `lines` applies to it.
        ...(runner ? { slot: { name: query.slot, source: runner.source, file: runner.file, exists: runner.exists, lines: runner.lines, truncated: runner.truncated } } : {}),
      };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/journal", kind: "read", query: z.strictObject({ lines: Lines(100) }), tools: ["journal_snapshot"],
    // The journal of hal0's unit is its log (its stdout); without systemd, the tail of its log file: what logs_tail reads.
    reveals: "hal0-log",
    summary: "The systemd journal of this hal0 serve (journalctl -o json, its invocation) when it runs under systemd, else {available: false, reason} and the tail of hal0's own log file",
    handle: async ({ box, query }) => {
      const invocation = process.env.INVOCATION_ID;
      if (invocation === undefined || invocation === "") {
        const tail = await readLog(logFilePath(box.options.stateDir), { lines: query.lines });
        return { available: false, reason: "hal0 is not running under systemd (INVOCATION_ID is not set): here is the tail of its own log file", file: tail.file, lines: tail.entries, count: tail.entries.length };
      }
      return journal(invocation, query.lines);
    },
  }),
];

/** The journal entries of this service invocation, newest `lines`, oldest first; `{available: false, reason}` when journalctl cannot give them. */
async function journal(invocation: string, lines: number): Promise<Record<string, unknown>> {
  if (!/^[0-9a-f]{32}$/i.test(invocation)) return { available: false, reason: `INVOCATION_ID is not a systemd invocation id: ${redactText(invocation.slice(0, 64))}` };
  const run = await journalctl(["-o", "json", "--no-pager", "-n", String(lines), `_SYSTEMD_INVOCATION_ID=${invocation}`]);
  if ("reason" in run) return { available: false, reason: run.reason };
  const entries = run.stdout.split("\n").filter((l) => l.trim() !== "").map(journalEntry);
  return { available: true, invocation_id: invocation, unit: entries.find((e) => e.unit)?.unit ?? null, lines: entries, count: entries.length };
}

function journalEntry(line: string): { time: string | null; priority: number | null; pid: number | null; unit: string | null; message: string } {
  let v: Record<string, unknown>;
  try {
    v = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return { time: null, priority: null, pid: null, unit: null, message: redactText(line) };
  }
  // journalctl gives MESSAGE as an array of bytes when it is not valid UTF-8.
  const raw = Array.isArray(v.MESSAGE) ? Buffer.from(v.MESSAGE as number[]).toString("utf8") : String(v.MESSAGE ?? "");
  const us = Number(v.__REALTIME_TIMESTAMP);
  return {
    time: Number.isFinite(us) ? new Date(us / 1000).toISOString() : null,
    priority: v.PRIORITY === undefined ? null : Number(v.PRIORITY),
    pid: v._PID === undefined ? null : Number(v._PID),
    unit: typeof v._SYSTEMD_UNIT === "string" ? v._SYSTEMD_UNIT : null,
    message: redactText(raw),
  };
}

function journalctl(args: string[]): Promise<{ stdout: string } | { reason: string }> {
  return new Promise((resolve) => {
    const child = spawn("journalctl", args, { stdio: ["ignore", "pipe", "pipe"], timeout: JOURNAL_TIMEOUT_MS });
    let out = "";
    let err = "";
    child.stdout.on("data", (c: Buffer) => {
      if (out.length < JOURNAL_MAX_BYTES) out += c.toString("utf8");
    });
    child.stderr.on("data", (c: Buffer) => void (err += c.toString("utf8")));
    child.once("error", (e) => resolve({ reason: `journalctl cannot run: ${(e as NodeJS.ErrnoException).code === "ENOENT" ? "not found on PATH" : e.message}` }));
    child.once("close", (code, signal) => {
      if (code === 0) resolve({ stdout: out });
      else resolve({ reason: `journalctl ${signal ? `was stopped (${signal}, after ${JOURNAL_TIMEOUT_MS} ms)` : `exited ${code}`}: ${redactText(err.trim().split("\n")[0] ?? "")}` });
    });
  });
}
