import { randomUUID } from "node:crypto";
import type { App } from "h3";
import type { Logger } from "pino";
import type { Model } from "../compiler/index.js";
import type { SlotDriver } from "../reconciler/index.js";
import { Approvals } from "./approvals.js";
import { Audit } from "./audit.js";
import { BoxService } from "./box.js";
import { openDb, type Db } from "./db.js";
import { DbFile } from "../memory/sqlite.js";
import { invoke, type Dispatcher, type SweepStatus } from "./dispatch.js";
import { createHal0App } from "./app.js";
import { gateConfig } from "./gate.js";
import { PlanStore } from "./plans.js";
import { PullService } from "./pulls/service.js";
import { ImagePulls } from "./image-pulls.js";
import { routeId, type Route } from "./route.js";
import { ROUTES } from "./routes/index.js";
import { adminServer } from "./mcp/admin.js";
import { buildCatalog } from "./mcp/catalog.js";
import { McpEndpoint } from "./mcp/endpoint.js";
import type { BundledServer } from "./mcp-servers/bundled.js";
import { memoryServer } from "./mcp/memory.js";
import { MEMORY_ROUTES, MemoryService, type MemoryServiceOptions } from "./memory/service.js";
import { packageVersion } from "./version.js";
import { slotIdObserver, slotIds } from "./slot-ids.js";
import { stackPointerObserver } from "./stack-pointer.js";
import { maxBodyBytes } from "./body.js";
import { hermesSync } from "./mcp-servers/hermes-sync.js";
import { auditRefusal } from "./audit.js";
import { sessionCookie, type Authenticator, type Identity } from "./identity/identify.js";
import { TokenStore } from "./identity/tokens.js";
import { hermesCredentials } from "./identity/hermes-credentials.js";
import { providerServices, type ProviderServices } from "./providers/probe.js";
import { Hal0Metrics } from "./metrics/registry.js";
import { slotStates } from "./metrics/slot-states.js";

import type { RunnerProbe } from "../reconciler/runner-probe.js";
import { LoopControl } from "../reconciler/loop.js";
import { boxIdNow } from "../reconciler/state.js";
import { SlotStats } from "./stats/scraper.js";
import { RunService } from "./bridge/runs/service.js";
import { agentsServer, bridgeCatalog } from "./mcp/agents.js";
import type { BridgeToolDef } from "./bridge/tool.js";
import { bridgeProfiles, queuedRunRefusal, requireBridge } from "./bridge/access.js";

export interface Hal0ServerOptions {
  readonly root: string;
  readonly stateDir: string;
  readonly driverFor: (model: Model) => Promise<SlotDriver>;
  readonly env?: NodeJS.ProcessEnv;
  readonly logger?: Logger;
  readonly nudge?: () => void;
  readonly sweeps?: () => SweepStatus;
  readonly now?: () => number;
  readonly routes?: readonly Route[];
  /** Overrides how hal0-memory makes its engine (tests). */
  readonly memoryEngine?: MemoryServiceOptions["engineFor"];
  /** Learns each runner's flag table (reconciler/runner-probe.ts); `hal0 serve` shares one with its sweep. Without it every runner is unprobed. */
  readonly runners?: RunnerProbe;
  /** The sweep loop's handle, which `hal0 serve` attaches its loop to; without it the server has none (`not_running`). */
  readonly loop?: LoopControl;
  /** Scrape each running slot's /metrics every this many seconds (`hal0 serve`: 60); absent or 0: no timer, `stats.scrapeNow()` only. */
  readonly scrapeIntervalS?: number;
  /** Re-roots /proc and /sys for the stats routes (tests write those trees); default `/`. */
  readonly hostRoot?: string;
  /** The tools `/mcp/agents` serves instead of this build's run and teaching tools (tests). */
  readonly bridgeTools?: readonly BridgeToolDef[];
  /**
   * A CLI command's server (cli/box.ts localServer) beside a `hal0 serve`
   * that may be running on the same state folder: what the serve runs in its
   * process (agent runs) is left to it (RunServiceOptions.guest).
   */
  readonly guest?: boolean;
}

