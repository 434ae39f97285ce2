import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type GaugeConfiguration, type MetricObjectWithValues, type MetricValue } from "prom-client";
import type { Plan } from "../../schema/index.js";
import type { SweepReport } from "../../reconciler/sweep.js";

/** Which door a request came through: the REST route table or an MCP tool. */
export type Door = "rest" | "mcp";

/** The route label of a REST request no route matched (404 / 405): one label, never the raw path. */
export const UNMATCHED = "unmatched";

/** How a request left pending: a person decided it, or its time to live ran out. */
export const APPROVAL_DECISIONS = ["approved", "denied", "expired"] as const;
export type ApprovalDecision = (typeof APPROVAL_DECISIONS)[number];

/** What the sweep loop reports: a sweep's outcome, or `error` when it threw. */
export const SWEEP_OUTCOMES = ["nothing_to_do", "converged", "failed", "invalid_config", "locked", "interrupted", "error"] as const;

/** Seconds. Request latencies: a read answers in a few ms, a write that plans and commits in tens to hundreds. */
export const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds. Sweeps: an idle one in ms, one that starts runners waits for their health (up to minutes). */
export const SWEEP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** The process-wide metrics prom-client offers (CPU, memory, heap, event loop, GC), kept by `/api/metrics` too. */
export const PROCESS_METRICS: ReadonlySet<string> = new Set([
  "process_cpu_user_seconds_total", "process_cpu_system_seconds_total", "process_cpu_seconds_total", "process_start_time_seconds",
  "process_resident_memory_bytes", "process_open_fds", "nodejs_heap_size_used_bytes", "nodejs_heap_size_total_bytes", "nodejs_eventloop_lag_p99_seconds",
]);

/** What the gauges read at scrape time (the stores and the box of the server that owns the registry). */
export interface MetricSources {
  /** Approval requests waiting for a person. */
  readonly approvalsPending?: () => number | Promise<number>;
  /** Each slot's lifecycle state (offline, starting, warming, ready, error), by slot name. */
  readonly slotStates?: () => Promise<ReadonlyMap<string, string>>;
}

/** The lifecycle states of a slot (server/slot-view.ts `lifecycleOf`): each slot has one series per state, 1 on the one it is in. */
export const SLOT_STATES = ["offline", "starting", "warming", "ready", "stopping", "error"] as const;

/** One door+route of `request_metrics`: since the server started, latencies estimated from the histogram's buckets. */
export interface RouteRequests {
  readonly door: Door;
  readonly route: string;
  readonly count: number;
  /** REST: a status outside 2xx; MCP: an error code (not `ok` nor `pending_approval`). */
  readonly errors: number;
  readonly p50_ms: number | null;
  readonly p95_ms: number | null;
  readonly p99_ms: number | null;
}

export interface RequestSummary {
  /** When this server's counters started (its start). */
  readonly since: string;
  readonly totals: { readonly count: number; readonly errors: number; readonly by_door: Record<Door, { count: number; errors: number }> };
  readonly routes: readonly RouteRequests[];
}

let processRegistry: Registry | undefined;

/**
 * prom-client's default metrics, once per process: they describe the process
 * (one GC observer, one event-loop monitor), not a server, and a process may
 * hold many servers (tests). Each server's scrape merges them in.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/**
 * One hal0 server's Prometheus metrics, in a registry of its own (never
 * prom-client's global one: a process may run many servers). Counters and
 * histograms are fed by the hooks (app.ts, mcp/admin.ts, the sweep loop,
 * approvals, the commit observer); gauges are read from the sources at
 * scrape time, so they are never stale. Every label is bounded: route
 * templates and tool names, never a raw URL or a query string.
 */
export class Hal0Metrics {
  /** This server's own metrics (the process metrics are merged in at scrape). */
  readonly registry = new Registry();
  readonly startedAt: Date;
  private readonly requests: Histogram<"door" | "route" | "method" | "code">;
  private readonly sweepSeconds: Histogram<"outcome">;
  private readonly sweeps: Counter<"outcome">;
  private readonly planChanges: Counter<"source" | "kind" | "action">;
  private readonly decided: Counter<"decision">;
  private readonly collectFailures: Counter<"gauge">;

