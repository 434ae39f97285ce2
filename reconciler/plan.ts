import { canonicalJson, hashOf, rehashSpec, type Model, type ResolvedSlot } from "../compiler/index.js";
import { PLAN_FORMAT_VERSION, parseAddress, slotAddress, type Address, type ChangeKind, type Plan, type PlanBody, type PlanWarning, type SlotAddress, type SlotChange, type SlotReason } from "../schema/index.js";
import { observedDigests } from "./digest.js";
import { hermesIdentity, planHermes, planHermesProfile } from "./hermes-plan.js";
import { heldUnplaced } from "./nodes.js";
import type { Inventory, Observed, ObservedNode, ObservedSlot, SlotView } from "./observed.js";
import { planSettings } from "./settings-plan.js";
import { slotWarnings, unmanagedWarning } from "./slot-warnings.js";
import { imageUnobserved, slotView, viewChangedPaths } from "./view.js";

/**
 * The planner: desired Model + one Observed snapshot + the inventory → Plan.
 * Pure by construction: no I/O, no clock, no randomness, no driver; every
 * map is walked in sorted key order, so equal inputs give byte-equal plans
 * (and equal ids). It never mutates its inputs.
 */

/**
 * Planner inputs that are choices rather than state. Every caller's
 * decision about *what* to converge is one of these, so the executor and the
 * drivers never decide anything (`converge()` passes them through).
 */
export interface PlanOptions {
  /** `hal0 down`: plan as if no slot were desired, so every inventory member is deleted (reason "down"); settings and Hermes files are not planned. */
  readonly destroy?: boolean;
  /**
   * Restart these slots: each one that runs is replaced (stop, then start its
   * desired spec; reason "restart") even when nothing changed, and one that
   * does not run is created. A named slot that is not desired and enabled is
   * planned as usual (there is nothing to restart into).
   */
  readonly replace?: readonly SlotAddress[];
  /** Keep only the changes (and warnings) of these kinds and these addresses; the rest of the box is left out of the plan. */
  readonly only?: { readonly kinds?: readonly ChangeKind[]; readonly addresses?: readonly Address[] };
  /**
   * Also plan the default Hermes profile (`<home>/config.yaml`, address
   * `hermes`, observed with `hermesDefault`), undoing a hand edit of hal0's
   * keys even under drift = "warn": an on-demand repair. The sweep never
   * touches it.
   */
  readonly hermesDefault?: boolean;
}

export function planChanges(model: Model, observed: Observed, inventory: Inventory, options: PlanOptions = {}): Plan {
  // What `only` cannot keep is not planned at all: one slot's plan on a box of a thousand slots and fifty Hermes profiles plans one slot.
  const scope = scopeOf(options.only);
  const slots = planSlots(options.destroy ? { ...model, slots: {} } : model, observed, inventory, options.destroy ? "down" : undefined, new Set(options.replace ?? []), scope.slots);
  const settings = planSettings(model.settings, observed.applied_settings);
  // `hal0 down` stops slots and nothing else: Hermes files are left as they are.
  const hermes: ReturnType<typeof planHermes> = options.destroy || !scope.hermes ? { changes: [], warnings: [] } : planHermes(model, observed);
  if (options.hermesDefault && observed.hermes_default !== undefined && !options.destroy) {
    const tokens = observed.hermes_tokens;
    const one = planHermesProfile(model, null, observed.hermes_default.text, observed.hermes_managed?.default, { enforce: true, token: tokens === undefined ? undefined : tokens[hermesIdentity(null)] ?? null, unreadable: observed.hermes_default.unreadable });
    hermes.changes.push(one.change);
    hermes.warnings.push(...one.warnings);
  }
  const keep = selector(options.only);
  // `hal0 down` leaves the settings as they are applied, too: a pending settings change waits for the next apply.
  const keepSettings = !options.destroy && keep(settings.change);
  const changes = [...slots.changes, ...(keepSettings ? [settings.change] : []), ...hermes.changes].filter((c) => keep(c)).sort((a, b) => compare(a.address, b.address));
  const body: PlanBody = {
    format_version: PLAN_FORMAT_VERSION,
    base: { config_digest: model.digest, observed: observedDigests(observed) },
    has_changes: changes.some((c) => c.action !== "no-op"),
    changes,
    settings: keepSettings ? settings.buckets : { immediate: [], service_restart: {}, manual_restart: [], unknown: [] },
    warnings: [...slots.warnings, ...hermes.warnings].filter((w) => keep(w)).sort((a, b) => compare(a.address, b.address) || compare(a.code, b.code) || compare(a.message, b.message)),
    summary: summarize(changes),
  };
  const { format_version, ...rest } = body;
  return { format_version, id: hashOf(body), ...rest };
}

