import "./docker-deps.js"; // first: defers the parts of dockerode hal0 never uses
import Dockerode from "dockerode";
import { setTimeout as sleep } from "node:timers/promises";
import type { ObservedNode, ObservedSlot, SlotView } from "../observed.js";
import { DriverError, INTERRUPTED, interruptedStart, wantsProbe, whenAborted, type EngineLog, type ObserveOptions, type SlotDriver, type StartOptions } from "./driver.js";
import { LABEL, boxFilter, containerName, fileMounts, labelledAs, logFramesOf, logTailOf, parseView } from "./docker-container.js";
import { answered, ENGINE_ANSWER_MS, engineStatus, ignore, logUnread, notOursMessage } from "./docker-engine.js";
import { healthOf, httpStatus, acceptsConnections } from "./proc.js";
import { nodeMatches } from "../nodes.js";
import { LogSaves, saveContainerLog } from "./container-log.js";
import { StateKey } from "./state-key.js";
import type { SwarmKey } from "./swarm-key.js";
import { nodeFrom, observedService, secretName, serviceSpec, type ListedService, type ListedTask } from "./swarm-service.js";

const OBSERVE_HEALTH_TIMEOUT_MS = 1000;
const POLL_MS = 250;
/** How long a new service may sit Pending with "no suitable node" before start says so. */
const UNPLACED_AFTER_MS = 3000;
/** Beyond the stop grace, how long a start waits for a pinned slot's port to free on its node. */
const HELD_PORT_SLACK_MS = 5000;
/** A start gives up when this many of its tasks have failed (Swarm restarts a runner that exits). */
const FAILED_TASKS = 3;
const LOG_LINES = 15;
/** How many of a removed service's last lines are read to keep (then bounded to CONTAINER_LOG_MAX_BYTES). */
const KEPT_LOG_LINES = 1000;
/** Beyond the stop grace, how long stop waits for the runner's port to close on its node. */
const STOP_SLACK_MS = 10_000;

export interface SwarmDriverOptions {
  /** A client of a swarm manager's engine. */
  readonly docker: Dockerode;
  /** The manager's address, as the messages name it (`runtime.unavailable`). */
  readonly address?: string;
  /** How long any one call to the manager may go unanswered before it is `runtime.unavailable` (ENGINE_ANSWER_MS). */
  readonly answerMs?: number;
  /** This box's id: every service hal0 makes carries it as `hal0.box`. */
  readonly box: string;
  readonly stateDir: string;
  /** The box's API key: the runners require it (`--api-key-file`, from a Swarm secret); hal0's probes send it. */
  readonly key: SwarmKey;
  /** The key a service's `hal0.view` label seals env values with (default `<state>/label-key`, made by the first start). */
  readonly labelKey?: StateKey;
  /** `[slots] stop_grace_s`: the services' stop grace period. */
  readonly stopGraceS?: number;
  /**
   * Masks the secrets of a line of a removed service's output before it is
   * kept in `<state>/slots/<name>/container.log` (server/redact.ts redactText,
   * as slot_logs masks; default: none, and slot_logs masks on reading).
   */
  readonly maskLog?: (line: string) => string;
}

/**
 * The swarm runtime: each slot is a Swarm service `hal0-slot-<name>` (one
 * replica, host network, `Init`), placed by its spec's constraints; the
 * runner binds its node's addresses and wants the box's API key, which it
 * reads from a Swarm secret (never argv). Swarm runs the containers on
 * whichever engines form the swarm; hal0 talks to one manager.
 *
 * Invariants: observe is one label-filtered service list, one task list of
 * those services and one node list (plus a health probe per running slot at
 * its node's address); start, stop and observe act only on services that
 * carry this box's labels and the slot's service name. Every call to the
 * manager is bounded (`engine`): one that does not answer is
 * `runtime.unavailable`, never a sweep, read or apply held for ever. Drivers
 * decide nothing: a placement is the spec's, a node's state is observed.
 */
export class SwarmDriver implements SlotDriver {
  readonly runtime = "swarm" as const;
  readonly stateDir: string;
  private readonly docker: Dockerode;
  private readonly address: string;
  private readonly answerMs: number;
  private readonly box: string;
  private readonly key: SwarmKey;
  private readonly labelKey: StateKey;
  private readonly stopGraceS: number;
  private readonly maskLog: (line: string) => string;
  /** The save of each slot's container.log under way (keepLog): one at a time per slot, so none is lost. */
  private readonly keeping = new LogSaves();
  private nodesInFlight?: Promise<ObservedNode[]>;
  private secretInFlight?: Promise<{ id: string; name: string }>;

