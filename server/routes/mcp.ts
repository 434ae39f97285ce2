import { z } from "zod";
import type { Model } from "../../compiler/index.js";
import { mcpBaseUrl } from "../../reconciler/hermes-plan.js";
import { MCP_CATALOG } from "../../schema/data/mcp-catalog.js";
import type { AuditRow } from "../audit.js";
import { ApiError } from "../errors.js";
import { maskAll } from "../redact.js";
import { introspect } from "../mcp-servers/bundled.js";
import { serverState } from "../mcp-servers/probe.js";
import { defineRoute } from "../route.js";
import { serveEvents } from "../sse.js";
import { mcpWriteRoutes } from "./mcp-write.js";
import { queryInt } from "../query.js";

const Id = z.strictObject({ server_id: z.string().min(1).max(64) });
const LogsQuery = z.strictObject({ limit: queryInt(1, 500, 100) });
const POLL_MS = 2000;

/**
 * An installed server as the API shows it (seed 001's InstalledServer fields), with its live `state` when known.
 * Its env shows its keys, every value `[redacted]`: an MCP server's env is mostly credentials, under names no rule can guess.
 */
export function installedView(s: Model["mcpServers"][string], state?: string) {
  return {
    id: s.id, name: s.name, description: s.description, spec: s.spec, transport: s.transport,
    command: s.command ?? null, args: s.args, url: s.url ?? null, tools: s.tools_count ?? 0, resources: s.resources_count ?? 0, prompts: s.prompts_count ?? 0,
    env: maskAll(s.env) as Record<string, string>, secrets: s.secrets, tool_policy: s.tools, exposure: s.exposure, enabled: s.enabled,
    source_url: s.source_url ?? null, author: s.author ?? null, verified: s.verified, installed_at: s.installed_at ?? null,
    bundled: false, ...(state === undefined ? {} : { state }),
  };
}

/** Which bundled server an audit row's route reached. */
function serverOfRoute(route: string | null): string {
  return route?.startsWith("POST /mcp/memory") ? "hal0-memory" : route?.startsWith("POST /mcp/agents") ? "hal0-agents" : "hal0-admin";
}

/** `mcp.tool.<outcome>` for a tool call's audit row. */
function toolEvent(row: AuditRow) {
  return { type: `mcp.tool.${row.outcome}`, data: { id: row.id, ts: row.ts, actor: row.actor, tool: row.tool, server: serverOfRoute(row.route), outcome: row.outcome, error_code: row.error_code, approval_id: row.approval_id, duration_ms: row.duration_ms } };
}

/**
 * /api/mcp: MCP server management (seed 001). Installed servers are desired
 * state, `mcp-servers/<id>.toml`; bundled ones (hal0-admin, hal0-memory) are
 * introspected live. This surface never calls a tool.
 */
export const mcpRoutes = [
  defineRoute({
    method: "GET", path: "/api/mcp/servers", kind: "read", tools: ["mcp_server_list"], listKey: "servers",
    summary: "Bundled servers introspected live, and installed ones with their state (a 1.5 s TCP connect; stdio: stopped)",
    handle: async ({ box, services, caller }) => {
      const model = await box.model();
      const base = mcpBaseUrl(model);
      const bundled = await Promise.all((services.bundled ?? []).filter((b) => b.enabled?.() ?? true).map((b) => introspect(b, caller, base)));
      const installed = await Promise.all(Object.values(model.mcpServers).map(async (s) => installedView(s, await serverState(s))));
      const servers = [...bundled, ...installed];
      return { servers, count: servers.length };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/mcp/clients", kind: "read", tools: ["mcp_client_list"], listKey: "clients",
    summary: "MCP clients as the audit log knows them: identity, role, since, the servers they reached",
    handle: ({ services }) => {
      const clients = services.audit.clients().map((c) => {
        // The audit's actor is the authenticated identity: `agent:<name>`, `operator:<name>` or `anonymous`.
        const [kind, id] = c.actor === "anonymous" ? ["anonymous", "anonymous"] : [c.actor.slice(0, c.actor.indexOf(":")), c.actor.slice(c.actor.indexOf(":") + 1)];
        return {
          id, name: id, identity: c.actor, role: kind === "agent" ? (id.startsWith("hermes") ? "hermes" : "agent") : kind,
          host: null, since: c.since, last_seen: c.last, connected_to: [...new Set(c.routes.map(serverOfRoute))].sort(),
        };
      });
      return { clients, count: clients.length };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/mcp/catalog", kind: "read", tools: ["mcp_catalog"], listKey: "items",
    summary: "The static catalog of installable MCP servers shipped with hal0",
    handle: () => ({ items: MCP_CATALOG, categories: [...new Set(MCP_CATALOG.map((i) => i.category))].sort() }),
  }),
  defineRoute({
    method: "GET", path: "/api/mcp/stream", kind: "stream",
    summary: "Server-sent events of MCP tool calls (mcp.tool.ok / .error / .pending_approval), tailing the audit log every 2 s",
    handle: ({ services }, event) => serveEvents(event, (send) => {
      let last = services.audit.query({ kind: "mcp", limit: 1 }).items[0]?.id ?? 0;
      const timer = setInterval(() => {
        for (const row of services.audit.tail(last, "mcp")) {
          last = row.id;
          const { type, data } = toolEvent(row);
          send(type, data, row.id);
        }
      }, POLL_MS);
      return () => clearInterval(timer);
    }),
  }),
  defineRoute({
    method: "GET", path: "/api/mcp/{server_id}/logs", kind: "read", params: Id, query: LogsQuery, tools: ["mcp_server_logs"], listKey: "events",
    summary: "A server's recent events from the audit log: tool calls for a bundled server, install / config / tools / exposure / test / start-stop calls for an installed one (limit 1–500, default 100)",
    handle: async ({ params, query, box, services }) => {
      const id = params.server_id;
      const bundled = (services.bundled ?? []).some((b) => b.id === id);
      if (!bundled && !(await box.model()).mcpServers[id]) throw new ApiError("mcp.not_found", `no MCP server ${id}`, { server_id: id });
      const rows = bundled
        ? services.audit.query({ kind: "mcp", limit: 10_000 }).items.filter((r) => serverOfRoute(r.route) === id)
        : services.audit.query({ under: id, limit: 10_000 }).items.filter((r) => r.route?.includes(" /api/mcp/") === true);
      const events = rows.slice(0, query.limit).map((r) => ({ id: r.id, ts: r.ts, actor: r.actor, route: r.route, tool: r.tool, outcome: r.outcome, error_code: r.error_code }));
      return { server: id, events, count: events.length };
    },
  }),
  ...mcpWriteRoutes,
];
