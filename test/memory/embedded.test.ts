import Database from "better-sqlite3";
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { MemoryError } from "../../memory/errors.js";
import { EmbeddedEngine, MAX_DOCUMENT_SENTENCES } from "../../memory/embedded.js";
import { MIGRATIONS } from "../../memory/embedded-db.js";
import { POLL_MS } from "../../memory/embedded-ops.js";
import { openSqlite } from "../../memory/sqlite.js";
import type { AddInput, Scope } from "../../memory/engine.js";
import { entitiesOf, estimateTokens, ftsExpression, normalise, queryWords, splitSentences } from "../../memory/extract.js";

const dirs: string[] = [];
const engines: EmbeddedEngine[] = [];
afterEach(async () => {
  for (const e of engines.splice(0)) await e.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A clock that stands still until advanced (ms). */
function clock(start = "2025-01-01T00:00:00.000Z") {
  let t = Date.parse(start);
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}
function open(options: { dir?: string; now?: () => number } = {}): { e: EmbeddedEngine; dir: string } {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "hal0-memory-"));
  if (!options.dir) dirs.push(dir);
  const e = new EmbeddedEngine({ stateDir: dir, now: options.now });
  engines.push(e);
  return { e, dir };
}
const shared: Scope = { datasets: ["shared"], owner: "alice" };
const fact = (text: string, extra: Partial<AddInput> = {}): AddInput => ({ text, dataset: "shared", tags: [], metadata: {}, source: "alice", ...extra });
async function refusal(p: Promise<unknown>): Promise<MemoryError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err, "should have been refused").toBeDefined();
  return err as MemoryError;
}
const texts = (r: { results: ReadonlyArray<{ text: string }> }) => r.results.map((h) => h.text);

describe("extract.ts", () => {
  it("splits sentences on end punctuation and line breaks, normalises for dedup, quotes query words, estimates tokens, finds entities", () => {
    expect(splitSentences("Alice owns the box. Bob runs v3.5 now!\nCarol? \n\n ... ")).toEqual(["Alice owns the box.", "Bob runs v3.5 now!", "Carol?"]);
    expect(normalise("  The NPU-slot is  PINNED. ")).toBe("the npu slot is pinned");
    expect(normalise("Café")).toBe(normalise("cafe"));
    expect(normalise("!!!")).toBe("!!!");
    expect(queryWords('chat AND "slot" NEAR(x) chat')).toEqual(["chat", "and", "slot", "near", "x"]);
    expect(queryWords("!!! ???")).toEqual([]);
    expect(ftsExpression(["a", "b"], "OR")).toBe('"a" OR "b"');
    expect(estimateTokens("12345")).toBe(2);
    expect(entitiesOf("Alice met Bob at the Depot. Then the NPU ran iPhone apps and I slept.")).toEqual(["Bob", "Depot", "NPU", "iPhone"]);
  });
});

describe("facts", () => {
  it("adds one unit now, recognises the same text again (tags merged) and keeps datasets apart", async () => {
    const c = clock();
    const { e } = open({ now: c.now });
    const a = await e.add(fact("The box runs llama-server for the Chat slot.", { tags: ["slots", "chat"], metadata: { from: "test" }, context: "setup notes" }));
    expect(a).toEqual({ id: expect.stringMatching(/^mem_[0-9a-f]{16}$/), timestamp: "2025-01-01T00:00:00.000Z" });
    expect(await e.get(a.id, shared)).toEqual({
      id: a.id, text: "The box runs llama-server for the Chat slot.", context: "setup notes", dataset: "shared", tags: ["slots", "chat"], source: "alice",
      metadata: { from: "test" }, fact_type: "world", entities: ["Chat"], document_id: null, occurred_start: null, occurred_end: null, state: "active",
      timestamp: "2025-01-01T00:00:00.000Z", updated_at: "2025-01-01T00:00:00.000Z",
    });
    c.advance(1000);
    const again = await e.add(fact("the box runs llama server for the chat slot", { tags: ["chat", "ops"], source: "bob" }));
    expect(again).toEqual({ id: a.id, timestamp: a.timestamp, already_known: true });
    expect((await e.get(a.id, shared)).tags).toEqual(["slots", "chat", "ops"]);
    expect((await e.history(a.id, shared)).history).toEqual([
      { at: "2025-01-01T00:00:00.000Z", by: "alice", action: "created", changes: {} },
      { at: "2025-01-01T00:00:01.000Z", by: "bob", action: "curated", changes: { tags: { before: ["slots", "chat"], after: ["slots", "chat", "ops"] } } },
    ]);
    expect((await e.add(fact("The box runs llama-server for the Chat slot.", { tags: ["chat"] }))).already_known).toBe(true);
    expect((await e.history(a.id, shared)).history).toHaveLength(2); // no new tag, nothing recorded
    const elsewhere = await e.add(fact("The box runs llama-server for the Chat slot.", { dataset: "team" }));
    expect(elsewhere.id).not.toBe(a.id);
    expect(elsewhere.already_known).toBeUndefined();
    await e.curate(a.id, { state: "invalid" }, shared, "alice");
    expect((await e.add(fact("The box runs llama-server for the Chat slot."))).id).not.toBe(a.id); // an invalid twin is not memory
  });

  it("curates fields with their history; text changes what search and dedup see; unknown ids are memory.not_found", async () => {
    const c = clock();
    const { e, dir } = open({ now: c.now });
    const { id } = await e.add(fact("The chat slot runs Qwen3."));
    c.advance(1000);
    const curated = await e.curate(id, { text: "The chat slot runs Gemma.", fact_type: "experience", context: "moved", entities: ["Gemma"], occurred_start: "2024-12-01T00:00:00.000Z", occurred_end: null }, shared, "bob");
    expect(curated).toMatchObject({ id, text: "The chat slot runs Gemma.", fact_type: "experience", context: "moved", entities: ["Gemma"], occurred_start: "2024-12-01T00:00:00.000Z", updated_at: "2025-01-01T00:00:01.000Z" });
    const h = (await e.history(id, shared)).history;
    expect(h.map((x) => x.action)).toEqual(["created", "curated"]);
    expect(h[1]).toMatchObject({ by: "bob", changes: { text: { before: "The chat slot runs Qwen3.", after: "The chat slot runs Gemma." }, fact_type: { before: "world", after: "experience" }, context: { before: null, after: "moved" } } });
    expect(Object.keys(h[1]!.changes).sort()).toEqual(["context", "entities", "fact_type", "occurred_start", "text"]); // occurred_end was already null
    expect(texts(await e.search({ query: "Qwen3", limit: 10, scope: shared }))).toEqual([]);
    expect(texts(await e.search({ query: "gemma", limit: 10, scope: shared }))).toEqual(["The chat slot runs Gemma."]);
    expect((await e.add(fact("the chat slot runs gemma"))).already_known).toBe(true);
    await e.curate(id, { state: "invalid" }, shared, "bob");
    await e.curate(id, { state: "active" }, shared, "bob");
    await e.curate(id, { fact_type: "experience" }, shared, "bob"); // no change: not recorded
    expect((await e.history(id, shared)).history.map((x) => x.action)).toEqual(["created", "curated", "invalidated", "restored"]);
    await e.delete([(await e.add(fact("short-lived", { context: "gone" }))).id], shared);
    const raw = new Database(join(dir, "memory.db"));
    expect(() => raw.prepare("INSERT INTO units_fts(units_fts, rank) VALUES ('integrity-check', 1)").run()).not.toThrow(); // the index matches the units
    raw.close();
    for (const p of [e.get("mem_0000000000000000", shared), e.history("mem_0000000000000000", shared), e.curate("mem_0000000000000000", { text: "x" }, shared, "a"), e.get(id, { datasets: ["team"], owner: "alice" })]) {
      expect((await refusal(p)).code).toBe("memory.not_found");
    }
  });

  it("deletes units and documents it can see, reporting the rest as not found", async () => {
    const { e } = open();
    const one = await e.add(fact("one fact"));
    const two = await e.add(fact("two fact"));
    const team = await e.add(fact("team fact", { dataset: "team" }));
    const doc = await e.add(fact("First line. Second line.", { document_id: "notes" }));
    await e.idle();
    expect(await e.delete([one.id, one.id, team.id, "mem_ffffffffffffffff", doc.id], shared)).toEqual({ deleted: 1 + 3, not_found: ["mem_ffffffffffffffff", team.id].sort() });
    expect((await e.list({ scope: shared, limit: 10 })).items.map((u) => u.id)).toEqual([two.id]);
    expect((await e.stats({ owner: "alice" })).documents).toBe(0);
    expect(await e.delete([doc.id], shared)).toEqual({ deleted: 0, not_found: [doc.id] });
    expect(await e.delete([team.id], { datasets: ["team"], owner: "alice" })).toEqual({ deleted: 1, not_found: [] });
  });

  it("reflect is unsupported without a language model", async () => {
    expect(await open().e.reflect()).toEqual({ status: "unsupported", message: expect.stringContaining("memory_recall") });
  });
});

