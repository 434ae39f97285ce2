import { basename, join } from "node:path";
import type { Sweeper, SweepReport } from "./sweep.js";
import { isTreeFileName, TREE_FOLDERS, treeFingerprint } from "./tree-cache.js";
import { watchFolders, type FolderWatch } from "./tree-watch.js";
import { longLivedAbort } from "./drivers/driver.js";
import { lockHolder } from "./lock.js";

export interface LoopOptions {
  /** Seconds between sweeps when nothing else triggers one (`[reconcile] interval_s`). */
  readonly intervalS: () => number;
  readonly root: string;
  /** `ms`: how long the sweep took (the metrics' sweep duration). */
  readonly onReport: (report: SweepReport, ms: number) => void;
  readonly onError?: (err: unknown, ms: number) => void;
  /** Quiet time after the last `.toml` change, and then the time the tree must hold still (its fingerprint unchanged), before a sweep starts. */
  readonly debounceMs?: number;
  /** How often the tree is compared with what the last sweep started from, for a change the watcher missed (default 2000). */
  readonly checkMs?: number;
}


/**
 * Runs sweeps forever: every interval, once the tree holds still after any change to a `.toml` file hal0 reads
 * (dotfiles are not; ~200 ms after the last) in the tree (`watchFolders`: node's fs.watch on the folders), and on demand.
 * Requests coalesce: at most one sweep runs, and at most one more is queued.
 *
 * A watch ends with what it watches: a folder moved away and back, made after
 * the start, or the config folder itself replaced, and a linked file whose
 * target was replaced, are not seen again by the same watcher. A resource
 * folder made, removed or replaced is an event at the top, on which the
 * folders are watched anew. For what no event tells, every
 * `checkMs` the tree's fingerprint (its `.toml` names, inodes, sizes and
 * times: a readdir per folder and a stat per file) is compared with the one
 * the last sweep started from; when they differ while no sweep is due, the
 * watcher missed a change: it is set up anew and a sweep runs.
 */
export class SweepLoop {
  private watcher?: FolderWatch;
  private timer?: NodeJS.Timeout;
  private debounce?: NodeJS.Timeout;
  private check?: NodeJS.Timeout;
  private running?: Promise<void>;
  private pending = false;
  private stopped = false;
  /** The tree's fingerprint when the last sweep started. */
  private swept?: string;
  private readonly interrupt = longLivedAbort();
  private made = 0;
  /** The tree's fingerprint at the last quiet moment, while a sweep waits for the tree to hold still (settle). */
  private settling?: string;
  /**
   * The last sweep found the apply lock held (`hal0 apply`, `hal0 down`, a slot restart): what it would have done waits
   * for that holder, not for the next interval. The check below sweeps again once the lock is free.
   */
  private blocked = false;

  constructor(private readonly sweeper: Sweeper, private readonly options: LoopOptions) {}

  start(): void {
    this.watchTree();
    this.check = setInterval(() => this.checkTree(), this.options.checkMs ?? 2000);
    this.check.unref();
    this.request();
  }

  /** How many times the watcher was set up (the start, a resource folder made or replaced, each change the check found it missed). */
  get watches(): number {
    return this.made;
  }

  /** (Re)starts the watcher on the tree's folders as they are now. */
  private watchTree(): void {
    const old = this.watcher;
    this.made++;
    // Not persistent: the loop's timers, or the server's socket, keep the process alive.
    const folders = TREE_FOLDERS.map((f) => join(this.options.root, f));
    this.watcher = watchFolders(folders, (path) => {
      if (this.stopped) return;
      if (isTreeFileName(basename(path))) this.onChange();
      // A resource folder made, removed or replaced at the top (rm -rf slots and a restore, a checkout, a link switched):
      // what watched the old one ends with it, so the folders are watched anew, and what the new one holds is swept.
      // (A watch that failed, the config folder's own included, is such an event too; the check below covers the rest.)
      else if (path !== folders[0] && folders.includes(path)) {
        this.watchTree();
        this.onChange();
      }
    }, { persistent: false });
    old?.close();
  }

  /** A change no sweep has seen, with none due: the watcher missed it. A sweep the apply lock held off: its holder is done. */
  private checkTree(): void {
    if (this.stopped || this.running || this.pending || this.debounce !== undefined) return;
    if (this.blocked) {
      void lockHolder(this.sweeper.stateDir).then((holder) => {
        if (holder !== undefined || !this.blocked || this.stopped || this.running) return;
        this.blocked = false;
        this.request();
      }, () => undefined);
      return;
    }
    if (this.swept === undefined || treeFingerprint(this.options.root) === this.swept) return;
    this.watchTree();
    this.onChange(); // swept once it holds still, as an edit the watcher saw
  }

  /** The resources backing off now, and how long each still waits. */
  backingOff(): ReturnType<Sweeper["backingOff"]> {
    return this.sweeper.backingOff();
  }

  /** A sweep now in which every resource backing off is tried again (a reload). */
  retryNow(): void {
    this.sweeper.retryNow();
    this.request();
  }

  /** Asks for a sweep now (after the one running, if any). */
  request(): void {
    if (this.stopped) return;
    if (this.running) {
      this.pending = true;
      return;
    }
    this.running = this.runOnce().finally(() => {
      this.running = undefined;
      if (this.pending) {
        this.pending = false;
        this.request();
      } else this.schedule();
    });
  }

