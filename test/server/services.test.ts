import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { driverFor } from "../../cli/box.js";
import { main } from "../../cli/index.js";
import { ProcessDriver } from "../../reconciler/index.js";
import { serve, serveLogger, type Serving } from "../../server/serve.js";
import { captureIo, healthWithin } from "../cli/helpers.js";
import { freePort, PROJECT, RUNNER, until } from "../reconciler/process-helpers.js";
import { agentTokenFor, httpCall, registerServer, startServerWithDeadEngine, startTestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";
import { connect, createServer as createSocketServer, type Server as SocketServer } from "node:net";
import { once } from "node:events";
import { DOCKER_HOST, dockerEngine } from "../reconciler/docker-helpers.js";

/**
 * service_list / service_health / service_action on a served box (serve():
 * the sweep loop runs in process) of two slots on the stand-in runner: `one`
 * enabled, `two` disabled, each on a free port.
 */
const base = mkdtempSync(join(tmpdir(), "hal0-services-"));
const config = join(base, "box");
const state = join(base, "state");
let serving: Serving;
let unregister: () => void;
let operator: Record<string, string>;
let ports: { one: number; two: number };

const call = (method: string, path: string, body?: unknown, headers = operator) => httpCall(serving.url, method, path, { body, headers });
const services = async () => (await call("GET", "/api/services")).body.services as any[];
const service = async (id: string) => (await services()).find((s) => s.id === id);

beforeAll(async () => {
  ports = { one: await freePort(), two: await freePort() };
  mkdirSync(join(config, "slots"), { recursive: true });
  copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
  writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n\n[reconcile]\ninterval_s = 3600\n`);
  writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
  writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
  for (const [name, enabled] of [["one", true], ["two", false]] as const) {
    writeFileSync(join(config, `slots/${name}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${ports[name]}\ntype = "llm"\nenabled = ${enabled}\n\n[placement]\ndevice = "cpu"\n`);
  }
  serving = await serve({ root: config, stateDir: state, port: 0, driverFor: async () => new ProcessDriver({ stateDir: state }), logger: serveLogger("silent"), env: {} });
  unregister = registerServer(serving.url, serving.server);
  operator = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
  expect(await healthWithin(ports.one, 20_000)).toBe(200);
}, 40_000);

afterAll(async () => {
  unregister?.();
  await serving?.close();
  await main(["down", "--config", config, "--state", state], captureIo());
  rmSync(base, { recursive: true, force: true });
});

describe("services on a served box", () => {
  it("lists each service with its state, since, last error, allowed actions and their cost from the plan", async () => {
    const all = await services();
    expect(all.map((s) => s.id)).toEqual(["sweep-loop", "memory", "api", "slot.one", "slot.two"]);
    const loop = all[0];
    expect(loop).toMatchObject({ kind: "sweep_loop", state: "running", last_error: null, actions: [{ action: "restart", cost: { downtime: false } }] });
    expect(Date.parse(loop.since)).toBeGreaterThan(0);
    expect(all[2]).toMatchObject({ kind: "api", state: "running", actions: [] });
    const one = all[3];
    expect(one).toMatchObject({ kind: "slot", state: "running", last_error: null, detail: { enabled: true, port: ports.one } });
    expect(Date.parse(one.since)).toBeGreaterThan(0);
    // Stopping or restarting a running slot takes it down for a while: the planner's delete / replace say so.
    expect(one.actions).toEqual([
      { action: "stop", cost: expect.objectContaining({ tool: "slot_unload", downtime: true, destructive: true, plan: { action: "delete", reason: "disabled" } }) },
      { action: "restart", cost: expect.objectContaining({ tool: "slot_restart", downtime: true, plan: { action: "replace", reason: "restart" } }) },
    ]);
    expect(all[4]).toMatchObject({ state: "disabled", since: null, actions: [{ action: "start", cost: { tool: "slot_load", downtime: false, destructive: false, plan: { action: "create", reason: "new" } } }] });

    const health = await call("GET", "/api/services/health");
    expect(health.status).toBe(200);
    expect(health.body.services).toEqual(expect.arrayContaining([
      expect.objectContaining({ id: "slot.one", health: "ok" }),
      expect.objectContaining({ id: "slot.two", health: "off" }),
      expect.objectContaining({ id: "api", health: "ok" }),
      expect.objectContaining({ id: "memory", health: "ok" }),
    ]));
  });

  it("refuses an unknown service and an action it does not allow, with codes", async () => {
    const unknown = await call("POST", "/api/services/nope/action", { action: "restart" });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: "service.not_found", details: { known: ["sweep-loop", "memory", "api", "slot.one", "slot.two"] } });
    const api = await call("POST", "/api/services/api/action", { action: "restart" });
    expect(api.status).toBe(409);
    expect(api.body.error).toMatchObject({ code: "service.action_not_allowed", details: { allowed: [] } });
    const started = await call("POST", "/api/services/slot.one/action", { action: "start" });
    expect(started.body.error).toMatchObject({ code: "service.action_not_allowed", details: { allowed: ["stop", "restart"] } });
    const bad = await call("POST", "/api/services/slot.one/action", { action: "reboot" });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe("validation.invalid");
  });

  it("restarts the sweep loop for an agent over MCP only once an operator approves it over REST; a sweep runs after", async () => {
    const before = await service("sweep-loop");
    const client = await adminClient(serving.url, "hermes__ops");
    try {
      // Reading is autonomous for an agent: service_list and service_health answer at once.
      const listed = await callTool(client, "service_list", {});
      expect(listed.body).toMatchObject({ count: 5, services: expect.arrayContaining([expect.objectContaining({ id: "sweep-loop", state: "running" })]) });
      expect((await callTool(client, "service_health", {})).body.services.find((x: any) => x.id === "slot.one")).toMatchObject({ health: "ok" });
      const queued = await callTool(client, "service_action", { service_id: "sweep-loop", action: "restart" });
      expect(queued.body, JSON.stringify(queued.body)).toMatchObject({ status: "pending_approval" });
      // Nothing happened yet.
      expect((await service("sweep-loop")).since).toBe(before.since);
      // The agent may not decide its own request.
      const own = await call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`, undefined, { authorization: `Bearer ${agentTokenFor(serving.url, "hermes__ops")}` });
      expect(own.body.error.code).toBe("auth.operator_required");
      const approved = await call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
      expect(approved.body.approval, JSON.stringify(approved.body)).toMatchObject({ state: "executed", decided_by: "owner", result: { id: "sweep-loop", action: "restart", state: "running", since_before: before.since } });
      const since = approved.body.approval.result.since as string;
      expect(Date.parse(since)).toBeGreaterThan(Date.parse(before.since));
      let after: any;
      await until(async () => {
        after = await service("sweep-loop");
        return after.detail.sweeps > before.detail.sweeps && Date.parse(after.detail.last_sweep.at) >= Date.parse(since);
      }, 10_000);
      expect(after).toMatchObject({ state: "running", since, detail: { restarts: before.detail.restarts + 1 } });
      const rows = (await call("GET", "/api/activity?actor=agent:hermes__ops")).body.items as any[];
      expect(rows.map((r) => `${r.route} ${r.outcome}`)).toEqual(expect.arrayContaining(["POST /api/services/{service_id}/action ok", "POST /api/services/{service_id}/action pending_approval"]));
    } finally {
      await client.close();
    }
  }, 30_000);

  it("stops and starts a slot as an operator through its unload and load routes; the sweep carries them out", async () => {
    const stopped = await call("POST", "/api/services/slot.one/action", { action: "stop" });
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(200);
    expect(stopped.body).toMatchObject({ id: "slot.one", action: "stop", tool: "slot_unload", result: { name: "one", committed: true, files: ["slots/one.toml"] } });
    expect(stopped.body.result.plan.changes.find((c: any) => c.address === "slot.one")).toMatchObject({ action: "delete", downtime: true });
    expect(readFileSync(join(config, "slots/one.toml"), "utf8")).toMatch(/enabled = false/);
    await until(async () => (await service("slot.one")).state === "disabled", 15_000);
    expect(await healthWithin(ports.one, 300)).not.toBe(200);

    const started = await call("POST", "/api/services/slot.one/action", { action: "start" });
    expect(started.body).toMatchObject({ tool: "slot_load", result: { committed: true } });
    expect(await healthWithin(ports.one, 20_000)).toBe(200);
    await until(async () => (await service("slot.one")).state === "running", 5000);
    // Audited as the slot routes themselves, beside the service_action row.
    const rows = (await call("GET", "/api/activity?actor=operator:owner")).body.items as any[];
    expect(rows.map((r) => r.route)).toEqual(expect.arrayContaining(["POST /api/slots/{name}/unload", "POST /api/slots/{name}/load", "POST /api/services/{service_id}/action"]));
  }, 60_000);
});

