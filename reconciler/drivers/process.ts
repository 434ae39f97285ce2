import { mkdir, readdir } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { otherBoxWords, unrecordedRunnerWords, type ObservedSlot, type SlotView } from "../observed.js";
import { DriverError, interruptedStart, wantsProbe, type ObserveOptions, type PortHolder, type SlotDriver, type StartOptions } from "./driver.js";
import { bootId, healthOf, httpStatus, isLive, isOurs, killQuietly, portHolderOf, portInUseMessage, procStat, sameBoot } from "./proc.js";
import { describeExit, spawnRunner, waitHealthy, type Spawned } from "./runner.js";
import { markedRunners, markerEnv, otherBoxOf, otherBoxRunner, runnerSlotOf } from "./process-orphans.js";
import { runnerBaseEnv } from "./runner-env.js";
import { removeKeyFile, spawnedArgv } from "./runner-secrets.js";
import { capRunnerLog, logTail, RUNNER_LOG_MAX_BYTES, readRecord, removeRecord, slotPaths, slotsDir, writeRecord, type RuntimeRecord } from "./runtime-record.js";

/** Grace given to a runner stopped because it never became healthy. */
const ABORT_GRACE_S = 5;
/** How long a SIGKILLed runner may take to vanish before stop reports failure. */
const KILL_WAIT_MS = 2000;
const GONE_POLL_MS = 50;
const OBSERVE_HEALTH_TIMEOUT_MS = 1000;
const PORT_PROBE_TIMEOUT_MS = 500;

/**
 * The process runtime: each slot is a detached runner process on the host,
 * recorded in `<state>/slots/<name>/runtime.json` (see runtime-record.ts).
 *
 * Invariant: hal0 only ever signals a process whose pid *and* start time match
 * the record it wrote when it spawned it, so a reused pid is never touched.
 */
export class ProcessDriver implements SlotDriver {
  readonly runtime = "process" as const;
  private readonly stateDir: string;
  private readonly logMaxBytes: number;

  /** `logMaxBytes`: `[slots] log_max_mb` in bytes, where a runner's log moves aside (0: never). */
  constructor(options: { stateDir: string; logMaxBytes?: number }) {
    this.stateDir = options.stateDir;
    this.logMaxBytes = options.logMaxBytes ?? RUNNER_LOG_MAX_BYTES;
  }

  async observe(options: ObserveOptions = {}): Promise<ObservedSlot[]> {
    const entries = await readdir(slotsDir(this.stateDir), { withFileTypes: true }).catch(() => []);
    const names = entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
    const slots = await Promise.all(names.map((name) => this.observeSlot(name, options)));
    return slots.filter((s): s is ObservedSlot => s !== undefined);
  }

  /**
   * Who holds `port`; a process marked as a runner of this state folder (no record names it) says which slot's
   * (`runner`), one marked as another state folder's is another hal0 box's (`other_box`).
   */
  async portHolder(port: number): Promise<PortHolder | undefined> {
    const holder = await portHolderOf(port, PORT_PROBE_TIMEOUT_MS);
    if (holder?.pid === undefined) return holder;
    const slot = await runnerSlotOf(this.stateDir, holder.pid);
    if (slot !== undefined) return { ...holder, runner: { slot } };
    const other = await otherBoxRunner(this.stateDir, holder.pid);
    return other === undefined ? holder : { ...holder, other_box: other };
  }

  /** Each slot's runner.log over its cap moves to runner.log.1 (the runner writes on, at the start of runner.log). */
  async maintain(): Promise<void> {
    if (this.logMaxBytes === 0) return;
    const entries = await readdir(slotsDir(this.stateDir), { withFileTypes: true }).catch(() => []);
    // One stat a slot, all at once (a sweep waits for this before it observes).
    await Promise.all(entries.filter((e) => e.isDirectory()).map((e) => capRunnerLog(slotPaths(this.stateDir, e.name).log, this.logMaxBytes).catch(() => false)));
  }

