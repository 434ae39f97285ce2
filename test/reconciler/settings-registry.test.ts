import { describe, expect, it } from "vitest";
import { leaves, planSettings, settingsBuckets } from "../../reconciler/settings-plan.js";
import { APPLY_CLASSES, SETTINGS_REGISTRY, Settings } from "../../schema/index.js";

/** The settings apply-plan registry covers exactly the leaf keys of `Settings`. */
const LEAF_KEYS = [...leaves(Settings.parse({})).keys()].sort();

describe("SETTINGS_REGISTRY", () => {
  it("classifies every leaf key of Settings (arrays are one leaf)", () => {
    expect(LEAF_KEYS).toContain("server.allowed_hosts");
    expect(LEAF_KEYS).toContain("models.roots");
    for (const key of LEAF_KEYS) expect(Object.hasOwn(SETTINGS_REGISTRY, key), key).toBe(true);
  });

  it("has no key that Settings lacks", () => {
    expect(Object.keys(SETTINGS_REGISTRY).sort()).toEqual(LEAF_KEYS);
  });

  it("names services exactly for service-restart keys", () => {
    for (const [key, entry] of Object.entries(SETTINGS_REGISTRY)) {
      expect(APPLY_CLASSES, key).toContain(entry.apply_class);
      if (entry.apply_class === "service-restart") expect(entry.services?.length, key).toBeGreaterThan(0);
      else expect(entry.services, key).toBeUndefined();
    }
  });

  it("keeps the classes DESIGN.md and the brief name", () => {
    const cls = (key: string) => [SETTINGS_REGISTRY[key]!.apply_class, ...(SETTINGS_REGISTRY[key]!.services ?? [])].join(" ");
    expect(cls("slots.health_timeout_s")).toBe("immediate");
    expect(cls("server.port")).toBe("service-restart hal0-api");
    expect(cls("slots.runtime")).toBe("service-restart slots");
    expect(cls("models.store")).toBe("service-restart slots");
    expect(cls("slots.port_range_start")).toBe("manual-restart");
    expect(cls("meta.schema_version")).toBe("manual-restart");
  });
});

describe("planSettings", () => {
  const defaults = Settings.parse({});

  it("treats absent applied settings as the defaults: a first apply with defaults is a no-op", () => {
    expect(planSettings(defaults, undefined).change).toMatchObject({ action: "no-op", reason: "unchanged", changed_paths: [] });
  });

  it("names a first apply that changes something", () => {
    const desired = Settings.parse({ reconcile: { interval_s: 60 } });
    expect(planSettings(desired, undefined).change).toMatchObject({ action: "update", reason: "first_apply", changed_paths: ["reconcile.interval_s"], apply_class: "immediate", downtime: false });
  });

  it("compares arrays as whole values", () => {
    const desired = Settings.parse({ models: { roots: ["/var/lib/hal0/models", "/srv/models"] } });
    const { change, buckets } = planSettings(desired, defaults);
    expect(change.changed_paths).toEqual(["models.roots"]);
    expect(buckets.service_restart).toEqual({ "hal0-api": ["models.roots"] });
    expect(change).toMatchObject({ apply_class: "service-restart", downtime: true });
  });

  it("lists a changed key the registry does not know under unknown, and takes it as manual-restart", () => {
    const applied = { ...defaults, slots: { ...defaults.slots, idle_timeout_s: 600 } } as unknown as Settings;
    const { change, buckets } = planSettings(defaults, applied);
    expect(buckets.unknown).toEqual(["slots.idle_timeout_s"]);
    expect(change).toMatchObject({ action: "update", changed_paths: ["slots.idle_timeout_s"], apply_class: "manual-restart" });
  });

  it("buckets keys by class, services sorted, keys in input order", () => {
    expect(settingsBuckets(["memory.enabled", "models.store", "reconcile.drift", "bridge.enabled", "server.host", "slots.port_range_end"])).toEqual({
      immediate: ["reconcile.drift", "bridge.enabled"],
      service_restart: { "hal0-api": ["memory.enabled", "server.host"], slots: ["models.store"] },
      manual_restart: ["slots.port_range_end"],
      unknown: [],
    });
  });
});
