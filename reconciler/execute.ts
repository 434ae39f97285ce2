import { hashOf } from "../compiler/index.js";
import { PARALLEL_DEFAULT, slotNameOf, type Change, type HermesChange, type Plan, type SettingsChange, type SlotChange } from "../schema/index.js";
import { CRASH_WINDOW_MS } from "./backoff.js";
import { DriverError, INTERRUPTED, type SlotDriver, type StartPhase } from "./drivers/driver.js";
import { convergeHermesFile } from "./hermes-files.js";
import { hermesIdentity } from "./hermes-plan.js";
import { fillBearer } from "./hermes-wire.js";
import type { HermesCredentials } from "./observed.js";
import type { SlotStep, StateStore } from "./state.js";

/** What the executor reports as it goes, for the CLI's progress display. */
export interface ExecEvent {
  readonly address: string;
  /** `interrupted`: the apply was stopping and left this step to the next one (not a failure). */
  readonly phase: "stopping" | "stopped" | StartPhase | "applied" | "failed" | "interrupted";
  readonly elapsed_ms: number;
  readonly message?: string;
}

export interface StepResult {
  readonly address: string;
  readonly action: Change["action"];
  readonly ok: boolean;
  readonly code?: string;
  readonly error?: string;
  readonly elapsed_ms: number;
  /** A restart of a slot that died within CRASH_WINDOW_MS of becoming ready: how many in a row (SlotOutcome.restarts). */
  readonly restarts?: number;
}

export interface ExecuteOptions {
  /** The slots' runtime; absent only for a plan with no slot to start or stop (a Hermes-only repair). */
  readonly driver?: SlotDriver;
  readonly state: StateStore;
  /** Operational parameters, from the settings the plan was made with. */
  readonly healthTimeoutS: number;
  readonly stopGraceS: number;
  /** The config folder: the runners' working folder. */
  readonly cwd: string;
  /**
   * How many slots are being stopped or launched at once, per machine (on a
   * swarm, per node a slot is pinned to): a start counts until its runner is
   * launched (the driver's `starting` phase), not while it waits for `/health`.
   */
  readonly parallel?: number;
  readonly onEvent?: (event: ExecEvent) => void;
  /** The agent tokens a Hermes profile's `Bearer [redacted]` stands for; without them no Authorization header is written. */
  readonly hermesCredentials?: HermesCredentials;
  /** Injected for tests; wall clock otherwise. */
  readonly now?: () => number;
  /**
   * An interrupted apply (the CLI's first SIGINT or SIGTERM): no step starts
   * after it aborts — each is reported `apply.interrupted`, "not started" —
   * the steps under way finish, except a start's wait for `/health`, which
   * ends at once with its runner left running (and in the inventory).
   * Neither records an outcome: hal0 did not finish a step there.
   */
  readonly signal?: AbortSignal;
}

/**
 * Carries out a plan and makes no decisions: it reads each change's action
 * and `after`. Every slot step is started at once and ordered only where the
 * plan's data says so: a start waits for the stops it would collide with —
 * its own (a replace) and any delete or replace that frees its port or
 * memory on its device (`frees`) — and nothing else, so a create on another
 * device or machine does not wait for every stop. The
 * engine's (or the OS's) share of each step — stops, and a start up to its
 * `starting` phase (the runner launched) — is bounded to `parallel` at once
 * per machine, stops queued first; the wait for `/health` holds no place in
 * that bound. A create first clears whatever of ours is left under the
 * slot's name (a stopped container, a runner without a record): the same
 * stop as a replace's, so no driver decides to adopt or remove anything on
 * its own. Only `converge()` calls this. A failed step does not stop the
 * others (a replace whose stop failed is not started). The inventory and
 * each slot's outcome are written step by step, so an interrupted apply
 * leaves a true record. Then the settings, then each Hermes profile file (its
 * hal0 keys set to the change's `after`, the ids hal0 owns recorded in
 * hermes-managed.json).
 */
