import { tierFor, type CompiledPolicy } from "../../compiler/index.js";
import { builtinServerOf, tierRank, type Tier } from "../../schema/index.js";
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
  const tools = policyTools(route);
  if (caller.kind === "anonymous") {
    if (PUBLIC_ROUTES.has(routeId(route))) return { run: true };
    if (anonymousMayCall(route, policy)) return { run: true };
    throw new ApiError("auth.required", `${routeId(route)} needs a credential: send Authorization: Bearer <token> (hal0 token create)`, { route: routeId(route) });
  }
  if (tools.length === 0) {
    if (PUBLIC_ROUTES.has(routeId(route))) return { run: true };
    throw new ApiError("auth.operator_required", `${routeId(route)} is for operators only; ${identityLabel({ kind: agentKind(caller), name: caller.agent })} is an agent`, { route: routeId(route), identity: identityLabel({ kind: agentKind(caller), name: caller.agent }) });
  }
  const strictest = routeFloor(route, caller, policy);
  if (strictest.tier === "gated") return { run: false, tool: strictest.tool, tier: "gated" };
  return { run: true };
}

/**
 * The tools whose tiers judge a call to `route`: its MCP aliases, or the one
 * it is judged as (`policyTool`), and the tools of every route that reveals
 * what it does (`revealPeers`).
 */
function policyTools(route: Route): readonly string[] {
  const own = route.tools ?? (route.policyTool === undefined ? [] : [route.policyTool]);
  return route.revealPeers === undefined ? own : [...own, ...route.revealPeers];
}

/** The stricter of two tiers. */
export function stricter(a: Tier, b: Tier): Tier {
  return tierRank(b) > tierRank(a) ? b : a;
}

/**
 * The strictest tier for this agent of every tool aliasing `route` (blocked
 * is refused): the floor of any call to it, on REST and whichever MCP alias
 * names it, so no alias is looser than another.
 */
export function routeFloor(route: Route, caller: Caller, policy: CompiledPolicy): { tier: Tier; tool: string } {
  let top: { tier: Tier; tool: string } | undefined;
  for (const tool of policyTools(route)) {
    const tier = tierFor(policy, tool, caller.agent) ?? "blocked";
    if (top === undefined || tierRank(tier) > tierRank(top.tier)) top = { tier, tool };
  }
  if (!top) return { tier: "gated", tool: "" };
  if (top.tier === "blocked") throw policyBlocks(policy, top.tool, caller.agent);
  return top;
}

/** A route (or MCP tool's route) an anonymous caller may reach: not a write, and every tool on it autonomous-read. */
export function anonymousMayCall(route: Route, policy: CompiledPolicy, tool?: string): boolean {
  if (route.kind === "write") return false;
  const tools = tool !== undefined ? [tool, ...(route.revealPeers ?? [])] : policyTools(route);
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
  let tier = tierFor(policy, tool, caller.agent) ?? "blocked";
  if (tier === "blocked") throw policyBlocks(policy, tool, caller.agent);
  // A tool reads what its route reveals: no looser than the other tools that read the same (blocked there is refused).
  for (const peer of route.revealPeers ?? []) {
    const theirs = tierFor(policy, peer, caller.agent) ?? "blocked";
    if (theirs === "blocked") throw policyBlocks(policy, peer, caller.agent, `, and ${tool} reads what it reads`, { tool, by: peer });
    tier = stricter(tier, theirs);
  }
  return tier as "autonomous_read" | "autonomous_write" | "gated";
}

/**
 * The refusal of a tool its caller's policy blocks (403
 * `mcp.tool_not_allowed`), naming the agent file when that is why: for an
 * identity `hermes__<P>` bound to `agents/<P>.toml`, `details.agent_file`
 * and `details.verdict` (blocked, unknown_tool or unknown_server — what
 * `agent.tool_blocked` / `agent.unknown_tool` / `agent.unknown_server`
 * mean, for hal0's own servers).
 */
export function policyBlocks(policy: CompiledPolicy, tool: string, agent: string | undefined, tail = "", extra: Record<string, unknown> = {}): ApiError {
  const bound = agent === undefined ? undefined : policy.bound?.[agent];
  const verdict = bound?.verdicts[tool];
  if (bound && verdict !== undefined && verdict !== "gated") {
    const why = verdict === "blocked" ? "its [tools] blocked lists it" : verdict === "unknown_tool" ? "no list of its [tools] names it" : `it has no enabled [mcp.servers.${builtinServerOf(tool) ?? "hal0-admin"}]`;
    return new ApiError("mcp.tool_not_allowed", `${bound.file} refuses ${tool} for ${agent} (${why})${tail}`, { tool, agent, ...extra, agent_file: bound.file, verdict });
  }
  return new ApiError("mcp.tool_not_allowed", `policy blocks ${tool} for ${agent}${tail}`, { tool, agent, ...extra });
}

/** hal0's own `system` caller is never an operator: it is labelled (and refused) as an agent would be. */
function agentKind(caller: Caller): "operator" | "agent" {
  return caller.kind === "operator" ? "operator" : "agent";
}
