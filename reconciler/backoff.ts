/**
 * Per-resource retry schedule for the sweep. A transient failure waits
 * 1 s, 2 s, 4 s … up to 5 min before the resource is tried again; a terminal
 * one (the spec itself cannot run) waits until the resource's spec changes.
 * Level-triggered: a success, or a new spec, clears the entry.
 */
export const TERMINAL_CODES: ReadonlySet<string> = new Set(["slot.spawn_failed", "slot.image_missing"]);

const BASE_MS = 1000;
const CAP_MS = 5 * 60 * 1000;

interface Entry {
  failures: number;
  /** When the resource may be tried again; Infinity while terminal. */
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
    const retryAt = TERMINAL_CODES.has(code) ? Infinity : now + Math.min(BASE_MS * 2 ** (failures - 1), CAP_MS);
    this.entries.set(address, { failures, retryAt, specHash, code });
  }

  succeeded(address: string): void {
    this.entries.delete(address);
  }

  /** Why `address` must wait, or undefined when it may be tried now with `specHash`. */
  waiting(address: string, specHash: string, now: number): string | undefined {
    const entry = this.entries.get(address);
    if (!entry || entry.specHash !== specHash || now >= entry.retryAt) return undefined;
    return entry.retryAt === Infinity
      ? `${entry.code}: waits for its spec to change`
      : `${entry.code}: retry in ${Math.ceil((entry.retryAt - now) / 1000)} s (failure ${entry.failures})`;
  }
}