export async function executePlan(plan: Pick<Plan, "changes">, opts: ExecuteOptions): Promise<StepResult[]> {
  const options: Ctx = { ...opts, serial: serializer() };
  const limit = options.parallel ?? PARALLEL_DEFAULT;
  const slotChanges = plan.changes.filter((c): c is SlotChange => c.kind === "slot" && c.action !== "no-op");
  const stops = slotChanges.filter((c) => c.action === "delete" || c.action === "replace");
  const starts = slotChanges.filter((c) => c.action === "create" || c.action === "replace");
  const gates = new Map<string, Gate>();
  const gateOf = (machine: string) => gates.get(machine) ?? gates.set(machine, gate(limit)).get(machine)!;
  // Stops take their places in the bound first (in the plan's order), then the starts as their stops finish.
  const unlessInterrupted = (c: Change, step: () => Promise<StepResult>): Promise<StepResult> => (opts.signal?.aborted ? Promise.resolve(notStarted(c)) : step());
  const stopped = new Map(stops.map((c) => [c.address, bounded(gateOf(machineOf(c.before)), (release) => unlessInterrupted(c, () => stopStep(c, options)).finally(release))] as const));
  const started = starts.map(async (c): Promise<StepResult | undefined> => {
    const own = stopped.get(c.address);
    if (own !== undefined && !(await own).ok) return undefined; // reported as the stop's failure
    await Promise.all(stops.filter((s) => s !== c && frees(s, c)).map((s) => stopped.get(s.address)));
    return bounded(gateOf(machineOf(c.after)), (release) => unlessInterrupted(c, () => startStep(c, options, release)).finally(release));
  });
  const stopResults = await Promise.all(stopped.values());
  const results = stopResults.filter((r) => r.action === "delete" || !r.ok);
  for (const result of await Promise.all(started)) if (result !== undefined) results.push(result);
  const settings = plan.changes.find((c): c is SettingsChange => c.kind === "settings" && c.action !== "no-op");
  if (settings) results.push(await unlessInterrupted(settings, () => settingsStep(settings, options)));
  const hermes = plan.changes.filter((c): c is HermesChange => c.kind === "hermes" && c.action !== "no-op");
  results.push(...(await inParallel(hermes, limit, (c) => unlessInterrupted(c, () => hermesStep(c, options)))));
  return results.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
}

/** A step an interrupted apply did not begin: nothing was done, no outcome is recorded. */
function notStarted(change: Change): StepResult {
  return { address: change.address, action: change.action, ok: false, code: INTERRUPTED, error: "not started: the apply was interrupted", elapsed_ms: 0 };
}

/**
 * A stop that frees what a start needs: the port it binds (a port, like a
 * name, is held by one runner at a time), or memory on the device it loads
 * onto — the same device and GPU index on the same machine (the compiler
 * checks that the desired slots fit, not that the old and the new fit side
 * by side). The start waits for it; other stops are not waited for, so a
 * load may overlap the stop of a slot on another device or machine.
 */
function frees(stop: SlotChange, start: SlotChange): boolean {
  const before = stop.before?.spec;
  const after = start.after?.spec;
  if (before === undefined || after === undefined) return false;
  if (before.port === after.port) return true;
  return machineOf(stop.before) === machineOf(start.after) && before.device === after.device && before.gpu_index === after.gpu_index;
}

/** Options plus a queue that serialises the steps' read-modify-write of the state files. */
interface Ctx extends ExecuteOptions {
  readonly serial: <T>(fn: () => Promise<T>) => Promise<T>;
}

function serializer(): <T>(fn: () => Promise<T>) => Promise<T> {
  let tail: Promise<unknown> = Promise.resolve();
  return <T,>(fn: () => Promise<T>) => {
    const run = tail.then(fn, fn);
    tail = run.catch(() => undefined);
    return run;
  };
}

