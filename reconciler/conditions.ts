import { heldUnplaced, type Unplaced } from "./nodes.js";
import { imageUnobserved } from "./view.js";
import type { ObservedNode, ObservedSlot, SlotView } from "./observed.js";
import type { SlotOutcome, SlotStep } from "./state.js";
import { CRASH_WINDOW_MS, crashDelayMs, NEEDS_FIX_CODES } from "./backoff.js";
import type { Diagnostic } from "../schema/index.js";
import { isAdvisory, type AdvisoryProblem, type Finding, type PreflightProblem } from "./preflight.js";

/**
 * Kubernetes-style conditions for each resource, derived from what was
 * observed and what the last apply step did. Pure: the caller persists them
 * (`conditions.json`) and `hal0 status` shows them. A condition keeps its
 * lastTransitionTime while its status stays the same.
 */
export const CONDITION_TYPES = ["Ready", "Reconciling", "Stalled", "Degraded"] as const;
export type ConditionType = (typeof CONDITION_TYPES)[number];

export interface Condition {
  readonly type: ConditionType;
  readonly status: "True" | "False" | "Unknown";
  readonly reason: string;
  readonly message: string;
  readonly lastTransitionTime: string;
  /** The resource's generation these conditions describe (bumped when its desired spec changes). */
  readonly observedGeneration: number;
}

/** What conditions.json keeps per resource. */
export interface ResourceConditions {
  readonly generation: number;
  /** The desired spec hash the generation stands for. */
  readonly spec_hash: string;
  readonly conditions: readonly Condition[];
}

export interface SlotFacts {
  /** Desired spec hash; undefined when the slot is not desired or disabled. */
  readonly desiredHash?: string;
  /** Whether hal0 started it (its inventory names it); undefined when not known. One it did not start is never stopped. */
  readonly managed?: boolean;
  readonly seen?: ObservedSlot;
  readonly outcome?: SlotOutcome;
  /**
   * The step an apply runs on the slot now (`steps.json`), if any: until it
   * ends the slot is Reconciling (Stopping, Starting), whatever the runtime's
   * record already says, and a runner not answering yet is starting, not
   * unhealthy.
   */
  readonly step?: SlotStep;
  /**
   * What the preflight found wrong on the host for this slot (preflight.ts: a
   * runner not found, a model file missing). The planner never sees them: a
   * slot that would start with them is Stalled (RunnerNotFound, ModelMissing,
   * …), one that runs the desired spec anyway is Degraded (a restart would fail).
   * Advisory findings (a ctx_size above the model's training context, a
   * models.toml fact its GGUF header contradicts) change neither: the runner
   * starts with them.
   */
  readonly preflight?: readonly Finding[];
  /**
   * The argv check's errors for this slot (its runner would refuse the argv:
   * `slot.runner_flag_unknown`, `_removed`, `_value`). The planner makes a
   * create or replace of such a slot a no-op (`argv_refused`), so it is
   * Stalled (RunnerRefusesArgv) until the TOML is fixed, never a crash loop.
   */
  readonly refused?: readonly Diagnostic[];
  /**
   * Why the planner holds this desired slot rather than start it (a swarm
   * slot no ready node takes: nodes.ts's heldUnplaced). Nothing is pending
   * then, and the slot is Degraded (`NodeDown`, `Unschedulable`) until a node
   * that fits is ready again.
   */
  readonly unplaced?: Unplaced;
  /**
   * It runs, and its image's digest cannot be read now (the image removed or
   * untagged on the engine, or the engine not answering the probe): the
   * planner leaves it running (`image_unobserved`), so no change is pending
   * and what it runs is not known to be older (view.ts imageUnobserved).
   */
  readonly imageUnobserved?: boolean;
  /**
   * `[slots] health_timeout_s`: a runner that no apply waits for (its start
   * interrupted: Ctrl-C, a killed apply) and that still answers 503 past it
   * is Degraded (`WarmingTooLong`), where an apply waiting for it would have
   * stopped it (`slot.health_failed`). Undefined: not known, never said.
   */
  readonly healthTimeoutS?: number;
}

export type Verdict = Pick<Condition, "status" | "reason" | "message">;

/** The four conditions of a slot now, carrying transition times over from `previous`. */
export function slotConditions(facts: SlotFacts, previous: ResourceConditions | undefined, now: string): ResourceConditions {
  const verdicts: Record<ConditionType, Verdict> = {
    Ready: ready(facts),
    Reconciling: reconciling(facts),
    Stalled: stalled(facts),
    Degraded: degraded(facts, Date.parse(now)),
  };
  return withHistory(verdicts, facts.desiredHash ?? "", previous, now);
}

