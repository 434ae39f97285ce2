import "./docker-deps.js"; // first: defers the parts of dockerode hal0 never uses
import Dockerode from "dockerode";
import { otherBoxWords, renamedContainerWords, type ObservedSlot, type SlotView } from "../observed.js";
import { DriverError, INTERRUPTED, interruptedStart, whenAborted, wantsProbe, type EngineLog, type ObserveOptions, type PortHolder, type SlotDriver, type StartOptions } from "./driver.js";
import { runnerArgv } from "./runner-secrets.js";
import { LABEL, boxFilter, containerName, deviceMappings, hostMounts, type BindMount, type DeviceMapping, type ImageDefaults, type InspectedContainer, labelledAs, logLinesOf, logTailOf, observedFrom, parseView, slotLabels, slotOf } from "./docker-container.js";
import { answered, ENGINE_ANSWER_MS, engineStatus, exitNote, ignore, imageMissingMessage, logUnread, notOursMessage, whenExited } from "./docker-engine.js";
import { healthOf, httpStatus, portHolderOf, portInUseMessage } from "./proc.js";
import { waitHealthy } from "./runner.js";
import { StateKey } from "./state-key.js";
import { LogSaves, saveContainerLog } from "./container-log.js";
import { IMAGE_STALL_MS, pullImage } from "../images.js";
import type { Device } from "../../schema/index.js";
import { DOCKER_TCP_ADDRESS, dockerHostProblem } from "../../schema/docker-host.js";

/** A pull ended because the start that began it was interrupted (ensureImage tells its own starts from others). */
class PullInterrupted extends Error {}

/** Grace given to a container stopped because it never became healthy. */
const ABORT_GRACE_S = 5;
const OBSERVE_HEALTH_TIMEOUT_MS = 1000;
const PORT_PROBE_TIMEOUT_MS = 500;
const LOG_LINES = 15;
/** How many of a removed container's last lines are read to keep (then bounded to CONTAINER_LOG_MAX_BYTES). */
const KEPT_LOG_LINES = 1000;

export interface DockerDriverOptions {
  readonly docker: Dockerode;
  /** The engine's address, as the messages name it (`runtime.unavailable`). */
  readonly address?: string;
  /** How long observe's list call may go unanswered before it is `runtime.unavailable` (ENGINE_ANSWER_MS). */
  readonly answerMs?: number;
  /** This box's id (the inventory's `box`): every container hal0 makes carries it as `hal0.box`. */
  readonly box: string;
  /**
   * The state folder. The docker runtime keeps the label key there, and each slot's
   * `slots/<name>/container.log` (the last output of the containers it removed:
   * container-log.ts); a container's labels are its record.
   */
  readonly stateDir: string;
  /** The key a container's `hal0.view` label seals env values with (default `<state>/label-key`, made by the first start). */
  readonly labelKey?: StateKey;
  /** `[slots] stop_grace_s`, the containers' StopTimeout (so a `docker stop` by hand waits as long as hal0 would). */
  readonly stopGraceS?: number;
  /** `[slots] pull`: pull a missing image instead of failing with `slot.image_missing`. */
  readonly pull?: boolean;
  /** How long that pull may go without a word from the engine before it is given up (HAL0_IMAGE_STALL_S; IMAGE_STALL_MS). */
  readonly pullStallMs?: number;
  /**
   * `[slots] log_max_mb` (default 16; 0: the engine's own log settings). A container
   * is created with it as its log's max-size (two files) when the engine logs to
   * json-file (its default, which never rotates) or local; any other log driver
   * (journald, syslog…) keeps its own retention.
   */
  readonly logMaxMb?: number;
  /**
   * Masks the secrets of a line of a removed container's output before it is
   * kept in `<state>/slots/<name>/container.log` (server/redact.ts redactText,
   * as slot_logs masks; default: none, and slot_logs masks on reading).
   */
  readonly maskLog?: (line: string) => string;
  /** Where the host's device nodes are (default /dev): a slot on a GPU or the NPU gets its nodes from there (DEVICE_NODES). */
  readonly devRoot?: string;
  /**
   * What a long-lived process (`hal0 serve`, `hal0 reconcile`) keeps of its
   * observes from one driver to the next (InspectCache). Without it (a one-shot
   * command) every observe inspects every slot's container afresh.
   */
  readonly inspections?: InspectCache;
}

