import { existsSync } from "node:fs";
import { compile, type Model, type SourceTree } from "../compiler/index.js";
import type { Diagnostic } from "../schema/index.js";
import { ProcessDriver } from "../reconciler/drivers/process.js";
import { StateStore } from "../reconciler/state.js";
import { sameFolder } from "../reconciler/state-folder.js";
import type { HermesCredentials, SlotDriver } from "../reconciler/index.js";
import { stateHermesCredentials } from "../server/identity/hermes-credentials.js";
import type Dockerode from "dockerode";
import type { InspectCache } from "../reconciler/drivers/docker.js";
import { compileFromCache, withRunners, runnerErrors, type ObservedCompile } from "../reconciler/runner-observe.js";
import { RunnerProbe } from "../reconciler/runner-probe.js";
import { engineAddress, imageStallMs } from "../reconciler/images.js";
import { CliError, InvalidConfigError, type CliIo } from "./io.js";
import { configDir, readTree, stateDir } from "./paths.js";
import { RuntimeSwitchDriver } from "../reconciler/drivers/runtime-switch.js";

/** A compiled box with its runtime driver and state folder: what plan, apply, status and down work on. */
export interface Box {
  readonly root: string;
  readonly model: Model;
  readonly driver: SlotDriver;
  readonly state: StateStore;
  /** The agent tokens hal0 hands on to Hermes profiles, in the state folder's token store (pass to observe and executePlan). */
  readonly hermesCredentials: HermesCredentials;
  /** The runners' facts the model was compiled with, and what the probe said (missing or failed runners). */
  readonly runners: ObservedCompile;
  /** The texts the model was compiled from (what `movedSince` compares the files on disk with). */
  readonly tree: SourceTree;
}

/**
 * The files of the tree that differ on disk now from the texts `box` was compiled from (edited, added, removed),
 * sorted: a command that read the tree, then waited (a runner's probe, the apply lock), checks it still plans from
 * what is there.
 */
export async function movedSince(box: Pick<Box, "tree">, flags: { config?: string }, io: CliIo): Promise<string[]> {
  const { tree } = await readTree(flags, io);
  const names = new Set([...box.tree.files.keys(), ...tree.files.keys()]);
  return [...names].filter((f) => box.tree.files.get(f) !== tree.files.get(f)).sort();
}


/**
 * Loads and compiles the config folder and builds the runtime for it. This is
 * a composition root: the only place the CLI constructs real drivers.
 */
export async function openBox(flags: { config?: string; state?: string }, io: CliIo, options: { readonly checkRunners?: boolean; readonly makesState?: boolean } = {}): Promise<Box> {
  const { root, tree, diagnostics: carried } = await readTree(flags, io);
  // A valid box, and an empty one: said, since --config pointed at the wrong folder would have apply delete every slot hal0 started.
  if (tree.files.size === 0 && !carried.some((d) => d.code === "config.read_error")) io.stderr.write(`note: ${root} holds no .toml file: an empty box, which wants no slot (the config is the folder that holds hal0.toml)\n`);
  const state = new StateStore(stateDir(flags.state, io.env, io.cwd));
  // The runners' facts (each asked --version / --help once, cached in the state folder): argv in each runner's dialect, checked.
  // Compiled once with the cached facts; again only when the probe finds others (runner-observe.ts).
  // A command that only reads (status, drift, plan, down) keeps the facts in memory when the state folder is not there:
  // a mistyped --state leaves no folder behind. apply (makesState) makes the folder anyway, and caches there.
  const runners = runnerProbeFor(root, options.makesState || existsSync(state.dir) ? state.dir : null);
  const { first, given } = compileFromCache(tree, carried, runners.probe);
  if (!first.model) throw new InvalidConfigError(root, first.diagnostics, tree.files);
  const driver = await driverFor(first.model, state.dir, io.env);
  const observed = await withRunners(first, tree, carried, runners.probe, "probe", given);
  const model = observed.result.model ?? first.model;
  if (options.checkRunners) {
    // A flag a runner would refuse stops plan and apply before anything starts, located like any compile error.
    const errors = runnerErrors(model);
    if (errors.length > 0) throw new InvalidConfigError(root, [...errors, ...model.runnerDiagnostics.filter((d) => d.severity === "warning")], tree.files);
  }
  return { root, model, driver, state, hermesCredentials: stateHermesCredentials(state.dir), runners: observed, tree };
}

