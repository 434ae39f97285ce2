import { constants, existsSync } from "node:fs";
import { access, readdir, readFile, stat, statfs } from "node:fs/promises";
import { request } from "node:http";
import { join, resolve } from "node:path";
import type { Model, ResolvedSlot } from "../compiler/index.js";
import type { Diagnostic } from "../schema/index.js";
import { HermesReadError, readHermesFile, readHermesProfiles } from "./hermes-files.js";
import { engineAddress } from "./images.js";
import { hermesHome, hermesIdentity, mcpBaseUrl, planHermesProfile, profileFile } from "./hermes-plan.js";
import type { HermesCredentials, HermesManaged, HermesManagedProfile } from "./observed.js";
import { nearestExisting } from "./atomic.js";
import { spawnProbe } from "./probe-process.js";
import { StateStore } from "./state.js";
import { findRunner, runnerPath, spawnErrorWords } from "./drivers/runner.js";
import { runnerBaseEnv } from "./drivers/runner-env.js";
import { isAdvisory, preflight, type Finding } from "./preflight.js";
import { DEFAULT_UNIT_DIR, readUnit, reinstallCommand, UNIT_NAME, unitProblems, verifyUnit } from "./systemd-unit.js";
import { storeDir } from "./host/model-scan.js";

/**
 * The checks of `hal0 doctor` (and `GET /api/doctor`, `GET /api/health/system`):
 * one row per check, computed here; the CLI prints them, the route returns
 * them. Reads only.
 */

/** The environment a check reads (`DOCKER_HOST`). */
export type DoctorEnv = Readonly<Record<string, string | undefined>>;

export interface DoctorInput {
  readonly root: string;
  readonly model?: Model;
  readonly diagnostics: readonly Diagnostic[];
  readonly stateDir: string;
  readonly env: DoctorEnv;
  /** Whose tokens the Hermes rows compare bearers with (the reconciler never opens the token store itself). */
  readonly hermesCredentials: HermesCredentials;
  /** Run each runner with --version for its row (default true); false: the runner rows say only whether it is found (a health check), and the unit is not verified. */
  readonly runnerVersions?: boolean;
  /** Where `hal0 service install` wrote hal0.service (default /etc/systemd/system). */
  readonly unitDir?: string;
  /** Why there is no tree to check at all (the config folder is gone under a running server): the tree row fails with it. */
  readonly treeMissing?: string;
}

export interface DoctorRow {
  check: string;
  status: "ok" | "warn" | "fail";
  message: string;
  hint: string;
}

/** The profile hal0's own brain agent runs as (identity `hermes__hal0-brain`). */
const BRAIN_PROFILE = "hal0-brain";

/**
 * The doctor's rows for a compiled tree (no CLI io): what `hal0 doctor` prints
 * and `GET /api/doctor` returns. The Hermes rows plan each profile as the
 * sweep would, bearer included: a profile whose `Authorization` is not its
 * identity's live agent token is not wired. Reads only (fingerprints; no
 * token is minted), through `hermesCredentials` (the caller's: the CLI passes
 * the state folder's token store, `hal0 serve` its own).
 */
export async function doctorRows(tree: DoctorInput): Promise<DoctorRow[]> {
  const rows: DoctorRow[] = [
    tree.treeMissing !== undefined
      ? { check: "tree", status: "fail", message: tree.treeMissing, hint: "put the config folder back (or point hal0 at it); nothing is written until it is" }
      : treeRow(tree.root, tree.diagnostics.filter((d) => d.severity === "error").length, tree.diagnostics.length),
    await stateRow(tree.stateDir),
  ];
  const model = tree.model;
  if (!model) {
    const row = (check: string): DoctorRow => ({ check, status: "warn", message: "not checked: the config tree does not compile", hint: "fix the tree first (hal0 validate)" });
    rows.push(row("runtime"), row("model_files"), row("slot_ports"), row("hermes_profiles_mcp"), row("hermes_default_memory"), row("hermes_brain_memory"));
  } else {
    // A record that does not parse (state.corrupt) or cannot be read stops plan and apply: the profiles row fails with why.
    let unreadable: string | undefined;
    const managed = await new StateStore(tree.stateDir).readHermesManaged().catch((err: unknown): HermesManaged => {
      unreadable = `${(err as { code?: string }).code ?? "system.io"}: ${(err as Error).message}`;
      return { profiles: {} };
    });
    const credentials = tree.hermesCredentials;
    const token = (profile: string | null): string | null => {
      try {
        return credentials.fingerprint(hermesIdentity(profile));
      } catch {
        return null; // an unreadable token store: no live token to compare, so the profile shows as not wired
      }
    };
    // Runners are looked up and run with hal0's own environment, as the process driver spawns them (not a caller's `env`).
    const findings = await preflight(model, { env: process.env });
    rows.push(await runtimeRow(model, tree.env), ...(await runnerRows(model, findings, tree.runnerVersions ?? true)), modelFilesRow(model, findings), await slotPortsRow(model));
    const profiles: DoctorRow = unreadable === undefined ? await profilesRow(model, managed.profiles, token) : { check: "hermes_profiles_mcp", status: "fail", message: unreadable, hint: "restore hermes-managed.json from a backup, or move it away to start over; plan and apply refuse until then" };
    rows.push(profiles, await defaultMemoryRow(model, managed.default, token), await brainMemoryRow(model, managed.profiles[BRAIN_PROFILE], token));
  }
  rows.push(await serviceUnitRow(tree.root, tree.stateDir, tree.unitDir ?? DEFAULT_UNIT_DIR, tree.runnerVersions ?? true, model));
  return rows;
}