describe("services on a served box whose config folder is emptied", () => {
  it("a sweep refused as config.empty makes the sweep loop degraded, naming why, while the slot runs on; the server reads the last good tree and writes nothing; the files back, it is ok again", async () => {
    const aside = join(base, "box-aside");
    rmSync(aside, { recursive: true, force: true });
    renameSync(config, aside);
    mkdirSync(config);
    try {
      await call("POST", "/api/services/sweep-loop/action", { action: "restart" });
      let loop: any;
      await until(async () => {
        loop = (await call("GET", "/api/services/health")).body.services.find((x: any) => x.id === "sweep-loop");
        return loop.health === "degraded";
      }, 10_000);
      expect(loop.detail).toMatch(/: failed \(config\.empty: .* holds no \.toml file/);
      expect(await healthWithin(ports.one, 2000)).toBe(200);
      // The server reads it as the sweep does: not an empty box but the last tree that compiled, and it writes nothing there.
      // (a read within READ_WINDOW_MS of the last may still answer from the tree it read)
      await until(async () => (await call("GET", "/api/settings")).body._hal0.tree_error?.code === "config.empty", 5000);
      expect((await call("GET", "/api/slots")).body.slots.map((x: any) => x.name)).toEqual(["one", "two"]);
      const write = await call("POST", "/api/plans", { edits: [{ file: "policy.toml", op: "text", text: "[tiers]\n" }], summary: "into the empty folder" });
      expect([write.status, write.body.error?.code]).toEqual([409, "config.empty"]);
      expect(readdirSync(config)).toEqual([]);
    } finally {
      rmSync(config, { recursive: true, force: true });
      renameSync(aside, config);
    }
    await call("POST", "/api/services/sweep-loop/action", { action: "restart" });
    await until(async () => (await call("GET", "/api/services/health")).body.services.find((x: any) => x.id === "sweep-loop").health === "ok", 10_000);
  }, 30_000);
});

describe("services on a server without a sweep loop", () => {
  it("lists the sweep loop as not_running and refuses its restart; restarts the memory engine in process", async () => {
    const s = await startTestServer();
    try {
      const list = (await s.call("GET", "/api/services")).body.services as any[];
      expect(list.find((x) => x.id === "sweep-loop")).toMatchObject({ state: "not_running", since: null, actions: [] });
      const refused = await s.call("POST", "/api/services/sweep-loop/action", { body: { action: "restart" } });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ code: "service.not_running" });

      expect(list.find((x) => x.id === "memory")).toMatchObject({ state: "idle", since: null });
      s.hal0.memory.engine();
      const opened = (await s.call("GET", "/api/services")).body.services.find((x: any) => x.id === "memory");
      expect(opened).toMatchObject({ state: "running", detail: { engine: "embedded" }, actions: [{ action: "restart" }] });
      const first = s.hal0.memory.opened();
      await new Promise((r) => setTimeout(r, 5));
      const restarted = await s.call("POST", "/api/services/memory/action", { body: { action: "restart" } });
      expect(restarted.body, JSON.stringify(restarted.body)).toMatchObject({ id: "memory", action: "restart", state: "running" });
      expect(s.hal0.memory.opened()).not.toBe(first);
      expect(Date.parse(restarted.body.since)).toBeGreaterThan(Date.parse(opened.since));
    } finally {
      await s.close();
    }
  });
});

