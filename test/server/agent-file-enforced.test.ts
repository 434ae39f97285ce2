import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callMemory, callTool, memoryClient } from "./mcp-helpers.js";

/**
 * fixtures/box's agents/coder.toml binds the identity hermes__coder (Hermes
 * profile coder): for hal0's own servers hal0 enforces it, whatever door the
 * call comes through.
 */
describe("agents/<P>.toml is enforced for hermes__<P> on hal0's own servers", () => {
  let s: (TestServer & { dir: string }) | undefined;
  afterEach(async () => {
    await s?.close();
    s = undefined;
  });

  it("refuses memory_delete, which the file blocks, on hal0-memory and hal0-admin; nothing is deleted", async () => {
    s = await startTestServer();
    const ops = await memoryClient(s.url, "hermes__ops");
    const added = await callMemory(ops, "memory_add", { text: "keep me" });
    expect(added.isError).toBe(false);
    const id = added.body.id as string;
    const mem = await memoryClient(s.url, "hermes__coder");
    expect((await mem.listTools()).tools.map((t) => t.name)).not.toContain("memory_delete");
    const viaMemory = await callMemory(mem, "memory_delete", { ids: [id] });
    expect(viaMemory).toMatchObject({ isError: true, body: { error: { code: "mcp.tool_not_allowed", details: { tool: "memory_delete", agent_file: "agents/coder.toml", verdict: "blocked" } } } });
    expect(viaMemory.body.error.message).toBe("agents/coder.toml refuses memory_delete for hermes__coder (its [tools] blocked lists it)");
    const viaAdmin = await callTool(await adminClient(s.url, "hermes__coder"), "memory_delete", { ids: [id] });
    expect(viaAdmin).toMatchObject({ isError: true, body: { error: { code: "mcp.tool_not_allowed" } } });
    expect((await callMemory(ops, "memory_search", { query: "keep me" })).body.results).toMatchObject([{ id }]);
    // Another agent, bound by no file, meets the tiers alone.
    expect(await callMemory(ops, "memory_delete", { ids: [id] })).toMatchObject({ isError: false, body: { deleted: 1 } });
  });

  it("refuses a hal0-admin tool the file lists nowhere (unknown_tool), on MCP and REST", async () => {
    s = await startTestServer();
    const admin = await adminClient(s.url, "hermes__coder");
    expect((await admin.listTools()).tools.map((t) => t.name)).not.toContain("upstream_delete");
    const viaMcp = await callTool(admin, "upstream_delete", { name: "openrouter" });
    expect(viaMcp).toMatchObject({ isError: true, body: { error: { code: "mcp.tool_not_allowed", details: { agent_file: "agents/coder.toml", verdict: "unknown_tool" } } } });
    const viaRest = await s.call("DELETE", "/api/upstreams/openrouter", { as: "agent:hermes__coder" });
    expect([viaRest.status, viaRest.body.error?.code]).toEqual([403, "mcp.tool_not_allowed"]);
    expect(viaRest.body.error.details).toMatchObject({ agent_file: "agents/coder.toml", verdict: "unknown_tool", tool: "upstream_delete" });
    expect(readFileSync(join(s.config, "upstreams.toml"), "utf8")).toContain("openrouter");
  });

  it("queues a tool the file gates (memory_add, autonomous by its tier), and refuses it at approval once the file blocks it", async () => {
    s = await startTestServer();
    const mem = await memoryClient(s.url, "hermes__coder");
    const queued = await callMemory(mem, "memory_add", { text: "remember the coder slot" });
    expect(queued).toMatchObject({ isError: false, body: { status: "pending_approval" } });
    const id = queued.body.approval_id as string;
    const file = join(s.config, "agents/coder.toml");
    const text = readFileSync(file, "utf8");
    writeFileSync(file, text.replace('"memory_add", ', "").replace('blocked = ["model_delete"', 'blocked = ["memory_add", "model_delete"'));
    const approved = (await s.call("POST", `/api/agent/approvals/${id}/approve`)).body.approval;
    expect(approved).toMatchObject({ state: "failed", error: { code: "mcp.tool_not_allowed" } });
    expect((await callMemory(mem, "memory_search", { query: "remember the coder slot" })).body.results).toEqual([]);
  });

  it("judges what a change does by the file too: an unload its file blocks refuses the stack apply, dry run and real", async () => {
    s = await startTestServer();
    // Agent probe (identity hermes__probe) may apply stacks (gated by its tier) and load or swap, but its file blocks slot_unload; policy.toml says nothing of it.
    writeFileSync(join(s.config, "agents/probe.toml"), `[agent]\nname = "probe"\n[mcp.servers.hal0-admin]\nbuiltin = true\n[tools]\nallow = ["stack_apply", "stack_list", "slot_load", "model_swap", "model_assign", "slot_delete"]\nblocked = ["slot_unload"]\n`);
    await s.hal0.box.snapshot();
    const admin = await adminClient(s.url, "hermes__probe");
    const preview = await callTool(admin, "stack_apply", { slug: "forge", dry_run: true });
    expect(preview.isError, JSON.stringify(preview.body)).toBe(false);
    expect(preview.body.approval.refused).toMatchObject({ code: "mcp.tool_not_allowed" });
    expect(preview.body.approval.refused.message).toMatch(/agents\/probe\.toml refuses slot_unload/);
    const real = await callTool(admin, "stack_apply", { slug: "forge" });
    expect(real.body.error, JSON.stringify(real.body)).toMatchObject({ code: "mcp.tool_not_allowed", details: { tool: "slot_unload", agent_file: "agents/probe.toml", verdict: "blocked" } });
    const rest = await s.call("POST", "/api/stacks/forge/apply", { as: "agent:hermes__probe", body: {} });
    expect([rest.status, rest.body.error?.code]).toEqual([403, "mcp.tool_not_allowed"]);
    expect(s.hal0.approvals.list()).toEqual([]);
  });
});
