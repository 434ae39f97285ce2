import { setMaxListeners } from "node:events";
import type { ForeignPort, ObservedNode, ObservedSlot, SlotView } from "../observed.js";

export interface ObserveOptions {
  /** Probe each running slot's `/health` (default true); false leaves health "unknown". */
  readonly health?: boolean;
  /** With health on: probe only the running slots this says yes to; the others' health stays "unknown" (the sweep's HealthCache fills it in). */
  readonly probe?: (slot: Pick<ObservedSlot, "name" | "record">) => boolean;
  /**
   * The env the config wants for a slot now. A runtime whose record keeps env
   * values sealed (docker and swarm labels) reads back each value that is
   * still the wanted one, so a plan names exactly the env that changed.
   */
  readonly desiredEnv?: (slot: string) => Readonly<Record<string, string>> | undefined;
  /** The argv the config wants for a slot now: a docker label's sealed secret flag values (`--api-key`) are read back against it, as env. */
  readonly desiredArgv?: (slot: string) => readonly string[] | undefined;
}

/** Progress of one slot while a driver starts it, for the executor's display. */
export type StartPhase = "starting" | "warming" | "ready";

export interface StartOptions {
  /** Seconds to wait for `/health` 200 before giving up (`[slots] health_timeout_s`). */
  readonly healthTimeoutS: number;
  /** Working folder for relative paths in argv: the config folder. */
  readonly cwd: string;
  readonly onPhase?: (phase: StartPhase) => void;
  /**
   * An interrupted apply: the wait for `/health` ends at once and the runner
   * is left running, recorded, for the next apply or sweep to judge
   * (DriverError `apply.interrupted`). Nothing already started is undone.
   */
  readonly signal?: AbortSignal;
}

/** The code of a step an interrupted apply did not start or did not see to its end. */
export const INTERRUPTED = "apply.interrupted";

/** The error of a start whose health wait an interrupted apply ended: the runner is left running. */
export function interruptedStart(name: string, port: number, path: string, what: string): DriverError {
  return new DriverError(INTERRUPTED, `slot ${name}: the apply was interrupted while it waited for GET ${path} on port ${port}; ${what} is left running, and the next apply or sweep checks it`);
}

/** Why a start or stop failed, with a registry code (`slot.port_in_use`, `slot.spawn_failed`, `slot.health_failed`). */
export class DriverError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

/** Who holds a port (ForeignPort without the port). */
export type PortHolder = Omit<ForeignPort, "port">;

/**
 * A slot runtime (process or docker). Drivers make no decisions: the
 * executor calls them as the plan says. Every method is idempotent where it
 * can be (stopping a stopped slot succeeds).
 */
export interface SlotDriver {
  readonly runtime: "process" | "docker" | "swarm";
  /**
   * One snapshot of every slot this runtime has a record of, with liveness
   * and, unless `health` is false, health (`GET /health`). Plans never read
   * health, so plan and apply skip the probes; status and conditions need them.
   */
  observe(options?: ObserveOptions): Promise<ObservedSlot[]>;
  /** Who holds `port` when it is not one of our slots; undefined when free. */
  portHolder(port: number): Promise<PortHolder | undefined>;
  /** Starts `name` as `view.spec` says and waits for health; records pid, spec and hash. */
  start(name: string, view: SlotView, options: StartOptions): Promise<{ pid?: number }>;
  /**
   * SIGTERM (or docker stop), then SIGKILL after `graceS`; removes the record.
   * `renamed: false` (a create clearing the slot's name before it starts it)
   * leaves a docker container of the slot renamed by hand alone.
   */
  stop(name: string, graceS: number, options?: { readonly renamed?: boolean }): Promise<void>;
  /**
   * Housekeeping that decides nothing, run once per sweep (never by a plan):
   * the process runtime keeps each runner's log under its cap. Absent where
   * the engine keeps the logs.
   */
  maintain?(): Promise<void>;
  /**
   * The last `lines` lines of a slot's runner output where the engine keeps
   * it (the docker runtime: its container's log, stdout and stderr in
   * order); undefined when this runtime has no runner of that name. (The
   * docker and swarm runtimes keep what their removed containers and services wrote last in
   * `<state>/slots/<name>/container.log`: server/slot-logs.ts reads it.) Absent
   * where hal0 writes the log itself (the process runtime's `runner.log`).
   */
  logs?(name: string, lines: number): Promise<EngineLog | undefined>;
  /** A multi-node runtime's nodes (one list call); absent on a runtime of one box. */
  nodes?(): Promise<ObservedNode[]>;
  /**
   * Where a running slot answers and what a request to it carries: a
   * multi-node runtime's runner listens on its node's address and wants the
   * box's API key. Absent: 127.0.0.1, no header.
   */
  reach?(slot: Pick<ObservedSlot, "name" | "node">): { readonly host: string; readonly headers: Readonly<Record<string, string>> } | undefined;
}

/** A slot's runner output as its engine keeps it (SlotDriver.logs). */
export interface EngineLog {
  /** Where it was read: the container's name. */
  readonly source: string;
  /** The last lines, oldest first, as the runner wrote them (not yet masked). */
  readonly lines: readonly string[];
  /** More lines precede these. */
  readonly truncated: boolean;
}

/** Whether observe probes this running slot's `/health` under `options`. */
export function wantsProbe(options: ObserveOptions, slot: Pick<ObservedSlot, "name" | "record">): boolean {
  return options.health !== false && (options.probe === undefined || options.probe(slot));
}

/**
 * An AbortController for a signal that lives as long as a command, a loop or
 * a server (SIGINT during an apply, a loop's stop, a server's drain): every
 * start under it waits for its `/health` with a listener on the signal, and
 * those waits hold no place in `[slots] parallel`, so dozens can be under way
 * at once. Node warns of a leak past 10 listeners on one signal; these are
 * not one (each wait takes its listener off: `whenAborted`), so the limit is
 * lifted for this signal alone.
 */
export function longLivedAbort(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}

/**
 * `aborted` resolves when `signal` aborts (never without one); `dispose`
 * takes the listener off again. A loop's signal lives as long as the loop
 * and sees every start of every sweep: a wait that ends must dispose, or
 * the listeners pile up.
 */
export function whenAborted(signal: AbortSignal | undefined): { readonly aborted: Promise<void>; dispose(): void } {
  if (signal === undefined) return { aborted: new Promise<void>(() => undefined), dispose: () => undefined };
  if (signal.aborted) return { aborted: Promise.resolve(), dispose: () => undefined };
  let listener!: () => void;
  const aborted = new Promise<void>((resolve) => {
    listener = () => resolve();
    signal.addEventListener("abort", listener, { once: true });
  });
  return { aborted, dispose: () => signal.removeEventListener("abort", listener) };
}