describe("a slot's stop through service_action, as an agent", () => {
  it("is judged by what it changes, as slot_unload is: a pinned slot's stop without force is refused before a card is queued, an effect the agent's policy blocks too; with force it is queued, its card naming the change", async () => {
    const s = await startTestServer();
    try {
      const direct = await s.call("POST", "/api/slots/chat/unload", { as: "agent:edgar" });
      expect([direct.status, direct.body.error?.code]).toEqual([409, "slot.pinned"]);
      const viaService = await s.call("POST", "/api/services/slot.chat/action", { body: { action: "stop" }, as: "agent:edgar" });
      expect([viaService.status, viaService.body.error?.code], JSON.stringify(viaService.body)).toEqual([409, "slot.pinned"]);
      expect((await s.call("GET", "/api/agent/approvals")).body.approvals).toEqual([]);

      // The agent's own policy blocks unloading: the stop is refused up front, as the same change is through slot_edit.
      const policy = join(s.config, "policy.toml");
      writeFileSync(policy, `${readFileSync(policy, "utf8")}\n[agents.ruth]\nblocked = ["slot_unload"]\n`);
      await new Promise((r) => setTimeout(r, 1100)); // past the read window
      const blocked = await s.call("POST", "/api/services/slot.chat/action", { body: { action: "stop", force: true }, as: "agent:ruth" });
      expect([blocked.status, blocked.body.error?.code], JSON.stringify(blocked.body)).toEqual([403, "mcp.tool_not_allowed"]);
      expect((await s.call("GET", "/api/agent/approvals")).body.approvals).toEqual([]);

      const forced = await s.call("POST", "/api/services/slot.chat/action", { body: { action: "stop", force: true }, as: "agent:edgar" });
      expect(forced.body, JSON.stringify(forced.body)).toMatchObject({ status: "pending_approval" });
      const [card] = (await s.call("GET", "/api/agent/approvals")).body.approvals as any[];
      expect(card.effects.join("\n")).toMatch(/chat/);
      const approved = await s.call("POST", `/api/agent/approvals/${forced.body.approval_id}/approve`);
      expect(approved.body.approval, JSON.stringify(approved.body)).toMatchObject({ state: "executed", result: { id: "slot.chat", action: "stop", tool: "slot_unload", result: { committed: true } } });
      expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/^enabled = false$/m);
    } finally {
      await s.close();
    }
  });
});