describe("search", () => {
  it("ranks by bm25 with scores in (0, 1), stems, folds diacritics, searches context, and never parses the query as FTS5 syntax", async () => {
    const { e } = open();
    await e.add(fact("The coder agent prefers short answers."));
    const both = await e.add(fact("The chat slot runs on the llama server."));
    await e.add(fact("Qwen3 chat model loads in forty seconds."));
    await e.add(fact("The café serves espresso.", { context: "kitchen" }));
    const found = (await e.search({ query: "chat slot", limit: 10, scope: shared })).results;
    expect(found.map((h) => h.id)[0]).toBe(both.id);
    expect(found).toHaveLength(2);
    for (const h of found) expect(h.score > 0 && h.score < 1).toBe(true);
    expect(found[0]!.score).toBeGreaterThan(found[1]!.score);
    expect(texts(await e.search({ query: "running", limit: 10, scope: shared }))).toEqual(["The chat slot runs on the llama server."]);
    expect(texts(await e.search({ query: "cafe", limit: 10, scope: shared }))).toEqual(["The café serves espresso."]);
    expect(texts(await e.search({ query: "kitchen", limit: 10, scope: shared }))).toEqual(["The café serves espresso."]);
    expect((await e.search({ query: '!!! " ???', limit: 10, scope: shared })).results).toEqual([]);
    expect(texts(await e.search({ query: 'chat AND "NEAR(" model*', limit: 1, scope: shared }))).toHaveLength(1);
  });

  it("filters by dataset, state, tags (any/all), recording time and fact type, and limits", async () => {
    const c = clock();
    const { e } = open({ now: c.now });
    const a = await e.add(fact("deploy alpha", { tags: ["x", "y"] }));
    c.advance(60_000);
    const b = await e.add(fact("deploy beta", { tags: ["x"] }));
    c.advance(60_000);
    const g = await e.add(fact("deploy gamma", { tags: ["y"] }));
    await e.add(fact("deploy delta", { dataset: "team" }));
    const ids = async (extra: Record<string, unknown>) => (await e.search({ query: "deploy", limit: 10, scope: shared, ...extra })).results.map((h) => h.id).sort();
    expect(await ids({})).toEqual([a.id, b.id, g.id].sort());
    expect(await ids({ tags: ["x"] })).toEqual([a.id, b.id].sort());
    expect(await ids({ tags: ["x", "y"] })).toEqual([a.id, b.id, g.id].sort());
    expect(await ids({ tags: ["x", "y"], tags_match: "all" })).toEqual([a.id]);
    expect(await ids({ before: "2025-01-01T00:01:00Z" })).toEqual([a.id]);
    expect(await ids({ after: "2025-01-01T01:01:00+01:00" })).toEqual([b.id, g.id].sort());
    expect((await refusal(e.search({ query: "deploy", limit: 10, scope: shared, before: "yesterday" }))).code).toBe("mcp.memory_schema");
    await e.curate(g.id, { fact_type: "opinion" }, shared, "alice");
    expect(await ids({ types: ["opinion", "observation"] })).toEqual([g.id]);
    await e.curate(b.id, { state: "invalid" }, shared, "alice");
    expect(await ids({})).toEqual([a.id, g.id].sort());
    expect(await ids({ limit: 1 })).toHaveLength(1);
    expect((await e.search({ query: "deploy", limit: 10, scope: { datasets: ["shared", "team"], owner: "alice" } })).results).toHaveLength(3);
  });

  it("returns exactly what ranking every matching row would, whatever the query's words", async () => {
    const { e, dir } = open();
    const words = "slot model chat agent port gpu box fan cache token layer kernel".split(" ");
    let x = 7;
    const rand = () => ((x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32);
    const pick = () => words[Math.floor(rand() * words.length)]!;
    for (let i = 0; i < 300; i++) {
      const added = await e.add(fact(`${Array.from({ length: 3 + Math.floor(rand() * 8) }, pick).join(" ")} ${i}`, { dataset: i % 3 === 0 ? "team" : "shared", context: i % 7 === 0 ? `${pick()} notes` : undefined }));
      if (i % 11 === 0) await e.curate(added.id, { state: "invalid" }, { datasets: [i % 3 === 0 ? "team" : "shared"], owner: "alice" }, "alice");
    }
    // BM25 by hand over the active units of `shared` alone (FTS5 only says which units hold a word).
    const raw = new Database(join(dir, "memory.db"), { readonly: true });
    try {
      const units = raw.prepare("SELECT seq, id, length(text) + length(coalesce(context, '')) AS len FROM units WHERE dataset = 'shared' AND state = 'active'").all() as Array<{ seq: number; id: string; len: number }>;
      const holding = raw.prepare("SELECT rowid AS seq FROM units_fts WHERE units_fts MATCH ?");
      const avg = units.reduce((n, u) => n + u.len, 0) / units.length;
      const want = (query: string[], limit: number) => {
        const held = [...new Set(query)].map((w) => new Set((holding.all(`body : "${w}"`) as Array<{ seq: number }>).map((r) => r.seq)));
        // idf in units of 2^-32, summed as integers (the engine's exact sums)
        const idf = held.map((h) => { const n = units.filter((u) => h.has(u.seq)).length; return Math.round(Math.log(1 + (units.length - n + 0.5) / (n + 0.5)) * 2 ** 32); });
        return units
          .filter((u) => held.some((h) => h.has(u.seq)))
          .map((u) => ({ id: u.id, s: (held.reduce((a, h, i) => a + (h.has(u.seq) ? idf[i]! : 0), 0) * ((1.2 + 1) / 2 ** 32)) / (1 + 1.2 * (1 - 0.75 + (0.75 / avg) * u.len)) }))
          .sort((a, b) => b.s - a.s || (a.id < b.id ? -1 : 1))
          .slice(0, limit);
      };
      for (let i = 0; i < 150; i++) {
        const query = Array.from({ length: 1 + (i % 4) }, pick);
        const limit = 1 + (i % 12);
        const expected = want(query, limit);
        const got = (await e.search({ query: query.join(" "), limit, scope: shared })).results;
        expect(got.map((h) => h.id), query.join(" ")).toEqual(expected.map((r) => r.id));
        expect(got.map((h) => h.score)).toEqual(expected.map((r) => r.s / (1 + r.s)));
      }
    } finally {
      raw.close();
    }
  });

  it("brings a memory.db of the one-column index up to date: statistics per dataset, the index rebuilt, searches as on a new one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-memory-"));
    dirs.push(dir);
    const old = openSqlite(dir, "memory.db", MIGRATIONS.slice(0, 3));
    const insert = old.prepare(`INSERT INTO units (id, dataset, text, norm, context, fact_type, source, tags, metadata, entities, state, created_at, updated_at)
      VALUES (?, ?, ?, ?, ?, 'world', 'alice', '[]', '{}', '[]', ?, '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')`);
    const rows: Array<[string, string, string, string | null, string]> = [
      ["mem_0000000000000001", "shared", "The deploy key rotates on Fridays.", null, "active"],
      ["mem_0000000000000002", "shared", "The deploy calendar is on the wiki.", "ops notes", "active"],
      ["mem_0000000000000003", "shared", "The old deploy runbook.", null, "invalid"],
      ["mem_0000000000000004", "private:bob", "Bob's deploy token.", null, "active"],
    ];
    for (const [id, dataset, text, context, state] of rows) insert.run(id, dataset, text, normalise(text), context, state);
    const version = old.prepare("SELECT n FROM bank_version").pluck().get();
    old.close();
    const { e } = open({ dir });
    const raw = new Database(join(dir, "memory.db"));
    try {
      expect(() => raw.prepare("INSERT INTO units_fts(units_fts, rank) VALUES ('integrity-check', 1)").run()).not.toThrow();
      expect(raw.prepare("SELECT name, facts, chars FROM datasets ORDER BY name").all()).toEqual([
        { name: "private:bob", facts: 1, chars: 19 },
        { name: "shared", facts: 2, chars: 34 + 35 + 9 },
      ]);
      expect(raw.prepare("SELECT n FROM bank_version").pluck().get()).toBe(version);
    } finally {
      raw.close();
    }
    const found = (await e.search({ query: "deploy", limit: 10, scope: shared })).results;
    expect(found.map((h) => h.id).sort()).toEqual(["mem_0000000000000001", "mem_0000000000000002"]);
    // the same facts added to a new memory.db score the same
    const { e: fresh } = open();
    for (const [, dataset, text, context, state] of rows) {
      const { id } = await fresh.add(fact(text, { dataset, context: context ?? undefined }));
      if (state === "invalid") await fresh.curate(id, { state: "invalid" }, { datasets: [dataset], owner: "alice" }, "alice");
    }
    expect((await fresh.search({ query: "deploy", limit: 10, scope: shared })).results.map((h) => [h.text, h.score]).sort()).toEqual(found.map((h) => [h.text, h.score]).sort());
  });

  it("weighs scores over the datasets searched alone: another agent's private facts never move them", async () => {
    const base = async () => {
      const { e } = open();
      await e.add(fact("The deploy key rotates on Fridays."));
      await e.add(fact("The deploy calendar lives in the wiki, next to the runbook."));
      await e.add(fact("Alice keeps her deploy checklist short.", { dataset: "private:alice" }));
      await e.add(fact("The fan curve is tuned for the quiet room."));
      return { e };
    };
    const queries = ["deploy", "deploy key", "wiki runbook fan", "fan"];
    const scopes: Scope[] = [shared, { datasets: ["private:alice", "shared"], owner: "alice" }, { owner: "alice" }];
    const scores = async (e: EmbeddedEngine) => {
      const out: Array<Array<[string, number]>> = [];
      for (const scope of scopes) for (const query of queries) out.push((await e.search({ query, limit: 10, scope })).results.map((h) => [h.text, h.score]));
      for (const scope of scopes) out.push((await e.recall({ query: "deploy fan", max_tokens: 1000, scope })).results.map((h) => [h.text, h.score]));
      return out;
    };
    const quiet = await base();
    const before = await scores(quiet.e);
    const busy = await base();
    // bob's private dataset holds the words, many times, in facts long and short
    for (let i = 0; i < 40; i++) await busy.e.add(fact(`deploy ${i} ${"key ".repeat(i % 5)}fan`, { dataset: "private:bob", source: "bob" }));
    expect((await busy.e.search({ query: "deploy", limit: 50, scope: { owner: "bob" } })).results.filter((h) => h.dataset === "private:bob")).toHaveLength(40);
    expect(await scores(busy.e)).toEqual(before);
    // a dataset alice may read counts where she searches it (every dataset she sees), and only there
    for (let i = 0; i < 20; i++) await busy.e.add(fact(`the wiki runbook deploy note ${i}`, { dataset: "team" }));
    const after = await scores(busy.e);
    expect(after.slice(0, 2 * queries.length)).toEqual(before.slice(0, 2 * queries.length));
    expect(after.slice(2 * queries.length, 3 * queries.length)).not.toEqual(before.slice(2 * queries.length, 3 * queries.length));
  });
});

