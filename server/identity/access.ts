import { tierFor, type CompiledPolicy } from "../../compiler/index.js";
import type { Tier } from "../../schema/index.js";
import { ApiError } from "../errors.js";
import { routeId, type Caller, type Route } from "../route.js";
import { identityLabel } from "./identify.js";

/**
 * The tool-less REST routes an anonymous caller reaches besides those whose
 * every tool is autonomous-read: who am I. (The web page's assets and login
 * form are outside the route table and open too.)
 */
export const PUBLIC_ROUTES: ReadonlySet<string> = new Set<string>(["GET /api/auth/whoami"]);

/** What happens to a REST call: it runs, or it is queued for a person as `tool`. */
export type RestVerdict = { readonly run: true } | { readonly run: false; readonly tool: string; readonly tier: "gated" };

const RANK: Readonly<Record<Tier, number>> = { autonomous_read: 0, autonomous_write: 1, gated: 2, blocked: 3 };

/**
 * The same policy on REST as over MCP. An operator runs everything (a
 * write still goes through the one ChangeSet pipeline). An anonymous caller
 * reaches a route only when it is not a write and every tool mapped to it is
 * autonomous-read (or it is on the short public list), else 401
 * `auth.required`. An agent meets its tiers: a route no tool maps to is
 * operator-only (approve, deny, tokens, …); where several tools share a
 * route the strictest of them for this agent applies — blocked is refused,
 * gated is queued, the rest runs.
 */
export function restVerdict(route: Route, caller: Caller, policy: CompiledPolicy): RestVerdict {
  if (caller.kind === "operator") return { run: true };
  const tools = route.tools ?? [];
  if (caller.kind === "anonymous") {
    if (PUBLIC_ROUTES.has(routeId(route))) return { run: true };
    if (anonymousMayCall(route, policy)) return { run: true };
    throw new ApiError("auth.required", `${routeId(route)} needs a credential: send Authorization: Bearer <token> (hal0 token create)`, { route: routeId(route) });
  }
  if (tools.length === 0) {
    if (PUBLIC_ROUTES.has(routeId(route))) return { run: true };
    throw new ApiError("auth.operator_required", `${routeId(route)} is for operators only; ${identityLabel({ kind: caller.kind, name: caller.agent })} is an agent`, { route: routeId(route), identity: identityLabel({ kind: caller.kind, name: caller.agent }) });
  }
  const ranked = tools.map((tool) => ({ tool, tier: tierFor(policy, tool, caller.agent) ?? "blocked" })).sort((a, b) => RANK[b.tier] - RANK[a.tier]);
  const strictest = ranked[0]!;
  if (strictest.tier === "blocked") throw new ApiError("mcp.tool_not_allowed", `policy blocks ${strictest.tool} for ${caller.agent}`, { tool: strictest.tool, agent: caller.agent });
  if (strictest.tier === "gated") return { run: false, tool: strictest.tool, tier: "gated" };
  return { run: true };
}

/** A route (or MCP tool's route) an anonymous caller may reach: not a write, and every tool on it autonomous-read. */
export function anonymousMayCall(route: Route, policy: CompiledPolicy, tool?: string): boolean {
  if (route.kind === "write") return false;
  const tools = tool !== undefined ? [tool] : (route.tools ?? []);
  return tools.length > 0 && tools.every((t) => tierFor(policy, t) === "autonomous_read");
}

/**
 * The tier a call meets: an operator none (a person's call runs, through the
 * same pipeline); an anonymous caller only autonomous-read tools that do not
 * write (else `auth.required`); an agent its policy (blocked refused).
 */
export function toolTier(policy: CompiledPolicy, route: Route, tool: string, caller: Caller): "autonomous_read" | "autonomous_write" | "gated" {
  if (caller.kind === "operator") return "autonomous_write";
  if (caller.kind === "anonymous") {
    if (anonymousMayCall(route, policy, tool)) return "autonomous_read";
    throw new ApiError("auth.required", `${tool} needs a credential: connect with Authorization: Bearer <agent token> (hal0 token create --agent NAME)`, { tool });
  }
  const tier = tierFor(policy, tool, caller.agent) ?? "blocked";
  if (tier === "blocked") throw new ApiError("mcp.tool_not_allowed", `policy blocks ${tool} for ${caller.agent}`, { tool, agent: caller.agent });
  return tier;
}