describe("a slot's restart through service_action, as an agent", () => {
  it("meets slot_restart's own tier: blocked for the agent, it is refused before a card is queued, and a card queued before the block fails when approved", async () => {
    const s = await startTestServer();
    try {
      // Queued while nothing blocks it…
      const early = await s.call("POST", "/api/services/slot.utility/action", { body: { action: "restart" }, as: "agent:ruth" });
      expect(early.body, JSON.stringify(early.body)).toMatchObject({ status: "pending_approval" });
      const policy = join(s.config, "policy.toml");
      writeFileSync(policy, `${readFileSync(policy, "utf8")}\n[agents.ruth]\nblocked = ["slot_restart"]\n`);
      await new Promise((r) => setTimeout(r, 1100)); // past the read window
      const direct = await s.call("POST", "/api/slots/chat/restart", { as: "agent:ruth" });
      expect([direct.status, direct.body.error?.code], JSON.stringify(direct.body)).toEqual([403, "mcp.tool_not_allowed"]);
      const viaService = await s.call("POST", "/api/services/slot.chat/action", { body: { action: "restart" }, as: "agent:ruth" });
      expect([viaService.status, viaService.body.error?.code], JSON.stringify(viaService.body)).toEqual([403, "mcp.tool_not_allowed"]);
      // The very call queued before the block, sent again, is refused as a fresh one is: not handed the pending request's id.
      const again = await s.call("POST", "/api/services/slot.utility/action", { body: { action: "restart" }, as: "agent:ruth" });
      expect([again.status, again.body.error?.code], JSON.stringify(again.body)).toEqual([403, "mcp.tool_not_allowed"]);
      expect((await s.call("GET", "/api/agent/approvals?state=pending")).body.approvals.map((a: any) => a.id)).toEqual([early.body.approval_id]);
      // …and blocked since: approving it runs nothing (blocked holds even with an approval).
      const approved = await s.call("POST", `/api/agent/approvals/${early.body.approval_id}/approve`);
      expect(approved.body.approval, JSON.stringify(approved.body)).toMatchObject({ state: "failed", error: { code: "mcp.tool_not_allowed" } });
      const restarts = (await s.call("GET", "/api/activity?route=POST%20/api/slots/%7Bname%7D/restart")).body.items as any[];
      expect(restarts.filter((r) => r.kind === "approval")).toEqual([]);
    } finally {
      await s.close();
    }
  });
});