describe("private datasets", () => {
  it("owner a never sees private:b through search, list, get, history, curate, tags, stats, recall or delete", async () => {
    const { e } = open();
    const secret = await e.add(fact("Bob keeps the deploy key.", { dataset: "private:bob", source: "bob", tags: ["secret"] }));
    await e.add(fact("Alice keeps the deploy checklist.", { dataset: "private:alice", tags: ["mine"] }));
    await e.add(fact("Everyone sees the deploy calendar.", { tags: ["cal"] }));
    const alice: Scope = { owner: "alice" };
    const bob: Scope = { owner: "bob" };
    expect(texts(await e.search({ query: "deploy", limit: 10, scope: alice })).sort()).toEqual(["Alice keeps the deploy checklist.", "Everyone sees the deploy calendar."]);
    expect(texts(await e.recall({ query: "deploy", max_tokens: 1000, scope: alice }))).not.toContain("Bob keeps the deploy key.");
    expect((await e.list({ scope: alice, limit: 10 })).items.map((u) => u.dataset).sort()).toEqual(["private:alice", "shared"]);
    for (const p of [e.get(secret.id, alice), e.history(secret.id, alice), e.curate(secret.id, { state: "invalid" }, alice, "alice")]) expect((await refusal(p)).code).toBe("memory.not_found");
    expect((await e.tags(alice)).tags.map((t) => t.tag).sort()).toEqual(["cal", "mine"]);
    expect(Object.keys((await e.stats(alice)).datasets).sort()).toEqual(["private:alice", "shared"]);
    expect(await e.delete([secret.id], alice)).toEqual({ deleted: 0, not_found: [secret.id] });
    expect(await e.delete([secret.id], { datasets: ["shared", "private:alice"], owner: "alice" })).toEqual({ deleted: 0, not_found: [secret.id] });
    expect((await e.get(secret.id, bob)).text).toBe("Bob keeps the deploy key.");
    expect((await e.stats(bob)).datasets).toEqual({ "private:bob": 1, shared: 1 });
  });
});

