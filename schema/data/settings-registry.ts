import type { ApplyClass } from "../plan.js";

/**
 * How each `hal0.toml` setting takes effect once applied, keyed by dotted leaf
 * key (`server.port`; arrays are one leaf: `models.roots`). The planner sorts
 * a settings change's keys into the Plan's buckets with it; a key missing
 * here lands in `unknown`, never dropped. `test/reconciler/settings-registry.test.ts`
 * holds it equal to the leaf keys of `Settings`.
 *
 * - immediate: read on every use (each sweep, each start or stop); applying is enough.
 * - service-restart: read once when a service starts; the executor restarts
 *   each named service (`hal0-api` the server; `slots` every slot runner).
 * - manual-restart: fixed for the box's lifetime, or risky to change while
 *   slots run; an operator restarts by hand after checking.
 */
export interface SettingsRegistryEntry {
  readonly apply_class: ApplyClass;
  /** The services to restart; only for `service-restart`. */
  readonly services?: readonly SettingsService[];
}

export type SettingsService = "hal0-api" | "slots";

const immediate: SettingsRegistryEntry = { apply_class: "immediate" };
const manual: SettingsRegistryEntry = { apply_class: "manual-restart" };
const api: SettingsRegistryEntry = { apply_class: "service-restart", services: ["hal0-api"] };
const slots: SettingsRegistryEntry = { apply_class: "service-restart", services: ["slots"] };

export const SETTINGS_REGISTRY: Readonly<Record<string, SettingsRegistryEntry>> = {
  // The schema version is fixed for the box; a change is a migration.
  "meta.schema_version": manual,
  // The HTTP server binds and builds its host/origin gate at start.
  "server.host": api,
  "server.port": api,
  "server.allowed_hosts": api,
  "server.allowed_origins": api,
  // Read on every request (the gate is rebuilt from the settings applied): a new public origin is the pages' at once.
  "server.public_origins": immediate,
  // Read on every request: turning auth on or off takes effect at once.
  "server.auth": immediate,
  // Read on every request that has a body: a new limit applies to the next request.
  "server.max_body_kb": immediate,
  // Runners are (re)built against the runtime and its daemon.
  "slots.runtime": slots,
  "slots.docker_host": slots,
  // Ports already handed out may sit outside a new range: checked by hand.
  "slots.port_range_start": manual,
  "slots.port_range_end": manual,
  // Read at each start, stop and sweep.
  "slots.max_slots": immediate,
  "slots.health_timeout_s": immediate,
  "slots.stop_grace_s": immediate,
  "slots.parallel": immediate,
  "slots.pull": immediate,
  // Read at each sweep (the process runtime's logs) and each container created.
  "slots.log_max_mb": immediate,
  "reconcile.interval_s": immediate,
  "reconcile.drift": immediate,
  "approvals.ttl_s": immediate,
  // Read when a bridge run starts.
  "hermes.command": immediate,
  "hermes.run_timeout_s": immediate,
  // Read on every /mcp/agents request (off closes its sessions) and when a run would start.
  "bridge.enabled": immediate,
  "bridge.max_runs": immediate,
  // The server wires Hermes and memory when it starts.
  "hermes.home": api,
  "memory.enabled": api,
  "memory.engine": api,
  "memory.url": api,
  // The server scans model roots at start; runners mount the store.
  "models.roots": api,
  "models.store": slots,
  // Read when a pull starts and at each apply.
  "models.pull_parallel": immediate,
  "models.pull_on_apply": immediate,
};
