import type { FullTune, Settings, SlotType, Device } from "../schema/index.js";
import type { SlotSpec } from "../compiler/index.js";

/**
 * What the planner reads besides the Model: one snapshot of the world, taken
 * by `observe()` (I/O) before planning. The planner never does I/O itself.
 */

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
}

/** Health of a running slot, from `GET /health`. */
export type SlotHealth = "ok" | "loading" | "down" | "unknown";

export interface ObservedSlot {
  readonly name: string;
  /** What the runtime recorded when it started this slot (absent: never started, or record lost). */
  readonly record?: { readonly view: SlotView; readonly pid?: number; readonly started_at: string };
  /** The process (or container) is alive and is the one hal0 started. */
  readonly running: boolean;
  readonly health: SlotHealth;
  /** A human note on what observe found, e.g. "pid 4242 was reused by another program". */
  readonly detail?: string;
}

/** A process hal0 did not start that holds a desired slot's port. */
export interface ForeignPort {
  readonly port: number;
  readonly pid?: number;
  readonly command?: string;
}

export interface Observed {
  /** Every slot the runtime has a record of or found running, by name. */
  readonly slots: Readonly<Record<string, ObservedSlot>>;
  /** The settings last applied to this box (absent before the first apply). */
  readonly applied_settings?: Settings;
  /** Desired slot name → the foreign holder of its port, when one was found. */
  readonly foreign_ports: Readonly<Record<string, ForeignPort>>;
}

/**
 * What hal0 created, kept in the state folder (`inventory.json`). Only
 * members are ever deleted; hal0 never stops what it did not start.
 */
export interface Inventory {
  readonly version: 1;
  /** This box's id (`hal0.box` label), made on first apply. */
  readonly box: string;
  readonly slots: Readonly<Record<string, InventorySlot>>;
}

export interface InventorySlot {
  readonly created_at: string;
  readonly runtime: "process" | "docker";
  /** The spec hash hal0 last started the slot with: a running spec that differs from it drifted. */
  readonly spec_hash?: string;
}

export function emptyInventory(box: string): Inventory {
  return { version: 1, box, slots: {} };
}
