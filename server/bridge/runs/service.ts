import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, closeSync, mkdirSync, openSync, readFileSync, readSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { tempPathFor } from "../../../reconciler/atomic.js";
import { bootId, isLive, killQuietly, procStat, sameBoot } from "../../../reconciler/drivers/proc.js";
import { resolveHermesHome } from "../../../reconciler/hermes-plan.js";
import { Settings } from "../../../schema/index.js";
import type { Db } from "../../db.js";
import { ApiError } from "../../errors.js";
import { hermesSpawn, outcomeOf, profileHome, sessionIdOf } from "./hermes-adapter.js";
import { diffSkills, snapshotFromJson, snapshotSkills, snapshotToJson, type SkillChanges, type SkillsSnapshot } from "./skills-diff.js";

/**
 * The agent bridge's Hermes runs: durable records in hal0.db (`bridge_runs`),
 * each run's output in a bounded log (`<state>/runs/<id>.log`, the tail
 * kept), each run's process leading its own process group so a cancel, a
 * timeout or a restart stops everything it started. At most `[bridge]
 * max_runs` run at once; the rest wait, queued, and start in order, at most
 * {@link QUEUED_PER_CALLER} of one caller's at a time.
 */

export const RUN_STATES = ["queued", "running", "done", "failed", "cancelled", "interrupted"] as const;
export type RunState = (typeof RUN_STATES)[number];
const ENDED: ReadonlySet<string> = new Set(["done", "failed", "cancelled", "interrupted"]);

export interface RunRow {
  readonly id: string;
  readonly profile: string;
  readonly prompt: string;
  readonly toolsets: string;
  readonly max_turns: number | null;
  readonly timeout_s: number;
  readonly resume: string | null;
  readonly parent_run: string | null;
  readonly session_id: string | null;
  readonly state: RunState;
  readonly reason: string | null;
  readonly caller: string;
  readonly created_at: string;
  readonly started_at: string | null;
  readonly ended_at: string | null;
  readonly pid: number | null;
  readonly pid_start: number | null;
  /** The boot it was started in (/proc/sys/kernel/random/boot_id); null for a run of an older hal0, or where it cannot be read. */
  readonly boot_id: string | null;
  readonly exit_code: number | null;
  readonly signal: string | null;
  readonly error: string | null;
  readonly log_base: number;
  readonly log_bytes: number;
  /** When a process that does not run it (a CLI command's guest) asked its owner to cancel it. */
  readonly cancel_requested: string | null;
  /** JSON {@link SkillChanges}: what the run did to its profile's skills/ (read as it started and as it ended); null when not known. */
  readonly skill_changes: string | null;
  /** While it runs: its profile's skills/ as it started (skills-diff.ts snapshotToJson), so a hal0 restarted meanwhile still compares. */
  readonly skills_before: string | null;
}

export interface RunRequest {
  readonly profile: string;
  readonly prompt: string;
  readonly toolsets?: readonly string[];
  readonly maxTurns?: number;
  readonly timeoutS?: number;
  readonly resume?: string;
  readonly parentRun?: string;
  /** `operator:<name>` / `agent:<name>`. */
  readonly caller: string;
}

export interface RunServiceOptions {
  readonly db: Db;
  readonly stateDir: string;
  /** hal0's environment: the run gets PATH, HOME, locale and HERMES_* from it (hermes-adapter.ts). */
  readonly env: NodeJS.ProcessEnv;
  readonly settings: () => Settings | undefined;
  /** The config folder: a relative `[hermes] home` is taken against it, as the wiring takes it (default: hal0's working folder). */
  readonly root?: string;
  readonly now?: () => number;
  /** The log's bound in bytes (default 1 MiB): past it the oldest output is dropped. */
  readonly logLimit?: number;
  /** Between SIGTERM to a run's group and SIGKILL (default 3000 ms). */
  readonly graceMs?: number;
  /**
   * A CLI command's server on a state folder that a `hal0 serve` may own
   * (`hal0 agent approvals`, `hal0 model pull`): it reads runs, and a run it
   * records (an approved agent_run_start) waits queued for the serve, which
   * looks for queued runs every {@link PUMP_MS}. It never stops, launches or
   * ends a run: those are the serve's, running in its process.
   */
  readonly guest?: boolean;
  /**
   * Why a queued run must not start now, asked as it reaches the front: the
   * identity that started it (`agent:<name>`, `operator:<name>`) was revoked
   * since, or admitted again to profiles that leave the run's out. It then
   * ends cancelled with that reason, never started.
   */
  readonly refused?: (starter: string, profile: string) => { reason: string; error: string } | undefined;
  /** Told, once a run has ended, of each skill its profile's skills/ gained, changed or lost while it ran (the audit rows). */
  readonly onSkillChanges?: (row: RunRow, changes: SkillChanges) => void;
}

