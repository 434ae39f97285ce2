import type { Model, SourceTree } from "../compiler/index.js";
import type { Diagnostic, Plan } from "../schema/index.js";
import { Backoff, monotonicMs } from "./backoff.js";
import type { SlotDriver } from "./drivers/driver.js";
import { converge, holdBack } from "./converge.js";
import type { ExecEvent, StepResult } from "./execute.js";
import { LockedError, type LockHolder } from "./lock.js";
import { observe } from "./observe.js";
import { planChanges } from "./plan.js";
import type { HermesCredentials, Inventory, Observed, ObservedSlot } from "./observed.js";
import { StateStore } from "./state.js";
import { refreshConditions } from "./conditions-store.js";
import { HealthCache } from "./health-cache.js";
import type { RunnerProbe } from "./runner-probe.js";
import { TreeCache } from "./tree-cache.js";

/** What one sweep did. A sweep with nothing to do writes nothing. */
export interface SweepReport {
  readonly at: string;
  /** `interrupted`: the loop was stopping (its converge's signal) and the sweep left steps to the next one. */
  readonly outcome: "nothing_to_do" | "converged" | "failed" | "invalid_config" | "locked" | "interrupted";
  /** The tree's error diagnostics when it does not compile (the last good model stays in force). */
  readonly diagnostics: readonly Diagnostic[];
  readonly plan?: Plan;
  readonly results: readonly StepResult[];
  /** Changes held back by the per-resource backoff, with why. */
  readonly deferred: ReadonlyArray<{ readonly address: string; readonly why: string }>;
  /** Outcome `locked`: who holds the apply lock, and the refusal as `hal0 apply` words it (code `apply.locked`). */
  readonly locked?: { readonly code: "apply.locked"; readonly message: string; readonly holder: LockHolder };
}

export interface SweeperOptions {
  readonly root: string;
  readonly state: StateStore;
  /** Builds the runtime for a model (the composition root decides docker or process). */
  readonly driverFor: (model: Model) => Promise<SlotDriver>;
  readonly onEvent?: (event: ExecEvent) => void;
  /**
   * The time of day (what reports and the state folder record). When given (a
   * test's virtual clock) it also drives the backoff and the health cache,
   * which otherwise run on the monotonic clock (a step of the wall clock
   * moves neither).
   */
  readonly now?: () => number;
  /** Every running slot's /health is probed at least this often (default FULL_PROBE_MS); answers in between are reused. */
  readonly fullProbeMs?: number;
  /** The agent tokens hal0 hands on to Hermes profiles (the composition root's TokenStore); without them profiles get no Authorization header. */
  readonly hermesCredentials?: HermesCredentials;
  /** Learns each runner's flag table (runner-probe.ts): each slot's argv is written in its dialect and checked before it starts. Without it every runner is unprobed. */
  readonly runners?: RunnerProbe;
  /**
   * Hears each observation of the runtime the sweep takes (before it plans,
   * and after it applied), with when it started (performance.now()): `hal0
   * serve` serves its liveness reads from it.
   */
  readonly onObserved?: (model: Model, slots: readonly ObservedSlot[], startedAt: number) => void;
}

/**
 * One reconcile sweep: compile the whole tree, observe, plan, execute —
 * the same pipeline as `hal0 apply`, without asking. Level-triggered: it
 * never looks at what triggered it. A tree with errors changes nothing and
 * keeps the last good model for the interval; failures back off per resource.
 */
export class Sweeper {
  private readonly backoff: Backoff;
  /** Elapsed time, for what lives only in this process (the backoff, the health cache). */
  private readonly elapsed: () => number;
  private readonly health: HealthCache;
  private readonly tree: TreeCache;
  private last?: Model;
  private lastPlan?: { readonly model: Model; readonly key: string; readonly plan: Plan };

  constructor(private readonly options: SweeperOptions) {
    this.tree = new TreeCache(options.root, undefined, options.runners);
    this.health = new HealthCache(options.fullProbeMs);
    this.elapsed = options.now ?? monotonicMs;
    this.backoff = new Backoff(this.elapsed);
  }

  /** How the last sweep got its model: "stat" (no file changed), "text" (files touched, texts equal) or "compiled". */
  get lastTreeReuse() {
    return this.tree.lastReuse;
  }

  /** The state folder it converges (whose apply lock its converge takes). */
  get stateDir(): string {
    return this.options.state.dir;
  }

  /** The last model that compiled, which decides the sweep interval. */
  get lastGoodModel(): Model | undefined {
    return this.last;
  }

  /** The resources backing off now, and how long each still waits. */
  backingOff(): ReturnType<Backoff["pending"]> {
    return this.backoff.pending();
  }

