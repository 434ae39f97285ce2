import { z } from "zod";
import { DEVICES, SLOT_TYPES, type Device, type SlotType } from "./slot.js";
import { Settings } from "./settings.js";
import { REASONING_EFFORTS, SPECULATION_MODES, type FullTune } from "./tune.js";

/**
 * The Plan contract (DESIGN.md §4), versioned from day one like
 * `terraform show -json`. Produced by the pure planner, rendered as canonical
 * text (golden tests) and JSON, saved by `hal0 plan --out`, checked for
 * staleness by `hal0 apply --plan`. Apply is described entirely by `changes`:
 * `reason` is for people and never drives the executor.
 *
 * A change is a union on `kind`: each kind has its own address form, its own
 * actions, its own closed set of reasons and its own typed `before` / `after`
 * (a slot's view, the settings, a Hermes profile's hal0 keys), so no consumer
 * casts. The JSON is the one written since format_version 1: typing it added
 * no field.
 */
export const PLAN_FORMAT_VERSION = 1;

export const ACTIONS = ["create", "update", "replace", "delete", "no-op"] as const;
export type Action = (typeof ACTIONS)[number];

export const APPLY_CLASSES = ["immediate", "service-restart", "manual-restart"] as const;
export type ApplyClass = (typeof APPLY_CLASSES)[number];

export const CHANGE_KINDS = ["slot", "settings", "hermes"] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

// ── Addresses ────────────────────────────────────────────────────────────────

/** `slot.<name>`. */
export type SlotAddress = `slot.${string}`;
/** `hermes.<profile>`; bare `hermes` is the default profile (`<home>/config.yaml`). */
export type HermesAddress = "hermes" | `hermes.${string}`;
export type Address = SlotAddress | "settings" | HermesAddress;

export function slotAddress(name: string): SlotAddress {
  return `slot.${name}`;
}

/** The slot an address names. */
export function slotNameOf(address: SlotAddress): string {
  return address.slice("slot.".length);
}

export function hermesAddress(profile: string | null): HermesAddress {
  return profile === null ? "hermes" : `hermes.${profile}`;
}

/** The profile a Hermes address names; null for the default profile. */
export function hermesProfileOf(address: HermesAddress): string | null {
  return address === "hermes" ? null : address.slice("hermes.".length);
}

/** What an address string names, or undefined when it is not one a plan uses. */
export function parseAddress(address: string): { kind: "slot"; name: string } | { kind: "settings" } | { kind: "hermes"; profile: string | null } | undefined {
  if (address === "settings") return { kind: "settings" };
  if (address === "hermes") return { kind: "hermes", profile: null };
  if (address.startsWith("slot.") && address.length > 5) return { kind: "slot", name: address.slice(5) };
  if (address.startsWith("hermes.") && address.length > 7) return { kind: "hermes", profile: address.slice(7) };
  return undefined;
}

const SlotAddressSchema = z.templateLiteral(["slot.", z.string().min(1)]);
const HermesAddressSchema = z.union([z.literal("hermes"), z.templateLiteral(["hermes.", z.string().min(1)])]);
const AddressSchema = z.union([SlotAddressSchema, z.literal("settings"), HermesAddressSchema]);

// ── Reasons (closed: for people, never read by the executor) ─────────────────

export const SLOT_REASONS = [
  "new", // enabled, never started
  "not_running", // enabled, hal0 knows it (inventory or a runtime record), not running
  "spec_unknown", // running without a record to compare, and not in the inventory: replaced (one hal0 started is `drifted`)
  "spec_changed", // the config moved what it runs
  "observed_changed", // same config, but an observed fact it runs with changed (the runner's dialect, the image's digest)
  "drifted", // changed or stopped behind hal0's back
  "unchanged",
  "disabled", // enabled = false
  "removed_from_config", // its file is gone
  "down", // `hal0 down`
  "unmanaged", // running, but hal0 did not start it: left alone
  "restart", // asked for (`replace: [address]`)
  "starting", // swarm: its service is as desired and Swarm itself is starting its task (again, after its runner exited): left to Swarm
  "unplaced", // swarm: its service is as desired, but its node is down or no node matches its placement (Swarm holds the task)
  "backing_off", // held back after failures
  "argv_refused", // its runner would refuse the argv (a removed, unknown or badly valued flag): not started, a running one left as it is
  "port_held", // running, and its new port is held by a process hal0 did not start: left running as it is until the port is free
  "image_unobserved", // running, and its image's digest cannot be read now (the image is gone from the engine, or the engine did not answer): left running as it is until it can
] as const;
export const SETTINGS_REASONS = ["unchanged", "first_apply", "changed", "backing_off"] as const;
export const HERMES_REASONS = ["new", "drifted", "changed", "opted_out", "unchanged", "invalid_yaml", "backing_off", "removed"] as const;
export type SlotReason = (typeof SLOT_REASONS)[number];
export type SettingsReason = (typeof SETTINGS_REASONS)[number];
export type HermesReason = (typeof HERMES_REASONS)[number];
export type Reason = SlotReason | SettingsReason | HermesReason;