/** Runs one caller may have queued (waiting for a place among `[bridge] max_runs`) at once; one more is 429 `run.too_many_queued`. */
export const QUEUED_PER_CALLER = 20;

/** How often the owner looks for runs another process queued (a guest's approved start) when a place is free. */
export const PUMP_MS = 2000;

/** One output slice: whole lines from `after`, the cursor to ask from next. */
export interface RunEvents {
  readonly lines: string[];
  readonly next: number;
  readonly done: boolean;
  /** Output before `next - bytes read` was dropped by the log's bound (the cursor asked for it). */
  readonly dropped: number;
}

interface Live {
  readonly child: ChildProcess;
  readonly pid: number;
  base: number;
  bytes: number;
  intent?: "cancel" | "timeout" | "closing";
  timer?: NodeJS.Timeout;
  session?: string;
  /** The line of stderr still being written (where Hermes reports its session id). */
  carry: string;
  /** The profile's skills/ as the run started. */
  readonly skills?: SkillsSnapshot;
  readonly home: string;
  readonly ended: Promise<void>;
}

/** How a run ended, as its row records it. */
interface RunEnd {
  readonly state: RunState;
  readonly reason: string;
  readonly error?: string;
  readonly exit_code?: number | null;
  readonly signal?: string | null;
  readonly session_id?: string;
  readonly log_base?: number;
  readonly log_bytes?: number;
  readonly skill_changes?: SkillChanges;
}

const MAX_READ = 64 * 1024;
/** After the group's SIGKILL, how long a run's output may stay open (held by a process outside its group) before the run ends without it. */
const STREAMS_GRACE_MS = 1000;
const DEFAULT_LOG_LIMIT = 1024 * 1024;

export class RunService {
  /** Settles once runs a previous hal0 left running are stopped and marked interrupted. */
  readonly ready: Promise<void>;
  private readonly live = new Map<string, Live>();
  private readonly waiters = new Map<string, Set<() => void>>();
  /** Ends the database could not record yet (ended), by run. */
  private readonly unrecorded = new Map<string, RunEnd>();
  private readonly dir: string;
  private readonly now: () => number;
  private readonly logLimit: number;
  private readonly graceMs: number;
  private closed = false;
  /** hal0 is stopping (interrupt): waits answer at once. */
  private stopping = false;
  /** Set once `recover` has marked what a previous hal0 left: until then no queued run starts (it may be one of those). */
  private recovered = false;

  constructor(private readonly o: RunServiceOptions) {
    this.dir = join(o.stateDir, "runs");
    this.now = o.now ?? Date.now;
    this.logLimit = o.logLimit ?? DEFAULT_LOG_LIMIT;
    this.graceMs = o.graceMs ?? 3000;
    this.ready = o.guest ? Promise.resolve() : this.recover();
    this.ready.catch(() => undefined); // awaited by start and close, which see the error; never an unhandled rejection
    if (!o.guest) {
      this.pumpTimer = setInterval(() => this.pump(), PUMP_MS);
      this.pumpTimer.unref();
    }
  }

  private pumpTimer: NodeJS.Timeout | undefined;

  private settings(): Settings {
    return this.o.settings() ?? Settings.parse({});
  }

  /** `[bridge] max_runs`, read at each start. */
  maxRuns(): number {
    return this.settings().bridge.max_runs;
  }

  defaultTimeoutS(): number {
    return this.settings().hermes.run_timeout_s;
  }

  get(id: string): RunRow | undefined {
    return this.withLiveCounts(this.o.db.prepare("SELECT * FROM bridge_runs WHERE id = ?").get(id) as RunRow | undefined);
  }

