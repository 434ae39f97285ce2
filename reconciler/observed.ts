import type { Settings, SlotView } from "../schema/index.js";

/**
 * What the planner reads besides the Model: one snapshot of the world, taken
 * by `observe()` (I/O) before planning. The planner never does I/O itself.
 */

/** A slot as plans show it and runtimes record it, and a Hermes profile's hal0 keys: the plan contract's views (schema/plan.ts). */
export type { SlotView, HermesView } from "../schema/index.js";

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
  /** Swarm: the node its task runs on (or last ran on), and the node Swarm moved it from, if it did. */
  readonly node?: SlotNode;
  /**
   * Swarm: why its service has no healthy task although it exists as
   * desired — its node is down (`node_down`) or no node matches its
   * placement (`unschedulable`). Swarm holds the task; a re-create would not
   * help, so the planner reports it (a Degraded slot) instead of churning it.
   */
  readonly unplaced?: { readonly reason: "node_down" | "unschedulable"; readonly message: string };
  /**
   * Swarm: its service exists and Swarm itself is starting its task — again
   * after its runner exited (the restart delay, then pending, preparing,
   * starting), or for the first time. The slot is starting, not missing:
   * re-creating the service would fight Swarm's own restart, so the planner
   * leaves it to Swarm. `failed`: how many of its tasks ended (failed, were
   * rejected, or exited 0) in the CRASH_WINDOW_MS before this one, for a
   * runner Swarm keeps restarting (a crash loop).
   */
  readonly starting?: { readonly message: string; readonly failed: number };
}

/** Where a swarm slot's task is. */
export interface SlotNode {
  readonly id: string;
  readonly hostname: string;
  /** The node's address (`Status.Addr`): hal0 reaches the runner there. */
  readonly addr: string;
  /** The node Swarm rescheduled the slot away from (an earlier task ran there), when it did. */
  readonly moved_from?: string;
}

/** One node of a multi-node runtime (Swarm), as `hal0 status` and `/api/status` list it. */
export interface ObservedNode {
  readonly id: string;
  readonly hostname: string;
  readonly addr: string;
  readonly role: "manager" | "worker";
  /** `ready`, `down`, `disconnected` or `unknown` (the engine's `Status.State`). */
  readonly state: string;
  /** `active`, `pause` or `drain`. */
  readonly availability: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly engine_version: string;
  /** The message the engine gives with its state (why a node is down), when any. */
  readonly message?: string;
}

/** A process that holds a desired slot's port and is not that slot's runner as hal0 knows it. */
export interface ForeignPort {
  readonly port: number;
  readonly pid?: number;
  readonly command?: string;
  /**
   * The container it runs in, when that container carries this box's labels
   * for a slot (`hal0.slot`) but another name than the slot's: made by hal0,
   * then renamed by hand, so hal0 no longer takes it for the slot.
   */
  readonly container?: {
    readonly name: string;
    readonly slot: string;
    /** The slot's own container (named hal0-slot-<slot>) in a state observe does not count as running (paused, restarting): stopping the slot stops it. */
    readonly state?: string;
  };
  /**
   * The slot it is a runner of, when it carries this state folder's runner
   * markers (process runtime) but no record names it: hal0 started it (a start
   * cut short before its record was written, or what a runner left running),
   * and stopping that slot stops it.
   */
  readonly runner?: { readonly slot: string };
  /**
   * The box it belongs to, when it is another hal0 box's runner on this host:
   * a process marked as the runner of another state folder (`state`, process
   * runtime), or a running container labelled for another box id (`box`,
   * with its `container` name). `slot` is that box's slot. hal0 leaves it alone.
   */
  readonly other_box?: { readonly state?: string; readonly box?: string; readonly slot?: string; readonly container?: string };
}

/**
 * A container of this box carrying slot `slot`'s labels under another name
 * than the slot's (`hal0-slot-<slot>`, docker-container.ts), in words: hal0
 * made it, but no longer takes it for the slot.
 */
export function renamedContainerWords(container: { readonly name: string; readonly slot: string; readonly state?: string }): string {
  if (container.state !== undefined) return `container ${container.name}, slot \`${container.slot}\`'s own, which is ${container.state} (not running, yet holding the port)`;
  return `container ${container.name}, which hal0 started as slot \`${container.slot}\` (it carries this box's hal0.slot=${container.slot} labels) but which is no longer named hal0-slot-${container.slot}, so hal0 does not take it for the slot; rename it back, or hal0 down stops it`;
}

/** Another hal0 box's runner or container (`ForeignPort.other_box`), in words. */
export function otherBoxWords(holder: { readonly pid?: number; readonly command?: string }, other: NonNullable<ForeignPort["other_box"]>): string {
  const which = other.container !== undefined ? `container ${other.container}` : holder.command === undefined ? `pid ${holder.pid}` : `pid ${holder.pid} (${holder.command})`;
  const owner = other.box !== undefined ? `box ${other.box}` : `state folder ${other.state}`;
  const slot = other.slot === undefined ? "a runner" : `slot \`${other.slot}\`'s runner`;
  return `${which}, ${slot} of another hal0 box on this host (its ${owner}), which this box leaves alone: stop that slot there, or give one of the two another port`;
}

