import { tierFor, type CompiledPolicy } from "../compiler/index.js";
import type { Effect } from "../compiler/effects.js";
import type { Tier } from "../schema/index.js";
import type { JudgedProposal } from "./box.js";
import { ApiError, apiErrorOf } from "./errors.js";
import { policyBlocks, routeFloor, stricter } from "./identity/access.js";
import { RawReply, type Caller, type Route, type WriteIntent } from "./route.js";
import { changesTree, effectsDigest, proposalEffects, proposeOnly, validate, type Call, type Dispatcher } from "./dispatch.js";

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
 * model_swap, and the delete tools of slots, stacks, models and profiles;
 * blocked there is refused); a privileged effect —
 * what code runs, where secrets go, any key without a class — always needs a
 * person.
 */
export function effectVerdict(proposal: JudgedProposal, floor: Tier, caller: Caller, policy: CompiledPolicy): EffectVerdict {
  const effects = proposalEffects(proposal);
  let tier = floor;
  for (const e of effects) {
    if (e.class === "privileged") tier = stricter(tier, "gated");
    else if (e.class === "assignment" && e.tool) {
      const own = tierFor(policy, e.tool, caller.agent) ?? "blocked";
      if (own === "blocked") throw policyBlocks(policy, e.tool, caller.agent, `, and this change ${e.line}`, { effect: e.line });
      tier = stricter(tier, own);
    }
  }
  return { tier, effects };
}

/** How many lines a card shows when the tune ones are cut. */
const CARD_LINES = 12;

/**
 * The effect lines a person reads on a card: every privileged and assignment
 * effect, never cut (one left off would be approved unread: a runner among
 * many lines of an imported stack's profiles), then the tune ones while the
 * card has room for them (12 lines in all), the rest counted.
 */
export function effectLines(effects: readonly Effect[]): string[] {
  const lines = [...new Set(effects.map((e) => e.line))];
  if (lines.length <= CARD_LINES) return lines;
  const decided = new Set(effects.filter((e) => e.class !== "tune").map((e) => e.line));
  const kept = lines.filter((l) => decided.has(l));
  const tune = lines.filter((l) => !decided.has(l));
  const room = Math.max(0, CARD_LINES - 1 - kept.length);
  return tune.length <= room ? [...kept, ...tune] : [...kept, ...tune.slice(0, room), `… and ${tune.length - room} more tune changes`];
}

/** The reply to a call queued for a person (REST 202, an MCP tool's result): the request id and what it does. */
export function pendingReply(approval: { id: string; summary: string; effects: readonly string[] }, why?: string): { status: "pending_approval"; approval_id: string; detail: string; effects: readonly string[] } {
  const does = approval.effects.length > 0 ? ` — it ${approval.effects.join("; ")}` : "";
  return { status: "pending_approval", approval_id: approval.id, detail: `${approval.summary}${does}${why ? `: ${why}` : ""}`, effects: approval.effects };
}

/**
 * What a dry run by an agent would meet if it were sent for real: it writes
 * nothing, so it runs at once (as `POST /api/plans` does) and its reply says
 * whether the real call would wait for a person, with the effects a card
 * would list, or be refused (`refused`: the code and message it would get).
 */
export interface DryRunVerdict {
  readonly approval_needed: boolean;
  readonly effects: readonly string[];
  readonly refused?: { readonly code: string; readonly message: string };
}

export interface WriteVerdict {
  readonly tier: Tier;
  readonly tool: string;
  /** The revision the change was judged at (absent when it was not planned). */
  readonly judgedAt?: string;
  /** What it was judged to do (`effectsDigest`), with `judgedAt`. */
  readonly judged?: string;
  /** Set for a dry run: the call runs whatever `tier` says, and this is what its real twin would meet. */
  readonly dryRun?: DryRunVerdict;
}

/**
 * The tier an agent's call to a write route meets: the tool's own tier,
 * raised to the strictest alias of its route (so no alias is looser than
 * another for the same body), then by what the planned change does. A tool
 * blocked for the agent is refused, a dry run included; any other dry run
 * runs, with its verdict beside it.
 */