/** How long a long-lived process reuses a container's inspect while the engine lists it unchanged (docs/operations.md). */
export const INSPECT_REUSE_MS = 5 * 60_000;

type Inspected = { container: InspectedContainer; image: ImageDefaults | undefined } | null;

/**
 * The inspects a long-lived process reuses: a slot's container's, while the
 * list shows it with the same id, state and creation time and the inspect is
 * less than `reuseMs` old (a container made again has another id; one
 * stopped, paused or restarted another state; a `docker update` in place
 * changes none of them, so it is seen within `reuseMs`); and each image's env
 * and entrypoint, by image id, for as long as the process lives (an id names
 * one image for ever).
 */
export class InspectCache {
  readonly containers = new Map<string, { readonly stamp: string; readonly at: number; readonly inspected: Promise<Inspected> }>();
  readonly images = new Map<string, Promise<ImageDefaults | undefined>>();
  constructor(readonly reuseMs = INSPECT_REUSE_MS, readonly now: () => number = Date.now) {}
}

/** The engine's log drivers that keep a container's log in files that `max-size` and `max-file` bound. */
const FILE_LOG_DRIVERS: ReadonlySet<string> = new Set(["json-file", "local"]);

/**
 * The docker runtime: each slot is a container `hal0-slot-<name>` on the host
 * network (the runner binds 127.0.0.1, as its argv says), with `Init` so a
 * stop is prompt, and no restart policy (hal0 decides what runs).
 *
 * Invariants: observe is exactly one label-filtered list call (plus an
 * inspect of each slot's container, reused in a long-lived process while the
 * list shows it unchanged for up to INSPECT_REUSE_MS, and a health probe per running slot); start, stop and observe act only on containers
 * that carry this box's labels *and* the slot's container name
 * (docker-container.ts), save that stopping a slot also stops a container of
 * this box renamed by hand from it; an unlabelled container or another box's
 * is never stopped, removed or reported. This is the only module that imports dockerode.
 */
export class DockerDriver implements SlotDriver {
  readonly runtime = "docker" as const;
  readonly stateDir: string;
  private readonly docker: Dockerode;
  private readonly address: string;
  private readonly answerMs: number;
  private readonly box: string;
  private readonly stopGraceS: number;
  private readonly pull: boolean;
  private readonly pullStallMs: number;
  private readonly logMaxMb: number;
  private readonly labelKey: StateKey;
  private readonly maskLog: (line: string) => string;
  private readonly devRoot: string;
  /** The engine's default log driver (`docker info`), asked once, at the first create. */
  private logDriver: Promise<string> | undefined;
  /** The save of each slot's container.log under way (keepLog): one at a time per slot, so none is lost. */
  private readonly keeping = new LogSaves();
  /** The env and entrypoint of each image a slot's container runs, by image id (observe): the process's, when it keeps them. */
  private readonly imageConfigs: Map<string, Promise<ImageDefaults | undefined>>;
  private readonly inspections: InspectCache | undefined;
  /** Images found present (or being checked or pulled), by reference. */
  private readonly images = new Map<string, Promise<void>>();

  constructor(options: DockerDriverOptions) {
    if (options.box === "") throw new Error("DockerDriver needs the box id (its containers' hal0.box label)");
    this.docker = options.docker;
    this.address = options.address ?? "the configured address";
    this.answerMs = options.answerMs ?? ENGINE_ANSWER_MS;
    this.box = options.box;
    this.stateDir = options.stateDir;
    this.stopGraceS = options.stopGraceS ?? 20;
    this.pull = options.pull ?? false;
    this.pullStallMs = options.pullStallMs ?? IMAGE_STALL_MS;
    this.logMaxMb = options.logMaxMb ?? 16;
    this.labelKey = options.labelKey ?? new StateKey(options.stateDir, "label-key");
    this.maskLog = options.maskLog ?? ((line) => line);
    this.devRoot = options.devRoot ?? "/dev";
    this.inspections = options.inspections;
    this.imageConfigs = options.inspections?.images ?? new Map();
  }