  async start(name: string, view: SlotView, options: StartOptions): Promise<{ pid?: number }> {
    const { spec } = view;
    if (spec.runtime !== "process") throw new DriverError("slot.spawn_failed", `slot ${name}: its spec is for the ${spec.runtime} runtime, not process`);
    await this.refuseIfRunning(name);
    const holder = await this.portHolder(spec.port);
    if (holder !== undefined) {
      const by = holder.runner !== undefined ? unrecordedRunnerWords(holder, holder.runner.slot) : holder.other_box !== undefined ? otherBoxWords(holder, holder.other_box) : undefined;
      throw new DriverError("slot.port_in_use", by === undefined ? portInUseMessage(spec.port, holder) : `port ${spec.port} is already in use by ${by}`);
    }
    const paths = slotPaths(this.stateDir, name);
    await mkdir(paths.dir, { recursive: true });
    // An --api-key or --hf-token is not left in the command line every local user reads: the runner's environment takes them.
    const run = await spawnedArgv(spec.argv, 1, view, paths.dir, spec.env);
    // Never hal0's whole environment (its secrets): the base every runner gets, then what the slot declares.
    const spawned = await spawnRunner(run.argv, options.cwd, { ...runnerBaseEnv(process.env), ...spec.env, ...run.env, ...markerEnv(this.stateDir, name) }, paths.log, this.logMaxBytes);
    const stat = await procStat(spawned.pid);
    // Even a runner that already exited is a zombie until reaped, so `stat` is there; if not, wait for the exit below.
    if (stat !== undefined) {
      await writeRecord(paths.record, { pid: spawned.pid, pid_start: stat.startTime, boot_id: bootId(), view, started_at: new Date().toISOString(), log: paths.log }).catch(async (err: unknown) => {
        // No record (a full disk): the start failed, so the runner it spawned is stopped (found by its marker), not left running unknown.
        await this.stopUnrecorded(name);
        throw err;
      });
    }
    options.onPhase?.("starting");
    const outcome = await waitHealthy(spec.port, spec.health_path, spawned, options.healthTimeoutS * 1000, options.onPhase, options.signal);
    if (outcome.kind === "ready") return { pid: spawned.pid };
    if (outcome.kind === "interrupted") throw interruptedStart(name, spec.port, spec.health_path, `pid ${spawned.pid}`);
    if (outcome.kind === "exited") {
      await removeRecord(paths.record);
      // What it left running (a server it put in the background, in its group or in a session of its own) goes with it, not left holding the port.
      await Promise.all([stopGroupLeft(spawned.pid, ABORT_GRACE_S), this.stopUnrecorded(name).catch(() => undefined)]); // best effort: the start has failed already
      throw new DriverError("slot.spawn_failed", `slot ${name}: \`${spec.argv[0]}\` (pid ${spawned.pid}) ${describeExit(outcome.exit)} before it was healthy${await tailNote(paths.log, spawned)}`);
    }
    await this.stop(name, ABORT_GRACE_S);
    const last = outcome.lastStatus === undefined ? "no answer" : `last answer ${outcome.lastStatus}`;
    throw new DriverError("slot.health_failed",
      `slot ${name}: GET ${spec.health_path} on port ${spec.port} did not return 200 within ${options.healthTimeoutS} s (${last}); stopped pid ${spawned.pid}${await tailNote(paths.log, spawned)}`);
  }

  async stop(name: string, graceS: number): Promise<void> {
    const paths = slotPaths(this.stateDir, name);
    const read = await readRecord(paths.record);
    const recorded = read !== undefined && "record" in read ? read.record : undefined;
    const runner = recorded !== undefined && (await this.recordedLives(recorded, name)) ? [{ pid: recorded.pid, startTime: recorded.pid_start }] : [];
    // The recorded runner and, at the same time, every other process marked as this slot's.
    await terminateAll(name, [...runner, ...(await this.marked(name, recorded?.pid))], graceS);
    await Promise.all([removeRecord(paths.record), removeKeyFile(paths.dir)]);
  }

  /** Stops `name`'s runners that have no record (a start interrupted between spawn and record). */
  private async stopUnrecorded(name: string, graceS = ABORT_GRACE_S): Promise<void> {
    const read = await readRecord(slotPaths(this.stateDir, name).record);
    await terminateAll(name, await this.marked(name, read !== undefined && "record" in read ? read.record.pid : undefined), graceS);
  }

