import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { toNodeListener } from "h3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { routeId } from "../../server/route.js";
import { ROUTES } from "../../server/routes/index.js";
import { PUBLIC_ROUTES, anonymousMayCall } from "../../server/identity/access.js";
import { hashSecret } from "../../server/identity/tokens.js";
import { compile, loadTree } from "../../compiler/index.js";
import { httpCall, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callMemory, callTool, memoryClient } from "./mcp-helpers.js";
import { lanAddress } from "../helpers/lan.js";


const HAL0 = join(import.meta.dirname, "../../bin/hal0.js");

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());

const chat = () => readFileSync(join(s.config, "slots/chat.toml"), "utf8");
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A path for a route template, with real names from the example box. */
function pathOf(template: string): string {
  const names: Record<string, string> = { name: "chat", slot: "chat", child: "x", model_id: "qwen3-4b", slug: "coding", id: "x", server_id: "x", action: "start", slot_id: "x" };
  return template.replace(/\{([a-z_]+)(?::path)?\}/g, (_, p: string) => names[p] ?? "x");
}

/** Queues a gated slot_edit from `agent` over MCP; returns its approval id. */
async function queueEdit(agent: string, ctx = 20480): Promise<string> {
  const c = await adminClient(s.url, agent);
  const res = await callTool(c, "slot_edit", { name: "chat", tune: { ctx_size: ctx } });
  await c.close();
  expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: "pending_approval" });
  return res.body.approval_id;
}

describe("only a person approves, never the requester", () => {
  it("an agent's token cannot approve or deny — not even its own request; an operator can", async () => {
    const id = await queueEdit("hermes__coder");
    for (const verb of ["approve", "deny"]) {
      const own = await s.call("POST", `/api/agent/approvals/${id}/${verb}`, { as: "agent:hermes__coder", body: {} });
      expect(own.status, verb).toBe(403);
      expect(own.body.error.code).toBe("auth.operator_required");
      const other = await s.call("POST", `/api/agent/approvals/${id}/${verb}`, { as: "agent:hermes__ops", body: {} });
      expect(other.status).toBe(403);
      // The header cannot make an agent a person either.
      const spoof = await s.call("POST", `/api/agent/approvals/${id}/${verb}`, { as: "anonymous", headers: { "x-hal0-agent": "owner" }, body: {} });
      expect(spoof.status).toBe(401);
    }
    expect(s.hal0.approvals.get(id)!.state).toBe("pending");
    expect(chat()).not.toMatch(/ctx_size = 20480/);
    const ok = await s.call("POST", `/api/agent/approvals/${id}/approve`);
    expect(ok.body.approval).toMatchObject({ state: "executed", decided_by: "owner" });
    expect(chat()).toMatch(/ctx_size = 20480/);
  });

  it("two concurrent approvals of one request in two processes give exactly one decision", async () => {
    const id = await queueEdit("hermes__coder");
    const run = () => new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(process.execPath, [HAL0, "agent", "approvals", "approve", id, "--config", s.config, "--state", s.state], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, HAL0_TOKEN: "" } });
      let out = "";
      child.stdout.on("data", (c: Buffer) => (out += c));
      child.stderr.on("data", (c: Buffer) => (out += c));
      child.on("exit", (code) => resolve({ code, out }));
    });
    const results = await Promise.all([run(), run()]);
    expect(results.map((r) => r.code).sort(), results.map((r) => r.out).join("\n")).toEqual([0, 1]);
    expect(results.find((r) => r.code === 1)!.out).toContain("approvals.already_resolved");
    expect(s.hal0.approvals.get(id)).toMatchObject({ state: "executed", decided_by: "owner" });
    expect(chat().match(/ctx_size = 20480/g)).toHaveLength(1);
  }, 30_000);

  it("two agents' identical requests are two requests", async () => {
    const a = await queueEdit("hermes__coder");
    const b = await queueEdit("hermes__ops");
    expect(a).not.toBe(b);
    expect(await queueEdit("hermes__coder")).toBe(a);
    expect(s.hal0.approvals.get(a)!.caller).toMatchObject({ kind: "agent", agent: "hermes__coder" });
    expect(s.hal0.approvals.get(b)!.caller).toMatchObject({ kind: "agent", agent: "hermes__ops" });
  });
});