  constructor(options: SwarmDriverOptions) {
    if (options.box === "") throw new Error("SwarmDriver needs the box id (its services' hal0.box label)");
    this.docker = options.docker;
    this.address = options.address ?? "the configured address";
    this.answerMs = options.answerMs ?? ENGINE_ANSWER_MS;
    this.box = options.box;
    this.stateDir = options.stateDir;
    this.key = options.key;
    this.labelKey = options.labelKey ?? new StateKey(options.stateDir, "label-key");
    this.stopGraceS = options.stopGraceS ?? 20;
    this.maskLog = options.maskLog ?? ((line) => line);
  }

  /** The swarm's nodes, by hostname. Calls made while one list is on its way share it (observe and its caller ask at once). */
  nodes(): Promise<ObservedNode[]> {
    this.nodesInFlight ??= (async () => {
      try {
        const listed = (await this.engine((abortSignal) => this.docker.listNodes({ abortSignal }))) as Parameters<typeof nodeFrom>[0][];
        return listed.map(nodeFrom).sort((a, b) => (a.hostname < b.hostname ? -1 : a.hostname > b.hostname ? 1 : 0));
      } finally {
        this.nodesInFlight = undefined;
      }
    })();
    return this.nodesInFlight;
  }

  /**
   * One call to the manager, bounded (answered): a socket gone or a manager that
   * does not answer within `answerMs` is `runtime.unavailable`, so no sweep,
   * read or apply waits on a hung manager for ever.
   */
  private engine<T>(call: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
    return answered(call, this.address, this.answerMs, "swarm");
  }

  reach(slot: Pick<ObservedSlot, "name" | "node">): { host: string; headers: Record<string, string> } | undefined {
    if (slot.node === undefined || slot.node.addr === "") return undefined;
    const key = this.key.known();
    return { host: slot.node.addr, headers: key === undefined ? {} : { authorization: `Bearer ${key}` } };
  }

  async observe(options: ObserveOptions = {}): Promise<ObservedSlot[]> {
    const [services, nodes] = await Promise.all([this.listServices(), this.nodes(), this.key.read()]);
    const tasks = services.length === 0 ? [] : ((await this.engine((abortSignal) => this.docker.listTasks({ filters: { service: services.map((s) => s.ID) }, abortSignal }))) as ListedTask[]);
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const slots = services.flatMap((s) => observedService(s, tasks, byId, this.box) ?? []).sort((a, b) => (a.name < b.name ? -1 : 1));
    return Promise.all(slots.map(async (slot): Promise<ObservedSlot> => {
      const at = this.reach(slot);
      if (!slot.running || slot.record === undefined || at === undefined || !wantsProbe(options, slot)) return { ...slot, health: "unknown" };
      const { port, health_path } = slot.record.view.spec;
      const status = await httpStatus(port, health_path, OBSERVE_HEALTH_TIMEOUT_MS, at);
      const health = healthOf(status);
      if (health !== "down") return { ...slot, health };
      const answer = status === undefined ? "does not answer" : `answers ${status}`;
      return { ...slot, health, detail: `service ${containerName(slot.name)} runs on node ${slot.node!.hostname} but GET ${health_path} at ${at.host}:${port} ${answer}` };
    }));
  }

  /** Ports are held on the nodes, which hal0 does not probe: Swarm places a slot, the planner checks placement. */
  portHolder(): Promise<undefined> {
    return Promise.resolve(undefined);
  }

