import type { Model } from "../compiler/index.js";
import type { HermesChange, Plan, SettingsBuckets, SettingsChange } from "../schema/index.js";
import { allSlotConditions, type ResourceConditions } from "./conditions.js";
import { hermesConditions, settingsConditions } from "./conditions-resources.js";
import { planHermes } from "./hermes-plan.js";
import type { Observed } from "./observed.js";
import { planSettings } from "./settings-plan.js";
import type { StateStore } from "./state.js";

/**
 * Recomputes every resource's conditions (slots, `settings`, `hermes.<p>`)
 * from an observation and persists them when they changed (an idle sweep
 * writes nothing). `plan`, when the caller has one made from this very
 * observation, spares planning settings and Hermes again. Returns the map.
 */
export async function refreshConditions(model: Model, observed: Observed, state: StateStore, now: () => number = Date.now, persist = true, plan?: Plan): Promise<Record<string, ResourceConditions>> {
  const [outcomes, previous] = await Promise.all([state.readOutcomes(), state.readConditions()]);
  const at = new Date(now()).toISOString();
  const { next } = allSlotConditions(model.slots, observed.slots, outcomes, previous, at);
  const { settings, buckets, hermes } = otherChanges(model, observed, plan);
  next.settings = settingsConditions(settings, buckets, outcomes.settings, previous.settings, at);
  for (const change of hermes) next[change.address] = hermesConditions(change, outcomes[change.address], previous[change.address], at);
  const sorted = Object.fromEntries(Object.entries(next).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  if (persist && JSON.stringify(sorted) !== JSON.stringify(previous)) await state.writeConditions(sorted);
  return sorted;
}

function otherChanges(model: Model, observed: Observed, plan: Plan | undefined): { settings: SettingsChange; buckets: SettingsBuckets; hermes: HermesChange[] } {
  const settings = plan?.changes.find((c): c is SettingsChange => c.kind === "settings");
  // A whole plan (one made without `only`) already holds both kinds.
  if (plan !== undefined && settings !== undefined) {
    return { settings, buckets: plan.settings, hermes: plan.changes.filter((c): c is HermesChange => c.kind === "hermes") };
  }
  const { change, buckets } = planSettings(model.settings, observed.applied_settings);
  return { settings: change, buckets, hermes: planHermes(model, observed).changes };
}