/** Whether a change or warning is in `only` (by its kind or its address); everything is without `only`. */
function selector(only: PlanOptions["only"]): (item: { readonly address: Address }) => boolean {
  if (only === undefined) return () => true;
  const kinds = new Set<string>(only.kinds ?? []);
  const addresses = new Set<string>(only.addresses ?? []);
  return ({ address }) => addresses.has(address) || kinds.has(parseAddress(address)?.kind ?? "");
}

/**
 * One slot's change as `planChanges` makes it with these options (undefined
 * when its plan has no change for the slot), without the rest of a plan: no
 * other slot, no Hermes profile, no digests of the box and no id. For a
 * caller asking about each slot of many (the services list prices each
 * slot's actions this way), where a whole plan per slot would cost the
 * square of the box.
 */
export function planSlotChange(model: Model, observed: Observed, inventory: Inventory, name: string, options: Pick<PlanOptions, "destroy" | "replace"> = {}): SlotChange | undefined {
  return planSlots(options.destroy ? { ...model, slots: {} } : model, observed, inventory, options.destroy ? "down" : undefined, new Set(options.replace ?? []), new Set([name])).changes[0];
}

/**
 * Which resources a plan with `only` can keep: the slots it names (every slot
 * when it keeps the kind, or has no `only`), and whether any Hermes profile.
 * Planning the rest would only be thrown away by the selector; each slot's
 * and each profile's change is decided from its own inputs alone, so leaving
 * them out changes nothing in the plan.
 */
function scopeOf(only: PlanOptions["only"]): { slots?: ReadonlySet<string>; hermes: boolean } {
  if (only === undefined) return { hermes: true };
  const kinds = new Set<string>(only.kinds ?? []);
  const parsed = (only.addresses ?? []).map(parseAddress);
  const named = new Set<string>();
  for (const p of parsed) if (p?.kind === "slot") named.add(p.name);
  return {
    ...(kinds.has("slot") ? {} : { slots: named }),
    hermes: kinds.has("hermes") || parsed.some((p) => p?.kind === "hermes"),
  };
}

interface SlotInputs {
  readonly name: string;
  readonly desired?: ResolvedSlot;
  readonly seen?: ObservedSlot;
  /** hal0 created it (it is in the inventory): only members are ever stopped or removed. */
  readonly managed: boolean;
  /** The spec hash hal0 last started this slot with (inventory), to tell drift from a config change. */
  readonly applied?: string;
  /** Why a slot that is not desired goes away, when not because its file was removed (`down`). */
  readonly goneReason?: SlotReason;
  /** Restart it (`PlanOptions.replace`). */
  readonly restart: boolean;
  /** A multi-node runtime's nodes (absent on one box): a slot no ready node can take is held, not started. */
  readonly nodes?: readonly ObservedNode[];
}