/**
 * Verdicts as conditions: the generation moves when `hash` (the desired spec
 * the resource stands for) does, and a condition keeps its
 * lastTransitionTime while its status stays the same.
 */
export function withHistory(verdicts: Record<ConditionType, Verdict>, hash: string, previous: ResourceConditions | undefined, now: string): ResourceConditions {
  const generation = previous === undefined ? 1 : previous.spec_hash === hash ? previous.generation : previous.generation + 1;
  const conditions = CONDITION_TYPES.map((type) => {
    const before = previous?.conditions.find((c) => c.type === type);
    const v = verdicts[type];
    const since = before && before.status === v.status ? before.lastTransitionTime : now;
    return { type, ...v, lastTransitionTime: since, observedGeneration: generation };
  });
  return { generation, spec_hash: hash, conditions };
}

function ready({ desiredHash, seen, step, unplaced, imageUnobserved }: SlotFacts): Verdict {
  if (desiredHash === undefined) return { status: "False", reason: "Disabled", message: "the slot is disabled or not in the config" };
  if (!seen?.running && seen?.starting !== undefined) return { status: "False", reason: "Starting", message: seen.starting.message };
  if (!seen?.running) return { status: "False", reason: "NotRunning", message: seen?.detail ?? unplaced?.message ?? "no runner is running" };
  if (seen.record?.view.spec_hash !== desiredHash && !imageUnobserved) return { status: "False", reason: "SpecOutdated", message: "it runs an older spec; hal0 plan shows the difference" };
  if (seen.health === "ok") return { status: "True", reason: "Healthy", message: "GET /health answers 200" };
  if (seen.health === "loading") return { status: "False", reason: "Warming", message: "GET /health answers 503 while the model loads" };
  if (starting(step)) return { status: "False", reason: "Starting", message: "its runner was just launched; hal0 waits for GET /health to answer" };
  return { status: "Unknown", reason: "NoHealthAnswer", message: "GET /health does not answer" };
}

/** A start under way: the runner is being launched or loads, and the apply waits for its `/health`. */
function starting(step: SlotStep | undefined): boolean {
  return step !== undefined && step.phase !== "stopping";
}

function reconciling({ desiredHash, managed, seen, step, unplaced, imageUnobserved }: SlotFacts): Verdict {
  if (step !== undefined) {
    const what = step.action === "create" ? "creating" : step.action === "replace" ? "replacing" : "stopping";
    if (step.phase === "stopping") return { status: "True", reason: "Stopping", message: `an apply is ${what} it: its runner is being stopped` };
    const now = step.phase === "warming" ? "the model loads (GET /health answers 503)" : step.phase === "ready" ? "GET /health answers 200; the step is being recorded" : "its runner is being launched";
    return { status: "True", reason: "Starting", message: `an apply is ${what} it: ${now}` };
  }
  // A disabled (or removed) slot whose runner still runs is to be stopped: not converged yet either.
  if (desiredHash === undefined && seen?.running) {
    // …unless hal0 did not start it: the plan leaves it alone (slot.unmanaged), and so must this.
    if (managed === false) return { status: "False", reason: "Unmanaged", message: "hal0 did not start it (its inventory does not name it) and leaves it alone" };
    return { status: "True", reason: "ChangePending", message: "the next apply or sweep stops this slot" };
  }
  // The planner holds it (a no-op, reason unplaced): no apply changes it until a node that fits is ready.
  if (desiredHash !== undefined && unplaced !== undefined) return { status: "False", reason: "Unplaced", message: "no apply or sweep starts it until a ready, active node matches its placement (hal0 plan: unplaced)" };
  if (desiredHash !== undefined && seen?.running && imageUnobserved) {
    return { status: "False", reason: "ImageUnobserved", message: "its image's digest cannot be read now (the image was removed or untagged on the engine, or the engine did not answer): it keeps running the image it was started with, and no apply or sweep replaces it until the digest can be read (hal0 plan: image_unobserved)" };
  }
  // Swarm starts its task (again, after its runner exited), as desired: no apply or sweep re-creates it meanwhile.
  if (desiredHash !== undefined && !seen?.running && seen?.starting !== undefined && seen.record?.view.spec_hash === desiredHash) {
    return { status: "True", reason: "Starting", message: `${seen.starting.message}; no apply or sweep re-creates it meanwhile` };
  }
  const pending = desiredHash !== undefined && (!seen?.running || seen.record?.view.spec_hash !== desiredHash);
  return pending
    ? { status: "True", reason: "ChangePending", message: "the next apply or sweep changes this slot" }
    : { status: "False", reason: "Converged", message: "nothing to do" };
}