  async start(name: string, view: SlotView, options: StartOptions): Promise<{ pid?: number }> {
    const { spec } = view;
    if (spec.runtime !== "swarm" || !spec.image) throw new DriverError("slot.spawn_failed", `slot ${name}: its spec is for the ${spec.runtime} runtime, not swarm (no image)`);
    await this.refuseTaken(name);
    await this.refuseHeldPort(name, view);
    const [secret, hostNetwork, mounts, labelKey] = await Promise.all([this.ensureSecret(), this.hostNetwork(), fileMounts(spec.argv), this.labelKey.ensure()]);
    const svc = containerName(name);
    try {
      const created = serviceSpec({ box: this.box, name, view, mounts, stopGraceS: this.stopGraceS, hostNetwork, secret, labelKey }) as unknown as Dockerode.CreateServiceOptions;
      await this.engine((abortSignal) => this.docker.createService({ ...created, abortSignal }));
    } catch (err) {
      if (err instanceof DriverError) throw err;
      throw new DriverError("slot.spawn_failed", `slot ${name}: the swarm manager could not create ${svc}: ${(err as Error).message}`);
    }
    options.onPhase?.("starting");
    const interrupt = whenAborted(options.signal);
    const outcome = await this.waitReady(name, view, options, interrupt.aborted).finally(() => interrupt.dispose());
    if (outcome.ok) return {};
    if (outcome.code === INTERRUPTED) throw interruptedStart(name, view.spec.port, view.spec.health_path, `service ${svc}`);
    if (outcome.gone) throw new DriverError(outcome.code, outcome.message);
    await this.removeService(name).catch(() => undefined);
    throw new DriverError(outcome.code, `${outcome.message}; removed ${svc}`);
  }

  async stop(name: string, graceS: number): Promise<void> {
    const found = await this.inspectByName(name);
    if (found === undefined || !labelledAs(found.Spec.Labels, this.box, name)) return; // nothing of ours by that name
    const tasks = (await this.engine((abortSignal) => this.docker.listTasks({ filters: { service: [found.ID], "desired-state": ["running"] }, abortSignal })).catch(noTasks)) as ListedTask[];
    const nodes = tasks.some((t) => t.NodeID) ? await this.nodes() : [];
    const port = parseView(found.Spec.Labels?.[LABEL.view])?.port;
    await this.keepLog(name, found.ID);
    await this.engine((abortSignal) => this.docker.getService(found.ID).remove({ abortSignal })).catch(ignore(404));
    // The runner stops on its node after the grace; the slot is stopped when its port there is closed.
    const deadline = performance.now() + Math.max(graceS, this.stopGraceS) * 1000 + STOP_SLACK_MS;
    for (const task of tasks) {
      const node = nodes.find((n) => n.id === task.NodeID);
      if (node === undefined || node.state !== "ready" || port === undefined) continue;
      await portClosedBy(port, node.addr, deadline);
    }
  }

