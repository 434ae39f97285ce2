import { tierFor, type CompiledPolicy } from "../compiler/index.js";
import { effectsOf, type Effect } from "../compiler/effects.js";
import { tierRank, type Tier } from "../schema/index.js";
import type { Proposal } from "./box.js";
import { ApiError } from "./errors.js";
import { routeFloor, stricter } from "./identity/access.js";
import type { Caller, Route } from "./route.js";
import { proposeOnly, type Call, type Dispatcher } from "./dispatch.js";

export interface EffectVerdict {
  /** The tier the change meets: the floor, raised by its effects. */
  readonly tier: Tier;
  readonly effects: readonly Effect[];
}

/**
 * Gate by effect (issue 15): an agent's change is judged by what it does,
 * after compile and plan. `floor` is the tool's (or the route's) tier, a
 * floor never a ceiling. Tune effects keep it; an assignment is never looser
 * than the agent's tier for the matching tool (slot_load, slot_unload,
 * model_swap, slot_delete; blocked there is refused); a privileged effect —
 * what code runs, where secrets go, any key without a class — always needs a
 * person.
 */
export function effectVerdict(proposal: Pick<Proposal, "snapshot" | "model" | "applied">, floor: Tier, caller: Caller, policy: CompiledPolicy): EffectVerdict {
  const effects = effectsOf({ before: proposal.snapshot.model, after: proposal.model, files: proposal.applied.files });
  let tier = floor;
  for (const e of effects) {
    if (e.class === "privileged") tier = stricter(tier, "gated");
    else if (e.class === "assignment" && e.tool) {
      const own = tierFor(policy, e.tool, caller.agent) ?? "blocked";
      if (own === "blocked") throw new ApiError("mcp.tool_not_allowed", `policy blocks ${e.tool} for ${caller.agent}, and this change ${e.line}`, { tool: e.tool, agent: caller.agent, effect: e.line });
      tier = stricter(tier, own);
    }
  }
  return { tier, effects };
}

/** The effect lines a person reads on a card: every privileged and assignment effect, then the tune ones (at most 12 lines). */
export function effectLines(effects: readonly Effect[]): string[] {
  const lines = [...new Set(effects.map((e) => e.line))];
  return lines.length > 12 ? [...lines.slice(0, 11), `… and ${lines.length - 11} more changes`] : lines;
}

/** The reply to a call queued for a person (REST 202, an MCP tool's result): the request id and what it does. */
export function pendingReply(approval: { id: string; summary: string; effects: readonly string[] }, why?: string): { status: "pending_approval"; approval_id: string; detail: string; effects: readonly string[] } {
  const does = approval.effects.length > 0 ? ` — it ${approval.effects.join("; ")}` : "";
  return { status: "pending_approval", approval_id: approval.id, detail: `${approval.summary}${does}${why ? `: ${why}` : ""}`, effects: approval.effects };
}

/**
 * The tier an agent's call to a write route meets: the tool's own tier,
 * raised to the strictest alias of its route (so no alias is looser than
 * another for the same body), then by what the planned change does.
 */
export async function agentWriteTier(route: Route, caller: Caller, policy: CompiledPolicy, toolTier: Tier, propose: () => Promise<Pick<Proposal, "snapshot" | "model" | "applied">>): Promise<{ tier: Tier; tool: string; judgedAt?: string }> {
  const floor = routeFloor(route, caller, policy);
  const tier = stricter(toolTier, floor.tier);
  if (tierRank(tier) >= tierRank("gated")) return { tier, tool: floor.tool };
  const proposal = await propose();
  const verdict = effectVerdict(proposal, tier, caller, policy);
  return { tier: verdict.tier, tool: floor.tool, judgedAt: proposal.snapshot.revision };
}

/**
 * The call as it may run once judged at revision `judgedAt`: based on it when
 * its caller named no base, so that it commits only while the files it edits
 * are as they were judged (else 409 `config.stale`, and the next try is judged
 * afresh) — what runs is what was judged.
 */
export function pinnedTo(call: Call, judgedAt: string | undefined): Call {
  return call.base === undefined && judgedAt !== undefined ? { ...call, base: judgedAt } : call;
}

/**
 * The tier a tool call meets, from its tool's tier (`floor`): an agent's
 * write is raised by what it does, after compile and plan; anything else
 * keeps its floor. Every door that runs a route as a named tool asks here,
 * and runs the call it gets back (pinned to the judged revision).
 */
export async function callTier(d: Dispatcher, route: Route, floor: Tier, call: Call): Promise<{ tier: Tier; call: Call }> {
  if (call.caller.kind !== "agent" || route.kind !== "write") return { tier: floor, call };
  const policy = (await d.box.model()).policy;
  const { tier, judgedAt } = await agentWriteTier(route, call.caller, policy, floor, async () => (await proposeOnly(d, route, call)).proposal);
  return { tier, call: pinnedTo(call, judgedAt) };
}

/** A gated call queued for a person and recorded as such: the reply its caller gets. */
export async function queueForPerson(d: Dispatcher, route: Route, tool: string, call: Call, started: number, why?: string): Promise<ReturnType<typeof pendingReply>> {
  const approval = await d.approvals.enqueue(tool, route, call);
  d.audit.record({ call, route, outcome: "pending_approval", durationMs: performance.now() - started, approvalId: approval.id, planId: approval.plan_id ?? undefined, tool });
  return pendingReply(approval, why);
}
