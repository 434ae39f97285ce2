import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { parse as parseToml } from "smol-toml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { main } from "../../cli/index.js";
import { openDb } from "../../server/db.js";
import { requireProfile, mayReachProfile } from "../../server/bridge/access.js";
import type { BridgeToolDef } from "../../server/bridge/tool.js";
import { RUN_TOOLS } from "../../server/bridge/runs/tools.js";
import { TEACH_TOOLS } from "../../server/bridge/teach/tools.js";
import { bridgeCatalog, bridgeCatalogProblems } from "../../server/mcp/agents.js";
import { AGENTS_GATED_TOOLS, AGENTS_READ_TOOLS, AGENTS_WRITE_TOOLS } from "../../schema/index.js";
import { captureIo } from "../cli/helpers.js";
import { httpCall, startTestServer, type TestServer } from "./harness.js";

/**
 * hal0-agents at /mcp/agents, with three stand-in tools under real names of
 * the sixteen (one per default tier), so that the mount is proved without
 * the run and teaching tools: who reaches it, what it lists, how arguments
 * are refused, how a gated call waits for a person and then runs, the
 * profiles a bridge token reaches, `[bridge] enabled`, `hal0 bridge`.
 */
const written = mkdtempSync(join(tmpdir(), "hal0-bridge-skills-"));

const TOOLS: BridgeToolDef[] = [
  {
    name: "agent_profile_list", defaultTier: "autonomous_read", description: "stand-in: the profiles this caller reaches",
    input: z.strictObject({}),
    run: async (ctx) => ({ profiles: ctx.profiles, caller: `${ctx.caller.kind}:${ctx.caller.agent}` }),
  },
  {
    name: "agent_run_start", defaultTier: "autonomous_write", description: "stand-in: a run of a profile",
    input: z.strictObject({ profile: z.string().min(1), prompt: z.string().min(1) }),
    run: async (ctx, args: { profile: string; prompt: string }) => {
      requireProfile(ctx, args.profile);
      return { run_id: `run_${args.profile}`, prompt: args.prompt };
    },
  },
  {
    name: "profile_skill_put", defaultTier: "gated", description: "stand-in: writes a skill file",
    input: z.strictObject({ profile: z.string().regex(/^[a-z]+$/), name: z.string().regex(/^[a-z]+$/), body: z.string() }),
    precheck: (ctx, args: { profile: string }) => requireProfile(ctx, args.profile),
    run: async (ctx, args: { profile: string; name: string; body: string }) => {
      requireProfile(ctx, args.profile);
      const file = join(written, `${args.profile}-${args.name}.md`);
      writeFileSync(file, args.body);
      return { written: file, by: `${ctx.caller.kind}:${ctx.caller.agent}`, approved_by: ctx.caller.approvedBy ?? null };
    },
  },
];

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({ extra: { bridgeTools: TOOLS } });
});

afterAll(async () => {
  await s?.close();
  rmSync(written, { recursive: true, force: true });
});

async function agentsClient(token: string): Promise<Client> {
  const client = new Client({ name: "hal0-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp/agents`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<{ isError: boolean; body: any }> {
  const res = (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: Array<{ text?: string }> };
  return { isError: res.isError === true, body: JSON.parse(res.content[0]?.text ?? "null") };
}

/** An `initialize` over plain HTTP: the refusal's status and envelope, as a client that cannot connect sees them. */
function initialize(token?: string, extra: Record<string, string> = {}) {
  return httpCall(s.url, "POST", "/mcp/agents", {
    headers: { accept: "application/json, text/event-stream", ...(token ? { authorization: `Bearer ${token}` } : {}), ...extra },
    body: { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } } },
  });
}

function admitted(name: string, profiles: readonly string[]): string {
  return s.hal0.tokens.mint("agent", name, ["mcp:agents", ...profiles.map((p) => `profile:${p}`)]).token;
}

function setBridge(enabled: boolean): void {
  const file = join(s.config, "hal0.toml");
  const text = readFileSync(file, "utf8").replace(/\n\[bridge\]\nenabled = (true|false)\n/, "");
  writeFileSync(file, `${text}\n[bridge]\nenabled = ${enabled}\n`);
}