  /** Polls the slot's task until its runner answers `/health` 200 at its node, fails, or cannot be placed. */
  private async waitReady(name: string, view: SlotView, options: StartOptions, aborted: Promise<void>): Promise<{ ok: true } | { ok: false; code: string; message: string; gone?: true }> {
    const svc = containerName(name);
    const { port, health_path } = view.spec;
    // Waits on the monotonic clock (portClosedBy too): a step of the wall clock neither cuts a start short nor stretches it.
    const started = performance.now();
    const deadline = started + options.healthTimeoutS * 1000;
    let nodes = new Map<string, ObservedNode>();
    let warming = false;
    let last = "no task yet";
    while (performance.now() < deadline) {
      if (options.signal?.aborted) return { ok: false, code: INTERRUPTED, message: "" }; // said by interruptedStart
      const listed = (await this.engine((abortSignal) => this.docker.listTasks({ filters: { service: [svc] }, abortSignal })).catch((err: unknown) => (engineStatus(err) === 404 ? GONE : noTasks(err)))) as ListedTask[] | typeof GONE;
      // The manager knows no such service any more: removed behind hal0's back while it waited (docker service rm). Its runner
      // went with it, so no answer will come: said at once, not after the health timeout (nothing is left to remove).
      if (listed === GONE && (await this.inspectByName(name).catch(() => ({}))) === undefined) {
        return { ok: false, code: "slot.spawn_failed", gone: true, message: `slot ${name}: service ${svc} was removed (docker service rm) while hal0 waited for its runner to answer GET ${health_path}; its runner went with it (${last})` };
      }
      const tasks = (listed === GONE ? [] : listed).sort((a, b) => ((a.Status.Timestamp ?? "") < (b.Status.Timestamp ?? "") ? 1 : -1));
      // A node that refuses the task (no such image, a bind source missing) will refuse it again: at once.
      // A runner that exits is restarted by Swarm; a start gives up after FAILED_TASKS of them (a port the
      // previous runner of this slot has not freed yet on that node passes on the next try).
      const rejected = tasks.find((t) => t.Status.State === "rejected");
      const failed = tasks.filter((t) => t.Status.State === "failed");
      const fatal = rejected ?? (failed.length >= FAILED_TASKS ? failed[0] : undefined);
      if (fatal !== undefined && fatal === rejected && /no such image/i.test(fatal.Status.Err ?? "")) {
        // The node's engine has not got the image: the docker runtime's slot.image_missing, on that node (hal0 never pulls for Swarm).
        const on = fatal.NodeID ? (await this.nodes()).find((n) => n.id === fatal.NodeID)?.hostname ?? fatal.NodeID : "its node";
        return { ok: false, code: "slot.image_missing", message: `slot ${name}: image ${view.spec.image} is not on node ${on} (${fatal.Status.Err}); hal0 never pulls for Swarm: load it there (docker save | docker load) or make it pullable by that node's engine` };
      }
      if (fatal !== undefined) {
        const exit = fatal.Status.ContainerStatus?.ExitCode;
        const why = `${fatal.Status.Err || fatal.Status.Message || "no reason given"}${exit !== undefined && fatal.Status.State === "failed" ? ` (exit code ${exit})` : ""}`;
        const tries = fatal === rejected ? "" : ` ${failed.length} times`;
        return { ok: false, code: "slot.spawn_failed", message: `slot ${name}: a task of ${svc} ${fatal.Status.State}${tries}: ${why}${await this.logNote(svc)}` };
      }
      const task = tasks.find((t) => t.DesiredState === "running");
      if (task !== undefined) {
        last = `task ${task.Status.State}${task.Status.Err ? ` (${task.Status.Err})` : ""}`;
        if (task.Status.State === "pending" && /no suitable node/i.test(task.Status.Err ?? "") && performance.now() - started > UNPLACED_AFTER_MS) {
          // Which nodes its placement names, and how they are now: one drained (or paused, or gone down) mid-apply is why.
          const matching = (await this.nodes().catch(() => [] as ObservedNode[])).filter((n) => nodeMatches(view, n));
          const states = matching.length === 0 ? "none" : matching.map((n) => `${n.hostname} ${n.state}/${n.availability}`).join(", ");
          return { ok: false, code: "slot.unplaced", message: `slot ${name}: no node of the swarm can run ${svc} (${task.Status.Err}); its [placement] matches no ready, active node with room (the nodes it matches: ${states})` };
        }
        if (task.Status.State === "running" && task.NodeID) {
          if (!nodes.has(task.NodeID)) nodes = new Map((await this.nodes()).map((n) => [n.id, n]));
          const node = nodes.get(task.NodeID);
          if (node !== undefined) {
            const status = await httpStatus(port, health_path, 1000, { host: node.addr, headers: { authorization: `Bearer ${await this.key.ensure()}` } });
            last = status === undefined ? `no answer at ${node.addr}:${port}` : `last answer ${status} at ${node.addr}:${port}`;
            if (status === 200) {
              options.onPhase?.("ready");
              return { ok: true };
            }
            if (status === 503 && !warming) {
              warming = true;
              options.onPhase?.("warming");
            }
          }
        }
      }
      await Promise.race([sleep(POLL_MS), aborted]);
    }
    return { ok: false, code: "slot.health_failed", message: `slot ${name}: GET ${health_path} did not return 200 within ${options.healthTimeoutS} s (${last})` };
  }

  /** The service's log as the manager gathers it from its tasks' nodes (`tail`): one line more than asked tells whether more precede them. */
  async logs(name: string, lines: number): Promise<EngineLog | undefined> {
    const found = await this.inspectByName(name);
    if (found === undefined || !labelledAs(found.Spec.Labels, this.box, name)) return undefined;
    const svc = containerName(name);
    const raw = (await this.engine((abortSignal) => this.docker.getService(found.ID).logs({ stdout: true, stderr: true, tail: lines + 1, follow: false, abortSignal })).catch(logUnread(svc, "docker service logs"))) as unknown;
    // The manager's own words in the stream (a task's node down) are no line of the runner's; when they are all it sent, the log cannot be read.
    const { lines: all, errors } = Buffer.isBuffer(raw) ? logFramesOf(raw) : { lines: [], errors: [] };
    if (all.length === 0 && errors.length > 0) throw new DriverError("slot.log_unreadable", `the swarm manager cannot read back ${svc}'s log: ${errors.join("; ")} (docker service logs ${svc} says the same)`);
    return { source: svc, lines: all.slice(-lines), truncated: all.length > lines };
  }

