/**
 * Per-resource retry schedule for the sweep. A transient failure waits
 * 1 s, 2 s, 4 s … up to 5 min before the resource is tried again. A failure
 * that something must be fixed for (the runner is not installed, the model
 * file is missing, the image is not there: the spec cannot run on this host
 * as it is) waits 30 s, 1 min, 2 min … up to the same 5 min: the fix may be
 * the spec's (a new spec is tried at once) or the host's (a runner installed,
 * an image pulled by hand), which hal0 cannot see, so it looks again now and
 * then, and at once on a reload (`clear`: SIGHUP, POST /api/settings/reload).
 * Level-triggered: a success, or a new spec, clears the entry.
 */
export const NEEDS_FIX_CODES: ReadonlySet<string> = new Set(["slot.spawn_failed", "slot.image_missing"]);

/**
 * A runner that dies within this long of becoming ready crashed: its restart
 * counts (SlotOutcome.restarts), and each further restart waits longer —
 * 10 s, 20 s, 40 s … up to 5 min — as a start that fails does. Running this
 * long ends the count (as Kubernetes' CrashLoopBackOff does after 10 min).
 */
export const CRASH_WINDOW_MS = 10 * 60 * 1000;
const CRASH_BASE_MS = 10_000;

/** The wait before the next restart of a slot that crashed `restarts` times in a row. */
export function crashDelayMs(restarts: number): number {
  return Math.min(CRASH_BASE_MS * 2 ** (Math.max(restarts, 1) - 1), CAP_MS);
}

const BASE_MS = 1000;
const NEEDS_FIX_BASE_MS = 30_000;
const CAP_MS = 5 * 60 * 1000;

interface Entry {
  failures: number;
  /** When the resource may be tried again, on the backoff's clock. */
  retryAt: number;
  /** The spec the failure happened with: a different one retries at once. */
  specHash: string;
  code: string;
}

/**
 * The clock a backoff runs on unless told otherwise: the monotonic one. A
 * backoff lives only in this process, so it measures elapsed time, never the
 * time of day: NTP (or a person's `date -s`) stepping the clock back a day
 * does not hold a crashed slot down for a day, nor does a step forward
 * retry every failing resource at once.
 */
export const monotonicMs = (): number => performance.now();

export class Backoff {
  private readonly entries = new Map<string, Entry>();

  /** `clock`: elapsed milliseconds (the monotonic clock; a test's virtual clock). */
  constructor(private readonly clock: () => number = monotonicMs) {}

  /** Records a failed step of `address` with `specHash`, now. */
  failed(address: string, specHash: string, code: string): void {
    const previous = this.entries.get(address);
    const failures = previous && previous.specHash === specHash ? previous.failures + 1 : 1;
    const base = NEEDS_FIX_CODES.has(code) ? NEEDS_FIX_BASE_MS : BASE_MS;
    this.entries.set(address, { failures, retryAt: this.clock() + Math.min(base * 2 ** (failures - 1), CAP_MS), specHash, code });
  }

  succeeded(address: string): void {
    this.entries.delete(address);
  }

  /**
   * `address` was started again after it died within CRASH_WINDOW_MS of its
   * last start, the `restarts`th time in a row: it runs now, and if it dies
   * again its restart waits crashDelayMs(restarts) from now.
   */
  crashed(address: string, specHash: string, restarts: number): void {
    this.entries.set(address, { failures: restarts, retryAt: this.clock() + crashDelayMs(restarts), specHash, code: "slot.crash_loop" });
  }

  /** Every resource may be tried at once (a person says the host was fixed: a reload). */
  clear(): void {
    this.entries.clear();
  }

  /** The resources still backing off, each with the code it failed with and how long it still waits. */
  pending(): Array<{ address: string; code: string; failures: number; waitMs: number }> {
    const now = this.clock();
    return [...this.entries].filter(([, e]) => now < e.retryAt).map(([address, e]) => ({ address, code: e.code, failures: e.failures, waitMs: e.retryAt - now }));
  }

  /** Why `address` must wait, or undefined when it may be tried now with `specHash`. */
  waiting(address: string, specHash: string): string | undefined {
    const entry = this.entries.get(address);
    const now = this.clock();
    if (!entry || entry.specHash !== specHash || now >= entry.retryAt) return undefined;
    const wait = `retry in ${Math.ceil((entry.retryAt - now) / 1000)} s (${entry.code === "slot.crash_loop" ? "restart" : "failure"} ${entry.failures})`;
    return NEEDS_FIX_CODES.has(entry.code) ? `${entry.code}: ${wait}, or at once when its spec changes or on a reload` : `${entry.code}: ${wait}`;
  }
}
