import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { MemoryError } from "../../memory/errors.js";
import { ApiError, apiErrorOf } from "../../server/errors.js";
import type { MemoryEngine, Scope } from "../../memory/engine.js";
import { HindsightEngine } from "../../memory/hindsight.js";
import * as map from "../../memory/hindsight-map.js";

/**
 * The Hindsight client against real HTTP on 127.0.0.1. Hindsight itself
 * (Python + an LLM) cannot run here, so a node:http stub stands in: it
 * records every request and answers the way Hindsight's REST API does
 * (paths and fields from its OpenAPI spec).
 */

const BANK = "/v1/default/banks/hal0";
const shared: Scope = { datasets: ["shared"], owner: "alice" };
const NOW = Date.parse("2025-03-01T10:00:00.000Z");
const U = (n: number) => `${n}${n}${n}${n}${n}${n}${n}${n}-0000-4000-8000-00000000000${n}`;

interface Seen {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly body: any;
}
type Reply = { status?: number; json?: unknown; raw?: string } | "hang" | "drop";

/** A stand-in Hindsight: routes keyed `METHOD /path` under the bank; anything else is 404. */
class Stub {
  readonly seen: Seen[] = [];
  private readonly routes = new Map<string, (req: Seen) => Reply>();
  private server?: Server;
  url = "";

  on(method: string, path: string, reply: Reply | ((req: Seen) => Reply)): this {
    this.routes.set(`${method} ${path}`, typeof reply === "function" ? reply : () => reply);
    return this;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const url = new URL(req.url!, "http://stub");
    const seen: Seen = { method: req.method!, path: url.pathname.replace(BANK, ""), query: url.searchParams, body: text ? JSON.parse(text) : undefined };
    this.seen.push(seen);
    const reply = this.routes.get(`${seen.method} ${seen.path}`)?.(seen) ?? { status: 404, json: { detail: "Not Found" } };
    if (reply === "hang") return;
    if (reply === "drop") return void req.socket.destroy();
    res.writeHead(reply.status ?? 200, { "content-type": reply.raw === undefined ? "application/json" : "text/plain" });
    res.end(reply.raw ?? JSON.stringify(reply.json ?? {}));
  }

  /** The requests to one route, in order. */
  to(method: string, path: string): Seen[] {
    return this.seen.filter((s) => s.method === method && s.path === path);
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}

let stubs: Stub[] = [];
afterEach(async () => {
  for (const s of stubs) await s.stop();
  stubs = [];
});

async function stub(): Promise<Stub> {
  const s = await new Stub().start();
  stubs.push(s);
  return s;
}

/** The client under test, seen through the interface the tools use. */
function engineAt(url: string, extra: { requestTimeoutMs?: number } = {}): MemoryEngine {
  return new HindsightEngine({ url, now: () => NOW, ...extra });
}

/** A unit as Hindsight returns it, written by hal0 into `dataset` by `source`. */
function unit(id: string, text: string, dataset: string | null, more: Record<string, unknown> = {}) {
  const tags = dataset === null ? ["x"] : [`dataset:${dataset}`, "source:alice", "ops", "tag:source:spoof"];
  return {
    id,
    text,
    type: "world",
    context: "standup",
    entities: ["Alice"],
    tags,
    metadata: { hal0_metadata: JSON.stringify({ ticket: 7 }), hal0_recorded_at: "2025-01-01T00:00:00.000Z", hal0_document_id: "notes" },
    mentioned_at: "2025-01-01T00:00:01+00:00",
    ...more,
  };
}

async function failure(p: Promise<unknown>): Promise<MemoryError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof MemoryError) return err;
    throw err;
  }
  throw new Error("expected the call to fail");
}

/** The status hal0-memory's adapter answers an engine's refusal with (the same code as an ApiError). */
function httpStatus(err: MemoryError): number {
  const api = apiErrorOf(err) as ApiError;
  expect(api).toBeInstanceOf(ApiError);
  expect({ code: api.code, message: api.message, details: api.details }).toEqual({ code: err.code, message: err.message, details: err.details });
  return api.status;
}

/** A loopback port nobody listens on: bound once, then released. */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const addInput = { text: "Alice ships on Fridays.", dataset: "shared", tags: ["ops", "dataset:spoof"], metadata: { ticket: 7 }, source: "alice" };