export interface Hal0Server extends Dispatcher {
  readonly app: App;
  readonly db: Db;
  readonly auth: Authenticator;
  readonly tokens: TokenStore;
  readonly memory: MemoryService;
  /** `/mcp/admin`, `/mcp/memory` and `/mcp/agents`. */
  readonly mcp: { readonly admin: McpEndpoint; readonly memory: McpEndpoint; readonly agents: McpEndpoint };
  readonly stats: SlotStats;
  close(): Promise<void>;
}

/**
 * Everything `hal0 serve` serves, without a socket: the database, the box,
 * the stores and the h3 app over the route table. Tests build this directly;
 * `hal0 serve` adds the listener and the reconcile loop.
 */
export function createHal0Server(options: Hal0ServerOptions): Hal0Server {
  const now = options.now ?? Date.now;
  const routes = options.routes ?? ROUTES;
  const catalog = buildCatalog(routes); // an inconsistent tool catalog stops the server before it opens anything
  const bridge = bridgeCatalog(options.bridgeTools); // the same for hal0-agents' tools against their tier tables
  const db = openDb(options.stateDir);
  const dbFile = new DbFile(db.name);
  // The bootstrap: the person who can read the state folder holds <state>/operator.token.
  const tokens = new TokenStore(db, options.stateDir, now);
  tokens.ensureOwner();
  const box = new BoxService({ root: options.root, stateDir: options.stateDir, db, driverFor: options.driverFor, nudge: options.nudge, now, hermesCredentials: hermesCredentials(tokens), runners: options.runners,
    onAfterEffectError: (after, err) => options.logger?.error({ err, after }, `the commit's after-effect ${after} failed; the files it wrote stand`) });
  // Commit observers: after-effects keyed on the files a commit touched, for every door alike.
  box.onCommit("slot_ids", slotIdObserver(() => slotIds(db)));
  // An installed MCP server's file changed: the Hermes join converges now (seed 001's `hermes_sync`), however the change came.
  box.onCommit("hermes_sync", (proposal) => {
    const touched = proposal.applied.files.map((f) => /^mcp-servers\/([^/]+)\.toml$/.exec(f.file)).filter((m) => m !== null);
    if (touched.length === 0) return undefined;
    const present = touched.map((m) => m![1]!).filter((id) => proposal.model.mcpServers[id] !== undefined);
    return hermesSync(box, present.length === 1 ? present[0] : undefined);
  });
  // A stack apply (the change set carries `stack`) whose projection the committed tree holds: the pointer names it (`stack_pointer`).
  box.onCommit("stack_pointer", stackPointerObserver(options.stateDir, now));
  // Approved requests find their route here: the REST table and hal0-memory's internal routes.
  const byId = new Map([...routes, ...MEMORY_ROUTES, ...bridge.routes.values()].map((r) => [routeId(r), r]));
  const audit = new Audit(db, now,
    (err, held) => options.logger?.error({ err, held }, "audit rows could not be written; they are kept in memory and written when the database takes them again"),
    (written, dropped) => options.logger?.warn({ written, dropped }, dropped > 0 ? "audit rows are written again; some were given up meanwhile" : "audit rows are written again"));
  const memory = new MemoryService({ stateDir: options.stateDir, settings: () => box.lastSettings()?.memory, engineFor: options.memoryEngine });
  const auth: Authenticator = { tokens, mode: () => box.lastSettings()?.server.auth ?? "token", cookie: sessionCookie(boxIdNow(options.stateDir)) };
  const services = { box, audit, routes, memory, auth, dbFile, logger: options.logger } as { dbFile: DbFile; box: BoxService; audit: Audit; routes: readonly Route[]; plans: PlanStore; approvals: Approvals; memory: MemoryService; auth: Authenticator; pulls: PullService; providers: ProviderServices; bundled?: readonly BundledServer[]; sweeps?: SweepStatus; metrics: Hal0Metrics; stats: SlotStats; logger?: Logger };
  // Slot stats: the scraper's own timer (not the sweep's) fills the ring in hal0.db.
  services.stats = new SlotStats({ box, hostRoot: options.hostRoot, onError: (err) => options.logger?.warn({ err }, "slot scrape failed") });
  services.stats.start(options.scrapeIntervalS ?? 0);
  services.plans = new PlanStore(db, now);
  services.approvals = new Approvals(db, services, (id) => byId.get(id), () => box.lastSettings()?.approvals.ttl_s ?? 86_400, now);
  // Prometheus metrics in this server's own registry; the gauges read the approvals and the slots at scrape time.
  services.metrics = new Hal0Metrics({ approvalsPending: () => services.approvals.list("pending").length, slotStates: () => slotStates(box) }, now);
  box.onCommit("metrics", (proposal) => void services.metrics.observeCommit(proposal.delta));
  Object.defineProperty(services, "sweeps", { get: () => options.sweeps?.(), enumerable: true });
  (services as { loop?: LoopControl }).loop = options.loop ?? new LoopControl(now);
  const env = options.env ?? process.env;
  services.providers = providerServices(options.stateDir, env);
  if (services.providers.allowIgnored.length > 0) {
    options.logger?.warn({ ignored: services.providers.allowIgnored }, "HAL0_UPSTREAM_ALLOW entries that are not host:port (192.168.1.20:11434) trust nothing and are ignored");
  }
  // A finished pull registers its model through the pipeline (the register route: compiled, planned, audited) as system:pull.
  const registerRoute = byId.get("POST /api/models")!;
  const editRoute = byId.get("PUT /api/models/{model_id}")!;
  services.pulls = new PullService({
    db, box, env, now, guest: options.guest === true,
    register: async (job, entry, onBehalfOf) => {
      const caller = { kind: "system", agent: "pull", private: false, via: "approval", approvedBy: onBehalfOf } as const;
      const call = job.mode === "update"
        ? { route: editRoute, params: { model_id: job.model_id }, body: entry, tool: "model_update" }
        : { route: registerRoute, params: {}, body: { id: job.model_id, ...entry }, tool: "model_pull" };
      await invoke(services, call.route, { params: call.params, query: {}, body: call.body, caller, requestId: randomUUID(), tool: call.tool });
    },
  });
  const images = new ImagePulls({ box, env, now });
  Object.assign(services, { images });
  // The agent bridge's Hermes runs: what a previous hal0 left running is stopped and marked interrupted now.
  const runs = new RunService({ db, stateDir: options.stateDir, root: options.root, env, settings: () => box.lastSettings(), now, guest: options.guest === true, refused: (starter, profile) => queuedRunRefusal(tokens, starter, profile),
    // Hermes's own writes to a profile's skills/ during a run (skill_manage, its file tools): one audit row per skill, naming the run and who started it.
    onSkillChanges: (row, c) => {
      const caller = { kind: "system", agent: "hermes", private: false, via: "mcp" } as const;
      const rows: object[] = c.changes.map(({ skill, change }) => ({ skill, change }));
      if (c.more > 0) rows.push({ more: c.more });
      for (const what of rows) {
        audit.record({ call: { params: { run_id: row.id }, query: {}, body: { run_id: row.id, profile: row.profile, started_by: row.caller, ...what, complete: c.complete, overlapping: c.overlapping ?? [] }, caller, requestId: randomUUID(), tool: "hermes_skill_change" },
          route: { method: "POST", path: "/mcp/agents" }, outcome: "ok", durationMs: 0, tool: "hermes_skill_change", target: row.id });
      }
    },
  });
  Object.assign(services, { runs, bridgeRoutes: bridge.routes });
  let gateCache: { settings: unknown; config: ReturnType<typeof gateConfig> } | undefined;
  const gate = () => {
    const settings = box.lastSettings()?.server;
    if (gateCache === undefined || gateCache.settings !== settings) gateCache = { settings, config: gateConfig(settings ?? { allowed_hosts: [], allowed_origins: [] }, env) };
    return gateCache.config;
  };
  const version = packageVersion();
  const bundled: BundledServer[] = [
    { id: "hal0-admin", name: "hal0-admin", description: "The box as MCP tools: slots, models, profiles, stacks, settings, plans", path: "/mcp/admin", serverFor: async (caller, identity?: Identity) => adminServer(services, catalog, (await box.model()).policy, caller, version, identity) },
    { id: "hal0-memory", name: "hal0-memory", description: "Long-term memory for agents: search, recall, mental models, directives", path: "/mcp/memory", serverFor: async (caller) => memoryServer(services, (await box.model()).policy, caller, version) },
  ];
  // hal0-agents: listed (and introspected) only while [bridge] enabled; its profiles are the caller's bridge token's.
  const agentsBundled: BundledServer = { enabled: () => box.lastSettings()?.bridge.enabled ?? true, id: "hal0-agents", name: "hal0-agents", description: "Remote coding agents run and teach the box's Hermes (hal0 bridge admit)", path: "/mcp/agents", serverFor: async (caller) => agentsServer(services, bridge, (await box.model()).policy, caller, caller.kind === "operator" ? "all" : [], version) };
  const bridgeOn = async () => {
    await box.snapshot().catch(() => undefined); // a hand edit of hal0.toml is seen at the next request
    return box.lastSettings()?.bridge.enabled ?? true;
  };
  services.bundled = [...bundled, agentsBundled];
  const maxBody = () => maxBodyBytes(box.lastSettings());
  const refused = (mount: string) => (caller: Parameters<typeof auditRefusal>[2], err: Parameters<typeof auditRefusal>[3]) => auditRefusal(services, `${mount}:connect`, caller, err, { method: "POST", path: `/mcp/${mount}` });
  const mcp = {
    admin: new McpEndpoint(gate, auth, "mcp:admin", bundled[0]!.serverFor, refused("admin"), maxBody, { path: "/mcp/admin" }),
    memory: new McpEndpoint(gate, auth, "mcp:memory", bundled[1]!.serverFor, refused("memory"), maxBody, { path: "/mcp/memory" }),
    agents: new McpEndpoint(gate, auth, "mcp:agents", async (caller, identity) => agentsServer(services, bridge, (await box.model()).policy, caller, bridgeProfiles(identity), version), refused("agents"), maxBody, { mounted: bridgeOn, admit: requireBridge, path: "/mcp/agents" }),
  };
  // Turning the bridge off through the pipeline (settings_update, PUT /api/settings) closes its sessions at once.
  box.onCommit("bridge", (proposal) => (proposal.model.settings.bridge.enabled ? undefined : void mcp.agents.close()));
  // A committed change to policy.toml reaches the open MCP sessions at once (a hand edit, at each session's next request).
  box.onCommit("mcp-tools", async (proposal) => void (await Promise.all(Object.values(mcp).map((e) => e.syncTools(proposal.model.policy)))));
  const app = createHal0App({
    ...services,
    get sweeps() {
      return options.sweeps?.();
    },
    gate,
    logger: options.logger,
    mcp,
  });
  return {
    ...services, app, db, mcp, tokens,
    close: async () => {
      services.pulls.close();
      images.close();
      await runs.close();
      await services.stats.close();
      await Promise.all([mcp.admin.close(), mcp.memory.close(), mcp.agents.close()]);
      await memory.close();
      audit.flush();
      db.close();
      // hal0.db removed or replaced meanwhile: its old -wal would be replayed onto the file now there at the next open.
      if (dbFile.state() !== "same") dbFile.dropOrphans();
    },
  };
}