  /**
   * Stops watching and waits for the sweep in flight, interrupted: it starts
   * no further step and stops waiting for a runner's `/health` (the runner
   * is left running for the next sweep), so a stop never waits out a slow
   * model load (`[slots] health_timeout_s`).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.debounce);
    clearInterval(this.check);
    this.interrupt.abort();
    await this.watcher?.close();
    await this.running;
  }

  private onChange(): void {
    clearTimeout(this.debounce);
    this.settling = undefined;
    this.debounce = setTimeout(() => this.settle(), this.options.debounceMs ?? 100);
  }

  /**
   * Quiet since the last event: a sweep once the tree holds still, its
   * fingerprint the same over one more quiet time. The events of a long copy
   * come in bursts with gaps, and a file `cp` made is empty until its bytes
   * follow: without this, a copy of 3000 slot files was swept ten times, each
   * sweep over a part of it, some over a file still empty.
   */
  private settle(): void {
    const now = treeFingerprint(this.options.root);
    if (now !== this.settling) {
      this.settling = now;
      this.debounce = setTimeout(() => this.settle(), this.options.debounceMs ?? 100);
      return;
    }
    this.debounce = undefined;
    this.settling = undefined;
    this.request();
  }

  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.request(), this.options.intervalS() * 1000);
  }

  private async runOnce(): Promise<void> {
    const started = performance.now();
    this.swept = treeFingerprint(this.options.root);
    try {
      const report = await this.sweeper.sweep(this.interrupt.signal);
      this.blocked = report.outcome === "locked";
      this.options.onReport(report, performance.now() - started);
    } catch (err) {
      this.blocked = false;
      this.options.onError?.(err, performance.now() - started);
    }
  }
}

/** What the sweep loop service reports (`service_list`): whether it runs, since when, its last sweep and error. */
export interface LoopState {
  readonly state: "running" | "stopped" | "not_running";
  /** When the loop (re)started; absent when it never ran in this process. */
  readonly since?: string;
  readonly restarts: number;
  readonly sweeps: number;
  readonly last_sweep?: { readonly at: string; readonly outcome: SweepReport["outcome"] };
  readonly last_error?: { readonly message: string; readonly at: string };
}

/**
 * The sweep loop as a service of `hal0 serve`: one handle the server's
 * routes hold (service_list, service_action restart) while serve.ts owns
 * the loop's making. A server without a loop (tests, `--no-reconcile`)
 * holds a handle nothing was attached to: `not_running`, and no restart.
 */
export class LoopControl {
  private make?: () => SweepLoop;
  private loop?: SweepLoop;
  private since?: string;
  private restarts = 0;
  private sweeps = 0;
  private lastSweep?: LoopState["last_sweep"];
  private lastError?: LoopState["last_error"];
  private restarting?: Promise<void>;

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Starts the loop `make(observe)` builds; the loop must hand each report
   * and error to `observe` (its onReport / onError), so the handle knows when
   * a sweep ran and how the last one failed.
   */
  attach(make: (observe: { report: (r: SweepReport) => void; error: (err: unknown) => void }) => SweepLoop): void {
    const observe = {
      report: (r: SweepReport) => {
        this.sweeps++;
        this.lastSweep = { at: r.at, outcome: r.outcome };
        if (r.outcome === "failed") this.lastError = { message: `sweep failed: ${r.results.filter((x) => !x.ok).map((x) => `${x.address}: ${x.error ?? x.code ?? "failed"}`).join("; ") || "a step failed"}`, at: r.at };
      },
      error: (err: unknown) => {
        const at = new Date(this.now()).toISOString();
        const code = (err as { code?: unknown } | null)?.code;
        const message = (err as Error)?.message ?? String(err);
        // A sweep that threw (its config folder gone or emptied: config.not_found, config.empty; the engine away) ran and
        // failed: the loop's state and health say so, not the outcome of the last sweep that got through.
        this.sweeps++;
        this.lastSweep = { at, outcome: "failed" };
        this.lastError = { message: typeof code === "string" && /^[a-z_]+\.[a-z_]+$/.test(code) ? `${code}: ${message}` : message, at };
      },
    };
    this.make = () => make(observe);
    this.begin();
  }

  get attached(): boolean {
    return this.make !== undefined;
  }

  /** A sweep now (after the running one); nothing when no loop runs. */
  request(): void {
    this.loop?.request();
  }

  /** The resources backing off now (none when no loop runs). */
  backingOff(): ReturnType<Sweeper["backingOff"]> {
    return this.loop?.backingOff() ?? [];
  }

  /** A sweep now that tries every resource backing off again (a reload); nothing when no loop runs. */
  retryNow(): void {
    this.loop?.retryNow();
  }

  /** Stops the loop (the sweep in flight finishes) and starts a new one, which sweeps at once. */
  async restart(): Promise<void> {
    if (!this.make) throw new Error("no sweep loop runs in this process");
    this.restarting ??= (async () => {
      await this.loop?.stop();
      this.loop = undefined;
      this.restarts++;
      this.begin();
    })().finally(() => (this.restarting = undefined));
    return this.restarting;
  }

  async stop(): Promise<void> {
    const loop = this.loop;
    this.loop = undefined;
    this.make = undefined;
    await loop?.stop();
  }

  status(): LoopState {
    const state = this.loop ? "running" : this.since === undefined ? "not_running" : "stopped";
    return { state, since: this.since, restarts: this.restarts, sweeps: this.sweeps, last_sweep: this.lastSweep, last_error: this.lastError };
  }

  private begin(): void {
    this.loop = this.make!();
    this.since = new Date(this.now()).toISOString();
    this.loop.start();
  }
}