  /** The HostConfig.LogConfig a container is created with: undefined leaves the engine's default. */
  private async logConfig(): Promise<{ Type: string; Config: Record<string, string> } | undefined> {
    if (this.logMaxMb === 0) return undefined;
    this.logDriver ??= this.engine(() => this.docker.info()).then((i: { LoggingDriver?: string }) => i.LoggingDriver ?? "", () => "");
    const driver = await this.logDriver;
    return FILE_LOG_DRIVERS.has(driver) ? { Type: driver, Config: { "max-size": `${this.logMaxMb}m`, "max-file": "2" } } : undefined;
  }

  async observe(options: ObserveOptions = {}): Promise<ObservedSlot[]> {
    // The engine gone or hung after this driver was made is `runtime.unavailable`, as when it was made.
    const [listed, key] = await Promise.all([this.engine((abortSignal) => this.docker.listContainers({ all: true, filters: boxFilter(this.box), abortSignal })), this.labelKey.read()]);
    const desired = (name: string) => ({ env: options.desiredEnv?.(name), argv: options.desiredArgv?.(name) });
    // Each slot's container inspected (its env, restart policy, mounts… are not in the list): one removed meanwhile is gone.
    const slotContainers = listed.filter((c) => slotOf(c, this.box) !== undefined);
    this.forgetGone(slotContainers);
    const ours = await Promise.all(slotContainers.map(async (c) => ({ c, inspected: await this.inspected(c) })));
    const slots = ours.flatMap(({ c, inspected }) => (inspected === null ? [] : observedFrom(c, this.box, { key, desired }, inspected) ?? [])).sort((a, b) => (a.name < b.name ? -1 : 1));
    return Promise.all(slots.map(async (slot): Promise<ObservedSlot> => {
      if (!slot.running || slot.record === undefined || !wantsProbe(options, slot)) return { ...slot, health: "unknown" };
      const { port, health_path } = slot.record.view.spec;
      const status = await httpStatus(port, health_path, OBSERVE_HEALTH_TIMEOUT_MS);
      const health = healthOf(status);
      if (health !== "down") return { ...slot, health };
      const answer = status === undefined ? "does not answer" : `answers ${status}`;
      return { ...slot, health, detail: `container ${containerName(slot.name)} is running but GET ${health_path} on port ${port} ${answer}` };
    }));
  }

  /**
   * A listed container as the engine inspects it, with the env and entrypoint
   * of its image (asked once per image id while this driver, or the process
   * keeping its inspects, lives: an id names one image for ever; none when the
   * image was removed under the container); null when the container was
   * removed since it was listed. Asked of the engine each time, save in a
   * process that keeps its inspects (InspectCache).
   */
  private inspected(c: Dockerode.ContainerInfo): Promise<Inspected> {
    const cache = this.inspections;
    if (cache === undefined) return this.inspect(c);
    const stamp = `${c.State}\u0000${c.Created}`;
    const kept = cache.containers.get(c.Id);
    const now = cache.now();
    if (kept !== undefined && kept.stamp === stamp && now - kept.at < cache.reuseMs) return kept.inspected;
    const entry = { stamp, at: now, inspected: this.inspect(c) };
    cache.containers.set(c.Id, entry);
    // One removed meanwhile, or an inspect that failed, is asked again next time.
    const drop = () => void (cache.containers.get(c.Id) === entry && cache.containers.delete(c.Id));
    entry.inspected.then((found) => found === null && drop(), drop);
    return entry.inspected;
  }

  /** The kept inspects of containers the engine no longer lists. */
  private forgetGone(listed: readonly Dockerode.ContainerInfo[]): void {
    const containers = this.inspections?.containers;
    if (containers === undefined || containers.size === 0) return;
    const ids = new Set(listed.map((c) => c.Id));
    for (const id of containers.keys()) if (!ids.has(id)) containers.delete(id);
  }

  private async inspect(c: Dockerode.ContainerInfo): Promise<Inspected> {
    const container = await this.engine((abortSignal) => this.docker.getContainer(c.Id).inspect({ abortSignal })).catch((err: unknown) => {
      if (engineStatus(err) === 404) return null;
      throw err;
    });
    return container === null ? null : { container, image: await this.imageDefaults(container.Image) };
  }