  /**
   * The live processes marked as `name`'s but the recorded runner (`recorded`): a runner whose start was
   * interrupted between spawn and record, and what a runner started outside its process group (a child in
   * a session of its own, which a signal to the group does not reach). Each inherited the markers.
   */
  private async marked(name: string, recorded: number | undefined): Promise<Array<{ pid: number; startTime: number }>> {
    return (await markedRunners(this.stateDir, name)).filter((p) => p.pid !== recorded);
  }

  /** Starting over a live runner would lose the only record of it: the executor stops a slot before it restarts it. */
  private async refuseIfRunning(name: string): Promise<void> {
    const read = await readRecord(slotPaths(this.stateDir, name).record);
    if (read === undefined || "error" in read || !(await this.recordedLives(read.record, name))) return;
    throw new DriverError("slot.spawn_failed", `slot ${name} is already running (pid ${read.record.pid}); stop it before starting it again`);
  }

  /**
   * The recorded runner still runs and is this folder's: same boot, its pid alive with the recorded start time, and
   * not marked as another state folder's runner (a record copied with its folder names the original box's runner).
   */
  private async recordedLives(record: RuntimeRecord, name: string): Promise<boolean> {
    return sameBoot(record.boot_id) && (await isOurs(record.pid, record.pid_start)) && (await this.copiedFrom(record, name)) === undefined;
  }

  /**
   * The other state folder whose runner the record names, when the record was copied from there (otherBoxOf). A
   * record written here, under this path (its log is this folder's), names this folder's runner: no /proc read
   * then, so an observe of 50 running slots does not read 50 environments.
   */
  private async copiedFrom(record: RuntimeRecord, name: string): Promise<string | undefined> {
    if (record.log === slotPaths(this.stateDir, name).log) return undefined;
    return otherBoxOf(this.stateDir, record.pid);
  }

  private async observeSlot(name: string, options: ObserveOptions): Promise<ObservedSlot | undefined> {
    const read = await readRecord(slotPaths(this.stateDir, name).record);
    if (read === undefined) return undefined; // a folder with only a log: nothing was left running
    if ("error" in read) {
      // Its runner may still run, found by its markers: running with no readable record (a replace stops it first), never "not running" beside a live runner.
      const live = await markedRunners(this.stateDir, name);
      const runs = live.length === 0 ? "" : `; its runner (pid ${live.map((r) => r.pid).join(", ")}) still runs`;
      return { name, running: live.length > 0, health: "unknown", detail: `runtime.json is unreadable: ${read.error}${runs}` };
    }
    const { pid, pid_start, view, started_at } = read.record;
    const record = { view, pid, started_at };
    if (!sameBoot(read.record.boot_id)) return { name, record, running: false, health: "unknown", detail: `the runner hal0 started (pid ${pid}) ran before the host restarted: runtime.json is from an earlier boot` };
    const stat = await procStat(pid);
    if (!isLive(stat)) return { name, record, running: false, health: "unknown", detail: `process exited (pid ${pid})` };
    if (stat.startTime !== pid_start) {
      return { name, record, running: false, health: "unknown", detail: `pid ${pid} is alive but is not the runner hal0 started (pid reused)` };
    }
    const other = await this.copiedFrom(read.record, name);
    if (other !== undefined) return { name, record, running: false, health: "unknown", detail: copiedRecordNote(pid, other) };
    if (!wantsProbe(options, { name, record })) return { name, record, running: true, health: "unknown" };
    const status = await httpStatus(view.spec.port, view.spec.health_path, OBSERVE_HEALTH_TIMEOUT_MS);
    const health = healthOf(status);
    if (health !== "down") return { name, record, running: true, health };
    const answer = status === undefined ? "does not answer" : `answers ${status}`;
    return { name, record, running: true, health, detail: `pid ${pid} is running but GET ${view.spec.health_path} on port ${view.spec.port} ${answer}` };
  }
}

/** What a slot whose record names another box's runner says (otherBoxOf): not running here, and left alone. */
function copiedRecordNote(pid: number, other: string): string {
  return `pid ${pid} is the runner of the state folder ${other}, not of this one (this folder's runtime.json was copied from there): another box's, left alone`;
}

async function tailNote(logPath: string, spawned: Spawned): Promise<string> {
  const tail = await logTail(logPath, spawned.logOffset);
  return tail === "" ? `; ${logPath} is empty` : `; last lines of ${logPath}:\n${tail.replace(/^/gm, "  ")}`;
}

