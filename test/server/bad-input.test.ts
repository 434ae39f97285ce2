import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { once } from "node:events";
import { request, type IncomingHttpHeaders } from "node:http";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compile, loadTree } from "../../compiler/index.js";
import { effectsOf } from "../../compiler/effects.js";
import { CODES, Diagnostic, SETTINGS_REGISTRY, Settings } from "../../schema/index.js";
import { Audit } from "../../server/audit.js";
import { openDb } from "../../server/db.js";
import { inputRefusal, MAX_DEPTH } from "../../server/input.js";
import { httpCall, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callMemory, callTool, memoryClient } from "./mcp-helpers.js";
import { until } from "../helpers/until.js";

/**
 * Issue 16, bad input over HTTP: bodies over `[server] max_body_kb` (413,
 * not read past the limit), JSON nested too deep (400 `request.too_deep`),
 * prototype keys (422 `validation.invalid`), bodies that are not JSON (415)
 * — over REST and over the MCP endpoints, with the registry's envelope and
 * nothing written.
 */
let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => s.close());

const MB = 1024 * 1024;
const read = (file: string) => readFileSync(join(s.config, file), "utf8");
/** `{"a":{"a":…1…}}`, `n` objects deep, as text (a client's JSON.stringify could not make it). */
const nested = (n: number) => '{"a":'.repeat(n) + "1" + "}".repeat(n);
/** The same as a value, for clients that can serialise it. */
const nestedValue = (n: number): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = { a: v };
  return v;
};

/** The registry's envelope for `code`, with the code's status. */
function expectRefusal(res: { status: number; body: any }, code: keyof typeof CODES): void {
  expect(res.body?.error, JSON.stringify(res.body).slice(0, 300)).toMatchObject({ code, message: expect.any(String), details: expect.any(Object) });
  expect(res.status).toBe(CODES[code].http);
}

/** An MCP tool result that is hal0's envelope with isError. */
function expectToolRefusal(res: { isError: boolean; body: any }, code: keyof typeof CODES): void {
  expect(res.isError, JSON.stringify(res.body).slice(0, 300)).toBe(true);
  expect(res.body).toMatchObject({ status: "error", error: { code, message: expect.any(String) }, http_status: CODES[code].http });
}

async function lastAudit(): Promise<any> {
  return (await s.call("GET", "/api/activity?limit=1")).body.items[0];
}

interface Streamed {
  readonly status: number;
  readonly body: any;
  readonly headers: IncomingHttpHeaders;
  /** Bytes of the body the client had handed to the socket when the reply arrived. */
  readonly sent: number;
}

/**
 * A request whose body (`head`, then `x`s, then `"}` and more closing
 * braces: valid JSON of `total` bytes) is written in 64 KiB chunks as fast
 * as the socket takes them, until the reply arrives or it is all written:
 * with `declare`, Content-Length says `total` but only `sendAtMost` bytes
 * are ever written when that is less (the rest never comes); without it the
 * body is chunked. Rejects when no reply comes within `timeoutMs` (a server
 * waiting for the rest of the body).
 */