describe("an engine that cannot be reached", () => {
  it("is memory.engine_unavailable with retry_after_s 5 when the connection is refused", async () => {
    const url = `http://127.0.0.1:${await deadPort()}`;
    const err = await failure(engineAt(url).add(addInput));
    expect(err.code).toBe("memory.engine_unavailable");
    expect(httpStatus(err)).toBe(503);
    expect(err.details).toMatchObject({ retry_after_s: 5, url, cause: "ECONNREFUSED" });
    expect(err.message).toBe(`the memory engine at ${url} cannot be reached; retry shortly`);
  });

  it("is memory.engine_unavailable for every kind of call, and after close()", async () => {
    const url = `http://127.0.0.1:${await deadPort()}`;
    expect((await failure(engineAt(url).search({ query: "x", limit: 5, scope: shared }))).code).toBe("memory.engine_unavailable");
    const s = await stub();
    const engine = engineAt(s.url);
    await engine.close();
    expect((await failure(engine.operationGet("op", "all"))).code).toBe("memory.engine_unavailable");
    expect(s.seen).toHaveLength(0);
  });
});

describe("an engine that answers with an error", () => {
  it("is memory.engine_error with the status and the body cut to 2 KB, never unavailable", async () => {
    const s = (await stub()).on("POST", "/memories/recall", { status: 500, raw: "boom ".repeat(1000) });
    const err = await failure(engineAt(s.url).search({ query: "x", limit: 5, scope: shared }));
    expect(err.code).toBe("memory.engine_error");
    expect(httpStatus(err)).toBe(502);
    expect(err.details.status).toBe(500);
    expect(err.details.body).toBe("boom ".repeat(1000).slice(0, 2048));
  });

  it("is memory.not_found for a 404 on an id, and for an id that is no Hindsight unit id without asking", async () => {
    const s = await stub();
    const engine = engineAt(s.url);
    expect((await failure(engine.get(U(1), shared))).code).toBe("memory.not_found");
    expect((await failure(engine.directiveGet("d1"))).code).toBe("memory.not_found");
    expect((await failure(engine.mentalModelGet("mm-1"))).code).toBe("memory.not_found");
    const before = s.seen.length;
    expect((await failure(engine.get("mem_0123456789abcdef", shared))).code).toBe("memory.not_found");
    expect(s.seen).toHaveLength(before);
  });

  it("is memory.engine_error for a 404 on a call that names no id", async () => {
    const s = await stub();
    const err = await failure(engineAt(s.url).operationList({ limit: 5, scope: "all" }));
    expect(err.code).toBe("memory.engine_error");
    expect(err.details.status).toBe(404);
  });

  it("is memory.engine_error for a reply that is not JSON", async () => {
    const s = (await stub()).on("GET", "/directives/d1", { raw: "<html>proxy error</html>" });
    const err = await failure(engineAt(s.url).directiveGet("d1"));
    expect(err.code).toBe("memory.engine_error");
    expect(err.details).toMatchObject({ status: 200, body: "<html>proxy error</html>" });
  });

  it("is memory.engine_error (timed out) when connected but no reply comes within requestTimeoutMs", async () => {
    const s = (await stub()).on("POST", "/memories", "hang");
    const err = await failure(engineAt(s.url, { requestTimeoutMs: 200 }).add(addInput));
    expect(err.code).toBe("memory.engine_error");
    expect(err.message).toMatch(/timed out/);
    expect(err.details.timeout_ms).toBe(200);
  });

  it("is memory.engine_error when the connection drops mid-request", async () => {
    const s = (await stub()).on("POST", "/memories", "drop");
    expect((await failure(engineAt(s.url).add(addInput))).code).toBe("memory.engine_error");
  });
});