/** Every slot the config, the runtime or the inventory knows; with `within`, only those of its names. */
function planSlots(model: Model, observed: Observed, inventory: Inventory, goneReason: SlotReason | undefined, restart: ReadonlySet<string>, within?: ReadonlySet<string>): { changes: SlotChange[]; warnings: PlanWarning[] } {
  const names = within === undefined
    ? new Set([...Object.keys(model.slots), ...Object.keys(observed.slots), ...Object.keys(inventory.slots)])
    : new Set([...within].filter((name) => own(model.slots, name) !== undefined || own(observed.slots, name) !== undefined || own(inventory.slots, name) !== undefined));
  const changes: SlotChange[] = [];
  const warnings: PlanWarning[] = [];
  for (const name of [...names].sort(compare)) {
    const inputs: SlotInputs = {
      name,
      desired: own(model.slots, name),
      seen: own(observed.slots, name),
      managed: own(inventory.slots, name) !== undefined,
      applied: own(inventory.slots, name)?.spec_hash,
      goneReason,
      restart: restart.has(slotAddress(name)),
      nodes: observed.nodes,
    };
    const planned = planSlot(inputs);
    if (planned === undefined) continue;
    const foreign = own(observed.foreign_ports, name);
    // Held by a runner of this very slot that no record names: its replace stops it, as it stops the slot.
    const change = foreign !== undefined && foreign.runner?.slot !== name && inputs.seen?.running === true ? held(planned) : planned;
    changes.push(change);
    if (inputs.desired?.enabled) warnings.push(...slotWarnings(change, inputs.desired, inputs.seen, foreign, observed.nodes));
    else if (change.reason === "unmanaged") warnings.push(unmanagedWarning(name, inputs.seen!));
  }
  return { changes, warnings };
}

/** One slot's decision; undefined when there is nothing to show (not desired, not ours, not running). */
function planSlot(inputs: SlotInputs): SlotChange | undefined {
  const state = planSlotState(inputs);
  const change = inputs.restart && state !== undefined ? restarted(state, inputs.seen?.running ?? false) : state;
  return change !== undefined && inputs.desired !== undefined && refusesArgv(inputs.desired) ? refused(change) : change;
}

/**
 * A running slot whose replace would move it to a port another process holds
 * (one hal0 did not start) is left running as it is: a no-op (reason
 * `port_held`), so it is not stopped for a start that cannot bind. The
 * warning names the holder; the next sweep after the port is freed replaces it.
 */
function held(change: SlotChange): SlotChange {
  if (change.action !== "replace") return change;
  return { ...change, action: "no-op", reason: "port_held", destructive: false, downtime: false };
}

/** The slot's runner would refuse its argv (the argv check found an error): see `refused`. */
export function refusesArgv(slot: ResolvedSlot): boolean {
  return slot.runner.diagnostics.some((d) => d.severity === "error");
}

/**
 * A start or restart whose argv the runner would refuse is not carried out:
 * a no-op (reason `argv_refused`), so the runner never crash-loops on it and
 * a slot that runs an older, accepted spec keeps running. The plan's
 * warnings say which flag and where.
 */
function refused(change: SlotChange): SlotChange {
  if (change.action !== "create" && change.action !== "replace") return change;
  return { ...change, action: "no-op", reason: "argv_refused", destructive: false, downtime: false };
}

/**
 * A slot asked to restart: replaced when it runs (stop, then start the
 * desired spec), created when it does not. Only a slot with a desired spec
 * restarts; any other change is left as planned.
 */
function restarted(change: SlotChange, running: boolean): SlotChange {
  if (change.after === null) return change;
  if (!running) return { ...change, action: "create" };
  const changed_paths = change.changed_paths.length > 0 ? change.changed_paths : ["restart"];
  return { ...change, action: "replace", reason: "restart", changed_paths, destructive: true, downtime: true };
}