/** A process marked as slot `slot`'s runner that no record names (`ForeignPort.runner`), in words. */
export function unrecordedRunnerWords(holder: { readonly pid?: number; readonly command?: string }, slot: string): string {
  const which = holder.command === undefined ? `pid ${holder.pid}` : `pid ${holder.pid} (${holder.command})`;
  return `${which}, a runner hal0 started as slot \`${slot}\` that no record names (its start was cut short, or its runner left it running); stopping slot \`${slot}\` stops it`;
}

export interface Observed {
  /** Every slot the runtime has a record of or found running, by name. */
  readonly slots: Readonly<Record<string, ObservedSlot>>;
  /** The nodes of a multi-node runtime (Swarm), by hostname order; absent on one box. */
  readonly nodes?: readonly ObservedNode[];
  /** The settings last applied to this box (absent before the first apply). */
  readonly applied_settings?: Settings;
  /** Desired slot name → the foreign holder of its port, when one was found. */
  readonly foreign_ports: Readonly<Record<string, ForeignPort>>;
  /** Each named Hermes profile's `config.yaml` text (`<[hermes] home>/profiles/<p>/`); absent or empty when there is no home. */
  readonly hermes_profiles?: Readonly<Record<string, ObservedHermesProfile>>;
  /** The default profile's config.yaml (`<[hermes] home>/config.yaml`), read only when asked (`hermesDefault`): the sweep never converges it. */
  readonly hermes_default?: ObservedHermesProfile;
  /** What hal0 recorded writing into each profile (`hermes-managed.json` of the state folder). */
  readonly hermes_managed?: HermesManaged;
  /**
   * `[hermes] home` as seen now: the profile folders it holds, or why it
   * cannot be observed (missing, empty, unreadable: then no profile hal0
   * wired counts as removed). Absent in older observations: nothing is removed.
   */
  readonly hermes_home?: { readonly folders?: readonly string[]; readonly unobservable?: string };
  /**
   * Per identity of an observed profile (`hermes__<p>`), the fingerprint of
   * the agent token hal0 hands on to it, or null when none is live yet (one is
   * minted when the profile is written). Never the token. Absent when the
   * observation had no credentials (no `hermesCredentials`): hal0 then writes
   * no `Authorization` header.
   */
  readonly hermes_tokens?: Readonly<Record<string, string | null>>;
}

/**
 * How the I/O side reaches the agent tokens hal0 hands on to Hermes profiles,
 * injected by the composition roots (the server's TokenStore over
 * `<state>/hal0.db`; the reconciler does not import server/). observe reads
 * `fingerprint` (never minting); only the executor, writing a profile's hal0
 * entries, reads `token`, which mints and keeps one when none is live.
 */
export interface HermesCredentials {
  /** `fingerprint()` (compiler/hash.ts) of the live token kept for `identity`; null when none is. */
  fingerprint(identity: string): string | null;
  /** The plain token for `identity`, minted (and kept in `<state>/tokens/<identity>`) when none is live. */
  token(identity: string): string;
  /** Revokes every live agent token of `identity` and removes its kept copy (a removed profile); the next `token` mints a fresh one. */
  revoke(identity: string): void;
}

export interface ObservedHermesProfile {
  readonly text: string;
  /** Why the config.yaml there cannot be read (a folder, a pipe, permission denied); `text` is then empty and the plan leaves the file alone. */
  readonly unreadable?: string;
}

/**
 * `<state>/hermes-managed.json`: per Hermes profile, the installed MCP server
 * ids hal0 joined into it (only those are ever removed) and a digest of the
 * keys hal0 last wrote (a difference from it is a hand edit: drift). The
 * default profile (`<home>/config.yaml`, converged only on demand) is `default`.
 */
export interface HermesManaged {
  readonly profiles: Readonly<Record<string, HermesManagedProfile>>;
  readonly default?: HermesManagedProfile;
}

export interface HermesManagedProfile {
  readonly ids: readonly string[];
  /** hashOf the hal0 keys last written (absent: hal0 never wrote this file). */
  readonly applied?: string;
  /**
   * The hal0 keys last written, as plans show them (every bearer `Bearer
   * [redacted]`): the base of the three-way merge that, under drift =
   * "warn", brings hal0's later changes into a profile edited by hand.
   * Absent in records written before it was kept.
   */
  readonly base?: Readonly<Record<string, unknown>>;
}


/**
 * What hal0 created, kept in the state folder (`inventory.json`). Only
 * members are ever deleted; hal0 never stops what it did not start.
 */
export interface Inventory {
  readonly version: 1;
  /** This box's id (`hal0.box` label), made on first apply. */
  readonly box: string;
  /**
   * The state folder the inventory was last written in (its absolute path): a
   * copy of the folder (`cp -a`) names the original, still there with the
   * same id, and is given an id of its own (state.ts).
   */
  readonly state?: string;
  /**
   * The config folder the box was last converged to (absolute): `hal0 plan`
   * and `apply` with another one say so, since the plan then stops the
   * slots only that folder names (a --state pointed at another box's folder).
   */
  readonly config?: string;
  readonly slots: Readonly<Record<string, InventorySlot>>;
}

export interface InventorySlot {
  readonly created_at: string;
  readonly runtime: "process" | "docker" | "swarm";
  /** The spec hash hal0 last started the slot with: a running spec that differs from it drifted. */
  readonly spec_hash?: string;
}

export function emptyInventory(box: string): Inventory {
  return { version: 1, box, slots: {} };
}
