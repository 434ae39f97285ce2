import { z } from "zod";
import { APPROVAL_STATES, surfaceMissed, type Approval, type ApprovalEvent, type Decider } from "../approvals.js";
import { requireOperator } from "../identity/identify.js";
import { ApiError } from "../errors.js";
import { queryInt } from "../query.js";
import { maskAll, readsWhole } from "../redact.js";
import { defineRoute, type Caller } from "../route.js";
import { serveEvents } from "../sse.js";

const Id = z.strictObject({ id: z.string().min(1).max(64) });

/**
 * The approval queue for people (REST, the CLI, the web page). Approve and
 * deny are never MCP tools and need an operator identity: no agent decides,
 * not even on its own request.
 */
export const approvalRoutes = [
  defineRoute({
    method: "GET", path: "/api/agent/approvals", kind: "read", tools: ["approval_list"], listKey: "approvals",
    query: z.strictObject({ state: z.enum(APPROVAL_STATES).optional(), limit: queryInt(1, 500, 500), offset: queryInt(0, Number.MAX_SAFE_INTEGER, 0) }),
    summary: "Approval requests, oldest first (filter by state; limit 1-500, default 500, with offset; total counts the matches, more says a later page has some); what a request returned only to an operator and to whoever asked",
    handle: ({ query, services, caller }) => {
      const { items, total } = services.approvals.page(query.state, query.limit, query.offset);
      return { approvals: items.map((a) => asReadBy(a, caller)), total, more: query.offset + items.length < total };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/agent/approvals/events", kind: "stream",
    summary: "Server-sent events: a snapshot of pending requests, then enqueued / approved / denied / executed / failed / expired / stale; 15 s keep-alive",
    handle: ({ services, caller }, event) => serveEvents(event, (send) => {
      let seq = 0;
      send("snapshot", { approvals: services.approvals.list("pending").map((a) => asReadBy(a, caller)) }, ++seq);
      const onEvent = (e: ApprovalEvent) => send(e.type, { approval: asReadBy(e.approval, caller) }, ++seq);
      services.approvals.on("event", onEvent);
      return () => void services.approvals.off("event", onEvent);
    }),
  }),
  defineRoute({
    method: "GET", path: "/api/agent/approvals/{id}", kind: "read", params: Id,
    summary: "One approval request",
    handle: ({ params, services, caller }) => ({ approval: asReadBy(services.approvals.get(params.id) ?? notFound(params.id), caller) }),
  }),
  defineRoute({
    method: "POST", path: "/api/agent/approvals/{id}/approve", kind: "action", params: Id,
    summary: "Approve and run a pending request; re-planned first, refused as stale when what it edits moved",
    handle: async ({ params, services, caller }) => ({ approval: await services.approvals.approve(params.id, deciderOf(caller)) }),
  }),
  defineRoute({
    method: "POST", path: "/api/agent/approvals/{id}/deny", kind: "action", params: Id,
    body: z.strictObject({ reason: z.string().max(500).optional() }),
    summary: "Deny a pending request",
    handle: ({ params, body, services, caller }) => ({ approval: services.approvals.deny(params.id, deciderOf(caller), body.reason) }),
  }),
];

/**
 * A request as `reader` sees it: an operator whole, and so does the agent
 * that asked; anyone else (another agent, an anonymous caller) sees what it
 * is (tool, route, the ids of its path, summary, effects, who asked, state)
 * but not what it carries: its query and body with every value masked, and
 * not what running it returned (`result`, `error`: null). A gated read
 * approved for one agent (a slot's log lines) is read by that agent, and a
 * value an agent proposes (an env value under a name no rule can tell is a
 * secret, a credential, private memory text) is read by the person deciding,
 * not by every caller that may list the queue. So is a hal0-agents request's
 * diff (a skill's text, a Hermes profile's memory, which only callers admitted
 * to that profile read): its card shows anyone else which files it changes.
 */
export function asReadBy(a: Approval, reader: Pick<Caller, "kind" | "agent" | "scopes">): Approval {
  if (readsWhole(reader, a.caller) && reachesWhatItActsOn(reader, a)) return a;
  const effects = a.route.startsWith(`POST ${BRIDGE_ROUTES}`) ? a.effects.filter((line) => FILE_CHANGE.test(line)) : a.effects;
  return { ...a, args: { params: a.args.params, query: maskAll(a.args.query) as Record<string, unknown>, body: maskAll(a.args.body) }, effects, result: null, error: null };
}

/**
 * An operator token minted without the surface a request acts on (a `--scope
 * rest` token: no `mcp:agents` for a hal0-agents request, no `mcp:memory` for a
 * hal0-memory one) reads it as any other reader does, masked: it may not
 * approve it (`auth.scope_denied`), nor call that surface to read what it holds.
 */
function reachesWhatItActsOn(reader: Pick<Caller, "kind" | "scopes">, a: Approval): boolean {
  return reader.kind !== "operator" || surfaceMissed(reader.scopes, a.route) === undefined;
}

/** Where hal0-agents' tools have their internal routes (server/mcp/agents.ts). */
const BRIDGE_ROUTES = "/mcp/agents/";
/** A bridge card's line naming one file's change (`create skills/ops/deploy/SKILL.md`); its diff lines start with `+`, `-`, ` ` or `@`. */
const FILE_CHANGE = /^(create|update|delete) \S/;

/** Only an operator decides (the route table already refuses agents and anonymous callers here; this holds it for every door). */
export function deciderOf(caller: Caller): Decider {
  requireOperator({ kind: caller.kind === "system" ? "agent" : caller.kind, name: caller.agent }, "approve or deny a request");
  return { kind: "operator", name: caller.agent, ...(caller.scopes !== undefined ? { scopes: caller.scopes } : {}) };
}

function notFound(id: string): never {
  throw new ApiError("approvals.not_found", `no approval request ${id}`, { id });
}