async function bridgeFeature(): Promise<{ enabled: boolean; detail: string }> {
  const res = await s.call("GET", "/api/features");
  return res.body.features.find((f: { name: string }) => f.name === "bridge");
}

describe("the tier tables and the tools", () => {
  it("names the sixteen tools once each; this build's run and teaching lists agree with them", () => {
    const names = [...AGENTS_READ_TOOLS, ...AGENTS_WRITE_TOOLS, ...AGENTS_GATED_TOOLS].map((t) => t.tool);
    expect(new Set(names).size).toBe(16);
    expect(bridgeCatalogProblems([...RUN_TOOLS, ...TEACH_TOOLS])).toEqual([]);
  });

  it("a tool the tables do not name, or at another tier, stops the server (mcp.catalog_invalid)", () => {
    const stray = { ...TOOLS[0]!, name: "agent_run_teleport" };
    const loose = { ...TOOLS[2]!, defaultTier: "autonomous_write" as const };
    expect(bridgeCatalogProblems([stray, loose, TOOLS[1]!, TOOLS[1]!])).toEqual([
      "agent_run_start is registered twice",
      "agent_run_teleport is in no tier table (schema/data/hal0-tools.ts AGENTS_*_TOOLS)",
      "profile_skill_put says its default tier is autonomous_write, the tier table says gated",
    ]);
    expect(() => bridgeCatalog([stray])).toThrow(expect.objectContaining({ code: "mcp.catalog_invalid" }));
  });

  it("requireProfile refuses a profile outside the caller's list; an operator's \"all\" reaches every one", () => {
    const agent = { kind: "agent", agent: "claude", private: false, via: "mcp" } as const;
    expect(() => requireProfile({ caller: agent, profiles: ["coder"] }, "writer")).toThrow(expect.objectContaining({ code: "bridge.profile_denied", details: { profile: "writer", allowed: ["coder"] } }));
    expect(() => requireProfile({ caller: agent, profiles: ["coder"] }, "coder")).not.toThrow();
    expect(mayReachProfile({ profiles: "all" }, "anything")).toBe(true);
    expect(mayReachProfile({ profiles: [] }, "coder")).toBe(false);
  });
});