/**
 * `service_unit`: the hal0.service `hal0 service install` wrote, if any —
 * that it serves this config and state folder, that its node and hal0 are
 * there, and (`verify`) what `systemd-analyze verify` says of it. No unit is
 * fine: hal0 serve needs no systemd.
 */
async function serviceUnitRow(root: string, stateDir: string, unitDir: string, verify: boolean, model: Model | undefined): Promise<DoctorRow> {
  const check = "service_unit";
  const unit = await readUnit(unitDir);
  if (!unit) return { check, status: "ok", message: `no ${UNIT_NAME} in ${unitDir}: hal0 serve runs without systemd`, hint: "" };
  const reinstall = `run ${reinstallCommand(unit, { config: root, state: stateDir, unitDir })} again`;
  if (unit.config === undefined || unit.state === undefined || resolve(unit.config) !== resolve(root) || resolve(unit.state) !== resolve(stateDir)) {
    return { check, status: "fail", message: `${unit.file} serves --config ${unit.config ?? "?"} --state ${unit.state ?? "?"}, not ${root} and ${stateDir}`, hint: reinstall };
  }
  const missing = unit.exec.filter((w, i) => (i === 0 || w.endsWith("hal0.js") || w.endsWith("hal0.cjs")) && !existsSync(w));
  if (missing.length > 0) return { check, status: "fail", message: `${unit.file} runs ${missing.join(" and ")}, which does not exist (node or hal0 moved)`, hint: reinstall };
  // The folders the service writes: open to it, and not hidden by a private /tmp.
  const problems = unitProblems(unit, { writable: [stateDir, root, ...(model ? [storeDir(model)] : [])], writableIfPresent: model ? [hermesHome(model)] : [] });
  if (problems.length > 0) return { check, status: "fail", message: `${unit.file}: ${problems.join("; ")}`, hint: reinstall };
  if (!verify) return { check, status: "ok", message: `${unit.file} serves this box`, hint: "" };
  const verified = await verifyUnit(unit.file);
  if (verified === undefined) return { check, status: "ok", message: `${unit.file} serves this box (systemd-analyze is not installed: not verified)`, hint: "" };
  const first = verified.output.split("\n")[0] ?? "";
  if (verified.code !== 0) return { check, status: "fail", message: `systemd-analyze verify ${unit.file} fails: ${first}`, hint: reinstall };
  if (verified.output !== "") return { check, status: "warn", message: `systemd-analyze verify ${unit.file}: ${first}`, hint: "see systemd-analyze verify's full output" };
  return { check, status: "ok", message: `${unit.file} serves this box; systemd-analyze verify is clean`, hint: "" };
}

function treeRow(root: string, errors: number, total: number): DoctorRow {
  if (errors > 0) return { check: "tree", status: "fail", message: `${root}: ${errors} error(s); the box keeps its last applied state`, hint: "run hal0 validate to see each error" };
  if (total > 0) return { check: "tree", status: "warn", message: `${root} compiles with ${total} warning(s)`, hint: "run hal0 validate to see them" };
  return { check: "tree", status: "ok", message: `${root} compiles`, hint: "" };
}