describe("anonymous callers only read", () => {
  it("every write, action, approve and token route is 401 without a credential; every route whose tools are all autonomous-read answers", async () => {
    const { model } = compile((await loadTree(s.config)).tree);
    const policy = model!.policy;
    let open = 0;
    let shut = 0;
    for (const route of ROUTES) {
      if (route.kind === "stream") continue;
      const res = await s.call(route.method, pathOf(route.path), { as: "anonymous", body: route.method === "GET" || route.method === "DELETE" ? undefined : {} });
      const mayCall = PUBLIC_ROUTES.has(routeId(route)) || anonymousMayCall(route, policy);
      if (mayCall) {
        open++;
        expect(res.status, `${routeId(route)} ${JSON.stringify(res.body).slice(0, 200)}`).not.toBe(401);
      } else {
        shut++;
        expect(res.status, routeId(route)).toBe(401);
        expect(res.body.error.code).toBe("auth.required");
      }
    }
    expect(open).toBeGreaterThan(20);
    expect(shut).toBeGreaterThan(40);
    // The two streams are operator-only too.
    for (const path of ["/api/agent/approvals/events", "/api/mcp/stream"]) expect((await s.call("GET", path, { as: "anonymous" })).status).toBe(401);
    expect(chat()).toBe(readFileSync(join(s.config, "slots/chat.toml"), "utf8"));
  }, 60_000);

  it("reads work; a gated read (GET /api/logs' tool is gated) is not open to them", async () => {
    expect((await s.call("GET", "/api/slots", { as: "anonymous" })).status).toBe(200);
    expect((await s.call("GET", "/api/auth/whoami", { as: "anonymous" })).body).toEqual({ kind: "anonymous", name: "anonymous", identity: "anonymous" });
    const c = await adminClient(s.url);
    expect((await callTool(c, "slot_list", {})).isError).toBe(false);
    const write = await callTool(c, "model_swap", { name: "utility", model: "gemma-3-12b-it" });
    expect(write.isError).toBe(true);
    expect(write.body.error.code).toBe("auth.required");
    await c.close();
  });

  it("what a gated read returned once a person approved it is read by the agent that asked and by operators, not anonymously nor by another agent", async () => {
    const asked = await s.call("GET", "/api/slots/chat/logs", { as: "agent:hermes__ops" });
    expect(asked.status, JSON.stringify(asked.body)).toBe(202);
    const approved = await s.call("POST", `/api/agent/approvals/${asked.body.approval_id}/approve`);
    expect(approved.body.approval, JSON.stringify(approved.body)).toMatchObject({ state: "executed", result: { name: "chat" } });
    const seen = async (as: string) => (await s.call("GET", "/api/agent/approvals", { as })).body.approvals.find((a: { id: string }) => a.id === asked.body.approval_id);
    expect((await seen("anonymous")).result).toBeNull();
    expect((await seen("agent:hermes__other")).result).toBeNull();
    expect((await seen("agent:hermes__ops")).result).toMatchObject({ name: "chat" });
    expect((await seen("operator")).result).toMatchObject({ name: "chat" });
    // The same over MCP (approval_list): another agent sees the request, not its outcome.
    const c = await adminClient(s.url, "hermes__other");
    const listed = (await callTool(c, "approval_list", {})).body.approvals.find((a: { id: string }) => a.id === asked.body.approval_id);
    await c.close();
    expect(listed).toMatchObject({ state: "executed", result: null });
  });

  it("what an agent's queued request carries is read by that agent and by operators; others see what it is, with its values masked (approvals and the audit log, REST and MCP)", async () => {
    // A value under a name no rule can tell is a secret: only the identity that sent it and a person read it back.
    const value = "dsn-value-only-the-asker-and-the-person-read";
    const asked = await s.call("PUT", "/api/slots/chat/config", { as: "agent:hermes__ops", body: { server: { env: { DB_DSN: value } } } });
    expect(asked.status, JSON.stringify(asked.body)).toBe(202);
    const request = async (as: string) => (await s.call("GET", "/api/agent/approvals", { as })).body.approvals.find((a: { id: string }) => a.id === asked.body.approval_id);
    const rows = async (as: string) => (await s.call("GET", "/api/activity?route=PUT%20/api/slots/%7Bname%7D/config", { as })).body.items as Array<{ args: unknown }>;
    const exported = async (as: string) => (await s.call("GET", "/api/activity/export", { as })).body;
    for (const as of ["anonymous", "agent:hermes__other"]) {
      const seen = await request(as);
      expect(seen, as).toMatchObject({ tool: "slot_edit", state: "pending", args: { params: { name: "chat" }, body: { server: { env: { DB_DSN: "[redacted]" } } } }, caller: { agent: "hermes__ops" } });
      expect(JSON.stringify(seen), as).not.toContain(value);
      expect((await rows(as))[0]!.args, as).toMatchObject({ server: { env: { DB_DSN: "[redacted]" } } });
      expect(JSON.stringify(await exported(as)), as).not.toContain(value);
    }
    for (const as of ["agent:hermes__ops", "operator"]) {
      expect((await request(as)).args.body, as).toEqual({ server: { env: { DB_DSN: value } } });
      expect((await rows(as))[0]!.args, as).toMatchObject({ server: { env: { DB_DSN: value } } });
    }
    // The same over MCP: approval_list and activity_list anonymously carry no value.
    const c = await adminClient(s.url);
    const listed = JSON.stringify([(await callTool(c, "approval_list", {})).body, (await callTool(c, "activity_list", {})).body]);
    await c.close();
    expect(listed).toContain(asked.body.approval_id);
    expect(listed).not.toContain(value);
  });

  it("what an agent's saved plan carries is read by that agent and by operators; others see what it is, with its values masked (plan_show and plan_list, REST and MCP)", async () => {
    const value = "dsn-value-only-the-proposer-and-the-person-read";
    const proposed = await s.call("POST", "/api/plans", { as: "agent:hermes__ops", body: { summary: "point chat at the db", edits: [
      { file: "slots/chat.toml", op: "set", path: ["server", "env", "DB_DSN"], value },
      { file: "slots/scratch.toml", op: "text", text: `profile = "rocm-moe"\nmodel = "qwen3-4b"\nport = 8089\nenabled = false\n[server]\nenv = { DB_DSN = "${value}" }\n` },
    ] } });
    expect(proposed.status, JSON.stringify(proposed.body)).toBe(201);
    expect(JSON.stringify(proposed.body)).toContain(value);
    // An invalid one too: its diagnostics quote the value it was given.
    const invalid = await s.call("POST", "/api/plans", { as: "agent:hermes__ops", body: { edits: [{ file: "slots/chat.toml", op: "set", path: ["tune", "reasoning_effort"], value }] } });
    expect(invalid.body, JSON.stringify(invalid.body)).toMatchObject({ valid: false });
    expect(JSON.stringify(invalid.body.diagnostics)).toContain(value);
    const id = proposed.body.id as string;
    const show = async (as: string, plan = id) => (await s.call("GET", `/api/plans/${plan}`, { as })).body;
    const list = async (as: string) => (await s.call("GET", "/api/plans", { as })).body;
    for (const as of ["anonymous", "agent:hermes__other"]) {
      const seen = await show(as);
      expect(seen, as).toMatchObject({ id, actor: "hermes__ops", actor_kind: "agent", summary: "point chat at the db", state: "proposed", valid: true, changes: { edits: [
        { file: "slots/chat.toml", op: "set", path: ["server", "env", "DB_DSN"], value: "[redacted]" },
        { file: "slots/scratch.toml", op: "text", text: "[redacted]" },
      ] } });
      const chatChange = seen.plan.changes.find((c: { address: string }) => c.address === "slot.chat");
      expect(chatChange, as).toMatchObject({ kind: "slot", action: "create", after: { spec: { env: { DB_DSN: "[redacted]" } } } });
      expect(JSON.stringify(seen), as).not.toContain(value);
      expect(JSON.stringify(await show(as, invalid.body.id)), as).not.toContain(value);
      expect(JSON.stringify(await list(as)), as).not.toContain(value);
      expect((await list(as)).plans.map((p: { id: string }) => p.id), as).toContain(id);
    }
    for (const as of ["agent:hermes__ops", "operator"]) {
      expect((await show(as)).changes.edits[0].value, as).toBe(value);
      expect(JSON.stringify(await show(as, invalid.body.id)), as).toContain(value);
      expect(JSON.stringify(await list(as)), as).toContain(value);
    }
    // The same over MCP: another agent's plan_show and plan_list carry no value; the proposer's plan_show does.
    const other = await adminClient(s.url, "hermes__other");
    const seen = JSON.stringify([(await callTool(other, "plan_show", { id })).body, (await callTool(other, "plan_list", {})).body]);
    await other.close();
    expect(seen).toContain(id);
    expect(seen).not.toContain(value);
    const own = await adminClient(s.url, "hermes__ops");
    expect(JSON.stringify((await callTool(own, "plan_show", { id })).body)).toContain(value);
    await own.close();
  });

  it("a private namespace needs an agent: anonymous asking for private gets memory.identity_required", async () => {
    const anon = await memoryClient(s.url, undefined, { private: true });
    const res = await callMemory(anon, "memory_search", { query: "mine?" });
    expect(res.isError).toBe(true);
    expect(res.body.error.code).toBe("memory.identity_required");
    await anon.close();
  });
});