describe("list", () => {
  it("pages 120 units recorded in the same millisecond, 50 at a time, visiting each exactly once in recording order", async () => {
    const { e } = open({ now: clock().now });
    const added: string[] = [];
    for (let i = 0; i < 120; i++) added.push((await e.add(fact(`fact number ${i}`, { tags: i % 2 ? ["odd"] : [] }))).id);
    const seen: string[] = [];
    let cursor: string | undefined;
    const sizes: number[] = [];
    do {
      const page = await e.list({ scope: shared, limit: 50, cursor });
      sizes.push(page.items.length);
      seen.push(...page.items.map((u) => u.id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    expect(sizes).toEqual([50, 50, 20]);
    expect(seen).toEqual(added);
    expect((await e.list({ scope: shared, limit: 200, tags: ["odd"] })).items).toHaveLength(60);
    await e.curate(added[0]!, { state: "invalid" }, shared, "alice");
    expect((await e.list({ scope: shared, limit: 1 })).items[0]!.id).toBe(added[1]);
    expect((await e.list({ scope: shared, limit: 1, include_invalid: true })).items[0]!.id).toBe(added[0]);
    for (const cursor of ["not-a-cursor", Buffer.from('{"a":1}').toString("base64url"), Buffer.from('["x", 1.5]').toString("base64url")]) {
      expect((await refusal(e.list({ scope: shared, limit: 5, cursor }))).code).toBe("mcp.memory_schema");
    }
  });
});

describe("recall", () => {
  it("packs the best distinct facts into the token budget", async () => {
    const { e } = open();
    await e.add(fact("chat chat chat"));
    await e.add(fact("chat chat chat", { dataset: "team" })); // the same fact in another dataset: dropped as a duplicate
    await e.add(fact("the chat slot is a long sentence about chat that costs many tokens"));
    await e.add(fact("chat is short"));
    const scope: Scope = { datasets: ["shared", "team"], owner: "alice" };
    const all = await e.recall({ query: "chat", max_tokens: 1000, scope });
    expect(all).toMatchObject({ tokens_used: 4 + 17 + 4, max_tokens: 1000, truncated: false });
    expect(texts(all).sort()).toEqual(["chat chat chat", "chat is short", "the chat slot is a long sentence about chat that costs many tokens"]);
    const tight = await e.recall({ query: "chat", max_tokens: 10, scope });
    expect(tight).toMatchObject({ tokens_used: 8, truncated: true });
    expect(texts(tight).sort()).toEqual(["chat chat chat", "chat is short"]);
    expect(await e.recall({ query: "...", max_tokens: 10, scope })).toEqual({ results: [], tokens_used: 0, max_tokens: 10, truncated: false });
  });
});

describe("a database that refuses writes (a full disk)", () => {
  it("leaves the queued operation pending instead of throwing out of the queue's timer, and runs it once writes work again", async () => {
    const { e } = open();
    const db = (e as unknown as { store: { db: { pragma(s: string): unknown } } }).store.db;
    const added = await e.add(fact("Alice owns the box.", { document_id: "conv-1" }));
    db.pragma("query_only = 1"); // before the queue's next turn: its claim of the operation is refused
    await new Promise((r) => setTimeout(r, 50));
    expect(await e.operationGet(added.operation_id!, "all")).toMatchObject({ status: "pending", attempts: 0 });
    db.pragma("query_only = 0");
    await e.idle();
    expect(await e.operationGet(added.operation_id!, "all")).toMatchObject({ status: "completed", attempts: 1 });
  });
});

describe("another process writing the database", () => {
  /** Another process holding memory.db's write lock for `ms`: resolves once it holds it, with its exit. */
  async function writerHolding(dir: string, ms: number): Promise<{ exited: Promise<number | null> }> {
    const sqlite = createRequire(import.meta.url).resolve("better-sqlite3");
    const script = `const db = new (require(${JSON.stringify(sqlite)}))(${JSON.stringify(join(dir, "memory.db"))}); db.exec("BEGIN IMMEDIATE"); db.prepare("UPDATE bank_version SET n = n").run(); process.stdout.write("held\\n"); setTimeout(() => { db.exec("COMMIT"); db.close(); }, ${ms});`;
    const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => chunk.toString().includes("held") && resolve());
      child.on("exit", () => reject(new Error("the writer exited before it held the lock")));
    });
    return { exited };
  }

  it("waits out its write (busy_timeout) instead of refusing a call whose transaction read first", async () => {
    const { e, dir } = open();
    await e.add(fact("Alice owns the box."));
    const writer = await writerHolding(dir, 400);
    // add reads (is the fact already known?) before it writes.
    const added = await e.add(fact("Bob runs the coder agent."));
    expect(added.already_known).toBeUndefined();
    expect(await writer.exited).toBe(0);
    expect((await e.search({ query: "coder", limit: 5, scope: shared })).results.map((h) => h.id)).toEqual([added.id]);
  });

  it("refuses a call whose wait ran out as memory.engine_unavailable, to retry, not as an internal error", async () => {
    const { e, dir } = open();
    (e as unknown as { store: { db: { pragma(s: string): unknown } } }).store.db.pragma("busy_timeout = 100"); // 5 s in use
    const writer = await writerHolding(dir, 1500);
    const err = await refusal(e.add(fact("Bob runs the coder agent.")));
    expect(err).toMatchObject({ code: "memory.engine_unavailable", details: { retry_after_s: 5, cause: "SQLITE_BUSY" } });
    expect(err.message).toContain(join(dir, "memory.db"));
    expect(await writer.exited).toBe(0);
    expect((await e.add(fact("Bob runs the coder agent."))).already_known).toBeUndefined();
  });
});

describe("an operation another process queued", () => {
  it("is run by the engine already open on memory.db within POLL_MS, though nothing in its own process woke its queue", async () => {
    const { e, dir } = open();
    await e.add(fact("Alice owns the box."));
    await new Promise((r) => setTimeout(r, 20)); // its queue's first turn, at opening, found nothing
    // As `hal0 agent approvals approve` does with an approved memory_add of a document: queued, then its engine closed.
    const other = new EmbeddedEngine({ stateDir: dir });
    other.pause();
    const added = await other.add(fact("Bob runs the coder agent. Carol tunes the fans.", { document_id: "notes" }));
    await other.close();
    expect(await e.operationGet(added.operation_id!, "all")).toMatchObject({ status: "pending" });
    const deadline = Date.now() + POLL_MS * 3;
    while ((await e.operationGet(added.operation_id!, "all")).status === "pending" && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await e.operationGet(added.operation_id!, "all")).toMatchObject({ status: "completed", result: { facts_extracted: 2 } });
    expect(texts(await e.search({ query: "fans", limit: 5, scope: shared }))).toEqual(["Carol tunes the fans."]);
  });
});