async function stopStep(change: SlotChange, o: Ctx): Promise<StepResult> {
  const name = slotNameOf(change.address);
  // A replace's stop is half of it: its success is no outcome (the start records the replace's), its failure is the replace's.
  return timed(change, o, async (emit) => {
    emit("stopping");
    await markStep(o, change, "stopping");
    await runtime(o).stop(name, o.stopGraceS);
    if (change.action === "delete") await o.serial(() => removeFromInventory(o.state, name));
    emit("stopped");
  }, { recordSuccess: change.action === "delete" });
}

/** `release` frees the step's place in the bound: called when the driver reports the runner launched (`starting`). */
async function startStep(change: SlotChange, o: Ctx, release: () => void): Promise<StepResult> {
  const name = slotNameOf(change.address);
  const view = change.after;
  return timed(change, o, async (emit) => {
    if (view === null) throw new Error(`${change.address}: a ${change.action} without a desired spec`);
    const driver = runtime(o);
    await markStep(o, change, "starting");
    // A create starts from nothing of ours under the name (a replace's own stop ran before it).
    // A container of the slot renamed by hand is not under the name: it is left to hal0 down (its port, if held, fails the start).
    if (change.action === "create") await driver.stop(name, o.stopGraceS, { renamed: false });
    // Recorded before the spawn, with the spec it is started with: a process
    // hal0 starts is in the inventory even if this apply is killed (or
    // interrupted) before the slot turns healthy, and what it runs is then
    // what hal0 started, not drift.
    const added = await o.serial(() => addToInventory(o.state, name, view.spec.runtime, view.spec_hash, o.now ?? Date.now));
    try {
      await driver.start(name, view, { healthTimeoutS: o.healthTimeoutS, cwd: o.cwd, signal: o.signal, onPhase: (phase) => {
        if (phase === "starting") release();
        void markStep(o, change, phase);
        emit(phase);
      } });
    } catch (err) {
      // An interrupted health wait leaves the runner running: it stays ours, in the inventory.
      if (added && !(err instanceof DriverError && err.code === INTERRUPTED)) await o.serial(() => removeFromInventory(o.state, name));
      throw err;
    }
  });
}

async function settingsStep(change: SettingsChange, o: Ctx): Promise<StepResult> {
  return timed(change, o, async (emit) => {
    await o.state.writeAppliedSettings(change.after);
    emit("applied");
  });
}

/** Writes a Hermes profile's hal0 keys (`after`), removing the ids hal0 owned (`before`) that `after` drops. */
async function hermesStep(change: HermesChange, o: Ctx): Promise<StepResult> {
  return timed(change, o, async (emit) => {
    await applyHermesChange(change, o.state, { serial: o.serial, credentials: o.hermesCredentials });
    emit("applied");
  });
}

/**
 * Carries out one `hermes` update (a `delete`: the profile was removed; its
 * token is revoked and hal0's record of it dropped): the file's hal0 keys become `after`'s,
 * then hermes-managed.json records what hal0 owns there. `after` holds the
 * bearer as `Bearer [redacted]`: here, and only here, it becomes the real
 * token of `after.identity`, read through `credentials` (which mints one on
 * first wiring). Without credentials the header is left out, never written
 * as the placeholder. What is recorded is the redacted form of what was
 * written, which is what the planner compares.
 */