describe("services when the runtime does not answer", () => {
  it("the docker engine down: slot reads are 503 runtime.unavailable (coded, not 500); the services list and health and the stats still answer, each slot unknown / down with the reason", async () => {
    const { s, dead } = await startServerWithDeadEngine();
    try {
      for (const path of ["/api/slots", "/api/slots/chat", "/api/slots/chat/state", "/api/ports"]) {
        const read = await s.call("GET", path);
        expect(read.status, path).toBe(503);
        expect(read.body.error.code, path).toBe("runtime.unavailable");
        expect(read.body.error.message, path).toContain(`the engine at ${dead} does not answer`);
      }
      const list = await s.call("GET", "/api/services");
      expect(list.status).toBe(200);
      const chat = list.body.services.find((x: any) => x.id === "slot.chat");
      expect(chat).toMatchObject({ state: "unknown", actions: [], last_error: { code: "runtime.unavailable" } });
      const health = await s.call("GET", "/api/services/health");
      expect(health.status).toBe(200);
      expect(health.body.ok).toBe(false);
      expect(health.body.services.find((x: any) => x.id === "slot.chat")).toMatchObject({ health: "down" });
      expect(health.body.services.find((x: any) => x.id === "slot.chat").detail).toMatch(/^unknown: runtime\.unavailable: /);
      expect(health.body.services.find((x: any) => x.id === "slot.vision")).toMatchObject({ health: "off" });
      // The stats too: each slot unavailable with the reason, the host's figures served (stats say why, never fail).
      const stats = await s.call("GET", "/api/stats/slots");
      expect(stats.status, JSON.stringify(stats.body)).toBe(200);
      expect(stats.body.slots.find((x: any) => x.name === "chat")).toMatchObject({ status: "unknown", available: false, reason: expect.stringContaining(`the runtime does not answer: [slots] runtime = "docker": the engine at ${dead}`) });
      const overview = await s.call("GET", "/api/stats");
      expect(overview.status, JSON.stringify(overview.body)).toBe(200);
      expect(overview.body.slots).toMatchObject({ count: stats.body.count, scraped: 0, by_status: { unknown: stats.body.count } });
      expect(overview.body.system.memory.available).toBe(true);
    } finally {
      await s.close();
    }
  });

  it("the docker engine down: an agent's write is refused 503 runtime.unavailable over REST and MCP (coded, not 500), the REST call audited, and nothing is queued", async () => {
    const { s, dead } = await startServerWithDeadEngine();
    try {
      const rest = await s.call("PUT", "/api/slots/coder/config", { body: { tune: { ctx_size: 4096 } }, as: "agent:edgar" });
      expect(rest.status, JSON.stringify(rest.body)).toBe(503);
      expect(rest.body.error.code).toBe("runtime.unavailable");
      expect(rest.body.error.message).toContain(`the engine at ${dead} does not answer`);
      const client = await adminClient(s.url, "edgar");
      try {
        const mcp = await callTool(client, "slot_edit", { name: "coder", tune: { ctx_size: 4096 } });
        expect(mcp.isError).toBe(true);
        expect(mcp.body.error.code, JSON.stringify(mcp.body)).toBe("runtime.unavailable");
      } finally {
        await client.close();
      }
      expect((await s.call("GET", "/api/agent/approvals")).body.approvals).toEqual([]);
      const audit = await s.call("GET", "/api/activity?limit=5");
      expect(audit.body.items.find((r: any) => r.actor === "agent:edgar" && r.route === "PUT /api/slots/{name}/config")).toMatchObject({ outcome: "error", error_code: "runtime.unavailable" });
    } finally {
      await s.close();
    }
  });
});

