import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import parsePrometheus, { type PromFamily } from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { ProcessDriver } from "../../reconciler/index.js";
import { AUTONOMOUS_READ_TOOLS } from "../../schema/data/seed-tiers.js";
import { Hal0Metrics, quantileMs, SLOT_STATES, SWEEP_OUTCOMES } from "../../server/metrics/registry.js";
import { serve, serveLogger, type Serving } from "../../server/serve.js";
import { captureIo } from "../cli/helpers.js";
import { freePort, PROJECT, RUNNER } from "../reconciler/process-helpers.js";
import { agentTokenFor, httpCall, registerServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/** A sample of the exposition: its labels and value. */
type Sample = { labels: Record<string, string>; value: number };

/**
 * The families of a `/metrics` text, parsed by parse-prometheus-text-format,
 * and every series by its full name. That parser folds a labelled histogram
 * into one sample (its buckets keyed by `le` alone, the labels and counts
 * lost), so the series come from a second parse of the same text with the
 * histograms' TYPE lines dropped: each `_bucket` / `_sum` / `_count` line is
 * then a family of its own, labels intact.
 */
function parse(text: string): { families: Map<string, PromFamily>; series: (name: string) => Sample[] } {
  const families = new Map(parsePrometheus(text).map((f) => [f.name, f]));
  const untyped = text.split("\n").filter((l) => !/^# TYPE \S+ histogram$/.test(l)).join("\n");
  const byName = new Map<string, Sample[]>();
  for (const f of parsePrometheus(untyped)) {
    const list = byName.get(f.name) ?? [];
    for (const m of f.metrics) list.push({ labels: { ...m.labels }, value: Number(m.value) });
    byName.set(f.name, list);
  }
  return { families, series: (name) => byName.get(name) ?? [] };
}

/** The value of the one series of `name` whose labels include `labels` (0 when there is none; two is a test error). */
function valueOf(series: Sample[], labels: Record<string, string>): number {
  const hits = series.filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (hits.length > 1) throw new Error(`${hits.length} series match ${JSON.stringify(labels)}`);
  return hits[0]?.value ?? 0;
}

describe("GET /metrics on a served box: sweeps, plan changes, approvals, REST and MCP latency, slot states", () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-metrics-"));
  const config = join(base, "box");
  const state = join(base, "state");
  let serving: Serving;
  let operator: Record<string, string>;
  let unregister: () => void;
  const get = async (path: string, headers: Record<string, string> = operator) => httpCall(serving.url, "GET", path, { headers });
  const scrape = async () => {
    const res = await get("/metrics");
    expect(res.status, String(res.body)).toBe(200);
    return { ...parse(res.body as string), text: res.body as string, headers: res.headers };
  };

  beforeAll(async () => {
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
    writeFileSync(join(config, "slots/alpha.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${await freePort()}\n\n[placement]\ndevice = "cpu"\n`);
    serving = await serve({ root: config, stateDir: state, port: 0, driverFor: async () => new ProcessDriver({ stateDir: state }), logger: serveLogger("silent"), env: {} });
    unregister = registerServer(serving.url, serving.server);
    operator = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    // The loop's first sweep starts alpha (health-gated); its end shows in the counter.
    for (let i = 0; i < 300; i++) {
      if ((await scrape()).series("hal0_sweeps_total").some((s) => s.value > 0)) break;
      await sleep(50);
    }
  }, 30_000);

  afterAll(async () => {
    unregister?.();
    await serving?.close();
    await main(["down", "--config", config, "--state", state], captureIo());
  }, 30_000);

  it("counts the first sweep, the plan it executed and alpha's state, with HELP and TYPE on every family", async () => {
    const m = await scrape();
    expect(m.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
    expect(m.families.get("hal0_sweeps_total")?.type).toBe("COUNTER");
    expect(m.families.get("hal0_sweep_duration_seconds")?.type).toBe("HISTOGRAM");
    expect(m.families.get("hal0_request_duration_seconds")?.type).toBe("HISTOGRAM");
    expect(m.families.get("hal0_approvals_pending")?.type).toBe("GAUGE");
    expect(m.families.get("hal0_slot_state")?.type).toBe("GAUGE");
    for (const f of m.families.values()) expect(f.help, f.name).toMatch(/\S/);
    // The HELP lines that list a label's values list every one the series carry.
    for (const outcome of SWEEP_OUTCOMES) expect(m.families.get("hal0_sweeps_total")?.help).toContain(outcome);
    for (const state of SLOT_STATES) expect(m.families.get("hal0_slot_state")?.help).toContain(state);
    // The process's own, from prom-client's default metrics.
    expect(m.series("process_cpu_seconds_total")[0]?.value).toBeGreaterThan(0);
    expect(m.series("process_resident_memory_bytes")[0]?.value).toBeGreaterThan(1_000_000);

    const sweeps = m.series("hal0_sweeps_total");
    expect(valueOf(sweeps, { outcome: "converged" })).toBe(1);
    expect(valueOf(sweeps, { outcome: "error" })).toBe(0); // every outcome is there from the start
    expect(valueOf(m.series("hal0_sweep_duration_seconds_count"), { outcome: "converged" })).toBe(1);
    expect(valueOf(m.series("hal0_sweep_duration_seconds_sum"), { outcome: "converged" })).toBeGreaterThan(0);
    expect(valueOf(m.series("hal0_plan_changes_total"), { source: "sweep", kind: "slot", action: "create" })).toBe(1);
    const alpha = m.series("hal0_slot_state").filter((s) => s.labels.slot === "alpha");
    expect(Object.fromEntries(alpha.map((s) => [s.labels.state, s.value]))).toEqual({ offline: 0, starting: 0, warming: 0, ready: 1, stopping: 0, error: 0 });
    expect(valueOf(m.series("hal0_approvals_pending"), {})).toBe(0);
  });

  it("counts REST requests by route template and status, MCP calls by tool and code, approvals pending then decided, and commits' plan changes", async () => {
    const before = await scrape();
    const slotsBefore = valueOf(before.series("hal0_request_duration_seconds_count"), { door: "rest", route: "/api/slots", code: "200" });
    for (let i = 0; i < 3; i++) expect((await get("/api/slots")).status).toBe(200);
    expect((await get("/api/slots/no-such-slot")).status).toBe(404);
    expect((await get("/no/such/path/hal0_op_notatoken?token=sekret-query-value")).status).toBe(404);

    const agent = await adminClient(serving.url, "hermes__ops");
    for (let i = 0; i < 2; i++) expect((await callTool(agent, "slot_list", {})).isError).toBe(false);
    const missing = await callTool(agent, "slot_status", { name: "no-such-slot" });
    expect(missing.body.error.code).toBe("slot.not_found");
    const queued = [];
    for (const name of ["beta", "gamma"]) {
      const res = await callTool(agent, "slot_create", { name, profile: "fake", model: "tiny", port: await freePort(), placement: { device: "cpu" } });
      expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: "pending_approval" });
      queued.push(res.body.approval_id as string);
    }

    const mid = await scrape();
    const count = mid.series("hal0_request_duration_seconds_count");
    expect(valueOf(count, { door: "rest", route: "/api/slots", method: "GET", code: "200" }) - slotsBefore).toBe(3);
    expect(valueOf(count, { door: "rest", route: "/api/slots/{name}", method: "GET", code: "404" })).toBe(1);
    expect(valueOf(count, { door: "rest", route: "unmatched", method: "GET", code: "404" })).toBe(1);
    expect(valueOf(count, { door: "mcp", route: "slot_list", method: "call", code: "ok" })).toBe(2);
    expect(valueOf(count, { door: "mcp", route: "slot_status", code: "slot.not_found" })).toBe(1);
    expect(valueOf(count, { door: "mcp", route: "slot_create", code: "pending_approval" })).toBe(2);
    // A bucket series per bound, cumulative, ending at +Inf with the count.
    const buckets = mid.series("hal0_request_duration_seconds_bucket").filter((s) => s.labels.route === "slot_list");
    expect(buckets.find((b) => b.labels.le === "+Inf")?.value).toBe(2);
    expect(buckets.map((b) => b.value)).toEqual([...buckets.map((b) => b.value)].sort((a, b) => a - b));
    expect(valueOf(mid.series("hal0_approvals_pending"), {})).toBe(2);

    const approved = await httpCall(serving.url, "POST", `/api/agent/approvals/${queued[0]}/approve`, { headers: operator });
    expect(approved.body.approval?.state, JSON.stringify(approved.body)).toBe("executed");
    expect((await httpCall(serving.url, "POST", `/api/agent/approvals/${queued[1]}/deny`, { headers: operator, body: { reason: "not now" } })).status).toBe(200);

    const after = await scrape();
    expect(valueOf(after.series("hal0_approvals_pending"), {})).toBe(0);
    const decided = after.series("hal0_approvals_decided_total");
    expect([valueOf(decided, { decision: "approved" }), valueOf(decided, { decision: "denied" }), valueOf(decided, { decision: "expired" })]).toEqual([1, 1, 0]);
    // The approved slot_create's commit added `+ slot.beta` to the plan.
    expect(valueOf(after.series("hal0_plan_changes_total"), { source: "commit", kind: "slot", action: "create" })).toBe(1);
    const approveCount = valueOf(after.series("hal0_request_duration_seconds_count"), { door: "rest", route: "/api/agent/approvals/{id}/approve", code: "200" });
    expect(approveCount).toBe(1);
    // Labels carry templates and tool names only: no raw path, query, token or approval id.
    const labels = after.series("hal0_request_duration_seconds_count").map((s) => s.labels.route!);
    expect(labels.filter((r) => r.startsWith("/")).every((r) => !/apr_|no-such|sekret|hal0_/.test(r))).toBe(true);
    for (const secret of [operator.authorization!.slice(7), agentTokenFor(serving.url, "hermes__ops"), "sekret-query-value", "hal0_op_notatoken", queued[0]!]) expect(after.text).not.toContain(secret);
    await agent.close();
  }, 30_000);

  it("metrics_snapshot and request_metrics answer an agent in their seed tier (autonomous read) with the same numbers", async () => {
    for (const tool of ["metrics_snapshot", "request_metrics"]) expect(AUTONOMOUS_READ_TOOLS.find((t) => t.tool === tool)?.route).toBeDefined();
    const agent = await adminClient(serving.url, "hermes__coder");
    const snap = await callTool(agent, "metrics_snapshot", {});
    expect(snap.isError, JSON.stringify(snap.body)).toBe(false);
    const names = (snap.body.metrics as Array<{ name: string }>).map((m) => m.name);
    expect(names).toEqual(expect.arrayContaining(["hal0_sweeps_total", "hal0_request_duration_seconds", "hal0_approvals_pending", "process_resident_memory_bytes"]));
    expect(names.every((n) => n.startsWith("hal0_") || n.startsWith("process_") || n.startsWith("nodejs_"))).toBe(true);
    expect(names).not.toContain("nodejs_gc_duration_seconds");
    const sweeps = (snap.body.metrics as Array<{ name: string; values: Array<{ labels: { outcome: string }; value: number }> }>).find((m) => m.name === "hal0_sweeps_total")!;
    expect(sweeps.values.find((v) => v.labels.outcome === "converged")?.value).toBeGreaterThanOrEqual(1);

    const { body, isError } = await callTool(agent, "request_metrics", {});
    expect(isError, JSON.stringify(body)).toBe(false);
    expect(Date.parse(body.since)).toBeLessThanOrEqual(Date.now());
    const slots = body.routes.find((r: { door: string; route: string }) => r.door === "rest" && r.route === "/api/slots");
    expect(slots).toMatchObject({ errors: 0 });
    expect(slots.count).toBeGreaterThanOrEqual(3);
    expect(slots.p50_ms).toBeGreaterThan(0);
    expect(slots.p50_ms).toBeLessThanOrEqual(slots.p95_ms);
    expect(slots.p95_ms).toBeLessThanOrEqual(slots.p99_ms);
    expect(body.routes.find((r: { route: string }) => r.route === "slot_status")).toMatchObject({ door: "mcp", count: 1, errors: 1 });
    expect(body.routes.find((r: { route: string }) => r.route === "slot_create")).toMatchObject({ door: "mcp", count: 2, errors: 0 });
    expect(body.routes.find((r: { route: string }) => r.route === "unmatched")).toMatchObject({ door: "rest", count: 1, errors: 1 });
    const sum = (door: string, key: "count" | "errors") => body.routes.filter((r: { door: string }) => r.door === door).reduce((n: number, r: Record<string, number>) => n + r[key]!, 0);
    expect(body.totals.by_door.mcp).toEqual({ count: sum("mcp", "count"), errors: sum("mcp", "errors") });
    expect(body.totals.count).toBe(sum("rest", "count") + sum("mcp", "count"));
    // The same numbers over REST, where the agent's own metrics_snapshot call now shows too.
    const rest = await httpCall(serving.url, "GET", "/api/stats/requests", { headers: operator });
    expect(rest.body.routes.find((r: { route: string }) => r.route === "metrics_snapshot")).toMatchObject({ door: "mcp", count: 1, errors: 0 });
    await agent.close();
  });

  it("is read as metrics_snapshot is: anonymous on loopback and agents may read it; a bad token may not", async () => {
    const anonymous = await get("/metrics", {});
    expect(anonymous.status).toBe(200);
    expect((await get("/api/metrics", {})).status).toBe(200);
    expect((await get("/metrics", { authorization: `Bearer ${agentTokenFor(serving.url, "hermes__coder")}` })).status).toBe(200);
    const bad = await get("/metrics", { authorization: "Bearer hal0_op_not-a-real-token" });
    expect(bad.status).toBe(401);
    expect(bad.body.error.code).toBe("auth.invalid_token");
  });
});

describe("quantiles from cumulative buckets", () => {
  it("interpolates inside the bucket holding the rank, as histogram_quantile does", () => {
    // 10 observations: 4 ≤ 10 ms, 8 ≤ 20 ms, 10 ≤ 40 ms.
    const buckets: Array<[number, number]> = [[0.01, 4], [0.02, 8], [0.04, 10], [Infinity, 10]];
    expect(quantileMs(buckets, 0.5)).toBe(12.5); // rank 5: a quarter into (10, 20]
    expect(quantileMs(buckets, 0.2)).toBe(5); // rank 2: half into (0, 10]
    expect(quantileMs(buckets, 0.9)).toBe(30); // rank 9: half into (20, 40]
    expect(quantileMs([[0.01, 0], [Infinity, 3]], 0.5)).toBe(10); // above every bound: the highest one
    expect(quantileMs([[0.01, 0], [Infinity, 0]], 0.5)).toBeNull();
  });
});

describe("a gauge that cannot be read at scrape time", () => {
  it("is left without a sample (never a 0 that reads as a real value) and counted in hal0_metrics_collect_failures_total", async () => {
    let fail = true;
    const metrics = new Hal0Metrics({
      approvalsPending: () => {
        if (fail) throw new Error("the database is locked");
        return 2;
      },
      slotStates: async () => {
        if (fail) throw new Error("the runtime does not answer");
        return new Map([["alpha", "ready"]]);
      },
    });
    await metrics.text();
    // The failure counter is read as the scrape starts, so a scrape shows the failures of the ones before it.
    const failed = parse((await metrics.text()).text);
    expect(failed.series("hal0_approvals_pending")).toEqual([]);
    expect(failed.series("hal0_slot_state")).toEqual([]);
    expect(valueOf(failed.series("hal0_metrics_collect_failures_total"), { gauge: "hal0_approvals_pending" })).toBeGreaterThanOrEqual(1);
    expect(valueOf(failed.series("hal0_metrics_collect_failures_total"), { gauge: "hal0_slot_state" })).toBeGreaterThanOrEqual(1);
    fail = false;
    const read = parse((await metrics.text()).text);
    expect(read.series("hal0_approvals_pending")).toEqual([{ labels: {}, value: 2 }]);
    expect(valueOf(read.series("hal0_slot_state"), { slot: "alpha", state: "ready" })).toBe(1);
  });
});