describe("/mcp/agents: who reaches it", () => {
  it("an operator and an admitted token list the tools, each with its JSON Schema", async () => {
    for (const token of [s.operator, admitted("lister", ["coder"])]) {
      const client = await agentsClient(token);
      try {
        expect(client.getServerVersion()?.name).toBe("hal0-agents");
        const { tools } = await client.listTools();
        expect(tools.map((t) => t.name).sort()).toEqual(["agent_profile_list", "agent_run_start", "profile_skill_put"]);
        const start = tools.find((t) => t.name === "agent_run_start")!;
        expect(start.inputSchema).toMatchObject({ type: "object", properties: { profile: { type: "string" }, prompt: { type: "string" } }, required: ["profile", "prompt"] });
        expect(tools.find((t) => t.name === "agent_profile_list")!.annotations).toMatchObject({ readOnlyHint: true });
      } finally {
        await client.close();
      }
    }
  });

  it("a plain agent token (no mcp:agents) is auth.scope_denied; no credential is auth.required; both are audited", async () => {
    const plain = s.agentToken("plain-agent");
    const refused = await initialize(plain);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: { code: "auth.scope_denied", details: { needed: "mcp:agents" } } });
    await expect(agentsClient(plain)).rejects.toThrow();
    const anonymous = await initialize();
    expect(anonymous.status).toBe(401);
    expect(anonymous.body.error.code).toBe("auth.required");
    // A token that proves who it is, with a header that claims someone else.
    const spoofed = await initialize(admitted("honest", ["coder"]), { "x-hal0-agent": "owner" });
    expect(spoofed.body.error.code).toBe("auth.identity_mismatch");
    s.hal0.audit.flush();
    const rows = s.hal0.audit.query({ limit: 50 }).items.filter((r) => r.route === "POST /mcp/agents");
    expect(rows.map((r) => r.error_code)).toEqual(expect.arrayContaining(["auth.scope_denied", "auth.required", "auth.identity_mismatch"]));
    // Each row names who the credential proved (REST's rows do the same), and the claim it made.
    const byCode = Object.fromEntries(rows.map((r) => [r.error_code, r]));
    expect(byCode["auth.scope_denied"]).toMatchObject({ actor: "agent:plain-agent" });
    expect(byCode["auth.required"]).toMatchObject({ actor: "anonymous" });
    expect(byCode["auth.identity_mismatch"]).toMatchObject({ actor: "agent:honest", claimed: "owner" });
  });

  it("an operator token minted for other surfaces (no mcp:agents) is auth.scope_denied too: a scope holds for an operator as on every other mount", async () => {
    const narrow = s.hal0.tokens.mint("operator", "memory-only", ["mcp:memory"]).token;
    const refused = await initialize(narrow);
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    expect(refused.body).toMatchObject({ error: { code: "auth.scope_denied", details: { needed: "mcp:agents" } } });
    // The operator's default scopes reach it.
    expect((await initialize(s.hal0.tokens.mint("operator", "everything").token)).status).toBe(200);
  });

  it("a bridge token reaches only its profiles: agent_profile_list says which, another profile is bridge.profile_denied", async () => {
    const client = await agentsClient(admitted("coder-only", ["coder"]));
    try {
      expect((await call(client, "agent_profile_list", {})).body).toEqual({ profiles: ["coder"], caller: "agent:coder-only" });
      expect(await call(client, "agent_run_start", { profile: "coder", prompt: "hi" })).toEqual({ isError: false, body: { run_id: "run_coder", prompt: "hi" } });
      const denied = await call(client, "agent_run_start", { profile: "writer", prompt: "hi" });
      expect(denied.isError).toBe(true);
      expect(denied.body).toMatchObject({ status: "error", error: { code: "bridge.profile_denied", details: { profile: "writer", allowed: ["coder"] } }, http_status: 403 });
    } finally {
      await client.close();
    }
    const all = await agentsClient(admitted("everywhere", ["*"]));
    const op = await agentsClient(s.operator);
    try {
      expect((await call(all, "agent_profile_list", {})).body.profiles).toBe("all");
      expect((await call(op, "agent_profile_list", {})).body.profiles).toBe("all");
      expect((await call(all, "agent_run_start", { profile: "writer", prompt: "x" })).isError).toBe(false);
    } finally {
      await all.close();
      await op.close();
    }
  });

  it("arguments are validated against the tool's schema: validation.invalid naming each field; an unknown tool is mcp.unknown_tool", async () => {
    const client = await agentsClient(admitted("validator", ["coder"]));
    try {
      const bad = await call(client, "agent_run_start", { profile: "", extra: 1 });
      expect(bad.isError).toBe(true);
      expect(bad.body.error.code).toBe("validation.invalid");
      const locs = bad.body.error.details.fields.map((f: { loc: string[] }) => f.loc.join("."));
      expect(locs).toEqual(expect.arrayContaining(["body.profile", "body.prompt", "body"]));
      expect((await call(client, "agent_run_nothing", {})).body.error.code).toBe("mcp.unknown_tool");
    } finally {
      await client.close();
    }
  });
});