/** Below this much free space on the state folder's disk, the doctor's state_folder row fails: SQLite cannot grow its log, nor a record be written. */
export const STATE_DISK_FULL_BYTES = 1024 * 1024;
/** Below this much, it warns. */
export const STATE_DISK_LOW_BYTES = 64 * 1024 * 1024;

/** The state folder is writable (or, not there yet, can be made in its nearest existing parent), on a disk with room. */
async function stateRow(dir: string): Promise<DoctorRow> {
  const nearest = nearestExisting(dir);
  if (nearest === undefined) return { check: "state_folder", status: "fail", message: `no folder of ${dir} exists`, hint: "create it" };
  const { at, info } = nearest;
  if (!info.isDirectory()) return { check: "state_folder", status: "fail", message: `${at} is not a folder`, hint: "point --state or $HAL0_STATE at a folder" };
  const refused = await access(at, constants.W_OK).then(() => undefined, (err: NodeJS.ErrnoException) => err.code ?? "EACCES");
  if (refused === "EROFS") return { check: "state_folder", status: "fail", message: `${at} is on a read-only file system`, hint: "remount it read-write, or point --state or $HAL0_STATE at a writable folder" };
  if (refused !== undefined) return { check: "state_folder", status: "fail", message: `${at} is not writable`, hint: `run as the user that owns ${at}, or fix its permissions` };
  // Writable by its mode, yet a full disk refuses every write: every call that records (a plan, an approval, an apply) is 507.
  const free = await statfs(at).then((f) => f.bavail * f.bsize, () => undefined);
  const hint = `free space on the disk that holds ${at}`;
  if (free !== undefined && free < STATE_DISK_FULL_BYTES) return { check: "state_folder", status: "fail", message: `${at} is on a full disk (${free} bytes free): hal0 cannot record plans, approvals or what it starts`, hint };
  if (free !== undefined && free < STATE_DISK_LOW_BYTES) return { check: "state_folder", status: "warn", message: `${at} is writable, with ${(free / 1024 / 1024).toFixed(1)} MiB free on its disk`, hint };
  return { check: "state_folder", status: "ok", message: at === dir ? `${dir} is writable` : `${dir} does not exist yet; ${at} is writable`, hint: "" };
}

/**
 * process: always there. docker: the engine answers GET /_ping (and /version) at [slots]
 * docker_host, else $DOCKER_HOST, else the default socket. swarm: that engine is a swarm
 * manager (GET /info), and how many of its nodes are ready.
 */
async function runtimeRow(model: Model, env: DoctorEnv): Promise<DoctorRow> {
  const slots = model.settings.slots;
  if (slots.runtime === "process") return { check: "runtime", status: "ok", message: "process runtime (slots run as local processes)", hint: "" };
  const host = engineAddress(slots.docker_host, env);
  try {
    const ping = await engineGet(host, "/_ping");
    if (ping.status !== 200) throw new Error(`GET /_ping answered ${ping.status}`);
    const version = await engineGet(host, "/version").then((r) => (JSON.parse(r.body) as { Version?: string }).Version ?? "?", () => "?");
    if (slots.runtime === "swarm") return await swarmRow(host, version);
    return { check: "runtime", status: "ok", message: `docker engine ${version} answers at ${host}`, hint: "" };
  } catch (err) {
    return { check: "runtime", status: "fail", message: `${slots.runtime} runtime: the engine at ${host} does not answer (${(err as Error).message})`, hint: "start the engine, or set [slots] docker_host or DOCKER_HOST" };
  }
}

/** The swarm runtime's engine must be a manager; its nodes are counted by state. */
async function swarmRow(host: string, version: string): Promise<DoctorRow> {
  const info = JSON.parse((await engineGet(host, "/info")).body) as { Swarm?: { LocalNodeState?: string; ControlAvailable?: boolean } };
  if (info.Swarm?.ControlAvailable !== true) {
    // A worker is in a swarm already (its state is active): swarm init there fails; only a manager's engine will do.
    const state = info.Swarm?.LocalNodeState || "inactive";
    const hint = state === "active" ? "it is a worker of a swarm: point [slots] docker_host at a manager's engine (docs/swarm.md)" : "run docker swarm init on it, or point [slots] docker_host at a manager (docs/swarm.md)";
    return { check: "runtime", status: "fail", message: `swarm runtime: the engine ${version} at ${host} is not a swarm manager (swarm state ${state})`, hint };
  }
  const nodes = JSON.parse((await engineGet(host, "/nodes")).body) as { Status?: { State?: string } }[];
  const ready = nodes.filter((n) => n.Status?.State === "ready").length;
  const status = ready === nodes.length ? "ok" : "warn";
  return { check: "runtime", status, message: `swarm manager (docker ${version}) at ${host}: ${ready} of ${nodes.length} nodes ready`, hint: status === "ok" ? "" : "hal0 status lists the nodes and the slots on each" };
}

