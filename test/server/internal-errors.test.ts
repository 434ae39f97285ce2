import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/**
 * A fault that is not a coded refusal (a bug, a disk that fails under a
 * read) answers alike on REST and MCP: `system.internal` with a request id,
 * nothing of the error's own text; the error is in the server's log under
 * that id. The fault is injected: the box's model read throws.
 */
const FAULT = "EIO: i/o error, open '/var/lib/hal0-private/secret-path'";
let s: TestServer;
const logged: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  const sink = new Writable({ write: (chunk, _e, cb) => (logged.push(JSON.parse(String(chunk))), cb()) });
  s = await startTestServer({ extra: { logger: pino({ level: "info" }, sink) } });
});
afterAll(async () => s.close());

describe("an internal error", () => {
  it("is system.internal with a request id on REST, over MCP and at an MCP session's start (answered, not left open); the error only in the log under that id", async () => {
    const client = await adminClient(s.url, "hermes__ops");
    const real = s.hal0.box.model.bind(s.hal0.box);
    s.hal0.box.model = async () => {
      throw new Error(FAULT);
    };
    const ids: string[] = [];
    const internal = (body: any) => {
      expect(body.error.code).toBe("system.internal");
      expect(JSON.stringify(body)).not.toContain("secret-path");
      const id = body.error.details.request_id as string;
      expect(body.error.message).toBe(`internal error (request ${id})`);
      ids.push(id);
    };
    try {
      const rest = await s.call("GET", "/api/models");
      expect(rest.status).toBe(500);
      internal(rest.body);

      const mcp = await callTool(client, "model_list", {});
      expect(mcp.isError).toBe(true);
      internal(mcp.body);

      // A new session's tools come from the policy, which the fault keeps from being read: a 500, within the test's time.
      const init = await fetch(`${s.url}/mcp/admin`, {
        method: "POST",
        signal: AbortSignal.timeout(5000),
        headers: { authorization: `Bearer ${s.agentToken("hermes__ops")}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } } }),
      });
      expect(init.status).toBe(500);
      internal(await init.json());
    } finally {
      s.hal0.box.model = real;
      await client.close();
    }
    for (const id of ids) {
      const line = logged.find((l) => l.reqId === id);
      expect(line, id).toBeDefined();
      expect(JSON.stringify(line)).toContain("secret-path");
    }
  });
});

describe("a commit's after-effect that fails", () => {
  it("leaves the commit standing and committed in its reply, and is in the server's log with what failed", async () => {
    let fail = true;
    s.hal0.box.onCommit("test_fault", () => {
      if (fail) throw new Error("EIO: the after-effect's own write failed");
    });
    try {
      const made = await s.call("POST", "/api/stacks", { body: { slug: "after", name: "After", mode: "replace", slot: [{ slot: "utility" }] } });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      expect((await s.call("GET", "/api/stacks/after")).status).toBe(200);
      const line = logged.find((l) => l.after === "test_fault");
      expect(line).toMatchObject({ level: 50, msg: "the commit's after-effect test_fault failed; the files it wrote stand" });
      expect(JSON.stringify(line)).toContain("the after-effect's own write failed");
    } finally {
      fail = false;
    }
  });
});