describe("tiers: policy.toml moves the bridge tools like any tool", () => {
  it("a gated call by an admitted agent is queued, runs only when an operator approves, with the profiles it was admitted to", async () => {
    const token = admitted("teacher", ["coder"]);
    const client = await agentsClient(token);
    try {
      const queued = await call(client, "profile_skill_put", { profile: "coder", name: "greet", body: "# greet\n" });
      expect(queued.isError).toBe(false);
      expect(queued.body).toMatchObject({ status: "pending_approval", approval_id: expect.stringMatching(/^apr_/) });
      const file = join(written, "coder-greet.md");
      expect(existsSync(file)).toBe(false);
      // The requester cannot approve its own request; a profile it does not reach is refused before it is queued.
      const self = await httpCall(s.url, "POST", `/api/agent/approvals/${queued.body.approval_id}/approve`, { headers: { authorization: `Bearer ${token}` } });
      expect(self.status).toBeGreaterThanOrEqual(401);
      const outside = await call(client, "profile_skill_put", { profile: "writer", name: "greet", body: "x" });
      expect(outside.body.error.code).toBe("bridge.profile_denied");
      expect(s.hal0.approvals.list("pending").filter((a) => a.tool === "profile_skill_put")).toHaveLength(1);
      const approved = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
      expect(approved.status).toBe(200);
      expect(approved.body.approval).toMatchObject({ state: "executed", args: { query: { profiles: ["coder"] } }, result: { written: file, by: "agent:teacher", approved_by: "operator:owner" } });
      expect(readFileSync(file, "utf8")).toBe("# greet\n");
    } finally {
      await client.close();
    }
  });

  it("[tiers] and [agents.<id>] move them: loosened, the skill write runs at once; blocked, a tool is neither listed nor callable", async () => {
    const policy = join(s.config, "policy.toml");
    const before = readFileSync(policy, "utf8");
    writeFileSync(policy, `${before}\n[agents.trusted]\nautonomous_write = ["profile_skill_put"]\nblocked = ["agent_run_start"]\n`);
    try {
      const client = await agentsClient(admitted("trusted", ["coder"]));
      try {
        const direct = await call(client, "profile_skill_put", { profile: "coder", name: "direct", body: "now" });
        expect(direct.body).toMatchObject({ written: join(written, "coder-direct.md"), approved_by: null });
        expect((await client.listTools()).tools.map((t) => t.name)).not.toContain("agent_run_start");
        const blocked = await call(client, "agent_run_start", { profile: "coder", prompt: "x" });
        expect(blocked.body.error.code).toBe("mcp.tool_not_allowed");
      } finally {
        await client.close();
      }
      // Another agent keeps the defaults.
      const other = await agentsClient(admitted("untrusted", ["coder"]));
      try {
        expect((await call(other, "profile_skill_put", { profile: "coder", name: "other", body: "x" })).body.status).toBe("pending_approval");
      } finally {
        await other.close();
      }
    } finally {
      writeFileSync(policy, before);
    }
  });
});

describe("[bridge] enabled", () => {
  it("feature_list says the bridge is on and how many tools /mcp/agents serves", async () => {
    const f = await bridgeFeature();
    expect(f.enabled).toBe(true);
    expect(f.detail).toContain("/mcp/agents serves 3 tool(s)");
    const servers = await s.call("GET", "/api/mcp/servers");
    expect(servers.body.servers.find((x: { id: string }) => x.id === "hal0-agents")).toMatchObject({ url: expect.stringMatching(/\/mcp\/agents$/), tools_count: 3 });
  });

  it("off: 404 route.not_found for everyone, an open session is closed, feature_list and mcp_server_list say so; on again: it answers", async () => {
    const client = await agentsClient(admitted("session-holder", ["coder"]));
    expect((await call(client, "agent_profile_list", {})).isError).toBe(false);
    expect(s.hal0.mcp.agents.sessionCount).toBeGreaterThan(0);
    setBridge(false);
    try {
      await expect(client.listTools()).rejects.toThrow();
      expect(s.hal0.mcp.agents.sessionCount).toBe(0);
      for (const token of [s.operator, undefined]) {
        const res = await initialize(token);
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ error: { code: "route.not_found", message: expect.stringContaining("/mcp/agents") } });
      }
      expect(await bridgeFeature()).toMatchObject({ enabled: false, detail: expect.stringContaining("[bridge] enabled = false") });
      expect((await s.call("GET", "/api/mcp/servers")).body.servers.map((x: { id: string }) => x.id)).not.toContain("hal0-agents");
    } finally {
      await client.close().catch(() => undefined);
      setBridge(true);
    }
    const again = await agentsClient(s.operator);
    expect((await again.listTools()).tools).toHaveLength(3);
    await again.close();
  });

  it("turned off through the pipeline (PUT /api/settings), open sessions close at the commit", async () => {
    const client = await agentsClient(s.operator);
    await client.listTools();
    expect(s.hal0.mcp.agents.sessionCount).toBeGreaterThan(0);
    const put = await s.call("PUT", "/api/settings", { body: { bridge: { enabled: false } } });
    expect(put.status).toBe(200);
    expect(s.hal0.mcp.agents.sessionCount).toBe(0);
    await client.close().catch(() => undefined);
    expect((await s.call("PUT", "/api/settings", { body: { bridge: { enabled: true } } })).status).toBe(200);
    expect((await initialize(s.operator)).status).toBe(200);
  });
});

