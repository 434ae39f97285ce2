import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());

const file = () => readFileSync(join(s.config, "upstreams.toml"), "utf8");
const FRONTIER = "# Frontier models on demand; only Anthropic and Gemini are advertised to clients.";
const KEY_NOTE = "# the key itself is in the service's environment";
const CODER_NOTE = "# we swap the model behind it.";

describe("upstream reads", () => {
  it("lists every upstream with its defaults", async () => {
    const r = await s.call("GET", "/api/upstreams");
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(2);
    expect(r.body.upstreams.map((u: any) => u.name)).toEqual(["openrouter", "local-coder"]);
    expect(r.body.upstreams[1]).toMatchObject({ kind: "slot", slot_name: "coder", timeout_seconds: 300, auth_style: "none", warmup_strategy: "lazy" });
  });

  it("gets one by name; an unknown name is 404 upstream.not_found naming the known ones", async () => {
    const r = await s.call("GET", "/api/upstreams/openrouter");
    expect(r.body).toMatchObject({ name: "openrouter", auth_value_env: "OPENROUTER_API_KEY", model_filters: { exclude: ["*:free"] } });
    const missing = await s.call("GET", "/api/upstreams/nope");
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ code: "upstream.not_found", details: { known: ["local-coder", "openrouter"] } });
  });
});

