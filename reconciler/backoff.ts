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

const BASE_MS = 1000;
const NEEDS_FIX_BASE_MS = 30_000;
const CAP_MS = 5 * 60 * 1000;

interface Entry {
  failures: number;
  /** When the resource may be tried again. */
  retryAt: number;
  /** The spec the failure happened with: a different one retries at once. */
  specHash: string;
  code: string;
}

export class Backoff {
  private readonly entries = new Map<string, Entry>();

  /** Records a failed step of `address` with `specHash`, at `now`. */
  failed(address: string, specHash: string, code: string, now: number): void {
    const previous = this.entries.get(address);
    const failures = previous && previous.specHash === specHash ? previous.failures + 1 : 1;
    const base = NEEDS_FIX_CODES.has(code) ? NEEDS_FIX_BASE_MS : BASE_MS;
    this.entries.set(address, { failures, retryAt: now + Math.min(base * 2 ** (failures - 1), CAP_MS), specHash, code });
  }

  succeeded(address: string): void {
    this.entries.delete(address);
  }

  /** Every resource may be tried at once (a person says the host was fixed: a reload). */
  clear(): void {
    this.entries.clear();
  }

  /** Why `address` must wait, or undefined when it may be tried now with `specHash`. */
  waiting(address: string, specHash: string, now: number): string | undefined {
    const entry = this.entries.get(address);
    if (!entry || entry.specHash !== specHash || now >= entry.retryAt) return undefined;
    const wait = `retry in ${Math.ceil((entry.retryAt - now) / 1000)} s (failure ${entry.failures})`;
    return NEEDS_FIX_CODES.has(entry.code) ? `${entry.code}: ${wait}, or at once when its spec changes or on a reload` : `${entry.code}: ${wait}`;
  }
}