  private imageDefaults(id: string): Promise<ImageDefaults | undefined> {
    let known = this.imageConfigs.get(id);
    if (known === undefined) {
      known = this.engine(() => this.docker.getImage(id).inspect()).then(
        (info) => ({ Env: info.Config?.Env ?? [], Entrypoint: (info.Config?.Entrypoint as string[] | string | null | undefined) ?? null }),
        (err: unknown) => {
          if (engineStatus(err) === 404) return undefined;
          throw err;
        },
      );
      this.imageConfigs.set(id, known);
      known.then((found) => found === undefined && this.imageConfigs.delete(id), () => this.imageConfigs.delete(id));
    }
    return known;
  }

  /**
   * One engine call, bounded (answered): a socket gone or an engine that does not
   * answer within `ms` is `runtime.unavailable`, so neither a sweep nor an apply
   * waits on a hung engine for ever. Waits that last by design (the pull's
   * stream, the wait for a container's exit) are not bounded.
   */
  private engine<T>(call: (abortSignal: AbortSignal) => Promise<T>, ms = this.answerMs): Promise<T> {
    return answered(call, this.address, ms);
  }

  /**
   * Who holds `port`; when it is a running container of this box labelled as a
   * slot but named otherwise (renamed by hand: observe does not take it for the
   * slot), that container, so no message calls it a process hal0 did not start.
   */
  async portHolder(port: number): Promise<PortHolder | undefined> {
    const holder = await portHolderOf(port, PORT_PROBE_TIMEOUT_MS);
    if (holder === undefined) return undefined;
    // One list of this box's containers: one labelled as a slot under another name (renamed by hand) that runs, or a
    // slot's own container that observe does not count as running (paused, restarting) though it holds its port.
    const listed = await this.engine((abortSignal) => this.docker.listContainers({ all: true, filters: boxFilter(this.box), abortSignal })).catch(() => []);
    const onPort = listed.filter((c) => c.Labels[LABEL.slot] !== undefined && parseView(c.Labels[LABEL.view])?.spec.port === port);
    const renamed = onPort.find((c) => c.State === "running" && !c.Names.includes(`/${containerName(c.Labels[LABEL.slot]!)}`));
    if (renamed !== undefined) return { ...holder, container: { name: renamed.Names[0]!.replace(/^\//, ""), slot: renamed.Labels[LABEL.slot]! } };
    const own = onPort.find((c) => c.State !== "running" && slotOf(c, this.box) !== undefined);
    if (own !== undefined) return { ...holder, container: { name: containerName(own.Labels[LABEL.slot]!), slot: own.Labels[LABEL.slot]!, state: own.State } };
    // Else a running slot container of another box on this engine (the same slot port in two boxes): that box's, named.
    const managed = await this.engine((abortSignal) => this.docker.listContainers({ filters: { label: [`${LABEL.managed}=true`], status: ["running"] }, abortSignal })).catch(() => []);
    const other = managed.find((c) => c.Labels[LABEL.box] !== this.box && c.Labels[LABEL.slot] !== undefined && parseView(c.Labels[LABEL.view])?.spec.port === port);
    if (other === undefined) return holder;
    return { ...holder, other_box: { box: other.Labels[LABEL.box]!, slot: other.Labels[LABEL.slot]!, container: other.Names[0]!.replace(/^\//, "") } };
  }

  /** This box's containers labelled as a slot (`slot`, else any) under another name than that slot's. */
  private async renamed(slot?: string): Promise<Dockerode.ContainerInfo[]> {
    const filters = boxFilter(this.box);
    const listed = await this.engine((abortSignal) => this.docker.listContainers({ all: true, filters: slot === undefined ? filters : { label: [...filters.label, `${LABEL.slot}=${slot}`] }, abortSignal }));
    return listed.filter((c) => {
      const name = c.Labels[LABEL.slot];
      return name !== undefined && !c.Names.includes(`/${containerName(name)}`);
    });
  }

  async start(name: string, view: SlotView, options: StartOptions): Promise<{ pid?: number }> {
    const { spec } = view;
    if (spec.runtime !== "docker" || !spec.image) throw new DriverError("slot.spawn_failed", `slot ${name}: its spec is for the ${spec.runtime} runtime, not docker (no image)`);
    // The checks side by side; when several fail, the first of image, name, port is the one reported.
    const [image, taken, port, mounts, devices] = await Promise.allSettled([this.ensureImage(name, spec.image, options.signal), this.refuseTaken(name), this.refuseHeldPort(spec.port), hostMounts(spec.argv, options.cwd), this.devicesFor(spec.device)]);
    for (const check of [image, taken, port, mounts, devices]) if (check.status === "rejected") throw check.reason;
    // Interrupted while the image was checked or pulled: nothing is created (a container made now would be left running).
    if (options.signal?.aborted) throw new DriverError(INTERRUPTED, `slot ${name}: the apply was interrupted before its container was created; nothing was started, and the next apply or sweep starts it`);
    const container = await this.createAndStart(name, view, options.cwd, (mounts as PromiseFulfilledResult<BindMount[]>).value, (devices as PromiseFulfilledResult<DeviceMapping[]>).value, options.signal);
    const abort = new AbortController();
    try {
      // After the start: "not running" then means it ran and exited, however fast.
      const exited = whenExited(container, abort.signal);
      options.onPhase?.("starting");
      const outcome = await waitHealthy(spec.port, spec.health_path, { exited }, options.healthTimeoutS * 1000, options.onPhase, options.signal);
      if (outcome.kind === "ready") return {};
      if (outcome.kind === "interrupted") throw interruptedStart(name, spec.port, spec.health_path, `container ${containerName(name)}`);
      const logs = await this.logNote(container);
      if (outcome.kind === "exited") {
        await this.keepLog(name, container.id);
        await this.engine((abortSignal) => container.remove({ force: true, abortSignal })).catch(() => undefined);
        throw new DriverError("slot.spawn_failed", `slot ${name}: container ${containerName(name)} (${spec.image}) ${exitNote(outcome.exit)} before it was healthy${logs}`);
      }
      await this.stop(name, ABORT_GRACE_S);
      const last = outcome.lastStatus === undefined ? "no answer" : `last answer ${outcome.lastStatus}`;
      throw new DriverError("slot.health_failed",
        `slot ${name}: GET ${spec.health_path} on port ${spec.port} did not return 200 within ${options.healthTimeoutS} s (${last}); stopped and removed ${containerName(name)}${logs}`);
    } finally {
      abort.abort(); // ends the engine's wait request, which would otherwise hold the event loop
    }
  }

  /**
   * Stops and removes the slot's container, and every other container of this
   * box labelled as that slot under another name (one renamed by hand: hal0
   * started it, and stopping the slot means none of its runners is left),
   * unless `renamed` is false.
   */
  async stop(name: string, graceS: number, options: { readonly renamed?: boolean } = {}): Promise<void> {
    const [found, renamed] = await Promise.all([this.inspectByName(name), options.renamed === false ? [] : this.renamed(name)]);
    const ids = renamed.map((c) => c.Id);
    if (found !== undefined && labelledAs(found.Config.Labels, this.box, name)) ids.unshift(found.Id); // else nothing of ours by that name
    // By id from here on: a container created under the same name meanwhile is not the one we checked.
    await Promise.all(ids.map(async (id) => {
      const container = this.docker.getContainer(id);
      // The engine answers a stop once the container is down: after the grace at most (then SIGKILL), plus the usual bound.
      await this.engine((abortSignal) => container.stop({ t: graceS, abortSignal }), graceS * 1000 + this.answerMs).catch(ignore(304, 404)); // 304: already stopped
      await this.keepLog(name, id);
      await this.engine((abortSignal) => container.remove({ abortSignal })).catch(ignore(404));
    }));
  }

  /**
   * The image is there, or pulled when `[slots] pull = true`; else
   * `slot.image_missing`, naming it. Asked once per image while this driver
   * lives (the starts of one apply share the answer, or the pull in flight);
   * a create that finds the image gone forgets it and asks again.
   */
  private async ensureImage(name: string, image: string, signal?: AbortSignal): Promise<void> {
    const interrupted = () => new DriverError(INTERRUPTED, `slot ${name}: the apply was interrupted while image ${image} was being pulled; the pull was stopped (the engine keeps the layers it finished for the next pull) and nothing was started`);
    for (;;) {
      let known = this.images.get(image);
      if (known === undefined) {
        known = this.fetchImage(image, signal);
        this.images.set(image, known);
        known.catch(() => this.images.delete(image));
      }
      // An interrupted start stops waiting at once; the pull it started ends with it (its request to the engine closes).
      const stop = whenAborted(signal);
      try {
        await Promise.race([known, stop.aborted.then(() => Promise.reject(interrupted()))]);
        return;
      } catch (err) {
        // Another start's pull, ended by its own interruption: this one, not interrupted, pulls afresh.
        if (err instanceof PullInterrupted && signal?.aborted !== true) continue;
        throw err instanceof PullInterrupted ? interrupted() : err;
      } finally {
        stop.dispose();
      }
    }
  }

  private async fetchImage(image: string, signal?: AbortSignal): Promise<void> {
    if (await this.imagePresent(image)) return;
    if (!this.pull) throw new DriverError("slot.image_missing", imageMissingMessage(image));
    try {
      await pullImage(this.docker, image, () => {}, this.pullStallMs, signal);
    } catch (err) {
      if (signal?.aborted) throw new PullInterrupted();
      throw new DriverError("slot.image_missing", `image ${image} is not present and pulling it failed: ${String((err as Error).message ?? err).trim()}`);
    }
    if (!(await this.imagePresent(image))) throw new DriverError("slot.image_missing", `image ${image} is still not present after a pull`);
  }

  private async imagePresent(image: string): Promise<boolean> {
    try {
      await this.engine(() => this.docker.getImage(image).inspect());
      return true;
    } catch (err) {
      if (engineStatus(err) === 404) return false;
      throw err;
    }
  }

  /**
   * The slot's container name must be free: the executor stops (removes)
   * what is left of ours before it creates a slot, and a container that is
   * not this box's slot is never touched. Either way the driver decides
   * nothing: a taken name is refused.
   */
  private async refuseTaken(name: string): Promise<void> {
    const found = await this.inspectByName(name);
    if (found === undefined) return;
    if (!labelledAs(found.Config.Labels, this.box, name)) throw new DriverError("slot.spawn_failed", notOursMessage(name, found.Config.Labels, this.box));
    throw new DriverError("slot.spawn_failed", `slot ${name}: container ${containerName(name)} (${found.State.Status}) is still there; hal0 stops a slot before it starts it again`);
  }

  private async refuseHeldPort(port: number): Promise<void> {
    const holder = await this.portHolder(port);
    if (holder === undefined) return;
    const by = holder.container !== undefined ? renamedContainerWords(holder.container) : holder.other_box !== undefined ? otherBoxWords(holder, holder.other_box) : undefined;
    throw new DriverError("slot.port_in_use", by === undefined ? portInUseMessage(port, holder) : `port ${port} is already in use by ${by}`);
  }

  /**
   * The device nodes the slot's device needs (DEVICE_NODES) that this host
   * has, passed to its container. One it has not got is left out, as a
   * process runner on the same host would find no device either: the runner
   * says so (a ROCm runner that finds no GPU exits, and the failed start shows
   * its last lines); creating the container with it would fail in the engine's words.
   */
  private async devicesFor(device: Device): Promise<DeviceMapping[]> {
    return (await deviceMappings(device, this.devRoot)).devices;
  }

  private async createAndStart(name: string, view: SlotView, cwd: string, mounts: BindMount[], devices: DeviceMapping[], signal?: AbortSignal): Promise<Dockerode.Container> {
    let container: Dockerode.Container;
    try {
      container = await this.create(name, view, cwd, mounts, devices);
    } catch (err) {
      // The image went away since it was checked: check (or pull) it again, once.
      if (!(err instanceof DriverError && err.code === "slot.image_missing")) throw err;
      this.images.delete(view.spec.image!);
      await this.ensureImage(name, view.spec.image!, signal);
      container = await this.create(name, view, cwd, mounts, devices);
    }
    container = await this.planned(name, view, container, () => this.create(name, view, cwd, mounts, devices, view.spec.observed!.image_digest));
    await this.engine((abortSignal) => container.start({ abortSignal })).catch(async (err: unknown) => {
      await this.engine((abortSignal) => container.remove({ force: true, abortSignal })).catch(() => undefined);
      if (err instanceof DriverError) throw err;
      throw new DriverError("slot.spawn_failed", `slot ${name}: docker could not start ${containerName(name)}: ${(err as Error).message}`);
    });
    return container;
  }

  /**
   * The container made from the image the plan was made with. The plan read
   * the id the slot's reference named then (`observed.image_digest`, in the
   * spec and its label); when the reference names another image now (a pull,
   * a `docker tag` between the plan and the start, such as while `hal0 apply`
   * waits for its 'yes'), the container made from the reference is removed and
   * made again from that id, so what runs is what the plan showed (the next
   * plan replaces it, `image digest changed`), not another image under a label
   * that records the planned one. That image gone from the engine meanwhile is
   * `slot.image_missing`: plan again.
   */
  private async planned(name: string, view: SlotView, container: Dockerode.Container, again: () => Promise<Dockerode.Container>): Promise<Dockerode.Container> {
    const planned = view.spec.observed?.image_digest;
    if (planned === undefined) return container;
    const made = await this.engine((abortSignal) => container.inspect({ abortSignal })).catch(async (err: unknown) => {
      await this.engine((abortSignal) => container.remove({ force: true, abortSignal })).catch(() => undefined);
      throw err instanceof DriverError ? err : new DriverError("slot.spawn_failed", `slot ${name}: docker could not inspect ${containerName(name)}: ${(err as Error).message}`);
    });
    if (made.Image === planned) return container;
    await this.engine((abortSignal) => container.remove({ force: true, abortSignal })).catch(ignore(404));
    return again().catch((err: unknown) => {
      if (!(err instanceof DriverError && err.code === "slot.image_missing")) throw err;
      throw new DriverError("slot.image_missing", `slot ${name}: image ${view.spec.image} names ${made.Image} on the engine now, and ${planned}, the image the plan was made with, is no longer there; run hal0 plan again to start the image it names now`);
    });
  }

  /** Creates the slot's container from its spec's image, or from `image` (an image id) when given. */
  private async create(name: string, view: SlotView, cwd: string, mounts: BindMount[], devices: DeviceMapping[], image?: string): Promise<Dockerode.Container> {
    const { spec } = view;
    const [logConfig, key] = await Promise.all([this.logConfig(), this.labelKey.ensure()]);
    const run = runnerArgv(spec.argv, 0, view, spec.env);
    try {
      return await this.engine((abortSignal) => this.docker.createContainer({
        abortSignal,
        name: containerName(name),
        Image: image ?? spec.image,
        // The runner is a process of the host, its command line read by every local user: an --api-key or --hf-token goes in its env.
        Cmd: [...run.argv],
        Env: Object.entries({ ...spec.env, ...run.env }).map(([key, value]) => `${key}=${value}`),
        Labels: slotLabels(this.box, name, view, key, { mounts, ...(devices.length > 0 ? { devices: devices.map((d) => d.PathOnHost) } : {}) }),
        ...(mounts[0]?.Target === cwd ? { WorkingDir: cwd } : {}),
        StopTimeout: this.stopGraceS,
        HostConfig: { NetworkMode: "host", Init: true, RestartPolicy: { Name: "no" }, Mounts: mounts, Devices: devices, ...(logConfig ? { LogConfig: logConfig } : {}) },
      }));
    } catch (err) {
      if (err instanceof DriverError) throw err; // the engine does not answer
      if (engineStatus(err) === 404) throw new DriverError("slot.image_missing", imageMissingMessage(spec.image!));
      throw new DriverError("slot.spawn_failed", `slot ${name}: docker could not create ${containerName(name)}: ${(err as Error).message}`);
    }
  }

  private async inspectByName(name: string): Promise<Dockerode.ContainerInspectInfo | undefined> {
    try {
      return await this.engine((abortSignal) => this.docker.getContainer(containerName(name)).inspect({ abortSignal }));
    } catch (err) {
      if (engineStatus(err) === 404) return undefined;
      throw err;
    }
  }

  /** The container's log, read back from its end by the engine (`tail`): one line more than asked tells whether more precede them. */
  async logs(name: string, lines: number): Promise<EngineLog | undefined> {
    const found = await this.inspectByName(name);
    if (found === undefined || !labelledAs(found.Config.Labels, this.box, name)) return undefined;
    const container = this.docker.getContainer(found.Id);
    const raw = await this.engine((abortSignal) => container.logs({ stdout: true, stderr: true, tail: lines + 1, follow: false, abortSignal })).catch(logUnread(containerName(name), "docker logs"));
    const all = raw === undefined ? [] : logLinesOf(raw);
    return { source: containerName(name), lines: all.slice(-lines), truncated: all.length > lines };
  }

  /**
   * Before a container of slot `name` is removed (the engine deletes its log
   * with it): its last output, masked, and how it ended, appended to the
   * slot's container.log (container-log.ts), which slot_logs shows before the
   * current container's lines. Best effort: a log the engine cannot read back
   * or a write that fails never holds up the removal.
   */
  private keepLog(name: string, id: string): Promise<void> {
    return this.keeping.after(name, () => this.saveLog(name, id));
  }

  private async saveLog(name: string, id: string): Promise<void> {
    try {
      const container = this.docker.getContainer(id);
      const [raw, info] = await Promise.all([
        this.engine((abortSignal) => container.logs({ stdout: true, stderr: true, tail: KEPT_LOG_LINES, follow: false, abortSignal })),
        this.engine((abortSignal) => container.inspect({ abortSignal })).catch(() => undefined),
      ]);
      const lines = logLinesOf(raw);
      const state = info?.State;
      const how = state === undefined ? "" : state.Running ? ` (${state.Status})` : ` (exited with code ${state.ExitCode}${state.FinishedAt && !state.FinishedAt.startsWith("0001-") ? ` at ${state.FinishedAt}` : ""})`;
      const footer = `--- hal0 removed container ${containerName(name)} ${id.slice(0, 12)} at ${new Date().toISOString()}${how}; the lines above are its last output ---`;
      await saveContainerLog(this.stateDir, name, lines, footer, this.maskLog);
    } catch {
      // nothing kept: the removal goes on
    }
  }

  private async logNote(container: Dockerode.Container): Promise<string> {
    const raw = await this.engine((abortSignal) => container.logs({ stdout: true, stderr: true, tail: LOG_LINES, follow: false, abortSignal })).catch(() => undefined);
    const tail = raw === undefined ? "" : logTailOf(raw, LOG_LINES);
    return tail === "" ? "; its log is empty" : `; last lines of its log:\n${tail.replace(/^/gm, "  ")}`;
  }
}


/**
 * A client for an engine address: `unix:///path` (or a bare `/path`; the path is absolute), or
 * `tcp://` / `http://` on a loopback host. Slots are probed on 127.0.0.1, so
 * an engine on another machine could never be health-checked: refused.
 */
export function dockerClient(host: string): Dockerode {
  const address = host.startsWith("/") ? `unix://${host}` : host;
  // A unix socket has no host name: node would send `Host: localhost`, and before its first request test
  // "localhost" against its IPv6 pattern (to leave an IP address out of a TLS server name), compiling
  // that large pattern: ~4 ms of a CLI command's first engine call. The engine reads no Host on its
  // socket; an IPv4 literal is told apart without the pattern.
  // The socket's absolute path: `unix://` with none (or a relative one) made the client fall back to TCP on 127.0.0.1:80.
  if (address.startsWith("unix:///")) return new Dockerode({ socketPath: address.slice("unix://".length), headers: { Host: "127.0.0.1" } });
  const problem = dockerHostProblem(address);
  if (problem !== undefined) throw new Error(problem);
  const tcp = DOCKER_TCP_ADDRESS.exec(address)!;
  return new Dockerode({ host: tcp[1]!.replace(/^\[|\]$/g, ""), port: Number(tcp[2]), protocol: "http" });
}