/** How long `<runner> --version` may take before the doctor stops it. */
export const RUNNER_VERSION_TIMEOUT_MS = 2000;

/**
 * Process runtime: one row per distinct runner (a profile's `runner` prefix)
 * of the enabled slots, `runner:<prefix>`: fail when the preflight did not
 * find it (or may not run it); else the prefix is run with `--version` (2 s,
 * then SIGKILL to its process group; once per binary, `cachedVersion`) and
 * the row shows what it printed — llama-server's `version: 9749 (d32676d77)`
 * on stderr. A runner that prints no version in time is a warning. Looked up
 * and run with hal0's own environment and the slot's env, as the process
 * driver spawns it. Docker runtime: no rows (the image is the runner, the
 * engine's business).
 */
async function runnerRows(model: Model, findings: readonly Finding[], versions: boolean): Promise<DoctorRow[]> {
  if (model.settings.slots.runtime !== "process") return [];
  const groups = new Map<string, { prefix: readonly string[]; slots: ResolvedSlot[] }>();
  for (const slot of Object.values(model.slots).filter((s) => s.enabled).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const prefix = model.profiles[slot.profile]?.runner ?? slot.spec.argv.slice(0, 1);
    const key = JSON.stringify(prefix);
    const group = groups.get(key) ?? { prefix, slots: [] };
    group.slots.push(slot);
    groups.set(key, group);
  }
  const keys = [...groups.keys()].sort();
  return Promise.all(keys.map(async (key) => {
    const { prefix, slots } = groups.get(key)!;
    const check = `runner:${prefix.join(" ")}`;
    const names = slots.map((s) => s.name).join(", ");
    const missing = findings.find((f) => f.subject === "runner" && slots.some((s) => s.name === f.slot));
    if (missing !== undefined) {
      const hint = missing.problem === "runner_not_executable"
        ? "make it executable (chmod +x), or set the profile's runner to one that is"
        : `install it, put its folder on hal0's PATH, or set profile ${slots[0]!.profile}'s runner in profiles.toml; hal0 apply would fail for these slots`;
      return { check, status: "fail", message: `${missing.summary.replace(` of slot ${missing.slot}`, "")} (slots: ${names})`, hint };
    }
    const runEnv = { ...runnerBaseEnv(process.env), ...slots[0]!.spec.env };
    const lookup = await findRunner(prefix[0]!, model.root, runEnv);
    if (!lookup.found) return { check, status: "fail", message: `\`${prefix[0]}\` is not found (slots: ${names})`, hint: "install it, or set the profile's runner" };
    const at = `${lookup.path}${lookup.via === "bin" ? " (hal0's bin/)" : ""}`;
    if (!versions) return { check, status: "ok", message: `${at} (slots: ${names})`, hint: "" };
    const answer = await cachedVersion([lookup.path, ...prefix.slice(1)], model.root, { ...runEnv, PATH: runnerPath(runEnv) });
    if (answer.version !== undefined) return { check, status: "ok", message: `${at}: ${answer.version} (slots: ${names})`, hint: "" };
    return {
      check, status: "warn", message: `${at}: no version from --version (${answer.why}) (slots: ${names})`,
      hint: "llama-server answers --version with `version: <build> (<commit>)` and exits; a runner that does not may be another program, or an old or stand-in build",
    };
  }));
}

/**
 * `runnerVersion` once per runner binary (its argv, path, size and mtime, the
 * working folder and PATH): `hal0 serve` answers GET /api/doctor again
 * without starting the runners again; a new build of the runner is asked anew.
 */
const versions = new Map<string, Promise<{ version?: string; why: string }>>();

async function cachedVersion(argv: readonly string[], cwd: string, env: DoctorEnv): Promise<{ version?: string; why: string }> {
  const info = await stat(argv[0]!).catch(() => undefined);
  const key = JSON.stringify([argv, info?.size, info?.mtimeMs, info?.ino, cwd, env.PATH]);
  let answer = versions.get(key);
  if (answer === undefined) versions.set(key, (answer = runnerVersion(argv, cwd, env, RUNNER_VERSION_TIMEOUT_MS)));
  return answer;
}