/**
 * The slot's last step when it failed and still counts: while the slot is
 * wanted, or still runs (a stop that failed). One disabled since (or removed
 * from the config) and stopped has nothing left to fix; its failure said
 * Degraded, and Stalled "retried every few minutes", for good.
 */
function failedStep({ desiredHash, seen, outcome }: SlotFacts): SlotOutcome | undefined {
  return outcome && !outcome.ok && (desiredHash !== undefined || seen?.running) ? outcome : undefined;
}

function stalled(facts: SlotFacts): Verdict {
  const outcome = failedStep(facts);
  const refused = refusedVerdict(facts);
  if (refused !== undefined && !runsDesired(facts)) return refused;
  const found = preflightVerdict(facts);
  if (found !== undefined && !runsDesired(facts)) return { ...found, message: `${found.message} — hal0 apply would fail until it is fixed` };
  if (outcome?.code && NEEDS_FIX_CODES.has(outcome.code)) {
    return { status: "True", reason: outcome.code, message: `${outcome.error ?? ""} — retried every few minutes, at once when its spec changes or on a reload`.trim() };
  }
  return { status: "False", reason: "Progressing", message: "no terminal failure" };
}

function degraded(facts: SlotFacts, now: number): Verdict {
  const { seen, outcome } = facts;
  const failed = failedStep(facts);
  if (failed) return { status: "True", reason: failed.code ?? "ApplyFailed", message: failed.error ?? "the last apply step failed" };
  // Died within 10 min of becoming ready, twice or more in a row (one crash is no loop): until it runs 10 min.
  const restarts = outcome?.restarts ?? 0;
  // A restart "after" now (the clock set back since) is of unknown age: out of the window, as the next death's count takes it (execute.ts).
  const sinceRestart = restarts >= 2 ? now - Date.parse(outcome!.at) : NaN;
  if (sinceRestart >= 0 && sinceRestart < CRASH_WINDOW_MS) {
    return { status: "True", reason: "CrashLoop", message: `started again ${restarts} times in a row after dying within ${CRASH_WINDOW_MS / 60_000} min of becoming ready; if it dies again, its restart waits ${crashDelayMs(restarts) / 1000} s (10 s doubling up to 5 min), until it runs ${CRASH_WINDOW_MS / 60_000} min` };
  }
  // Swarm restarts a runner that exits (a swarm slot): one it restarted twice or more within the window keeps dying.
  if (seen?.starting !== undefined && seen.starting.failed >= 2 && facts.step === undefined) {
    return { status: "True", reason: "CrashLoop", message: `${seen.starting.message}; Swarm starts it again a few seconds after each exit, for as long as its service exists` };
  }
  const found = preflightVerdict(facts);
  if (found !== undefined && runsDesired(facts)) return { ...found, message: `${found.message} — it runs, but a restart would fail` };
  // (Not while an apply starts or stops it: a runner launched or stopping does not answer yet, or any more.)
  if (seen?.running && seen.health === "down" && facts.step === undefined) return { status: "True", reason: "Unhealthy", message: "running, but GET /health does not answer" };
  const loadingS = seen?.running && seen.health === "loading" && facts.step === undefined && facts.healthTimeoutS !== undefined ? (now - Date.parse(seen.record?.started_at ?? "")) / 1000 : NaN;
  if (loadingS > facts.healthTimeoutS!) {
    return { status: "True", reason: "WarmingTooLong", message: `GET /health still answers 503 ${Math.floor(loadingS)} s after its runner started, past [slots] health_timeout_s (${facts.healthTimeoutS} s): no apply waits for it (its start was interrupted), where one would have stopped it (slot.health_failed); see its log, and restart or stop the slot` };
  }
  const unplaced = facts.unplaced ?? seen?.unplaced;
  if (unplaced !== undefined) return { status: "True", reason: unplaced.reason === "node_down" ? "NodeDown" : "Unschedulable", message: unplaced.message };
  return { status: "False", reason: "AsExpected", message: "no failure" };
}

/**
 * The condition reason of each preflight problem apply would fail on (Stalled,
 * or Degraded for a slot that runs anyway), keyed by the finding's problem:
 * `slot.runner_missing` is RunnerNotFound or RunnerNotExecutable.
 */
