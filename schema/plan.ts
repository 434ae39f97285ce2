import { z } from "zod";

/**
 * The Plan contract (DESIGN.md §4), versioned from day one like
 * `terraform show -json`. Produced by the pure planner, rendered as canonical
 * text (golden tests) and JSON, saved by `hal0 plan --out`, checked for
 * staleness by `hal0 apply --plan`. Apply is described entirely by `changes`:
 * `reason` is for people and never drives the executor.
 */
export const PLAN_FORMAT_VERSION = 1;

export const ACTIONS = ["create", "update", "replace", "delete", "no-op"] as const;
export type Action = (typeof ACTIONS)[number];

export const APPLY_CLASSES = ["immediate", "service-restart", "manual-restart"] as const;
export type ApplyClass = (typeof APPLY_CLASSES)[number];

export const Change = z.object({
  /** `slot.<name>`, `settings` or `hermes.<profile>`. Changes are sorted by address. */
  address: z.string(),
  kind: z.enum(["slot", "settings", "hermes"]),
  action: z.enum(ACTIONS),
  /** Why, for people: new, not_running, spec_changed, removed_from_config, disabled, … */
  reason: z.string(),
  /** Dotted paths of what changed: `tune.ctx_size`, `argv.--threads`, `image`, `env.X`, `settings` keys, `mcp_servers.hal0-admin.url`. */
  changed_paths: z.array(z.string()),
  /** The resource as observed (null when absent) and as desired (null when it goes away). */
  before: z.unknown(),
  after: z.unknown(),
  apply_class: z.enum(APPLY_CLASSES),
  /** Stops something that is running or removes something hal0 created. */
  destructive: z.boolean(),
  /** The resource is unavailable for a while during apply. */
  downtime: z.boolean(),
});
export type Change = z.infer<typeof Change>;

export const SettingsBuckets = z.object({
  immediate: z.array(z.string()),
  service_restart: z.record(z.string(), z.array(z.string())),
  manual_restart: z.array(z.string()),
  /** Keys the registry does not classify: listed, never dropped. */
  unknown: z.array(z.string()),
});
export type SettingsBuckets = z.infer<typeof SettingsBuckets>;

/** Something the plan cannot fix by itself (a foreign process on a slot's port, …). */
export const PlanWarning = z.object({ address: z.string(), code: z.string(), message: z.string() });
export type PlanWarning = z.infer<typeof PlanWarning>;

export const PlanBody = z.object({
  format_version: z.literal(PLAN_FORMAT_VERSION),
  /** What the plan was made from: the config digest and one digest per observed resource. */
  base: z.object({ config_digest: z.string(), observed: z.record(z.string(), z.string()) }),
  has_changes: z.boolean(),
  changes: z.array(Change),
  settings: SettingsBuckets,
  warnings: z.array(PlanWarning),
  summary: z.object({ create: z.int(), update: z.int(), replace: z.int(), delete: z.int(), no_op: z.int() }),
});
export type PlanBody = z.infer<typeof PlanBody>;

/** `id` is `sha256:` of the canonical JSON of the body, so equal plans have equal ids. */
export const Plan = PlanBody.extend({ id: z.string() });
export type Plan = z.infer<typeof Plan>;
