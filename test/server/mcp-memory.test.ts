import { readFileSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { EmbeddedEngine } from "../../memory/embedded.js";
import { docKey } from "../../memory/embedded-store.js";
import { advertisedSchema, MEMORY_TOOLS } from "../../server/memory/tools.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callMemory, callTool, memoryClient } from "./mcp-helpers.js";

// The agent here is hermes__scribe: bound by no agents/<P>.toml, it meets hal0-memory's own gates and the tiers alone
// (hermes__coder is bound by fixtures/box/agents/coder.toml, which blocks memory_delete: test/server/agent-file-enforced.test.ts).
let s: TestServer & { dir: string };
let clients: Client[] = [];
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => {
  for (const c of clients) await c.close();
  clients = [];
  await s.close();
});
async function client(agent?: string, options: { private?: boolean | string } = {}): Promise<Client> {
  const c = await memoryClient(s.url, agent, options);
  clients.push(c);
  return c;
}
async function ok(c: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const res = await callMemory(c, name, args);
  expect(res.isError, `${name}: ${JSON.stringify(res.body)}`).toBe(false);
  return res.body;
}
async function refused(c: Client, name: string, args: Record<string, unknown>): Promise<any> {
  const res = await callMemory(c, name, args);
  expect(res.isError, `${name} should fail: ${JSON.stringify(res.body)}`).toBe(true);
  expect(res.body.status).toBe("error");
  return res.body.error;
}
/** Waits for an operation to finish (the embedded engine runs it on the next turns of the event loop). */
async function settled(c: Client, id: string): Promise<any> {
  await s.hal0.memory.opened()?.idle();
  return ok(c, "memory_operation_get", { id });
}
function embedded(): EmbeddedEngine {
  return s.hal0.memory.engine() as EmbeddedEngine;
}
function setMemory(toml: string): void {
  const file = join(s.config, "hal0.toml");
  writeFileSync(file, readFileSync(file, "utf8").replace(/\[memory\][^[]*/, `[memory]\n${toml}\n\n`));
}
async function approve(id: string): Promise<any> {
  const res = await s.call("POST", `/api/agent/approvals/${id}/approve`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.approval;
}

describe("hal0-memory's tool list", () => {
  it("has the 26 tools, each with its real typed schema (not an args blob) and honest annotations", async () => {
    const { tools } = await (await client("hermes__scribe")).listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(MEMORY_TOOLS.map((t) => t.name).sort());
    expect(tools).toHaveLength(26);
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const tool of MEMORY_TOOLS) {
      const { $schema: _dialect, ...listed } = byName.get(tool.name)!.inputSchema as Record<string, unknown>;
      expect(listed, tool.name).toEqual(advertisedSchema(tool));
    }
    const add = byName.get("memory_add")!.inputSchema as any;
    expect(add.required).toEqual(["text"]);
    expect(Object.keys(add.properties).sort()).toEqual(["context", "dataset", "document_id", "metadata", "tags", "text"]);
    expect(add.additionalProperties).toBe(false);
    const search = byName.get("memory_search")!.inputSchema as any;
    expect(search.properties.limit.default).toBe(10);
    expect(search.properties.dataset.anyOf).toHaveLength(2); // one dataset or a list
    expect((byName.get("memory_recall")!.inputSchema as any).properties.max_tokens).toMatchObject({ minimum: 1, maximum: 32768, default: 4096 });
    expect(byName.get("memory_search")!.annotations).toMatchObject({ readOnlyHint: true });
    expect(byName.get("memory_directive_delete")!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(byName.get("memory_add")!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false });
    // A write that edits, rewrites, merges away or aborts what is there is no additive update (MCP's destructiveHint: false).
    for (const name of ["memory_curate", "memory_mental_model_update", "memory_mental_model_refresh", "memory_directive_update", "memory_bank_consolidate", "memory_operation_cancel", "memory_delete"]) {
      expect(byName.get(name)!.annotations, name).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    }
    for (const name of ["memory_mental_model_create", "memory_directive_create", "memory_operation_retry"]) {
      expect(byName.get(name)!.annotations, name).toMatchObject({ readOnlyHint: false, destructiveHint: false });
    }
  });
});

describe("facts: add, search, list, recall, history, curate, tags, stats", () => {
  it("remembers, finds by rank, tags and time, pages, and records who said it", async () => {
    const c = await client("hermes__scribe");
    const a = await ok(c, "memory_add", { text: "The box runs llama-server for the chat slot.", tags: ["slots", "chat"], metadata: { from: "test" } });
    expect(a).toMatchObject({ id: expect.stringMatching(/^mem_/), timestamp: expect.any(String) });
    expect(a.operation_id).toBeUndefined();
    await ok(c, "memory_add", { text: "The coder agent prefers short answers.", tags: ["agents"] });
    await ok(c, "memory_add", { text: "Qwen3 chat model loads in forty seconds.", tags: ["chat", "models"] });
    const found = await ok(c, "memory_search", { query: "chat slot llama-server" });
    expect(found.results[0]).toMatchObject({ id: a.id, text: "The box runs llama-server for the chat slot.", dataset: "shared", tags: ["slots", "chat"], source: "hermes__scribe", metadata: { from: "test" } });
    expect(found.results[0].score).toBeGreaterThan(0);
    expect(found.results[0].score).toBeLessThanOrEqual(1);
    expect(found.results.map((r: any) => r.score)).toEqual([...found.results.map((r: any) => r.score)].sort((x: number, y: number) => y - x));
    expect((await ok(c, "memory_search", { query: "chat", tags: ["models"] })).results.map((r: any) => r.text)).toEqual(["Qwen3 chat model loads in forty seconds."]);
    expect((await ok(c, "memory_search", { query: "chat", before: "2000-01-01T00:00:00Z" })).results).toEqual([]);
    expect((await ok(c, "memory_search", { query: "chat", after: "2000-01-01T00:00:00Z" })).results.length).toBe(2);
    const first = await ok(c, "memory_list", { limit: 2 });
    expect(first.items.map((u: any) => u.text)).toEqual(["The box runs llama-server for the chat slot.", "The coder agent prefers short answers."]);
    const second = await ok(c, "memory_list", { limit: 2, cursor: first.next_cursor });
    expect(second).toMatchObject({ items: [{ text: "Qwen3 chat model loads in forty seconds." }], next_cursor: null });
    const recall = await ok(c, "memory_recall", { query: "chat", max_tokens: 12 });
    expect(recall.tokens_used).toBeLessThanOrEqual(12);
    expect(recall.results.length).toBe(1);
    expect(recall.truncated).toBe(true);
    const curated = await ok(c, "memory_curate", { id: a.id, text: "The box runs llama-server for the chat and coder slots.", fact_type: "experience" });
    expect(curated).toMatchObject({ id: a.id, fact_type: "experience" });
    const history = await ok(c, "memory_history", { id: a.id });
    expect(history.history.map((h: any) => h.action)).toEqual(["created", "curated"]);
    expect(history.history[1].changes.text.after).toMatch(/coder slots/);
    await ok(c, "memory_curate", { id: a.id, state: "invalid" });
    expect((await ok(c, "memory_search", { query: "llama-server" })).results).toEqual([]);
    expect((await ok(c, "memory_tags_list")).tags).toEqual([{ tag: "agents", count: 1 }, { tag: "chat", count: 1 }, { tag: "models", count: 1 }]);
    const stats = await ok(c, "memory_bank_stats");
    expect(stats).toMatchObject({ engine: "embedded", nodes: 2, invalidated: 1, datasets: { shared: 2 } });
    expect((await ok(c, "memory_reflect", { query: "what runs chat?" })).status).toBe("unsupported");
  });

  it("upserts a logical document by document_id: async extraction with its yield reported", async () => {
    const c = await client("hermes__scribe");
    const added = await ok(c, "memory_add", { text: "Alice owns the box. Bob runs the coder agent.", document_id: "conv-1" });
    expect(added.operation_id).toMatch(/^op_/);
    expect((await settled(c, added.operation_id))).toMatchObject({ kind: "retain", status: "completed", result: { facts_extracted: 2 } });
    const again = await ok(c, "memory_add", { text: "Alice owns the box. Bob runs the coder agent.", document_id: "conv-1" });
    expect((await settled(c, again.operation_id)).result).toMatchObject({ facts_extracted: 0, document_fact_count: 2, notice: "content was already known" });
    const grown = await ok(c, "memory_add", { text: "Alice owns the box. Carol tunes the profiles.", document_id: "conv-1" });
    expect((await settled(c, grown.operation_id)).result).toMatchObject({ facts_extracted: 1 });
    expect((await ok(c, "memory_search", { query: "Bob" })).results).toEqual([]);
    const known = await ok(c, "memory_add", { text: "Carol tunes the profiles.", document_id: "conv-2" });
    expect((await settled(c, known.operation_id)).result).toMatchObject({ facts_extracted: 0, nothing_learned: true, notice: expect.any(String) });
    expect((await refused(c, "memory_add", { text: "x", document_id: "has space" })).code).toBe("mcp.memory_schema");
  });
});

describe("a document's new version keeps curation", () => {
  it("a fact corrected with memory_curate stays corrected when the document comes back with a sentence appended", async () => {
    const c = await client("hermes__scribe");
    const v1 = await ok(c, "memory_add", { text: "The chat slot runs on port 8080. The NPU is idle.", document_id: "notes" });
    await settled(c, v1.operation_id);
    const fact = (await ok(c, "memory_search", { query: "port" })).results[0];
    await ok(c, "memory_curate", { id: fact.id, text: "The chat slot runs on port 8090." });
    const v2 = await ok(c, "memory_add", { text: "The chat slot runs on port 8080. The NPU is idle. The box has 64 GB.", document_id: "notes" });
    expect((await settled(c, v2.operation_id)).result).toMatchObject({ facts_extracted: 1 });
    const texts = (await ok(c, "memory_list")).items.map((u: any) => u.text);
    expect(texts).toEqual(["The chat slot runs on port 8090.", "The NPU is idle.", "The box has 64 GB."]);
    expect((await ok(c, "memory_history", { id: fact.id })).history.map((h: any) => h.action)).toEqual(["created", "curated"]);
    // A version without the sentence lets the fact go, curated or not.
    const v3 = await ok(c, "memory_add", { text: "The NPU is idle. The box has 64 GB.", document_id: "notes" });
    await settled(c, v3.operation_id);
    expect((await ok(c, "memory_list")).items.map((u: any) => u.text)).toEqual(["The NPU is idle.", "The box has 64 GB."]);
  });
});

describe("argument errors are mcp.memory_schema with every problem in detail", () => {
  it.each([
    ["memory_add", { text: "   " }, "text"],
    ["memory_add", { text: "hello", source: "someone_else" }, "source"],
    ["memory_add", { text: "hello", colour: "red" }, ""],
    ["memory_add", { text: "hello", document_id: "x".repeat(65) }, "document_id"],
    ["memory_search", { limit: 5 }, "query"],
    ["memory_search", { query: "x", before: "yesterday" }, "before"],
    ["memory_recall", { query: "x", max_tokens: 0 }, "max_tokens"],
    ["memory_recall", { query: "x", max_tokens: 32769 }, "max_tokens"],
    ["memory_curate", { id: "mem_0000000000000000" }, ""],
    ["memory_delete", { ids: [] }, "ids"],
    ["memory_list", { dataset: "no spaces allowed" }, "dataset"],
    ["memory_directive_update", { id: "dir_x" }, ""],
    ["memory_curate", { id: "mem_0000000000000000", occurred_start: "2030-01-01T00:00:00Z", occurred_end: "2020-01-01T00:00:00Z" }, "occurred_end"],
    ["memory_add", { text: "hello", tags: [" "] }, "tags.0"],
    ["memory_add", { text: "hello", tags: ["ok", "a\nb"] }, "tags.1"],
    ["memory_search", { query: "x", tags: ["\u0000"] }, "tags.0"],
    ["memory_mental_model_update", { id: "mm_x", trigger: {} }, ""],
  ])("%s %j", async (tool, args, path) => {
    const error = await refused(await client("hermes__scribe"), tool, args);
    expect(error.code).toBe("mcp.memory_schema");
    expect(Array.isArray(error.detail)).toBe(true);
    expect(error.detail.map((d: any) => d.path)).toContain(path);
  });

  it("a malformed cursor and an unknown id are refused with their codes", async () => {
    const c = await client("hermes__scribe");
    expect((await refused(c, "memory_list", { cursor: "not-a-cursor" })).code).toBe("mcp.memory_schema");
    expect((await refused(c, "memory_history", { id: "mem_0000000000000000" })).code).toBe("memory.not_found");
    expect((await refused(c, "memory_operation_get", { id: "op_0000000000000000" })).code).toBe("memory.not_found");
  });
});

describe("namespaces", () => {
  it("X-hal0-Private promotes to private:<client_id>; two identities never read each other's private facts", async () => {
    const alice = await client("alice", { private: true });
    const bob = await client("bob", { private: true });
    const shared = await client("carol");
    await ok(alice, "memory_add", { text: "Alice's secret deploy key lives in the vault." });
    await ok(bob, "memory_add", { text: "Bob keeps the deploy checklist." });
    await ok(shared, "memory_add", { text: "Everyone can see the deploy calendar." });
    const aliceSees = (await ok(alice, "memory_search", { query: "deploy", dataset: ["private:alice", "shared"] })).results;
    expect(aliceSees.map((r: any) => r.source).sort()).toEqual(["alice", "carol"]);
    expect(aliceSees.find((r: any) => r.source === "alice").dataset).toBe("private:alice");
    expect((await ok(bob, "memory_search", { query: "deploy" })).results.map((r: any) => r.source)).toEqual(["bob"]);
    expect((await ok(shared, "memory_search", { query: "deploy" })).results.map((r: any) => r.source)).toEqual(["carol"]);
    for (const [tool, args] of [["memory_search", { query: "deploy", dataset: "private:alice" }], ["memory_list", { dataset: "private:alice" }], ["memory_recall", { query: "deploy", dataset: ["shared", "private:alice"] }], ["memory_add", { text: "planted", dataset: "private:alice" }]] as const) {
      expect((await refused(bob, tool, args)).code, tool).toBe("memory.dataset_forbidden");
    }
    const aliceId = (await ok(alice, "memory_list")).items[0].id;
    expect((await refused(bob, "memory_history", { id: aliceId })).code).toBe("memory.not_found");
    expect((await refused(bob, "memory_curate", { id: aliceId, state: "invalid" })).code).toBe("memory.not_found");
    expect(Object.keys((await ok(bob, "memory_bank_stats")).datasets).sort()).toEqual(["private:bob", "shared"]);
  });
});

describe("operations belong to the datasets they work on", () => {
  it("another agent or an anonymous caller neither lists, reads, cancels, retries nor counts a private retain; the operator sees it; refreshes are the bank's", async () => {
    const alice = await client("alice", { private: true });
    const bob = await client("bob");
    const anonymous = await client();
    const operator = await client({ token: s.operator } as any);
    embedded().pause();
    const doc = await ok(alice, "memory_add", { text: "Alice's private plan.", document_id: "alice-plan" });
    const model = await ok(bob, "memory_mental_model_create", { name: "plans", source_query: "plan" });
    for (const c of [bob, anonymous]) {
      const listed = (await ok(c, "memory_operation_list", { limit: 100 })).items.map((o: any) => o.id);
      expect(listed).toEqual([model.operation_id]);
      const tools = c === bob ? ["memory_operation_get", "memory_operation_cancel", "memory_operation_retry"] : ["memory_operation_get"]; // anonymous callers may not write
      for (const tool of tools) expect((await refused(c, tool, { id: doc.operation_id })).code, tool).toBe("memory.not_found");
      expect((await ok(c, "memory_bank_stats")).operations).toMatchObject({ pending: 1 });
    }
    expect((await ok(alice, "memory_operation_list", { limit: 100 })).items.map((o: any) => o.id).sort()).toEqual([doc.operation_id, model.operation_id].sort());
    expect((await ok(alice, "memory_bank_stats")).operations).toMatchObject({ pending: 2 });
    expect((await ok(operator, "memory_operation_get", { id: doc.operation_id })).status).toBe("pending");
    expect((await ok(bob, "memory_operation_get", { id: model.operation_id })).kind).toBe("refresh");
    embedded().resume();
    expect((await settled(alice, doc.operation_id)).status).toBe("completed");
    expect((await ok(alice, "memory_search", { query: "plan" })).results).toHaveLength(1);
    // A consolidation of a private dataset is its owner's too.
    const merged = await ok(alice, "memory_bank_consolidate");
    expect((await refused(bob, "memory_operation_get", { id: merged.operation_id })).code).toBe("memory.not_found");
    const sharedOnly = await ok(bob, "memory_bank_consolidate", { dataset: "shared" });
    expect((await ok(alice, "memory_operation_get", { id: sharedOnly.operation_id })).kind).toBe("consolidate");
  });
});

describe("the audit log keeps what a memory call did, not what it remembered", () => {
  it("records ids, datasets and tags as sent and each text, query and content as its size, so no reader of the log sees a private fact", async () => {
    const alice = await client("alice", { private: true });
    const secret = "Alice's PIN is 4321 for Project Zeus.";
    await ok(alice, "memory_add", { text: secret, context: "from the Zeus kickoff", tags: ["zeus"], metadata: { pin: "4321" }, document_id: "alice-diary" });
    await ok(alice, "memory_search", { query: "Project Zeus PIN" });
    await ok(alice, "memory_directive_create", { name: "zeus-rule", content: "Never say the Zeus PIN aloud." });
    await s.hal0.memory.opened()?.idle();
    // Anyone reads the audit log: an anonymous caller, another agent (their rows' values masked), an operator (the rows as kept).
    for (const as of ["anonymous", "agent:bob"]) {
      const read = await s.call("GET", "/api/activity?actor=agent:alice&limit=500", { as });
      expect(read.status).toBe(200);
      expect((read.body.items as Array<{ tool: string }>).map((r) => r.tool).sort()).toEqual(["memory_add", "memory_directive_create", "memory_search"]);
      for (const words of ["4321", "Zeus", "PIN"]) expect(JSON.stringify(read.body)).not.toContain(words);
    }
    const operator = await s.call("GET", "/api/activity?actor=agent:alice&limit=500");
    const rows = operator.body.items as Array<{ tool: string; args: Record<string, unknown> }>;
    for (const words of ["4321", "Zeus", "PIN"]) expect(JSON.stringify(operator.body)).not.toContain(words);
    expect(rows.find((r) => r.tool === "memory_add")!.args).toEqual({
      text: `[${secret.length} chars]`, context: "[21 chars]", tags: ["zeus"], metadata: "[1 keys]", document_id: "alice-diary",
    });
    expect(rows.find((r) => r.tool === "memory_search")!.args).toEqual({ query: "[16 chars]" });
    expect(rows.find((r) => r.tool === "memory_directive_create")!.args).toEqual({ name: "zeus-rule", content: "[29 chars]" });
    // What was remembered is still there for its owner.
    expect((await ok(alice, "memory_search", { query: "Zeus" })).results.map((r: any) => r.text)).toEqual([secret]);
  });
});

describe("X-hal0-Private", () => {
  it("takes 1, true, 0 or false; any other value is refused before anything runs, never read as shared", async () => {
    for (const flag of ["TRUE", " 1 ", "0", "false"]) await ok(await client("alice", { private: flag }), "memory_bank_stats");
    const err = await client("alice", { private: "yes" }).then(() => undefined, (e: Error) => e);
    expect(err?.message).toContain("request.invalid_header");
    const rest = await s.call("GET", "/api/slots", { headers: { "X-hal0-Private": "on" } });
    expect(rest.status).toBe(400);
    expect(rest.body.error).toMatchObject({ code: "request.invalid_header", details: { header: "X-hal0-Private" } });
    expect((await ok(await client("carol"), "memory_list", { dataset: "shared" })).items).toEqual([]);
  });
});

describe("memory_delete gates itself", () => {
  it("deletes one id at once; more ids, a list of datasets or another caller's dataset wait for a person", async () => {
    const c = await client("hermes__scribe");
    const ids = [];
    for (const text of ["one fact", "two fact", "three fact"]) ids.push((await ok(c, "memory_add", { text })).id);
    expect(await ok(c, "memory_delete", { ids: [ids[0]] })).toMatchObject({ deleted: 1 });
    const bulk = await ok(c, "memory_delete", { ids: [ids[1], ids[2]] });
    expect(bulk).toMatchObject({ status: "pending_approval", approval_id: expect.stringMatching(/^apr_/), detail: expect.stringContaining("deletes 2 memory ids") });
    expect((await ok(c, "memory_delete", { ids: [ids[1]], dataset: ["shared"] })).status).toBe("pending_approval");
    expect((await ok(c, "memory_search", { query: "fact" })).results).toHaveLength(2);
    const done = await approve(bulk.approval_id);
    expect(done).toMatchObject({ state: "executed", result: { deleted: 2 }, caller: { kind: "agent" as const, agent: "hermes__scribe" } });
    expect((await ok(c, "memory_search", { query: "fact" })).results).toEqual([]);
    // Another caller's private fact: only a person can let it go.
    const someone = await client("someone", { private: true });
    const theirs = await ok(someone, "memory_add", { text: "someone's own fact" });
    const foreign = await ok(c, "memory_delete", { ids: [theirs.id], dataset: "private:someone" });
    expect(foreign).toMatchObject({ status: "pending_approval", detail: expect.stringContaining("another caller's dataset private:someone") });
    expect((await approve(foreign.approval_id))).toMatchObject({ state: "executed", result: { deleted: 1 } });
    // Whether an id is there is not told before a person looks: a doc_ id is its document_id's hash, so an
    // answer would tell another agent which documents someone keeps. A missing one is queued too, and fails when approved.
    const diary = await ok(someone, "memory_add", { text: "A private diary line.", document_id: "diary" });
    await settled(someone, diary.operation_id);
    const guesses = await Promise.all(["diary", "no-such-doc"].map((name) => ok(c, "memory_delete", { ids: [docKey("private:someone", name)], dataset: "private:someone" })));
    expect(guesses.map((g) => g.status)).toEqual(["pending_approval", "pending_approval"]);
    expect(await approve(guesses[1].approval_id)).toMatchObject({ state: "failed", error: { code: "memory.not_found" } });
    expect(await approve(guesses[0].approval_id)).toMatchObject({ state: "executed", result: { deleted: 2 } });
    expect((await ok(someone, "memory_list")).items).toEqual([]);
  });
});

describe("approving a memory request", () => {
  it("needs an operator token that reaches hal0-memory: one minted --scope rest is auth.scope_denied and the request stays pending", async () => {
    const c = await client("hermes__scribe");
    const someone = await client("someone", { private: true });
    const theirs = await ok(someone, "memory_add", { text: "someone's own fact" });
    const foreign = await ok(c, "memory_delete", { ids: [theirs.id], dataset: "private:someone" });
    expect(foreign.status).toBe("pending_approval");
    const ci = s.hal0.tokens.mint("operator", "ci", ["rest"]).token;
    const refusedByScope = await s.call("POST", `/api/agent/approvals/${foreign.approval_id}/approve`, { headers: { authorization: `Bearer ${ci}` } });
    expect([refusedByScope.status, refusedByScope.body.error?.code, refusedByScope.body.error?.details?.needed]).toEqual([403, "auth.scope_denied", "mcp:memory"]);
    expect(s.hal0.approvals.get(foreign.approval_id)!.state).toBe("pending");
    // Nor does it deny it, deciding on a card it reads masked: the request is left for one who can decide it.
    const deniedByScope = await s.call("POST", `/api/agent/approvals/${foreign.approval_id}/deny`, { headers: { authorization: `Bearer ${ci}` }, body: { reason: "no" } });
    expect([deniedByScope.status, deniedByScope.body.error?.code]).toEqual([403, "auth.scope_denied"]);
    expect(s.hal0.approvals.get(foreign.approval_id)!.state).toBe("pending");
    // Nor does it read what the request carries (which notes of whom), as it cannot call hal0-memory to read them.
    const card = await s.call("GET", `/api/agent/approvals/${foreign.approval_id}`, { headers: { authorization: `Bearer ${ci}` } });
    expect(JSON.stringify(card.body.approval.args)).not.toContain(theirs.id);
    expect(JSON.stringify((await s.call("GET", `/api/agent/approvals/${foreign.approval_id}`)).body.approval.args)).toContain(theirs.id);
    expect((await ok(someone, "memory_list")).items).toHaveLength(1);
    expect(await approve(foreign.approval_id)).toMatchObject({ state: "executed", result: { deleted: 1 } });
  });
});

describe("memory_delete's missing ids", () => {
  it("follows one rule: none found is memory.not_found, gated or not; some found deletes them and lists the rest; an id given twice is one id", async () => {
    const c = await client("hermes__scribe");
    for (const ids of [["mem_nope"], ["mem_nope", "mem_nope2"], ["doc_0000000000000000"], ["doc_0000000000000000", "mem_nope"]]) {
      expect((await refused(c, "memory_delete", { ids })).code, JSON.stringify(ids)).toBe("memory.not_found");
    }
    const kept = await ok(c, "memory_add", { text: "A fact deleted once." });
    expect(await ok(c, "memory_delete", { ids: [kept.id, kept.id] })).toEqual({ deleted: 1, not_found: [] });
    const doc = await ok(c, "memory_add", { text: "A document. With two facts.", document_id: "two" });
    await settled(c, doc.operation_id);
    const gated = await ok(c, "memory_delete", { ids: [doc.id, "mem_nope"] });
    expect(gated.status).toBe("pending_approval");
    expect((await approve(gated.approval_id)).result).toEqual({ deleted: 3, not_found: ["mem_nope"] });
  });

  it("a gated delete refused before it could be queued (none of its ids found) leaves its audit row, as any gated call's refusal does", async () => {
    const c = await client("hermes__auditee");
    expect((await refused(c, "memory_delete", { ids: ["mem_nope", "mem_nope2"] })).code).toBe("memory.not_found");
    const rows = (await s.call("GET", "/api/activity?actor=agent:hermes__auditee&limit=50")).body.items;
    expect(rows.map((r: any) => [r.tool, r.outcome, r.error_code])).toContainEqual(["memory_delete", "error", "memory.not_found"]);
  });
});

describe("mental models, directives and operations", () => {
  it("creates a mental model whose content an async refresh fills; lists metadata unless asked; deleting it needs approval", async () => {
    const c = await client("hermes__scribe");
    await ok(c, "memory_add", { text: "The chat slot runs Qwen3." });
    const created = await ok(c, "memory_mental_model_create", { name: "slots", source_query: "chat slot", tags: ["ops"], trigger: { refresh_after_consolidation: true } });
    expect(created).toMatchObject({ mental_model_id: expect.stringMatching(/^mm_/), operation_id: expect.stringMatching(/^op_/) });
    expect((await settled(c, created.operation_id)).status).toBe("completed");
    const [meta] = (await ok(c, "memory_mental_model_list")).items;
    expect(meta).toMatchObject({ id: created.mental_model_id, name: "slots", tags: ["ops"], stale: false });
    expect(meta.content).toBeUndefined();
    expect((await ok(c, "memory_mental_model_list", { detail: "content" })).items[0].content).toContain("Qwen3");
    expect((await ok(c, "memory_mental_model_get", { id: created.mental_model_id })).content).toContain("Qwen3");
    await ok(c, "memory_add", { text: "The chat slot moved to port 8090." });
    expect((await ok(c, "memory_mental_model_get", { id: created.mental_model_id })).stale).toBe(true);
    expect(await ok(c, "memory_mental_model_update", { id: created.mental_model_id, name: "slot facts" })).toMatchObject({ name: "slot facts" });
    const refresh = await ok(c, "memory_mental_model_refresh", { id: created.mental_model_id });
    expect((await settled(c, refresh.operation_id)).status).toBe("completed");
    expect((await ok(c, "memory_mental_model_get", { id: created.mental_model_id })).content).toContain("8090");
    const gated = await ok(c, "memory_mental_model_delete", { id: created.mental_model_id });
    expect(gated.status).toBe("pending_approval");
    expect((await ok(c, "memory_mental_model_list")).items).toHaveLength(1);
    expect((await approve(gated.approval_id)).state).toBe("executed");
    expect((await refused(c, "memory_mental_model_get", { id: created.mental_model_id })).code).toBe("memory.not_found");
    expect((await refused(c, "memory_mental_model_delete", { id: "mm_0000000000000000" })).code).toBe("memory.not_found");
  });

  it("keeps directives, highest priority first; deleting one needs approval", async () => {
    const c = await client("hermes__scribe");
    const low = await ok(c, "memory_directive_create", { name: "tone", content: "Answer briefly.", priority: 1 });
    const high = await ok(c, "memory_directive_create", { name: "safety", content: "Never print secrets.", priority: 10, tags: ["security"] });
    expect((await ok(c, "memory_directive_list")).items.map((d: any) => d.name)).toEqual(["safety", "tone"]);
    expect(await ok(c, "memory_directive_update", { id: low.id, is_active: false })).toMatchObject({ is_active: false });
    expect((await ok(c, "memory_directive_list", { active_only: true })).items.map((d: any) => d.id)).toEqual([high.id]);
    expect(await ok(c, "memory_directive_get", { id: high.id })).toMatchObject({ content: "Never print secrets." });
    const gated = await ok(c, "memory_directive_delete", { id: low.id });
    expect(gated.status).toBe("pending_approval");
    expect((await approve(gated.approval_id)).state).toBe("executed");
    expect((await ok(c, "memory_directive_list")).items).toHaveLength(1);
  });

  it("lists, cancels and retries operations; consolidation merges duplicates", async () => {
    const c = await client("hermes__scribe");
    embedded().pause();
    const pending = await ok(c, "memory_add", { text: "A document nobody will finish.", document_id: "stuck" });
    expect((await ok(c, "memory_operation_get", { id: pending.operation_id })).status).toBe("pending");
    expect(await ok(c, "memory_operation_cancel", { id: pending.operation_id })).toMatchObject({ status: "cancelled" });
    expect((await refused(c, "memory_operation_cancel", { id: pending.operation_id })).code).toBe("memory.operation_state");
    const model = await ok(c, "memory_mental_model_create", { name: "doomed", source_query: "anything" });
    await embedded().mentalModelDelete(model.mental_model_id); // gone before its refresh runs
    embedded().resume();
    const failed = await settled(c, model.operation_id);
    expect(failed).toMatchObject({ status: "failed", error: expect.stringContaining("no longer exists") });
    expect((await ok(c, "memory_operation_retry", { id: model.operation_id })).status).toBe("pending");
    expect((await settled(c, model.operation_id)).status).toBe("failed"); // the model is still gone
    expect((await refused(c, "memory_operation_retry", { id: "op_0000000000000000" })).code).toBe("memory.not_found");
    expect((await ok(c, "memory_operation_list", { kind: "refresh" })).items.map((o: any) => o.id)).toContain(model.operation_id);
    expect((await ok(c, "memory_operation_list", { status: "cancelled" })).items.map((o: any) => o.id)).toEqual([pending.operation_id]);
    const one = await ok(c, "memory_add", { text: "The NPU slot is pinned.", dataset: "team" });
    const two = await ok(c, "memory_add", { text: "The NPU slot is busy.", dataset: "team" });
    await ok(c, "memory_curate", { id: two.id, text: "The NPU slot is pinned." }); // now a duplicate of one
    const consolidated = await ok(c, "memory_bank_consolidate", { dataset: "team" });
    expect(consolidated).toMatchObject({ operation_id: expect.stringMatching(/^op_/), deduplicated: 1 });
    const done = await settled(c, consolidated.operation_id);
    expect(done.status).toBe("completed");
    expect((await refused(c, "memory_operation_retry", { id: consolidated.operation_id })).code).toBe("memory.operation_state");
    expect((await ok(c, "memory_list", { dataset: "team" })).items.map((u: any) => u.id)).toEqual([one.id]);
    expect((await ok(c, "memory_history", { id: two.id })).history.at(-1).action).toBe("merged");
  });
});

describe("the admin server's memory_* tools", () => {
  it("call the same handlers in process, with the same namespaces and gates", async () => {
    const admin = await adminClient(s.url, "hermes__scribe");
    clients.push(admin);
    const added = await callTool(admin, "memory_add", { text: "Added through hal0-admin." });
    expect(added.isError, JSON.stringify(added.body)).toBe(false);
    const mem = await client("hermes__scribe");
    expect((await ok(mem, "memory_search", { query: "hal0-admin" })).results[0]).toMatchObject({ id: added.body.id, source: "hermes__scribe" });
    expect((await callTool(admin, "memory_delete", { ids: [added.body.id, "mem_0000000000000000"] })).body.status).toBe("pending_approval");
    expect((await callTool(admin, "memory_add", { text: "x", source: "forged" })).body.error.code).toBe("mcp.memory_schema");
    const rows = (await s.call("GET", "/api/activity?kind=mcp")).body.items;
    expect(rows.map((r: any) => r.tool)).toEqual(expect.arrayContaining(["memory_add", "memory_search", "memory_delete"]));
  });

  it("a call refused for want of a credential leaves one audit row, the one /mcp/memory leaves", async () => {
    const admin = await adminClient(s.url);
    clients.push(admin);
    expect((await callTool(admin, "memory_delete", { ids: ["mem_0000000000000000"] })).body.error.code).toBe("auth.required");
    expect((await refused(await client(), "memory_delete", { ids: ["mem_0000000000000000"] })).code).toBe("auth.required");
    const rows = (await s.call("GET", "/api/activity?actor=anonymous&limit=50")).body.items;
    const seen = rows.map((r: any) => [r.tool, r.route, r.outcome, r.error_code]);
    expect(seen).toEqual([["memory_delete", "POST /mcp/memory/memory_delete", "error", "auth.required"], ["memory_delete", "POST /mcp/memory/memory_delete", "error", "auth.required"]]);
  });
});

describe("policy.toml applies to hal0-memory as to hal0-admin", () => {
  it("a blocked tool is neither listed nor callable; a tool policy gates waits for a person", async () => {
    const file = join(s.config, "policy.toml");
    writeFileSync(file, `${readFileSync(file, "utf8")}\n[agents.nosy]\nblocked = ["memory_search"]\ngated = ["memory_directive_create"]\n`);
    const nosy = await client("nosy");
    expect((await nosy.listTools()).tools.map((t) => t.name)).not.toContain("memory_search");
    expect((await refused(nosy, "memory_search", { query: "x" })).code).toBe("mcp.tool_not_allowed");
    const queued = await ok(nosy, "memory_directive_create", { name: "n", content: "Be nosy." });
    expect(queued.status).toBe("pending_approval");
    expect((await ok(nosy, "memory_directive_list")).items).toEqual([]);
    expect((await approve(queued.approval_id)).state).toBe("executed");
    expect((await ok(nosy, "memory_directive_list")).items.map((d: any) => d.name)).toEqual(["n"]);
  });

  it("a call refused before its tool runs (blocked, or a __proto__ argument) leaves the same audit row on /mcp/memory as on /mcp/admin", async () => {
    const file = join(s.config, "policy.toml");
    writeFileSync(file, `${readFileSync(file, "utf8")}\n[agents.nosy]\nblocked = ["memory_search"]\n`);
    const admin = await adminClient(s.url, "nosy");
    clients.push(admin);
    const mem = await client("nosy");
    expect((await callTool(admin, "memory_search", { query: "x" })).body.error.code).toBe("mcp.tool_not_allowed");
    expect((await refused(mem, "memory_search", { query: "x" })).code).toBe("mcp.tool_not_allowed");
    const proto = async (c: Client, args: string) => JSON.parse(((await c.callTool({ name: "memory_add", arguments: JSON.parse(args) })) as { content: Array<{ text: string }> }).content[0]!.text).error.code;
    expect(await proto(admin, '{"args": {"text": "x", "__proto__": {"a": 1}}}')).toBe("validation.invalid");
    expect(await proto(mem, '{"text": "x", "__proto__": {"a": 1}}')).toBe("validation.invalid");
    const rows = (await s.call("GET", "/api/activity?actor=agent:nosy&limit=50")).body.items;
    const seen = rows.map((r: any) => [r.tool, r.route, r.error_code]);
    expect(seen).toEqual([["memory_add", "POST /mcp/tool/memory_add", "validation.invalid"], ["memory_add", "POST /mcp/tool/memory_add", "validation.invalid"], ["memory_search", "POST /mcp/tool/memory_search", "mcp.tool_not_allowed"], ["memory_search", "POST /mcp/tool/memory_search", "mcp.tool_not_allowed"]]);
  });
});

describe("an operator on hal0-memory", () => {
  it("is a person, as on hal0-admin: a tool [tiers] blocks for agents is listed and runs for the operator", async () => {
    const file = join(s.config, "policy.toml");
    writeFileSync(file, `${readFileSync(file, "utf8").replace('blocked = ["logs_tail"]', 'blocked = ["logs_tail", "memory_search"]')}`);
    const agent = await client("hermes__probe");
    expect((await agent.listTools()).tools.map((t) => t.name)).not.toContain("memory_search");
    const operator = await client({ token: s.operator } as any);
    expect((await operator.listTools()).tools.map((t) => t.name)).toContain("memory_search");
    expect((await ok(operator, "memory_search", { query: "x" })).status).not.toBe("error");
  });
});

describe("engine availability", () => {
  it("[memory] enabled = false answers every tool with an unavailable error, and nothing crashes", async () => {
    setMemory("enabled = false");
    const c = await client("hermes__scribe");
    for (const [tool, args] of [["memory_add", { text: "x" }], ["memory_search", { query: "x" }], ["memory_bank_stats", {}]] as const) {
      expect((await refused(c, tool, args)).code, tool).toBe("mcp.memory_unconfigured");
    }
    expect((await s.call("GET", "/api/slots")).status).toBe(200);
  });

  it("memory_add against an engine URL nobody listens on is memory.engine_unavailable with retry_after_s 5", async () => {
    const port = await deadPort();
    setMemory(`enabled = true\nengine = "hindsight"\nurl = "http://127.0.0.1:${port}"`);
    const error = await refused(await client("hermes__scribe"), "memory_add", { text: "hello" });
    expect(error).toMatchObject({ code: "memory.engine_unavailable", message: expect.stringMatching(/retry/i), details: { retry_after_s: 5 } });
  });

  it("an error reply from the engine stays memory.engine_error, never reclassified as unavailable", async () => {
    const engine = await erringEngine(500);
    try {
      setMemory(`enabled = true\nengine = "hindsight"\nurl = "${engine.url}"`);
      const error = await refused(await client("hermes__scribe"), "memory_add", { text: "hello" });
      expect(error).toMatchObject({ code: "memory.engine_error", details: { status: 500 } });
      expect(error.details.retry_after_s).toBeUndefined();
    } finally {
      await engine.close();
    }
  });
});

describe("a restart", () => {
  it("keeps every fact, model and directive", async () => {
    const first = await startTestServer({ keep: true });
    const c = await memoryClient(first.url, "hermes__scribe");
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) ids.push((await callMemory(c, "memory_add", { text: `Fact number ${i} about restarts.`, tags: [`t${i % 3}`] })).body.id);
    await callMemory(c, "memory_directive_create", { name: "keep", content: "Survive restarts." });
    await c.close();
    await first.close();
    const second = await startTestServer({ reuse: { dir: first.dir } });
    try {
      const again = await memoryClient(second.url, "hermes__scribe");
      clients.push(again);
      const listed = (await callMemory(again, "memory_list", { limit: 200 })).body;
      expect(listed.items.map((u: any) => u.id).sort()).toEqual([...ids].sort());
      expect((await callMemory(again, "memory_directive_list")).body.items.map((d: any) => d.name)).toEqual(["keep"]);
    } finally {
      for (const x of clients) await x.close();
      clients = [];
      await second.close();
    }
  });
});

/** A loopback server answering every request with `status` (a Hindsight that errs). */
async function erringEngine(status: number): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createHttpServer((_req, res) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ detail: "database is locked" })));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** A loopback port nobody listens on: bound once, then released. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
