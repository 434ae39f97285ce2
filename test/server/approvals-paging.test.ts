import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { adminClient, callTool } from "./mcp-helpers.js";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());

const COLS = "tool, route, args, dedup_key, caller, plan_id, base_revision, summary, effects, judged, state, created_at, expires_at";

/** One real request queued by an agent over MCP, then `n - 1` copies of its row (each its own id, one second apart, denied). */
async function queue(n: number): Promise<void> {
  const c = await adminClient(s.url, "tuner");
  const res = await callTool(c, "slot_edit", { name: "chat", tune: { ctx_size: 20480 } });
  await c.close();
  expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: "pending_approval" });
  const db = s.hal0.db;
  const insert = db.prepare(`INSERT INTO approvals (id, ${COLS}) SELECT ?, ${COLS.replace("state, created_at", "?, created_at + ?")} FROM approvals WHERE id = ?`);
  db.exec("BEGIN");
  for (let i = 1; i < n; i++) insert.run(`apr_copy${String(i).padStart(6, "0")}`, "denied", i, res.body.approval_id);
  db.exec("COMMIT");
}

describe("approval_list pages a long history", () => {
  it("a bare call answers at most 500 requests with total and more; limit, offset and state narrow it", async () => {
    await queue(620);
    const bare = await s.call("GET", "/api/agent/approvals");
    expect(bare.status, JSON.stringify(bare.body).slice(0, 300)).toBe(200);
    expect(bare.body.approvals).toHaveLength(500);
    expect(bare.body).toMatchObject({ total: 620, more: true });
    const bytes = Buffer.byteLength(JSON.stringify(bare.body));
    // Oldest first, as documented: the next page holds the rest, the newest last.
    const rest = await s.call("GET", "/api/agent/approvals?offset=500");
    expect(rest.body.approvals).toHaveLength(120);
    expect(rest.body).toMatchObject({ total: 620, more: false });
    expect(rest.body.approvals.at(-1).id).toBe("apr_copy000619");
    expect(bare.body.approvals.map((a: { id: string }) => a.id)).not.toContain("apr_copy000619");

    const few = await s.call("GET", "/api/agent/approvals?limit=10");
    expect(few.body.approvals).toHaveLength(10);
    expect(Buffer.byteLength(JSON.stringify(few.body))).toBeLessThan(bytes / 40);
    const pending = await s.call("GET", "/api/agent/approvals?state=pending");
    expect(pending.body).toMatchObject({ total: 1, more: false });
    expect(pending.body.approvals.map((a: { state: string }) => a.state)).toEqual(["pending"]);
    const denied = await s.call("GET", "/api/agent/approvals?state=denied&limit=5&offset=615");
    expect(denied.body).toMatchObject({ total: 619, more: false });
    expect(denied.body.approvals.map((a: { id: string }) => a.id)).toEqual(["apr_copy000616", "apr_copy000617", "apr_copy000618", "apr_copy000619"]);

    for (const q of ["limit=0", "limit=501", "offset=-1", "limit=x"]) {
      const bad = await s.call("GET", `/api/agent/approvals?${q}`);
      expect(bad.status, q).toBe(422);
      expect(bad.body.error.code, q).toBe("validation.invalid");
    }
  });
});