describe("add", () => {
  it("retains asynchronously into the one bank, the dataset and source as tags", async () => {
    const s = (await stub()).on("POST", "/memories", { json: { success: true, bank_id: "hal0", items_count: 1, async: true, operation_id: "op-1" } });
    const r = await engineAt(s.url).add({ ...addInput, document_id: "notes", context: "standup" });
    const [req] = s.to("POST", "/memories");
    expect(req!.body.async).toBe(true);
    const item = req!.body.items[0];
    expect(item).toMatchObject({ content: "Alice ships on Fridays.", context: "standup", observation_scopes: [["dataset:shared"]] });
    expect(item.tags).toEqual(["dataset:shared", "source:alice", "ops", "tag:dataset:spoof"]);
    expect(item.metadata).toEqual({ hal0_metadata: '{"ticket":7}', hal0_recorded_at: "2025-03-01T10:00:00.000Z", hal0_source: "alice", hal0_dataset: "shared", hal0_document_id: "notes" });
    expect(item.document_id).toMatch(/^doc_[0-9a-f]{16}$/);
    expect(r).toEqual({ id: item.document_id, timestamp: "2025-03-01T10:00:00.000Z", operation_id: "op-1" });
  });

  it("gives the same document_id the same Hindsight document per dataset, and marks private datasets", async () => {
    const s = (await stub()).on("POST", "/memories", { json: { success: true, operation_id: "op" } });
    const engine = engineAt(s.url);
    const a = await engine.add({ ...addInput, document_id: "notes" });
    const b = await engine.add({ ...addInput, document_id: "notes" });
    const c = await engine.add({ ...addInput, dataset: "private:alice", document_id: "notes" });
    expect(b.id).toBe(a.id);
    expect(c.id).not.toBe(a.id);
    const item = s.to("POST", "/memories")[2]!.body.items[0];
    expect(item.tags).toContain("hal0:private");
    expect(item.observation_scopes).toEqual([["dataset:private:alice", "hal0:private"]]);
  });
});

describe("search and recall", () => {
  const results = [
    unit(U(1), "Alice ships on Fridays.", "shared"),
    unit(U(2), "Bob's secret.", "private:bob"),
    unit(U(3), "Not hal0's.", null),
    unit(U(4), "Deploys need a review.", "shared", { type: "observation", tags: ["dataset:shared"], metadata: {}, mentioned_at: null }),
  ];

  it("sends the scope and tags as tag groups and maps units back, dropping what the scope may not see", async () => {
    const s = (await stub()).on("POST", "/memories/recall", { json: { results } });
    const { results: hits } = await engineAt(s.url).search({ query: "fridays", limit: 10, scope: shared, tags: ["ops"], tags_match: "all" });
    const [req] = s.to("POST", "/memories/recall");
    expect(req!.body).toMatchObject({ query: "fridays", types: ["world", "experience", "observation"] });
    expect(req!.body.tag_groups).toEqual([{ tags: ["dataset:shared"], match: "any_strict" }, { tags: ["ops"], match: "all_strict" }]);
    expect(hits.map((h) => h.id)).toEqual([U(1)]);
    expect(hits[0]).toMatchObject({
      dataset: "shared",
      source: "alice",
      tags: ["ops", "source:spoof"],
      metadata: { ticket: 7 },
      document_id: "notes",
      context: "standup",
      entities: ["Alice"],
      fact_type: "world",
      state: "active",
      timestamp: "2025-01-01T00:00:00.000Z",
      score: 1,
    });
  });

  it("scores by rank, filters by time and type, and answers an opinion-only search without asking", async () => {
    const s = (await stub()).on("POST", "/memories/recall", { json: { results } });
    const engine = engineAt(s.url);
    const all = await engine.search({ query: "x", limit: 10, scope: shared });
    expect(all.results.map((h) => [h.id, h.score, h.source])).toEqual([
      [U(1), 1, "alice"],
      [U(4), 0.5, "engine"],
    ]);
    expect((await engine.search({ query: "x", limit: 10, scope: shared, after: "2025-01-02T00:00:00Z" })).results).toEqual([]);
    expect((await engine.search({ query: "x", limit: 10, scope: shared, types: ["observation"] })).results.map((h) => h.id)).toEqual([U(4)]);
    const asked = s.seen.length;
    expect((await engine.search({ query: "x", limit: 10, scope: shared, types: ["opinion"] })).results).toEqual([]);
    expect(s.seen).toHaveLength(asked);
  });

  it("recall packs the visible units into max_tokens and says when it truncated", async () => {
    const s = (await stub()).on("POST", "/memories/recall", { json: { results } });
    const r = await engineAt(s.url).recall({ query: "x", max_tokens: 6, scope: shared });
    expect(s.to("POST", "/memories/recall")[0]!.body.max_tokens).toBe(6);
    expect(r.results.map((h) => h.id)).toEqual([U(1)]);
    expect(r).toMatchObject({ tokens_used: 6, max_tokens: 6, truncated: true });
  });

  it("a scope without datasets asks which dataset tags exist and keeps the visible ones", async () => {
    const tags = [{ tag: "dataset:shared", count: 2 }, { tag: "dataset:private:bob", count: 1 }, { tag: "dataset:private:alice", count: 1 }];
    const s = (await stub()).on("GET", "/tags", { json: { items: tags, total: 3, limit: 200, offset: 0 } }).on("POST", "/memories/recall", { json: { results } });
    await engineAt(s.url).search({ query: "x", limit: 10, scope: { owner: "alice" } });
    expect(s.to("GET", "/tags")[0]!.query.get("q")).toBe("dataset:*");
    expect(s.to("POST", "/memories/recall")[0]!.body.tag_groups[0].tags).toEqual(["dataset:private:alice", "dataset:shared"]);
  });
});

