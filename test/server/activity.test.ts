import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { redact } from "../../server/redact.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { adminClient, callTool } from "./mcp-helpers.js";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());

const edit = (value: unknown) => ({ edits: [{ file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value }] });

describe("/api/activity's since and until", () => {
  it("are instants, whatever their offset or fraction: the rows of one instant in any time zone are the same rows", async () => {
    let now = Date.parse("2026-12-07T12:00:00.000Z");
    const t = await startTestServer({ extra: { now: () => now } });
    try {
      for (const at of ["2026-12-07T12:00:00.000Z", "2026-12-07T12:00:00.500Z", "2026-12-07T12:30:00.000Z"]) {
        now = Date.parse(at);
        expect((await t.call("POST", "/api/plans", { body: edit(20480) })).status).toBe(201);
      }
      const times = async (query: string) => {
        const r = await t.call("GET", `/api/activity?${query}`);
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        return r.body.items.map((i: { ts: string }) => i.ts).sort();
      };
      const all = ["2026-12-07T12:00:00.000Z", "2026-12-07T12:00:00.500Z", "2026-12-07T12:30:00.000Z"];
      expect(await times("since=2026-12-07T12:00:00Z")).toEqual(all);
      expect(await times(`since=${encodeURIComponent("2026-12-08T02:00:00+14:00")}`)).toEqual(all); // Kiritimati
      expect(await times(`since=${encodeURIComponent("2026-12-07T08:45:00-03:30")}`)).toEqual(all.slice(2)); // St. John's, 12:15 UTC
      expect(await times(`until=${encodeURIComponent("2026-12-07T08:30:00.600-03:30")}`)).toEqual(all.slice(0, 2));
      const exported = await t.call("GET", `/api/activity/export?since=${encodeURIComponent("2026-12-07T08:45:00-03:30")}`);
      expect(String(exported.body).trim().split("\n")).toHaveLength(1);
    } finally {
      await t.close();
    }
  });
});