/**
 * What `hal0 down` and `hal0 status` work on when the tree does not compile: no slot is
 * wanted, and the runtime is the one of the settings last applied (the
 * settings the running slots were started with; the defaults when nothing was
 * ever applied). Stopping what hal0 started needs the inventory and the
 * runtime, not the tree, so an operator who broke a file can still see and stop the box.
 */
export async function inventoryBox(root: string, flags: { state?: string }, io: CliIo): Promise<Pick<Box, "root" | "model" | "driver" | "state" | "hermesCredentials">> {
  const state = new StateStore(stateDir(flags.state, io.env, io.cwd));
  const empty = compile({ root, files: new Map() }).model!;
  const model: Model = { ...empty, settings: (await state.readAppliedSettings()) ?? empty.settings };
  const driver = await driverFor(model, state.dir, io.env);
  return { root, model, driver, state, hermesCredentials: stateHermesCredentials(state.dir) };
}

/** The engine the last docker driver was built with: the runner probe asks images through the same one. */
let lastDocker: Dockerode | undefined;

/**
 * A runner probe for a box: its cache in the state folder; images asked
 * through the engine the docker runtime uses. Runners are looked up and run
 * with hal0's own environment (process.env), as the process driver spawns them.
 */
export function runnerProbeFor(root: string, stateDir: string | null): { readonly probe: RunnerProbe } {
  return { probe: new RunnerProbe({ stateDir, root, env: process.env, docker: () => lastDocker }) };
}

const MIB = 1024 * 1024;

/**
 * The runtime `[slots] runtime` names. Docker: the engine at `[slots]
 * docker_host`, else $DOCKER_HOST, else the default socket, which must answer;
 * dockerode is loaded only for a docker box (it takes ~0.3 s to import).
 */
export async function driverFor(model: Model, dir: string, env: CliIo["env"] = process.env, options: DriverOptions = {}): Promise<SlotDriver> {
  const current = await runtimeDriver(model, dir, env, options);
  // Slots hal0 started on another runtime ([slots] runtime changed since): observed and stopped where they run.
  const state = new StateStore(dir);
  const inventory = await state.readInventory();
  const others = new Map<SlotDriver["runtime"], string[]>();
  for (const [name, slot] of Object.entries(inventory.slots)) {
    if (slot.runtime !== current.runtime) others.set(slot.runtime, [...(others.get(slot.runtime) ?? []), name]);
  }
  if (others.size === 0) return current;
  const applied = (await state.readAppliedSettings()) ?? model.settings;
  const formers: SlotDriver[] = [];
  for (const [runtime, names] of others) {
    // The engine it was reached through: the settings last applied, when they named that runtime.
    const slots = { ...(applied.slots.runtime === runtime ? applied.slots : model.settings.slots), runtime };
    try {
      formers.push(await runtimeDriver({ ...model, settings: { ...model.settings, slots } }, dir, env, options));
    } catch (err) {
      const why = err instanceof CliError ? err.message : (err as Error).message;
      throw new CliError("runtime.unavailable", `slot${names.length > 1 ? "s" : ""} ${names.join(", ")} ${names.length > 1 ? "were" : "was"} started on the ${runtime} runtime and [slots] runtime is now "${current.runtime}": hal0 must stop ${names.length > 1 ? "them" : "it"} there first, but ${why}`);
    }
  }
  return new RuntimeSwitchDriver(current, formers);
}

export interface DriverOptions {
  /**
   * A long-lived process (hal0 serve, hal0 reconcile): the docker runtime's drivers
   * it makes share their containers' inspects (InspectCache, reused while the
   * engine lists a container unchanged, for up to INSPECT_REUSE_MS). A one-shot
   * command leaves it off: it observes the engine afresh.
   */
  readonly reuseInspects?: boolean;
}

/** The inspects each engine and box's drivers share in this process (DriverOptions.reuseInspects). */
const inspectCaches = new Map<string, InspectCache>();