function planSlotState({ name, desired, seen, managed, applied, goneReason, nodes }: SlotInputs): SlotChange | undefined {
  const recorded = seen?.record?.view ?? null;
  const running = seen?.running ?? false;
  if (desired?.enabled) {
    const after = slotView(desired);
    // Drift: a slot hal0 runs stopped, or was changed, behind its back. With
    // `drift = "warn"` it is reported (a no-op with a warning), never fixed.
    const warnOnly = managed && desired.drift === "warn";
    // Swarm holds the task of a service that is as desired (its node is down, no node fits): re-creating it would not place it;
    // and a slot no ready node could take now (a label no node carries, its node down or drained) is not started into a Pending task.
    if (heldUnplaced(after, seen, nodes) !== undefined) return slotChange(name, "no-op", "unplaced", recorded, after);
    // Swarm starts its service's task (again, after its runner exited): the slot is starting, not missing. A create would
    // remove the service and fight Swarm's own restart; as desired, it is left to Swarm, else replaced as a running one is.
    const present = running || seen?.starting !== undefined;
    if (!present) return warnOnly ? slotChange(name, "no-op", "not_running", recorded, after) : slotChange(name, "create", managed || recorded ? "not_running" : "new", recorded, after);
    // Running with no readable record: one hal0 started (a container made again by hand without its hal0.view label) was changed behind its back.
    if (recorded === null) return managed ? slotChange(name, warnOnly ? "no-op" : "replace", "drifted", null, after) : slotChange(name, "replace", "spec_unknown", null, after);
    if (recorded.spec_hash === after.spec_hash) return slotChange(name, "no-op", running ? "unchanged" : "starting", recorded, after);
    if (imageUnobserved(recorded, after)) return slotChange(name, "no-op", "image_unobserved", recorded, after);
    const drifted = managed && applied !== undefined && recorded.spec_hash !== applied && labelledHash(recorded) !== applied;
    if (drifted && warnOnly) return slotChange(name, "no-op", "drifted", recorded, after);
    return slotChange(name, "replace", drifted ? "drifted" : observedChanged(recorded, after) ? "observed_changed" : "spec_changed", recorded, after);
  }
  const reason = desired ? "disabled" : (goneReason ?? "removed_from_config");
  if (managed) return slotChange(name, "delete", reason, recorded, null, running);
  // Never stop what hal0 did not start: running but not in the inventory is left alone.
  if (running) return slotChange(name, "no-op", "unmanaged", recorded, recorded);
  return desired ? slotChange(name, "no-op", "disabled", recorded, null) : undefined;
}

/**
 * The spec hash a docker slot's label recorded when observe filled in the id
 * of the image its container runs (docker-container.ts withImageId: the view
 * was recorded without one), which is what hal0 started and the inventory
 * holds: not drift.
 */
function labelledHash(recorded: SlotView): string | undefined {
  const observed = recorded.spec.observed;
  if (observed?.image_digest === undefined) return undefined;
  const { image_digest: _filled, ...rest } = observed;
  return rehashSpec({ ...recorded.spec, observed: Object.keys(rest).length > 0 ? rest : undefined }).spec_hash;
}

/**
 * The spec moved because an observed fact moved (the runner's dialect, which
 * rewrites the argv; the image's digest), not the config: same spec version,
 * the observed facts differ, and what only the config sets — the runtime, the
 * image, the port, the env — is as it was (a runtime switched is a config change).
 */
function observedChanged(before: SlotView, after: SlotView): boolean {
  if (before.spec.spec_version !== after.spec.spec_version || canonicalJson(before.spec.observed ?? {}) === canonicalJson(after.spec.observed ?? {})) return false;
  return before.spec.runtime === after.spec.runtime && before.spec.image === after.spec.image && before.spec.port === after.spec.port && canonicalJson(before.spec.env) === canonicalJson(after.spec.env);
}

/**
 * Builds a slot change. Slot changes apply immediately (the executor runs
 * them now); a replace stops the running slot, so it is destructive and
 * causes downtime; a delete causes downtime only if the slot still runs.
 */
function slotChange(name: string, action: SlotChange["action"], reason: SlotReason, before: SlotView | null, after: SlotView | null, running = false): SlotChange {
  return {
    address: slotAddress(name),
    kind: "slot",
    action,
    reason,
    changed_paths: changedPaths(action, before, after),
    before,
    after,
    apply_class: "immediate",
    destructive: action === "replace" || action === "delete",
    downtime: action === "replace" || (action === "delete" && running),
  };
}

/**
 * What a create or replace changes relative to the runtime's record (a create
 * of a slot that died may also run a newer spec). A replace with no record to
 * compare names `spec_hash`, so its paths are never empty.
 */
function changedPaths(action: SlotChange["action"], before: SlotView | null, after: SlotView | null): string[] {
  if (action !== "create" && action !== "replace") return [];
  if (before !== null && after !== null) return viewChangedPaths(before, after);
  return action === "replace" ? ["spec_hash"] : [];
}

function summarize(changes: Plan["changes"]): PlanBody["summary"] {
  const summary = { create: 0, update: 0, replace: 0, delete: 0, no_op: 0 };
  for (const c of changes) summary[c.action === "no-op" ? "no_op" : c.action]++;
  return summary;
}

function own<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
