import type { Model } from "../compiler/index.js";
import type { Diagnostic, Plan } from "../schema/index.js";
import { Backoff } from "./backoff.js";
import type { SlotDriver } from "./drivers/driver.js";
import { executePlan, type ExecEvent, type StepResult } from "./execute.js";
import { acquireLock, LockedError } from "./lock.js";
import { observe } from "./observe.js";
import { planChanges } from "./plan.js";
import type { HermesCredentials, Inventory, Observed, ObservedSlot } from "./observed.js";
import { StateStore } from "./state.js";
import { refreshConditions } from "./conditions-store.js";
import { HealthCache } from "./health-cache.js";
import { TreeCache } from "./tree-cache.js";

/** What one sweep did. A sweep with nothing to do writes nothing. */
export interface SweepReport {
  readonly at: string;
  readonly outcome: "nothing_to_do" | "converged" | "failed" | "invalid_config" | "locked";
  /** The tree's error diagnostics when it does not compile (the last good model stays in force). */
  readonly diagnostics: readonly Diagnostic[];
  readonly plan?: Plan;
  readonly results: readonly StepResult[];
  /** Changes held back by the per-resource backoff, with why. */
  readonly deferred: ReadonlyArray<{ readonly address: string; readonly why: string }>;
}

export interface SweeperOptions {
  readonly root: string;
  readonly state: StateStore;
  /** Builds the runtime for a model (the composition root decides docker or process). */
  readonly driverFor: (model: Model) => Promise<SlotDriver>;
  readonly onEvent?: (event: ExecEvent) => void;
  readonly now?: () => number;
  /** Every running slot's /health is probed at least this often (default FULL_PROBE_MS); answers in between are reused. */
  readonly fullProbeMs?: number;
  /** The agent tokens hal0 hands on to Hermes profiles (the composition root's TokenStore); without them profiles get no Authorization header. */
  readonly hermesCredentials?: HermesCredentials;
}

/**
 * One reconcile sweep: compile the whole tree, observe, plan, execute —
 * the same pipeline as `hal0 apply`, without asking. Level-triggered: it
 * never looks at what triggered it. A tree with errors changes nothing and
 * keeps the last good model for the interval; failures back off per resource.
 */
export class Sweeper {
  private readonly backoff = new Backoff();
  private readonly health: HealthCache;
  private readonly tree: TreeCache;
  private last?: Model;
  private lastPlan?: { readonly model: Model; readonly key: string; readonly plan: Plan };

  constructor(private readonly options: SweeperOptions) {
    this.tree = new TreeCache(options.root);
    this.health = new HealthCache(options.fullProbeMs);
  }

  /** How the last sweep got its model: "stat" (no file changed), "text" (files touched, texts equal) or "compiled". */
  get lastTreeReuse() {
    return this.tree.lastReuse;
  }

  /** The last model that compiled, which decides the sweep interval. */
  get lastGoodModel(): Model | undefined {
    return this.last;
  }

  async sweep(): Promise<SweepReport> {
    const now = this.options.now ?? Date.now;
    const at = new Date(now()).toISOString();
    const { model, diagnostics } = await this.tree.load();
    if (!model) return { at, outcome: "invalid_config", diagnostics: diagnostics.filter((d) => d.severity === "error"), results: [], deferred: [] };
    this.last = model;
    const driver = await this.options.driverFor(model);
    // Plan without the lock: a sweep with nothing to do writes nothing, not even a lock file.
    const seen = await this.observeWithHealth(model, driver, now());
    const first = this.schedule(this.plan(model, seen.observed, seen.inventory), now());
    if (!first.runnable.has_changes) {
      await refreshConditions(model, seen.observed, this.options.state, now, true, first.plan);
      return { at, outcome: "nothing_to_do", diagnostics: [], plan: first.plan, results: [], deferred: first.deferred };
    }
    let release: () => Promise<void>;
    try {
      release = await acquireLock(this.options.state.dir, "hal0 reconcile (sweep)");
    } catch (err) {
      if (err instanceof LockedError) return { at, outcome: "locked", diagnostics: [], plan: first.plan, results: [], deferred: first.deferred };
      throw err;
    }
    try {
      // Under the lock, observe again: another apply may have moved the box meanwhile.
      const again = await observe(model, driver, this.options.state, { health: false, hermesCredentials: this.options.hermesCredentials });
      const report = await this.execute(model, driver, this.schedule(planChanges(model, again.observed, again.inventory), now()), at, now);
      this.health.clear(); // runners moved: the next observation probes every one
      await refreshConditions(model, (await this.observeWithHealth(model, driver, now())).observed, this.options.state, now);
      return report;
    } finally {
      await release();
    }
  }

