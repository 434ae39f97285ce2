import type { Model } from "../compiler/index.js";
import type { HermesChange, Plan, SettingsBuckets, SettingsChange } from "../schema/index.js";
import { allSlotConditions, slotConditions, type ResourceConditions } from "./conditions.js";
import { hermesConditions, settingsConditions } from "./conditions-resources.js";
import { planHermes } from "./hermes-plan.js";
import { heldUnplaced } from "./nodes.js";
import type { Observed, ObservedNode, ObservedSlot } from "./observed.js";
import { PreflightCache, type Finding } from "./preflight.js";
import { planSettings } from "./settings-plan.js";
import type { SlotOutcome, SlotStep, StateStore } from "./state.js";

/**
 * The preflight every caller that passes no findings shares (the sweep, and
 * converge's refresh after an apply): run once per Model object and at most
 * every PREFLIGHT_MAX_AGE_MS, with hal0's own environment (what its runners
 * are started with), so an idle sweep of an unchanged tree adds no PATH
 * lookup nor stat.
 */
export const sharedPreflight = new PreflightCache();

/**
 * Recomputes every resource's conditions (slots, `settings`, `hermes.<p>`)
 * from an observation and persists them when they changed (an idle sweep
 * writes nothing). `plan`, when the caller has one made from this very
 * observation, spares planning settings and Hermes again. `findings`: the
 * preflight's (preflight.ts), else `sharedPreflight`'s for this model; a slot
 * with one is Stalled (RunnerNotFound, ModelMissing, …). `keepHermes`: the
 * `hermes.<p>` conditions stay as recorded (`hal0 down`, which touched no
 * Hermes file, observed them without their agent tokens). Returns the map.
 */
export async function refreshConditions(
  model: Model, observed: Observed, state: StateStore, now: () => number = Date.now, persist = true, plan?: Plan, findings?: readonly Finding[], keepHermes = false,
): Promise<Record<string, ResourceConditions>> {
  const [outcomes, previous, found, steps, inventory] = await Promise.all([state.readOutcomes(), state.readConditions(), findings ?? sharedPreflight.findings(model).catch((): Finding[] => []), state.readSteps(), state.readInventory()]);
  const at = new Date(now()).toISOString();
  const { next } = allSlotConditions(model.slots, observed.slots, outcomes, previous, at, found, steps, observed.nodes, new Set(Object.keys(inventory.slots)), model.settings.slots.health_timeout_s);
  const { settings, buckets, hermes } = otherChanges(model, observed, plan, keepHermes);
  next.settings = settingsConditions(settings, buckets, outcomes.settings, previous.settings, at);
  for (const change of hermes) next[change.address] = hermesConditions(change, outcomes[change.address], previous[change.address], at);
  if (keepHermes) for (const [address, kept] of Object.entries(previous)) if (address === "hermes" || address.startsWith("hermes.")) next[address] = kept;
  const sorted = Object.fromEntries(Object.entries(next).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  if (persist && JSON.stringify(sorted) !== JSON.stringify(previous)) await state.writeConditions(sorted);
  return sorted;
}

/**
 * One slot's conditions now, from `seen` (its health probed) and the state
 * folder's outcome and step under way, written nowhere: what slot_state
 * answers, as `hal0 status` does, so a read during an apply says what
 * happens then rather than what the last sweep recorded.
 */
export async function slotConditionsNow(
  model: Model, name: string, seen: ObservedSlot | undefined, state: StateStore, now: () => number = Date.now,
  /** A multi-node runtime's nodes: a slot the planner holds for want of one is not pending (heldUnplaced). */
  nodes?: readonly ObservedNode[],
): Promise<{ conditions: ResourceConditions; outcome?: SlotOutcome; step?: SlotStep }> {
  const [outcomes, previous, found, steps, inventory] = await Promise.all([state.readOutcomes(), state.readConditions(), sharedPreflight.findings(model).catch((): Finding[] => []), state.readSteps(), state.readInventory()]);
  const slot = Object.hasOwn(model.slots, name) ? model.slots[name] : undefined;
  const outcome = outcomes[name];
  const step = steps[name];
  const conditions = slotConditions({
    desiredHash: slot?.enabled ? slot.spec_hash : undefined, managed: Object.hasOwn(inventory.slots, name), seen, outcome, step,
    preflight: found.filter((f) => f.slot === name), refused: slot?.runner?.diagnostics.filter((d) => d.severity === "error"),
    unplaced: slot?.enabled ? heldUnplaced(slot, seen, nodes) : undefined, healthTimeoutS: model.settings.slots.health_timeout_s,
  }, previous[`slot.${name}`], new Date(now()).toISOString());
  return { conditions, outcome, step };
}

function otherChanges(model: Model, observed: Observed, plan: Plan | undefined, keepHermes: boolean): { settings: SettingsChange; buckets: SettingsBuckets; hermes: HermesChange[] } {
  const settings = plan?.changes.find((c): c is SettingsChange => c.kind === "settings");
  // A whole plan (one made without `only`) already holds both kinds.
  if (plan !== undefined && settings !== undefined) {
    return { settings, buckets: plan.settings, hermes: plan.changes.filter((c): c is HermesChange => c.kind === "hermes") };
  }
  const { change, buckets } = planSettings(model.settings, observed.applied_settings);
  return { settings: change, buckets, hermes: keepHermes ? [] : planHermes(model, observed).changes };
}