// ── Views: what `before` / `after` hold ──────────────────────────────────────

/** The runtime-facing spec of one slot. Canonical JSON of it is hashed (`spec_hash`). */
export interface SlotSpec {
  readonly spec_version: number;
  readonly runtime: "process" | "docker" | "swarm";
  /** Docker and swarm: the image whose entrypoint is the runner. */
  readonly image?: string;
  /** Process: runner prefix + args. Docker: args only (the image's entrypoint is the runner). */
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly host: string;
  readonly port: number;
  readonly health_path: string;
  readonly device: Device;
  readonly gpu_index: number;
  /**
   * Observed facts the slot runs with, each as a stable id
   * (`runner_dialect`: how the runner spells hal0's mappings, llm slots;
   * `image_digest`: the id of the image its reference names on the engine,
   * docker slots whose image is present). In the spec hash, so a change of
   * what hal0 observed that changes what it must run for the same config
   * re-plans the slot (reason `observed_changed`, path `observed.<key>`).
   */
  readonly observed?: Readonly<Record<string, string>>;
  /**
   * The model file's sha256 as models.toml records it (a pull writes it): in
   * the hash, so a model updated in place (same path, new bytes) replaces the
   * slots that run it (path `model_sha256`). A split model whose `parts`
   * record theirs: every part's, first first, joined by `,`, so a change to
   * any part replaces them too. Absent when not recorded.
   */
  readonly model_sha256?: string;
  /**
   * Swarm only: where the slot's service may run (`[placement] node` and
   * `labels`), rendered as the service's placement constraints. In the hash,
   * so moving a slot is a replace naming `placement.node` (or
   * `placement.labels.<key>`).
   */
  readonly placement?: SlotPlacement;
}

/** A swarm slot's placement: a node (hostname or id) and the labels its node must carry. */
export interface SlotPlacement {
  readonly node?: string;
  readonly labels: Readonly<Record<string, string>>;
}

/**
 * A slot as plans show it (`before` / `after`) and as runtimes record it when
 * they start one: enough to say which field changed (`tune.ctx_size`,
 * `argv.--threads`, `image`, `env.X`, `port`, `model`).
 */
export interface SlotView {
  readonly profile: string;
  readonly model: string | null;
  readonly type: SlotType;
  readonly port: number;
  readonly device: Device;
  readonly tune: FullTune;
  readonly spec: SlotSpec;
  readonly spec_hash: string;
  /**
   * The slot's runner is a llama-server hal0 probed (its `--help` read as
   * llama-server's): the process and docker runtimes hand it the values of
   * `--api-key` and `--hf-token` in its environment (`LLAMA_API_KEY`,
   * `HF_TOKEN`), out of the command line every local user reads. Absent: they
   * stay in its argv, since another runner (FastFlowLM) or one not probed may
   * not read those variables and would then run with no key. Not in the spec:
   * it moves no hash.
   */
  readonly secrets_in_env?: boolean;
}

/** A Hermes profile's hal0 keys as plans show them (`before` / `after` of a `hermes.<p>` change). */
export interface HermesView {
  /** The profile's name; null for the default profile. */
  readonly profile: string | null;
  /** The agent identity whose token the bearer is (`hermes__<p>`, `hermes` for the default profile). */
  readonly identity: string;
  /** Absolute path of its config.yaml. */
  readonly file: string;
  /** hal0's entries under `mcp_servers`, by id (absent: not in the file / to be removed); an `Authorization` header always shows as `Bearer [redacted]`. */
  readonly mcp_servers: Readonly<Record<string, unknown>>;
  /** The joined installed-server ids hal0 owns in this file (before: recorded; after: once applied). */
  readonly managed_ids: readonly string[];
  /**
   * Only in an `after` whose `mcp_servers` is a merge of hal0's entries with
   * a hand edit kept under drift = "warn": hal0's own entries, which the
   * executor records as what it last wrote (the next merge's base).
   */
  readonly desired?: Readonly<Record<string, unknown>>;
}