describe("hal0 bridge admit | list | revoke (against the server's state folder)", () => {
  async function bridge(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    const io = captureIo({}, s.config);
    const code = await main(["bridge", ...args, "--config", s.config, "--state", s.state], io);
    return { code, out: io.out(), err: io.err() };
  }

  it("admit prints the token once and client config that connects; list shows the admission; revoke ends it", async () => {
    const admit = await bridge("admit", "claude-code", "--profiles", "coder,writer", "--url", s.url, "--json");
    expect(admit.code).toBe(0);
    const out = JSON.parse(admit.out) as { token: { token: string; scopes: string[]; profiles: string[]; kind: string }; url: string; configs: { claude_code: string; codex: string; cursor: string } };
    expect(out.token).toMatchObject({ kind: "agent", scopes: ["mcp:agents"], profiles: ["coder", "writer"] });
    expect(out.token.token).toMatch(/^hal0_ag_/);
    expect(out.url).toBe(`${s.url}/mcp/agents`);
    expect(admit.err).not.toContain(out.token.token);
    // Claude Code's line, Codex's block and Cursor's file each name the mount and the header.
    expect(out.configs.claude_code).toBe(`claude mcp add --transport http hal0-agents ${s.url}/mcp/agents --header "Authorization: Bearer ${out.token.token}"`);
    const codex = parseToml(out.configs.codex) as { mcp_servers: Record<string, { url: string; http_headers: Record<string, string> }> };
    expect(codex.mcp_servers["hal0-agents"]).toEqual({ url: `${s.url}/mcp/agents`, http_headers: { Authorization: `Bearer ${out.token.token}` } });
    const cursor = JSON.parse(out.configs.cursor) as { mcpServers: Record<string, { url: string; headers: Record<string, string> }> };
    const server = cursor.mcpServers["hal0-agents"]!;
    const client = new Client({ name: "cursor-config", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: server.headers } }));
    expect((await call(client, "agent_profile_list", {})).body.profiles).toEqual(["coder", "writer"]);
    await client.close();

    // The human form prints the token on stdout's first line, then the three configs.
    const human = await bridge("admit", "codex", "--url", s.url);
    expect(human.code).toBe(0);
    const [first, ...rest] = human.out.split("\n");
    expect(first).toMatch(/^hal0_ag_/);
    expect(rest.join("\n")).toContain(`[mcp_servers.hal0-agents]\nurl = "${s.url}/mcp/agents"`);

    expect((await bridge("admit", "claude-code")).code).toBe(1);
    const list = JSON.parse((await bridge("list", "--json")).out) as { admissions: Array<{ name: string; profiles: unknown; revoked_at: string | null }> };
    expect(list.admissions).toEqual(expect.arrayContaining([
      expect.objectContaining({ name: "claude-code", profiles: ["coder", "writer"], revoked_at: null }),
      expect.objectContaining({ name: "codex", profiles: "all" }),
    ]));
    expect(list.admissions.map((a) => a.name)).not.toContain("plain-agent"); // a plain agent token is no admission
    expect((await bridge("list")).out).toMatch(/claude-code\s+coder,writer\s+created /);

    const revoke = await bridge("revoke", "claude-code");
    expect(revoke.code).toBe(0);
    const refused = await initialize(out.token.token);
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe("auth.invalid_token");
    expect((await bridge("revoke", "claude-code")).err).toContain("bridge.not_admitted");
    const all = JSON.parse((await bridge("list", "--all", "--json")).out) as { admissions: Array<{ name: string; revoked_at: string | null }> };
    expect(all.admissions.find((a) => a.name === "claude-code")!.revoked_at).not.toBeNull();
    expect((await bridge("admit", "bad name")).err).toContain("auth.name_invalid");
    expect((await bridge("admit", "x", "--profiles", "../etc")).err).toContain("auth.name_invalid");
  });

  it("--url is an http(s) address; the Claude Code line quotes it as one shell word", async () => {
    for (const url of ["not a url; rm -rf ~", "ftp://x/", "file:///etc/passwd"]) {
      const r = await bridge("admit", "u1", "--url", url);
      expect(`${url} → ${r.code}`).toBe(`${url} → 64`);
      expect(r.out).toBe("");
    }
    expect(s.hal0.tokens.list().map((t) => t.name)).not.toContain("u1");
    const odd = "http://box.lan:8080/x'$(touch pwned);y";
    const admit = await bridge("admit", "u2", "--url", odd, "--json");
    expect(admit.code, admit.err).toBe(0);
    const { configs, url } = JSON.parse(admit.out) as { url: string; configs: { claude_code: string } };
    expect(url).toBe(`${odd}/mcp/agents`);
    const args = execFileSync("sh", ["-c", `claude() { printf '%s\\n' "$@"; }; ${configs.claude_code}`], { cwd: mkdtempSync(join(tmpdir(), "hal0-sh-")), encoding: "utf8" }).trimEnd().split("\n");
    expect(args).toEqual(["mcp", "add", "--transport", "http", "hal0-agents", url, "--header", expect.stringMatching(/^Authorization: Bearer hal0_ag_/)]);
  });

  it("admits to any profile name the bridge serves (either case, up to 56), one by one", async () => {
    const long = `P${"x".repeat(55)}`;
    const admit = await bridge("admit", "carol", "--profiles", `MyProfile,${long}`, "--url", s.url, "--json");
    expect(admit.code, admit.err).toBe(0);
    expect(JSON.parse(admit.out).token.profiles).toEqual([long, "MyProfile"].sort());
    expect((await bridge("admit", "dave", "--profiles", `${long}x`)).err).toContain("auth.name_invalid");
  });

  it("refuses Hermes's own identities, the owner's name and a name that reads as an option", async () => {
    for (const name of ["hermes", "hermes__writer", "owner"]) {
      const r = await bridge("admit", name, "--profiles", "writer");
      expect(`${name} → ${r.code}`).toBe(`${name} → 1`);
      expect(r.err).toContain("auth.name_invalid");
      expect(r.out).toBe("");
    }
    const io = captureIo({}, s.config);
    const dash = await main(["bridge", "admit", "--config", s.config, "--state", s.state, "--", "-x"], io);
    expect(dash).toBe(1);
    expect(io.err()).toContain("auth.name_invalid");
    const names = s.hal0.tokens.list().map((t) => t.name);
    for (const name of ["-x", "owner"]) expect(s.hal0.tokens.list().filter((t) => t.name === name && t.kind === "agent")).toEqual([]);
    expect(names).not.toContain("hermes__writer");
  });
});