function streamBody(method: string, path: string, o: { headers: Record<string, string>; total: number; declare: boolean; sendAtMost?: number; head?: string; tail?: string; timeoutMs?: number }): Promise<Streamed> {
  return new Promise((resolve, reject) => {
    const head = Buffer.from(o.head ?? '{"description":"');
    const tail = Buffer.from(o.tail ?? '"}');
    const chunk = Buffer.alloc(64 * 1024, "x");
    const filler = o.total - head.length - tail.length;
    const cap = Math.min(o.total, o.sendAtMost ?? o.total);
    let sent = 0;
    let replied = false;
    const req = request(`${s.url}${path}`, { method, headers: { "content-type": "application/json", ...(o.declare ? { "content-length": String(o.total) } : {}), ...o.headers } }, (res) => {
      replied = true;
      const at = sent;
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        clearTimeout(timer);
        const text = Buffer.concat(chunks).toString("utf8");
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON
        }
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body, headers: res.headers, sent: at });
      });
    });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no reply within ${o.timeoutMs ?? 5000} ms after sending ${sent} of ${o.total} bytes (the server waits for the rest of the body)`));
    }, o.timeoutMs ?? 5000);
    req.on("error", (err) => {
      if (!replied) {
        clearTimeout(timer);
        reject(err);
      }
    });
    const pump = () => {
      while (!replied && sent < Math.min(cap, head.length + filler)) {
        const piece = sent === 0 ? head : chunk.subarray(0, Math.min(chunk.length, Math.min(cap, head.length + filler) - sent));
        sent += piece.length;
        if (!req.write(piece)) return void req.once("drain", pump);
      }
      // All of it is to be sent: close the JSON and end (a server that reads it all answers then).
      if (!replied && cap === o.total) {
        sent += tail.length;
        req.end(tail);
      }
    };
    pump();
  });
}

/** One request as the operator, its headers exactly as given (no Content-Type added); the reply's JSON parsed. */
function raw(method: string, path: string, headers: Record<string, string>, body?: string | Buffer): Promise<{ status: number; body: any }> {
  return httpCall(s.url, method, path, { body, headers: { authorization: `Bearer ${s.operator}`, ...headers }, exactHeaders: true });
}

/** A raw MCP session on `path` (initialize, initialized): sends one JSON-RPC text as it is, with whatever nesting. */
async function rawMcp(path: string): Promise<(text: string) => Promise<{ status: number; body: any }>> {
  const h = { authorization: `Bearer ${s.operator}`, accept: "application/json, text/event-stream", "content-type": "application/json" };
  const init = await httpCall(s.url, "POST", path, { headers: h, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bad-input", version: "1" } } }) });
  expect(init.status).toBe(200);
  const session = { ...h, "mcp-session-id": init.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-06-18" };
  await httpCall(s.url, "POST", path, { headers: session, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
  return (text) => httpCall(s.url, "POST", path, { headers: session, body: text });
}

/** A tools/call result read the way mcp-helpers reads one. */
function toolResult(res: { body: any }): { isError: boolean; body: any } {
  const result = res.body.result;
  return { isError: result?.isError === true, body: JSON.parse(result?.content?.[0]?.text ?? "null") };
}

describe("1. request bodies over [server] max_body_kb", () => {
  it("is a hal0.toml setting: an int in [64, 65536], 1024 by default, applied per request, privileged for agents", async () => {
    expect(Settings.parse({}).server.max_body_kb).toBe(1024);
    expect(Settings.safeParse({ server: { max_body_kb: 63 } }).success).toBe(false);
    expect(Settings.safeParse({ server: { max_body_kb: 65_537 } }).success).toBe(false);
    expect(Settings.safeParse({ server: { max_body_kb: 1.5 } }).success).toBe(false);
    expect(SETTINGS_REGISTRY["server.max_body_kb"]).toEqual({ apply_class: "immediate" });
    const m = compile((await loadTree(s.config)).tree).model!;
    const effects = effectsOf({ before: m, after: m, files: [{ file: "hal0.toml", before: "[server]\n", after: "[server]\nmax_body_kb = 65536\n" }] });
    expect(effects).toEqual([expect.objectContaining({ class: "privileged", line: expect.stringMatching(/\[server\] max_body_kb/) })]);
  });

  it("refuses a 20 MB description with 413 request.too_large, writes nothing, and audits a short row without the body", async () => {
    const before = read("slots/chat.toml");
    // All 20 MB sent, valid JSON: a server without a limit reads it, writes it and answers 200 (slowly: the timeout waits for that).
    const res = await streamBody("PUT", "/api/slots/chat/config", { headers: { authorization: `Bearer ${s.operator}` }, total: 20 * MB, declare: true, timeoutMs: 30_000 });
    expectRefusal(res, "request.too_large");
    expect(res.body.error.details).toMatchObject({ max_body_kb: 1024, content_length: 20 * MB });
    expect(res.headers.connection).toBe("close");
    expect(read("slots/chat.toml")).toBe(before);
    const row = await lastAudit();
    expect(row).toMatchObject({ route: "PUT /api/slots/{name}/config", outcome: "error", error_code: "request.too_large" });
    expect(JSON.stringify(row.args).length).toBeLessThan(100);
  }, 60_000);

  it("keeps at most 64 KiB of a body under the limit in the audit row: an anonymous caller's refused 900 KB ask is recorded as its size", async () => {
    const onDisk = () => ["hal0.db", "hal0.db-wal"].reduce((n, f) => n + (existsSync(join(s.state, f)) ? statSync(join(s.state, f)).size : 0), 0);
    const before = onDisk();
    for (let i = 0; i < 5; i++) {
      const res = await s.call("POST", "/api/slots", { as: "anonymous", body: { name: `x${i}`, description: "x".repeat(900_000) } });
      expectRefusal(res, "auth.required");
    }
    const row = await lastAudit();
    expect(row).toMatchObject({ actor: "anonymous", route: "POST /api/slots", outcome: "error", error_code: "auth.required" });
    expect(row.args).toEqual({ _unrecorded: expect.stringMatching(/^the arguments are 9000\d\d characters of JSON; an audit row keeps at most 65536$/) });
    // Each used to be kept whole: 4.5 MB more in hal0.db.
    expect(onDisk() - before).toBeLessThan(1 * MB);
    // Arguments of a usual size are kept as they were.
    await s.call("POST", "/api/slots", { as: "anonymous", body: { name: "x", description: "short" } });
    expect((await lastAudit()).args).toEqual({ name: "x", description: "short" });
  });

  it("answers a Content-Length over the limit at once, without waiting for (or reading) the body", async () => {
    const before = read("slots/chat.toml");
    const started = Date.now();
    // 20 MB announced, 16 KiB sent, the rest never comes: a server that reads to the end never answers.
    const res = await streamBody("PUT", "/api/slots/chat/config", { headers: { authorization: `Bearer ${s.operator}` }, total: 20 * MB, declare: true, sendAtMost: 16 * 1024, timeoutMs: 3000 });
    expectRefusal(res, "request.too_large");
    expect(Date.now() - started).toBeLessThan(3000);
    expect(read("slots/chat.toml")).toBe(before);
  });

  it("stops reading a chunked body (no Content-Length) at the limit and refuses it", async () => {
    const before = read("slots/chat.toml");
    const rss = process.memoryUsage().rss;
    const res = await streamBody("PUT", "/api/slots/chat/config", { headers: { authorization: `Bearer ${s.operator}` }, total: 20 * MB, declare: false, timeoutMs: 10_000 });
    expectRefusal(res, "request.too_large");
    // The client could hand over only what the server read (1 MiB) plus the sockets' buffers before the reply: far from 20 MB.
    expect(res.sent).toBeLessThan(12 * MB);
    expect(process.memoryUsage().rss - rss).toBeLessThan(20 * MB);
    expect(read("slots/chat.toml")).toBe(before);
  });

  it("reads the limit from hal0.toml per request: a lower one applies to the next request", async () => {
    const t = await startTestServer();
    try {
      expect((await t.call("PUT", "/api/settings", { body: { server: { max_body_kb: 64 } } })).status).toBe(200);
      const before = readFileSync(join(t.config, "slots/chat.toml"), "utf8");
      const big = await t.call("PUT", "/api/slots/chat/config", { body: { description: "y".repeat(70 * 1024) } });
      expectRefusal(big, "request.too_large");
      expect(big.body.error.details.max_body_kb).toBe(64);
      expect(readFileSync(join(t.config, "slots/chat.toml"), "utf8")).toBe(before);
      expect((await t.call("PUT", "/api/slots/chat/config", { body: { description: "y".repeat(60 * 1024) } })).status).toBe(200);
      const bad = await t.call("PUT", "/api/settings", { body: { server: { max_body_kb: 1 } } });
      expectRefusal(bad, "config.invalid");
    } finally {
      await t.close();
    }
  });

  it("applies to the MCP endpoints' POST bodies too: 413 with the envelope, declared or chunked, and one short audit row", async () => {
    const started = Date.now();
    const declared = await streamBody("POST", "/mcp/admin", { headers: { authorization: `Bearer ${s.operator}`, accept: "application/json, text/event-stream" }, head: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slot_edit","arguments":{"args":{"name":"chat","description":"', tail: '"}}}}', total: 20 * MB, declare: true, sendAtMost: 16 * 1024, timeoutMs: 3000 });
    expectRefusal(declared, "request.too_large");
    expect(Date.now() - started).toBeLessThan(3000);
    const chunked = await streamBody("POST", "/mcp/memory", { headers: { authorization: `Bearer ${s.operator}`, accept: "application/json, text/event-stream" }, head: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_add","arguments":{"text":"', tail: '"}}}', total: 20 * MB, declare: false, timeoutMs: 10_000 });
    expectRefusal(chunked, "request.too_large");
    expect(chunked.sent).toBeLessThan(12 * MB);
    const row = await lastAudit();
    expect(row).toMatchObject({ actor: "operator:owner", kind: "mcp", route: "POST /mcp/memory", outcome: "error", error_code: "request.too_large", args: {} });
    // Under the limit the endpoints work as before.
    const c = await adminClient(s.url, { token: s.operator });
    expect((await callTool(c, "slot_list", {})).isError).toBe(false);
    await c.close();
  });
});

describe("NUL characters in strings", () => {
  it("refuses a NUL in an env value, a model path, a description or a key with 422 config.invalid (a runner could never be started with it); nothing is written", async () => {
    const cases: Array<[string, string, unknown, string, readonly (string | number)[]]> = [
      ["PUT", "/api/slots/utility/config", { server: { env: { EDGE_X: "a\u0000b" } } }, "slots/utility.toml", ["server", "env", "EDGE_X"]],
      ["PUT", "/api/models/qwen3-4b", { path: "models/a\u0000b.gguf" }, "models.toml", ["model", "qwen3-4b", "path"]],
      ["PUT", "/api/slots/chat/config", { description: "a\u0000b" }, "slots/chat.toml", ["description"]],
      ["PUT", "/api/slots/chat/config", { server: { env: { "A\u0000B": "1" } } }, "slots/chat.toml", ["server", "env", "A\u0000B"]],
    ];
    for (const [method, path, body, file, loc] of cases) {
      const before = read(file);
      const res = await s.call(method, path, { body });
      expectRefusal(res, "config.invalid");
      expect(res.body.error.details.diagnostics).toEqual([expect.objectContaining({ code: expect.stringMatching(/^config\.invalid_(value|name)$/), file, path: loc })]);
      expect(read(file)).toBe(before);
    }
  });
});

describe("an edit that cannot apply", () => {
  it("is config.invalid with a diagnostic of the one shape, at the key the edit names (else the file's start), on REST and MCP alike; nothing is written", async () => {
    const before = read("slots/chat.toml");
    const line = before.split("\n").findIndex((l) => l.startsWith("description = ")) + 1;
    const res = await s.call("PUT", "/api/slots/chat/config", { body: { description: "a\ud800b" } });
    expectRefusal(res, "config.invalid");
    const [d] = res.body.error.details.diagnostics;
    expect(Diagnostic.parse(d)).toMatchObject({ code: "config.invalid_value", file: "slots/chat.toml", line, column: 15, path: ["description"], related: [] });
    expect(d.summary).toContain("lone surrogate");
    const client = await adminClient(s.url, "hermes__ops");
    try {
      const viaMcp = await callTool(client, "plan_propose", { edits: [{ file: "../escape.toml", op: "text", text: "x = 1\n" }] });
      expect(viaMcp.body).toMatchObject({ valid: false, plan: null });
      expect(Diagnostic.parse(viaMcp.body.diagnostics[0])).toMatchObject({ code: "config.invalid_name", file: "../escape.toml", line: 1, column: 1, path: [] });
    } finally {
      await client.close();
    }
    expect(read("slots/chat.toml")).toBe(before);
  });
});

describe("a client that goes before its body has arrived", () => {
  /** Sends the headers and `part` of a body announced as longer, then closes the connection. */
  async function abandon(path: string, headers: Record<string, string>, part: string): Promise<void> {
    const socket = connect({ host: "127.0.0.1", port: Number(new URL(s.url).port) });
    await once(socket, "connect");
    const head = Object.entries({ host: "127.0.0.1", "content-type": "application/json", "content-length": String(part.length + 100), ...headers }).map(([k, v]) => `${k}: ${v}\r\n`).join("");
    socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n${part}`);
    await sleep(100);
    socket.destroy();
  }

  it("is audited as request.incomplete, on REST and on an MCP endpoint, never system.internal; nothing is written", async () => {
    const before = read("slots/chat.toml");
    await abandon("/api/slots/chat/restart", { authorization: `Bearer ${s.operator}` }, '{"for');
    const rest = await until(lastAudit, (row) => row?.route === "POST /api/slots/{name}/restart");
    expect(rest).toMatchObject({ actor: "operator:owner", kind: "rest", outcome: "error", error_code: "request.incomplete" });
    await abandon("/mcp/admin", { authorization: `Bearer ${s.operator}`, accept: "application/json, text/event-stream" }, '{"jsonrpc":"2.0","id":1,');
    const mcp = await until(lastAudit, (row) => row?.route === "POST /mcp/admin");
    expect(mcp).toMatchObject({ actor: "operator:owner", kind: "mcp", outcome: "error", error_code: "request.incomplete" });
    expect(read("slots/chat.toml")).toBe(before);
  });
});

