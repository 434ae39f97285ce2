import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AUTONOMOUS_READ_TOOLS } from "../../schema/data/seed-tiers.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/** The in-process host probes over MCP (the SDK's client, as an agent): autonomous reads, no REST route. */
describe("in-process host probes over MCP", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s.close());

  it("each answers in its seed tier (autonomous-read) with this host's facts or {available: false, reason}; none is a REST route", async () => {
    const c = await adminClient(s.url, "hermes__coder");
    for (const [tool, args] of [["gpu_target_version", {}], ["npu_status", {}], ["env_report", {}], ["model_store_probe", { path: s.config }]] as const) {
      expect(AUTONOMOUS_READ_TOOLS.find((t) => t.tool === tool)?.route, tool).toBe("in-process");
      const res = await callTool(c, tool, args);
      expect(res.isError, `${tool}: ${JSON.stringify(res.body)}`).toBe(false);
      expect(res.body.status, tool).not.toBe("pending_approval");
      if (tool === "env_report") expect(res.body.runtimes.node).toBe(process.version);
      else if (res.body.available === false) expect(res.body.reason, tool).toMatch(/\S/);
      else expect(res.body.available, tool).toBe(true);
      expect([404, 405], tool).toContain((await s.call("GET", `/in-process/${tool}`)).status);
    }
    expect((await callTool(c, "model_store_probe", { path: s.config })).body).toMatchObject({ available: true, exists: true, writable: true });
    await c.close();
  });
});
