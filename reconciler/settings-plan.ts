import { SETTINGS_REGISTRY, Settings, type ApplyClass, type SettingsBuckets, type SettingsChange } from "../schema/index.js";
import { defaultSettings } from "../compiler/index.js";
import { same } from "./view.js";

/**
 * Plans the `settings` resource: desired settings against the ones last
 * applied, compared as dotted leaf keys (arrays are one leaf), and sorted
 * into apply-class buckets by `SETTINGS_REGISTRY`.
 */

/** Weakest first; a change takes the strongest class among its keys. */
const CLASS_RANK: Readonly<Record<ApplyClass, number>> = { immediate: 0, "service-restart": 1, "manual-restart": 2 };

export function planSettings(desired: Settings, applied: Settings | undefined): { change: SettingsChange; buckets: SettingsBuckets } {
  // Before its first apply a box runs with the defaults: an absent `applied_settings` means these.
  const before = applied ?? defaultSettings();
  const changed = changedLeafKeys(before, desired);
  const buckets = settingsBuckets(changed);
  const change: SettingsChange = {
    address: "settings",
    kind: "settings",
    action: changed.length === 0 ? "no-op" : "update",
    reason: changed.length === 0 ? "unchanged" : applied === undefined ? "first_apply" : "changed",
    changed_paths: changed,
    before,
    after: desired,
    apply_class: strongestClass(changed),
    destructive: false,
    // A service restart makes that service unavailable for a moment.
    downtime: Object.keys(buckets.service_restart).length > 0,
  };
  return { change, buckets };
}

/** Dotted leaf keys whose values differ, sorted. Plain objects are walked; arrays and scalars are leaves. */
export function changedLeafKeys(before: object, after: object): string[] {
  const a = leaves(before);
  const b = leaves(after);
  const keys = new Set([...a.keys(), ...b.keys()]);
  return [...keys].filter((key) => !same(a.get(key), b.get(key))).sort();
}

/** Every dotted leaf key of a settings-shaped object, with its value. */
export function leaves(value: object, prefix = "", into = new Map<string, unknown>()): Map<string, unknown> {
  for (const [key, child] of Object.entries(value)) {
    const path = prefix === "" ? key : `${prefix}.${key}`;
    if (child !== null && typeof child === "object" && !Array.isArray(child)) leaves(child, path, into);
    else into.set(path, child);
  }
  return into;
}

/** Sorts keys (already sorted) into buckets; a key the registry does not know goes to `unknown`. */
export function settingsBuckets(keys: readonly string[]): SettingsBuckets {
  const buckets: SettingsBuckets = { immediate: [], service_restart: {}, manual_restart: [], unknown: [] };
  const services = new Map<string, string[]>();
  for (const key of keys) {
    const entry = Object.hasOwn(SETTINGS_REGISTRY, key) ? SETTINGS_REGISTRY[key] : undefined;
    if (entry === undefined) buckets.unknown.push(key);
    else if (entry.apply_class === "immediate") buckets.immediate.push(key);
    else if (entry.apply_class === "manual-restart") buckets.manual_restart.push(key);
    else for (const service of entry.services ?? []) services.set(service, [...(services.get(service) ?? []), key]);
  }
  for (const service of [...services.keys()].sort()) buckets.service_restart[service] = services.get(service)!;
  return buckets;
}

/** The strongest apply class among `keys`; an unknown key counts as manual-restart (nobody knows it is safe). */
function strongestClass(keys: readonly string[]): ApplyClass {
  let strongest: ApplyClass = "immediate";
  for (const key of keys) {
    const cls = Object.hasOwn(SETTINGS_REGISTRY, key) ? SETTINGS_REGISTRY[key]!.apply_class : "manual-restart";
    if (CLASS_RANK[cls] > CLASS_RANK[strongest]) strongest = cls;
  }
  return strongest;
}

/**
 * `_hal0.apply_plan` of a settings write: the dotted leaf keys whose
 * effective value differs between `before` and `after`, in the registry's
 * buckets (a key the registry lacks lands in `unknown`).
 */
export function applyPlanOf(before: Settings, after: Settings): { changed: string[]; apply_plan: SettingsBuckets } {
  const changed = changedLeafKeys(before, after);
  return { changed, apply_plan: settingsBuckets(changed) };
}