async function applyHermesChange(change: HermesChange, state: StateStore, options: { serial?: <T>(fn: () => Promise<T>) => Promise<T>; credentials?: HermesCredentials } = {}): Promise<void> {
  const serial = options.serial ?? ((fn) => fn());
  const { before, after } = change;
  const credentials = options.credentials;
  if (change.action === "delete") {
    // A removed profile: its token is revoked and its copy removed before hal0 forgets it, so a failure leaves the record for the next sweep.
    credentials?.revoke(after.identity ?? hermesIdentity(after.profile));
    await serial(() => state.forgetHermesManaged(after.profile));
    return;
  }
  // (A plan saved before identities has no `identity`: the profile's is derived the planner's way.)
  const identity = after.identity ?? hermesIdentity(after.profile);
  // The profile is recorded before its token may be minted, so a write that then fails (or a hal0 killed before it)
  // leaves no live token that the profile's removal would not revoke. The record names no write (no `applied`).
  if (credentials) {
    await serial(async () => {
      const all = await state.readHermesManaged();
      const known = after.profile === null ? all.default : all.profiles[after.profile];
      if (known === undefined) await state.recordHermesManaged(after.profile, { ids: [...before.managed_ids] });
    });
  }
  const written = fillBearer(after.mcp_servers, credentials ? () => credentials.token(identity) : undefined);
  await convergeHermesFile(after.file, written, before.managed_ids);
  // A merge with a hand edit kept under drift = "warn" records hal0's own entries (`desired`), not the file's: the edit
  // stays one, and the next merge's base is what hal0 wanted.
  const recorded = after.desired ?? (credentials ? after.mcp_servers : fillBearer(after.mcp_servers, undefined));
  await serial(async () => {
    // A write of the token alone (the entries as they were, a hand edit kept under drift = "warn", in a record kept
    // before merges were) leaves the record of what hal0 last wrote as it was: the hand edit stays one.
    const all = await state.readHermesManaged();
    const known = after.profile === null ? all.default : all.profiles[after.profile];
    if (after.desired === undefined && known?.applied !== undefined && known.base === undefined && hashOf(before.mcp_servers) === hashOf(after.mcp_servers)) {
      await state.recordHermesManaged(after.profile, { ids: after.managed_ids, applied: known.applied });
      return;
    }
    await state.recordHermesManaged(after.profile, { ids: after.managed_ids, applied: hashOf(recorded), base: recorded });
  });
}

/**
 * Runs one step, timing it, turning a throw into a failed result and
 * recording the outcome (a success only with `recordSuccess`, the default:
 * the stop half of a replace leaves the replace's outcome to its start).
 */
async function timed(change: Change, o: Ctx, body: (emit: (phase: ExecEvent["phase"], message?: string) => void) => Promise<void>, { recordSuccess = true } = {}): Promise<StepResult> {
  const now = o.now ?? Date.now;
  const t0 = now();
  const emit = (phase: ExecEvent["phase"], message?: string) => o.onEvent?.({ address: change.address, phase, elapsed_ms: now() - t0, message });
  let result: StepResult;
  try {
    await body(emit);
    result = { address: change.address, action: change.action, ok: true, elapsed_ms: now() - t0 };
  } catch (err) {
    const code = err instanceof DriverError ? err.code : change.kind === "hermes" ? "hermes.write_failed" : "slot.apply_failed";
    result = { address: change.address, action: change.action, ok: false, code, error: (err as Error).message, elapsed_ms: now() - t0 };
    emit(code === INTERRUPTED ? "interrupted" : "failed", `${code}: ${(err as Error).message}`);
  }
  // A start cut short by an interrupt did not end: its slot's last outcome stays the one before, unless that was a failure.
  // The stop half of a replace that went well leaves the step under way: its start follows.
  if (result.ok && !recordSuccess) return result;
  if (result.code === INTERRUPTED) {
    // Its runner is left running, started after any failure recorded for the slot: that failure was an earlier attempt's.
    // Kept, it said Degraded (and its error) of a slot that then ran healthy, for good: the next apply's no-op records nothing.
    if (change.kind === "slot") await o.serial(() => o.state.forgetFailedOutcome(slotNameOf(change.address)));
    await markStep(o, change, undefined);
    return result;
  }
  // Keyed by slot name for slots, by address (`settings`, `hermes.<p>`) for the others.
  const name = change.kind === "slot" ? slotNameOf(change.address) : change.address;
  const restarts = result.ok ? await crashRestarts(change, name, o.state, now()) : undefined;
  if (restarts !== undefined) result = { ...result, restarts };
  const outcome = { ok: result.ok, action: change.action, code: result.code, error: result.error, at: new Date(now()).toISOString(), ...(restarts !== undefined && { restarts }) };
  await o.serial(() => o.state.recordOutcome(name, outcome));
  await markStep(o, change, undefined);
  return result;
}