/** What `<argv> --version` printed: llama.cpp's `version: N (commit)` line, else the first line of a clean exit; or why there is none. */
export async function runnerVersion(argv: readonly string[], cwd: string, env: DoctorEnv, timeoutMs: number): Promise<{ version?: string; why: string }> {
  return new Promise((resolve) => {
    let out = "";
    // Its own process group, killed at the timeout and with hal0 (probe-process.ts).
    const child = spawnProbe(argv[0]!, [...argv.slice(1), "--version"], { cwd, env: env as NodeJS.ProcessEnv });
    const take = (chunk: Buffer) => (out = (out + chunk.toString("utf8")).slice(0, 65536));
    child.stdout.on("data", take);
    child.stderr.on("data", take);
    const timer = setTimeout(() => {
      // Its whole process group (whatever it started goes too); answered once it is reaped, so nothing outlives the doctor.
      child.once("exit", () => resolve({ why: `no answer within ${timeoutMs / 1000} s; stopped it` }));
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    }, timeoutMs);
    child.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ why: `cannot run it: ${argv[0]!.startsWith("/") ? spawnErrorWords(argv[0]!, err) : err.code ?? err.message}` });
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      const llama = /^version: (\d+) \(([0-9a-f]+)\)/m.exec(out);
      if (llama) return resolve({ version: `version: ${llama[1]} (${llama[2]})`, why: "" });
      const first = out.split("\n").map((l) => l.trim()).find(Boolean);
      if (code === 0 && first !== undefined) return resolve({ version: first.slice(0, 120), why: "" });
      resolve({ why: `${signal !== null ? `killed by ${signal}` : `exit ${code}`}${first ? `: ${first.slice(0, 160)}` : ""}` });
    });
  });
}

/** Where Linux keeps the range it picks outgoing connections' local ports from, and the ports it never picks. */
export const EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range";
export const RESERVED_PORTS_FILE = "/proc/sys/net/ipv4/ip_local_reserved_ports";

/**
 * `slot_ports`: no enabled slot listens on a port in the kernel's ephemeral
 * range (unless reserved). The kernel hands those ports to outgoing
 * connections, so while such a slot is stopped (a restart, a swap) any
 * connection of the host can take its port, and the slot then fails to start
 * with slot.port_in_use, now and then. Warn only: the slot may well start.
 * Swarm slots listen on other nodes: not checked here.
 */
async function slotPortsRow(model: Model): Promise<DoctorRow> {
  const check = "slot_ports";
  if (model.settings.slots.runtime === "swarm") return { check, status: "ok", message: "not checked: swarm slots listen on their nodes", hint: "" };
  const range = await readFile(EPHEMERAL_RANGE_FILE, "utf8").then((t) => t.trim().split(/\s+/).map(Number), () => undefined);
  if (range === undefined || range.length !== 2 || !range.every(Number.isInteger)) return { check, status: "ok", message: `not checked: ${EPHEMERAL_RANGE_FILE} cannot be read`, hint: "" };
  const [low, high] = range as [number, number];
  const reservedText = (await readFile(RESERVED_PORTS_FILE, "utf8").catch(() => "")).trim();
  const reserved = parsePortList(reservedText);
  const inside = Object.values(model.slots).filter((s) => s.enabled && s.port >= low && s.port <= high && !reserved(s.port)).sort((a, b) => a.port - b.port);
  const span = `${low}–${high}`;
  if (inside.length === 0) return { check, status: "ok", message: `no enabled slot listens in the kernel's ephemeral port range (${span})`, hint: "" };
  const ports = inside.map((s) => s.port);
  return {
    check, status: "warn",
    message: `${inside.map((s) => `slot ${s.name} (port ${s.port})`).join(", ")} listen${inside.length === 1 ? "s" : ""} in the kernel's ephemeral port range (${span}): an outgoing connection can take the port while the slot is stopped, and it then fails to start (slot.port_in_use)`,
    hint: `give ${inside.length === 1 ? "it a port" : "them ports"} below ${low}${high < 65535 ? ` or above ${high}` : ""}, or reserve ${inside.length === 1 ? "it" : "them"}${reservedText ? " beside the ports reserved now" : ""}: sysctl -w net.ipv4.ip_local_reserved_ports=${[...(reservedText ? [reservedText] : []), ...ports].join(",")}`,
  };
}