describe("two processes opening an older memory.db at once", () => {
  it("both open it and its migration runs once: the second finds it done, not half-applied again or refused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-memory-"));
    dirs.push(dir);
    const old = openSqlite(dir, "memory.db", MIGRATIONS.slice(0, 3));
    const insert = old.prepare(`INSERT INTO units (id, dataset, text, norm, context, fact_type, source, tags, metadata, entities, state, created_at, updated_at)
      VALUES (?, 'shared', ?, ?, NULL, 'world', 'alice', '[]', '{}', '[]', 'active', '2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z')`);
    old.transaction(() => {
      for (let i = 0; i < 200; i++) insert.run(`mem_${String(i).padStart(16, "0")}`, `Fact ${i} about the deploy key.`, normalise(`Fact ${i} about the deploy key.`));
    })();
    old.close();
    // A third connection holds the write lock while both start, so both read the old version before either migrates.
    const holder = new Database(join(dir, "memory.db"));
    holder.exec("BEGIN IMMEDIATE");
    holder.prepare("UPDATE bank_version SET n = n").run();
    const repo = join(import.meta.dirname, "../..");
    const children = [0, 1].map(() => {
      const child = spawn(join(repo, "node_modules/.bin/vite-node"), [join(repo, "test/memory/open-engine.ts"), dir], { cwd: repo, stdio: ["pipe", "pipe", "inherit"] });
      let out = "";
      child.stdout.on("data", (c: Buffer) => (out += c.toString()));
      const exited = new Promise<void>((resolve) => child.on("exit", () => resolve()));
      return { child, out: () => out, exited };
    });
    try {
      const deadline = Date.now() + 60_000;
      while (!children.every((c) => c.out().includes("ready\n"))) {
        if (Date.now() > deadline) throw new Error(`the openers did not start: ${children.map((c) => c.out()).join(" | ")}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      for (const c of children) c.child.stdin.end("go\n");
      await new Promise((r) => setTimeout(r, 500));
      holder.exec("COMMIT");
      holder.close();
      await Promise.all(children.map((c) => c.exited));
    } finally {
      if (holder.open) holder.close();
      for (const c of children) c.child.kill();
    }
    expect(children.map((c) => c.out().replace("ready\n", "").trim())).toEqual(["opened", "opened"]);
    const raw = new Database(join(dir, "memory.db"));
    try {
      expect(raw.pragma("user_version", { simple: true })).toBe(MIGRATIONS.length);
      expect(raw.prepare("SELECT name, facts FROM datasets").all()).toEqual([{ name: "shared", facts: 200 }]);
      expect(() => raw.prepare("INSERT INTO units_fts(units_fts, rank) VALUES ('integrity-check', 1)").run()).not.toThrow();
    } finally {
      raw.close();
    }
  }, 90_000);
});

describe("a memory.db a newer hal0 migrated", () => {
  it("is refused as state.newer_schema naming the file and both versions, and left as it was", async () => {
    const { e, dir } = open();
    await e.add(fact("Alice owns the box."));
    await e.close();
    const file = join(dir, "memory.db");
    const raw = new Database(file);
    raw.pragma(`user_version = ${MIGRATIONS.length + 1}`);
    raw.close();
    const before = readFileSync(file);
    let err: unknown;
    try {
      new EmbeddedEngine({ stateDir: dir });
    } catch (thrown) {
      err = thrown;
    }
    expect(err).toMatchObject({ code: "state.newer_schema" });
    expect((err as Error).message).toBe(`the database ${file} was written by a newer hal0 (its schema version is ${MIGRATIONS.length + 1}; this hal0 knows ${MIGRATIONS.length}): run that hal0 again, or restore a backup taken before the upgrade`);
    expect(readFileSync(file).equals(before)).toBe(true);
  });
});

describe("a memory.db hal0 may not write", () => {
  it("is refused when the engine opens as system.io naming the file and that it is read-only, not as an internal error", async () => {
    const { e, dir } = open();
    await e.add(fact("Alice owns the box."));
    await e.close();
    const file = join(dir, "memory.db");
    chmodSync(file, 0o444); // its folder stays writable: SQLite opens the file read-only, and only a write fails
    chmodSync(dir, 0o777);
    // As root (here, as in CI) a mode refuses nothing: the opener runs as root without the capabilities that override
    // file modes (util-linux's setpriv), so it still reads the checkout wherever it is, as another user might not.
    const repo = join(import.meta.dirname, "../..");
    const opener = [join(repo, "node_modules/.bin/vite-node"), join(repo, "test/memory/open-engine.ts"), dir];
    const argv = process.getuid?.() === 0 ? ["setpriv", "--bounding-set=-dac_override,-dac_read_search", ...opener] : opener;
    const child = spawn(argv[0]!, argv.slice(1), { cwd: repo, stdio: ["pipe", "pipe", "inherit"], env: { ...process.env, HOME: dir } });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stdin.end("go\n");
    await new Promise((resolve, reject) => {
      child.on("exit", resolve);
      child.on("error", reject);
    });
    expect(out.replace("ready\n", "").trim()).toBe(`failed system.io could not open the database ${file}: it is read-only (SQLITE_READONLY)`);
  }, 60_000);
});

describe("a database damaged while in use", () => {
  it("is system.io naming memory.db, not an internal error", async () => {
    const { e, dir } = open();
    for (let i = 0; i < 300; i++) await e.add(fact(`Fact ${i}: the box keeps a long enough sentence to fill several pages of the database file.`));
    await e.close();
    const { e: again } = open({ dir });
    const file = join(dir, "memory.db");
    const bytes = readFileSync(file);
    writeFileSync(file, Buffer.concat([bytes.subarray(0, 4096 * 2), Buffer.alloc(bytes.length - 4096 * 2, 0xde)]));
    const err = await refusal(again.search({ query: "box sentence", limit: 5, scope: shared }));
    expect(err).toMatchObject({ code: "system.io" });
    expect(err.message).toContain(`the database ${file} is damaged`);
  });
});

describe("documents", () => {
  it("refuses a document of more than MAX_DOCUMENT_SENTENCES sentences before recording anything; one of exactly that many is extracted", async () => {
    const { e } = open();
    const lines = (n: number) => Array.from({ length: n }, (_, i) => `Line ${i} here`).join("\n");
    const err = await refusal(e.add(fact(lines(MAX_DOCUMENT_SENTENCES + 1), { document_id: "big" })));
    expect(err).toMatchObject({ code: "mcp.memory_schema", details: { detail: [{ path: "text" }] } });
    expect(err.message).toContain(`at most ${MAX_DOCUMENT_SENTENCES} sentences`);
    expect(err.message).toContain(`has ${MAX_DOCUMENT_SENTENCES + 1}`);
    expect((await e.operationList({ limit: 10, scope: "all" })).items).toEqual([]);
    expect((await e.list({ scope: shared, limit: 10 })).items).toEqual([]);
    // A single fact (no document_id) is one unit whatever its length: not split, not refused.
    expect(await e.add(fact(lines(MAX_DOCUMENT_SENTENCES + 1)))).toMatchObject({ id: expect.stringMatching(/^mem_/) });
    const fits = await e.add(fact(lines(MAX_DOCUMENT_SENTENCES), { document_id: "fits" }));
    await e.idle();
    expect((await e.operationGet(fits.operation_id!, "all")).result).toEqual({ facts_extracted: MAX_DOCUMENT_SENTENCES, document_id: "fits" });
  });

  it("upserts a document by document_id: its yield, known content, a new version, and facts already known elsewhere", async () => {
    const { e } = open();
    const added = await e.add(fact("Alice owns the box. Bob runs the coder agent.", { document_id: "conv-1", tags: ["conv"] }));
    expect(added).toEqual({ id: expect.stringMatching(/^doc_[0-9a-f]{16}$/), timestamp: expect.any(String), operation_id: expect.stringMatching(/^op_/) });
    await e.idle();
    expect(await e.operationGet(added.operation_id!, "all")).toMatchObject({ kind: "retain", status: "completed", target: added.id, attempts: 1, result: { facts_extracted: 2, document_id: "conv-1" } });
    const facts = (await e.list({ scope: shared, limit: 10 })).items;
    expect(facts.map((u) => [u.text, u.document_id, u.tags])).toEqual([["Alice owns the box.", "conv-1", ["conv"]], ["Bob runs the coder agent.", "conv-1", ["conv"]]]);
    const again = await e.add(fact("Alice owns the box. Bob runs the coder agent.", { document_id: "conv-1" }));
    expect(again.id).toBe(added.id);
    await e.idle();
    expect((await e.operationGet(again.operation_id!, "all")).result).toEqual({ facts_extracted: 0, document_id: "conv-1", document_fact_count: 2, notice: "content was already known" });
    await e.add(fact("Alice owns the box.\nCarol tunes the profiles.", { document_id: "conv-1" }));
    const grown = await e.add(fact("Alice owns the box.\nCarol tunes the profiles.", { document_id: "conv-1" })); // queued behind the first
    await e.idle();
    const ops = (await e.operationList({ kind: "retain", limit: 10, scope: "all" })).items;
    expect(ops[1]!.result).toEqual({ facts_extracted: 1, document_id: "conv-1" });
    expect(ops[0]).toMatchObject({ id: grown.operation_id, result: { facts_extracted: 0, notice: "content was already known" } });
    expect((await e.list({ scope: shared, limit: 10 })).items.map((u) => u.text)).toEqual(["Alice owns the box.", "Carol tunes the profiles."]);
    expect((await e.list({ scope: shared, limit: 10 })).items[0]!.id).toBe(facts[0]!.id); // kept, not re-created
    const known = await e.add(fact("Carol tunes the profiles. Alice owns the box.", { document_id: "conv-2" }));
    await e.idle();
    expect((await e.operationGet(known.operation_id!, "all")).result).toEqual({ facts_extracted: 0, document_id: "conv-2", nothing_learned: true, notice: "nothing new was learned: every fact in it was already in memory" });
    expect((await e.stats({ owner: "alice" })).documents).toBe(2);
  });

  it("a retain whose document was deleted meanwhile fails", async () => {
    const { e } = open();
    e.pause();
    const added = await e.add(fact("Gone before it was read.", { document_id: "gone" }));
    await e.idle(); // paused: resolves at once
    expect(await e.delete([added.id], shared)).toEqual({ deleted: 1, not_found: [] });
    e.resume();
    await e.idle();
    expect(await e.operationGet(added.operation_id!, "all")).toMatchObject({ status: "failed", error: `document ${added.id} no longer exists` });
  });
});

describe("operations", () => {
  it("cancels pending work (never applied), retries a failed refresh, and refuses the other transitions", async () => {
    const { e } = open();
    e.pause();
    const pending = await e.add(fact("A document nobody will finish.", { document_id: "stuck" }));
    expect((await e.operationGet(pending.operation_id!, "all")).status).toBe("pending");
    expect(await e.operationCancel(pending.operation_id!, "all")).toMatchObject({ status: "cancelled", attempts: 0 });
    const again = await refusal(e.operationCancel(pending.operation_id!, "all"));
    expect(again).toMatchObject({ code: "memory.operation_state", details: { status: "cancelled" } });
    const model = await e.mentalModelCreate({ name: "doomed", source_query: "anything" }, "alice");
    await e.mentalModelDelete(model.mental_model_id);
    e.resume();
    await e.idle();
    expect((await e.list({ scope: shared, limit: 10 })).items).toEqual([]);
    expect(await e.operationGet(model.operation_id, "all")).toMatchObject({ status: "failed", attempts: 1, error: `mental model ${model.mental_model_id} no longer exists` });
    expect(await e.operationRetry(model.operation_id, "all")).toMatchObject({ status: "pending", error: null, attempts: 1 });
    await e.idle();
    expect(await e.operationGet(model.operation_id, "all")).toMatchObject({ status: "failed", attempts: 2 });
    expect((await e.operationRetry(pending.operation_id!, "all")).status).toBe("pending");
    await e.idle();
    expect(await e.operationGet(pending.operation_id!, "all")).toMatchObject({ status: "completed", result: { facts_extracted: 1 } });
    expect((await refusal(e.operationRetry(pending.operation_id!, "all"))).details).toMatchObject({ status: "completed" });
    expect((await refusal(e.operationCancel(pending.operation_id!, "all"))).code).toBe("memory.operation_state");
    for (const p of [e.operationGet("op_0000000000000000", "all"), e.operationRetry("op_0000000000000000", "all"), e.operationCancel("op_0000000000000000", "all")]) expect((await refusal(p)).code).toBe("memory.not_found");
    expect((await e.operationList({ limit: 10, scope: "all" })).items.map((o) => o.id)).toEqual([model.operation_id, pending.operation_id]);
    expect((await e.operationList({ kind: "refresh", limit: 10, scope: "all" })).items.map((o) => o.id)).toEqual([model.operation_id]);
    expect((await e.operationList({ status: "completed", limit: 10, scope: "all" })).items.map((o) => o.id)).toEqual([pending.operation_id]);
    expect((await e.operationList({ limit: 1, scope: "all" })).items).toHaveLength(1);
    expect((await e.stats({ owner: "alice" })).operations).toEqual({ pending: 0, processing: 0, completed: 1, failed: 1, cancelled: 0 });
  });

  it("survives a restart: units, models and directives stay, and queued or interrupted operations run on reopen", async () => {
    const first = open();
    const unit = await first.e.add(fact("The NPU slot is pinned."));
    const directive = await first.e.directiveCreate({ name: "tone", content: "Be brief." });
    first.e.pause();
    const model = await first.e.mentalModelCreate({ name: "npu", source_query: "NPU" }, "alice");
    const doc = await first.e.add(fact("The fan is loud.", { document_id: "fan" }));
    await first.e.close();
    const raw = new Database(join(first.dir, "memory.db"));
    raw.prepare("UPDATE operations SET status = 'processing' WHERE id = ?").run(doc.operation_id); // as if the process died mid-run
    raw.close();
    const { e } = open({ dir: first.dir });
    await e.idle();
    expect((await e.get(unit.id, shared)).text).toBe("The NPU slot is pinned.");
    expect((await e.directiveGet(directive.id)).content).toBe("Be brief.");
    expect(await e.operationGet(model.operation_id, "all")).toMatchObject({ status: "completed" });
    expect(await e.operationGet(doc.operation_id!, "all")).toMatchObject({ status: "completed", result: { facts_extracted: 1 } });
    expect((await e.mentalModelGet(model.mental_model_id)).content).toBe("- The NPU slot is pinned.");
    await e.close();
    await e.close();
    expect((await refusal(e.stats({ owner: "alice" }))).code).toBe("memory.engine_unavailable");
  });
});

describe("mental models", () => {
  it("are filled by an async refresh from non-private facts, go stale when shared memory changes, and list at three levels of detail", async () => {
    const { e } = open();
    await e.add(fact("The chat slot runs Qwen3."));
    await e.add(fact("My chat slot password is hunter2.", { dataset: "private:alice" }));
    const created = await e.mentalModelCreate({ name: "slots", source_query: "chat slot", tags: ["ops"], trigger: { refresh_after_consolidation: true } }, "alice");
    expect(created).toEqual({ mental_model_id: expect.stringMatching(/^mm_[0-9a-f]{16}$/), operation_id: expect.stringMatching(/^op_/) });
    expect(await e.mentalModelGet(created.mental_model_id)).toMatchObject({ content: null, refreshed_at: null, stale: true, max_tokens: 2048 });
    await e.idle();
    const model = await e.mentalModelGet(created.mental_model_id);
    expect(model).toMatchObject({ name: "slots", source_query: "chat slot", tags: ["ops"], trigger: { refresh_after_consolidation: true }, content: "- The chat slot runs Qwen3.", stale: false, refreshed_at: expect.any(String) });
    await e.add(fact("Another private chat slot note.", { dataset: "private:bob" }));
    expect((await e.mentalModelGet(created.mental_model_id)).stale).toBe(false);
    await e.add(fact("The chat slot moved to port 8090."));
    expect((await e.mentalModelGet(created.mental_model_id)).stale).toBe(true);
    const other = await e.mentalModelCreate({ name: "empty", source_query: "zebra", max_tokens: 100 }, "alice");
    await e.idle();
    expect((await e.mentalModelGet(other.mental_model_id)).content).toBe("");
    const [meta] = (await e.mentalModelList({ detail: "metadata", tags: ["ops"] })).items;
    expect(Object.keys(meta!).sort()).toEqual(["created_at", "id", "name", "refreshed_at", "stale", "tags", "trigger", "updated_at"]);
    expect((await e.mentalModelList({ detail: "content" })).items.map((m) => [m.name, m.content])).toEqual([["empty", ""], ["slots", "- The chat slot runs Qwen3."]]);
    expect(Object.keys((await e.mentalModelList({ detail: "full" })).items[0]!)).toHaveLength(11);
    expect(await e.mentalModelUpdate(created.mental_model_id, { name: "slot facts", max_tokens: 50, trigger: {} })).toMatchObject({ name: "slot facts", max_tokens: 50, source_query: "chat slot", trigger: { refresh_after_consolidation: true } });
    const refresh = await e.mentalModelRefresh(created.mental_model_id);
    expect(refresh).toEqual({ operation_id: expect.stringMatching(/^op_/), status: "pending", mental_model_id: created.mental_model_id });
    await e.idle();
    expect((await e.mentalModelGet(created.mental_model_id)).content).toContain("8090");
    expect(await e.mentalModelDelete(created.mental_model_id)).toEqual({ deleted: 1, id: created.mental_model_id });
    for (const p of [e.mentalModelGet(created.mental_model_id), e.mentalModelUpdate(created.mental_model_id, { name: "x" }), e.mentalModelRefresh(created.mental_model_id), e.mentalModelDelete(created.mental_model_id)]) {
      expect((await refusal(p)).code).toBe("memory.not_found");
    }
  });
});

describe("directives", () => {
  it("keep standing instructions, highest priority first, filtered by activity and tags", async () => {
    const { e } = open();
    const tone = await e.directiveCreate({ name: "tone", content: "Answer briefly.", priority: 1 });
    expect(tone).toMatchObject({ id: expect.stringMatching(/^dir_[0-9a-f]{16}$/), is_active: true, tags: [], priority: 1 });
    const safety = await e.directiveCreate({ name: "safety", content: "Never print secrets.", priority: 10, tags: ["security"] });
    const alpha = await e.directiveCreate({ name: "alpha", content: "Default priority.", is_active: false });
    const beta = await e.directiveCreate({ name: "beta", content: "Default priority too." });
    expect((await e.directiveList({})).items.map((d) => d.id)).toEqual([safety.id, tone.id, alpha.id, beta.id]);
    expect((await e.directiveList({ active_only: true })).items.map((d) => d.id)).toEqual([safety.id, tone.id, beta.id]);
    expect((await e.directiveList({ tags: ["security", "other"] })).items.map((d) => d.id)).toEqual([safety.id]);
    expect(await e.directiveUpdate(tone.id, { is_active: false, tags: ["style"] })).toMatchObject({ name: "tone", content: "Answer briefly.", priority: 1, is_active: false, tags: ["style"] });
    expect(await e.directiveGet(safety.id)).toEqual(safety);
    expect(await e.directiveDelete(tone.id)).toEqual({ deleted: 1, id: tone.id });
    for (const p of [e.directiveGet(tone.id), e.directiveUpdate(tone.id, { name: "x" }), e.directiveDelete(tone.id)]) expect((await refusal(p)).code).toBe("memory.not_found");
  });
});

describe("deduplication keeps what changes a fact's meaning", () => {
  it("merges case and punctuation variants, never > with <, C++ with C#, $ or %", async () => {
    expect(normalise("Alert when temperature > 90")).toBe(normalise("alert when temperature >90."));
    expect(normalise("Alert when temperature > 90")).not.toBe(normalise("Alert when temperature < 90"));
    expect(normalise("The team writes C++")).not.toBe(normalise("The team writes C#"));
    expect(normalise("It costs 5%")).not.toBe(normalise("It costs $5"));
    expect(normalise("It is -5 outside")).not.toBe(normalise("It is 5 outside"));
    const { e } = open();
    const gt = await e.add(fact("Alert when temperature > 90"));
    const lt = await e.add(fact("Alert when temperature < 90"));
    expect(lt.already_known).toBeUndefined();
    expect((await e.add(fact("alert when temperature >90."))).already_known).toBe(true);
    const cpp = await e.add(fact("The team writes C++."));
    await e.add(fact("The team writes C#."));
    const recalled = await e.recall({ query: "temperature team writes", max_tokens: 1000, scope: shared });
    expect(recalled.results).toHaveLength(4);
    await e.curate(lt.id, { text: "ALERT when temperature > 90!" }, shared, "alice");
    expect((await e.consolidate(shared)).deduplicated).toBe(1);
    expect((await e.list({ scope: shared, limit: 10 })).items.map((u) => u.id)).toEqual([gt.id, cpp.id, expect.any(String)]);
  });

  it("recomputes normal forms an older rule stored when the database is opened", async () => {
    const { e, dir } = open();
    const gt = await e.add(fact("Alert when temperature > 90"));
    await e.close();
    const db = new Database(join(dir, "memory.db"));
    db.prepare("UPDATE units SET norm = 'alert when temperature 90'").run();
    db.prepare("UPDATE norm_rule SET version = 1").run();
    db.close();
    const { e: again } = open({ dir });
    expect((await again.add(fact("Alert when temperature > 90."))).id).toBe(gt.id);
    expect((await again.add(fact("Alert when temperature < 90"))).already_known).toBeUndefined();
  });
});

describe("tags, stats and consolidation", () => {
  it("counts tags and the bank: nodes, links, observations, invalidated, documents, models, directives", async () => {
    const { e } = open();
    const units = [];
    for (const text of ["Alice met Bob at the Depot.", "Then Bob fixed the NPU.", "The NPU runs hot near the Depot.", "nothing named here", "Later Bob visited the Depot."]) {
      units.push(await e.add(fact(text, { tags: text.includes("Bob") ? ["bob", "people"] : ["misc"] })));
    }
    await e.add(fact("Carol met Bob.", { dataset: "private:carol", tags: ["bob"] }));
    await e.curate(units[3]!.id, { fact_type: "observation" }, shared, "alice");
    expect((await e.tags({ owner: "alice" })).tags).toEqual([{ tag: "bob", count: 3 }, { tag: "people", count: 3 }, { tag: "misc", count: 2 }]);
    await e.directiveCreate({ name: "d", content: "c" });
    await e.mentalModelCreate({ name: "m", source_query: "Bob" }, "alice");
    await e.idle();
    const stats = await e.stats({ owner: "alice" });
    expect(stats).toEqual({
      // Bob: 3 units, Depot: 3, NPU: 2 → 3 + 3 + 1 links (the Alice/Later pair shares Bob and the Depot: two links).
      bank: "hal0", engine: "embedded", nodes: 5, links: 7, observations: 1, invalidated: 0, documents: 0, mental_models: 1, directives: 1,
      operations: { pending: 0, processing: 0, completed: 1, failed: 0, cancelled: 0 }, datasets: { shared: 5 },
    });
    await e.curate(units[0]!.id, { state: "invalid" }, shared, "alice");
    expect(await e.stats({ owner: "alice" })).toMatchObject({ nodes: 4, links: 3, invalidated: 1 });
    expect((await e.tags({ owner: "alice" })).tags).toEqual([{ tag: "bob", count: 2 }, { tag: "misc", count: 2 }, { tag: "people", count: 2 }]);
    expect((await e.stats({ owner: "carol" })).datasets).toEqual({ "private:carol": 1, shared: 4 });
  });

  it("counts the links of one entity named by 20 000 facts without pairing them (the engine's calls hold the event loop)", async () => {
    const { e, dir } = open();
    const n = 20_000;
    const first = await e.add(fact("The Strix box was set up."));
    await e.close();
    // The other facts are written straight into the database: 20 000 adds would only slow the test.
    const db = new Database(join(dir, "memory.db"));
    const { entities, created_at } = db.prepare("SELECT entities, created_at FROM units WHERE id = ?").get(first.id) as { entities: string; created_at: string };
    const insert = db.prepare("INSERT INTO units (id, dataset, text, norm, context, fact_type, source, tags, metadata, entities, state, created_at, updated_at) VALUES (?, 'shared', ?, ?, NULL, 'world', 'alice', '[]', '{}', ?, 'active', ?, ?)");
    db.transaction(() => {
      for (let i = 1; i < n; i++) insert.run(`mem_${String(i).padStart(16, "0")}`, `Fact ${i} about the Strix box.`, `fact ${i} about the strix box`, entities, created_at, created_at);
    })();
    db.close();
    const { e: again } = open({ dir });
    const started = performance.now();
    expect(await again.stats({ owner: "alice" })).toMatchObject({ nodes: n, links: (n * (n - 1)) / 2 });
    // Pairing the rows (200 million pairs) took minutes; counting per entity takes milliseconds.
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it("consolidate merges active duplicates in scope into the oldest, then refreshes the models that ask for it", async () => {
    const c = clock();
    const { e } = open({ now: c.now });
    const one = await e.add(fact("The NPU slot is pinned.", { tags: ["npu"] }));
    c.advance(1000);
    const two = await e.add(fact("The NPU slot is busy.", { tags: ["busy"] }));
    const three = await e.add(fact("The NPU slot is idle."));
    const team = await e.add(fact("The NPU slot is pinned.", { dataset: "team" }));
    const teamTwin = await e.add(fact("The NPU slot is busy.", { dataset: "team" }));
    await e.curate(two.id, { text: "the NPU slot is pinned" }, shared, "alice");
    await e.curate(three.id, { text: "The NPU slot is pinned!" }, shared, "alice");
    await e.curate(teamTwin.id, { text: "The NPU slot is pinned." }, { datasets: ["team"], owner: "alice" }, "alice");
    const watched = await e.mentalModelCreate({ name: "npu", source_query: "NPU", trigger: { refresh_after_consolidation: true } }, "alice");
    await e.mentalModelCreate({ name: "other", source_query: "NPU" }, "alice");
    await e.idle();
    const done = await e.consolidate(shared);
    expect(done).toEqual({ operation_id: expect.stringMatching(/^op_/), deduplicated: 2 });
    await e.idle();
    expect(await e.operationGet(done.operation_id, "all")).toMatchObject({ kind: "consolidate", status: "completed", target: '["shared"]', result: { deduplicated: 2, refreshed: [watched.mental_model_id] } });
    expect((await e.list({ scope: shared, limit: 10 })).items.map((u) => u.id)).toEqual([one.id]);
    expect((await e.get(one.id, shared)).tags).toEqual(["npu", "busy"]);
    expect((await e.history(two.id, shared)).history.at(-1)).toMatchObject({ by: "engine", action: "merged", changes: { state: { before: "active", after: "invalid" }, merged_into: { after: one.id } } });
    expect((await e.history(one.id, shared)).history.at(-1)).toMatchObject({ by: "engine", action: "merged", changes: { tags: { before: ["npu"], after: ["npu", "busy"] } } });
    expect((await e.list({ scope: { datasets: ["team"], owner: "alice" }, limit: 10 })).items.map((u) => u.id)).toEqual([team.id, teamTwin.id]); // outside the scope
    expect((await e.consolidate({ owner: "alice" })).deduplicated).toBe(1);
  });
});