describe("audit and /api/activity", () => {
  it("records every write and action with the authenticated actor, route, outcome, code, plan and request id; reads are not audited", async () => {
    await s.call("GET", "/api/plans");
    const ok = await s.call("POST", "/api/plans", { body: edit(20480), as: "agent:hermes__coder", headers: { "x-request-id": "req-1" } });
    expect(ok.status).toBe(201);
    await s.call("POST", `/api/plans/${ok.body.id}/apply`);
    await s.call("POST", "/api/plans/pln_missing/apply");
    const { body } = await s.call("GET", "/api/activity");
    expect(body.total).toBe(3);
    const [missing, applied, planned] = body.items;
    expect(planned).toMatchObject({ actor: "agent:hermes__coder", kind: "rest", route: "POST /api/plans", outcome: "ok", request_id: "req-1", claimed: null, peer: "127.0.0.1" });
    expect(planned.args.edits[0].value).toBe(20480);
    expect(applied).toMatchObject({ actor: "operator:owner", route: "POST /api/plans/{id}/apply", target: ok.body.id, outcome: "ok" });
    expect(missing).toMatchObject({ outcome: "error", error_code: "plan.not_found" });
    expect(typeof planned.duration_ms).toBe("number");
  });

  it("records refused calls too: anonymous writes, a spoofed X-hal0-Agent, a bad token, each with the actor the credential proved and the claimed header", async () => {
    expect((await s.call("POST", "/api/plans", { body: edit(1), as: "anonymous", headers: { "x-hal0-agent": "hermes__coder" } })).status).toBe(401);
    const spoof = await s.call("POST", "/api/plans", { body: edit(2), as: "agent:hermes__ops", headers: { "x-hal0-agent": "hermes__coder" } });
    expect(spoof.status).toBe(403);
    expect(spoof.body.error.code).toBe("auth.identity_mismatch");
    expect((await s.call("POST", "/api/plans", { body: edit(3), headers: { authorization: "Bearer hal0_ag_notatokenhal0notatokenhal0notatok" } })).body.error.code).toBe("auth.invalid_token");
    const rows = (await s.call("GET", "/api/activity?outcome=error")).body.items;
    expect(rows.map((r: any) => [r.actor, r.error_code, r.claimed])).toEqual([
      ["anonymous", "auth.invalid_token", null],
      ["agent:hermes__ops", "auth.identity_mismatch", "hermes__coder"],
      ["anonymous", "auth.required", "hermes__coder"],
    ]);
    expect(rows.every((r: any) => r.peer === "127.0.0.1" && r.route === "POST /api/plans")).toBe(true);
  });

  it("keeps no token a caller pasted by mistake into a path or X-hal0-Agent: the row's target and claimed hold it redacted, in the table too", async () => {
    const secret = s.agentToken("hermes__ops");
    expect((await s.call("POST", `/api/auth/tokens/${secret}/revoke`)).body.error.code).toBe("auth.token_not_found");
    expect((await s.call("POST", "/api/plans", { body: edit(1), headers: { "x-hal0-agent": secret } })).body.error.code).toBe("auth.identity_mismatch");
    await s.call("GET", "/api/activity");
    const stored = s.hal0.db.prepare("SELECT target, claimed FROM audit").all() as Array<{ target: string | null; claimed: string | null }>;
    expect(JSON.stringify(stored)).not.toContain(secret);
    expect(stored.map((r) => r.target)).toContain("[redacted]");
    expect(stored.map((r) => r.claimed)).toContain("[redacted]");
  });

  it("filters and pages, and exports JSON lines oldest first", async () => {
    for (let i = 0; i < 3; i++) await s.call("POST", "/api/plans", { body: edit(20000 + i), as: i === 1 ? "agent:alice" : "agent:bob" });
    await s.call("POST", "/api/plans/pln_x/apply");
    expect((await s.call("GET", "/api/activity?actor=agent:bob")).body.total).toBe(2);
    expect((await s.call("GET", "/api/activity?outcome=error")).body.items.map((r: any) => r.error_code)).toEqual(["plan.not_found"]);
    const page = await s.call("GET", "/api/activity?limit=2&offset=1");
    expect(page.body).toMatchObject({ total: 4, limit: 2, offset: 1 });
    expect(page.body.items).toHaveLength(2);
    expect((await s.call("GET", "/api/activity?limit=0")).body.error.code).toBe("validation.invalid");
    const exported = await s.call("GET", "/api/activity/export?actor=agent:bob");
    expect(exported.headers.get("content-type")).toContain("application/x-ndjson");
    const lines = (exported.body as string).trim().split("\n").map((l) => JSON.parse(l));
    expect(lines.map((l) => l.args.edits[0].value)).toEqual([20000, 20002]);
  });

  it("redacts secrets in audit args", async () => {
    const secretText = 'auth_value_env = "X"\n# Authorization: Bearer abcdefghijklmnop and API_KEY=sk-abcdefghijklmnopqrstuv\n';
    await s.call("POST", "/api/plans", { body: { edits: [{ file: "upstreams.toml", op: "text", text: secretText }] } });
    const row = (await s.call("GET", "/api/activity")).body.items[0];
    expect(JSON.stringify(row.args)).not.toContain("abcdefghijklmnop");
    expect(row.args.edits[0].text).toContain("[redacted]");
    expect(redact({ password: "hunter2", nested: { api_key: "k", keep: "v" } })).toEqual({ password: "[redacted]", nested: { api_key: "[redacted]", keep: "v" } });
  });
});

describe("activity_list and activity_export read the same rows", () => {
  it("a policy that blocks one for an agent holds for the other: refused on REST and MCP, and not listed", async () => {
    writeFileSync(join(s.config, "policy.toml"), '[agents.hermes__ops]\nblocked = ["activity_list"]\n');
    await s.hal0.box.snapshot();
    const exported = await s.call("GET", "/api/activity/export", { as: "agent:hermes__ops" });
    expect(exported.status).toBe(403);
    expect(exported.body.error).toMatchObject({ code: "mcp.tool_not_allowed", details: { tool: "activity_list" } });
    const client = await adminClient(s.url, "hermes__ops");
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).not.toContain("activity_export");
      expect((await callTool(client, "activity_export", {})).body.error.code).toBe("mcp.tool_not_allowed");
    } finally {
      await client.close();
    }
    // Another agent, and an operator, read both.
    expect((await s.call("GET", "/api/activity/export", { as: "agent:hermes__other" })).status).toBe(200);
    expect((await s.call("GET", "/api/activity/export")).status).toBe(200);
  });
});