describe("pages Hindsight sends that do not page", () => {
  const tagPage = { items: Array.from({ length: 200 }, (_, i) => ({ tag: `dataset:team-${i}`, count: 1 })), total: 400, limit: 200, offset: 0 };
  const unitPage = { items: Array.from({ length: 200 }, (_, i) => unit(`${String(i).padStart(8, "0")}-0000-4000-8000-000000000000`, `fact ${i}`, "shared")), total: 1_000_000 };

  it("a tag list that ignores offset (its first page again) is memory.engine_error after two pages, not a request loop", async () => {
    const s = (await stub()).on("GET", "/tags", { json: tagPage }).on("POST", "/memories/recall", { json: { results: [] } });
    const err = await failure(engineAt(s.url).search({ query: "x", limit: 10, scope: { owner: "alice" } }));
    expect([err.code, err.details]).toEqual(["memory.engine_error", { list: "tag list", offset: 200 }]);
    expect(err.message).toContain("does not page by offset");
    expect(s.to("GET", "/tags").map((r) => r.query.get("offset"))).toEqual(["0", "200"]);
    expect(s.to("POST", "/memories/recall")).toEqual([]);
  });

  it("a memory list that ignores offset is memory.engine_error for the bank-wide reads (stats, tags) after two pages", async () => {
    const s = (await stub()).on("GET", "/memories/list", { json: unitPage }).on("GET", "/mental-models", { json: { items: [] } }).on("GET", "/directives", { json: { items: [] } }).on("GET", "/operations", { json: { operations: [], total: 0 } });
    const engine = engineAt(s.url);
    for (const read of [() => engine.stats(shared), () => engine.tags(shared)]) {
      const before = s.to("GET", "/memories/list").length;
      const err = await failure(read());
      expect([err.code, err.details]).toEqual(["memory.engine_error", { list: "memory list", offset: 200 }]);
      expect(s.to("GET", "/memories/list").length - before).toBe(2);
    }
  });

  it("memory_list against a count that changes on every request is memory.engine_error after a bounded number of recounts", async () => {
    let total = 300;
    const s = (await stub()).on("GET", "/memories/list", (req) => {
      const limit = Number(req.query.get("limit"));
      return { json: { items: unitPage.items.slice(0, limit), total: total++ } };
    });
    const err = await failure(engineAt(s.url).list({ scope: shared, limit: 10 }));
    expect(err.code).toBe("memory.engine_error");
    expect(err.details).toMatchObject({ recounts: 9 });
    expect(s.to("GET", "/memories/list")).toHaveLength(10); // the count, then nine pages each with another count
  });
});

