import { z } from "zod";
import { hardwareSnapshot, powerStats, systemStats } from "../../reconciler/host/system-stats.js";
import type { BoxService } from "../box.js";
import type { Dispatcher } from "../dispatch.js";
import { ApiError, apiErrorOf } from "../errors.js";
import { storeDir } from "../pulls/service.js";
import { defineRoute } from "../route.js";
import { roster, slotNotFound } from "../slot-view.js";
import type { SlotStats } from "../stats/scraper.js";
import { slotStatsOf, slotStatsUnknown, throughputHistory } from "../stats/views.js";
import { isoTimeMs, queryInt } from "../query.js";

/**
 * Seed 001's stats tools (all autonomous reads): the slots' tokens/s from the
 * scraper's ring (server/stats/), their throughput history, and the host's
 * figures (reconciler/host/system-stats.ts) read through the stats service's
 * one root for /proc and /sys.
 */

/** Most buckets one history answers (a day of minutes); ask with a larger step for longer spans. */
const MAX_BUCKETS = 1440;

function statsOf(d: Dispatcher): SlotStats {
  if (!d.stats) throw new ApiError("system.internal", "slot stats are not served by this process");
  return d.stats;
}

async function slotStats(box: BoxService, stats: SlotStats) {
  const model = await box.model();
  let slots: Awaited<ReturnType<typeof roster>>;
  try {
    slots = await roster(box, model);
  } catch (err) {
    const refusal = apiErrorOf(err);
    if (!(refusal instanceof ApiError) || refusal.code !== "runtime.unavailable") throw refusal;
    // The runtime does not answer (the docker engine is down): each slot is unavailable with the reason, never the reply
    // (stats_overview's host figures are what an operator looks at then).
    return Object.keys(model.slots).sort().map((name) => slotStatsUnknown(stats, name, `the runtime does not answer: ${refusal.message}`));
  }
  return slots.map((s) => slotStatsOf(stats, s));
}

async function system(box: BoxService, stats: SlotStats) {
  const model = await box.model().catch(() => undefined);
  const { stats: out, cpu } = await systemStats(stats.hostRoot, model ? storeDir(model) : null, stats.cpuReading, box.now());
  stats.keepCpu(cpu);
  return out;
}

/** `since`: an ISO time, or seconds before now. */
const Since = z.string().trim().min(1).max(64).refine((v) => /^\d+(\.\d+)?$/.test(v) || isoTimeMs(v) !== undefined, "an ISO time (2026-12-02T14:00:00Z) or a number of seconds before now");

const History = z.strictObject({
  since: Since.default("3600"),
  step: queryInt(60, 86_400, 60),
  slot: z.string().min(1).max(64).optional(),
});

function sinceMs(since: string, now: number): number {
  return /^\d+(\.\d+)?$/.test(since) ? now - Number(since) * 1000 : isoTimeMs(since)!;
}

export const statsRoutes = [
  defineRoute({
    method: "GET", path: "/api/stats/slots", kind: "read", tools: ["slot_stats"],
    summary: "Per slot, over the last scrape window: prompt and generation tokens/s, request gauges, KV use where exported, last scrape time; {available: false, reason} for a slot not scraped",
    handle: async ({ box, services }) => {
      const stats = statsOf(services);
      const slots = await slotStats(box, stats);
      return { slots, count: slots.length, scrape_interval_s: stats.intervalS ?? null };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/stats/throughput/history", kind: "read", query: History, tools: ["throughput_history"],
    summary: "Tokens and tokens/s per slot and in total, bucketed by `step` seconds (≥ 60) since `since` (ISO time or seconds ago, default 3600), from the 24 h ring; ?slot= for one slot",
    handle: async ({ box, services, query }) => {
      const stats = statsOf(services);
      const now = box.now();
      const from = sinceMs(query.since, now);
      const fields = (msg: string) => new ApiError("validation.invalid", `invalid request: query.since: ${msg}`, { fields: [{ loc: ["query", "since"], msg, type: "custom" }] });
      if (from > now) throw fields("is in the future");
      const buckets = Math.ceil((now - Math.floor(from / (query.step * 1000)) * query.step * 1000) / (query.step * 1000));
      if (buckets > MAX_BUCKETS) throw fields(`spans ${buckets} steps of ${query.step} s; at most ${MAX_BUCKETS}: ask with a larger step`);
      if (query.slot !== undefined) {
        const known = new Set([...Object.keys((await box.model()).slots), ...stats.ring.slots()]);
        if (!known.has(query.slot)) throw slotNotFound(query.slot, [...known]);
      }
      return throughputHistory(stats.ring, from, now, query.step, query.slot);
    },
  }),
  defineRoute({
    method: "GET", path: "/api/system-stats", kind: "read", tools: ["system_stats"],
    summary: "CPU use (since boot and since the last reading), memory, load, uptime, and the model store's disk, from /proc and statfs",
    handle: async ({ box, services }) => system(box, statsOf(services)),
  }),
  defineRoute({
    method: "GET", path: "/api/hardware", kind: "read", tools: ["hardware_snapshot"],
    summary: "The box's hardware: kernel, container, CPU, RAM, GPUs and their gfx targets, NPU, temperatures, and whether power can be read",
    handle: async ({ box, services }) => hardwareSnapshot(statsOf(services).hostRoot, process.env, box.now()),
  }),
  defineRoute({
    method: "GET", path: "/api/stats/power", kind: "read", tools: ["power_stats"],
    summary: "Power per hwmon device in watts (power*_average, else power*_input), or {available: false, reason} where the kernel has none",
    handle: async ({ services }) => powerStats(statsOf(services).hostRoot),
  }),
  defineRoute({
    method: "GET", path: "/api/stats", kind: "read", tools: ["stats_overview"],
    summary: "One summary: the system's figures, slots by status with their summed tokens/s, and the last hour's throughput",
    handle: async ({ box, services }) => {
      const stats = statsOf(services);
      const [sys, slots] = await Promise.all([system(box, stats), slotStats(box, stats)]);
      const now = box.now();
      const hour = throughputHistory(stats.ring, now - 3_600_000, now, 60);
      const sum = (pick: (s: (typeof slots)[number] & { available: true }) => number | null) =>
        Math.round(slots.filter((s): s is (typeof slots)[number] & { available: true } => s.available).reduce((t, s) => t + (pick(s) ?? 0), 0) * 1000) / 1000;
      const by_status: Record<string, number> = { running: 0, stopped: 0, disabled: 0 };
      for (const s of slots) by_status[s.status] = (by_status[s.status] ?? 0) + 1;
      const tokens = (key: "prompt_tokens" | "generated_tokens") => hour.total.reduce((t, p) => t + (p[key] ?? 0), 0);
      return {
        at: new Date(now).toISOString(),
        system: sys,
        slots: {
          count: slots.length, by_status, scraped: slots.filter((s) => s.available).length,
          tokens_per_s: { prompt: sum((s) => s.prompt.tokens_per_s), generation: sum((s) => s.generation.tokens_per_s) },
        },
        throughput_last_hour: { since: hour.since, prompt_tokens: tokens("prompt_tokens"), generated_tokens: tokens("generated_tokens") },
        // hal0's own request totals, from the registry request_metrics reads (GET /metrics'), when this server keeps one.
        ...(services.metrics ? { requests: (await services.metrics.requestSummary()).totals } : {}),
      };
    },
  }),
];