  /** The last lines of a service's log (the manager gathers them from the node), for a failed start's message. */
  private async logNote(svc: string): Promise<string> {
    const raw = (await this.engine((abortSignal) => this.docker.getService(svc).logs({ stdout: true, stderr: true, tail: LOG_LINES, follow: false, abortSignal })).catch(() => undefined)) as unknown;
    const tail = Buffer.isBuffer(raw) ? logTailOf(raw, LOG_LINES) : "";
    return tail === "" ? "" : `; last lines of its log:\n${tail.replace(/^/gm, "  ")}`;
  }

  /**
   * A slot pinned to a node whose port already accepts connections there is
   * refused, as the docker runtime refuses a held port: the runner could not
   * bind it, and a /health answered by whatever holds it would pass for
   * ours. (Where Swarm puts a label-placed slot is known only after it does.)
   * A runner of a service removed a moment ago (by hand, or by an apply that
   * was killed) holds the port for up to the stop grace: so the port gets that
   * long, and a few seconds more, to free before the start is refused.
   */
  private async refuseHeldPort(name: string, view: SlotView): Promise<void> {
    const want = view.spec.placement?.node;
    if (want === undefined) return;
    const node = (await this.nodes()).find((n) => n.id === want || n.hostname === want);
    if (node === undefined || node.state !== "ready" || node.addr === "") return;
    if (!(await portClosedBy(view.spec.port, node.addr, performance.now() + this.stopGraceS * 1000 + HELD_PORT_SLACK_MS))) {
      throw new DriverError("slot.port_in_use", `slot ${name}: port ${view.spec.port} on node ${node.hostname} (${node.addr}) is already in use by a program hal0 did not start there; free it or give the slot another port`);
    }
  }

  /**
   * The box's API key as a Swarm secret, created once per key (secrets are
   * immutable). Looked up at every start, not kept: once no service uses it,
   * it may be removed by hand (docs/swarm.md), and the next start makes it
   * again. Starts side by side share one lookup.
   */
  private ensureSecret(): Promise<{ id: string; name: string }> {
    this.secretInFlight ??= this.findOrCreateSecret().finally(() => (this.secretInFlight = undefined));
    return this.secretInFlight;
  }

  private async findOrCreateSecret(): Promise<{ id: string; name: string }> {
    const key = await this.key.ensure();
    const name = secretName(this.box, key);
    const listed = (await this.engine((abortSignal) => this.docker.listSecrets({ filters: { name: [name] }, abortSignal }))) as { ID: string; Spec?: { Name?: string } }[];
    const found = listed.find((s) => s.Spec?.Name === name);
    if (found) return { id: found.ID, name };
    try {
      const created = (await this.engine((abortSignal) => this.docker.createSecret({ Name: name, Labels: { [LABEL.managed]: "true", [LABEL.box]: this.box }, Data: Buffer.from(`${key}\n`).toString("base64"), abortSignal }))) as { id?: string; ID?: string };
      return { id: created.id ?? created.ID ?? "", name };
    } catch (err) {
      if (engineStatus(err) !== 409) throw err; // another apply made it meanwhile
      return this.findOrCreateSecret();
    }
  }

  private async hostNetwork(): Promise<string> {
    const info = (await this.engine(() => this.docker.getNetwork("host").inspect())) as { Id: string }; // takes no signal: the bound stops the wait
    return info.Id;
  }

  private async listServices(): Promise<ListedService[]> {
    return (await this.engine((abortSignal) => this.docker.listServices({ filters: boxFilter(this.box), abortSignal }))) as unknown as ListedService[];
  }

  /** The slot's service name must be free: the executor stops a slot before it starts it, and a service that is not ours is never touched. */
  private async refuseTaken(name: string): Promise<void> {
    const found = await this.inspectByName(name);
    if (found === undefined) return;
    if (!labelledAs(found.Spec.Labels, this.box, name)) throw new DriverError("slot.spawn_failed", notOursMessage(name, found.Spec.Labels, this.box).replace("a container named", "a service named"));
    throw new DriverError("slot.spawn_failed", `slot ${name}: service ${containerName(name)} is still there; hal0 stops a slot before it starts it again`);
  }

