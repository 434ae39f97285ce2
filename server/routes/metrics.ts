import { z } from "zod";
import type { Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import type { Hal0Metrics } from "../metrics/registry.js";
import { defineRoute, RawReply } from "../route.js";

const Nothing = z.strictObject({});

function metricsOf(d: Dispatcher): Hal0Metrics {
  if (!d.metrics) throw new ApiError("system.internal", "this server keeps no metrics");
  return d.metrics;
}

/**
 * hal0's own metrics (server/metrics/registry.ts): the Prometheus text for
 * a scraper, the same registry as JSON, and the request latencies per door
 * and route. Each is a read, judged as `metrics_snapshot` is.
 */
export const metricsRoutes = [
  defineRoute({
    method: "GET", path: "/metrics", kind: "read", policyTool: "metrics_snapshot",
    summary: "Prometheus text exposition of hal0's metrics (sweeps, plan changes, approvals, request latency, slot states) and the process's",
    handle: async ({ services }) => {
      const { contentType, text } = await metricsOf(services).text();
      return new RawReply(contentType, text, { "Cache-Control": "no-store" });
    },
  }),
  defineRoute({
    method: "GET", path: "/api/metrics", kind: "read", query: Nothing, tools: ["metrics_snapshot"],
    summary: "hal0's metrics as JSON (prom-client's form): every hal0_* metric and the process's CPU, memory and event loop",
    handle: ({ services }) => metricsOf(services).snapshot(),
  }),
  defineRoute({
    method: "GET", path: "/api/stats/requests", kind: "read", query: Nothing, tools: ["request_metrics"],
    summary: "REST and MCP requests since the server started, per door and route: count, errors, p50/p95/p99 latency (estimated from the histogram's buckets)",
    handle: ({ services }) => metricsOf(services).requestSummary(),
  }),
];
