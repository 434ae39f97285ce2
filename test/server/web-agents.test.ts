import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { BridgeToolDef } from "../../server/bridge/tool.js";
import { httpCall, startTestServer, type TestServer } from "./harness.js";
import { webLogin, type WebSession } from "./web-helpers.js";

/**
 * The Agents page (`/agents`), server-rendered: hal0's MCP servers with the
 * tool counts and tier badges `tools/list` and policy.toml give, the "add to
 * Claude Code / Codex / Cursor" form that mints a bridge token and shows the
 * config once, and the admissions with Revoke. One stand-in bridge tool.
 */
const TOOLS: BridgeToolDef[] = [
  { name: "agent_profile_list", defaultTier: "autonomous_read", description: "stand-in", input: z.strictObject({}), run: async (ctx) => ({ profiles: ctx.profiles }) },
  { name: "profile_skill_put", defaultTier: "gated", description: "stand-in", input: z.strictObject({}), run: async () => ({ ok: true }) },
];

let s: TestServer;
let session: WebSession;
beforeAll(async () => {
  s = await startTestServer({ extra: { bridgeTools: TOOLS } });
  session = await webLogin(s);
});
afterAll(async () => {
  await s?.close();
});

async function page(path: string): Promise<{ status: number; text: string }> {
  const res = await httpCall(s.url, "GET", path, { headers: { cookie: session.cookie } });
  return { status: res.status, text: String(res.body) };
}

function post(path: string, fields: Record<string, string>) {
  return httpCall(s.url, "POST", path, { body: new URLSearchParams(fields).toString(), headers: { cookie: session.cookie, "content-type": "application/x-www-form-urlencoded" }, exactHeaders: true });
}

