import type { Model } from "../compiler/index.js";
import type { Change, Plan } from "../schema/index.js";
import type { Backoff } from "./backoff.js";
import { removeStaleTemps } from "./atomic.js";
import { refreshConditions } from "./conditions-store.js";
import { describeMoves, imageMoves } from "./digest.js";
import { DriverError, INTERRUPTED, type SlotDriver } from "./drivers/driver.js";
import { executePlan, type ExecEvent, type StepResult } from "./execute.js";
import { acquireLock } from "./lock.js";
import { observe } from "./observe.js";
import type { HermesCredentials, Inventory, Observed } from "./observed.js";
import { planChanges, type PlanOptions } from "./plan.js";
import type { StateStore } from "./state.js";

/**
 * The one way the box is changed: lock the state folder, observe, plan (the
 * caller's choices are planner options: `replace`, `only`, `destroy`,
 * `hermesDefault`), let the caller review, hold back what backs off, execute,
 * record the backoff, refresh the conditions, unlock. The sweep, `hal0
 * apply`, `hal0 down`, a slot restart, `hermes_sync` and `hal0 agent
 * reprovision` all come through here, so each decision is made once, by the
 * planner; the executor and the drivers only carry the plan out. It is the
 * only caller of `executePlan` (test/architecture.test.ts holds that).
 */

/** What is converged: the compiled tree, its runtime and its state folder. */
export interface ConvergeTarget {
  readonly model: Model;
  /**
   * The slots' runtime. May be left out only when `only` selects no slot (a
   * Hermes-only repair needs no engine); the observation then has no slots.
   */
  readonly driver?: SlotDriver;
  readonly state: StateStore;
  /** The agent tokens Hermes profiles get (the composition root's TokenStore); without them no Authorization header is written. */
  readonly hermesCredentials?: HermesCredentials;
}

export interface ConvergeOptions {
  /** Who holds the state folder's lock meanwhile (`apply.lock` names it). A held lock throws `LockedError`. */
  readonly holder: string;
  /** The caller's choices, as planner options. */
  readonly plan?: PlanOptions;
  /**
   * A saved plan (`hal0 plan --out`, secrets masked): what runs is the plan
   * made afresh from the config and the box, which must be this one (the same
   * id: the same config digest, observations and changes); refused with
   * `PlanStaleError` when what it was made from moved.
   */
  readonly saved?: Plan;
  /**
   * Sees every plan before anything runs, also one with nothing to do
   * (`hal0 apply` prints it and asks); false cancels. A throw propagates, the
   * lock released.
   */
  readonly review?: (plan: Plan) => boolean | Promise<boolean>;
  /** The sweep's per-resource backoff: changes of a resource still waiting are held back (no-op, reason `backing_off`); each step's outcome is recorded. */
  readonly backoff?: Backoff;
  /**
   * How conditions are refreshed after a plan ran: `probe` (default) observes
   * again with `/health` probes; a function returns that observation (the
   * sweep's health cache); `skip` leaves them to the next sweep.
   */
  readonly conditions?: "probe" | "skip" | ((model: Model, driver: SlotDriver) => Promise<Observed>);
  /** Slots started or stopped at once (default `[slots] parallel`). */
  readonly parallel?: number;
  readonly onEvent?: (event: ExecEvent) => void;
  readonly now?: () => number;
  /** Interrupts the apply (executePlan's `signal`): the outcome is then `interrupted`, the lock released as always. */
  readonly signal?: AbortSignal;
}

export interface Converged {
  readonly outcome: "nothing_to_do" | "converged" | "failed" | "cancelled" | "interrupted";
  /** What the planner said (or the saved plan). */
  readonly plan: Plan;
  /** What ran: the plan minus the changes held back. */
  readonly runnable: Plan;
  readonly deferred: ReadonlyArray<{ readonly address: string; readonly why: string }>;
  readonly results: readonly StepResult[];
  /** The observation the plan was made from, under the lock. */
  readonly observed: Observed;
  /**
   * The steps ran, but the box could not be observed after them to refresh its
   * conditions (the engine went away: `runtime.unavailable`): they stay as they
   * were until the next observation. The results still say what was done.
   */
  readonly unobserved?: { readonly code: string; readonly message: string };
}