/** The driver of the runtime `model`'s settings name (driverFor). */
async function runtimeDriver(model: Model, dir: string, env: CliIo["env"], options: DriverOptions = {}): Promise<SlotDriver> {
  const slots = model.settings.slots;
  if (slots.runtime === "swarm") return swarmDriverFor(model, dir, env);
  if (slots.runtime !== "docker") return new ProcessDriver({ stateDir: dir, logMaxBytes: slots.log_max_mb * MIB });
  const { DockerDriver, InspectCache, dockerClient } = await import("../reconciler/drivers/docker.js");
  const host = engineAddress(slots.docker_host, env);
  const { answered, engineDownMessage } = await import("../reconciler/drivers/docker-engine.js");
  const { redactText } = await import("../server/redact.js");
  let docker: ReturnType<typeof dockerClient>;
  try {
    docker = dockerClient(host);
  } catch (err) {
    throw new CliError("runtime.unavailable", engineDownMessage("docker", host, (err as Error).message));
  }
  try {
    // dockerode's ping takes the signal, its types do not say so.
    const ping = docker.ping.bind(docker) as unknown as (options: { abortSignal: AbortSignal }) => Promise<unknown>;
    await answered((abortSignal) => ping({ abortSignal }), host);
    lastDocker = docker;
  } catch (err) {
    // No answer is answered's own message; an engine that answers the ping with an error is down all the same.
    throw new CliError("runtime.unavailable", (err as { code?: unknown }).code === "runtime.unavailable" ? (err as Error).message : engineDownMessage("docker", host, (err as Error).message));
  }
  // Every container carries the box id (hal0.box); it is stable without a write, so planning stays read-only.
  const box = await new StateStore(dir).boxId();
  let inspections: InspectCache | undefined;
  if (options.reuseInspects === true) {
    const key = JSON.stringify([host, box]);
    inspections = inspectCaches.get(key) ?? new InspectCache();
    inspectCaches.set(key, inspections);
  }
  return new DockerDriver({ docker, address: host, box, stateDir: dir, stopGraceS: slots.stop_grace_s, pull: slots.pull, pullStallMs: imageStallMs(env), logMaxMb: slots.log_max_mb, maskLog: redactText, ...(inspections ? { inspections } : {}) });
}

/** The swarm runtime: the manager's engine (`[slots] docker_host`, else $DOCKER_HOST), which must answer and be a swarm manager. */
async function swarmDriverFor(model: Model, dir: string, env: CliIo["env"]): Promise<SlotDriver> {
  const slots = model.settings.slots;
  const [{ SwarmDriver }, { dockerClient }, { SwarmKey }, { within }, { redactText }] = await Promise.all([import("../reconciler/drivers/swarm.js"), import("../reconciler/drivers/docker.js"), import("../reconciler/drivers/swarm-key.js"), import("../reconciler/drivers/docker-engine.js"), import("../server/redact.js")]);
  const host = engineAddress(slots.docker_host, env);
  let docker: ReturnType<typeof dockerClient>;
  try {
    docker = dockerClient(host);
    // Bounded as the docker runtime's ping is (an engine that takes the connection and never answers); dockerode's info takes the signal, its types do not say so.
    const info = (await within((abortSignal) => (docker.info.bind(docker) as unknown as (o: { abortSignal: AbortSignal }) => Promise<unknown>)({ abortSignal }))) as { Swarm?: { LocalNodeState?: string; ControlAvailable?: boolean } };
    if (info.Swarm?.ControlAvailable !== true) {
      throw new CliError("runtime.unavailable", `[slots] runtime = "swarm": the engine at ${host} is not a swarm manager (swarm state ${info.Swarm?.LocalNodeState || "inactive"}); run docker swarm init there, or point [slots] docker_host or DOCKER_HOST at a manager`);
    }
    lastDocker = docker;
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError("runtime.unavailable", `[slots] runtime = "swarm": the engine at ${host} does not answer (${(err as Error).message}); start it, or set [slots] docker_host or DOCKER_HOST`);
  }
  const box = await new StateStore(dir).boxId();
  return new SwarmDriver({ docker, address: host, box, stateDir: dir, key: new SwarmKey(dir), stopGraceS: slots.stop_grace_s, maskLog: redactText });
}

/**
 * What `hal0 plan` and `hal0 apply` say of the runners on stderr, before the
 * plan: each runner warning of the argv check (a deprecated flag, at its
 * key), and each runner the probe could not ask (why). A runner that is not
 * installed is the preflight's (slot.runner_missing).
 */
