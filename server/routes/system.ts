import { readFile } from "node:fs/promises";
import { arch, cpus, freemem, hostname, platform, release, totalmem, type, uptime } from "node:os";
import { SPEC_VERSION, type Model } from "../../compiler/index.js";
import { doctorRows, type DoctorRow } from "../../reconciler/doctor.js";
import { nodeRows, type NodeStatus } from "../../reconciler/nodes.js";
import { probeHardware, type HardwareReport } from "../../reconciler/host/hardware.js";
import type { BoxService } from "../box.js";
import { ApiError } from "../errors.js";
import type { Dispatcher } from "../dispatch.js";
import { stateHermesCredentials } from "../identity/hermes-credentials.js";
import { defineRoute } from "../route.js";
import { observeLiveness } from "../slot-view.js";
import { introspect } from "../mcp-servers/bundled.js";
import { packageVersion } from "../version.js";

/** One hardware probe per box until a reprobe replaces it. */
const probes = new WeakMap<BoxService, Promise<HardwareReport>>();

/**
 * The box itself: ports in use, versions, the OS, hardware from /proc and
 * /sys, health, the doctor's rows and the features this build has on.
 */
export const systemRoutes = [
  defineRoute({
    method: "GET", path: "/api/ports", kind: "read", tools: ["port_list"], listKey: "ports",
    summary: "Every port the box uses: hal0's own, each slot's (enabled, running), and the slot range with its free count",
    handle: async ({ box }) => portList(box),
  }),
  defineRoute({
    method: "GET", path: "/api/status", kind: "read", tools: ["version_info"],
    summary: "hal0's version, Node's, the runner spec version, uptime, runtime and the tree's revision; on a swarm box its nodes (state, availability, labels, engine, slots on each)",
    handle: async ({ box }) => {
      // Answers whatever the tree's state: gone (tree_error says so) or never compiled (no runtime to name).
      const { snap, gone } = await box.current();
      const model = snap?.model ?? (await lastGoodModel(box));
      return {
        name: "hal0", version: packageVersion(), node: process.version, spec_version: SPEC_VERSION,
        uptime_s: Math.round(process.uptime()), runtime: model?.settings.slots.runtime ?? null, revision: snap?.revision ?? null, tree_valid: snap?.model !== undefined,
        ...(gone ? { tree_error: { code: gone.code, message: gone.message } } : {}),
        memory_mb: memoryMb(),
        ...(model?.settings.slots.runtime === "swarm" ? { nodes: await swarmNodes(box, model) } : {}),
      };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/system-info", kind: "read", tools: ["system_info"],
    summary: "The OS, kernel, hostname, CPUs, memory, Node, and the config and state folders",
    handle: async ({ box }) => ({
      os: { platform: platform(), type: type(), arch: arch(), name: await osName() },
      kernel: release(), hostname: hostname(),
      cpus: { count: cpus().length, model: cpus()[0]?.model ?? null },
      memory: { total_bytes: totalmem(), free_bytes: freemem() },
      node: { version: process.version, pid: process.pid },
      uptime_s: Math.round(uptime()),
      config_dir: box.root, state_dir: box.options.stateDir,
    }),
  }),
  defineRoute({
    method: "GET", path: "/api/stats/hardware", kind: "read", tools: ["hardware_probe"],
    summary: "CPU, memory, load, GPUs, NPUs and temperatures from /proc and /sys (probed once; absent hardware is reported absent)",
    handle: ({ box }) => hardware(box, false),
  }),
  defineRoute({
    method: "POST", path: "/api/hardware/probe", kind: "action", tools: ["hardware_reprobe"],
    summary: "Probe the hardware again and replace the cached report",
    handle: ({ box }) => hardware(box, true),
  }),
  defineRoute({
    method: "GET", path: "/api/health/system", kind: "read", tools: ["health_system"],
    summary: "ok, or degraded when a check fails: the tree compiles, the state folder is writable, the database answers, the runtime is reachable",
    handle: async ({ box }) => systemHealth(box),
  }),
  defineRoute({
    method: "GET", path: "/api/doctor", kind: "read", tools: ["doctor_report"],
    summary: "The rows of hal0 doctor (ok / warn / fail, each with a hint) and what the compiler says of the tree: the document `hal0 doctor --json` prints",
    handle: async ({ box }) => {
      const tree = await box.current();
      const rows = await doctor(box, true, tree);
      return { ok: !rows.some((r) => r.status === "fail"), rows, diagnostics: tree.snap?.diagnostics ?? [] };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/features", kind: "read", tools: ["feature_list"], listKey: "features",
    summary: "The features of this build and whether each is on",
    handle: async ({ box, services }) => ({ features: features(await box.model(), services, await bridgeTools(services)) }),
  }),
];

async function osName(): Promise<string | null> {
  const text = await readFile("/etc/os-release", "utf8").catch(() => "");
  return text.match(/^PRETTY_NAME="?([^"\n]*)"?$/m)?.[1] ?? null;
}

function hardware(box: BoxService, fresh: boolean): Promise<HardwareReport> {
  let probe = probes.get(box);
  if (fresh || !probe) {
    probe = probeHardware("/", box.now());
    probes.set(box, probe);
  }
  return probe;
}

async function portList(box: BoxService): Promise<unknown> {
  const model = await box.model();
  const { server, slots } = model.settings;
  const { observed } = await box.observe(model);
  const inRange = (p: number) => p >= slots.port_range_start && p <= slots.port_range_end;
  const ports = [
    { port: server.port, owner: "hal0", host: server.host, in_range: inRange(server.port) },
    ...Object.values(model.slots).map((s) => ({ port: s.port, owner: "slot", slot: s.name, enabled: s.enabled, running: observed.slots[s.name]?.running ?? false, in_range: inRange(s.port) })),
  ].sort((a, b) => a.port - b.port);
  const size = slots.port_range_end - slots.port_range_start + 1;
  const used = new Set(ports.filter((p) => p.in_range).map((p) => p.port)).size;
  return { ports, range: { start: slots.port_range_start, end: slots.port_range_end, size, used, free: size - used } };
}

/** The doctor's rows; `runnerVersions: false` (the health check) spawns no runner's `--version`. */
async function doctor(box: BoxService, runnerVersions = true, tree?: Awaited<ReturnType<BoxService["current"]>>): Promise<DoctorRow[]> {
  const { snap, gone } = tree ?? (await box.current());
  return doctorRows({
    root: box.root, model: snap?.model, diagnostics: snap?.diagnostics ?? [], stateDir: box.options.stateDir, env: process.env,
    hermesCredentials: box.options.hermesCredentials ?? stateHermesCredentials(box.options.stateDir), runnerVersions, treeMissing: gone?.message,
  });
}

/** The last tree that compiled, or undefined when none ever did in this server. */
async function lastGoodModel(box: BoxService): Promise<Model | undefined> {
  try {
    return await box.model();
  } catch (err) {
    if (err instanceof ApiError && (err.code === "config.invalid" || err.code === "config.not_found" || err.code === "config.empty")) return undefined;
    throw err;
  }
}

async function systemHealth(box: BoxService): Promise<unknown> {
  const rows = (await doctor(box, false)).filter((r) => ["tree", "state_folder", "runtime"].includes(r.check));
  const checks = rows.map((r) => ({ check: r.check, status: r.status, message: r.message }));
  checks.push(dbCheck(box));
  return { status: checks.some((c) => c.status === "fail") ? "degraded" : "ok", checks };
}

function dbCheck(box: BoxService): { check: string; status: DoctorRow["status"]; message: string } {
  try {
    const { n } = box.db.prepare("SELECT count(*) AS n FROM audit").get() as { n: number };
    return { check: "database", status: "ok", message: `SQLite answers (${n} audit row(s))` };
  } catch (err) {
    return { check: "database", status: "fail", message: `SQLite does not answer: ${(err as Error).message}` };
  }
}

/**
 * How many tools `/mcp/agents` serves now (its server built and asked, as a
 * client would be), or undefined when this server does not mount it or
 * `[bridge] enabled` is off.
 */
async function bridgeTools(services: Dispatcher): Promise<number | undefined> {
  const agents = services.bundled?.find((b) => b.id === "hal0-agents");
  if (!agents || !(agents.enabled?.() ?? true)) return undefined;
  return (await introspect(agents, { kind: "operator", agent: "feature_list", private: false, via: "rest" }, "")).tools_count;
}

function features(model: Model, services: Dispatcher, bridgeToolCount: number | undefined): Array<{ name: string; enabled: boolean; detail: string }> {
  const s = model.settings;
  const tools = new Set(services.routes.flatMap((r) => r.tools ?? []));
  const mcp = Object.values(model.mcpServers);
  return [
    { name: "runtime.process", enabled: s.slots.runtime === "process", detail: "slots run as local processes" },
    { name: "runtime.docker", enabled: s.slots.runtime === "docker", detail: s.slots.docker_host || "the default docker socket" },
    { name: "runtime.swarm", enabled: s.slots.runtime === "swarm", detail: `slots as Swarm services through the manager at ${s.slots.docker_host || "$DOCKER_HOST or the default socket"}` },
    { name: "memory", enabled: s.memory.enabled, detail: `engine ${s.memory.engine}` },
    {
      // On only when the setting is on and this server mounts /mcp/agents; the detail counts what it serves.
      name: "bridge", enabled: s.bridge.enabled && bridgeToolCount !== undefined,
      detail: !s.bridge.enabled ? "the agents' MCP bridge is off ([bridge] enabled = false): /mcp/agents answers 404"
        : bridgeToolCount === undefined ? "this server does not mount /mcp/agents"
        : `/mcp/agents serves ${bridgeToolCount} tool(s) to operators and agents admitted with hal0 bridge admit; ${s.bridge.max_runs} Hermes run(s) at once`,
    },
    { name: "approvals", enabled: true, detail: `gated tool calls wait for a person; ttl ${s.approvals.ttl_s} s` },
    { name: "mcp", enabled: tools.size > 0, detail: `${tools.size} tool(s) alias this server's routes` },
    { name: "mcp_servers", enabled: mcp.some((m) => m.enabled !== false), detail: `${mcp.length} installed MCP server(s)` },
    { name: "drift.enforce", enabled: s.reconcile.drift === "enforce", detail: `the sweep runs every ${s.reconcile.interval_s} s` },
  ];
}

/** This process's memory in MB: resident set, V8 heap used / reserved, and memory outside the heap. */
function memoryMb(): Record<string, number> {
  const m = process.memoryUsage();
  const mb = (n: number) => Math.round((n / 1048576) * 10) / 10;
  return { rss: mb(m.rss), heap_used: mb(m.heapUsed), heap_total: mb(m.heapTotal), external: mb(m.external) };
}

/** A swarm box's nodes with the slots on each (one node list and one observation, no health probes). */
async function swarmNodes(box: BoxService, model: Model): Promise<NodeStatus[]> {
  const driver = await box.driver(model);
  if (driver.nodes === undefined) return [];
  const [nodes, seen] = await Promise.all([driver.nodes(), observeLiveness(box, model)]);
  return nodeRows(nodes, Object.fromEntries(seen));
}