describe("list", () => {
  it("pages oldest first across Hindsight's newest-first list, in scope, stable while units arrive", async () => {
    const all = [unit(U(5), "five", "shared"), unit(U(4), "four", "private:bob"), unit(U(3), "three", "shared"), unit(U(2), "two", "shared"), unit(U(1), "one", "shared")];
    let arriving: ReturnType<typeof unit> | undefined;
    const s = (await stub()).on("GET", "/memories/list", (req) => {
      const offset = Number(req.query.get("offset"));
      const limit = Number(req.query.get("limit"));
      const reply = { json: { items: all.slice(offset, offset + limit), total: all.length, limit, offset } };
      if (arriving) all.unshift(arriving);
      arriving = undefined;
      return reply;
    });
    const engine = engineAt(s.url);
    const first = await engine.list({ scope: shared, limit: 2 });
    expect(first.items.map((u) => u.text)).toEqual(["one", "two"]);
    const query = s.to("GET", "/memories/list")[0]!.query;
    expect([query.get("state"), query.getAll("tags"), query.get("tags_match")]).toEqual(["valid", ["dataset:shared"], "any_strict"]);
    arriving = unit(U(6), "six", "shared"); // lands between the count and the page hal0 asks for
    const second = await engine.list({ scope: shared, limit: 2, cursor: first.next_cursor! });
    expect(second.items.map((u) => u.text)).toEqual(["three", "five"]);
    const third = await engine.list({ scope: shared, limit: 2, cursor: second.next_cursor! });
    expect(third).toEqual({ items: [expect.objectContaining({ text: "six" })], next_cursor: null });
    expect((await failure(engine.list({ scope: shared, limit: 2, cursor: "nope" }))).code).toBe("mcp.memory_schema");
  });

  it("is memory.engine_error, not a request loop, when Hindsight's list counts more units than its pages hold", async () => {
    for (const items of [[], [unit(U(1), "one", "shared")]]) {
      const s = (await stub()).on("GET", "/memories/list", { json: { items, total: 3 } });
      const err = await failure(engineAt(s.url).list({ scope: shared, limit: 10 }));
      expect([err.code, err.details]).toEqual(["memory.engine_error", { total: 3, offset: 0, limit: 3, items: items.length }]);
      expect(s.to("GET", "/memories/list")).toHaveLength(2); // the count, then one page
    }
  });
});

describe("get, history, curate and delete", () => {
  it("get and history read the unit; another dataset's unit is not found", async () => {
    const s = (await stub())
      .on("GET", `/memories/${U(1)}`, { json: unit(U(1), "one", "shared", { state: "invalidated", edited_at: "2025-01-03T00:00:00+00:00", invalidated_at: "2025-01-04T00:00:00+00:00", invalidation_reason: "hal0:bob: curated" }) })
      .on("GET", `/memories/${U(2)}`, { json: unit(U(2), "two", "private:bob") });
    const engine = engineAt(s.url);
    expect((await engine.get(U(1), shared)).state).toBe("invalid");
    expect((await failure(engine.get(U(2), shared))).code).toBe("memory.not_found");
    expect((await failure(engine.history(U(2), { owner: "alice" }))).code).toBe("memory.not_found");
    const { history } = await engine.history(U(1), { owner: "alice" });
    expect(history.map((h) => [h.action, h.by])).toEqual([
      ["created", "alice"],
      ["curated", "unknown"],
      ["invalidated", "bob"],
    ]);
  });

  it("curate PATCHes the fields given (null clears) and returns the unit as it is now", async () => {
    const s = (await stub()).on("GET", `/memories/${U(1)}`, { json: unit(U(1), "one", "shared") }).on("PATCH", `/memories/${U(1)}`, { json: {} });
    await engineAt(s.url).curate(U(1), { text: "uno", context: null, state: "invalid" }, shared, "alice");
    expect(s.to("PATCH", `/memories/${U(1)}`)[0]!.body).toEqual({ text: "uno", context: "", state: "invalidated", reason: "hal0:alice: curated" });
    expect(s.to("GET", `/memories/${U(1)}`)).toHaveLength(2);
  });

  it("deletes documents with their facts and invalidates units; what the scope cannot see is not found", async () => {
    const s = (await stub())
      .on("GET", "/documents/doc_aaaaaaaaaaaaaaaa", { json: { id: "doc_aaaaaaaaaaaaaaaa", tags: ["dataset:shared", "source:alice"] } })
      .on("DELETE", "/documents/doc_aaaaaaaaaaaaaaaa", { json: { success: true, document_id: "doc_aaaaaaaaaaaaaaaa", memory_units_deleted: 3 } })
      .on("GET", "/documents/doc_bbbbbbbbbbbbbbbb", { json: { id: "doc_bbbbbbbbbbbbbbbb", tags: ["dataset:private:bob"] } })
      .on("GET", `/memories/${U(1)}`, { json: unit(U(1), "one", "shared") })
      .on("PATCH", `/memories/${U(1)}`, { json: {} })
      .on("GET", `/memories/${U(2)}`, { json: unit(U(2), "two", "shared", { state: "invalidated" }) });
    const r = await engineAt(s.url).delete(["doc_aaaaaaaaaaaaaaaa", U(1), "doc_bbbbbbbbbbbbbbbb", U(2), U(3), "junk", U(1)], shared);
    expect(r).toEqual({ deleted: 5, not_found: ["doc_bbbbbbbbbbbbbbbb", "junk", U(2), U(3)].sort() });
    expect(s.to("PATCH", `/memories/${U(1)}`).map((q) => q.body)).toEqual([{ state: "invalidated", reason: "hal0:alice: deleted" }]);
    expect(s.to("DELETE", "/documents/doc_bbbbbbbbbbbbbbbb")).toHaveLength(0);
  });
});