const FullTuneSchema: z.ZodType<FullTune> = z.object({
  ctx_size: z.int(),
  enable_thinking: z.boolean(),
  reasoning_effort: z.enum(REASONING_EFFORTS),
  reasoning_budget: z.int(),
  vision: z.boolean(),
  speculation: z.enum(SPECULATION_MODES),
});

export const SlotSpecSchema: z.ZodType<SlotSpec> = z.object({
  spec_version: z.int(),
  runtime: z.enum(["process", "docker", "swarm"]),
  image: z.string().optional(),
  argv: z.array(z.string()),
  env: z.record(z.string(), z.string()),
  host: z.string(),
  port: z.int(),
  health_path: z.string(),
  device: z.enum(DEVICES),
  gpu_index: z.int(),
  observed: z.record(z.string(), z.string()).optional(),
  model_sha256: z.string().optional(),
  placement: z.object({ node: z.string().optional(), labels: z.record(z.string(), z.string()) }).optional(),
});

export const SlotViewSchema: z.ZodType<SlotView> = z.object({
  profile: z.string(),
  model: z.string().nullable(),
  type: z.enum(SLOT_TYPES),
  port: z.int(),
  device: z.enum(DEVICES),
  tune: FullTuneSchema,
  spec: SlotSpecSchema,
  spec_hash: z.string(),
  secrets_in_env: z.boolean().optional(),
});

export const HermesViewSchema: z.ZodType<HermesView> = z.object({
  profile: z.string().nullable(),
  identity: z.string(),
  file: z.string(),
  mcp_servers: z.record(z.string(), z.unknown()),
  managed_ids: z.array(z.string()),
  desired: z.record(z.string(), z.unknown()).optional(),
});

// ── Changes ──────────────────────────────────────────────────────────────────

const common = {
  /** Dotted paths of what changed: `tune.ctx_size`, `argv.--threads`, `image`, `env.X`, `settings` keys, `mcp_servers.hal0-admin.url`. */
  changed_paths: z.array(z.string()),
  apply_class: z.enum(APPLY_CLASSES),
  /** Stops something that is running or removes something hal0 created. */
  destructive: z.boolean(),
  /** The resource is unavailable for a while during apply. */
  downtime: z.boolean(),
};

/** A slot: created, replaced (stop, then start the new spec), deleted, or left. `before` is the runtime's record (null: none), `after` the desired view (null: it goes away). */
export const SlotChange = z.object({
  address: SlotAddressSchema,
  kind: z.literal("slot"),
  action: z.enum(["create", "replace", "delete", "no-op"]),
  reason: z.enum(SLOT_REASONS),
  before: SlotViewSchema.nullable(),
  after: SlotViewSchema.nullable(),
  ...common,
});
export type SlotChange = z.infer<typeof SlotChange>;

/** The box's settings against those last applied (absent: the defaults). */
export const SettingsChange = z.object({
  address: z.literal("settings"),
  kind: z.literal("settings"),
  action: z.enum(["update", "no-op"]),
  reason: z.enum(SETTINGS_REASONS),
  before: Settings,
  after: Settings,
  ...common,
});
export type SettingsChange = z.infer<typeof SettingsChange>;

/**
 * A Hermes profile's hal0 keys: updated in place, never destroyed. A
 * `delete` (reason `removed`) is a profile folder hal0 wired that is gone
 * from a present `[hermes] home`: its agent token is revoked, its kept copy
 * and hal0's record of it removed; no file is touched.
 */
export const HermesChange = z.object({
  address: HermesAddressSchema,
  kind: z.literal("hermes"),
  action: z.enum(["update", "delete", "no-op"]),
  reason: z.enum(HERMES_REASONS),
  before: HermesViewSchema,
  after: HermesViewSchema,
  ...common,
});
export type HermesChange = z.infer<typeof HermesChange>;

/** Changes are sorted by address. */
export const Change = z.discriminatedUnion("kind", [SlotChange, SettingsChange, HermesChange]);
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
export const PlanWarning = z.object({ address: AddressSchema, code: z.string(), message: z.string() });
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