/** `8081,8090-8095` (ip_local_reserved_ports' format) as a membership test. */
export function parsePortList(text: string): (port: number) => boolean {
  const spans = text.trim().split(",").filter(Boolean).map((part) => part.split("-").map(Number) as [number, number?]);
  return (port) => spans.some(([a, b]) => port === a || (b !== undefined && port >= a && port <= b));
}

/** Every model file the enabled slots' argv names (path, draft, mmproj, chat template) exists and is readable. */
function modelFilesRow(model: Model, findings: readonly Finding[]): DoctorRow {
  const bad = findings.filter((f) => f.subject !== "runner" && !isAdvisory(f));
  if (bad.length > 0) {
    return { check: "model_files", status: "fail", message: bad.map((f) => f.summary).join("; "), hint: "fix the path in models.toml or put the file there (hal0 validate shows each key); hal0 apply would fail for those slots" };
  }
  const files = Object.values(model.slots).filter((s) => s.enabled && s.model !== undefined && model.models[s.model]?.path_abs !== undefined).length;
  return { check: "model_files", status: "ok", message: files === 0 ? "no enabled slot serves a model file (hf_repo models are fetched by the runner)" : `the model files of ${files} enabled slot(s) exist and are readable`, hint: "" };
}

function engineGet(host: string, path: string): Promise<{ status: number; body: string }> {
  const target = host.startsWith("unix://") ? { socketPath: host.slice("unix://".length) } : hostPort(host);
  return new Promise((resolve, reject) => {
    const req = request({ ...target, path, method: "GET", timeout: 3000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timed out after 3 s")));
    req.on("error", reject);
    req.end();
  });
}

function hostPort(host: string): { host: string; port: number } {
  const url = new URL(host.replace(/^tcp:\/\//, "http://"));
  return { host: url.hostname, port: Number(url.port || 2375) };
}

/** Every named profile wired (hal0's keys as desired), or opted out. */
type TokenOf = (profile: string | null) => string | null;

async function profilesRow(model: Model, managed: Readonly<Record<string, { ids: readonly string[]; applied?: string }>>, token: TokenOf): Promise<DoctorRow> {
  const home = hermesHome(model);
  // A profiles folder hal0 may not read shows no profile: said, rather than "no named Hermes profiles".
  const refused = await readdir(join(home, "profiles")).then(() => undefined, (err: NodeJS.ErrnoException) => (err.code === "ENOENT" || err.code === "ENOTDIR" ? undefined : err.code ?? err.message));
  if (refused !== undefined) {
    return {
      check: "hermes_profiles_mcp", status: "warn", message: `cannot read ${home}/profiles (${refused}): hal0 neither wires nor checks the named Hermes profiles there`,
      hint: "give hal0's user read access to the Hermes home, or set [hermes] home in hal0.toml to the one Hermes uses here",
    };
  }
  const profiles = await readHermesProfiles(home);
  const names = Object.keys(profiles);
  if (names.length === 0) return { check: "hermes_profiles_mcp", status: "ok", message: `no named Hermes profiles under ${home}/profiles`, hint: "" };
  const wired: string[] = [];
  const optedOut: string[] = [];
  const unwired: string[] = [];
  const broken: string[] = [];
  const elsewhere: string[] = [];
  for (const name of names) {
    const { change } = planHermesProfile(model, name, profiles[name]!.text, managed[name], { enforce: true, token: token(name), unreadable: profiles[name]!.unreadable });
    // hal0's entry there names another server than this box's: another hal0 box wires the same home (or this box's [server] moved since it wrote).
    const there = adminUrl(change.before.mcp_servers);
    const here = adminUrl(change.after.mcp_servers);
    if (there !== undefined && here !== undefined && there !== here) elsewhere.push(`${name} (${there})`);
    if (change.reason === "invalid_yaml") broken.push(name);
    else if (change.action === "no-op") (change.reason === "opted_out" ? optedOut : wired).push(name);
    else if (change.reason === "opted_out") optedOut.push(name);
    else unwired.push(`${name} (${change.reason})`);
  }
  const parts = [`${wired.length}/${names.length} wired`, optedOut.length ? `opted out: ${optedOut.join(", ")}` : "", unwired.length ? `not wired: ${unwired.join(", ")}` : "", broken.length ? `not YAML hal0 can edit: ${broken.join(", ")}` : "", elsewhere.length ? `hal0's entries point at another server than this box's ${mcpBaseUrl(model)}: ${elsewhere.join(", ")}` : ""].filter(Boolean);
  const message = parts.join("; ");
  if (broken.length) return { check: "hermes_profiles_mcp", status: "fail", message, hint: "fix the YAML of those config.yaml files; hal0 leaves them alone meanwhile" };
  if (elsewhere.length) {
    return {
      check: "hermes_profiles_mcp", status: "warn", message,
      hint: "if another hal0 box uses this [hermes] home, give each box its own (the two would rewrite each other's entries and tokens); if this box's [server] changed, run hal0 apply",
    };
  }
  if (unwired.length) return { check: "hermes_profiles_mcp", status: "warn", message, hint: "run hal0 apply, or wait for the next sweep (hal0 reconcile)" };
  return { check: "hermes_profiles_mcp", status: "ok", message, hint: "" };
}

/** The url of `mcp_servers.hal0-admin` in a profile's hal0 keys, when it has one. */
function adminUrl(servers: Readonly<Record<string, unknown>>): string | undefined {
  const entry = servers["hal0-admin"];
  const url = entry !== null && typeof entry === "object" ? (entry as { url?: unknown }).url : undefined;
  return typeof url === "string" ? url : undefined;
}

async function defaultMemoryRow(model: Model, managed: HermesManagedProfile | undefined, token: TokenOf): Promise<DoctorRow> {
  return memoryRow("hermes_default_memory", model, null, managed, token, "hal0 agent reprovision hermes --repair");
}

async function brainMemoryRow(model: Model, managed: HermesManagedProfile | undefined, token: TokenOf): Promise<DoctorRow> {
  return memoryRow("hermes_brain_memory", model, BRAIN_PROFILE, managed, token, "run hal0 apply, or wait for the next sweep");
}

/** A profile's `mcp_servers.hal0-memory` is what hal0 wants there, its bearer the identity's live agent token (the planner decides, as for a sweep). */
async function memoryRow(check: string, model: Model, profile: string | null, managed: HermesManagedProfile | undefined, token: TokenOf, fix: string): Promise<DoctorRow> {
  const file = profileFile(hermesHome(model), profile);
  const text = await readHermesFile(file).catch((err: Error) => err);
  if (text instanceof Error) return { check, status: "fail", message: text instanceof HermesReadError ? text.message : `cannot read ${file}: ${text.message}`, hint: "check the file's permissions" };
  if (text === undefined) return { check, status: "warn", message: `no ${profile === null ? "default" : profile} profile (${file} does not exist)`, hint: profile === null ? "install Hermes, then run hal0 agent reprovision hermes --repair" : `create the ${profile} profile with hermes, then run hal0 apply` };
  const { change, warnings } = planHermesProfile(model, profile, text, managed, { enforce: true, token: token(profile) });
  if (change.reason === "invalid_yaml") return { check, status: "fail", message: `${file} is not YAML hal0 can edit: ${(warnings[0]?.message ?? "").slice(file.length + 2).replace(/; hal0 leaves the file alone$/, "")}`, hint: "fix the file's YAML" };
  const desired = change.after.mcp_servers;
  const current = change.before.mcp_servers;
  if (!Object.hasOwn(desired, "hal0-memory")) return { check, status: "warn", message: `${file} opts out of hal0's MCP servers (hal0: {wire_mcp: false})`, hint: "remove the opt-out to give this profile hal0's memory" };
  if (!Object.hasOwn(current, "hal0-memory")) return { check, status: "warn", message: `${file} has no mcp_servers.hal0-memory`, hint: fix };
  const differs = change.changed_paths.filter((p) => p === "mcp_servers.hal0-memory" || p.startsWith("mcp_servers.hal0-memory."));
  if (differs.length > 0) {
    const bearer = differs.some((p) => p.endsWith(".headers.Authorization"));
    return { check, status: "warn", message: `${file}: mcp_servers.hal0-memory differs from what hal0 writes (${differs.join(", ")})${bearer ? `; its bearer is not ${hermesIdentity(profile)}'s live agent token` : ""}`, hint: fix };
  }
  return { check, status: "ok", message: `${file} is wired to hal0-memory as ${hermesIdentity(profile)}`, hint: "" };
}