  constructor(sources: MetricSources = {}, now: () => number = Date.now) {
    this.startedAt = new Date(now());
    const registers = [this.registry];
    this.requests = new Histogram({
      name: "hal0_request_duration_seconds", registers, buckets: REQUEST_BUCKETS, labelNames: ["door", "route", "method", "code"],
      help: "REST and MCP request latency. door: rest|mcp; route: the route template (REST; `unmatched` when none matched) or the MCP tool name; method: the HTTP method (REST) or `call` (MCP); code: the HTTP status (REST) or ok|pending_approval|<error code> (MCP)",
    });
    this.sweepSeconds = new Histogram({ name: "hal0_sweep_duration_seconds", registers, buckets: SWEEP_BUCKETS, labelNames: ["outcome"], help: "How long each reconcile sweep took, by its outcome" });
    this.sweeps = new Counter({ name: "hal0_sweeps_total", registers, labelNames: ["outcome"], help: `Reconcile sweeps by outcome (${SWEEP_OUTCOMES.filter((o) => o !== "error").join(", ")}; error: the sweep threw)` });
    this.planChanges = new Counter({
      name: "hal0_plan_changes_total", registers, labelNames: ["source", "kind", "action"],
      help: "Changes of the plans hal0 acted on, by action (no-ops not counted). source=sweep: the plan a sweep executed; source=commit: what a committed change added to the plan (its delta)",
    });
    this.decided = new Counter({ name: "hal0_approvals_decided_total", registers, labelNames: ["decision"], help: "Approval requests that left pending: approved or denied by an operator, or expired" });
    this.collectFailures = new Counter({ name: "hal0_metrics_collect_failures_total", registers, labelNames: ["gauge"], help: "Scrapes where a gauge could not be read (the gauge is left empty for that scrape)" });
    for (const outcome of SWEEP_OUTCOMES) this.sweeps.inc({ outcome }, 0);
    for (const decision of APPROVAL_DECISIONS) this.decided.inc({ decision }, 0);
    const failed = (gauge: string) => this.collectFailures.inc({ gauge });
    this.gauge({
      name: "hal0_approvals_pending", help: "Approval requests waiting for an operator",
      async collect() {
        if (!sources.approvalsPending) return;
        try {
          this.set(await sources.approvalsPending());
        } catch {
          this.remove(); // no sample, not a 0 that reads as "none pending" (reset() would leave one)
          failed("hal0_approvals_pending");
        }
      },
    });
    this.gauge({
      name: "hal0_slot_state", labelNames: ["slot", "state"], help: `Each slot's lifecycle state: 1 on the state it is in (${SLOT_STATES.join(", ")}), 0 on the others`,
      async collect() {
        this.reset();
        if (!sources.slotStates) return;
        try {
          for (const [slot, current] of await sources.slotStates()) for (const state of SLOT_STATES) this.set({ slot, state }, state === current ? 1 : 0);
        } catch {
          this.reset();
          failed("hal0_slot_state");
        }
      },
    });
  }

  /**
   * Adds a gauge to this server's registry: the way other parts add theirs
   * (a slot's scraped counters, …). The name must start with `hal0_`; a
   * `collect` runs at each scrape (read the source there, and keep labels
   * bounded: slot names, never URLs).
   */
  gauge<T extends string>(config: Omit<GaugeConfiguration<T>, "registers">): Gauge<T> {
    if (!config.name.startsWith("hal0_")) throw new Error(`hal0 metric names start with hal0_: ${config.name}`);
    return new Gauge<T>({ ...config, registers: [this.registry] });
  }

  /** One REST request or MCP tool call: its route template or tool name, never a raw URL. */
  observeRequest(door: Door, route: string, method: string, code: string, ms: number): void {
    this.requests.observe({ door, route, method, code }, ms / 1000);
  }

  /** One sweep (or `error` when it threw) and, when it executed a plan, that plan's changes. */
  observeSweep(report: SweepReport | undefined, ms: number): void {
    const outcome = report?.outcome ?? "error";
    this.sweeps.inc({ outcome });
    this.sweepSeconds.observe({ outcome }, ms / 1000);
    if (report?.plan && (report.outcome === "converged" || report.outcome === "failed")) this.countChanges("sweep", report.plan.changes);
  }

  /** A committed change's delta: what it added to the plan. */
  observeCommit(delta: Plan["changes"]): void {
    this.countChanges("commit", delta);
  }

  observeDecision(decision: ApprovalDecision): void {
    this.decided.inc({ decision });
  }

  /** The Prometheus text of this server's metrics and the process's. */
  async text(): Promise<{ contentType: string; text: string }> {
    const merged = this.merged();
    return { contentType: merged.contentType, text: await merged.metrics() };
  }