const ENGINE_SUITE = "slot reads when the docker engine goes away under a served box (real Docker engine)";
const engine = await dockerEngine(ENGINE_SUITE);

describe.skipIf(engine === undefined)(ENGINE_SUITE, () => {
  /** A socket of the test's own that forwards to the engine: closed and removed, the engine is gone for hal0. */
  async function engineDoor(sock: string): Promise<SocketServer> {
    const target = DOCKER_HOST.replace(/^unix:\/\//, "");
    const door = createSocketServer((c) => {
      const u = connect(target);
      c.pipe(u).pipe(c);
      c.on("error", () => u.destroy());
      u.on("error", () => c.destroy());
    }).listen(sock);
    await once(door, "listening");
    return door;
  }
  const shut = (door: SocketServer) => new Promise<void>((resolve) => door.close(() => resolve()));
  const past = () => new Promise((r) => setTimeout(r, 1100)); // past the read window

  it("the engine gone after the runtime was reached: 503 runtime.unavailable (not a 500); back, the reads answer again", async () => {
    const sock = join(mkdtempSync(join(tmpdir(), "hal0-door-")), "engine.sock");
    let door = await engineDoor(sock);
    const s = await startTestServer({ extra: { driverFor: (model) => driverFor(model, tmpdir(), {}) } });
    try {
      const settings = join(s.config, "hal0.toml");
      writeFileSync(settings, readFileSync(settings, "utf8").replace(/^runtime = "process"$/m, `runtime = "docker"\ndocker_host = "unix://${sock}"`));
      await past();
      expect((await s.call("GET", "/api/slots")).status).toBe(200);
      await shut(door);
      await past();
      for (const path of ["/api/slots", "/api/slots/chat"]) {
        const read = await s.call("GET", path);
        expect(read.status, path).toBe(503);
        expect(read.body.error.code, path).toBe("runtime.unavailable");
        expect(read.body.error.message, path).toContain(`the engine at unix://${sock} does not answer`);
      }
      // The stats say why, never fail: each slot unknown with the reason.
      const stats = await s.call("GET", "/api/stats");
      expect(stats.status, JSON.stringify(stats.body)).toBe(200);
      expect(stats.body.slots.by_status).toMatchObject({ unknown: stats.body.slots.count });
      door = await engineDoor(sock);
      await past();
      expect((await s.call("GET", "/api/slots")).status).toBe(200);
    } finally {
      await shut(door);
      await s.close();
    }
  });

  it("the engine down when the runtime is first reached, then up: the reads answer (the failure is not kept)", async () => {
    const sock = join(mkdtempSync(join(tmpdir(), "hal0-door-")), "engine.sock");
    const s = await startTestServer({ extra: { driverFor: (model) => driverFor(model, tmpdir(), {}) } });
    let door: SocketServer | undefined;
    try {
      const settings = join(s.config, "hal0.toml");
      writeFileSync(settings, readFileSync(settings, "utf8").replace(/^runtime = "process"$/m, `runtime = "docker"\ndocker_host = "unix://${sock}"`));
      await past();
      expect((await s.call("GET", "/api/slots")).body.error?.code).toBe("runtime.unavailable");
      door = await engineDoor(sock);
      await past();
      const read = await s.call("GET", "/api/slots");
      expect(read.status, JSON.stringify(read.body.error)).toBe(200);
    } finally {
      if (door) await shut(door);
      await s.close();
    }
  });
});