async function listed(mount: string, token: string): Promise<string[]> {
  const client = new Client({ name: "t", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}${mount}`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  try {
    return (await client.listTools()).tools.map((t) => t.name).sort();
  } finally {
    await client.close();
  }
}

/** The tools and their tier badges the page lists for one server. */
function pageTools(html: string, server: string): Map<string, string> {
  const start = html.indexOf(`<ul class="tools" data-server="${server}">`);
  expect(start, server).toBeGreaterThanOrEqual(0);
  const list = html.slice(start, html.indexOf("</ul>", start));
  return new Map([...list.matchAll(/<code>([a-z0-9_]+)<\/code> <span class="badge [^"]+" data-tier="([a-z_]+)">/g)].map((m) => [m[1]!, m[2]!]));
}

const unescape = (t: string) => t.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

describe("/agents", () => {
  it("lists hal0-admin, hal0-memory and hal0-agents with the tools tools/list gives, and each tool's tier for the agent chosen", async () => {
    const { status, text } = await page("/agents?agent=hermes__coder");
    expect(status).toBe(200);
    for (const [id, mount] of [["hal0-admin", "/mcp/admin"], ["hal0-memory", "/mcp/memory"], ["hal0-agents", "/mcp/agents"]] as const) {
      const tools = pageTools(text, id);
      expect([...tools.keys()].sort(), id).toEqual(await listed(mount, s.operator));
      expect(text).toContain(`<span data-tool-count="${id}">${tools.size}</span>`);
    }
    // fixtures/box's policy.toml: [tiers] gated slot_edit, blocked logs_tail; [agents.hermes__coder] gated slot_load, blocked model_delete.
    const admin = pageTools(text, "hal0-admin");
    expect(admin.get("slot_list")).toBe("autonomous_read");
    expect(admin.get("slot_edit")).toBe("gated");
    expect(admin.get("slot_load")).toBe("gated");
    expect(admin.get("model_delete")).toBe("blocked");
    // agents/coder.toml binds hermes__coder and lists no hal0-agents server (unknown_server): its tools are blocked for it; memory_delete is on its blocked list.
    expect(pageTools(text, "hal0-agents")).toEqual(new Map([["agent_profile_list", "blocked"], ["profile_skill_put", "blocked"]]));
    expect(pageTools(text, "hal0-memory").get("memory_delete")).toBe("blocked");
    expect(pageTools((await page("/agents?agent=hermes__ops")).text, "hal0-agents")).toEqual(new Map([["agent_profile_list", "autonomous_read"], ["profile_skill_put", "gated"]]));
    // Without an agent: the defaults (slot_load is autonomous-write for everyone else).
    expect(pageTools((await page("/agents")).text, "hal0-admin").get("slot_load")).toBe("autonomous_write");
  });

  it("mints an agent token for a named client and shows its config once; the config connects; the admission is listed and revoked", async () => {
    const refused = await post("/agents/admit", { name: "cursor-ide", profiles: "coder", client: "cursor" });
    expect(refused.status).toBe(403);
    expect(s.hal0.tokens.list().map((t) => t.name)).not.toContain("cursor-ide");

    const res = await post("/agents/admit", { csrf: session.csrf, name: "cursor-ide", profiles: "coder", client: "cursor" });
    expect(res.status).toBe(200);
    const html = String(res.body);
    const block = /<code data-client-config="cursor">([\s\S]*?)<\/code>/.exec(html);
    expect(block).not.toBeNull();
    const config = JSON.parse(unescape(block![1]!)) as { mcpServers: Record<string, { url: string; headers: Record<string, string> }> };
    const server = config.mcpServers["hal0-agents"]!;
    expect(server.url).toBe(`${s.url}/mcp/agents`);
    const token = server.headers.Authorization!.replace(/^Bearer /, "");
    expect(token).toMatch(/^hal0_ag_/);
    expect(s.hal0.tokens.verify(token)).toMatchObject({ kind: "agent", name: "cursor-ide", scopes: ["mcp:agents"], profiles: ["coder"] });
    const client = new Client({ name: "cursor", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: server.headers } }));
    const reply = (await client.callTool({ name: "agent_profile_list", arguments: {} })) as { content: Array<{ text: string }> };
    expect(JSON.parse(reply.content[0]!.text)).toEqual({ profiles: ["coder"] });
    await client.close();

    // Shown once: the page read again lists the admission, never the token.
    const again = await page("/agents");
    expect(again.text).not.toContain(token);
    expect(again.text).toMatch(/<th scope="row">cursor-ide<\/th><td>coder<\/td>/);
    expect((await post("/agents/admit", { csrf: session.csrf, name: "cursor-ide", client: "codex" })).status).toBe(409);

    const id = s.hal0.tokens.verify(token)!.id;
    expect(again.text).toContain(`action="/agents/revoke/${id}"`);
    const revoked = await post(`/agents/revoke/${id}`, { csrf: session.csrf });
    expect(revoked.status).toBe(303);
    expect(revoked.headers.get("location")).toBe("/agents");
    expect(s.hal0.tokens.verify(token)).toBeUndefined();
    expect((await page("/agents")).text).not.toContain("cursor-ide");
  });

  it("an unknown client, even an Object built-in's name (constructor, toString, __proto__), is 422 and mints nothing", async () => {
    for (const client of ["constructor", "toString", "__proto__", "hasOwnProperty", "vscode"]) {
      const res = await post("/agents/admit", { csrf: session.csrf, name: "odd-client", client });
      expect(res.status, client).toBe(422);
      expect(String(res.body), client).not.toContain("native code");
      expect(String(res.body), client).not.toContain("hal0_ag_");
    }
    expect(s.hal0.tokens.list({ all: true }).map((t) => t.name)).not.toContain("odd-client");
  });

  it("behind a proxy that sends its upstream's Host, the config shown is for the public origin the form was posted from", async () => {
    const PUBLIC = "https://hal0.example.com";
    expect((await s.call("PUT", "/api/settings", { body: { server: { public_origins: [PUBLIC] } } })).status).toBe(200);
    try {
      const res = await httpCall(s.url, "POST", "/agents/admit", { body: new URLSearchParams({ csrf: session.csrf, name: "proxied", client: "codex" }).toString(), headers: { cookie: session.cookie, origin: PUBLIC, "content-type": "application/x-www-form-urlencoded" }, exactHeaders: true });
      expect(res.status, String(res.body)).toBe(200);
      expect(unescape(/<code data-client-config="codex">([\s\S]*?)<\/code>/.exec(String(res.body))![1]!)).toContain(`url = "${PUBLIC}/mcp/agents"`);
    } finally {
      expect((await s.call("PUT", "/api/settings", { body: { server: { public_origins: [] } } })).status).toBe(200);
    }
  });

  it("the Codex and Claude Code panels show their own config; an agent's token cannot see the page", async () => {
    const codex = String((await post("/agents/admit", { csrf: session.csrf, name: "codex-cli", client: "codex" })).body);
    expect(unescape(/<code data-client-config="codex">([\s\S]*?)<\/code>/.exec(codex)![1]!)).toMatch(/^\[mcp_servers\.hal0-agents\]\nurl = "http:\/\/127\.0\.0\.1:\d+\/mcp\/agents"\nhttp_headers = \{ Authorization = "Bearer hal0_ag_/);
    const claude = String((await post("/agents/admit", { csrf: session.csrf, name: "claude", client: "claude_code" })).body);
    expect(unescape(/<code data-client-config="claude_code">([\s\S]*?)<\/code>/.exec(claude)![1]!)).toMatch(/^claude mcp add --transport http hal0-agents http:\/\/127\.0\.0\.1:\d+\/mcp\/agents --header "Authorization: Bearer hal0_ag_/);
    const agent = await httpCall(s.url, "GET", "/agents", { headers: { authorization: `Bearer ${s.agentToken("someone")}` } });
    expect(agent.status).toBe(403);
  });

  it("a refused admit or revoke post (no CSRF field, another port's origin, an agent's token) is an audit row naming the identity the credential proved, as the same call over REST is", async () => {
    const send = (path: string, fields: Record<string, string>, headers: Record<string, string>) =>
      httpCall(s.url, "POST", path, { body: new URLSearchParams(fields).toString(), headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, exactHeaders: true });
    s.hal0.audit.flush();
    const before = s.hal0.audit.query({ limit: 1, offset: 0 }).items[0]?.id ?? 0;
    expect((await send("/agents/admit", { name: "sneaky", client: "cursor" }, { cookie: session.cookie })).status).toBe(403);
    expect((await send("/agents/revoke/tok_abc", { csrf: session.csrf }, { cookie: session.cookie, origin: "http://127.0.0.1:3999" })).status).toBe(403);
    expect((await send("/agents/admit", { name: "sneaky", client: "cursor" }, { authorization: `Bearer ${s.agentToken("someone")}` })).status).toBe(403);
    expect((await send("/approvals/apr_x/approve", {}, { authorization: `Bearer ${s.agentToken("someone")}` })).status).toBe(403);
    s.hal0.audit.flush();
    const rows = s.hal0.audit.query({ limit: 10, offset: 0 }).items.filter((r) => r.id > before).reverse();
    expect(rows.map((r) => [r.route, r.actor, r.outcome, r.error_code, r.target])).toEqual([
      ["POST /api/auth/tokens", "operator:owner", "error", "auth.csrf", null],
      ["POST /api/auth/tokens/{id}/revoke", "operator:owner", "error", "auth.csrf", "tok_abc"],
      ["POST /api/auth/tokens", "agent:someone", "error", "auth.operator_required", null],
      ["POST /api/agent/approvals/{id}/approve", "agent:someone", "error", "auth.operator_required", "apr_x"],
    ]);
    expect(s.hal0.auth.tokens.list().some((t) => t.name === "sneaky")).toBe(false);
  });
});
