import { grew, isReset, windowS, type Sample, type SampleRing } from "./ring.js";
import { notLlama, type SlotStats } from "./scraper.js";
import { LLAMA_SERVER_TYPES } from "../../reconciler/drivers/runner-secrets.js";

/**
 * What the stats routes answer, computed from the ring: tokens/s from the
 * growth of llama-server's counters between samples (a restart starts them
 * from zero, so its sample counts whole), never from its own average gauges.
 */

type Absent = { readonly available: false; readonly reason: string };
const round = (n: number, digits = 3): number => Math.round(n * 10 ** digits) / 10 ** digits;
const per = (n: number, s: number): number | null => (s > 0 ? round(n / s) : null);

/** One side (prompt or generation) of a window between two samples. */
function side(a: Sample | undefined, b: Sample, tokens: "prompt_tokens" | "predicted_tokens", seconds: "prompt_seconds" | "predicted_seconds") {
  if (!a) return { tokens_total: b[tokens], tokens: null, tokens_per_s: null, processing_tokens_per_s: null };
  const n = grew(a, b, tokens);
  return { tokens_total: b[tokens], tokens: n, tokens_per_s: per(n, windowS(a, b)), processing_tokens_per_s: per(n, grew(a, b, seconds)) };
}

export interface SlotLine {
  readonly name: string;
  readonly type: string;
  readonly status: string;
}

/**
 * `slot_stats` for one slot: over the last sample window (the last scrape and
 * the one before it, a minute apart at the default interval) the tokens and
 * tokens/s of prompt and generation — per wall-clock second and per second
 * the runner spent on them —, the request gauges, the KV use when the build
 * exports it, and when it was scraped. Unavailable (with the reason) when it
 * does not run, is not llama-server, or its runner has no `--metrics`.
 */
export function slotStatsOf(stats: SlotStats, slot: SlotLine) {
  const [a, b] = pair(stats.ring.lastTwo(slot.name));
  const last_scraped_at = b ? new Date(b.ts).toISOString() : null;
  const absent = (reason: string) => ({ name: slot.name, status: slot.status, available: false as const, reason, last_scraped_at });
  if (slot.status !== "running") return absent(`not running (${slot.status})`);
  if (!LLAMA_SERVER_TYPES.has(slot.type)) return absent(notLlama(slot.type));
  const outcome = stats.outcome(slot.name);
  if (outcome && !outcome.ok) return { ...absent(outcome.reason), last_attempt_at: outcome.at };
  if (!b) return absent(`not scraped yet: hal0 scrapes running slots ${stats.intervalS ? `every ${stats.intervalS} s` : "when asked (no timer runs in this process)"}`);
  return {
    name: slot.name, status: slot.status, available: true as const,
    scraped_at: last_scraped_at!,
    window_s: a ? round(windowS(a, b)) : null,
    restarted: a ? isReset(a, b) : null,
    prompt: side(a, b, "prompt_tokens", "prompt_seconds"),
    generation: side(a, b, "predicted_tokens", "predicted_seconds"),
    requests: { processing: b.requests_processing, deferred: b.requests_deferred },
    decodes_total: b.decodes,
    busy_slots_per_decode: b.busy_slots_per_decode,
    kv: b.kv_usage_ratio === null && b.kv_tokens === null
      ? ({ available: false, reason: "this llama-server build exports no KV cache metrics (kv_cache_usage_ratio, kv_cache_tokens)" } satisfies Absent)
      : { available: true as const, usage_ratio: b.kv_usage_ratio, tokens: b.kv_tokens },
  };
}

/** `slot_stats` for a slot whose state cannot be known (the runtime does not answer): unavailable, with why, and when it was last scraped. */
export function slotStatsUnknown(stats: SlotStats, name: string, reason: string) {
  const last = stats.ring.lastTwo(name).at(-1);
  return { name, status: "unknown", available: false as const, reason, last_scraped_at: last ? new Date(last.ts).toISOString() : null };
}

function pair(rows: Sample[]): [Sample | undefined, Sample | undefined] {
  return rows.length >= 2 ? [rows[0], rows[1]] : [undefined, rows[0]];
}

export interface Point {
  /** The bucket's start. */
  readonly t: string;
  readonly prompt_tokens: number | null;
  readonly generated_tokens: number | null;
  readonly prompt_tokens_per_s: number | null;
  readonly generated_tokens_per_s: number | null;
}

/**
 * Buckets of `stepS` seconds from `fromMs` (aligned down to a multiple of the
 * step) to `toMs`: per slot, the tokens its counters grew by in each bucket
 * (each sample's growth since the one before goes to the sample's bucket)
 * and tokens/s over the time those samples cover. A bucket with no sample is
 * null, not zero: nothing was measured there. `total` adds the slots up.
 */
export function throughputHistory(ring: SampleRing, fromMs: number, toMs: number, stepS: number, slot?: string) {
  const step = stepS * 1000;
  const start = Math.floor(fromMs / step) * step;
  const n = Math.max(1, Math.ceil((toMs - start) / step));
  type Acc = { prompt: number; generated: number; seconds: number };
  const bySlot = new Map<string, Array<Acc | null>>();
  const rows = ring.since(start, slot);
  for (let i = 1; i < rows.length; i++) {
    const [a, b] = [rows[i - 1]!, rows[i]!];
    if (a.slot !== b.slot || b.ts < start || b.ts >= start + n * step) continue;
    const buckets = bySlot.get(b.slot) ?? new Array<Acc | null>(n).fill(null);
    bySlot.set(b.slot, buckets);
    const k = Math.floor((b.ts - start) / step);
    const acc = (buckets[k] ??= { prompt: 0, generated: 0, seconds: 0 });
    acc.prompt += grew(a, b, "prompt_tokens");
    acc.generated += grew(a, b, "predicted_tokens");
    acc.seconds += windowS(a, b);
  }
  const point = (k: number, acc: Acc | null): Point => ({
    t: new Date(start + k * step).toISOString(),
    prompt_tokens: acc ? acc.prompt : null, generated_tokens: acc ? acc.generated : null,
    prompt_tokens_per_s: acc ? per(acc.prompt, acc.seconds) : null, generated_tokens_per_s: acc ? per(acc.generated, acc.seconds) : null,
  });
  const slots = [...bySlot.entries()].sort(([x], [y]) => (x < y ? -1 : 1)).map(([name, buckets]) => ({ slot: name, points: buckets.map((acc, k) => point(k, acc)) }));
  const total = Array.from({ length: n }, (_, k) => {
    const here = [...bySlot.values()].map((b) => b[k]).filter((acc): acc is Acc => acc !== null);
    return point(k, here.length === 0 ? null : here.reduce((s, acc) => ({ prompt: s.prompt + acc.prompt, generated: s.generated + acc.generated, seconds: Math.max(s.seconds, acc.seconds) }), { prompt: 0, generated: 0, seconds: 0 }));
  });
  return { since: new Date(start).toISOString(), until: new Date(toMs).toISOString(), step_s: stepS, slots, total };
}