  /** A running run's output counts as they are now: its row has them only from a trim of its log, or from its end. */
  private withLiveCounts<T extends RunRow | undefined>(row: T): T {
    const live = row && this.live.get(row.id);
    return live ? { ...row, log_base: live.base, log_bytes: live.bytes } : row;
  }

  list(filter: { profile?: string; state?: string; profiles: readonly string[] | "all"; limit?: number }): RunRow[] {
    const where: string[] = [];
    const values: unknown[] = [];
    if (filter.profile !== undefined) where.push("profile = ?"), values.push(filter.profile);
    if (filter.state !== undefined) where.push("state = ?"), values.push(filter.state);
    if (filter.profiles !== "all") where.push(`profile IN (${filter.profiles.map(() => "?").join(",") || "NULL"})`), values.push(...filter.profiles);
    const clause = where.length ? `WHERE ${where.join(" AND ")}` : "";
    return (this.o.db.prepare(`SELECT * FROM bridge_runs ${clause} ORDER BY rowid DESC LIMIT ?`).all(...values, filter.limit ?? 200) as RunRow[]).map((r) => this.withLiveCounts(r));
  }

  /** Records a run (queued) and starts it when a place is free. */
  async start(req: RunRequest): Promise<RunRow> {
    await this.ready;
    if (this.closed) throw new Error("the run service is closed");
    const id = `run_${randomBytes(8).toString("hex")}`;
    // Counted and recorded in one statement: starts racing (in two processes too) never pass the bound together, and
    // never continue one Hermes session together (two runs writing one session's history at once).
    const added = this.o.db.prepare(`INSERT INTO bridge_runs (id, profile, prompt, toolsets, max_turns, timeout_s, resume, parent_run, state, caller, created_at)
                       SELECT ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?
                       WHERE (SELECT count(*) FROM bridge_runs WHERE state = 'queued' AND caller = ?) < ?
                         AND NOT EXISTS (SELECT 1 FROM bridge_runs WHERE state IN ('queued', 'running') AND profile = ? AND resume = ?)`)
      .run(id, req.profile, req.prompt, JSON.stringify(req.toolsets ?? []), req.maxTurns ?? null, req.timeoutS ?? this.defaultTimeoutS(), req.resume ?? null, req.parentRun ?? null, req.caller, this.iso(), req.caller, QUEUED_PER_CALLER, req.profile, req.resume ?? null);
    if (added.changes !== 1) {
      const busy = req.resume === undefined ? undefined
        : this.o.db.prepare("SELECT id, state FROM bridge_runs WHERE state IN ('queued', 'running') AND profile = ? AND resume = ? LIMIT 1").get(req.profile, req.resume) as { id: string; state: string } | undefined;
      if (busy) throw new ApiError("run.active", `Hermes session ${req.resume} is being continued by run ${busy.id} (${busy.state}); continue it once that run has ended (agent_run_wait)`, { run_id: busy.id, state: busy.state, session_id: req.resume });
      throw new ApiError("run.too_many_queued", `${req.caller} already has ${QUEUED_PER_CALLER} runs waiting to start; wait for them to start (agent_run_wait) or cancel some (agent_run_cancel) before starting more`, { queued: QUEUED_PER_CALLER, max: QUEUED_PER_CALLER });
    }
    this.pump();
    return this.get(id)!;
  }