describe("2. JSON nested too deep", () => {
  it("refuses 10,000 levels under tune with 400 request.too_deep (not system.internal), audited, nothing written", async () => {
    const before = read("slots/chat.toml");
    const res = await s.call("PUT", "/api/slots/chat/config", { body: `{"tune": ${nested(10_000)}}` });
    expectRefusal(res, "request.too_deep");
    expect(res.body.error.details).toMatchObject({ max_depth: MAX_DEPTH, loc: ["body", "tune", "a", "a", "a", "a", "a", "a", "a"] });
    expect(read("slots/chat.toml")).toBe(before);
    expect(await lastAudit()).toMatchObject({ route: "PUT /api/slots/{name}/config", outcome: "error", error_code: "request.too_deep" });
  });

  it("refuses 10,000 levels as a plan edit's value", async () => {
    const res = await s.call("POST", "/api/plans", { body: `{"edits":[{"file":"slots/chat.toml","op":"set","path":["tune","ctx_size"],"value":${nested(10_000)}}]}` });
    expectRefusal(res, "request.too_deep");
    expect(res.body.error.details.loc.slice(0, 4)).toEqual(["body", "edits", "0", "value"]);
  });

  it("draws the line at 64 levels: 64 pass to the route, 65 are refused", () => {
    expect(inputRefusal(nestedValue(MAX_DEPTH))).toBeUndefined();
    expect(inputRefusal(nestedValue(MAX_DEPTH + 1))?.code).toBe("request.too_deep");
    expect(inputRefusal(JSON.parse("[".repeat(64) + "]".repeat(64)))).toBeUndefined();
    expect(inputRefusal(JSON.parse("[".repeat(65) + "]".repeat(65)))?.code).toBe("request.too_deep");
  });

  it("answers an MCP tool call with too-deep arguments with the envelope and isError, on both endpoints", async () => {
    const admin = await rawMcp("/mcp/admin");
    const edit = toolResult(await admin(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slot_edit","arguments":{"args":{"name":"chat","tune":${nested(10_000)}}}}}`));
    expectToolRefusal(edit, "request.too_deep");
    expect(edit.body.error.details.loc.slice(0, 2)).toEqual(["args", "tune"]);
    const plan = toolResult(await admin(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"plan_propose","arguments":{"args":{"edits":[{"file":"slots/chat.toml","op":"set","path":["tune","ctx_size"],"value":${nested(10_000)}}]}}}}`));
    expectToolRefusal(plan, "request.too_deep");
    expect(await lastAudit()).toMatchObject({ kind: "mcp", tool: "plan_propose", outcome: "error", error_code: "request.too_deep" });
    const memory = await rawMcp("/mcp/memory");
    expectToolRefusal(toolResult(await memory(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_add","arguments":{"text":"deep","metadata":${nested(10_000)}}}}`)), "request.too_deep");
    // Through the SDK's own client (which can only serialise modest depths): the same.
    const c = await adminClient(s.url, { token: s.operator });
    expectToolRefusal(await callTool(c, "slot_edit", { name: "chat", tune: nestedValue(100) }), "request.too_deep");
    await c.close();
  });

  it("hardens Audit.record: a value too deep for redaction, a bigint or a cycle never throws", () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-audit-"));
    const db = openDb(dir);
    try {
      const audit = new Audit(db);
      const caller = { kind: "operator", agent: "owner", private: false, via: "rest" } as const;
      const cyclic: Record<string, unknown> = { name: "x" };
      cyclic.self = cyclic;
      const route = { method: "PATCH", path: "/api/mcp/{server_id}/config" } as const;
      for (const body of [{ env: nestedValue(10_000) }, { big: 10n }, cyclic]) {
        expect(() => audit.record({ call: { params: { server_id: "sqlite" }, query: {}, body, caller, requestId: "r" }, route, outcome: "error", errorCode: "validation.invalid", durationMs: 1 })).not.toThrow();
      }
      const rows = audit.query({}).items;
      expect(rows).toHaveLength(3);
      expect(JSON.stringify(rows.map((r) => r.args))).toContain("[too deep]");
      expect(rows.find((r) => (r.args as any).big !== undefined)?.args).toMatchObject({ server_id: "sqlite", big: "10" });
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("3. __proto__, constructor and prototype keys", () => {
  it("refuses env.__proto__ on PATCH /api/mcp/sqlite/config with 422 naming the path; the env is not emptied", async () => {
    const before = read("mcp-servers/sqlite.toml");
    const res = await s.call("PATCH", "/api/mcp/sqlite/config", { body: '{"env":{"__proto__":{"X":"1"}}}' });
    expectRefusal(res, "validation.invalid");
    expect(res.body.error.details.fields).toEqual([expect.objectContaining({ loc: ["body", "env", "__proto__"], type: "forbidden_key" })]);
    expect(read("mcp-servers/sqlite.toml")).toBe(before);
    expect(read("mcp-servers/sqlite.toml")).toContain('DB_PATH = "/var/lib/hal0/inventory.db"');
  });

  it("refuses them at any depth, at the top, and names each", async () => {
    const before = read("slots/chat.toml");
    const res = await s.call("PUT", "/api/slots/chat/config", { body: '{"__proto__":{"priority":1},"tune":{"constructor":{"x":1}},"server":{"env":{"A":"1","prototype":"2"}}}' });
    expectRefusal(res, "validation.invalid");
    expect(res.body.error.details.fields.map((f: any) => f.loc)).toEqual(expect.arrayContaining([["body", "__proto__"], ["body", "tune", "constructor"], ["body", "server", "env", "prototype"]]));
    const plan = await s.call("POST", "/api/plans", { body: '{"edits":[{"file":"slots/chat.toml","op":"set","path":["server","env"],"value":{"__proto__":{"X":"1"}}}]}' });
    expectRefusal(plan, "validation.invalid");
    expect(read("slots/chat.toml")).toBe(before);
    expect(await lastAudit()).toMatchObject({ route: "POST /api/plans", outcome: "error", error_code: "validation.invalid" });
  });

  it("refuses them as query parameters, which were dropped unseen: ?__proto__=x on a route that takes no query answered 200", async () => {
    for (const path of ["/api/slots?__proto__=x", "/api/slots?constructor", "/api/plans?limit=2&%5F%5Fproto%5F%5F=1", "/api/slots?prototype=1"]) {
      const res = await s.call("GET", path);
      expectRefusal(res, "validation.invalid");
      expect(res.body.error.details.fields[0], path).toMatchObject({ loc: ["query", path.includes("constructor") ? "constructor" : path.includes("prototype=") ? "prototype" : "__proto__"], type: "forbidden_key" });
    }
    const before = read("slots/chat.toml");
    const write = await s.call("PUT", "/api/slots/chat/config?__proto__=1", { body: { priority: 12 } });
    expectRefusal(write, "validation.invalid");
    expect(read("slots/chat.toml")).toBe(before);
    expect(await lastAudit()).toMatchObject({ route: "PUT /api/slots/{name}/config", outcome: "error", error_code: "validation.invalid" });
    // a key that only contains the word is data
    expect((await s.call("GET", "/api/slots?x__proto__=1")).body.error.details.fields[0].type).toBe("unrecognized_keys");
    expect((await s.call("GET", "/api/plans?limit=2")).status).toBe(200);
  });

  it("refuses them in MCP tool arguments with the envelope and isError (even at the top of args, which the SDK's schema would drop)", async () => {
    const before = read("mcp-servers/sqlite.toml");
    const c = await adminClient(s.url, { token: s.operator });
    const env = await callTool(c, "mcp_server_config_write", JSON.parse('{"server_id":"sqlite","env":{"__proto__":{"X":"1"}}}'));
    expectToolRefusal(env, "validation.invalid");
    expect(env.body.error.details.fields[0].loc).toEqual(["args", "env", "__proto__"]);
    const top = await callTool(c, "mcp_server_config_write", JSON.parse('{"server_id":"sqlite","enabled":true,"__proto__":{"env":{}}}'));
    expectToolRefusal(top, "validation.invalid");
    expect(top.body.error.details.fields[0].loc).toEqual(["args", "__proto__"]);
    await c.close();
    expect(read("mcp-servers/sqlite.toml")).toBe(before);
    const m = await memoryClient(s.url, { token: s.operator });
    const add = await callMemory(m, "memory_add", JSON.parse('{"text":"proto","__proto__":{"dataset":"shared"}}'));
    expectToolRefusal(add, "validation.invalid");
    await m.close();
  });
});

describe("4. bodies that are not JSON", () => {
  it("refuses a body sent as text/plain, a form or with no type with 415 request.unsupported_media_type, before reading it", async () => {
    const before = read("slots/chat.toml");
    const json = '{"description":"sent as something else"}';
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const res = await raw("PUT", "/api/slots/chat/config", { "content-type": type }, json);
      expectRefusal(res, "request.unsupported_media_type");
      expect(res.body.error.details.accepted).toEqual(["application/json", "application/*+json"]);
    }
    expectRefusal(await raw("PUT", "/api/slots/chat/config", {}, json), "request.unsupported_media_type");
    expect(read("slots/chat.toml")).toBe(before);
    expect(await lastAudit()).toMatchObject({ route: "PUT /api/slots/{name}/config", outcome: "error", error_code: "request.unsupported_media_type" });
  });

  it("takes application/json with parameters and +json types, and a bodiless POST of any type", async () => {
    expect((await raw("PUT", "/api/slots/chat/config", { "content-type": "application/json; charset=utf-8" }, '{"description":"one"}')).status).toBe(200);
    expect((await raw("PUT", "/api/slots/chat/config", { "content-type": "application/merge-patch+json" }, '{"description":"two"}')).status).toBe(200);
    expect(read("slots/chat.toml")).toContain('description = "two"');
    expect((await raw("POST", "/api/settings/reload", {})).status).toBe(200);
    expect((await raw("POST", "/api/settings/reload", { "content-type": "text/plain", "content-length": "0" })).status).toBe(200);
  });

  it("refuses a body that is not UTF-8 (a Latin-1 é was written to the tree as U+FFFD) or says it is in another charset; takes one with a byte order mark", async () => {
    const before = read("slots/chat.toml");
    const latin1 = Buffer.from('{"description":"caf\xe9"}', "latin1");
    for (const type of ["application/json", "application/json; charset=utf-8"]) {
      const res = await raw("PUT", "/api/slots/chat/config", { "content-type": type }, latin1);
      expectRefusal(res, "request.invalid_json");
      expect(res.body.error.message).toMatch(/not valid UTF-8/);
    }
    for (const type of ["application/json; charset=iso-8859-1", "application/json;charset=\"UTF-16\""]) {
      const res = await raw("PUT", "/api/slots/chat/config", { "content-type": type }, latin1);
      expectRefusal(res, "request.unsupported_media_type");
      expect(res.body.error.details.charset).toBe("utf-8");
    }
    expect(read("slots/chat.toml")).toBe(before);
    expect(await lastAudit()).toMatchObject({ route: "PUT /api/slots/{name}/config", outcome: "error", error_code: "request.unsupported_media_type" });
    // the same on an MCP endpoint: refused with the envelope, not read as U+FFFD
    const mcp = await raw("POST", "/mcp/admin", { "content-type": "application/json", accept: "application/json, text/event-stream" }, Buffer.from('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"caf\xe9","version":"1"}}}', "latin1"));
    expectRefusal(mcp, "request.invalid_json");
    // UTF-8 itself, with a byte order mark (Windows editors write one) or without, and UTF8 spelt so
    expect((await raw("PUT", "/api/slots/chat/config", { "content-type": "application/json; charset=UTF8" }, Buffer.from('\ufeff{"description":"café"}', "utf8"))).status).toBe(200);
    expect(read("slots/chat.toml")).toContain('description = "café"');
  });

  it("refuses a non-JSON POST to an MCP endpoint with the same 415 envelope (the SDK's client sends application/json)", async () => {
    const init = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "form", version: "1" } } });
    const res = await raw("POST", "/mcp/admin", { "content-type": "text/plain", accept: "application/json, text/event-stream" }, init);
    expectRefusal(res, "request.unsupported_media_type");
    expect(await lastAudit()).toMatchObject({ kind: "mcp", route: "POST /mcp/admin", error_code: "request.unsupported_media_type" });
  });

  it("answers JSON that is no JSON-RPC message (an id null, an object or 1.5, jsonrpc 1.0, a bare number, an empty batch) with -32600 Invalid Request, not -32700 Parse error", async () => {
    for (const path of ["/mcp/admin", "/mcp/memory"]) {
      const send = await rawMcp(path);
      const cases: Array<[string, RegExp]> = [
        ['{"jsonrpc":"2.0","id":null,"method":"tools/list"}', /"id" must be a string or an integer, not null/],
        ['{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', /"id" must be/],
        ['{"jsonrpc":"2.0","id":1.5,"method":"ping"}', /"id" must be/],
        ['{"jsonrpc":"1.0","id":2,"method":"ping"}', /"jsonrpc" must be "2.0"/],
        ['{"jsonrpc":"2.0","id":3,"method":7}', /"method" must be a string/],
        ["5", /an object, not a number/],
        ["[]", /an empty batch/],
        ['[{"jsonrpc":"2.0","id":4,"method":"ping"},true]', /message 1 of the batch: .*an object, not a boolean/],
      ];
      for (const [text, why] of cases) {
        const res = await send(text);
        expect(res.status, text).toBe(400);
        expect(res.body, text).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
        expect(res.body.error.message, text).toMatch(why);
      }
      // not JSON at all is still a parse error; a good message, an id a string, a batch of good ones are served
      expect((await send("{nope")).body.error.code).toBe(-32700);
      expect((await send('{"jsonrpc":"2.0","id":"x-1","method":"ping"}')).body).toMatchObject({ id: "x-1", result: {} });
      const batch = await send('[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"ping"}]');
      expect(batch.status).toBe(200);
      expect(batch.body).toEqual([expect.objectContaining({ id: 5, result: {} }), expect.objectContaining({ id: 6, result: {} })]);
    }
  });

  it("answers a batch with an array even when one of its messages is a request (it was a bare object)", async () => {
    for (const path of ["/mcp/admin", "/mcp/memory"]) {
      const send = await rawMcp(path);
      for (const text of ['[{"jsonrpc":"2.0","id":7,"method":"ping"}]', '[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}]']) {
        const res = await send(text);
        expect(res.status, text).toBe(200);
        expect(res.body, text).toEqual([{ jsonrpc: "2.0", id: 7, result: {} }]);
      }
      // a single message is still answered with a single object
      expect((await send('{"jsonrpc":"2.0","id":8,"method":"ping"}')).body).toEqual({ jsonrpc: "2.0", id: 8, result: {} });
    }
  });

  it("leaves the pages' form posts alone (they are not JSON routes)", async () => {
    const res = await raw("POST", "/login", { "content-type": "application/x-www-form-urlencoded" }, `token=${encodeURIComponent(s.operator)}`);
    expect(res.status).toBe(303);
  });
});

