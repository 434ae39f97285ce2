import { z } from "zod";
import { defineRoute } from "../route.js";

const Filters = z.strictObject({
  actor: z.string().max(80).optional(),
  kind: z.enum(["rest", "mcp", "approval", "cli"]).optional(),
  outcome: z.enum(["ok", "error", "pending_approval"]).optional(),
  target: z.string().max(200).optional(),
  route: z.string().max(200).optional(),
  since: z.string().datetime({ offset: true }).optional(),
  until: z.string().datetime({ offset: true }).optional(),
});

/** The audit log: every write, action and tool call. */
export const activityRoutes = [
  defineRoute({
    method: "GET", path: "/api/activity", kind: "read", listKey: "items",
    query: Filters.extend({ limit: z.coerce.number().int().min(1).max(500).default(100), offset: z.coerce.number().int().min(0).default(0) }),
    summary: "Audit rows, newest first, with filters and paging",
    handle: ({ query, services }) => {
      const { items, total } = services.audit.query(query);
      return { items, total, limit: query.limit, offset: query.offset };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/activity/export", kind: "stream", query: Filters,
    summary: "Every audit row, oldest first, as JSON lines",
    handle: async ({ query, services }, event) => {
      const res = event.node.res;
      res.writeHead(200, { "Content-Type": "application/x-ndjson", "Content-Disposition": "attachment; filename=\"hal0-activity.jsonl\"" });
      for (const row of services.audit.all(query)) {
        if (query.kind && row.kind !== query.kind) continue;
        if (query.outcome && row.outcome !== query.outcome) continue;
        if (query.until && row.ts >= query.until) continue;
        if (!res.write(`${JSON.stringify(row)}\n`)) await new Promise((r) => res.once("drain", r));
      }
      res.end();
    },
  }),
];
