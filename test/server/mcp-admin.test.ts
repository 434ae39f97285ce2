import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from "vitest";
import { httpCall, startTestServer, type TestServer } from "./harness.js";
import { SESSIONS_PER_IDENTITY } from "../../server/mcp/endpoint.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { until, untilTrue } from "../helpers/until.js";
import { adminClient, callTool } from "./mcp-helpers.js";
import { TUNE_KEYS } from "../../schema/index.js";

let s: TestServer;
let clients: Client[] = [];
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => {
  for (const c of clients) await c.close();
  clients = [];
  await s.close();
});
async function client(agent?: string | { token: string }): Promise<Client> {
  const c = await adminClient(s.url, agent);
  clients.push(c);
  return c;
}

describe("hal0-admin over MCP (the SDK's own client, real HTTP)", () => {
  it("lists the tools of the route table with {args} schemas and annotations; excluded and blocked tools are absent", async () => {
    const { tools } = await (await client("hermes__coder")).listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of ["slot_list", "slot_edit", "slot_create", "plan_propose", "plan_submit", "approval_list", "memory_search"]) expect(byName.has(name), name).toBe(true);
    for (const name of ["approval_approve", "approval_deny", "logs_tail", "model_delete", "stack_apply"]) expect(byName.has(name), name).toBe(false);
    const edit = byName.get("slot_edit")!.inputSchema as any;
    expect(edit.required).toEqual(["args"]);
    expect(edit.properties.args.required).toEqual(["name"]);
    expect(edit.properties.args.properties.name.type).toBe("string");
    expect(edit.properties.args.properties.tune).toBeDefined();
    // slot_edit's body is not one plain object: advertised open (the route judges it); it takes `base`, as every write does.
    expect(edit.properties.args.additionalProperties).toEqual({});
    expect(edit.properties.args.properties.base.type).toBe("string");
    // A tool whose route refuses what it does not take says so: a read without a query, a read with one, an action without a body.
    for (const name of ["slot_list", "plan_list", "slot_restart"]) expect((byName.get(name)!.inputSchema as any).properties.args.additionalProperties, name).toBe(false);
    expect((byName.get("slot_list")!.inputSchema as any).properties.args.properties).toEqual({});
    expect(byName.get("slot_list")!.annotations).toMatchObject({ readOnlyHint: true });
    expect(byName.get("slot_delete")!.annotations).toMatchObject({ destructiveHint: true });
    // A write that may change or remove what is there is destructive, whatever its method; one that only adds is not.
    for (const name of ["plan_submit", "model_config_write", "config_write", "slot_edit", "slot_restart", "upstream_update", "model_pull_cancel"]) expect(byName.get(name)!.annotations, name).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    for (const name of ["slot_create", "plan_propose", "upstream_create", "mcp_server_install"]) expect(byName.get(name)!.annotations, name).toMatchObject({ readOnlyHint: false, destructiveHint: false });
    // Testing an upstream sends one GET to it and changes nothing (seed 001 lists it among the reads): read-only, not destructive.
    expect(byName.get("upstream_test")!.annotations).toEqual({ readOnlyHint: true, openWorldHint: true });
    // An install given {url} fetches the manifest there: it reaches outside the box.
    expect(byName.get("mcp_server_install")!.annotations).toMatchObject({ openWorldHint: true });
    const other = new Set((await (await client("someone_else")).listTools()).tools.map((t) => t.name));
    expect(other.has("model_delete")).toBe(true);
  });

  it("advertises what each tool takes: the fields its route cannot do without as required, a narrower tool's own body, a union's fields as hints", async () => {
    const { tools } = await (await client("someone_else")).listTools();
    const args = (name: string) => (tools.find((t) => t.name === name)!.inputSchema as any).properties.args;
    expect(args("model_store_probe").required).toEqual(["path"]);
    expect(args("provider_credential_write").required).toEqual(["name", "value"]);
    // slot_create and slot_edit pass a slot file's keys through to the compiler: they advertise those keys (seed 001: a profile, model and
    // placement, plus sparse tune overrides), the create with what a slot file cannot do without, the edit with null (removes a key) and no defaults.
    expect(args("slot_create")).toMatchObject({ required: ["name", "profile", "port"], additionalProperties: {} });
    expect(Object.keys(args("slot_create").properties)).toEqual(expect.arrayContaining(["profile", "model", "port", "type", "placement", "tune", "server"]));
    expect(Object.keys(args("slot_create").properties.tune.properties).sort()).toEqual([...TUNE_KEYS].sort());
    const edit = args("slot_edit");
    expect(edit).toMatchObject({ required: ["name"], additionalProperties: {} });
    expect(Object.keys(edit.properties)).toEqual(expect.arrayContaining(["profile", "model", "port", "placement", "tune", "server"]));
    const tune = edit.properties.tune.anyOf.find((b: any) => b.type === "object");
    expect(Object.keys(tune.properties).sort()).toEqual([...TUNE_KEYS].sort());
    expect(tune.properties.ctx_size.anyOf).toContainEqual({ type: "null" });
    expect(JSON.stringify(edit)).not.toContain('"default"');
    // model_register, model_validate and model_edit take a model's file facts as top-level fields (seed 001): they advertise them; an edit's null unpairs a drafter.
    for (const name of ["model_register", "model_validate", "model_edit"]) {
      expect(Object.keys(args(name).properties), name).toEqual(expect.arrayContaining(["path", "chat_template", "tokenizer_repo", "mtp", "jinja", "draft", "mmproj"]));
      expect(args(name).additionalProperties, name).toEqual({});
    }
    expect(args("model_register").required).toEqual(["id"]);
    expect(args("model_edit").required).toEqual(["model_id"]);
    expect(args("model_edit").properties.draft.anyOf).toContainEqual({ type: "null" });
    // A yes/no query parameter is a JSON boolean over MCP (dry_run: true, as the docs write it), not the text a URL carries.
    for (const [name, field] of [["model_list", "installed"], ["capability_list", "summary"], ["stack_apply", "dry_run"], ["config_write", "dry_run"], ["slot_unload", "force"]] as const) {
      expect(args(name).properties[field], `${name}.${field}`).toEqual({ type: "boolean" });
    }
    expect(args("provider_list").properties.probe).toEqual({ type: "boolean", default: true });
    const c = await client("someone_else");
    expect((await callTool(c, "capability_list", { summary: true })).body).toHaveProperty("summary");
    expect((await callTool(c, "model_list", { installed: false, fields: "id" })).isError).toBe(false);
    // model_assign takes `model` only (seed 003), not slot_edit's body: so it says.
    expect(args("model_assign")).toMatchObject({ required: ["name", "model"], additionalProperties: false });
    expect(Object.keys(args("model_assign").properties).sort()).toEqual(["base", "model", "name"]);
    expect(args("model_inspect")).toMatchObject({ required: [], additionalProperties: {} });
    expect(Object.keys(args("model_inspect").properties)).toEqual(expect.arrayContaining(["path", "hf_repo", "hf_url"]));
  });

  it("keeps an open session's tools in step with policy.toml and tells the client (notifications/tools/list_changed)", async () => {
    const c = await client("hermes__probe");
    let changed = 0;
    c.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    const listed = async () => new Set((await c.listTools()).tools.map((t) => t.name));
    expect([(await listed()).has("slot_list"), (await listed()).has("logs_tail")]).toEqual([true, false]);
    const policy = join(s.config, "policy.toml");
    const before = readFileSync(policy, "utf8");
    // A hand edit: logs_tail is gated now, not blocked; slot_list is blocked for this agent.
    writeFileSync(policy, `${before.replace('blocked = ["logs_tail"]', "blocked = []").replace('gated = ["slot_edit"]', 'gated = ["slot_edit", "logs_tail"]')}\n[agents.hermes__probe]\nblocked = ["slot_list"]\n`);
    const now = await until(listed, (t) => !t.has("slot_list"));
    expect(now.has("logs_tail")).toBe(true);
    expect((await callTool(c, "slot_list", {})).body.error.code).toBe("mcp.tool_not_allowed");
    expect((await callTool(c, "logs_tail", {})).body.status).toBe("pending_approval");
    await untilTrue(() => changed === 1);
    // A change committed through the pipeline reaches the session without a request of its own.
    const made = await s.call("POST", "/api/plans", { body: { edits: [{ file: "policy.toml", op: "text", text: before }], summary: "policy as it was" } });
    expect((await s.call("POST", `/api/plans/${made.body.id}/apply`)).status).toBe(200);
    await untilTrue(() => changed === 2);
    expect([(await listed()).has("slot_list"), (await listed()).has("logs_tail")]).toEqual([true, false]);
  });

  it("a session whose token was revoked is told nothing of a policy change: it is closed, its event stream ended", async () => {
    const minted = s.hal0.tokens.mint("agent", "hermes__probe", ["mcp:admin"]);
    const c = await client({ token: minted.token });
    let changed = 0;
    c.setNotificationHandler(ToolListChangedNotificationSchema, () => void changed++);
    await c.listTools();
    expect((await s.call("POST", `/api/auth/tokens/${minted.id}/revoke`)).status).toBe(200);
    const before = readFileSync(join(s.config, "policy.toml"), "utf8");
    const made = await s.call("POST", "/api/plans", { body: { edits: [{ file: "policy.toml", op: "text", text: `${before}\n[agents.hermes__probe]\nblocked = ["slot_list"]\n` }], summary: "block slot_list for the probe" } });
    expect((await s.call("POST", `/api/plans/${made.body.id}/apply`)).status).toBe(200);
    await untilTrue(() => s.hal0.mcp.admin.sessionCount === 0);
    await new Promise((r) => setTimeout(r, 200));
    expect(changed).toBe(0);
  });

  it("runs a read and wraps nothing that is not a bare list; answered calls hold no memory in the transport", async () => {
    const c = await client();
    for (let i = 0; i < 20; i++) await callTool(c, "slot_list", {});
    expect(s.hal0.mcp.admin.heldStreams()).toBe(0);
    const res = await callTool(c, "slot_list", {});
    expect(res.isError).toBe(false);
    expect(res.body.count).toBe(res.body.slots.length);
    expect(res.body.slots.map((x: any) => x.name)).toContain("chat");
    // An argument the tool does not take is refused, as its schema advertises (additionalProperties: false).
    const extra = await callTool(c, "slot_list", { bogus: 1 });
    expect(extra.isError).toBe(true);
    expect(extra.body.error).toMatchObject({ code: "validation.invalid", details: { fields: [{ loc: ["query"], msg: 'Unrecognized key: "bogus"' }] } });
  });

  it("bounds the sessions one identity holds: past the limit its least recently used one is closed, nobody else's", async () => {
    const other = await client("someone_else");
    const own: Client[] = [];
    for (let i = 0; i < SESSIONS_PER_IDENTITY; i++) own.push(await client("hermes__coder"));
    // The first is used again, so the second is now the least recently used.
    expect((await callTool(own[0]!, "slot_list", {})).isError).toBe(false);
    expect(s.hal0.mcp.admin.sessionCount).toBe(SESSIONS_PER_IDENTITY + 1);
    own.push(await client("hermes__coder"));
    expect(s.hal0.mcp.admin.sessionCount).toBe(SESSIONS_PER_IDENTITY + 1);
    await expect(callTool(own[1]!, "slot_list", {})).rejects.toThrow(/Session not found/);
    for (const c of [own[0]!, own[2]!, own.at(-1)!, other]) expect((await callTool(c, "slot_list", {})).isError).toBe(false);
  });

  it("a step of the wall clock closes no session as idle, and keeps the least recently used one the first to go: idleness is elapsed time", async () => {
    const own: Client[] = [];
    for (let i = 0; i < SESSIONS_PER_IDENTITY; i++) own.push(await client("hermes__coder"));
    // Only Date is faked, ticking on from where it is set, as a clock NTP steps does.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true });
    onTestFinished(() => void vi.useRealTimers());
    vi.setSystemTime(Date.now() + 2 * 3600_000); // two hours ahead: past the 30 min idle close, though no time passed
    expect((await callTool(own[0]!, "slot_list", {})).isError).toBe(false);
    expect(s.hal0.mcp.admin.sessionCount).toBe(SESSIONS_PER_IDENTITY);
    vi.setSystemTime(Date.now() - 4 * 3600_000); // and back: own[0] was used last, own[1] is still the least recently used
    expect((await callTool(own[2]!, "slot_list", {})).isError).toBe(false);
    own.push(await client("hermes__coder"));
    await expect(callTool(own[1]!, "slot_list", {})).rejects.toThrow(/Session not found/);
    for (const c of [own[0]!, own[2]!, own.at(-1)!]) expect((await callTool(c, "slot_list", {})).isError).toBe(false);
  });

  it("callers without a token hold no session: none closes or reaches another's, each request is served on its own", async () => {
    const first = await client();
    const own = await client("hermes__coder");
    // More anonymous clients than one identity's sessions: with a shared pool, the first would have been closed.
    for (let i = 0; i < SESSIONS_PER_IDENTITY + 2; i++) expect((await callTool(await client(), "slot_list", {})).isError).toBe(false);
    expect((await callTool(first, "slot_list", {})).isError).toBe(false);
    expect((await first.listTools()).tools.map((t) => t.name)).toContain("slot_list");
    expect(s.hal0.mcp.admin.sessionCount).toBe(1); // the token's own
    expect((await callTool(own, "slot_list", {})).isError).toBe(false);
    const headers = { accept: "application/json, text/event-stream" };
    const init = await httpCall(s.url, "POST", "/mcp/admin", { headers, body: { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } } });
    expect([init.status, init.headers.get("mcp-session-id")]).toEqual([200, null]);
    for (const method of ["GET", "DELETE"]) {
      const res = await httpCall(s.url, method, "/mcp/admin", { headers });
      expect([res.status, res.headers.get("allow")], method).toEqual([405, "POST"]);
    }
  });

  it("runs an autonomous write in process, audited with the caller's identity", async () => {
    const res = await callTool(await client("hermes__coder"), "model_swap", { name: "utility", model: "gemma-3-12b-it" });
    expect(res.isError, JSON.stringify(res.body)).toBe(false);
    expect(res.body.committed).toBe(true);
    const row = (await s.call("GET", "/api/activity?kind=mcp")).body.items[0];
    expect(row).toMatchObject({ actor: "agent:hermes__coder", kind: "mcp", tool: "model_swap", route: "POST /api/slots/{name}/swap", outcome: "ok" });
  });

  it("audits an agent's write refused while it is judged (a change that breaks the tree), one row, as REST does", async () => {
    const refused = await callTool(await client("hermes__coder"), "model_swap", { name: "utility", model: "no-such-model" });
    expect(refused.body.error?.code, JSON.stringify(refused.body)).toBe("config.invalid");
    const rest = await s.call("POST", "/api/slots/utility/swap", { body: { model: "no-such-model" }, as: "agent:hermes__coder" });
    expect(rest.body.error.code).toBe("config.invalid");
    const rows = (await s.call("GET", "/api/activity?actor=agent:hermes__coder")).body.items;
    expect(rows.map((r: any) => [r.kind, r.outcome, r.error_code])).toEqual([["rest", "error", "config.invalid"], ["mcp", "error", "config.invalid"]]);
    expect(rows[1]).toMatchObject({ tool: "model_swap", route: "POST /api/slots/{name}/swap", target: rows[0].target });
  });

  it("takes seed 003's argument names too: model_swap's model_id, slot_rename's new_name (one of the two names, not both)", async () => {
    const c = await client("someone_else");
    const swap = await callTool(c, "model_swap", { name: "utility", model_id: "gemma-3-12b-it" });
    expect(swap.isError, JSON.stringify(swap.body)).toBe(false);
    expect(readFileSync(join(s.config, "slots/utility.toml"), "utf8")).toMatch(/^model = "gemma-3-12b-it"$/m);
    const both = await callTool(c, "model_swap", { name: "utility", model_id: "gemma-3-12b-it", model: "gemma-3-12b-it" });
    expect(both.body.error).toMatchObject({ code: "validation.invalid", message: expect.stringContaining("give model (or model_id") });
    const rename = await callTool(c, "slot_rename", { name: "utility", new_name: "helper" });
    expect(rename.body).toMatchObject({ status: "pending_approval", detail: expect.stringContaining("rename slot utility to helper") });
    expect((await s.call("POST", `/api/agent/approvals/${rename.body.approval_id}/approve`)).status).toBe(200);
    expect((await s.call("GET", "/api/slots/helper")).status).toBe(200);
  });

  it("leaves out a query argument given as null (its default), as a client filling every optional field sends it, instead of searching for the text \"null\"", async () => {
    const c = await client();
    const bare = await callTool(c, "model_list", { fields: "id" });
    expect(bare.body.total).toBeGreaterThan(0);
    const nulls = await callTool(c, "model_list", { q: null, type: null, installed: null, limit: null, fields: "id" });
    expect(nulls.isError, JSON.stringify(nulls.body)).toBe(false);
    expect(nulls.body).toEqual(bare.body);
    const caps = await callTool(c, "capability_list", { section: null, summary: null });
    expect(caps.body).toEqual((await callTool(c, "capability_list", {})).body);
    // A query argument given a value is still judged: null is not a way around the route's checks.
    expect((await callTool(c, "capability_list", { section: "bogus" })).body.error.code).toBe("capability.unknown_section");
  });

  it("queues a gated call with its plan summary; the same call gets the same id, another call a new one; approving it over REST runs it", async () => {
    const c = await client("hermes__coder");
    const args = { name: "scratch", profile: "cpu-small", model: "qwen3-4b", port: 8150, type: "llm", enabled: false, placement: { device: "cpu" } };
    const first = await callTool(c, "slot_create", args);
    expect(first.isError, JSON.stringify(first.body)).toBe(false);
    expect(first.body).toMatchObject({ status: "pending_approval" });
    expect(first.body.detail).toContain(" — plan: no runtime change"); // the new slot is disabled
    expect((await callTool(c, "slot_create", args)).body.approval_id).toBe(first.body.approval_id);
    expect((await callTool(c, "slot_create", { ...args, port: 8151 })).body.approval_id).not.toBe(first.body.approval_id);
    const approval = (await s.call("GET", `/api/agent/approvals/${first.body.approval_id}`)).body.approval;
    expect(approval).toMatchObject({ tool: "slot_create", caller: { kind: "agent" as const, agent: "hermes__coder", via: "mcp" }, state: "pending" });
    const done = await s.call("POST", `/api/agent/approvals/${first.body.approval_id}/approve`);
    expect(done.body.approval.state, JSON.stringify(done.body)).toBe("executed");
    expect(readFileSync(join(s.config, "slots/scratch.toml"), "utf8")).toMatch(/profile = "cpu-small"/);
  });

  it("answers with the full error envelope, isError only then", async () => {
    const c = await client("hermes__coder");
    const missing = await callTool(c, "slot_status", { name: "nope" });
    expect(missing).toMatchObject({ isError: true, body: { status: "error", error: { code: "slot.not_found" }, http_status: 404 } });
    expect((await callTool(c, "model_delete", { model_id: "x" })).body.error.code).toBe("mcp.tool_not_allowed");
    expect((await callTool(c, "no_such_tool", {})).body.error.code).toBe("mcp.unknown_tool");
    expect((await callTool(c, "memory_search", {})).body.error).toMatchObject({ code: "mcp.memory_schema", detail: [{ path: "query" }] });
    expect((await callTool(c, "slot_status", {})).body.error.code).toBe("mcp.missing_arg");
  });

  it("refuses a tool call whose arguments are not an object with validation.invalid naming them, on every mount", async () => {
    const { memoryClient } = await import("./mcp-helpers.js");
    const admin = await client("hermes__coder");
    const memory = await memoryClient(s.url, "hermes__coder");
    clients.push(memory);
    for (const [c, tool] of [[admin, "slot_list"], [memory, "memory_list"]] as const) {
      for (const args of [[1], "str", 5, null]) {
        const res = (await c.callTool({ name: tool, arguments: args as never })) as { isError?: boolean; content: Array<{ text?: string }> };
        expect(res.isError, `${tool} ${JSON.stringify(args)}`).toBe(true);
        const body = JSON.parse(res.content[0]!.text!);
        expect(body.error, `${tool} ${JSON.stringify(args)}`).toMatchObject({ code: "validation.invalid", details: { fields: [{ loc: ["arguments"] }] } });
      }
      // No arguments at all is an empty object, as the protocol has it.
      expect((await c.callTool({ name: tool })).isError, tool).toBeFalsy();
    }
  });

  it("answers a tools/call that names no tool (no name, a number for one, no params) with -32602 invalid params naming the field, not -32603 internal error", async () => {
    const { memoryClient } = await import("./mcp-helpers.js");
    const { CallToolResultSchema, ListToolsResultSchema, McpError } = await import("@modelcontextprotocol/sdk/types.js");
    const admin = await client("hermes__coder");
    const memory = await memoryClient(s.url, "hermes__coder");
    clients.push(memory);
    const refusal = async (c: Client, method: string, params: unknown) => {
      const err = await c.request({ method, params } as never, method === "tools/list" ? ListToolsResultSchema : CallToolResultSchema).then(() => undefined, (e: unknown) => e);
      expect(err, `${method} ${JSON.stringify(params)}`).toBeInstanceOf(McpError);
      return err as InstanceType<typeof McpError>;
    };
    for (const c of [admin, memory]) {
      for (const [params, loc] of [[{ arguments: {} }, ["params", "name"]], [{ name: 5, arguments: "x" }, ["params", "name"]], [undefined, ["params"]]] as const) {
        const err = await refusal(c, "tools/call", params);
        expect(err.code, JSON.stringify(params)).toBe(-32602);
        expect(err.message).toMatch(/invalid params of tools\/call/);
        expect((err.data as { fields: unknown[] }).fields[0]).toMatchObject({ loc });
      }
      const list = await refusal(c, "tools/list", { cursor: 5 });
      expect(list.code).toBe(-32602);
      expect((list.data as { fields: unknown[] }).fields).toContainEqual(expect.objectContaining({ loc: ["params", "cursor"] }));
      // the session still serves
      expect((await c.listTools()).tools.length).toBeGreaterThan(0);
    }
  });

  it("lets agents propose plan diffs, then submit them for approval", async () => {
    const c = await client("hermes__coder");
    const proposed = await callTool(c, "plan_propose", { edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value: 77 }], summary: "chat first" });
    expect(proposed.body).toMatchObject({ valid: true, files: ["slots/chat.toml"] });
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).not.toMatch(/priority = 77/);
    expect((await callTool(c, "plan_show", { id: proposed.body.id })).body.changes.summary).toBe("chat first");
    const submitted = await callTool(c, "plan_submit", { id: proposed.body.id });
    expect(submitted.body.status).toBe("pending_approval");
    expect((await callTool(c, "plan_submit", { id: "pln_nope" })).body.error.code).toBe("plan.not_found");
    const approved = await s.call("POST", `/api/agent/approvals/${submitted.body.approval_id}/approve`);
    expect(approved.body.approval.state).toBe("executed");
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/priority = 77/);
  });

  it("refuses a base that is not a string (123, a list) instead of dropping it: the write went through unchecked on a tree that had moved", async () => {
    const c = await client({ token: s.operator });
    const { revision } = (await s.call("GET", "/api/slots/chat/config")).body;
    expect((await s.call("PUT", "/api/slots/chat/config", { body: { priority: 91 } })).status).toBe(200);
    const file = join(s.config, "slots/chat.toml");
    const moved = readFileSync(file, "utf8");
    for (const base of [123, [revision], { rev: revision }, true]) {
      const res = await callTool(c, "slot_edit", { name: "chat", priority: 5, base });
      expect(res.isError, JSON.stringify(base)).toBe(true);
      expect(res.body.error, JSON.stringify(base)).toMatchObject({ code: "validation.invalid", details: { fields: [{ loc: ["args", "base"] }] } });
    }
    expect(readFileSync(file, "utf8")).toBe(moved);
    // a string is the check it always was; null is no base
    expect((await callTool(c, "slot_edit", { name: "chat", priority: 5, base: revision })).body.error.code).toBe("config.stale");
    expect((await callTool(c, "slot_edit", { name: "chat", priority: 6, base: null })).isError).toBe(false);
    expect(readFileSync(file, "utf8")).toMatch(/priority = 6/);
  });

  it("refuses HEAD, OPTIONS, PUT and PATCH on the mounts with 405 route.method_not_allowed and Allow (they were told to send initialize first)", async () => {
    for (const mount of ["/mcp/admin", "/mcp/memory"]) {
      for (const method of ["HEAD", "OPTIONS", "PUT", "PATCH"]) {
        for (const auth of [{ authorization: `Bearer ${s.operator}` }, {}] as Record<string, string>[]) {
          const res = await httpCall(s.url, method, mount, { headers: { ...auth, accept: "application/json, text/event-stream" } });
          expect(res.status, `${method} ${mount}`).toBe(405);
          expect(res.headers.get("allow")).toBe("DELETE, GET, POST");
          if (method !== "HEAD") expect(res.body.error, `${method} ${mount}`).toMatchObject({ code: "route.method_not_allowed", details: { allowed: ["DELETE", "GET", "POST"] } });
        }
      }
    }
    // the mount still serves its own methods
    const c = await client();
    expect((await c.listTools()).tools.length).toBeGreaterThan(0);
  });

  it("refuses Host: evil.example with 421", async () => {
    const res = await httpCall(s.url, "POST", "/mcp/admin", { headers: { host: "evil.example", accept: "application/json, text/event-stream" }, body: { jsonrpc: "2.0", id: 1, method: "initialize", params: {} } });
    expect(res.status).toBe(421);
    expect(res.body.error.code).toBe("request.host_denied");
  });
});

describe("a gated call whose plan went stale before approval", () => {
  it("is refused when approved, naming what moved, and writes nothing", async () => {
    const c = await client("hermes__coder");
    const queued = await callTool(c, "slot_edit", { name: "chat", tune: { ctx_size: 20480 } }); // fixtures/box policy: slot_edit is gated
    expect(queued.body.status).toBe("pending_approval");
    const file = join(s.config, "slots/chat.toml");
    const edited = `${readFileSync(file, "utf8")}# tuned by hand meanwhile\n`;
    writeFileSync(file, edited);
    const res = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
    expect(res.body.approval.state).toBe("stale");
    expect(res.body.approval.reason).toContain("slots/chat.toml");
    expect(readFileSync(file, "utf8")).toBe(edited);
  });
});