describe("diagnostics per reply", () => {
  it("lists at most 200 diagnostics of a write and counts the rest in one more (first), over REST and MCP: 10 000 bad values made a reply of one diagnostic each", async () => {
    // 10 000 environment variables that are not strings: one field of the body, 10 000 wrong values.
    const env = Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`K${i}`, 1]));
    const body = { name: "wide", profile: "cpu-small", model: "qwen3-4b", port: 8150, enabled: false, server: { env } };
    const check = (diagnostics: Diagnostic[]) => {
      expect(diagnostics).toHaveLength(201);
      expect(diagnostics.slice(1).every((d) => d.code === "config.invalid_type" && d.file === "slots/wide.toml" && d.line > 1)).toBe(true);
      expect(diagnostics[0]).toMatchObject({ code: "config.too_many_diagnostics", severity: "error", summary: "9800 more diagnostics not listed" });
    };
    const res = await s.call("POST", "/api/slots", { body });
    expectRefusal(res, "config.invalid");
    check(res.body.error.details.diagnostics);
    expect(JSON.stringify(res.body).length).toBeLessThan(100_000);
    const c = await adminClient(s.url, { token: s.operator });
    try {
      const tool = await callTool(c, "slot_create", body);
      expectToolRefusal(tool, "config.invalid");
      check(tool.body.error.details.diagnostics);
      expect(JSON.stringify(tool.body).length).toBeLessThan(100_000);
    } finally {
      await c.close();
    }
    expect(existsSync(join(s.config, "slots/wide.toml"))).toBe(false);
  }, 60_000);

  it("refuses a slot create or edit of far more fields than a slot file has keys before any work: 1000 tune keys took 40 s, set one after another", async () => {
    const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 1]));
    const before = read("slots/chat.toml");
    const cases: Array<[string, string, Record<string, unknown>]> = [
      ["POST", "/api/slots", { name: "wide", profile: "cpu-small", port: 8150, ...keys(10_000) }],
      ["PUT", "/api/slots/chat/config", { tune: keys(1000) }],
      ["PUT", "/api/slots/chat/config", keys(1000)],
      ["PUT", "/api/slots/chat/config", { placement: keys(40), server: keys(40) }],
    ];
    for (const [method, path, body] of cases) {
      const res = await s.call(method as "POST" | "PUT", path, { body });
      expectRefusal(res, "validation.invalid");
      expect(res.body.error.message).toContain("more than 64 fields");
      expect(JSON.stringify(res.body).length).toBeLessThan(2000);
    }
    const c = await adminClient(s.url, { token: s.operator });
    try {
      expectToolRefusal(await callTool(c, "slot_edit", { name: "chat", tune: keys(1000) }), "validation.invalid");
    } finally {
      await c.close();
    }
    expect(read("slots/chat.toml")).toBe(before);
    expect(existsSync(join(s.config, "slots/wide.toml"))).toBe(false);
    // Under the limit, unknown keys still reach the compiler, each with its diagnostic.
    const some = await s.call("PUT", "/api/slots/chat/config", { body: { tune: keys(30) } });
    expectRefusal(some, "config.invalid");
    expect(some.body.error.details.diagnostics.filter((d: Diagnostic) => d.code === "config.unknown_key")).toHaveLength(30);
  }, 60_000);
});

