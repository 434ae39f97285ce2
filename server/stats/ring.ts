import type { Db } from "../db.js";

/**
 * The ring of slot samples in hal0.db (`slot_samples`): one row per slot per
 * minute, holding the last scrape of that minute (the counters are
 * cumulative, so keeping only the minute's last one loses nothing between
 * minutes). Bounded on every insert: rows older than `minutes` minutes go,
 * and no slot keeps more than `minutes` rows — 24 h at 1 min by default;
 * rows after the new sample's minute (a clock set back) go too.
 */

/** 24 hours of minutes. */
export const RING_MINUTES = 1440;

/** One scrape of one slot's `/metrics`: llama-server's counters (cumulative since the runner started) and gauges. */
export interface Sample {
  readonly slot: string;
  /** ms since the epoch. */
  readonly ts: number;
  /** When the runner started (its runtime record), so a restart is told from a quiet minute. */
  readonly run: string | null;
  readonly prompt_tokens: number;
  readonly prompt_seconds: number;
  readonly predicted_tokens: number;
  readonly predicted_seconds: number;
  readonly decodes: number | null;
  readonly requests_processing: number | null;
  readonly requests_deferred: number | null;
  readonly busy_slots_per_decode: number | null;
  readonly kv_usage_ratio: number | null;
  readonly kv_tokens: number | null;
}

const COLUMNS = ["slot", "minute", "ts", "run", "prompt_tokens", "prompt_seconds", "predicted_tokens", "predicted_seconds", "decodes", "requests_processing", "requests_deferred", "busy_slots_per_decode", "kv_usage_ratio", "kv_tokens"] as const;
const SELECT = `SELECT ${COLUMNS.filter((c) => c !== "minute").join(", ")} FROM slot_samples`;

export class SampleRing {
  constructor(private readonly db: Db, readonly minutes = RING_MINUTES) {}

  /** Stores a sample as its minute's row, then prunes what falls outside the bound. */
  insert(s: Sample): void {
    const minute = Math.floor(s.ts / 60_000);
    this.db.transaction(() => {
      // Rows after this minute were taken before the clock was set back (a box that booted with its clock ahead, then
      // synced it): kept, they would be the slot's "last" samples and outlive the 24 h bound. This slot's go; another
      // slot's when they are more than the bound ahead (its own samples, inserted in their order, clear the nearer ones).
      this.db.prepare("DELETE FROM slot_samples WHERE (slot = ? AND minute > ?) OR minute > ?").run(s.slot, minute, minute + this.minutes);
      this.db.prepare(`INSERT OR REPLACE INTO slot_samples (${COLUMNS.join(", ")}) VALUES (${COLUMNS.map(() => "?").join(", ")})`)
        .run(s.slot, minute, s.ts, s.run, s.prompt_tokens, s.prompt_seconds, s.predicted_tokens, s.predicted_seconds, s.decodes, s.requests_processing, s.requests_deferred, s.busy_slots_per_decode, s.kv_usage_ratio, s.kv_tokens);
      this.db.prepare("DELETE FROM slot_samples WHERE minute <= ?").run(minute - this.minutes);
      const edge = this.db.prepare("SELECT minute FROM slot_samples WHERE slot = ? ORDER BY minute DESC LIMIT 1 OFFSET ?").get(s.slot, this.minutes) as { minute: number } | undefined;
      if (edge) this.db.prepare("DELETE FROM slot_samples WHERE slot = ? AND minute <= ?").run(s.slot, edge.minute);
    })();
  }

  /** The slot's last two samples, newest last (fewer when it has fewer). */
  lastTwo(slot: string): Sample[] {
    return (this.db.prepare(`${SELECT} WHERE slot = ? ORDER BY minute DESC LIMIT 2`).all(slot) as Sample[]).reverse();
  }

  /** Samples from `fromMs` on (and, per slot, the one before it, so the first delta is known), by slot then time. */
  since(fromMs: number, slot?: string): Sample[] {
    const minute = Math.floor(fromMs / 60_000);
    const where = slot === undefined ? "" : "slot = ? AND ";
    const args = slot === undefined ? [] : [slot];
    const before = this.db.prepare(`SELECT slot, MAX(minute) AS minute FROM slot_samples WHERE ${where}minute < ? GROUP BY slot`).all(...args, minute) as Array<{ slot: string; minute: number }>;
    const from = new Map(before.map((b) => [b.slot, b.minute]));
    const lowest = Math.min(minute, ...from.values());
    const rows = this.db.prepare(`SELECT ${COLUMNS.join(", ")} FROM slot_samples WHERE ${where}minute >= ? ORDER BY slot, minute`).all(...args, lowest) as Array<Sample & { minute: number }>;
    return rows.filter((r) => r.minute >= (from.get(r.slot) ?? minute)).map(({ minute: _m, ...r }) => r);
  }

  /** Every slot with a sample in the ring. */
  slots(): string[] {
    return (this.db.prepare("SELECT DISTINCT slot FROM slot_samples ORDER BY slot").all() as Array<{ slot: string }>).map((r) => r.slot);
  }

  count(slot: string): number {
    return (this.db.prepare("SELECT COUNT(*) AS n FROM slot_samples WHERE slot = ?").get(slot) as { n: number }).n;
  }
}

type Counter = "prompt_tokens" | "prompt_seconds" | "predicted_tokens" | "predicted_seconds";

/** Whether the runner restarted between `a` and `b`: another run, or a counter that went down. */
export function isReset(a: Sample, b: Sample): boolean {
  return a.run !== b.run || b.prompt_tokens < a.prompt_tokens || b.predicted_tokens < a.predicted_tokens || b.prompt_seconds < a.prompt_seconds || b.predicted_seconds < a.predicted_seconds;
}

/** How much a counter grew from `a` to `b`; after a restart, all of `b` (it counts from zero again). */
export function grew(a: Sample, b: Sample, key: Counter): number {
  return isReset(a, b) ? b[key] : b[key] - a[key];
}

/** Seconds between two samples; after a restart, from the new run's start when it began after `a`. */
export function windowS(a: Sample, b: Sample): number {
  const started = b.run === null ? NaN : Date.parse(b.run);
  const from = isReset(a, b) && Number.isFinite(started) && started > a.ts && started < b.ts ? started : a.ts;
  return (b.ts - from) / 1000;
}
