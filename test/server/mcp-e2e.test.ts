import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { main } from "../../cli/index.js";
import { ProcessDriver } from "../../reconciler/index.js";
import { createHal0Server } from "../../server/hal0-server.js";
import { catalogProblems } from "../../server/mcp/catalog.js";
import { defineRoute } from "../../server/route.js";
import { ROUTES } from "../../server/routes/index.js";
import { serve, serveLogger } from "../../server/serve.js";
import { captureIo, healthWithin } from "../cli/helpers.js";
import { freePort, PROJECT, RUNNER } from "../reconciler/process-helpers.js";
import { agentTokenFor, httpCall, registerServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

describe("a gated slot_create over MCP, approved over REST, on a served box", () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-mcp-e2e-"));
  const config = join(base, "box");
  const state = join(base, "state");
  afterAll(async () => {
    await main(["down", "--config", config, "--state", state], captureIo());
  });

  it("writes the new slot file and the sweep brings the slot up", async () => {
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
    const serving = await serve({ root: config, stateDir: state, port: 0, driverFor: async () => new ProcessDriver({ stateDir: state }), logger: serveLogger("silent"), env: {} });
    try {
      const port = await freePort();
      const unregister = registerServer(serving.url, serving.server);
      const operator = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
      const client = await adminClient(serving.url, "hermes__ops");
      const queued = await callTool(client, "slot_create", { name: "fresh", profile: "fake", model: "tiny", port, placement: { device: "cpu" } });
      expect(queued.body, JSON.stringify(queued.body)).toMatchObject({ status: "pending_approval" });
      expect(queued.body.detail).toContain("+ slot.fresh");
      expect(existsSync(join(config, "slots/fresh.toml"))).toBe(false);
      // The agent cannot approve its own request over REST; the operator can.
      const own = await httpCall(serving.url, "POST", `/api/agent/approvals/${queued.body.approval_id}/approve`, { headers: { authorization: `Bearer ${agentTokenFor(serving.url, "hermes__ops")}` } });
      expect(own.status).toBe(403);
      expect(own.body.error.code).toBe("auth.operator_required");
      const approved = await httpCall(serving.url, "POST", `/api/agent/approvals/${queued.body.approval_id}/approve`, { headers: operator });
      expect(approved.body.approval.state, JSON.stringify(approved.body)).toBe("executed");
      expect(readFileSync(join(config, "slots/fresh.toml"), "utf8")).toMatch(/profile = "fake"/);
      expect(await healthWithin(port, 20_000)).toBe(200);
      const rows = (await httpCall(serving.url, "GET", "/api/activity?actor=agent:hermes__ops&kind=approval", { headers: operator })).body.items;
      expect(rows[0]).toMatchObject({ route: "POST /api/slots", outcome: "ok", kind: "approval" });
      expect(approved.body.approval.decided_by).toBe("owner");
      await client.close();
      unregister();
    } finally {
      await serving.close();
    }
  }, 60_000);
});

describe("the tool catalog's startup check", () => {
  it("refuses to build a server whose route table disagrees with the tiers", () => {
    const wrong = defineRoute({ method: "GET", path: "/api/other", kind: "read", tools: ["slot_list"], summary: "slot_list on the wrong route", handle: () => ({}) });
    const untiered = defineRoute({ method: "GET", path: "/api/new", kind: "read", tools: ["brand_new_tool"], params: z.strictObject({}), summary: "a tool in no tier", handle: () => ({}) });
    expect(catalogProblems(ROUTES)).toEqual([]);
    const problems = catalogProblems([...ROUTES, wrong, untiered]);
    expect(problems).toEqual([
      "brand_new_tool (alias of GET /api/new) has no tier",
      "slot_list aliases GET /api/other, but its tier table names GET /api/slots, which no route serves as slot_list",
    ]);
    const dir = mkdtempSync(join(tmpdir(), "hal0-catalog-"));
    expect(() => createHal0Server({ root: join(PROJECT, "fixtures/box"), stateDir: dir, driverFor: async () => new ProcessDriver({ stateDir: dir }), routes: [...ROUTES, wrong] }))
      .toThrow(expect.objectContaining({ code: "mcp.catalog_invalid" }));
  });
});