export const PREFLIGHT_REASONS: Readonly<Record<Exclude<PreflightProblem, AdvisoryProblem>, string>> = {
  runner_not_found: "RunnerNotFound",
  runner_not_executable: "RunnerNotExecutable",
  model_missing: "ModelMissing",
  model_unreadable: "ModelUnreadable",
};

/**
 * The preflight's findings of a desired slot as a verdict: the first blocking
 * one's reason, every blocking summary. Advisory findings
 * (`slot.ctx_exceeds_training`, `slot.model_fact_mismatch`) are left out on
 * purpose: the runner starts with them, so they make a slot neither Stalled
 * nor Degraded (validate and plan show them).
 */
function preflightVerdict({ desiredHash, preflight }: SlotFacts): Verdict | undefined {
  const blocking = preflight?.filter((f): f is Finding & { problem: keyof typeof PREFLIGHT_REASONS } => !isAdvisory(f)) ?? [];
  if (desiredHash === undefined || blocking.length === 0) return undefined;
  return { status: "True", reason: PREFLIGHT_REASONS[blocking[0]!.problem], message: blocking.map((f) => f.summary).join("; ") };
}

/** The argv check's errors of a desired slot as a verdict: each located, with its code. */
function refusedVerdict({ desiredHash, refused }: SlotFacts): Verdict | undefined {
  if (desiredHash === undefined || !refused?.length) return undefined;
  const each = refused.map((d) => `${d.file}:${d.line}:${d.column}: ${d.code}: ${d.summary}`);
  return { status: "True", reason: "RunnerRefusesArgv", message: `its runner would refuse the argv, so hal0 does not start it: ${each.join("; ")}` };
}

/** The slot runs the desired spec (nothing would be started for it). */
function runsDesired({ desiredHash, seen }: SlotFacts): boolean {
  return seen?.running === true && seen.record?.view.spec_hash === desiredHash;
}

/**
 * Every slot's conditions from one observation: desired slots, observed ones
 * and those with a recorded outcome. Returns the new map and whether it
 * differs from `previous` (so a sweep with nothing new writes nothing).
 */
export function allSlotConditions(
  desired: Readonly<Record<string, { enabled: boolean; spec_hash: string; spec?: SlotView["spec"]; runner?: { diagnostics: readonly Diagnostic[] } }>>,
  observed: Readonly<Record<string, ObservedSlot>>,
  outcomes: Readonly<Record<string, SlotOutcome>>,
  previous: Readonly<Record<string, ResourceConditions>>,
  now: string,
  /** The preflight's findings (any slot's; each slot gets its own). */
  findings: readonly Finding[] = [],
  /** The slot steps an apply runs now (`steps.json`). */
  steps: Readonly<Record<string, SlotStep>> = {},
  /** A multi-node runtime's nodes (Observed.nodes): a desired slot the planner holds for want of one is not pending (heldUnplaced). */
  nodes?: readonly ObservedNode[],
  /** The slots hal0 started (the inventory's); undefined: not known. */
  managed?: ReadonlySet<string>,
  /** `[slots] health_timeout_s` (SlotFacts.healthTimeoutS). */
  healthTimeoutS?: number,
): { next: Record<string, ResourceConditions>; changed: boolean } {
  // outcomes.json also keeps `settings` and `hermes.<p>` (names with a dot, which no slot name has).
  const names = new Set([...Object.keys(desired), ...Object.keys(observed), ...Object.keys(outcomes).filter((n) => !n.includes("."))]);
  const next: Record<string, ResourceConditions> = {};
  for (const name of [...names].sort()) {
    const d = desired[name];
    const address = `slot.${name}`;
    const preflight = findings.filter((f) => f.slot === name);
    const refused = d?.runner?.diagnostics.filter((x) => x.severity === "error");
    const unplaced = d?.enabled && d.spec !== undefined ? heldUnplaced({ spec: d.spec, spec_hash: d.spec_hash }, observed[name], nodes) : undefined;
    const recorded = observed[name]?.record?.view;
    const unobserved = d?.enabled === true && d.spec !== undefined && recorded !== undefined && imageUnobserved(recorded, { spec: d.spec });
    next[address] = slotConditions({ desiredHash: d?.enabled ? d.spec_hash : undefined, managed: managed?.has(name), seen: observed[name], outcome: outcomes[name], step: steps[name], preflight, refused, unplaced, imageUnobserved: unobserved, healthTimeoutS }, previous[address], now);
  }
  return { next, changed: JSON.stringify(next) !== JSON.stringify(previous) };
}