/** A saved plan whose config or observed resources moved since it was made. */
export class PlanStaleError extends Error {
  constructor(readonly moved: readonly string[]) {
    super(`the plan is stale; re-run hal0 plan:\n${moved.map((m) => `  - ${m}`).join("\n")}`);
  }
}

export async function converge(target: ConvergeTarget, options: ConvergeOptions): Promise<Converged> {
  const now = options.now ?? Date.now;
  const release = await acquireLock(target.state.dir, options.holder);
  try {
    // A killed apply's steps never ended: they say nothing now, and are not left behind; nor are the temps of writers that died mid-write.
    // The inventory names the folder it is in, so a copy of the folder (cp -a) can tell it is one, and the config folder it converges to.
    // Housekeeping, done while the box is observed (a no-op apply does not wait on a folder walk); a failure of it fails nothing.
    const housekeeping = Promise.all([target.state.clearSteps(), target.state.folders().then(removeStaleTemps), target.state.recordFolder(target.model.root)]).catch(() => undefined);
    const { observed, inventory } = await observeFor(target, options.plan).finally(() => housekeeping);
    const plan = planChanges(target.model, observed, inventory, options.plan);
    if (options.saved) {
      const moved = describeMoves(options.saved, observed, target.model.digest);
      if (moved.length > 0) throw new PlanStaleError(moved);
      // Its file holds no secret (an env value is masked), so it is not what runs: the same plan made again is.
      if (plan.id !== options.saved.id) {
        const images = imageMoves(options.saved, plan);
        throw new PlanStaleError(images.length > 0 ? images : [`the plan made from this config and box is ${plan.id}, not the saved ${options.saved.id}`]);
      }
    }
    if (options.review && !(await options.review(plan))) {
      return { outcome: "cancelled", plan, runnable: plan, deferred: [], results: [], observed };
    }
    const { runnable, deferred } = holdBack(plan, options.backoff);
    if (!runnable.has_changes) return { outcome: "nothing_to_do", plan, runnable, deferred, results: [], observed };
    const { slots } = target.model.settings;
    const results = await executePlan(runnable, {
      driver: target.driver, state: target.state, cwd: target.model.root, onEvent: options.onEvent, now,
      hermesCredentials: target.hermesCredentials,
      healthTimeoutS: slots.health_timeout_s, stopGraceS: slots.stop_grace_s, parallel: options.parallel ?? slots.parallel, signal: options.signal,
    });
    if (options.backoff) recordOutcomes(options.backoff, runnable, results);
    // A first apply made the inventory just now: it names its folders from the start.
    await target.state.recordFolder(target.model.root).catch(() => undefined);
    // An engine gone after the steps ran does not take their results with it: what was done is recorded, and said.
    const unobserved = await refreshAfter(target, options.conditions ?? "probe", now, options.plan?.destroy === true).then(() => undefined, (err: unknown) => {
      if (err instanceof DriverError && err.code === "runtime.unavailable") return { code: err.code, message: err.message };
      throw err;
    });
    const outcome = results.some((r) => r.code === INTERRUPTED) ? "interrupted" : results.every((r) => r.ok) ? "converged" : "failed";
    return { outcome, plan, runnable, deferred, results, observed, ...(unobserved ? { unobserved } : {}) };
  } finally {
    // Every step has ended (or was cut short): nothing is under way once the lock goes, so its record goes first.
    await target.state.clearSteps().catch(() => undefined);
    await release();
  }
}

/**
 * Observe and plan without the lock and without executing: what `hal0 plan`,
 * `hal0 drift`, a reprovision preview and the sweep's idle check show.
 */