  /**
   * planChanges, or the last plan when its inputs are the same: the same
   * model object (the tree cache returns it while no file changed) and
   * byte-equal observation and inventory. The planner is pure, so this is
   * exact; it spares an idle sweep hashing every slot's views into the plan id.
   */
  private plan(model: Model, observed: Observed, inventory: Inventory): Plan {
    const key = `${JSON.stringify(observed)}\n${JSON.stringify(inventory)}`;
    if (this.lastPlan?.model === model && this.lastPlan.key === key) return this.lastPlan.plan;
    const plan = planChanges(model, observed, inventory);
    this.lastPlan = { model, key, plan };
    return plan;
  }

  /** An observation whose health (which only feeds conditions) probes just what the cache has no fresh answer for. */
  private async observeWithHealth(model: Model, driver: SlotDriver, at: number) {
    const probing = this.health.begin(at);
    const seen = await observe(model, driver, this.options.state, { ...probing.options, hermesCredentials: this.options.hermesCredentials });
    return { ...seen, observed: { ...seen.observed, slots: bySlot(probing.finish(Object.values(seen.observed.slots))) } };
  }

  private async execute(model: Model, driver: SlotDriver, scheduled: Scheduled, at: string, now: () => number): Promise<SweepReport> {
    const { plan, runnable, deferred } = scheduled;
    if (!runnable.has_changes) return { at, outcome: "nothing_to_do", diagnostics: [], plan, results: [], deferred };
    const results = await executePlan(runnable, {
      driver, state: this.options.state, cwd: model.root, onEvent: this.options.onEvent, now, hermesCredentials: this.options.hermesCredentials,
      healthTimeoutS: model.settings.slots.health_timeout_s, stopGraceS: model.settings.slots.stop_grace_s, parallel: model.settings.slots.parallel,
    });
    for (const r of results) {
      const change = runnable.changes.find((c) => c.address === r.address)!;
      if (r.ok) this.backoff.succeeded(r.address);
      else this.backoff.failed(r.address, specHashOf(change.after ?? change.before), r.code ?? "slot.apply_failed", now());
    }
    return { at, outcome: results.every((r) => r.ok) ? "converged" : "failed", diagnostics: [], plan, results, deferred };
  }

  /** The plan minus the changes whose resource is backing off. */
  private schedule(plan: Plan, now: number): Scheduled {
    const deferred: Array<{ address: string; why: string }> = [];
    const changes = plan.changes.map((c) => {
      const why = c.action === "no-op" ? undefined : this.backoff.waiting(c.address, specHashOf(c.after ?? c.before), now);
      if (why === undefined) return c;
      deferred.push({ address: c.address, why });
      return { ...c, action: "no-op" as const, reason: "backing_off" };
    });
    return { plan, runnable: { ...plan, changes, has_changes: changes.some((c) => c.action !== "no-op") }, deferred };
  }
}

/** A plan, the same plan minus what backs off (runnable), and what was held back. */
interface Scheduled {
  readonly plan: Plan;
  readonly runnable: Plan;
  readonly deferred: Array<{ address: string; why: string }>;
}

function specHashOf(view: unknown): string {
  return (view as { spec_hash?: string } | null)?.spec_hash ?? "";
}

function bySlot(slots: readonly ObservedSlot[]): Record<string, ObservedSlot> {
  return Object.fromEntries(slots.map((s) => [s.name, s]));
}
