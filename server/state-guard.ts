import { linkSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { slotsDir } from "../reconciler/drivers/runtime-record.js";
import type { DbFile } from "../memory/sqlite.js";
import { ApiError } from "./errors.js";

/** How often `hal0 serve` (and the `hal0 reconcile` loop) looks at its state folder (default). */
export const STATE_CHECK_MS = 1000;

/** The files that say what hal0 started and applied (a runner hal0 down must find): the inventory, the applied settings, Hermes' record, each slot's runtime record. */
function recordFiles(stateDir: string): string[] {
  const slots = slotsDir(stateDir);
  let names: string[] = [];
  try {
    names = readdirSync(slots, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    // no slot records yet
  }
  return [join(stateDir, "inventory.json"), join(stateDir, "applied-settings.json"), join(stateDir, "hermes-managed.json"), ...names.map((n) => join(slots, n, "runtime.json"))];
}

/**
 * Watches the state folder of a running `hal0 serve` (or `hal0 reconcile`
 * loop, with `program` and `lockFile` set: it holds no database). While it is there, the
 * records of what hal0 started are held in memory as last read. When the
 * folder is gone (removed, moved away, or replaced by another) the server cannot go on: its
 * database, tokens and locks went with it. The guard logs one coded line
 * (`state.folder_gone`), puts the records back in a new folder (0700) so
 * that `hal0 status` and `hal0 down` still find the runners, and calls
 * `onLost` once; serve then stops.
 *
 * The folder's `serve.lock` is the server's own as long as it runs: one
 * removed by hand is written again at once (logged), so a second `hal0
 * serve` started on the folder still finds it and refuses
 * (`server.already_running`); one that names another process (a second
 * server that took the folder in between) is `server.lock_lost`, and this
 * one stops.
 */
/** What the guard logs through: pino's logger, or a line writer of the same shape. */
export interface GuardLogger {
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** Who runs on the folder: the program messages name and the lock file it holds there. */
export interface GuardHolder {
  readonly program: "hal0 serve" | "hal0 reconcile";
  readonly lockFile: "serve.lock" | "reconcile.lock";
}

const SERVE: GuardHolder = { program: "hal0 serve", lockFile: "serve.lock" };

export class StateGuard {
  private readonly held = new Map<string, string>();
  private timer?: NodeJS.Timeout;
  private lost = false;
  /** The folder's identity when first seen: one made anew since (a write's mkdir after a removal) is not the server's folder. */
  private identity?: string;
  /** hal0.db was not the server's at the last look: a second look decides. */
  private databaseMissed = false;
  /** This process's lock file as last read (its pid, start time, URL). */
  private lock?: string;

  /** `database`: hal0.db as the server's handle opened it (the file it writes); without it hal0.db is not watched. */
  constructor(private readonly stateDir: string, private readonly logger: GuardLogger, private readonly onLost: (err: ApiError) => void, private readonly database?: DbFile, private readonly holder: GuardHolder = SERVE) {}

  start(everyMs = STATE_CHECK_MS): void {
    this.check();
    this.timer = setInterval(() => this.check(), everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** One look: the records read again, or the loss handled. */
  check(): void {
    if (this.lost) return;
    const s = statSync(this.stateDir, { throwIfNoEntry: false });
    if (s === undefined || !s.isDirectory()) return this.folderGone();
    const identity = `${s.dev}:${s.ino}`;
    this.identity ??= identity;
    if (identity !== this.identity) return this.folderGone();
    // hal0.db first: while a removal of the whole folder is under way it goes before the folder, so a missing one is judged
    // at the next look, when the folder is gone too (state.folder_gone, with the records held before) or not (state.database_gone).
    if (!this.checkDatabase()) return;
    const seen = new Map<string, string>();
    for (const file of recordFiles(this.stateDir)) {
      try {
        seen.set(file, readFileSync(file, "utf8"));
      } catch {
        // absent (none yet, or removed by a stop), or unreadable now: not held
      }
    }
    // Read while the folder still stood: a folder removed between the stat and the reads keeps what was held before.
    const after = statSync(this.stateDir, { throwIfNoEntry: false });
    if (after === undefined || `${after.dev}:${after.ino}` !== this.identity) return this.folderGone();
    this.held.clear();
    for (const [file, text] of seen) this.held.set(file, text);
    this.checkLock();
  }

  /** hal0.db removed or replaced (moved over, restored from a backup by a rename): what the server writes from now on would be lost. False while it is not the server's (the loss is said at the second look). */
  private checkDatabase(): boolean {
    const state = this.database?.state() ?? "same";
    if (state === "same") {
      this.databaseMissed = false;
      return true;
    }
    if (!this.databaseMissed) {
      this.databaseMissed = true;
      return false;
    }
    this.lost = true;
    this.stop();
    const file = this.database!.path;
    const what = state === "removed" ? "was removed" : "was replaced by another file";
    const err = new ApiError("state.database_gone", `${file} ${what} while hal0 serve ran: the server's open database is no longer that file, so what it records from now on (approvals, audit, tokens, sessions) would be lost or go to the wrong file; hal0 serve stops (its runners are left running); start it again to open ${state === "removed" ? "a new database" : "the file now there"}`, { database: file });
    this.logger.error({ code: err.code, message: err.message }, "hal0.db gone");
    this.onLost(err);
    return false;
  }

  private checkLock(): void {
    const { program, lockFile } = this.holder;
    const path = join(this.stateDir, lockFile);
    let text: string | undefined;
    try {
      text = readFileSync(path, "utf8");
    } catch {
      // removed by hand (or unreadable): written again below
    }
    if (text !== undefined) {
      let pid: unknown;
      try {
        pid = (JSON.parse(text) as { pid?: unknown } | null)?.pid;
      } catch {
        // half a file or another writer's: taken as not ours only when it names another pid
      }
      if (typeof pid === "number" && pid !== process.pid) return this.lockLost(path, pid);
      if (pid === process.pid) this.lock = text;
      return;
    }
    if (this.lock === undefined) return;
    // Written whole to a temp and linked into place, as the lock is taken: a reader never finds it empty; one made in between wins.
    const tmp = join(this.stateDir, `.${lockFile}.${process.pid}.guard.hal0.tmp`);
    try {
      writeFileSync(tmp, this.lock, { mode: 0o644 });
      linkSync(tmp, path);
      this.logger.warn({ code: "server.lock_restored", lock: path }, `${lockFile} was removed while ${program} runs: written again, so no second ${program} starts on this state folder`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") this.logger.error({ errno: (err as NodeJS.ErrnoException).code, message: (err as Error).message, lock: path }, `${lockFile} was removed and could not be written again`);
    } finally {
      rmSync(tmp, { force: true });
    }
  }

  private lockLost(path: string, pid: number): void {
    this.lost = true;
    this.stop();
    const { program, lockFile } = this.holder;
    const err = new ApiError("server.lock_lost", `${path} now names another process (pid ${pid}), not this ${program} (pid ${process.pid}): another ${program} took the state folder after its lock was removed; this one stops so the two do not both write it`, { lock: path, holder_pid: pid });
    this.logger.error({ code: err.code, message: err.message }, `${lockFile} lost`);
    this.onLost(err);
  }

  private folderGone(): void {
    this.lost = true;
    this.stop();
    const restored: string[] = [];
    try {
      mkdirSync(this.stateDir, { recursive: true, mode: 0o700 });
      for (const [file, text] of this.held) {
        mkdirSync(join(file, ".."), { recursive: true, mode: 0o700 });
        try {
          writeFileSync(file, text, { mode: 0o600, flag: "wx" });
          restored.push(file);
        } catch (err) {
          // One already there (the folder put back by hand, or a write that made it anew) is left as it is.
          if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
        }
      }
    } catch (err) {
      this.logger.error({ code: "state.folder_gone", errno: (err as NodeJS.ErrnoException).code, message: (err as Error).message }, "the state folder's records could not be put back");
    }
    const runners = restored.length === 0 ? "it had started no runner" : `its record of the runners it started is put back there (${restored.length} file${restored.length === 1 ? "" : "s"}), so hal0 status and hal0 down still find them`;
    const { program } = this.holder;
    const lostWhat = program === "hal0 serve" ? "its database, tokens and locks went with it" : "its records and locks went with it";
    const again = program === "hal0 serve" ? "start hal0 serve again to go on with a new database and operator token" : "start hal0 reconcile again to go on";
    const err = new ApiError("state.folder_gone", `the state folder ${this.stateDir} was removed while ${program} ran: ${lostWhat}, so ${program} stops (its runners are left running); ${runners}; ${again}`, { state: this.stateDir, restored });
    this.logger.error({ code: err.code, message: err.message, restored }, "state folder gone");
    this.onLost(err);
  }
}
