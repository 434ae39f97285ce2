import { watch, type FSWatcher } from "chokidar";
import { join } from "node:path";
import type { Sweeper, SweepReport } from "./sweep.js";
import { TREE_FOLDERS } from "./tree-cache.js";

export interface LoopOptions {
  /** Seconds between sweeps when nothing else triggers one (`[reconcile] interval_s`). */
  readonly intervalS: () => number;
  readonly root: string;
  /** `ms`: how long the sweep took (the metrics' sweep duration). */
  readonly onReport: (report: SweepReport, ms: number) => void;
  readonly onError?: (err: unknown, ms: number) => void;
  /** Quiet time after the last `.toml` change before a sweep starts. */
  readonly debounceMs?: number;
}


/**
 * Runs sweeps forever: every interval, ~100 ms after any `.toml` change in
 * the tree (chokidar 4 on the folders; it takes no globs), and on demand.
 * Requests coalesce: at most one sweep runs, and at most one more is queued.
 */
export class SweepLoop {
  private watcher?: FSWatcher;
  private timer?: NodeJS.Timeout;
  private debounce?: NodeJS.Timeout;
  private running?: Promise<void>;
  private pending = false;
  private stopped = false;

  constructor(private readonly sweeper: Sweeper, private readonly options: LoopOptions) {}

  start(): void {
    const folders = TREE_FOLDERS.map((f) => join(this.options.root, f));
    this.watcher = watch(folders, { ignoreInitial: true, depth: 0 });
    this.watcher.on("all", (_event, path) => {
      if (path.endsWith(".toml")) this.onChange();
    });
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

  /** Stops watching and waits for the sweep in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.debounce);
    await this.watcher?.close();
    await this.running;
  }

  private onChange(): void {
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => this.request(), this.options.debounceMs ?? 100);
  }

  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.request(), this.options.intervalS() * 1000);
  }

  private async runOnce(): Promise<void> {
    const started = performance.now();
    try {
      const report = await this.sweeper.sweep();
      this.options.onReport(report, performance.now() - started);
    } catch (err) {
      this.options.onError?.(err, performance.now() - started);
    }
  }
}