describe("hal0 bridge admit to a profile that is not there", () => {
  it("warns for each named profile [hermes] home holds no folder of, naming the one of another case it may have meant; the admission stands as asked", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-admit-"));
    try {
      const config = join(dir, "etc");
      mkdirSync(config);
      writeFileSync(join(config, "hal0.toml"), '[hermes]\nhome = "../hermes"\n');
      for (const p of ["coder", "writer"]) mkdirSync(join(dir, "hermes", "profiles", p), { recursive: true });
      openDb(join(dir, "state")).close(); // a served state folder
      const bridge = async (...args: string[]) => {
        const io = captureIo({}, config);
        const code = await main(["bridge", ...args, "--config", config, "--state", join(dir, "state"), "--url", "http://127.0.0.1:43090"], io);
        return { code, out: io.out(), err: io.err() };
      };
      const admit = await bridge("admit", "typo", "--profiles", "Coder,writer,later", "--json");
      expect(admit.code, admit.err).toBe(0);
      expect((JSON.parse(admit.out) as { token: { profiles: string[] } }).token.profiles).toEqual(["Coder", "later", "writer"]);
      const home = `${config}/../hermes`;
      expect(admit.err).toContain(`warning: no Hermes profile Coder in ${home}/profiles (profile names are case-sensitive: did you mean coder?)`);
      expect(admit.err).toContain(`warning: no Hermes profile later in ${home}/profiles (there are: coder, writer)`);
      expect(admit.err).not.toContain("profile writer");
      const exact = await bridge("admit", "right", "--profiles", "coder");
      expect(exact.code).toBe(0);
      expect(exact.err).not.toContain("warning");
      expect((await bridge("admit", "everyone")).err).not.toContain("warning");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
