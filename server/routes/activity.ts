import { z } from "zod";
import { auditRowReadBy } from "../audit.js";
import { defineRoute, RawReply } from "../route.js";
import { queryInt } from "../query.js";

/**
 * An ISO 8601 instant with `Z` or an offset, as the audit rows store theirs (UTC, milliseconds): rows are compared
 * as text, so `2026-12-07T08:30:00-03:30` (St. John's) or `…T12:00:00Z` (no fraction) taken as written would pick the
 * wrong rows.
 */
const Instant = z.string().datetime({ offset: true }).transform((v) => new Date(Date.parse(v)).toISOString());

const Filters = z.strictObject({
  actor: z.string().max(80).optional(),
  kind: z.enum(["rest", "mcp", "approval", "cli"]).optional(),
  outcome: z.enum(["ok", "error", "pending_approval"]).optional(),
  target: z.string().max(200).optional(),
  route: z.string().max(200).optional(),
  since: Instant.optional(),
  until: Instant.optional(),
});

/** The audit log: every write, action and tool call. */
export const activityRoutes = [
  defineRoute({
    // Both reveal the audit rows: a policy that blocks (or gates) one for an agent holds for the other.
    method: "GET", path: "/api/activity", kind: "read", listKey: "items", tools: ["activity_list"], reveals: "audit-log",
    query: Filters.extend({ limit: queryInt(1, 500, 100), offset: queryInt(0, Number.MAX_SAFE_INTEGER, 0) }),
    summary: "Audit rows, newest first, with filters and paging",
    handle: ({ query, services, caller }) => {
      const { items, total } = services.audit.query(query);
      return { items: items.map((row) => auditRowReadBy(row, caller)), total, limit: query.limit, offset: query.offset };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/activity/export", kind: "read", query: Filters, tools: ["activity_export"], reveals: "audit-log",
    summary: "Every audit row matching the filters, oldest first, as JSON lines",
    handle: ({ query, services, caller }) => {
      const lines: string[] = [];
      for (const row of services.audit.all(query)) lines.push(`${JSON.stringify(auditRowReadBy(row, caller))}\n`);
      return new RawReply("application/x-ndjson", lines.join(""), { "Content-Disposition": 'attachment; filename="hal0-activity.jsonl"' });
    },
  }),
];