  /** `/api/metrics`: hal0's own metrics and a few process ones, as prom-client's JSON. */
  async snapshot(): Promise<{ since: string; metrics: Array<MetricObjectWithValues<MetricValue<string>>> }> {
    const all = await this.merged().getMetricsAsJSON();
    return { since: this.startedAt.toISOString(), metrics: all.filter((m) => m.name.startsWith("hal0_") || PROCESS_METRICS.has(m.name)) };
  }

  /** `request_metrics` (and `stats_overview`'s request totals): per door and route, since start. */
  async requestSummary(): Promise<RequestSummary> {
    const routes = summarize((await this.requests.get()).values);
    const by_door: Record<Door, { count: number; errors: number }> = { rest: { count: 0, errors: 0 }, mcp: { count: 0, errors: 0 } };
    for (const r of routes) {
      by_door[r.door].count += r.count;
      by_door[r.door].errors += r.errors;
    }
    const totals = { count: by_door.rest.count + by_door.mcp.count, errors: by_door.rest.errors + by_door.mcp.errors, by_door };
    return { since: this.startedAt.toISOString(), totals, routes };
  }

  private countChanges(source: "sweep" | "commit", changes: Plan["changes"]): void {
    for (const c of changes) if (c.action !== "no-op") this.planChanges.inc({ source, kind: c.kind, action: c.action });
  }

  private merged(): Registry {
    return Registry.merge([this.registry, processMetrics()]);
  }
}

/** The `code` label of an MCP call that answered: `pending_approval` when it was queued for a person, else `ok`. */
export function mcpCode(result: unknown): "ok" | "pending_approval" {
  return (result as { status?: unknown } | null)?.status === "pending_approval" ? "pending_approval" : "ok";
}

/** An error for its door: a REST status outside 2xx, an MCP code other than ok / pending_approval. */
export function isError(door: Door, code: string): boolean {
  return door === "rest" ? !/^2\d\d$/.test(code) : code !== "ok" && code !== "pending_approval";
}

/**
 * The histogram's series grouped by door and route (methods and codes
 * summed): counts, errors (from each code's `_count`) and p50/p95/p99.
 */
function summarize(values: ReadonlyArray<MetricValue<string> & { metricName?: string }>): RouteRequests[] {
  const groups = new Map<string, { door: Door; route: string; count: number; errors: number; buckets: Map<number, number> }>();
  for (const v of values) {
    const { door, route, code, le } = v.labels as { door: Door; route: string; code: string; le?: number | string };
    const key = `${door} ${route}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { door, route, count: 0, errors: 0, buckets: new Map() }));
    if (v.metricName?.endsWith("_count")) {
      g.count += v.value;
      if (isError(door, code)) g.errors += v.value;
    } else if (v.metricName?.endsWith("_bucket")) {
      const bound = le === "+Inf" ? Infinity : Number(le);
      g.buckets.set(bound, (g.buckets.get(bound) ?? 0) + v.value);
    }
  }
  return [...groups.values()]
    .sort((a, b) => (a.door === b.door ? (a.route < b.route ? -1 : a.route > b.route ? 1 : 0) : a.door < b.door ? -1 : 1))
    .map((g) => {
      const buckets = [...g.buckets].sort(([a], [b]) => a - b);
      const q = (p: number) => quantileMs(buckets, p);
      return { door: g.door, route: g.route, count: g.count, errors: g.errors, p50_ms: q(0.5), p95_ms: q(0.95), p99_ms: q(0.99) };
    });
}

/**
 * A quantile from cumulative buckets, as Prometheus's `histogram_quantile`
 * estimates it: find the bucket holding the q-th observation and interpolate
 * linearly inside it (from the previous bound, 0 for the first). One that
 * falls in the `+Inf` bucket is reported as the highest finite bound: the
 * histogram knows only that it is above. Null when nothing was observed.
 */
export function quantileMs(buckets: ReadonlyArray<readonly [number, number]>, q: number): number | null {
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total === 0) return null;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [bound, count] of buckets) {
    if (count >= rank) {
      if (bound === Infinity) return round(lowerBound * 1000);
      const inBucket = count - lowerCount;
      const at = inBucket === 0 ? bound : lowerBound + ((bound - lowerBound) * (rank - lowerCount)) / inBucket;
      return round(at * 1000);
    }
    lowerBound = bound;
    lowerCount = count;
  }
  return round(lowerBound * 1000);
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