describe("memory namespaces follow identity", () => {
  it("agent a's private facts are never readable or deletable by agent b or anonymous; only an operator can approve their deletion", async () => {
    const alice = await memoryClient(s.url, "alice", { private: true });
    const added = (await callMemory(alice, "memory_add", { text: "the deploy key rotates on fridays" })).body;
    expect(added.dataset ?? "private:alice").toBe("private:alice");
    const bob = await memoryClient(s.url, "bob", { private: true });
    const bobReads = await callMemory(bob, "memory_search", { query: "deploy", dataset: "private:alice" });
    expect(bobReads.body.error.code).toBe("memory.dataset_forbidden");
    expect((await callMemory(bob, "memory_search", { query: "deploy" })).body.results).toEqual([]);
    const bobDeletes = await callMemory(bob, "memory_delete", { ids: [added.id], dataset: "private:alice" });
    expect(bobDeletes.body.status).toBe("pending_approval");
    const anon = await memoryClient(s.url);
    expect((await callMemory(anon, "memory_search", { query: "deploy", dataset: "private:alice" })).body.error.code).toBe("memory.identity_required");
    expect((await callMemory(anon, "memory_delete", { ids: [added.id], dataset: "private:alice" })).body.error.code).toBe("auth.required");
    // No agent decides it, not even alice; the operator does.
    for (const who of ["agent:bob", "agent:alice"]) expect((await s.call("POST", `/api/agent/approvals/${bobDeletes.body.approval_id}/approve`, { as: who })).status).toBe(403);
    expect((await callMemory(alice, "memory_search", { query: "deploy" })).body.results).toHaveLength(1);
    expect((await s.call("POST", `/api/agent/approvals/${bobDeletes.body.approval_id}/approve`)).body.approval.state).toBe("executed");
    expect((await callMemory(alice, "memory_search", { query: "deploy" })).body.results).toHaveLength(0);
    for (const c of [alice, bob, anon]) await c.close();
  });
});