  /**
   * Stops a queued or running run (its whole process group); an ended run is
   * left as it is. A guest asks the serve, whose process the run is, to stop
   * it (it looks every {@link PUMP_MS}) and waits a while for it to end.
   */
  async cancel(id: string): Promise<RunRow> {
    const row = this.get(id);
    if (!row) throw new Error(`no run ${id}`);
    // Only while it is still queued: the serve may have started it meanwhile (this one a guest).
    if (row.state === "queued" && this.end(id, { state: "cancelled", reason: "cancelled", error: "cancelled before it started" }, "queued")) return this.get(id)!;
    const live = this.live.get(id);
    if (live) {
      this.stop(live, "cancel");
      await live.ended;
    } else if (this.o.guest && this.get(id)!.state === "running") {
      this.o.db.prepare("UPDATE bridge_runs SET cancel_requested = ? WHERE id = ? AND state = 'running'").run(this.iso(), id);
      const deadline = performance.now() + PUMP_MS + this.graceMs + STREAMS_GRACE_MS + 2000;
      while (this.get(id)!.state === "running" && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    }
    return this.get(id)!;
  }

  /** Resolves when the run has ended or after `ms`, whichever comes first (at once while hal0 stops: see {@link interrupt}). */
  async wait(id: string, ms: number): Promise<RunRow | undefined> {
    const row = this.get(id);
    if (!row || ENDED.has(row.state) || this.stopping) return row;
    await new Promise<void>((resolve) => {
      const set = this.waiters.get(id) ?? new Set();
      this.waiters.set(id, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
    return this.get(id);
  }

  /** Output from byte `after` on, in whole lines (at most 64 KiB a call). */
  events(id: string, after: number): RunEvents {
    const row = this.get(id)!;
    const live = this.live.get(id);
    const base = live?.base ?? row.log_base;
    const bytes = live?.bytes ?? row.log_bytes;
    const ended = ENDED.has(row.state);
    const from = Math.max(after, base);
    const want = Math.min(MAX_READ, Math.max(0, bytes - from));
    const buf = want > 0 ? this.readLog(id, from - base, want) : Buffer.alloc(0);
    let take = buf.length;
    const atEnd = from + buf.length >= bytes;
    if (!(ended && atEnd)) {
      const nl = buf.lastIndexOf(0x0a);
      // A part-written line waits for its end, unless one line alone fills the read (then cut between two characters).
      take = nl >= 0 ? nl + 1 : buf.length === MAX_READ ? wholeCharacters(buf) : 0;
    }
    const text = buf.subarray(0, take).toString("utf8");
    const lines = text === "" ? [] : text.replace(/\n$/, "").split("\n");
    const next = from + take;
    return { lines, next, done: ended && next >= bytes, dropped: Math.max(0, base - after) };
  }

  /** The last (up to) 64 KiB of the run's output, from a character's start, and whether older output was dropped. */
  tail(id: string): { text: string; truncated: boolean } {
    const row = this.get(id)!;
    const live = this.live.get(id);
    const base = live?.base ?? row.log_base;
    const bytes = live?.bytes ?? row.log_bytes;
    let from = Math.max(base, bytes - MAX_READ);
    if (from > base) {
      // The window starts between two characters: one the 64 KiB cut would split is taken whole.
      const before = this.readLog(id, Math.max(0, from - base - 3), Math.min(3, from - base));
      from -= before.length - wholeCharacters(before);
    }
    return { text: this.readLog(id, from - base, bytes - from).toString("utf8"), truncated: from > 0 };
  }

  /**
   * hal0 is stopping: every wait answers now, with the run as it is, and a
   * later one does not wait. A shutdown finishes the requests in flight, and
   * an agent_run_wait of up to 300 s is one: it held the stop (and the runs
   * it stops) for as long.
   */
  interrupt(): void {
    this.stopping = true;
    for (const set of this.waiters.values()) for (const w of [...set]) w();
  }

  /** Stops every running run's group (marked interrupted) and every queued one; the records stay. */
  async close(): Promise<void> {
    await this.ready;
    this.closed = true;
    clearInterval(this.pumpTimer);
    // A guest's runs are the serve's: none runs here, and the queued ones wait for it.
    if (this.o.guest) return;
    const lives = [...this.live.values()];
    for (const live of lives) this.stop(live, "closing");
    await Promise.all(lives.map((l) => l.ended));
    for (const row of this.o.db.prepare("SELECT id FROM bridge_runs WHERE state = 'queued'").all() as Array<{ id: string }>) {
      this.end(row.id, { state: "interrupted", reason: "hal0_stopped", error: "hal0 stopped before the run started" });
    }
  }

  // ── internals ──────────────────────────────────────────────────────────

  private iso(): string {
    return new Date(this.now()).toISOString();
  }

  private logPath(id: string): string {
    return join(this.dir, `${id}.log`);
  }

  private readLog(id: string, offset: number, length: number): Buffer {
    if (length <= 0) return Buffer.alloc(0);
    let fd: number;
    try {
      fd = openSync(this.logPath(id), "r");
    } catch {
      return Buffer.alloc(0);
    }
    try {
      const buf = Buffer.alloc(length);
      const n = readSync(fd, buf, 0, length, offset);
      return buf.subarray(0, n);
    } finally {
      closeSync(fd);
    }
  }

  /** Starts queued runs, oldest first, while fewer than `max_runs` run. */
  private pump(): void {
    if (this.closed || this.o.guest || !this.recovered) return;
    for (const [id, f] of this.unrecorded) {
      try {
        this.end(id, f);
      } catch {
        return; // still refused: nothing else starts before the database takes it
      }
      this.unrecorded.delete(id);
    }
    // Cancels a guest asked for (a CLI command's approved agent_run_cancel): the runs are this process's to stop.
    for (const { id } of this.o.db.prepare("SELECT id FROM bridge_runs WHERE state = 'running' AND cancel_requested IS NOT NULL").all() as Array<{ id: string }>) {
      const live = this.live.get(id);
      if (live && live.intent === undefined) this.stop(live, "cancel");
    }
    const max = this.maxRuns();
    while (this.live.size < max) {
      const next = this.o.db.prepare("SELECT * FROM bridge_runs WHERE state = 'queued' ORDER BY rowid LIMIT 1").get() as RunRow | undefined;
      if (!next) return;
      // A revoked agent no longer acts on this box, and one admitted again reaches only its new profiles: what it queued before does not start.
      const refused = this.o.refused?.(next.caller, next.profile);
      if (refused) this.end(next.id, { state: "cancelled", ...refused }, "queued");
      else this.launch(next);
    }
  }

  private launch(row: RunRow): void {
    const s = this.settings();
    // The profile may have been removed while the run waited: say so, rather than that the command could not start (the spawn's ENOENT).
    const hermesHome = this.o.root === undefined ? s.hermes.home : resolveHermesHome(s.hermes.home, this.o.root);
    const home = profileHome(hermesHome, row.profile);
    if (!isFolder(home)) {
      this.end(row.id, { state: "failed", reason: "profile_not_found", error: `Hermes profile ${row.profile} is no longer there (no folder ${home}): it was removed before the run started` }, "queued");
      return;
    }
    // Claimed in the database before anything of it is made: another process that owns runs on this state folder
    // (or a guest's cancel) may have taken it since it was read, and a run is started once, by whoever claims it.
    if (this.o.db.prepare("UPDATE bridge_runs SET state = 'running', started_at = ? WHERE id = ? AND state = 'queued'").run(this.iso(), row.id).changes !== 1) return;
    try {
      mkdirSync(this.dir, { recursive: true });
      writeFileSync(this.logPath(row.id), "");
    } catch (err) {
      // A log that cannot be made (a full disk, runs/ not a folder): the run fails, and the server and the queue go on.
      this.end(row.id, { state: "failed", reason: "spawn_failed", error: `cannot write its log ${this.logPath(row.id)}: ${(err as Error).message}` });
      return;
    }
    // What skills/ holds as the run starts: compared with what it holds at the end (skills-diff.ts).
    const skills = snapshotSkills(home);
    const how = hermesSpawn(
      { command: s.hermes.command, home: hermesHome, profile: row.profile, prompt: row.prompt, toolsets: JSON.parse(row.toolsets) as string[], maxTurns: row.max_turns ?? undefined, resume: row.resume ?? undefined },
      this.o.env,
      { HAL0_RUN_STATE: resolve(this.o.stateDir), HAL0_RUN_ID: row.id },
    );
    let child: ChildProcess;
    try {
      child = spawn(how.file, how.argv, { cwd: how.cwd, env: how.env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    } catch (err) {
      this.end(row.id, { state: "failed", reason: "spawn_failed", error: `cannot start ${s.hermes.command}: ${(err as Error).message}` });
      return;
    }
    if (child.pid === undefined) {
      // The spawn failed (no such command, no profile folder): 'error' says why, right after.
      child.once("error", (err) => {
        this.ended(row.id, { state: "failed", reason: "spawn_failed", error: `cannot start ${s.hermes.command}: ${err.message}` });
        this.pump();
      });
      return;
    }
    const pid = child.pid;
    // [hermes] run_timeout_s is read as the run starts: lowered while it waited, queued, the run runs no longer than it says now.
    const timeoutS = Math.min(row.timeout_s, s.hermes.run_timeout_s);
    this.o.db.prepare("UPDATE bridge_runs SET pid = ?, boot_id = ?, timeout_s = ?, skills_before = ? WHERE id = ?").run(pid, bootId() ?? null, timeoutS, snapshotToJson(home, skills), row.id);
    void procStat(pid).then((stat) => {
      if (stat) this.o.db.prepare("UPDATE bridge_runs SET pid_start = ? WHERE id = ? AND pid = ?").run(stat.startTime, row.id, pid);
    }).catch(() => undefined); // a note for telling a reused pid apart; a database that cannot take it (a full disk) ends nothing
    let finish!: () => void;
    const ended = new Promise<void>((r) => (finish = r));
    const live: Live = { child, pid, base: 0, bytes: 0, carry: "", ended, skills, home };
    this.live.set(row.id, live);
    live.timer = setTimeout(() => this.stop(live, "timeout"), timeoutS * 1000);
    live.timer.unref();
    child.stdout!.on("data", (chunk: Buffer) => this.output(row.id, live, chunk, "out"));
    child.stderr!.on("data", (chunk: Buffer) => this.output(row.id, live, chunk, "err"));
    // The leader is gone: whatever it left in its group goes too, so the streams close.
    child.once("exit", () => {
      this.signalGroup(live, "SIGTERM", true);
      // A process that left the group (a daemon started with setsid) may hold the output open for ever: once the
      // group has had its grace and its SIGKILL, the run ends without it (else it stayed running, a place of
      // max_runs taken, and a cancel never answered).
      const cut = setTimeout(() => {
        child.stdout!.destroy();
        child.stderr!.destroy();
      }, this.graceMs + STREAMS_GRACE_MS);
      cut.unref();
      void ended.then(() => clearTimeout(cut));
    });
    child.once("close", (code, signal) => {
      clearTimeout(live.timer);
      if (live.carry !== "") this.scan(live, live.carry);
      const outcome = live.intent === "cancel" ? { state: "cancelled" as const, reason: "cancelled", error: "cancelled" }
        : live.intent === "timeout" ? { state: "failed" as const, reason: "timed_out", error: `timed out after ${timeoutS} s; its process group was stopped` }
        : live.intent === "closing" ? { state: "interrupted" as const, reason: "hal0_stopped", error: "hal0 stopped while the run ran; its process group was stopped" }
        : { reason: "exit", ...outcomeOf(code, signal) };
      this.live.delete(row.id);
      const skillChanges = live.skills ? this.overlapping(row.id, diffSkills(live.skills, snapshotSkills(live.home))) : undefined;
      this.ended(row.id, { ...outcome, exit_code: code, signal, session_id: live.session, log_base: live.base, log_bytes: live.bytes, skill_changes: skillChanges });
      this.tellSkillChanges(row.id, skillChanges);
      finish();
      this.pump();
    });
  }

  private output(id: string, live: Live, chunk: Buffer, stream: "out" | "err"): void {
    try {
      appendFileSync(this.logPath(id), chunk);
    } catch {
      // A log that cannot grow (a full disk) loses this chunk; the run goes on, and so does the server.
      return;
    }
    live.bytes += chunk.length;
    // Hermes reports its session id on stderr; stdout is its answer, whose words the prompt (or what the model read)
    // chooses, so a `session_id:` line there is text, never the run's session. Only the chunk is searched for the
    // line's end, and a line longer than any session id line is not kept whole: a run printing a huge line with no
    // newline costs neither memory nor time that grows with it.
    if (stream === "err") {
      const text = chunk.toString("utf8");
      const cut = text.lastIndexOf("\n");
      if (cut >= 0) this.scan(live, live.carry + text.slice(0, cut));
      live.carry = carried(cut >= 0 ? text.slice(cut + 1) : live.carry + text);
    }
    if (live.bytes - live.base > this.logLimit) {
      try {
        this.trim(id, live);
      } catch {
        // Trimmed at the next chunk instead (a full disk refused the copy).
      }
    }
  }

  /** The changes, naming the other runs of the run's profile that ran while it ran (whose writes to skills/ it cannot tell from its own). */
  private overlapping(id: string, changes: SkillChanges): SkillChanges {
    try {
      const row = this.get(id);
      const others = row?.started_at ? this.o.db.prepare(`SELECT id FROM bridge_runs WHERE profile = ? AND id != ? AND started_at IS NOT NULL AND started_at <= ?
                                                          AND (ended_at IS NULL OR ended_at >= ?) ORDER BY rowid LIMIT 20`)
        .all(row.profile, id, this.iso(), row.started_at) as Array<{ id: string }> : [];
      return { ...changes, overlapping: others.map((o) => o.id) };
    } catch {
      return changes; // a database that cannot answer now: the end is recorded all the same
    }
  }

  /** The audit rows of what a run did to its profile's skills/ (none when it did nothing, or it is not known). */
  private tellSkillChanges(id: string, changes: SkillChanges | undefined): void {
    if (!changes || changes.changes.length === 0 && changes.more === 0) return;
    try {
      this.o.onSkillChanges?.(this.get(id)!, changes);
    } catch {
      // The audit never ends a run.
    }
  }

  private scan(live: Live, text: string): void {
    for (const line of text.split("\n")) live.session = sessionIdOf(line) ?? live.session;
  }

  /** Keeps the log's last three quarters of the bound, from a line's start. */
  private trim(id: string, live: Live): void {
    const file = this.logPath(id);
    const data = readFileSync(file);
    let from = data.length - Math.floor((this.logLimit * 3) / 4);
    const nl = data.indexOf(0x0a, from);
    if (nl >= 0 && nl < data.length - 1) from = nl + 1;
    // A temp named as hal0's others: one a crash leaves here is removed with theirs (hal0 serve's start, each apply).
    const tmp = tempPathFor(file);
    writeFileSync(tmp, data.subarray(from));
    renameSync(tmp, file);
    live.base += from;
    this.o.db.prepare("UPDATE bridge_runs SET log_base = ?, log_bytes = ? WHERE id = ?").run(live.base, live.bytes, id);
  }

  private stop(live: Live, intent: NonNullable<Live["intent"]>): void {
    live.intent ??= intent;
    this.signalGroup(live, "SIGTERM", true);
  }

  /** Signals the run's process group; with `escalate`, SIGKILL follows after the grace if anything of it is left. */
  private signalGroup(live: Live, signal: NodeJS.Signals, escalate: boolean): void {
    if (!killGroup(live.pid, signal) || !escalate) return;
    const t = setTimeout(() => killGroup(live.pid, "SIGKILL"), this.graceMs);
    t.unref();
    void live.ended.then(() => {
      // The leader's streams closed; a member that outlived it still gets the SIGKILL.
      if (!groupExists(live.pid)) clearTimeout(t);
    });
  }

  /**
   * Records the end of a run whose process is gone. A database that cannot
   * take it now (a full disk) gets it again at each look of the queue (every
   * {@link PUMP_MS}) until it does: the run is never left `running` for good,
   * and the error never leaves the child's event.
   */
  private ended(id: string, f: RunEnd): void {
    try {
      this.end(id, f);
    } catch {
      this.unrecorded.set(id, f);
    }
  }

  /** Records how a run ended; with `from`, only while it is still in that state (false: it was not, nothing changed). */
  private end(id: string, f: RunEnd, from?: RunState): boolean {
    const changed = this.o.db.prepare(`UPDATE bridge_runs SET state = ?, reason = ?, error = ?, exit_code = ?, signal = ?, session_id = COALESCE(?, session_id),
                         log_base = COALESCE(?, log_base), log_bytes = COALESCE(?, log_bytes), skill_changes = COALESCE(?, skill_changes), skills_before = NULL, ended_at = ? WHERE id = ? AND (? IS NULL OR state = ?)`)
      .run(f.state, f.reason, f.error ?? null, f.exit_code ?? null, f.signal ?? null, f.session_id ?? null, f.log_base ?? null, f.log_bytes ?? null, f.skill_changes ? JSON.stringify(f.skill_changes) : null, this.iso(), id, from ?? null, from ?? null).changes === 1;
    for (const w of [...(this.waiters.get(id) ?? [])]) w();
    this.waiters.delete(id);
    return changed;
  }

  /**
   * A previous hal0 left these runs behind. A running one's process group is
   * stopped when a member of it is provably the run's (the leader's pid and
   * start time as recorded, or the run's markers in a member's environment),
   * never a reused pid, nor a process of a later boot (the run's boot_id is
   * not this one: the host restarted, and the run ended with it); either way
   * the run is marked interrupted.
   */
  private async recover(): Promise<void> {
    // A trim's temp as hal0 named it before it was named as hal0's other temps (`<id>.log.tmp`): only the owner, not started yet, writes one.
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      if (/^run_[0-9a-f]+\.log\.tmp$/.test(name)) rmSync(join(this.dir, name), { force: true });
    }
    const rows = this.o.db.prepare("SELECT * FROM bridge_runs WHERE state IN ('queued', 'running') ORDER BY rowid").all() as RunRow[];
    for (const row of rows) {
      if (row.state === "queued") {
        this.end(row.id, { state: "interrupted", reason: "hal0_restart", error: "hal0 restarted before the run started" });
        continue;
      }
      // Started before the host restarted: its processes ended with that boot, and its pid and start time may name one of this boot's.
      const earlierBoot = !sameBoot(row.boot_id ?? undefined);
      let stopped = false;
      if (row.pid !== null && !earlierBoot && (await this.ownsGroup(row))) {
        stopped = true;
        killGroup(row.pid, "SIGTERM");
        const deadline = performance.now() + this.graceMs;
        while (groupExists(row.pid) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        killGroup(row.pid, "SIGKILL");
      }
      // Its output counts were kept in memory: the log's size (past the dropped head) is what there is.
      const size = (() => {
        try {
          return statSync(this.logPath(row.id)).size;
        } catch {
          return 0;
        }
      })();
      // What it did to its profile's skills/ until now: the reading its start recorded, against the folder as it is.
      const before = snapshotFromJson(row.skills_before);
      const skillChanges = before ? this.overlapping(row.id, diffSkills(before.snap, snapshotSkills(before.home))) : undefined;
      this.end(row.id, {
        state: "interrupted", reason: "hal0_restart", log_bytes: row.log_base + size, skill_changes: skillChanges,
        error: earlierBoot ? "the host restarted while the run ran; its process ended with the earlier boot"
          : stopped ? "hal0 restarted while the run ran; its process group was stopped" : "hal0 restarted while the run ran; its process had already ended",
      });
      this.tellSkillChanges(row.id, skillChanges);
    }
    this.recovered = true;
  }

  private async ownsGroup(row: RunRow): Promise<boolean> {
    const pgid = row.pid!;
    const leader = await procStat(pgid);
    if (isLive(leader) && leader.pgid === pgid && row.pid_start !== null && leader.startTime === row.pid_start) return true;
    const markers = [`HAL0_RUN_STATE=${resolve(this.o.stateDir)}`, `HAL0_RUN_ID=${row.id}`];
    for (const name of await readdir("/proc").catch(() => [] as string[])) {
      if (!/^\d+$/.test(name)) continue;
      const stat = await procStat(Number(name));
      if (!isLive(stat) || stat.pgid !== pgid) continue;
      let environ = "";
      try {
        environ = readFileSync(`/proc/${name}/environ`, "latin1");
      } catch {
        continue;
      }
      const vars = environ.split("\0");
      if (markers.every((m) => vars.includes(m))) return true;
    }
    return false;
  }
}

/** The part of a line kept until its end: at most {@link MAX_CARRY} characters, else a mark no session id line starts with. */
function carried(partial: string): string {
  return partial.length > MAX_CARRY ? LONG_LINE : partial;
}

/** How many bytes of `buf` hold whole UTF-8 characters: a character cut at its end is left for the next read. */
function wholeCharacters(buf: Buffer): number {
  let lead = buf.length - 1;
  while (lead >= 0 && buf.length - lead < 4 && (buf[lead]! & 0xc0) === 0x80) lead--;
  if (lead < 0 || buf[lead]! < 0xc0) return buf.length;
  const size = buf[lead]! >= 0xf0 ? 4 : buf[lead]! >= 0xe0 ? 3 : 2;
  return lead + size > buf.length ? lead : buf.length;
}

/** Longer than any `session_id: <id>` line Hermes prints. */
const MAX_CARRY = 4096;
const LONG_LINE = "\0";

/** Whether `path` is a folder (or a link to one). */
function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Sends `signal` to process group `pgid`; false when no such group is left. */
function killGroup(pgid: number, signal: NodeJS.Signals): boolean {
  return killQuietly(-pgid, signal);
}

function groupExists(pgid: number): boolean {
  return killQuietly(-pgid, 0);
}