  /** Every resource backing off may be tried in the next sweep (a reload: a person says the host was fixed). */
  retryNow(): void {
    this.backoff.clear();
  }

  /**
   * One sweep. `signal` (the loop stopping: `hal0 serve` or `hal0 reconcile`
   * told to end) interrupts its converge as Ctrl-C does an apply: no further
   * step starts, a start's wait for `/health` ends with its runner left
   * running, the next sweep takes it from there.
   */
  async sweep(signal?: AbortSignal): Promise<SweepReport> {
    const now = this.options.now ?? Date.now;
    const at = new Date(now()).toISOString();
    const { tree, result: { model, diagnostics } } = await this.tree.loadTree();
    if (!model) return { at, outcome: "invalid_config", diagnostics: diagnostics.filter((d) => d.severity === "error"), results: [], deferred: [] };
    this.last = model;
    const driver = await this.options.driverFor(model);
    // Housekeeping (runner logs under their cap); a failure of it is no failure of the sweep.
    await driver.maintain?.().catch(() => undefined);
    // Plan without the lock: a sweep with nothing to do writes nothing, not even a lock file.
    const seen = await this.observeWithHealth(model, driver, this.elapsed());
    // An unattended sweep stops nothing on the word of a folder emptied under it.
    refuseEmptied(this.options.root, tree, seen.inventory, "the sweep stops nothing until the files are back");
    const first = this.schedule(this.plan(model, seen.observed, seen.inventory));
    if (!first.runnable.has_changes) {
      await refreshConditions(model, seen.observed, this.options.state, now, true, first.plan);
      return { at, outcome: "nothing_to_do", diagnostics: [], plan: first.plan, results: [], deferred: first.deferred };
    }
    let done;
    try {
      // Under the lock converge observes again: another apply may have moved the box meanwhile.
      done = await converge({ model, driver, state: this.options.state, hermesCredentials: this.options.hermesCredentials }, {
        holder: "hal0 reconcile (sweep)", backoff: this.backoff, onEvent: this.options.onEvent, now, signal,
        conditions: async () => {
          this.health.clear(); // runners moved: the next observation probes every one
          return (await this.observeWithHealth(model, driver, this.elapsed())).observed;
        },
      });
    } catch (err) {
      if (err instanceof LockedError) {
        return { at, outcome: "locked", diagnostics: [], plan: first.plan, results: [], deferred: first.deferred, locked: { code: err.code, message: err.message, holder: err.holder } };
      }
      throw err;
    }
    const outcome = done.outcome === "nothing_to_do" || done.outcome === "cancelled" ? "nothing_to_do" : done.outcome;
    return { at, outcome, diagnostics: [], plan: done.plan, results: done.results, deferred: done.deferred };
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
    const startedAt = performance.now();
    const seen = await observe(model, driver, this.options.state, { ...probing.options, hermesCredentials: this.options.hermesCredentials });
    const slots = probing.finish(Object.values(seen.observed.slots));
    this.options.onObserved?.(model, slots, startedAt);
    return { ...seen, observed: { ...seen.observed, slots: bySlot(slots) } };
  }

  /** The plan minus the changes whose resource is backing off. */
  private schedule(plan: Plan): Scheduled {
    return { plan, ...holdBack(plan, this.backoff) };
  }
}

/** The refusal of a config folder that holds no .toml file while slots hal0 started run (`config.empty`). */
export class ConfigEmptyError extends Error {
  readonly code = "config.empty";
  constructor(readonly root: string, running: number, consequence: string) {
    super(`the config folder ${root} holds no .toml file while ${running} slot(s) hal0 started are in its inventory (a volume unmounted leaves an empty folder): it is not read as an empty box; ${consequence}; to stop every slot, run hal0 down`);
  }
}

/**
 * A folder that lost every file while hal0's slots run is a volume unmounted under it (its empty mount point), not a
 * person's wish to stop them all: throws ConfigEmptyError, saying what the reader does instead (`consequence`). The
 * sweep and hal0 serve's reads judge it here alike.
 */
export function refuseEmptied(root: string, tree: Pick<SourceTree, "files">, inventory: Inventory, consequence: string): void {
  const running = Object.keys(inventory.slots).length;
  if (tree.files.size === 0 && running > 0) throw new ConfigEmptyError(root, running, consequence);
}

/** A plan, the same plan minus what backs off (runnable), and what was held back. */
interface Scheduled {
  readonly plan: Plan;
  readonly runnable: Plan;
  readonly deferred: Array<{ address: string; why: string }>;
}

function bySlot(slots: readonly ObservedSlot[]): Record<string, ObservedSlot> {
  return Object.fromEntries(slots.map((s) => [s.name, s]));
}