describe("the header is not an identity", () => {
  it("X-hal0-Agent naming another agent than the token's is 403 auth.identity_mismatch and changes nothing", async () => {
    const res = await s.call("POST", "/api/slots/utility/swap", { as: "agent:hermes__ops", headers: { "x-hal0-agent": "hermes__coder" }, body: { model: "gemma-3-12b-it" } });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("auth.identity_mismatch");
    const match = await s.call("GET", "/api/auth/whoami", { as: "agent:hermes__ops", headers: { "x-hal0-agent": "hermes__ops" } });
    expect(match.body.identity).toBe("agent:hermes__ops");
  });

  it("a per-agent block in policy.toml holds whatever header is sent, on MCP and on REST", async () => {
    // hermes__coder may never delete a model (fixtures/box/policy.toml).
    const coder = s.agentToken("hermes__coder");
    const rest = await s.call("DELETE", "/api/models/qwen3-4b", { headers: bearer(coder) });
    expect(rest.status).toBe(403);
    expect(rest.body.error.code).toBe("mcp.tool_not_allowed");
    const spoofed = await s.call("DELETE", "/api/models/qwen3-4b", { headers: { ...bearer(coder), "x-hal0-agent": "hermes__ops" } });
    expect(spoofed.body.error.code).toBe("auth.identity_mismatch");
    const c = await adminClient(s.url, "hermes__coder");
    expect((await callTool(c, "model_delete", { model_id: "qwen3-4b" })).body.error.code).toBe("mcp.tool_not_allowed");
    await c.close();
    expect(readFileSync(join(s.config, "models.toml"), "utf8")).toContain(`[model."qwen3-4b"]`);
    const refused = (await s.call("GET", "/api/activity?outcome=error")).body.items.filter((r: any) => r.actor === "agent:hermes__coder");
    expect(refused.length).toBeGreaterThanOrEqual(2);
  });

  it("an unknown, revoked or malformed token is 401 auth.invalid_token, never anonymous", async () => {
    const token = s.agentToken("hermes__ops");
    expect((await s.call("GET", "/api/slots", { headers: bearer(token) })).status).toBe(200);
    const id = s.hal0.tokens.list().find((t) => t.name === "hermes__ops")!.id;
    expect((await s.call("POST", `/api/auth/tokens/${id}/revoke`)).status).toBe(200);
    for (const h of [bearer(token), bearer("hal0_ag_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), { authorization: "Basic Zm9vOmJhcg==" }]) {
      const res = await s.call("GET", "/api/slots", { headers: h });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("auth.invalid_token");
    }
  });
  it("an approval refused at the credential (a spoofed X-hal0-Agent, a revoked or unknown token, a narrow scope) is audited against the request it aimed at", async () => {
    const id = await queueEdit("hermes__ops");
    const coder = s.agentToken("hermes__coder");
    expect((await s.call("POST", `/api/agent/approvals/${id}/approve`, { headers: { ...bearer(coder), "x-hal0-agent": "owner" } })).body.error.code).toBe("auth.identity_mismatch");
    expect((await s.call("POST", `/api/agent/approvals/${id}/approve`, { headers: bearer("hal0_op_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA") })).body.error.code).toBe("auth.invalid_token");
    const memoryOnly = s.hal0.tokens.mint("operator", "narrow", ["mcp:memory"]).token;
    expect((await s.call("POST", `/api/agent/approvals/${id}/approve`, { headers: bearer(memoryOnly) })).body.error.code).toBe("auth.scope_denied");
    const rows = (await s.call("GET", `/api/activity?target=${id}&outcome=error`)).body.items.map((r: any) => [r.actor, r.error_code, r.claimed]);
    expect(rows).toEqual(expect.arrayContaining([["agent:hermes__coder", "auth.identity_mismatch", "owner"], ["anonymous", "auth.invalid_token", null], ["operator:narrow", "auth.scope_denied", null]]));
    expect((await s.call("GET", `/api/agent/approvals/${id}`)).body.approval.state).toBe("pending");
  });

  it("a token the server has verified fails its very next request once another process revokes it", async () => {
    const token = s.agentToken("hermes__ops");
    for (let i = 0; i < 3; i++) expect((await s.call("GET", "/api/slots", { headers: bearer(token) })).status).toBe(200);
    const id = s.hal0.tokens.list().find((t) => t.name === "hermes__ops")!.id;
    const revoke = spawn(process.execPath, [HAL0, "token", "revoke", id, "--state", s.state], { stdio: "ignore" });
    expect(await new Promise((r) => revoke.on("exit", r))).toBe(0);
    const res = await s.call("GET", "/api/slots", { headers: bearer(token) });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("auth.invalid_token");
  });
});

describe("the same policy on every surface", () => {
  it("an agent's REST PUT of a gated change is queued (202 pending_approval), not written", async () => {
    const before = chat();
    const res = await s.call("PUT", "/api/slots/chat/config", { as: "agent:hermes__ops", body: { tune: { ctx_size: 12288 } } });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toMatchObject({ status: "pending_approval", approval_id: expect.stringMatching(/^apr_/) });
    expect(chat()).toBe(before);
    expect(s.hal0.approvals.get(res.body.approval_id)).toMatchObject({ state: "pending", tool: "slot_edit", caller: { kind: "agent", agent: "hermes__ops", via: "rest" } });
    // An autonomous write from the same agent runs; the operator's gated write runs too.
    expect((await s.call("POST", "/api/slots/utility/swap", { as: "agent:hermes__ops", body: { model: "gemma-3-12b-it" } })).status).toBe(200);
    expect((await s.call("PUT", "/api/slots/chat/config", { body: { tune: { ctx_size: 12288 } } })).status).toBe(200);
    expect(chat()).toMatch(/ctx_size = 12288/);
  });

  it("routes no tool maps to are operator-only: tokens, approval details", async () => {
    for (const [method, path] of [["GET", "/api/auth/tokens"], ["POST", "/api/auth/tokens"], ["GET", "/api/agent/approvals/apr_x"]] as const) {
      const res = await s.call(method, path, { as: "agent:hermes__ops", body: method === "POST" ? { kind: "operator", name: "evil" } : undefined });
      expect(res.status, path).toBe(403);
      expect(res.body.error.code).toBe("auth.operator_required");
    }
    const minted = await s.call("POST", "/api/auth/tokens", { body: { kind: "agent", name: "claude-code", scopes: ["mcp:admin"] } });
    expect(minted.status).toBe(201);
    expect(minted.body.token.token).toMatch(/^hal0_ag_/);
    const listed = await s.call("GET", "/api/auth/tokens");
    expect(JSON.stringify(listed.body)).not.toContain(minted.body.token.token);
    expect(listed.body.tokens.map((t: any) => t.name)).toContain("claude-code");
    // An explicit empty scope list is refused, never quietly the default.
    const empty = await s.call("POST", "/api/auth/tokens", { body: { kind: "agent", name: "nothing", scopes: [] } });
    expect([empty.status, empty.body.error?.code]).toEqual([400, "auth.name_invalid"]);
    expect((await s.call("GET", "/api/auth/tokens")).body.tokens.map((t: any) => t.name)).not.toContain("nothing");
  });

  it("an operator token narrowed by its scopes mints and rotates no token that reaches more", async () => {
    const restOnly = bearer(s.hal0.tokens.mint("operator", "ci-job", ["rest"]).token);
    // Within its reach: minted.
    const ok = await s.call("POST", "/api/auth/tokens", { headers: restOnly, body: { kind: "operator", name: "ci-reader", scopes: ["rest"] } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    // Beyond it, explicitly or by a kind's default (an operator's: every scope; an agent's: the MCP mounts): refused, nothing minted.
    for (const body of [{ kind: "operator", name: "wider", scopes: ["rest", "mcp:memory"] }, { kind: "operator", name: "wider" }, { kind: "agent", name: "wider" }, { kind: "agent", name: "wider", scopes: ["mcp:agents", "profile:*"] }]) {
      const refused = await s.call("POST", "/api/auth/tokens", { headers: restOnly, body });
      expect([refused.status, refused.body.error?.code], JSON.stringify(body)).toEqual([403, "auth.scope_denied"]);
    }
    expect(s.hal0.tokens.list({ all: true }).map((t) => t.name)).not.toContain("wider");
    // Rotating a token that reaches more would hand it a new one: refused, the old token stays live.
    const owner = s.hal0.tokens.mint("operator", "ada").token;
    const rotate = await s.call("POST", "/api/auth/tokens/rotate", { headers: restOnly, body: { name: "ada" } });
    expect([rotate.status, rotate.body.error?.code]).toEqual([403, "auth.scope_denied"]);
    expect((await s.call("GET", "/api/auth/whoami", { headers: bearer(owner) })).body.name).toBe("ada");
    // Nor does it revoke a token that reaches more (the owner's, a bridge admission); one within its reach it may.
    const adaId = s.hal0.tokens.list().find((t) => t.name === "ada")!.id;
    const revoke = await s.call("POST", `/api/auth/tokens/${adaId}/revoke`, { headers: restOnly });
    expect([revoke.status, revoke.body.error?.code]).toEqual([403, "auth.scope_denied"]);
    expect(revoke.body.error.message).toContain("cannot revoke a token that reaches mcp:admin");
    expect((await s.call("GET", "/api/auth/whoami", { headers: bearer(owner) })).body.name).toBe("ada");
    const readerId = s.hal0.tokens.list().find((t) => t.name === "ci-reader")!.id;
    expect((await s.call("POST", `/api/auth/tokens/${readerId}/revoke`, { headers: restOnly })).status).toBe(200);
    // An operator with every scope mints anything.
    const full = await s.call("POST", "/api/auth/tokens", { headers: bearer(owner), body: { kind: "operator", name: "wider" } });
    expect(full.status).toBe(201);
  });

  it("a kept copy that cannot be written (a folder stands there) undoes the rotation or the mint: auth.token_write_failed, the old token still live, no temp file left", async () => {
    const kept = s.hal0.tokens.handedOn("hermes__ops");
    const tokens = join(s.state, "tokens");
    rmSync(join(tokens, "hermes__ops"));
    mkdirSync(join(tokens, "hermes__ops"));
    const live = () => s.hal0.tokens.list().filter((t) => t.name === "hermes__ops").map((t) => t.id);
    const before = live();
    const rotate = await s.call("POST", "/api/auth/tokens/rotate", { body: { name: "hermes__ops" } });
    expect([rotate.status, rotate.body.error?.code]).toEqual([500, "auth.token_write_failed"]);
    expect(rotate.body.error.message).toBe(`could not write the token's copy ${join(tokens, "hermes__ops")}: a folder stands there (EISDIR); nothing was minted, revoked or rotated`);
    expect(live()).toEqual(before);
    expect(s.hal0.tokens.verify(kept)?.name).toBe("hermes__ops");
    // The first copy of another agent's token: nothing minted.
    mkdirSync(join(tokens, "hermes__writer"));
    expect(() => s.hal0.tokens.handedOn("hermes__writer")).toThrow(expect.objectContaining({ code: "auth.token_write_failed" }));
    expect(s.hal0.tokens.list({ all: true }).map((t) => t.name)).not.toContain("hermes__writer");
    expect(readdirSync(tokens).sort()).toEqual(["hermes__ops", "hermes__writer"]);
  });

  it("a token reaches only its scopes", async () => {
    const mcpOnly = s.hal0.tokens.mint("agent", "scoped", ["mcp:admin"]).token;
    const rest = await s.call("GET", "/api/slots", { headers: bearer(mcpOnly) });
    expect(rest.status).toBe(403);
    expect(rest.body.error.code).toBe("auth.scope_denied");
    await expect(memoryClient(s.url, { token: mcpOnly })).rejects.toThrow(/403|scope/);
    const c = await adminClient(s.url, { token: mcpOnly });
    expect((await callTool(c, "slot_list", {})).isError).toBe(false);
    await c.close();
  });

  it("hal0-admin's memory_* tools are hal0-memory's: a token without mcp:memory neither lists nor calls them there", async () => {
    for (const token of [s.hal0.tokens.mint("agent", "admin-only", ["mcp:admin"]).token, s.hal0.tokens.mint("operator", "ci-admin", ["mcp:admin", "rest"]).token]) {
      const c = await adminClient(s.url, { token });
      const listed = new Set((await c.listTools()).tools.map((t) => t.name));
      expect([listed.has("slot_list"), listed.has("memory_search"), listed.has("memory_add")]).toEqual([true, false, false]);
      for (const [tool, args] of [["memory_search", { query: "x" }], ["memory_add", { text: "a note it may not write" }]] as const) {
        const res = await callTool(c, tool, args);
        expect(res.isError).toBe(true);
        expect(res.body.error.code).toBe("auth.scope_denied");
        expect(res.body.error.details.needed).toBe("mcp:memory");
      }
      await c.close();
    }
    // A token that reaches hal0-memory still calls them through hal0-admin.
    const both = await adminClient(s.url, { token: s.hal0.tokens.mint("agent", "admin-memory", ["mcp:admin", "mcp:memory"]).token });
    expect((await callTool(both, "memory_search", { query: "x" })).isError).toBe(false);
    await both.close();
  });

  it("a hal0-memory request of an agent whose every mcp:memory token was revoked since it asked does not run when approved, though it keeps one for hal0-admin", async () => {
    const wide = s.hal0.tokens.mint("agent", "narrowed", ["mcp:admin", "mcp:memory"]);
    const c = await memoryClient(s.url, { token: wide.token });
    const a = (await callMemory(c, "memory_add", { text: "the staging box reboots at noon" })).body;
    const b = (await callMemory(c, "memory_add", { text: "the backup disk is full" })).body;
    const asked = (await callMemory(c, "memory_delete", { ids: [a.id, b.id] })).body;
    await c.close();
    expect(asked.status).toBe("pending_approval");
    s.hal0.tokens.revoke(wide.id);
    s.hal0.tokens.mint("agent", "narrowed", ["mcp:admin"]);
    const approved = await s.call("POST", `/api/agent/approvals/${asked.approval_id}/approve`);
    expect(approved.body.approval.state).toBe("failed");
    expect(approved.body.approval.error.code).toBe("auth.invalid_token");
  });

  it("a REST or hal0-admin request of an agent whose every token reaching that surface was revoked since it asked does not run when approved, though it keeps one for hal0-memory", async () => {
    for (const [name, scope, ask] of [
      ["rest-narrowed", "rest", async (token: string) => (await s.call("PUT", "/api/slots/chat/config", { headers: bearer(token), body: { tune: { ctx_size: 12288 } } })).body],
      ["admin-narrowed", "mcp:admin", async (token: string) => {
        const c = await adminClient(s.url, { token });
        const res = (await callTool(c, "slot_edit", { name: "chat", tune: { ctx_size: 16384 } })).body;
        await c.close();
        return res;
      }],
    ] as const) {
      const before = chat();
      const wide = s.hal0.tokens.mint("agent", name, [scope, "mcp:memory"]);
      const asked = await ask(wide.token);
      expect(asked.status, JSON.stringify(asked)).toBe("pending_approval");
      s.hal0.tokens.revoke(wide.id);
      s.hal0.tokens.mint("agent", name, ["mcp:memory"]);
      const approved = await s.call("POST", `/api/agent/approvals/${asked.approval_id}/approve`);
      expect([approved.body.approval.state, approved.body.approval.error?.code], name).toEqual(["failed", "auth.invalid_token"]);
      expect(chat()).toBe(before);
    }
  });

  it("only an operator changes [server] auth, through whichever route", async () => {
    const res = await s.call("PUT", "/api/settings", { as: "agent:hermes__ops", body: { server: { auth: "off" } } });
    expect([202, 403]).toContain(res.status);
    if (res.status === 202) throw new Error("an agent's change to [server] auth was queued for approval");
    expect(res.body.error.code).toBe("auth.operator_required");
    const plan = await s.call("POST", "/api/plans", { as: "agent:hermes__ops", body: { edits: [{ file: "hal0.toml", op: "set", path: ["server", "auth"], value: "off" }] } });
    const applied = await s.call("POST", `/api/plans/${plan.body.id}/apply`, { as: "agent:hermes__ops" });
    expect(applied.status).not.toBe(200);
    expect(readFileSync(join(s.config, "hal0.toml"), "utf8")).not.toMatch(/auth = "off"/);
  });
});

describe("[server] auth = \"off\"", () => {
  it("an operator turns it off; then a loopback caller is the operator `local`, and one naming itself is that agent (gated as one)", async () => {
    expect((await s.call("PUT", "/api/settings", { body: { server: { auth: "off" } } })).status).toBe(200);
    expect((await s.call("GET", "/api/auth/whoami", { as: "anonymous" })).body.identity).toBe("operator:local");
    const agent = await s.call("PUT", "/api/slots/chat/config", { as: "anonymous", headers: { "x-hal0-agent": "hermes__ops" }, body: { tune: { ctx_size: 9216 } } });
    expect(agent.status).toBe(202);
    // A token still decides when one is sent.
    expect((await s.call("GET", "/api/auth/whoami", { as: "agent:hermes__coder" })).body.identity).toBe("agent:hermes__coder");
  });

  it("an X-hal0-Agent that names no agent (empty, a dot, a space, 65 characters) is 400 request.invalid_header, never the operator: the agent's gated write is not run", async () => {
    expect((await s.call("PUT", "/api/settings", { body: { server: { auth: "off" } } })).status).toBe(200);
    for (const claim of ["", " ", "hermes.ops", "claude code", "a".repeat(65)]) {
      const who = await s.call("GET", "/api/auth/whoami", { as: "anonymous", headers: { "x-hal0-agent": claim } });
      expect(who.status, claim).toBe(400);
      expect(who.body.error).toMatchObject({ code: "request.invalid_header", details: { header: "X-hal0-Agent" } });
      const write = await s.call("PUT", "/api/slots/chat/config", { as: "anonymous", headers: { "x-hal0-agent": claim }, body: { tune: { ctx_size: 9216 } } });
      expect(write.status, claim).toBe(400);
      const mcp = await httpCall(s.url, "POST", "/mcp/admin", { headers: { "x-hal0-agent": claim, accept: "application/json, text/event-stream" }, body: { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } } });
      expect(mcp.status, claim).toBe(400);
    }
    expect(chat()).not.toContain("9216");
    expect((await s.call("GET", "/api/agent/approvals", { as: "anonymous" })).body.approvals).toEqual([]);
    // A name that is one is that agent, gated as one.
    expect((await s.call("PUT", "/api/slots/chat/config", { as: "anonymous", headers: { "x-hal0-agent": "hermes__ops" }, body: { tune: { ctx_size: 9216 } } })).status).toBe(202);
  });

  it("trusts loopback callers only: a caller from another address (a server listening beyond loopback) is judged as with auth = \"token\", whatever its Host or X-Forwarded-For say", async () => {
    // The file keeps [server] host = 127.0.0.1 (so auth = "off" compiles), while the server also listens on another
    // address, as `hal0 serve --host` does.
    expect((await s.call("PUT", "/api/settings", { body: { server: { auth: "off" } } })).status).toBe(200);
    const outside = createServer(toNodeListener(s.hal0.app));
    const LAN = lanAddress();
    await new Promise<void>((resolve) => outside.listen(0, LAN, resolve));
    try {
      const url = `http://${LAN}:${(outside.address() as AddressInfo).port}`;
      const forged = { host: new URL(s.url).host, "x-forwarded-for": "127.0.0.1" };
      expect((await httpCall(url, "GET", "/api/auth/whoami", { headers: forged })).body.identity).toBe("anonymous");
      const mint = await httpCall(url, "POST", "/api/auth/tokens", { headers: forged, body: { kind: "operator", name: "mallory" } });
      expect(mint.status).toBe(401);
      expect(mint.body.error.code).toBe("auth.required");
      const claimed = await httpCall(url, "PUT", "/api/slots/chat/config", { headers: { ...forged, "x-hal0-agent": "hermes__ops" }, body: { tune: { ctx_size: 9216 } } });
      expect(claimed.status).toBe(401);
      expect((await httpCall(url, "GET", "/", { headers: forged })).status).toBe(401);
      const mcp = await httpCall(url, "POST", "/mcp/admin", { headers: { ...forged, accept: "application/json, text/event-stream" }, body: { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "slot_delete", arguments: { args: { name: "chat" } } } } });
      expect(JSON.stringify(mcp.body)).toContain("auth.required");
      // A token still decides from there, and loopback callers are still the operator.
      expect((await httpCall(url, "GET", "/api/auth/whoami", { headers: { ...forged, ...bearer(s.operator) } })).body.identity).toBe("operator:owner");
      expect((await s.call("GET", "/api/auth/whoami", { as: "anonymous" })).body.identity).toBe("operator:local");
      expect(s.hal0.tokens.list().map((t) => t.name)).not.toContain("mallory");
      expect(chat()).not.toContain("9216");
    } finally {
      await new Promise((resolve) => outside.close(resolve));
    }
  });

  it("turned on again by a hand edit of hal0.toml, the very next request without a token is refused, not the operator", async () => {
    expect((await s.call("PUT", "/api/settings", { body: { server: { auth: "off" } } })).status).toBe(200);
    const file = join(s.config, "hal0.toml");
    expect(readFileSync(file, "utf8")).toMatch(/auth = "off"/);
    writeFileSync(file, readFileSync(file, "utf8").replace(/auth = "off"/, 'auth = "token"'));
    const anonymous = await s.call("GET", "/api/auth/whoami", { as: "anonymous" });
    expect(anonymous.body.identity).not.toBe("operator:local");
    const write = await s.call("PUT", "/api/slots/chat/config", { as: "anonymous", body: { tune: { ctx_size: 9216 } } });
    expect(write.status).toBe(401);
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).not.toContain("9216");
  });

  it("a browser's post from a page on another local port (a form, a body-less fetch: no preflight) is 403 auth.csrf, not the operator; the page's own origin and a client without Origin still decide", async () => {
    expect((await s.call("PUT", "/api/settings", { body: { server: { auth: "off" } } })).status).toBe(200);
    const queue = async (ctx: number) => {
      const res = await s.call("PUT", "/api/slots/chat/config", { as: "anonymous", headers: { "x-hal0-agent": "hermes__ops" }, body: { tune: { ctx_size: ctx } } });
      expect(res.status).toBe(202);
      return res.body.approval_id as string;
    };
    const state = async (id: string) => (await s.call("GET", `/api/agent/approvals/${id}`)).body.approval.state;
    const id = await queue(9216);
    const elsewhere = "http://127.0.0.1:3999";
    const formPost = (origin: string) => httpCall(s.url, "POST", `/approvals/${id}/approve`, { headers: { origin, "content-type": "application/x-www-form-urlencoded" }, body: "", exactHeaders: true });
    const form = await formPost(elsewhere);
    expect(form.status).toBe(403);
    const rest = await s.call("POST", `/api/agent/approvals/${id}/approve`, { as: "anonymous", headers: { origin: elsewhere } });
    expect(rest.status).toBe(403);
    expect(rest.body.error.code).toBe("auth.csrf");
    expect((await s.call("POST", "/api/settings/reload", { as: "anonymous", headers: { origin: "http://localhost:8000" } })).body.error?.code).toBe("auth.csrf");
    expect(await state(id)).toBe("pending");
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).not.toContain("9216");
    // The page's own origin, and a client that sends no Origin (curl, a script), are the operator as before.
    expect((await formPost(s.url)).status).toBe(303);
    expect(await state(id)).toBe("executed");
    const second = await queue(10240);
    expect((await s.call("POST", `/api/agent/approvals/${second}/deny`, { as: "anonymous" })).status).toBe(200);
  });
});