export async function previewPlan(target: ConvergeTarget, options: PlanOptions = {}): Promise<{ plan: Plan; observed: Observed; inventory: Inventory }> {
  const { observed, inventory } = await observeFor(target, options);
  return { plan: planChanges(target.model, observed, inventory, options), observed, inventory };
}

/** The plan minus the changes whose resource is backing off (each turned into a no-op, reason `backing_off`), and why each waits. */
export function holdBack(plan: Plan, backoff: Backoff | undefined): { runnable: Plan; deferred: Array<{ address: string; why: string }> } {
  if (backoff === undefined) return { runnable: plan, deferred: [] };
  const deferred: Array<{ address: string; why: string }> = [];
  const changes = plan.changes.map((c): Change => {
    const why = c.action === "no-op" ? undefined : backoff.waiting(c.address, specHashOf(c));
    if (why === undefined) return c;
    deferred.push({ address: c.address, why });
    return heldBack(c);
  });
  return { runnable: { ...plan, changes, has_changes: changes.some((c) => c.action !== "no-op") }, deferred };
}

function heldBack(change: Change): Change {
  switch (change.kind) {
    case "slot": return { ...change, action: "no-op", reason: "backing_off" };
    case "settings": return { ...change, action: "no-op", reason: "backing_off" };
    case "hermes": return { ...change, action: "no-op", reason: "backing_off" };
  }
}

function recordOutcomes(backoff: Backoff, plan: Plan, results: readonly StepResult[]): void {
  for (const r of results) {
    const change = plan.changes.find((c) => c.address === r.address);
    if (change === undefined || r.code === INTERRUPTED) continue; // not a failure of the resource: no backoff
    if (r.ok && r.restarts !== undefined) backoff.crashed(r.address, specHashOf(change), r.restarts);
    else if (r.ok) backoff.succeeded(r.address);
    else backoff.failed(r.address, specHashOf(change), r.code ?? "slot.apply_failed");
  }
}

/** A slot change's spec hash (desired, else recorded): a new spec retries at once. Other kinds have none. */
function specHashOf(change: Change): string {
  return change.kind === "slot" ? (change.after ?? change.before)?.spec_hash ?? "" : "";
}

async function observeFor(target: ConvergeTarget, options: PlanOptions = {}): Promise<{ observed: Observed; inventory: Inventory }> {
  // `hal0 down` plans no Hermes change, so it reads no agent token: it needs only the inventory and the runtime, and
  // still stops the box when hal0.db, which holds the tokens, cannot be opened (damaged, a disk that failed).
  // Nor does it read hermes-managed.json: one that does not parse (state.corrupt) stops plan and apply, not down.
  const observeOptions = { health: false, hermesCredentials: options.destroy ? undefined : target.hermesCredentials, hermesDefault: options.hermesDefault, ...(options.destroy ? { hermesRecord: false } : {}) };
  if (target.driver === undefined && selectsSlots(options)) throw new Error("converge: slots are planned but no runtime was given");
  return observe(target.model, target.driver, target.state, observeOptions);
}

/** Whether a plan with these options may hold slot changes. */
function selectsSlots(options: PlanOptions): boolean {
  const only = options.only;
  return only === undefined || (only.kinds ?? []).includes("slot") || (only.addresses ?? []).some((a) => a.startsWith("slot."));
}

/** `destroy` (`hal0 down`): observed without agent tokens, as it planned; the Hermes conditions stay as recorded, no Hermes file having moved. */
async function refreshAfter(target: ConvergeTarget, how: NonNullable<ConvergeOptions["conditions"]>, now: () => number, destroy: boolean): Promise<void> {
  if (how === "skip" || target.driver === undefined) return;
  const observed = how === "probe"
    ? (await observe(target.model, target.driver, target.state, destroy ? { hermesRecord: false } : { hermesCredentials: target.hermesCredentials })).observed
    : await how(target.model, target.driver);
  await refreshConditions(target.model, observed, target.state, now, true, undefined, undefined, destroy);
}