export async function agentWriteTier(route: Route, caller: Caller, policy: CompiledPolicy, toolTier: Tier, propose: () => Promise<{ intent: Pick<WriteIntent, "dryRun">; proposal: JudgedProposal }>): Promise<WriteVerdict> {
  const floor = routeFloor(route, caller, policy);
  const tier = stricter(toolTier, floor.tier);
  const { intent, proposal } = await propose();
  if (intent.dryRun === true) return { tier, tool: floor.tool, dryRun: dryRunVerdict(proposal, tier, caller, policy) };
  // Judged even when the tool is gated: an effect the agent's policy blocks is refused, not queued.
  const verdict = effectVerdict(proposal, tier, caller, policy);
  return { tier: verdict.tier, tool: floor.tool, judgedAt: proposal.snapshot.revision, judged: effectsDigest(verdict.effects) };
}

function dryRunVerdict(proposal: JudgedProposal, floor: Tier, caller: Caller, policy: CompiledPolicy): DryRunVerdict {
  try {
    const verdict = effectVerdict(proposal, floor, caller, policy);
    return { approval_needed: verdict.tier === "gated", effects: effectLines(verdict.effects) };
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return { approval_needed: false, effects: effectLines(proposalEffects(proposal)), refused: { code: err.code, message: err.message } };
  }
}

/** An agent's call to an action that only previews this time (`previewOnly`): what the real one would meet; else undefined. */
export function actionPreview(route: Route, call: Call, tier: Tier): DryRunVerdict | undefined {
  if (route.kind !== "action" || !route.previewOnly || call.caller.kind !== "agent") return undefined;
  return route.previewOnly(validate(route, call) as never) ? { approval_needed: tier === "gated", effects: [] } : undefined;
}

/** A dry run's reply with what its real twin would meet beside it (`approval`); a reply that is not a JSON object is left as it is. */
export function withDryRunVerdict(result: unknown, verdict: DryRunVerdict | undefined): unknown {
  if (verdict === undefined || result === null || typeof result !== "object" || Array.isArray(result) || result instanceof RawReply) return result;
  return { ...(result as Record<string, unknown>), approval: verdict };
}

/**
 * The call as it may run once judged at revision `judgedAt` to do `judged`:
 * based on it when its caller named no base, so that it commits only while
 * the files it edits are as they were judged (else 409 `config.stale`), and
 * only while it does what was judged (else 409 `config.effects_changed`: a
 * file it reads moved); the next try is judged afresh — what runs is what
 * was judged.
 */
export function pinnedTo(call: Call, verdict: Pick<WriteVerdict, "judgedAt" | "judged">): Call {
  const based = call.base === undefined && verdict.judgedAt !== undefined ? { ...call, base: verdict.judgedAt } : call;
  return verdict.judged === undefined ? based : { ...based, judged: verdict.judged };
}

/**
 * The tier a tool call meets, from its tool's tier (`floor`): an agent's
 * write (or action that commits a ChangeSet) is raised by what it does,
 * after compile and plan; anything else keeps its floor. Every door that runs a route as a named tool asks here,
 * and runs the call it gets back (pinned to the judged revision).
 */
export async function callTier(d: Dispatcher, route: Route, floor: Tier, call: Call): Promise<{ tier: Tier; call: Call; dryRun?: DryRunVerdict }> {
  if (call.caller.kind !== "agent") return { tier: floor, call };
  if (!changesTree(route)) {
    const preview = actionPreview(route, call, floor);
    return preview ? { tier: "autonomous_write", call, dryRun: preview } : { tier: floor, call };
  }
  const policy = (await d.box.model()).policy;
  const judged = await agentWriteTier(route, call.caller, policy, floor, () => proposeOnly(d, route, call));
  if (judged.dryRun) return { tier: "autonomous_write", call, dryRun: judged.dryRun };
  return { tier: judged.tier, call: pinnedTo(call, judged) };
}

/** A gated call queued for a person and recorded as such: the reply its caller gets. */
export async function queueForPerson(d: Dispatcher, route: Route, tool: string, call: Call, started: number, why?: string): Promise<ReturnType<typeof pendingReply>> {
  let approval: Awaited<ReturnType<typeof d.approvals.enqueue>>;
  try {
    approval = await d.approvals.enqueue(tool, route, call);
  } catch (err) {
    // Refused before it could be queued (arguments the route refuses, a change that breaks the tree, too many waiting): one audit row too.
    const api = apiErrorOf(err);
    d.audit.record({ call, route, outcome: "error", errorCode: api instanceof ApiError ? api.code : "system.internal", durationMs: performance.now() - started, tool });
    throw err;
  }
  d.audit.record({ call, route, outcome: "pending_approval", durationMs: performance.now() - started, approvalId: approval.id, planId: approval.plan_id ?? undefined, tool });
  return pendingReply(approval, why);
}