describe("integer query parameters: decimal digits, given once", () => {
  const refused = async (path: string, msg: RegExp) => {
    const res = await s.call("GET", path);
    expect(res.status, path).toBe(422);
    expect(res.body.error.code, path).toBe("validation.invalid");
    expect(res.body.error.details.fields[0].msg, path).toMatch(msg);
  };

  it("refuses 0x10, 1e2, 8.0, an empty value and a repeated parameter, which a number coercion read as 16, 100, 8, 0 and NaN", async () => {
    for (const path of ["/api/plans?limit=0x10", "/api/plans?limit=1e2", "/api/plans?limit=8.0", "/api/plans?limit=", "/api/activity?limit=0x10", "/api/slots/chat/logs?lines=%205"]) await refused(path, /an integer in decimal digits/);
    await refused("/api/plans?limit=1&limit=2", /given once/);
    await refused("/api/plans?limit=0", /too small/i);
    await refused("/api/activity?offset=-1", /too small/i);
    const two = await s.call("GET", "/api/plans?limit=2");
    expect(two.status).toBe(200);
    expect(two.body.plans.length).toBeLessThanOrEqual(2);
  });

  it("refuses a parameter a route does not take, on a route with a query schema and on one that takes none: a typo is never ignored", async () => {
    const typo = await s.call("GET", "/api/plans?limt=2");
    expect(typo.status).toBe(422);
    expect(typo.body.error.details.fields).toEqual([{ loc: ["query"], msg: 'Unrecognized key: "limt"', type: "unrecognized_keys" }]);
    const none = await s.call("GET", "/api/slots?limit=2&name=chat");
    expect(none.status).toBe(422);
    expect(none.body.error).toMatchObject({ code: "validation.invalid", details: { fields: [{ loc: ["query"], msg: 'Unrecognized keys: "limit", "name"', type: "unrecognized_keys" }] } });
    expect((await s.call("GET", "/api/slots")).status).toBe(200);
    expect((await s.call("GET", "/api/slots?")).status).toBe(200);
  });

  it("an MCP tool takes the same parameter as a JSON integer, advertised as an integer with its bounds and default", async () => {
    const client = await adminClient(s.url, { token: s.operator });
    try {
      const tool = (await client.listTools()).tools.find((t) => t.name === "plan_list")!;
      expect((tool.inputSchema.properties as any).args.properties.limit).toEqual({ type: "integer", minimum: 1, maximum: 500, default: 50 });
      expect((await callTool(client, "plan_list", { limit: 2 })).isError).toBe(false);
      const hex = await callTool(client, "plan_list", { limit: "0x10" });
      expect(hex.isError).toBe(true);
      expect(hex.body.error.code).toBe("validation.invalid");
      expect((await callTool(client, "plan_list", { limit: 1.5 })).body.error.code).toBe("validation.invalid");
    } finally {
      await client.close();
    }
  });
});