  private async removeService(name: string): Promise<void> {
    const found = await this.inspectByName(name);
    if (found === undefined || !labelledAs(found.Spec.Labels, this.box, name)) return;
    await this.keepLog(name, found.ID);
    await this.engine((abortSignal) => this.docker.getService(found.ID).remove({ abortSignal })).catch(ignore(404));
  }

  /**
   * Before the service of slot `name` is removed (its tasks' containers, and
   * their logs, go with it): its last output as the manager gathers it from
   * the nodes, masked, and how its last task ended, appended to the slot's
   * container.log (container-log.ts), which slot_logs shows before the lines
   * of the slot's current service, and alone when it has none. So a start
   * that failed (its service removed) still says why. Best effort: a log the
   * manager cannot read back (a node down) or a write that fails never holds
   * up the removal.
   */
  private keepLog(name: string, id: string): Promise<void> {
    return this.keeping.after(name, () => this.saveLog(name, id));
  }

  private async saveLog(name: string, id: string): Promise<void> {
    try {
      const svc = containerName(name);
      const [raw, tasks, nodes] = await Promise.all([
        this.engine((abortSignal) => this.docker.getService(id).logs({ stdout: true, stderr: true, tail: KEPT_LOG_LINES, follow: false, abortSignal })) as Promise<unknown>,
        this.engine((abortSignal) => this.docker.listTasks({ filters: { service: [id] }, abortSignal })).catch(() => []) as Promise<ListedTask[]>,
        this.nodes().catch(() => [] as ObservedNode[]),
      ]);
      const { lines } = Buffer.isBuffer(raw) ? logFramesOf(raw) : { lines: [] };
      const footer = `--- hal0 removed service ${svc} ${id.slice(0, 12)} at ${new Date().toISOString()}${lastTaskNote(tasks, nodes)}; the lines above are its last output ---`;
      await saveContainerLog(this.stateDir, name, lines, footer, this.maskLog);
    } catch {
      // nothing kept: the removal goes on
    }
  }

  private async inspectByName(name: string): Promise<ListedService | undefined> {
    try {
      return (await this.engine((abortSignal) => this.docker.getService(containerName(name)).inspect({ abortSignal }))) as ListedService;
    } catch (err) {
      if (engineStatus(err) === 404) return undefined;
      throw err;
    }
  }
}

/**
 * How a service's tasks ended, for the line kept after its output: the newest
 * failed (or rejected) one and how many failed (" (3 tasks failed; the last on
 * node n2: non-zero exit (1), exit code 1)"), else where its newest task was;
 * "" with no task.
 */
function lastTaskNote(tasks: readonly ListedTask[], nodes: readonly ObservedNode[]): string {
  const newest = (list: readonly ListedTask[]) => [...list].sort((a, b) => ((a.Status.Timestamp ?? "") < (b.Status.Timestamp ?? "") ? 1 : -1))[0];
  const on = (t: ListedTask) => (t.NodeID ? ` on node ${nodes.find((n) => n.id === t.NodeID)?.hostname ?? t.NodeID}` : "");
  const failed = tasks.filter((t) => t.Status.State === "failed" || t.Status.State === "rejected");
  const last = newest(failed);
  if (last !== undefined) {
    const exit = last.Status.ContainerStatus?.ExitCode;
    const why = [last.Status.Err || last.Status.Message || "", exit !== undefined && last.Status.State === "failed" ? `exit code ${exit}` : ""].filter((w) => w !== "").join(", ");
    return ` (${failed.length} ${failed.length === 1 ? "task" : "tasks"} ${failed.every((t) => t.Status.State === "rejected") ? "rejected" : "failed"}; the last${on(last)}${why ? `: ${why}` : ""})`;
  }
  const task = newest(tasks);
  return task === undefined ? "" : ` (its task was ${task.Status.State}${on(task)})`;
}

/** The task list of a service the manager no longer knows (404). */
const GONE = Symbol("gone");

/** A task list that failed reads as none (polled again), unless the manager did not answer at all: that is runtime.unavailable. */
function noTasks(err: unknown): ListedTask[] {
  if (err instanceof DriverError) throw err;
  return [];
}

/** Polls `host:port` until nothing accepts connections there (true) or `deadline` passes with it still held (false). */
async function portClosedBy(port: number, host: string, deadline: number): Promise<boolean> {
  for (;;) {
    if (!(await acceptsConnections(port, 500, host))) return true;
    if (performance.now() >= deadline) return false;
    await sleep(POLL_MS);
  }
}
