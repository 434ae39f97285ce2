import type { ObserveOptions } from "./drivers/driver.js";
import type { ObservedSlot, SlotHealth } from "./observed.js";

/**
 * Every running slot's `/health` is probed at least this often by the sweep.
 * A runner that is alive but stops answering is therefore reported non-Ready
 * by the first sweep that starts this long after the last full probe: within
 * FULL_PROBE_MS + `[reconcile] interval_s` at worst (with the default 120 s
 * interval every timed sweep probes in full; sweeps triggered by edits or on
 * demand in between reuse the answers).
 */
export const FULL_PROBE_MS = 30_000;

interface Probed {
  /** Who answered: the runtime's record of the runner (pid, start, spec). */
  readonly key: string;
  readonly health: SlotHealth;
  readonly detail?: string;
}

/**
 * The sweep's memory of health answers, so an idle sweep need not probe 50
 * runners to refresh conditions it already has. A slot is probed again when
 * its runner is not the one that answered (another pid, start time or spec),
 * when its last answer was not 200, or when the last full probe is older than
 * FULL_PROBE_MS. Liveness is never cached: the runtime's list (or /proc) is
 * read every sweep, so a runner that exits or a container that is removed is
 * seen at once.
 */
export class HealthCache {
  private answers = new Map<string, Probed>();
  private lastFull = Number.NEGATIVE_INFINITY;

  constructor(private readonly fullEveryMs = FULL_PROBE_MS) {}

  /** Forgets every answer (after an apply step moved runners). */
  clear(): void {
    this.answers.clear();
    this.lastFull = Number.NEGATIVE_INFINITY;
  }

  /** The observe options of a sweep at `now` (elapsed time: the monotonic clock, so a step of the wall clock neither keeps an old answer for as long nor drops every one), and how to fill in the slots it did not probe. */
  begin(now: number): { options: ObserveOptions; finish: (slots: readonly ObservedSlot[]) => ObservedSlot[] } {
    const full = now - this.lastFull >= this.fullEveryMs;
    const probe = (slot: Pick<ObservedSlot, "name" | "record">): boolean => {
      const known = this.answers.get(slot.name);
      return full || known === undefined || known.health !== "ok" || known.key !== keyOf(slot);
    };
    const finish = (slots: readonly ObservedSlot[]): ObservedSlot[] => {
      if (full) this.lastFull = now;
      const next = new Map<string, Probed>();
      const out = slots.map((slot) => {
        if (!slot.running) return slot;
        const known = this.answers.get(slot.name);
        // A probe never answers "unknown": unknown means the driver skipped it as `probe` said.
        if (slot.health !== "unknown" || known === undefined) {
          if (slot.health !== "unknown") next.set(slot.name, { key: keyOf(slot), health: slot.health, ...(slot.detail === undefined ? {} : { detail: slot.detail }) });
          return slot;
        }
        next.set(slot.name, known);
        return { ...slot, health: known.health, ...(known.detail === undefined ? {} : { detail: known.detail }) };
      });
      this.answers = next;
      return out;
    };
    return { options: { probe }, finish };
  }
}

function keyOf(slot: Pick<ObservedSlot, "record">): string {
  const r = slot.record;
  return r === undefined ? "" : `${r.pid ?? ""}|${r.started_at}|${r.view.spec_hash}`;
}