describe("upstream writes", () => {
  const local = { name: "lan-box", url: "http://127.0.0.1:9/v1", warmup_strategy: "eager" };

  it("creates an upstream: 201, appended, the other rows' comments kept, defaults not written", async () => {
    const r = await s.call("POST", "/api/upstreams", { body: local });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ upstream: local, committed: true, files: ["upstreams.toml"] });
    const text = file();
    for (const note of [FRONTIER, KEY_NOTE, CODER_NOTE]) expect(text).toContain(note);
    expect(text).toContain(`doesn't serve go.\n\n${FRONTIER}\n[[upstream]]`);
    expect(text).toMatch(/\[\[upstream\]\]\nname = "lan-box"\nurl = "http:\/\/127\.0\.0\.1:9\/v1"\nwarmup_strategy = "eager"\n$/);
    expect((await s.call("GET", "/api/upstreams/lan-box")).body).toMatchObject({ kind: "remote", timeout_seconds: 300 });
  });

  it("refuses a taken name (409 upstream.exists), a bad shape (422 validation.invalid) and a row the compiler rejects (422 config.invalid)", async () => {
    const before = file();
    const taken = await s.call("POST", "/api/upstreams", { body: { name: "openrouter", url: "http://127.0.0.1:9" } });
    expect(taken.status).toBe(409);
    expect(taken.body.error.code).toBe("upstream.exists");
    const shape = await s.call("POST", "/api/upstreams", { body: { name: "x", url: "http://127.0.0.1:9", colour: "red" } });
    expect(shape.status).toBe(422);
    expect(shape.body.error.code).toBe("validation.invalid");
    const noUrl = await s.call("POST", "/api/upstreams", { body: { name: "far" } });
    expect(noUrl.status).toBe(422);
    expect(noUrl.body.error.code).toBe("config.invalid");
    expect(noUrl.body.error.details.diagnostics.map((d: any) => d.code)).toEqual(["upstream.url_required"]);
    const reserved = await s.call("POST", "/api/upstreams", { body: { name: "hal0", url: "http://127.0.0.1:9" } });
    expect(reserved.body.error.details.diagnostics.map((d: any) => d.code)).toEqual(["upstream.name_reserved"]);
    const badSlot = await s.call("POST", "/api/upstreams", { body: { name: "ghost", kind: "slot", slot_name: "ghost" } });
    expect(badSlot.body.error.details.diagnostics.map((d: any) => d.code)).toEqual(["upstream.unknown_slot"]);
    expect(file()).toBe(before);
  });

  it("merges a PATCH: values replace, null removes, model_filters merges key by key; every comment survives", async () => {
    const r = await s.call("PATCH", "/api/upstreams/openrouter", { body: { timeout_seconds: 60, catalog_id: null, model_filters: { exclude: null, models: ["a/b"] } } });
    expect(r.status).toBe(200);
    const got = (await s.call("GET", "/api/upstreams/openrouter")).body;
    expect(got).toMatchObject({ timeout_seconds: 60, model_filters: { include: ["anthropic/*", "google/gemini-*"], exclude: [], models: ["a/b"] } });
    expect(got.catalog_id).toBeUndefined();
    const text = file();
    for (const note of [FRONTIER, KEY_NOTE, CODER_NOTE]) expect(text).toContain(note);
    expect(text).not.toContain("catalog_id");
    expect(text).toContain(`doesn't serve go.\n\n${FRONTIER}\n[[upstream]]`);
    expect(text).toContain("timeout_seconds = 60");
  });

  it("a url read with its ?key= masked and sent back keeps the key; a masked value no read can match is refused, nothing written", async () => {
    expect((await s.call("PATCH", "/api/upstreams/openrouter", { body: { url: "https://openrouter.ai/api/v1?key=AIzaS3CRETkey" } })).status).toBe(200);
    const read = (await s.call("GET", "/api/upstreams/openrouter")).body;
    expect(read.url).toBe("https://openrouter.ai/api/v1?key=[redacted]");
    // The whole row as read, one key changed: the key stays.
    const back = await s.call("PATCH", "/api/upstreams/openrouter", { body: { url: read.url, timeout_seconds: 100 } });
    expect(back.status, JSON.stringify(back.body)).toBe(200);
    expect(file()).toContain('url = "https://openrouter.ai/api/v1?key=AIzaS3CRETkey"');
    expect(file()).toContain("timeout_seconds = 100");
    // The host edited around the mask: no value to keep, and the mask is not written over the key.
    const before = file();
    const moved = await s.call("PATCH", "/api/upstreams/openrouter", { body: { url: "https://other.example/api/v1?key=[redacted]" } });
    expect(moved.status).toBe(422);
    expect(moved.body.error.code).toBe("validation.invalid");
    expect(moved.body.error.details).toMatchObject({ values: ["upstreams.toml upstream.0.url"], reason: "masked_value" });
    expect(file()).toBe(before);
  });

  it("a url with user:password@ is refused (the upstream schema's rule), its password in no reply, nothing written", async () => {
    const before = file();
    const refused = await s.call("PATCH", "/api/upstreams/openrouter", { body: { url: "https://user:S3CRETpw@openrouter.ai/api/v1" } });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe("validation.invalid");
    expect(refused.body.error.message).toContain("user name or password");
    expect(JSON.stringify(refused.body)).not.toContain("S3CRETpw");
    expect(file()).toBe(before);
  });

  it("renames through PATCH; a rename onto a taken name is 409, an unknown upstream 404", async () => {
    expect((await s.call("PATCH", "/api/upstreams/local-coder", { body: { name: "coder" } })).status).toBe(200);
    expect((await s.call("GET", "/api/upstreams")).body.upstreams.map((u: any) => u.name)).toEqual(["openrouter", "coder"]);
    expect(file()).toContain(CODER_NOTE);
    const clash = await s.call("PATCH", "/api/upstreams/coder", { body: { name: "openrouter" } });
    expect(clash.status).toBe(409);
    expect(clash.body.error.code).toBe("upstream.exists");
    expect((await s.call("PATCH", "/api/upstreams/nope", { body: { enabled: false } })).body.error.code).toBe("upstream.not_found");
    const bad = await s.call("PATCH", "/api/upstreams/coder", { body: { warmup_strategy: "sometimes" } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe("validation.invalid");
  });

  it("renames over MCP with upstream_update's new_name (name is the upstream it edits there), advertised beside the patch's keys", async () => {
    const c = await adminClient(s.url, { token: s.operator });
    try {
      const { tools } = await c.listTools();
      const schema = (tools.find((t) => t.name === "upstream_update")!.inputSchema as any).properties.args as { properties: Record<string, unknown>; required: string[] };
      expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(["name", "new_name", "url", "enabled"]));
      expect(schema.required).toEqual(["name"]);
      const renamed = await callTool(c, "upstream_update", { name: "local-coder", new_name: "coder", enabled: false });
      expect(renamed.isError, JSON.stringify(renamed.body)).toBe(false);
      expect((await s.call("GET", "/api/upstreams/coder")).body).toMatchObject({ name: "coder", slot_name: "coder", enabled: false });
      expect(file()).toContain(CODER_NOTE);
      expect((await callTool(c, "upstream_update", { name: "coder", new_name: "openrouter" })).body.error.code).toBe("upstream.exists");
    } finally {
      await c.close();
    }
  });

  it("deletes an upstream; the remaining rows keep their keys and comments", async () => {
    const r = await s.call("DELETE", "/api/upstreams/local-coder");
    expect(r.status).toBe(200);
    expect(r.body.upstream).toEqual({ name: "local-coder", deleted: true });
    const text = file();
    expect(text).not.toContain("local-coder");
    for (const note of [FRONTIER, KEY_NOTE]) expect(text).toContain(note);
    expect((await s.call("DELETE", "/api/upstreams/openrouter")).status).toBe(200);
    expect((await s.call("GET", "/api/upstreams")).body).toEqual({ upstreams: [], count: 0 });
    expect(file()).toMatch(/^#:schema /);
    expect((await s.call("DELETE", "/api/upstreams/openrouter")).status).toBe(404);
    expect((await s.call("POST", "/api/upstreams", { body: { name: "again", url: "http://127.0.0.1:9/v1" } })).status).toBe(201);
    expect(file()).toMatch(/^#:schema [^\n]+\n# Where requests[^\n]+\n\n\[\[upstream\]\]\nname = "again"\n/);
  });

  it("deleting a row before others takes its own comment with it and leaves the later rows' comments", async () => {
    const before = file();
    expect((await s.call("DELETE", "/api/upstreams/openrouter")).status).toBe(200);
    const text = file();
    expect(text).not.toContain(FRONTIER);
    expect(text).not.toContain(KEY_NOTE);
    expect(text).toBe(before.slice(0, before.indexOf(FRONTIER)) + before.slice(before.indexOf("# The coder slot")));
    expect((await s.call("GET", "/api/upstreams")).body.upstreams.map((u: any) => u.name)).toEqual(["local-coder"]);
  });
});

describe("POST /api/upstreams/{name}/test against a real loopback server", () => {
  let fake: Server;
  let fakeUrl: string;
  let closedPort: number;
  const seen: IncomingHttpHeaders[] = [];
  beforeAll(async () => {
    fake = createServer((req, res) => {
      seen.push(req.headers);
      if (req.url === "/slow/models") return; // never answers
      if (req.url !== "/v1/models") return void res.writeHead(404).end("{}");
      const authed = req.headers.authorization === "Bearer s3cret" || req.headers["x-api-key"] === "s3cret";
      res.writeHead(authed ? 200 : 401, { "content-type": "application/json" });
      res.end(JSON.stringify(authed ? { object: "list", data: [{ id: "m1" }, { id: "m2" }, { id: "m3" }] } : { error: "no key" }));
    });
    await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve));
    fakeUrl = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    closedPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
  });
  // A remote upstream on loopback is reached only when the operator trusts it (the SSRF guard's allow list); the key is in the server's environment.
  beforeEach(async () => {
    await s.close();
    s = await startTestServer({ env: { HAL0_TEST_UPSTREAM_KEY: "s3cret", HAL0_UPSTREAM_ALLOW: `${new URL(fakeUrl).host}, 127.0.0.1:${closedPort}` } });
  });
  afterAll(async () => {
    fake.closeAllConnections();
    await new Promise<void>((resolve) => fake.close(() => resolve()));
  });

  const add = (body: Record<string, unknown>) => s.call("POST", "/api/upstreams", { body: { name: "lan", ...body } });

  it("reports reachable, status, latency and model count, with bearer auth from the named variable (never echoed)", async () => {
    expect((await add({ url: `${fakeUrl}/v1/`, auth_style: "bearer", auth_value_env: "HAL0_TEST_UPSTREAM_KEY" })).status).toBe(201);
    const r = await s.call("POST", "/api/upstreams/lan/test");
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ name: "lan", url: `${fakeUrl}/v1/models`, reachable: true, ok: true, status: 200, model_count: 3, auth: "sent" });
    expect(r.body.latency_ms).toBeGreaterThanOrEqual(0);
    expect(seen.at(-1)!.authorization).toBe("Bearer s3cret");
    expect(JSON.stringify(r.body)).not.toContain("s3cret");
  });

  it("sends header auth under auth_header; a wrong answer is reachable but not ok", async () => {
    await add({ url: `${fakeUrl}/v1`, auth_style: "header", auth_header: "X-Api-Key", auth_value_env: "HAL0_TEST_UPSTREAM_KEY" });
    expect((await s.call("POST", "/api/upstreams/lan/test")).body).toMatchObject({ status: 200, model_count: 3 });
    await s.call("PATCH", "/api/upstreams/lan", { body: { auth_style: "none", auth_header: null, auth_value_env: null } });
    expect((await s.call("POST", "/api/upstreams/lan/test")).body).toMatchObject({ reachable: true, ok: false, status: 401, model_count: null, auth: "none" });
  });

  it("does not call when the credential variable is unset; reports refused connections and timeouts", async () => {
    await add({ url: `${fakeUrl}/v1`, auth_style: "bearer", auth_value_env: "HAL0_TEST_UNSET_KEY" });
    const before = seen.length;
    expect((await s.call("POST", "/api/upstreams/lan/test")).body).toMatchObject({ reachable: false, auth: "missing", error: "environment variable HAL0_TEST_UNSET_KEY is not set" });
    expect(seen.length).toBe(before);

    await s.call("PATCH", "/api/upstreams/lan", { body: { url: `http://127.0.0.1:${closedPort}/v1`, auth_style: "none", auth_value_env: null } });
    expect((await s.call("POST", "/api/upstreams/lan/test")).body).toMatchObject({ reachable: false, status: null, error: "ECONNREFUSED" });

    await s.call("PATCH", "/api/upstreams/lan", { body: { url: `${fakeUrl}/slow` } });
    const slow = await s.call("POST", "/api/upstreams/lan/test?timeout_ms=150");
    expect(slow.body).toMatchObject({ reachable: false, timeout_ms: 150, error: "no answer within 150 ms" });
  });

  it("tests a slot upstream at its slot's address; an unknown upstream is 404", async () => {
    const r = await s.call("POST", "/api/upstreams/local-coder/test?timeout_ms=500");
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ kind: "slot", url: "http://127.0.0.1:8082/v1/models" });
    expect(typeof r.body.reachable).toBe("boolean");
    expect((await s.call("POST", "/api/upstreams/nope/test")).body.error.code).toBe("upstream.not_found");
    expect((await s.call("POST", "/api/upstreams/lan/test?timeout_ms=1")).body.error.code).toBe("validation.invalid");
  });
});