describe("reflect", () => {
  it("reflects over the scope's datasets and returns the cited facts the scope may see", async () => {
    const s = (await stub())
      .on("POST", "/reflect", { json: { text: "Alice ships on Fridays.", based_on: { memories: [{ id: U(1), text: "x" }, { id: U(2), text: "y" }, { id: U(9), text: "gone" }] } } })
      .on("GET", `/memories/${U(1)}`, { json: unit(U(1), "one", "shared") })
      .on("GET", `/memories/${U(2)}`, { json: unit(U(2), "two", "private:bob") });
    const r = await engineAt(s.url).reflect({ query: "when?", scope: shared, max_tokens: 300 });
    expect(s.to("POST", "/reflect")[0]!.body).toEqual({ query: "when?", max_tokens: 300, include: { facts: {} }, tag_groups: [{ tags: ["dataset:shared"], match: "any_strict" }] });
    expect(r).toMatchObject({ text: "Alice ships on Fridays.", based_on: [{ id: U(1), score: 1 }] });
    expect("based_on" in r && r.based_on).toHaveLength(1);
  });
});

describe("mental models, directives, operations, tags and stats", () => {
  it("mental models refresh over every dataset but the private ones", async () => {
    const s = (await stub())
      .on("POST", "/mental-models", (req) => ({ json: { mental_model_id: req.body.id, operation_id: "op-7" } }))
      .on("GET", "/mental-models", { json: { items: [{ id: "b", name: "B", tags: [] }, { id: "a", name: "A", source_query: "q", content: "c", tags: ["t"], last_refreshed_at: "2025-01-01T00:00:00Z", is_stale: false }] } });
    const engine = engineAt(s.url);
    const made = await engine.mentalModelCreate({ name: "Ops", source_query: "How do we ship?", tags: ["ops"] }, "alice");
    const body = s.to("POST", "/mental-models")[0]!.body;
    expect(made).toEqual({ mental_model_id: body.id, operation_id: "op-7" });
    expect(body.trigger).toEqual({ refresh_after_consolidation: false, tag_groups: [{ not: { tags: ["hal0:private"], match: "any_strict" } }] });
    const listed = await engine.mentalModelList({ detail: "metadata" });
    expect(listed.items.map((m) => m.id)).toEqual(["a", "b"]);
    expect(listed.items[0]).not.toHaveProperty("content");
    expect((await engine.mentalModelList({ detail: "content", tags: ["t"] })).items).toEqual([expect.objectContaining({ id: "a", content: "c", stale: false })]);
  });

  it("directives list all of them, highest priority first, when active_only is not set", async () => {
    const s = (await stub()).on("GET", "/directives", { json: { items: [{ id: "1", name: "low", content: "l", priority: 1 }, { id: "2", name: "high", content: "h", priority: 9, is_active: false }] } });
    const r = await engineAt(s.url).directiveList({});
    expect(s.to("GET", "/directives")[0]!.query.get("active_only")).toBe("false");
    expect(r.items.map((d) => [d.name, d.is_active])).toEqual([
      ["high", false],
      ["low", true],
    ]);
  });

  it("operations map Hindsight's kinds; cancel refuses a finished one, and a 409 is memory.operation_state", async () => {
    let status = "pending";
    const s = (await stub())
      .on("GET", "/operations", { json: { operations: [{ id: "o1", task_type: "retain", status: "failed", retry_count: 1, created_at: "t", error_message: "llm down" }, { id: "o2", task_type: "graph_maintenance", status: "completed" }] } })
      .on("GET", "/operations/o1", () => ({ json: { operation_id: "o1", operation_type: "retain", status, result_metadata: { facts_extracted: 2 } } }))
      .on("DELETE", "/operations/o1", () => {
        status = "completed";
        return { status: 409, json: { detail: "already done" } };
      });
    const engine = engineAt(s.url);
    const listed = await engine.operationList({ kind: "retain", limit: 500, scope: "all" });
    expect(s.to("GET", "/operations")[0]!.query.get("type")).toBe("retain");
    expect(s.to("GET", "/operations")[0]!.query.get("limit")).toBe("100");
    expect(listed.items).toEqual([{ id: "o1", kind: "retain", status: "failed", target: null, result: null, error: "llm down", attempts: 2, created_at: "t", updated_at: "t" }]);
    const err = await failure(engine.operationCancel("o1", "all"));
    expect([err.code, err.details.status]).toEqual(["memory.operation_state", "completed"]);
    expect((await engine.operationGet("o1", "all")).result).toEqual({ facts_extracted: 2 });
    expect((await failure(engine.operationCancel("o1", "all"))).code).toBe("memory.operation_state");
    expect(s.to("DELETE", "/operations/o1")).toHaveLength(1);
  });

  it("a retain of a document in another caller's private dataset is neither listed nor found; the operator sees it", async () => {
    const s = (await stub())
      .on("GET", "/operations", { json: { operations: [{ id: "o1", task_type: "retain", status: "pending", document_id: "doc_a" }, { id: "o2", task_type: "retain", status: "pending", document_id: "doc_s" }] } })
      .on("GET", "/operations/o1", { json: { operation_id: "o1", operation_type: "retain", status: "pending", document_id: "doc_a" } })
      .on("GET", "/documents/doc_a", { json: { id: "doc_a", tags: [map.datasetTag("private:alice"), map.PRIVATE_TAG] } })
      .on("GET", "/documents/doc_s", { json: { id: "doc_s", tags: [map.datasetTag("shared")] } });
    const engine = engineAt(s.url);
    expect((await engine.operationList({ limit: 10, scope: { owner: "bob" } })).items.map((o) => o.id)).toEqual(["o2"]);
    expect((await engine.operationList({ limit: 10, scope: { owner: "alice" } })).items.map((o) => o.id)).toEqual(["o1", "o2"]);
    for (const p of [engine.operationGet("o1", { owner: "bob" }), engine.operationCancel("o1", { owner: "bob" })]) expect((await failure(p)).code).toBe("memory.not_found");
    expect(s.to("DELETE", "/operations/o1")).toHaveLength(0);
    expect((await engine.operationGet("o1", "all")).status).toBe("pending");
  });

  it("tags count the visible units' own tags; stats count the scope", async () => {
    const s = (await stub())
      .on("GET", "/memories/list", (req) =>
        req.query.get("state") === "invalidated"
          ? { json: { items: [unit(U(3), "gone", "shared", { state: "invalidated" })], total: 1 } }
          : { json: { items: [unit(U(1), "one", "shared", { document_id: "doc_1" }), unit(U(2), "two", "private:bob"), unit(U(4), "obs", "private:alice", { type: "observation", tags: ["dataset:private:alice"] })], total: 3 } },
      )
      .on("GET", "/stats", { json: { total_links: 12, operations_by_status: { pending: 2, failed: 1 } } })
      .on("GET", "/mental-models", { json: { items: [{ id: "a", name: "A" }] } })
      .on("GET", "/directives", { json: { items: [] } });
    const engine = engineAt(s.url);
    expect(await engine.tags({ owner: "alice" })).toEqual({ tags: [{ tag: "ops", count: 1 }, { tag: "source:spoof", count: 1 }] });
    const stats = await engine.stats({ owner: "alice" });
    expect(stats).toEqual({
      bank: "hal0",
      engine: "hindsight",
      nodes: 2,
      links: 12,
      observations: 1,
      invalidated: 1,
      documents: 1,
      mental_models: 1,
      directives: 0,
      operations: { pending: 2, processing: 0, completed: 0, failed: 1, cancelled: 0 },
      datasets: { "private:alice": 1, shared: 1 },
    });
  });

  it("consolidate queues Hindsight's consolidation for the scope's datasets", async () => {
    const s = (await stub()).on("POST", "/consolidate", { json: { operation_id: "op-c", deduplicated: true } });
    expect(await engineAt(s.url).consolidate(shared)).toEqual({ operation_id: "op-c", deduplicated: 0 });
    expect(s.to("POST", "/consolidate")[0]!.body).toEqual({ observation_scopes: [["dataset:shared"]] });
  });
});