describe("MCP sessions are bound to the identity that opened them", () => {
  it("a request on a session with another token, or none, is refused", async () => {
    const a = s.agentToken("hermes__ops");
    const b = s.agentToken("hermes__coder");
    const post = (headers: Record<string, string>, body: unknown) => fetch(`${s.url}/mcp/admin`, {
      method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }, body: JSON.stringify(body),
    });
    const init = await post(bearer(a), { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    expect(init.status).toBe(200);
    const sid = init.headers.get("mcp-session-id")!;
    const common = { "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18" };
    await post({ ...bearer(a), ...common }, { jsonrpc: "2.0", method: "notifications/initialized" });
    const list = { jsonrpc: "2.0", id: 2, method: "tools/list" };
    const other = await post({ ...bearer(b), ...common }, list);
    expect(other.status).toBe(403);
    expect((await other.json()).error.code).toBe("auth.identity_mismatch");
    const none = await post(common, list);
    expect(none.status).toBe(403);
    // Another token of the same name (rotated, admitted again) is another credential: refused, and the message says so.
    const sameName = await post({ ...bearer(s.agentToken("hermes__ops", ["mcp:admin"])), ...common }, list);
    expect(sameName.status).toBe(403);
    expect((await sameName.json()).error.message).toBe("this MCP session was opened by agent:hermes__ops's token; a request on it with another token of agent:hermes__ops (rotated, or admitted again) is refused: open a new session");
    const same = await post({ ...bearer(a), ...common }, list);
    expect(same.status).toBe(200);
  });
});

describe("the state folder holds credentials, the database only hashes", () => {
  it("no token in the database in plain text; operator.token is live and 0600", async () => {
    const agent = s.agentToken("hermes__ops");
    s.hal0.audit.flush();
    s.hal0.db.pragma("wal_checkpoint(TRUNCATE)");
    const bytes = readFileSync(join(s.state, "hal0.db")).toString("latin1");
    for (const token of [s.operator, agent]) {
      expect(bytes).not.toContain(token);
      expect(bytes).toContain(hashSecret(token));
    }
    writeFileSync(join(s.state, "operator.token"), "hal0_op_notLiveNotLiveNotLiveNotLive12\n");
    const again = await startTestServer({ reuse: { dir: join(s.state, "..") }, keep: true });
    try {
      expect(again.operator).not.toBe("hal0_op_notLiveNotLiveNotLiveNotLive12");
      expect((await again.call("GET", "/api/auth/whoami")).body.identity).toBe("operator:owner");
    } finally {
      await again.close();
    }
  });
});