/**
 * Records a slot step's phase in the state folder as it happens (undefined:
 * the step ended, after its outcome), queued with the other state writes so
 * a reader sees them in order. What `hal0 status` reads, never what decides
 * anything: a write that fails fails no step.
 */
function markStep(o: Ctx, change: Change, phase: SlotStep["phase"] | undefined): Promise<void> {
  if (change.kind !== "slot" || change.action === "no-op") return Promise.resolve();
  const name = slotNameOf(change.address);
  const step = phase === undefined ? undefined : { action: change.action, phase, since: new Date((o.now ?? Date.now)()).toISOString() };
  return o.serial(() => o.state.recordStep(name, step)).catch(() => undefined);
}

/**
 * For a slot started again because it died (`not_running`) within
 * CRASH_WINDOW_MS of its last successful start: how many such restarts in a
 * row, this one included. Undefined for any other step (a first start, a
 * replace, a slot that ran longer than the window, one stopped by a person).
 */
async function crashRestarts(change: Change, name: string, state: StateStore, now: number): Promise<number | undefined> {
  if (change.kind !== "slot" || change.action !== "create" || change.reason !== "not_running") return undefined;
  const last = (await state.readOutcomes())[name];
  if (last === undefined || !last.ok || (last.action !== "create" && last.action !== "replace")) return undefined;
  const ranFor = now - Date.parse(last.at);
  return ranFor >= 0 && ranFor < CRASH_WINDOW_MS ? (last.restarts ?? 0) + 1 : undefined;
}

/**
 * Adds `name` to the inventory with the spec hash it is about to be started
 * with (and the runtime it runs on); true when it was not a member before.
 * Written before the runner is launched, so whatever runs under the name
 * from then on is what hal0 started: a later change behind hal0's back shows
 * as drift, and a start cut short is not mistaken for one.
 */
async function addToInventory(state: StateStore, name: string, runtime: "process" | "docker" | "swarm", specHash: string, now: () => number): Promise<boolean> {
  const inv = await state.readInventory();
  const entry = inv.slots[name];
  if (entry) {
    // Started on another runtime now ([slots] runtime changed): the inventory says where it runs, for the next stop.
    if (entry.runtime !== runtime || entry.spec_hash !== specHash) await state.writeInventory({ ...inv, slots: { ...inv.slots, [name]: { ...entry, runtime, spec_hash: specHash } } });
    return false;
  }
  await state.writeInventory({ ...inv, slots: { ...inv.slots, [name]: { created_at: new Date(now()).toISOString(), runtime, spec_hash: specHash } } });
  return true;
}

async function removeFromInventory(state: StateStore, name: string): Promise<void> {
  const inv = await state.readInventory();
  const { [name]: _gone, ...rest } = inv.slots;
  await state.writeInventory({ ...inv, slots: rest });
}

function runtime(o: Ctx): SlotDriver {
  if (o.driver === undefined) throw new Error("a slot step without a runtime");
  return o.driver;
}

/**
 * The machine a slot's start or stop loads: the node a swarm slot is pinned to
 * (its view's `placement.node`), else the one box (or the swarm as a whole,
 * for slots Swarm places by labels). Model loads compete for one machine's
 * memory and disk, not for another's.
 */
function machineOf(view: SlotChange["before"]): string {
  return view?.spec.placement?.node ?? "";
}

/** A bound of `limit` places: `acquire` resolves with a release, which frees the place once however often it is called. */
type Gate = () => Promise<() => void>;

function gate(limit: number): Gate {
  let free = limit;
  const waiting: Array<() => void> = [];
  return async () => {
    if (free > 0) free--;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const next = waiting.shift();
      if (next) next();
      else free++;
    };
  };
}

/** Runs `run` once `g` grants a place; `run` frees it (early, or when it is done). */
async function bounded<R>(g: Gate, run: (release: () => void) => Promise<R>): Promise<R> {
  return run(await g());
}

async function inParallel<T, R>(items: readonly T[], limit: number, run: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      out[index] = await run(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