/**
 * SIGTERM to the runner's process group, SIGKILL after `graceS`. Each signal
 * is sent only after re-checking that pid and start time are still ours. A
 * runner that leads its group is gone once every process of the group is:
 * what it started (a wrapper's llama-server, a child that ignores SIGTERM)
 * is stopped with it, not left holding the port and the memory once the
 * runner itself has exited.
 */
async function terminate(name: string, pid: number, pidStart: number, graceS: number): Promise<void> {
  const stat = await procStat(pid);
  if (!isLive(stat) || stat.startTime !== pidStart) return;
  const group = stat.pgid === pid;
  if (!(await signalIfOurs(pid, pidStart, "SIGTERM"))) return;
  if (await waitGone(pid, pidStart, graceS * 1000, group)) return;
  // The runner if it still runs, else what is left of its group (the group's id stays its leader's while it has members).
  if (!(await signalIfOurs(pid, pidStart, "SIGKILL")) && group) killQuietly(-pid);
  if (await waitGone(pid, pidStart, KILL_WAIT_MS, group)) return;
  // The record stays: the process is still ours to stop, and a later stop retries.
  const which = (await isOurs(pid, pidStart)) ? `pid ${pid}` : `a process of pid ${pid}'s group`;
  throw new DriverError("slot.apply_failed", `slot ${name}: ${which} is still alive ${KILL_WAIT_MS / 1000} s after SIGKILL (stuck in the kernel?)`);
}

/** `terminate` for each of `processes` at once (one grace for all); the first failure is thrown once all are done. */
async function terminateAll(name: string, processes: ReadonlyArray<{ pid: number; startTime: number }>, graceS: number): Promise<void> {
  const results = await Promise.allSettled(processes.map((p) => terminate(name, p.pid, p.startTime, graceS)));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed !== undefined) throw failed.reason;
}

/** Signals the runner's group (the runner leads its own) or, if it left its group, the runner alone. */
async function signalIfOurs(pid: number, pidStart: number, signal: NodeJS.Signals): Promise<boolean> {
  const stat = await procStat(pid);
  if (!isLive(stat) || stat.startTime !== pidStart) return false;
  try {
    process.kill(stat.pgid === pid ? -pid : pid, signal);
  } catch {
    return false; // exited between the check and the signal
  }
  return true;
}

/**
 * What is left of the group of a runner that has exited (and been reaped):
 * SIGTERM, SIGKILL after `graceS`. Best effort: the start has failed already.
 */
async function stopGroupLeft(pgid: number, graceS: number): Promise<void> {
  if (!(await groupLives(pgid))) return;
  killQuietly(-pgid, "SIGTERM");
  const deadline = performance.now() + graceS * 1000;
  while (await groupLives(pgid)) {
    if (performance.now() >= deadline) return void killQuietly(-pgid);
    await sleep(GONE_POLL_MS);
  }
}

/** The runner has exited and, when `group`, so has every process of its group; polled until `ms` passes. */
async function waitGone(pid: number, pidStart: number, ms: number, group: boolean): Promise<boolean> {
  // On the monotonic clock: the wall clock set back mid-stop must not keep a runner that ignores SIGTERM alive for as long.
  const deadline = performance.now() + ms;
  for (;;) {
    if (!(await isOurs(pid, pidStart)) && !(group && (await groupLives(pid)))) return true;
    if (performance.now() >= deadline) return false;
    await sleep(GONE_POLL_MS);
  }
}

/**
 * A process of group `pgid` is alive (not a zombie waiting to be reaped). The
 * kernel keeps a group's id from being given to a new process while the group
 * has members, so the id is still the runner's group's.
 */
async function groupLives(pgid: number): Promise<boolean> {
  if (!killQuietly(-pgid, 0)) return false; // no process in it at all: the common case, no /proc walk
  // kill() counts zombies too: look at the members.
  const pids = (await readdir("/proc").catch(() => [] as string[])).filter((d) => /^\d+$/.test(d)).map(Number);
  for (const member of pids) {
    const stat = await procStat(member);
    if (isLive(stat) && stat.pgid === pgid) return true;
  }
  return false;
}

export type { RuntimeRecord };