export async function writeRunnerNotes(box: Box, io: CliIo): Promise<void> {
  for (const d of box.model.runnerDiagnostics) {
    if (d.severity === "warning") io.stderr.write(`note: ${d.file}:${d.line}:${d.column}: ${d.code}: ${d.summary}\n`);
  }
  const failed = box.runners.probe?.failed ?? new Map<string, string>();
  if (failed.size === 0) return;
  // Why a probe failed quotes what the runner printed, run with its slot's env: masked as every CLI line quoting a runner.
  const { redactText } = await import("../server/redact.js");
  for (const [key, why] of failed) io.stderr.write(redactText(`note: runner ${key} could not be probed (${why}): its slots' argv is written for the newest known llama-server and not checked\n`));
}

/**
 * The tree's warnings (`hal0 validate` prints each in full): the compile's,
 * then the runners' argv check's. A plan with them is still a plan (its
 * exit status is the plan's); `hal0 plan` and `apply` print them after the
 * plan, `plan --json` as its `diagnostics`.
 */
export function treeWarnings(box: Pick<Box, "model" | "runners">): Diagnostic[] {
  return [...box.runners.result.diagnostics, ...box.model.runnerDiagnostics].filter((d) => d.severity === "warning");
}

/**
 * The text of the tree's compile warnings, for after the plan: one line each,
 * `file:line:col: warning[code]: summary` (file relative to the config
 * folder; the runners' warnings were notes before the plan). Empty when none.
 */
export async function warningLines(box: Pick<Box, "model" | "runners">): Promise<string> {
  const compiled = box.runners.result.diagnostics.filter((d) => d.severity === "warning");
  if (compiled.length === 0) return "";
  // A summary can quote a value of the tree: masked as every CLI line quoting the tree.
  const { redactText } = await import("../server/redact.js");
  const { printableMessage } = await import("../server/errors.js");
  const lines = compiled.map((d) => printableMessage(redactText(`  ${d.file}:${d.line}:${d.column}: warning[${d.code}]: ${d.summary}`)));
  return `\n${compiled.length === 1 ? "1 warning" : `${compiled.length} warnings`} in the configuration (hal0 validate shows each in full):\n${lines.join("\n")}\n`;
}

/**
 * A `hal0 serve` whose reconcile loop runs on this state folder for another
 * config folder converges the box back to that folder at its next sweep:
 * what `hal0 plan` shows and `hal0 apply` changes from this one would be
 * undone, the two fighting over the slots. Said on stderr before the plan.
 */
export async function writeOtherServeNote(box: Pick<Box, "root" | "state">, io: CliIo): Promise<void> {
  const { serveHolder, serveLabel } = await import("../reconciler/lock.js");
  const serving = await serveHolder(box.state.dir);
  if (!serving?.reconcile || serving.config === undefined || sameFolder(serving.config, box.root) === true) return;
  io.stderr.write(`note: ${serveLabel(serving)} runs the reconcile loop on this state folder for the config folder ${serving.config}, not ${box.root}: its next sweep converges the box back to that folder, undoing this plan; give this box its own --state, or stop that server\n`);
}

/**
 * A state folder belongs to one config folder: one last converged to another
 * config folder than this one (a --state, or $HAL0_STATE, pointed at another
 * box's folder) would have this plan stop every slot only that folder names
 * and start this one's in their place. Said on stderr before the plan; not
 * when a running serve's loop holds the folder (writeOtherServeNote says so).
 */
export async function writeOtherConfigNote(box: Pick<Box, "root" | "state">, io: CliIo): Promise<void> {
  const { serveHolder } = await import("../reconciler/lock.js");
  const last = (await box.state.readInventory()).config;
  if (last === undefined || sameFolder(last, box.root) === true) return;
  const serving = await serveHolder(box.state.dir);
  if (serving?.reconcile && serving.config !== undefined) return;
  io.stderr.write(`note: the state folder ${box.state.dir} was last applied from the config folder ${last}, not ${box.root}: this plan converges its box to ${box.root}, stopping the slots only ${last} names; if that is another box, give this one its own --state\n`);
}


/**
 * The stores `hal0 serve` uses (its database, box, approvals, pulls), opened
 * in this process without a listener: for CLI commands that work on them
 * directly. Loaded only here (better-sqlite3, h3). The caller closes it.
 */
export async function localServer(flags: { config?: string; state?: string }, io: CliIo) {
  const { createHal0Server } = await import("../server/hal0-server.js");
  const state = stateDir(flags.state, io.env, io.cwd);
  return createHal0Server({ root: configDir(flags.config, io.env, io.cwd), stateDir: state, driverFor: (m) => driverFor(m, state, io.env), env: io.env as NodeJS.ProcessEnv, guest: true });
}
