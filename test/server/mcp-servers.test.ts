import { mkdirSync, readFileSync, statSync, writeFileSync, existsSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { proposeOnly } from "../../server/dispatch.js";
import { ROUTES } from "../../server/routes/index.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callMemory, callTool, memoryClient } from "./mcp-helpers.js";

/** A real MCP server on loopback, made with the SDK (a stand-in for a third-party one): three tools. */
async function inventoryServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const http: Server = createServer(async (req, res) => {
    const server = new McpServer({ name: "inventory", version: "1.2.3" });
    for (const name of ["search", "fetch", "delete_all"]) server.registerTool(name, { description: `${name} the inventory` }, async () => ({ content: [{ type: "text", text: name }] }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on("close", () => void transport.close());
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, close: () => new Promise<void>((resolve) => { http.closeAllConnections(); http.close(() => resolve()); }) };
}

let s: TestServer;
let inventory: { url: string; close: () => Promise<void> };
let hermes: string;
beforeEach(async () => {
  s = await startTestServer();
  inventory = await inventoryServer();
  hermes = join(s.config, "..", "hermes");
  for (const p of ["coder", "hal0-brain"]) {
    mkdirSync(join(hermes, "profiles", p), { recursive: true });
    writeFileSync(join(hermes, "profiles", p, "config.yaml"), `# ${p}'s own settings\nmodel: qwen3\n`);
  }
  const file = join(s.config, "hal0.toml");
  writeFileSync(file, `${readFileSync(file, "utf8")}\n[hermes]\nhome = "${hermes}"\n`);
});
afterEach(async () => {
  await s.close();
  await inventory.close();
});

const profile = (p: string) => parse(readFileSync(join(hermes, "profiles", p, "config.yaml"), "utf8")) as { mcp_servers?: Record<string, any>; model?: string };
const manifest = () => ({ id: "inventory", name: "Inventory", description: "The household inventory", transport: "streamable-http", url: inventory.url, tools: ["search", "fetch", "delete_all"], author: "us" });

describe("the Hermes join is a commit observer", () => {
  it("a plan of the exposure change, applied by id, converges the Hermes files as the route does", async () => {
    expect((await s.call("POST", "/api/mcp/install", { body: { manifest: manifest() } })).status).toBe(201);
    expect(profile("coder").mcp_servers?.inventory).toBeUndefined();
    const route = ROUTES.find((r) => r.method === "PATCH" && r.path === "/api/mcp/{server_id}/exposure")!;
    const { intent } = await proposeOnly(s.hal0, route, { params: { server_id: "inventory" }, query: {}, body: { hermes: true }, caller: { kind: "operator", agent: "owner", private: false, via: "rest" }, requestId: "t" });
    const planned = await s.call("POST", "/api/plans", { body: intent.changes });
    expect(planned.body.valid, JSON.stringify(planned.body)).toBe(true);
    expect((await s.call("POST", `/api/plans/${planned.body.id}/apply`)).status).toBe(200);
    expect(profile("coder").mcp_servers?.inventory).toMatchObject({ url: inventory.url });
  });
});

describe("installed MCP servers, end to end", () => {
  it("shows how many resources and prompts an installed server's manifest named, as it does its tools (seed 001's InstalledServer)", async () => {
    const installed = await s.call("POST", "/api/mcp/install", { body: { manifest: { ...manifest(), resources: ["inventory://items"], prompts: ["summarise", "audit"] } } });
    expect(installed.body.installed, JSON.stringify(installed.body)).toMatchObject({ tools: 3, resources: 1, prompts: 2 });
    expect(readFileSync(join(s.config, "mcp-servers/inventory.toml"), "utf8")).toMatch(/^resources_count = 1$/m);
    const listed = (await s.call("GET", "/api/mcp/servers")).body.servers.find((x: any) => x.id === "inventory");
    expect(listed).toMatchObject({ tools: 3, resources: 1, prompts: 2 });
  });

  it("installs by manifest, tests it, changes its tools and exposure (the Hermes files follow), and uninstalls it", async () => {
    const installed = await s.call("POST", "/api/mcp/install", { body: { manifest: manifest() } });
    expect(installed.status, JSON.stringify(installed.body)).toBe(201);
    expect(installed.body.installed).toMatchObject({ id: "inventory", transport: "streamable-http", url: inventory.url, tools: 3, resources: 0, prompts: 0, enabled: true, exposure: { hermes: false } });
    expect(installed.body.hermes_sync).toMatchObject({ hermes: { profiles: ["coder"] }, brain: { present: true }, errors: [], probe: "reachable" });
    const file = join(s.config, "mcp-servers/inventory.toml");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8")).toMatch(/^url = "http:\/\/127\.0\.0\.1:\d+\/mcp"$/m);
    expect((await s.call("POST", "/api/mcp/install", { body: { manifest: manifest() } })).body.error.code).toBe("mcp.already_installed");

    const listed = (await s.call("GET", "/api/mcp/servers")).body.servers;
    const byId = new Map(listed.map((x: any) => [x.id, x]));
    expect(byId.get("hal0-memory")).toMatchObject({ bundled: true, state: "running", tools_count: 26 });
    expect((byId.get("hal0-admin") as any).tools.map((t: any) => t.name)).toContain("slot_list");
    expect(byId.get("inventory")).toMatchObject({ bundled: false, state: "reachable" });
    expect(byId.get("github")).toMatchObject({ transport: "stdio", state: "stopped" });
    expect(byId.get("sqlite")).toMatchObject({ state: "unreachable" }); // fixtures/box: nothing listens on :9300

    const tested = await s.call("POST", "/api/mcp/inventory/test");
    expect(tested.body.probe).toMatchObject({ ok: true, server: { name: "inventory", version: "1.2.3" } });
    expect(tested.body.verdicts).toEqual([{ tool: "delete_all", verdict: "unknown_tool" }, { tool: "fetch", verdict: "unknown_tool" }, { tool: "search", verdict: "unknown_tool" }]);

    expect((await s.call("PATCH", "/api/mcp/inventory/tools", { body: { allow: ["search"], blocked: ["search"] } })).body.error.code).toBe("mcp.tools_invalid");
    const policy = await s.call("PATCH", "/api/mcp/inventory/tools", { body: { allow: ["search", "fetch"], blocked: ["delete_all"] } });
    expect(policy.body.server.tool_policy).toEqual({ allow: ["fetch", "search"], gated: [], blocked: ["delete_all"] });
    expect((await s.call("POST", "/api/mcp/inventory/test")).body.verdicts.map((v: any) => v.verdict)).toEqual(["blocked", "allow", "allow"]);

    const exposed = await s.call("PATCH", "/api/mcp/inventory/exposure", { body: { hermes: true } });
    expect(exposed.body.hermes_sync).toMatchObject({ hermes: { changed: ["coder"] }, brain: { changed: false }, errors: [] });
    expect(profile("coder").mcp_servers!.inventory).toEqual({ type: "http", url: inventory.url, timeout: 60, tools: { include: ["fetch", "search"], exclude: ["delete_all"] } });
    expect(readFileSync(join(hermes, "profiles/coder/config.yaml"), "utf8")).toMatch(/^# coder's own settings\nmodel: qwen3\n/);
    expect(profile("hal0-brain").mcp_servers!.inventory).toBeUndefined();
    expect((await s.call("PATCH", "/api/mcp/inventory/exposure", { body: { brain: true } })).body.hermes_sync.brain.changed).toBe(true);
    expect(profile("hal0-brain").mcp_servers!.inventory).toBeDefined();
    expect((await s.call("PATCH", "/api/mcp/inventory/tools", { body: { gated: ["delete_all"] } })).body.error.code).toBe("mcp.exposure_policy_unenforced");

    const off = await s.call("PATCH", "/api/mcp/inventory/config", { body: { enabled: false, env: { INVENTORY_REGION: "attic" } } });
    // Every env value of an installed server is masked on reads (test/server/secrets.test.ts); the file has it.
    expect(off.body.server).toMatchObject({ enabled: false, env: { INVENTORY_REGION: "[redacted]" } });
    expect(readFileSync(join(s.config, "mcp-servers/inventory.toml"), "utf8")).toContain('INVENTORY_REGION = "attic"');
    expect(profile("coder").mcp_servers!.inventory).toBeUndefined();
    expect((await s.call("GET", "/api/mcp/servers")).body.servers.find((x: any) => x.id === "inventory").state).toBe("disabled");
    await s.call("PATCH", "/api/mcp/inventory/config", { body: { enabled: true } });
    expect(profile("coder").mcp_servers!.inventory).toBeDefined();

    expect((await s.call("POST", "/api/mcp/inventory/restart")).body.error.code).toBe("mcp.supervisor_unavailable");
    const history = (await s.call("GET", "/api/mcp/inventory/logs")).body;
    // Its install (the path names no server: the row names the one installed) and its start / stop / restart too.
    expect(history.events.map((e: any) => e.route)).toEqual(expect.arrayContaining(["POST /api/mcp/install", "PATCH /api/mcp/{server_id}/exposure", "PATCH /api/mcp/{server_id}/tools", "POST /api/mcp/{server_id}/test", "POST /api/mcp/{server_id}/{action}"]));
    expect(history.events.filter((e: any) => e.route === "POST /api/mcp/install")).toHaveLength(1); // the refused second install is not its event
    const gone = await s.call("DELETE", "/api/mcp/inventory");
    expect(gone.body).toMatchObject({ uninstalled: "inventory", hermes_sync: { hermes: { changed: ["coder"] }, brain: { changed: true } } });
    expect(existsSync(file)).toBe(false);
    expect(profile("coder").mcp_servers!.inventory).toBeUndefined();
    expect(profile("hal0-brain").mcp_servers!.inventory).toBeUndefined();
    expect(profile("coder").mcp_servers!["hal0-admin"]).toBeDefined();
    const logs = await s.call("GET", "/api/mcp/inventory/logs");
    expect(logs.body.error.code).toBe("mcp.not_found");
  });

  it("never takes over a person's own entry of the same id in a profile: it is left as it is, the server not wired there, and the join says so", async () => {
    const own = "# coder's own settings\nmodel: qwen3\nmcp_servers:\n  inventory:\n    url: https://inventory.example.com/mcp\n    headers:\n      Authorization: Bearer my-own-token\n";
    writeFileSync(join(hermes, "profiles/coder/config.yaml"), own);
    expect((await s.call("POST", "/api/mcp/install", { body: { manifest: manifest() } })).status).toBe(201);
    const exposed = await s.call("PATCH", "/api/mcp/inventory/exposure", { body: { hermes: true } });
    expect(exposed.status, JSON.stringify(exposed.body)).toBe(200);
    expect(exposed.body.hermes_sync.errors).toEqual([{ profile: "coder", code: "hermes.entry_taken", message: expect.stringContaining("mcp_servers.inventory is an entry hal0 did not write") }]);
    expect(profile("coder").mcp_servers!.inventory).toEqual({ url: "https://inventory.example.com/mcp", headers: { Authorization: "Bearer my-own-token" } });
    expect(profile("coder").mcp_servers!["hal0-admin"]).toBeDefined(); // the rest of the profile is wired as ever
    expect((await s.call("DELETE", "/api/mcp/inventory")).status).toBe(200);
    expect(profile("coder").mcp_servers!.inventory).toEqual({ url: "https://inventory.example.com/mcp", headers: { Authorization: "Bearer my-own-token" } });
  });

  it("refuses what it cannot do, with the seed's codes", async () => {
    await s.call("POST", "/api/mcp/install", { body: { manifest: manifest() } });
    const cases: Array<[string, string, unknown, number, string]> = [
      ["DELETE", "/api/mcp/hal0-admin", undefined, 409, "mcp.bundled"],
      ["PATCH", "/api/mcp/hal0-memory/config", { enabled: false }, 409, "mcp.bundled"],
      ["POST", "/api/mcp/install", { manifest: { ...manifest(), id: "hal0-memory" } }, 409, "mcp.bundled"],
      ["POST", "/api/mcp/install", { manifest: { ...manifest(), id: "Bad Id" } }, 400, "mcp.id_invalid"],
      ["POST", "/api/mcp/install", { manifest: { id: "x" } }, 422, "mcp.manifest_invalid"],
      ["DELETE", "/api/mcp/nope", undefined, 404, "mcp.not_found"],
      ["PATCH", "/api/mcp/inventory/exposure", {}, 400, "mcp.exposure_invalid"],
      ["PATCH", "/api/mcp/inventory/exposure", { hermes: "yes" }, 400, "mcp.exposure_invalid"],
      ["PATCH", "/api/mcp/inventory/exposure", { openwebui: true }, 501, "mcp.exposure_unsupported"],
      ["PATCH", "/api/mcp/github/exposure", { hermes: true }, 409, "mcp.exposure_needs_supervisor"],
      ["POST", "/api/mcp/github/test", undefined, 501, "mcp.supervisor_unavailable"],
      ["POST", "/api/mcp/inventory/restart", undefined, 501, "mcp.supervisor_unavailable"],
      ["GET", "/api/mcp/resolve?url=ftp://example.com/x", undefined, 400, "mcp.spec_unsupported"],
      ["GET", "/api/mcp/resolve?url=https://127.0.0.1/manifest.json", undefined, 403, "mcp.ssrf_blocked"],
      ["GET", "/api/mcp/resolve?url=https://0x7f.1/manifest.json", undefined, 403, "mcp.ssrf_blocked"],
    ];
    for (const [method, path, body, status, code] of cases) {
      const res = await s.call(method, path, body === undefined ? {} : { body });
      expect([res.status, res.body.error?.code], `${method} ${path} ${JSON.stringify(body)}`).toEqual([status, code]);
    }
  });

  it("a refusal's message is redacted over REST and MCP: a URL's key quoted in it is masked", async () => {
    const url = "http://example.com/m.json?key=AIzaSyFAKE0123456789&x=1";
    const rest = await s.call("GET", `/api/mcp/resolve?url=${encodeURIComponent(url)}`);
    expect(rest.body.error.code).toBe("mcp.spec_unsupported");
    expect(rest.body.error.message).toContain("?key=[redacted]&x=1");
    const client = await adminClient(s.url, { token: s.operator });
    try {
      const mcp = await callTool(client, "mcp_server_install", { url });
      expect(mcp.isError).toBe(true);
      expect(mcp.body.error.message).toContain("?key=[redacted]&x=1");
      expect(mcp.body.error.message).not.toContain("AIzaSyFAKE");
    } finally {
      await client.close();
    }
  });

  it("uninstalls a server whose file does not compile (a hand edit): removing it is the repair", async () => {
    const file = join(s.config, "mcp-servers/broken.toml");
    writeFileSync(file, 'name = "Broken"\nspec = "npm:broken"\ntransport = "stdio"\n'); // stdio without command
    expect((await s.call("PATCH", "/api/mcp/github/config", { body: { enabled: false } })).body.error.code).toBe("config.invalid");
    const gone = await s.call("DELETE", "/api/mcp/broken");
    expect(gone.status, JSON.stringify(gone.body)).toBe(200);
    expect(gone.body).toMatchObject({ uninstalled: "broken" });
    expect(existsSync(file)).toBe(false);
    expect((await s.call("PATCH", "/api/mcp/github/config", { body: { enabled: false } })).status).toBe(200);
    expect((await s.call("DELETE", "/api/mcp/broken")).body.error.code).toBe("mcp.not_found");
  });

  it("does not install over a server's file that is there but does not compile (a hand edit in progress): it is kept as written", async () => {
    const file = join(s.config, "mcp-servers/inventory.toml");
    const text = '# notes I keep about it\nname = "Mine"\nspec = "npm:inventory"\ntransport = "stdio"\n'; // stdio without command
    writeFileSync(file, text);
    const res = await s.call("POST", "/api/mcp/install", { body: { manifest: manifest() } });
    expect([res.status, res.body.error?.code], JSON.stringify(res.body)).toEqual([409, "mcp.already_installed"]);
    expect(readFileSync(file, "utf8")).toBe(text);
  });

  it("resolves package specs without fetching, and installs one as a stdio record", async () => {
    const resolved = await s.call("GET", `/api/mcp/resolve?url=${encodeURIComponent("npm:@modelcontextprotocol/server-puppeteer")}`);
    expect(resolved.body).toMatchObject({ transport: "stdio", command: "npx", source_kind: "npm" });
    const installed = await s.call("POST", "/api/mcp/install", { body: { url: "uvx:mcp-server-time" } });
    expect(installed.status, JSON.stringify(installed.body)).toBe(201);
    expect(installed.body.installed).toMatchObject({ transport: "stdio", command: "uvx", args: ["mcp-server-time"] });
    expect((await s.call("GET", "/api/mcp/servers")).body.servers.find((x: any) => x.id === installed.body.installed.id).state).toBe("stopped");
  });
});

  it("installs from a plain-http manifest URL where HAL0_MCP_FETCH_INSECURE_HTTP and the allow list let resolve fetch it", async () => {
    const host = createServer((_req, res) => void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(manifest())));
    const port = await new Promise<number>((resolve) => host.listen(0, "127.0.0.1", () => resolve((host.address() as AddressInfo).port)));
    const saved = { allow: process.env.HAL0_MCP_FETCH_ALLOW, insecure: process.env.HAL0_MCP_FETCH_INSECURE_HTTP };
    process.env.HAL0_MCP_FETCH_ALLOW = `127.0.0.1:${port}`;
    process.env.HAL0_MCP_FETCH_INSECURE_HTTP = "1";
    try {
      const url = `http://127.0.0.1:${port}/manifest.json`;
      expect((await s.call("GET", `/api/mcp/resolve?url=${encodeURIComponent(url)}`)).body).toMatchObject({ id: "inventory", spec: url });
      const installed = await s.call("POST", "/api/mcp/install", { body: { url } });
      expect(installed.status, JSON.stringify(installed.body)).toBe(201);
      expect(installed.body.installed).toMatchObject({ id: "inventory", spec: url, source_url: url, url: inventory.url });
    } finally {
      for (const [key, value] of [["HAL0_MCP_FETCH_ALLOW", saved.allow], ["HAL0_MCP_FETCH_INSECURE_HTTP", saved.insecure]] as const) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
      await new Promise((resolve) => host.close(resolve));
    }
  });

describe("clients, catalog, logs and the event stream", () => {
  it("knows MCP clients from the audit log and streams their tool calls", async () => {
    const events: string[] = [];
    const stream = request(`${s.url}/api/mcp/stream`, { headers: { authorization: `Bearer ${s.operator}` } }, (res) => res.on("data", (chunk: Buffer) => events.push(chunk.toString())));
    stream.end();
    await new Promise((r) => setTimeout(r, 200));
    const mem = await memoryClient(s.url, "hermes__coder");
    await callMemory(mem, "memory_add", { text: "streamed" });
    await mem.close();
    const admin = await adminClient(s.url, "claude-code");
    expect((await callTool(admin, "mcp_server_list", {})).body.count).toBeGreaterThanOrEqual(2);
    const queued = (await callTool(admin, "mcp_server_install", { manifest: manifest() })).body;
    expect(queued).toMatchObject({ status: "pending_approval", detail: expect.stringContaining("install MCP server inventory") });
    await admin.close();
    expect((await s.call("POST", `/api/agent/approvals/${queued.approval_id}/approve`)).body.approval).toMatchObject({ state: "executed", result: { installed: { id: "inventory" } } });
    expect(existsSync(join(s.config, "mcp-servers/inventory.toml"))).toBe(true);
    const clients = (await s.call("GET", "/api/mcp/clients")).body.clients;
    expect(clients.find((c: any) => c.id === "hermes__coder")).toMatchObject({ role: "hermes", connected_to: ["hal0-memory"] });
    expect(clients.find((c: any) => c.id === "claude-code")).toMatchObject({ role: "agent", connected_to: ["hal0-admin"] });
    expect((await s.call("GET", "/api/mcp/hal0-memory/logs?limit=5")).body.events[0]).toMatchObject({ tool: "memory_add", actor: "agent:hermes__coder" });
    expect((await s.call("GET", "/api/mcp/hal0-memory/logs?limit=0")).status).toBe(422);
    const catalog = (await s.call("GET", "/api/mcp/catalog")).body;
    expect(catalog.items.map((i: any) => i.id)).toEqual(expect.arrayContaining(["puppeteer", "sqlite", "gdrive", "slack"]));
    expect(catalog.categories).toContain("data");
    for (let i = 0; i < 30 && !events.join("").includes("event: mcp.tool.pending_approval"); i++) await new Promise((r) => setTimeout(r, 100));
    stream.destroy();
    const text = events.join("");
    expect(text).toContain("event: mcp.tool.ok");
    expect(text).toMatch(/"tool":"memory_add","server":"hal0-memory"/);
    expect(text).toContain("event: mcp.tool.pending_approval");
  });
});
