import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { serveLogger } from "../../server/serve.js";
import { httpCall, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/**
 * Providers and their credentials against real parts: a real server, the
 * MCP SDK's client as an agent, real loopback HTTP servers standing in for
 * upstreams (one that checks the Authorization header it gets, one on
 * another origin a redirect points at), the stand-in llama-server as a slot,
 * the files on disk, the audit table and the server's own log lines.
 */

const PROJECT = join(import.meta.dirname, "../..");
/** Nothing in redact.ts's text patterns matches this shape, so only the route's own masking can hide it. */
const secret = (): string => `prov-${randomBytes(18).toString("hex")}`;

interface Fake {
  readonly server: Server;
  readonly url: string;
  readonly host: string;
  /** Every request: its path and headers. */
  readonly seen: Array<{ path: string; headers: IncomingHttpHeaders }>;
}

async function fakeServer(handle: (path: string, headers: IncomingHttpHeaders) => { status: number; body?: unknown; location?: string }): Promise<Fake> {
  const seen: Fake["seen"] = [];
  const server = createServer((req, res) => {
    seen.push({ path: req.url ?? "", headers: req.headers });
    const r = handle(req.url ?? "", req.headers);
    res.writeHead(r.status, { "content-type": "application/json", ...(r.location ? { location: r.location } : {}) });
    res.end(JSON.stringify(r.body ?? {}));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { server, url, host: new URL(url).host, seen };
}

async function closeFake(f: Fake): Promise<void> {
  f.server.closeAllConnections();
  await new Promise<void>((resolve) => f.server.close(() => resolve()));
}

/** Valid keys for the upstream fake; each test stores one. */
const accepted = new Set<string>();
let upstream: Fake;
/** Another origin (another port): a redirect goes there, and must not carry the credential. */
let other: Fake;
/** A live server no allow list names: the SSRF guard must refuse it before a byte is sent. */
let untrusted: Fake;

beforeAll(async () => {
  other = await fakeServer(() => ({ status: 200, body: { object: "list", data: [{ id: "elsewhere" }] } }));
  untrusted = await fakeServer(() => ({ status: 200, body: { data: [] } }));
  upstream = await fakeServer((path, headers) => {
    if (path === "/moved/models") return { status: 302, location: `${other.url}/v1/models` };
    if (path === "/same/models") return { status: 307, location: "/v1/models" };
    if (path === "/to-untrusted/models") return { status: 302, location: `${untrusted.url}/v1/models` };
    if (path === "/to-file/models") return { status: 302, location: "file:///etc/passwd" };
    if (path === "/azure/models?api-version=2024-02-01") return { status: 200, body: { data: [{ id: "gpt" }] } };
    if (path !== "/v1/models") return { status: 404 };
    const key = /^Bearer (.+)$/.exec(headers.authorization ?? "")?.[1];
    if (key === undefined || !accepted.has(key)) return { status: 401, body: { error: "no key" } };
    return { status: 200, body: { object: "list", data: [{ id: "m1" }, { id: "m2" }, { id: "m3" }] } };
  });
});
afterAll(async () => {
  await Promise.all([upstream, other, untrusted].map(closeFake));
});

let s: TestServer | undefined;
let log = "";
const clients: Client[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close();
  await s?.close();
  s = undefined;
});

/** A server whose log lines are kept in `log`, trusting the two fakes' origins. */
async function start(env: Record<string, string> = {}): Promise<TestServer> {
  log = "";
  const lines = new PassThrough();
  lines.on("data", (chunk: Buffer) => (log += chunk.toString("utf8")));
  s = await startTestServer({ env: { HAL0_UPSTREAM_ALLOW: `${upstream.host},${other.host}`, ...env }, extra: { logger: serveLogger("debug", lines) } });
  return s;
}

async function agent(server: TestServer, name = "ops-bot"): Promise<Client> {
  const c = await adminClient(server.url, name);
  clients.push(c);
  return c;
}

/** Every reply a test saw, to search for the credential at the end. */
function recorder() {
  const replies: unknown[] = [];
  return {
    replies,
    keep<T>(reply: T): T {
      replies.push(reply);
      return reply;
    },
  };
}

const addUpstream = (server: TestServer, body: Record<string, unknown>) => server.call("POST", "/api/upstreams", { body: { auth_style: "bearer", ...body } });

describe("provider_credential_write", () => {
  it("a denied credential request keeps no value: its stored body is masked in the approvals table once it is decided", async () => {
    const server = await start();
    const value = secret();
    const c = await agent(server);
    const queued = await callTool(c, "provider_credential_write", { name: "lan-key", value });
    const id = queued.body.approval_id as string;
    expect(JSON.stringify(server.hal0.db.prepare("SELECT args FROM approvals WHERE id = ?").get(id))).toContain(value); // kept to run it while pending
    expect((await server.call("POST", `/api/agent/approvals/${id}/deny`, { body: { reason: "not now" } })).status).toBe(200);
    expect(JSON.stringify(server.hal0.db.prepare("SELECT * FROM approvals").all())).not.toContain(value);
    expect(existsSync(join(server.state, "credentials", "lan-key"))).toBe(false);
  });

  it("an agent's write over MCP waits for an operator; approved, the file is 0600 in a 0700 folder and the upstream gets it; the value is in no reply, audit row, approval or log line", async () => {
    const server = await start();
    const value = secret();
    accepted.add(value);
    const seen = recorder();
    expect(seen.keep(await addUpstream(server, { name: "lan", url: `${upstream.url}/v1`, auth_credential: "lan-key" })).status).toBe(201);

    // Nothing stored yet: no request is made, the reply says what is missing.
    const before = upstream.seen.length;
    expect(seen.keep(await server.call("POST", "/api/upstreams/lan/test")).body).toMatchObject({ reachable: false, auth: "missing", error: expect.stringContaining("credential lan-key is not stored") });
    expect(upstream.seen.length).toBe(before);

    const c = await agent(server);
    const queued = seen.keep(await callTool(c, "provider_credential_write", { name: "lan-key", value }));
    expect(queued).toMatchObject({ isError: false, body: { status: "pending_approval", approval_id: expect.stringMatching(/^apr_/) } });
    const file = join(server.state, "credentials", "lan-key");
    expect(existsSync(file)).toBe(false);

    const id = queued.body.approval_id as string;
    const shown = seen.keep(await server.call("GET", `/api/agent/approvals/${id}`));
    expect(shown.body.approval).toMatchObject({ tool: "provider_credential_write", state: "pending", args: { params: { name: "lan-key" }, body: { value: "[redacted]" } } });
    seen.keep(await server.call("GET", "/api/agent/approvals"));
    seen.keep(await callTool(c, "approval_list", {}));
    // Stored for execution: only the approval itself reads it back.
    expect(server.hal0.approvals.unredacted(id)!.args.body).toEqual({ value });

    const approved = seen.keep(await server.call("POST", `/api/agent/approvals/${id}/approve`));
    expect(approved.status).toBe(200);
    expect(approved.body.approval).toMatchObject({ state: "executed", result: { name: "lan-key", stored: true, source: "state", fingerprint: expect.stringMatching(/^[0-9a-f]{16}$/), used_by: ["lan"] } });
    expect(readFileSync(file, "utf8")).toBe(value);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(server.state, "credentials")).mode & 0o777).toBe(0o700);

    // The upstream test now sends it (the fake answers 200 only to this key).
    const tested = seen.keep(await server.call("POST", "/api/upstreams/lan/test"));
    expect(tested.body).toMatchObject({ name: "lan", reachable: true, ok: true, status: 200, model_count: 3, auth: "sent" });
    expect(upstream.seen.at(-1)!.headers.authorization).toBe(`Bearer ${value}`);

    // provider_list over MCP: the wrap key and count, where the credential comes from, never its value.
    const listed = seen.keep(await callTool(c, "provider_list", {}));
    expect(listed.isError).toBe(false);
    expect(listed.body.count).toBe(listed.body.providers.length);
    const lan = listed.body.providers.find((p: any) => p.name === "lan");
    expect(lan).toMatchObject({ kind: "remote", source: "upstream", base_url: `${upstream.url}/v1`, health: "ok", status: 200, model_count: 3,
      auth: { style: "bearer", from: "credential", name: "lan-key", present: true, source: "state" } });
    expect(listed.body.providers.find((p: any) => p.name === "openrouter")).toMatchObject({ health: "missing_credential", auth: { from: "env", name: "OPENROUTER_API_KEY", present: false } });
    // The REST reply is the bare list.
    const rest = seen.keep(await server.call("GET", "/api/providers?probe=false"));
    expect(Array.isArray(rest.body)).toBe(true);
    expect(rest.body.find((p: any) => p.name === "lan")).toMatchObject({ health: "unprobed", auth: { present: true } });

    // Refused inputs: a line break, a body under another key. Refused before anything is queued; not echoed either.
    const broken = `${secret()}\nX-Injected: 1`;
    const refusedBreak = seen.keep(await callTool(c, "provider_credential_write", { name: "lan-key", value: broken }));
    expect(refusedBreak).toMatchObject({ isError: true, body: { error: { code: "validation.invalid" } } });
    const misnamed = secret();
    const refusedKey = seen.keep(await server.call("POST", "/api/providers/lan-key/credentials", { body: { val: misnamed } }));
    expect(refusedKey.body.error.code).toBe("validation.invalid");
    expect(readFileSync(file, "utf8")).toBe(value);

    // Everything a reader can see: replies, audit rows (the table itself and the activity routes), approvals, the log.
    seen.keep(await server.call("GET", "/api/activity?limit=500"));
    seen.keep(await server.call("GET", "/api/activity/export"));
    server.hal0.audit.flush();
    const auditRows = server.hal0.db.prepare("SELECT * FROM audit").all();
    expect(auditRows.some((r: any) => r.tool === "provider_credential_write" && r.outcome === "pending_approval")).toBe(true);
    expect(auditRows.some((r: any) => r.route === "POST /api/providers/{name}/credentials" && r.kind === "approval" && r.outcome === "ok")).toBe(true);
    const approvalsRead = server.hal0.approvals.list();
    // The table kept the value only while the request could run: executed, its stored body is masked too; no column has it.
    const { args: storedArgs, ...row } = server.hal0.db.prepare("SELECT * FROM approvals WHERE id = ?").get(id) as Record<string, unknown>;
    expect(JSON.parse(storedArgs as string).body).toEqual({ value: "[redacted]" });
    expect(JSON.stringify(row)).not.toContain(value);
    expect(JSON.stringify(server.hal0.db.prepare("SELECT * FROM approvals").all())).not.toContain(value);
    const everything = [JSON.stringify(seen.replies), JSON.stringify(auditRows), JSON.stringify(approvalsRead), log];
    expect(log).toContain("request");
    for (const text of everything) {
      for (const v of [value, broken.split("\n")[0]!, misnamed]) expect(text).not.toContain(v);
    }
  });

  it("an operator stores one directly; a name that is not a name is refused", async () => {
    const server = await start();
    const value = secret();
    const r = await server.call("POST", "/api/providers/spare/credentials", { body: { value } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ name: "spare", stored: true, used_by: [] });
    expect(JSON.stringify(r.body)).not.toContain(value);
    expect(readFileSync(join(server.state, "credentials", "spare"), "utf8")).toBe(value);
    // Rewritten in place, still 0600.
    const next = secret();
    expect((await server.call("POST", "/api/providers/spare/credentials", { body: { value: next } })).body.fingerprint).not.toBe(r.body.fingerprint);
    expect(readFileSync(join(server.state, "credentials", "spare"), "utf8")).toBe(next);
    expect(statSync(join(server.state, "credentials", "spare")).mode & 0o777).toBe(0o600);
    // A value a header cannot carry is refused at write, the stored one kept: beyond Latin-1, a control character, a line break.
    for (const bad of ["ключ-секрет", "key-\u{1F511}", "a\u0085b", "a\tb", "a\r\nb", "sk-pasted-key ", " sk-pasted-key"]) {
      const refused = await server.call("POST", "/api/providers/spare/credentials", { body: { value: bad } });
      expect([refused.status, refused.body.error?.code], bad).toEqual([422, "validation.invalid"]);
      expect(JSON.stringify(refused.body)).not.toContain(bad);
    }
    // A body that is not JSON (a value sent without its quotes) is refused without quoting it back.
    for (const text of [`{"value": ${value}}`, value]) {
      const notJson = await httpCall(server.url, "POST", "/api/providers/spare/credentials", { body: text, headers: { authorization: `Bearer ${server.operator}`, "content-type": "application/json" } });
      expect([notJson.status, notJson.body.error.code]).toEqual([400, "request.invalid_json"]);
      expect(notJson.body.error.message).toMatch(/^the body is not JSON: Unexpected token '.'$/);
      expect(JSON.stringify(notJson.body)).not.toContain(value.slice(5, 15));
    }
    // Spaces at either end would be trimmed from the header on the way: " " would be a credential that is present and sends nothing.
    for (const blank of [" ", "   "]) expect((await server.call("POST", "/api/providers/spare/credentials", { body: { value: blank } })).body.error.code).toBe("validation.invalid");
    expect(readFileSync(join(server.state, "credentials", "spare"), "utf8")).toBe(next);
    expect((await server.call("POST", "/api/providers/spare/credentials", { body: { value: "clé-secrète" } })).status).toBe(200);
    expect((await server.call("POST", "/api/providers/spare/credentials", { body: { value: "a b" } })).status).toBe(200);
    for (const name of ["Upper", "a.b", "a%20b", "-x"]) {
      expect((await server.call("POST", `/api/providers/${name}/credentials`, { body: { value } })).body.error.code).toBe("validation.invalid");
    }
    expect((await server.call("POST", "/api/providers/%2e%2e/credentials", { body: { value } })).status).toBe(404);
    expect(readdirSync(server.state).filter((f) => !["credentials", "hal0.db", "hal0.db-shm", "hal0.db-wal", "operator.token"].includes(f))).toEqual([]);
  });

  it("reads $CREDENTIALS_DIRECTORY first: systemd's value wins over the state folder's, and a write of its name is refused before it is queued", async () => {
    const systemd = mkdtempSync(join(tmpdir(), "hal0-creds-"));
    try {
      const fromSystemd = secret();
      writeFileSync(join(systemd, "sys-key"), `${fromSystemd}\n`, { mode: 0o400 });
      accepted.add(fromSystemd);
      const server = await start({ CREDENTIALS_DIRECTORY: systemd });
      // A state-folder copy of the same name, written before systemd provided it (by hand here).
      const stale = secret();
      await server.call("POST", "/api/providers/other-key/credentials", { body: { value: stale } });
      cpSync(join(server.state, "credentials", "other-key"), join(server.state, "credentials", "sys-key"));

      expect((await addUpstream(server, { name: "sys", url: `${upstream.url}/v1`, auth_credential: "sys-key" })).status).toBe(201);
      const tested = await server.call("POST", "/api/upstreams/sys/test");
      expect(tested.body).toMatchObject({ ok: true, model_count: 3, auth: "sent" });
      expect(upstream.seen.at(-1)!.headers.authorization).toBe(`Bearer ${fromSystemd}`);
      const listed = await server.call("GET", "/api/providers");
      expect(listed.body.find((p: any) => p.name === "sys")).toMatchObject({ health: "ok", auth: { from: "credential", name: "sys-key", present: true, source: "systemd" } });

      const refused = await server.call("POST", "/api/providers/sys-key/credentials", { body: { value: secret() } });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ code: "provider.credential_systemd", details: { name: "sys-key", source: "systemd" } });
      const c = await agent(server);
      const viaMcp = await callTool(c, "provider_credential_write", { name: "sys-key", value: secret() });
      expect(viaMcp).toMatchObject({ isError: true, body: { error: { code: "provider.credential_systemd" } } });
      expect(server.hal0.approvals.list("pending")).toEqual([]);
      expect(JSON.stringify([tested.body, listed.body])).not.toContain(fromSystemd);
    } finally {
      rmSync(systemd, { recursive: true, force: true });
    }
  });
});

describe("a credential hal0 cannot store", () => {
  it("a folder where the file goes, or a credentials that is a file: provider.credential_write_failed on REST and MCP, refused before it is queued, nothing written", async () => {
    const server = await start();
    const creds = join(server.state, "credentials");
    mkdirSync(join(creds, "lan-key"), { recursive: true });
    const rest = await server.call("POST", "/api/providers/lan-key/credentials", { body: { value: secret() } });
    expect(rest.status).toBe(500);
    expect(rest.body.error).toMatchObject({ code: "provider.credential_write_failed", details: { name: "lan-key" } });
    expect(rest.body.error.message).toBe(`credential lan-key could not be stored as ${join(creds, "lan-key")}: a folder stands there; nothing was written`);
    const c = await agent(server);
    const viaMcp = await callTool(c, "provider_credential_write", { name: "lan-key", value: secret() });
    expect(viaMcp).toMatchObject({ isError: true, body: { error: { code: "provider.credential_write_failed" } } });
    expect(server.hal0.approvals.list("pending")).toEqual([]);
    expect(readdirSync(creds)).toEqual(["lan-key"]);
    expect(readdirSync(join(creds, "lan-key"))).toEqual([]);

    rmSync(creds, { recursive: true });
    writeFileSync(creds, "not a folder\n");
    const file = await server.call("POST", "/api/providers/lan-key/credentials", { body: { value: secret() } });
    expect(file.body.error).toMatchObject({ code: "provider.credential_write_failed", message: `credential lan-key could not be stored as ${creds}: ${creds} is not a folder; nothing was written` });
    expect(readFileSync(creds, "utf8")).toBe("not a folder\n");
  });
});

describe("where a credential is sent", () => {
  it("only to the upstream's own origin: a same-origin redirect keeps it, a redirect to another host does not get it", async () => {
    const server = await start();
    const value = secret();
    accepted.add(value);
    await server.call("POST", "/api/providers/lan-key/credentials", { body: { value } });
    await addUpstream(server, { name: "lan", url: `${upstream.url}/same`, auth_credential: "lan-key" });
    const same = await server.call("POST", "/api/upstreams/lan/test");
    expect(same.body).toMatchObject({ ok: true, status: 200, model_count: 3, redirects: 1 });
    expect(upstream.seen.slice(-2).map((r) => [r.path, r.headers.authorization])).toEqual([["/same/models", `Bearer ${value}`], ["/v1/models", `Bearer ${value}`]]);

    await server.call("PATCH", "/api/upstreams/lan", { body: { url: `${upstream.url}/moved` } });
    const otherBefore = other.seen.length;
    const moved = await server.call("POST", "/api/upstreams/lan/test");
    expect(moved.body).toMatchObject({ reachable: true, ok: true, status: 200, model_count: 1, redirects: 1 });
    expect(upstream.seen.at(-1)).toMatchObject({ path: "/moved/models", headers: { authorization: `Bearer ${value}` } });
    expect(other.seen.length).toBe(otherBefore + 1);
    expect(other.seen.at(-1)!.headers.authorization).toBeUndefined();
    expect(JSON.stringify(other.seen.at(-1)!.headers)).not.toContain(value);
  });

  it("a base url with a query (Azure's ?api-version=) is probed at <path>/models with the query kept, not with /models inside the query", async () => {
    const server = await start();
    await addUpstream(server, { name: "azure", url: `${upstream.url}/azure?api-version=2024-02-01`, auth_style: "none" });
    const tested = await server.call("POST", "/api/upstreams/azure/test");
    expect(tested.body).toMatchObject({ url: `${upstream.url}/azure/models?api-version=2024-02-01`, ok: true, status: 200, model_count: 1 });
    expect(upstream.seen.at(-1)!.path).toBe("/azure/models?api-version=2024-02-01");
  });

  it("a redirect to a URL hal0 does not fetch (file:) is the upstream's failed answer, not a 400 for the caller; provider_list says error, not blocked", async () => {
    const server = await start();
    await addUpstream(server, { name: "to-file", url: `${upstream.url}/to-file`, auth_style: "none" });
    const tested = await server.call("POST", "/api/upstreams/to-file/test");
    expect(tested.status).toBe(200);
    expect(tested.body).toMatchObject({ reachable: true, ok: false, status: 302, redirects: 1, model_count: null, error: expect.stringContaining("redirects to a URL hal0 does not follow") });
    const listed = await server.call("GET", "/api/providers");
    expect(listed.body.find((p: any) => p.name === "to-file")).toMatchObject({ health: "error", status: 302 });
  });

  it("a value no header can carry (an environment variable or systemd's file with a line break or beyond Latin-1) is not sent, and the probe says why: not 'sent' and ERR_INVALID_CHAR", async () => {
    const systemd = mkdtempSync(join(tmpdir(), "hal0-creds-"));
    try {
      const half = secret();
      writeFileSync(join(systemd, "two-lines"), `${half}\nX-Other: ${secret()}\n`, { mode: 0o400 });
      const server = await start({ CREDENTIALS_DIRECTORY: systemd, BROKEN_KEY: `${half}\r\nX-Other: 1`, CYRILLIC_KEY: "ключ-секрет" });
      await addUpstream(server, { name: "env-break", url: `${upstream.url}/v1`, auth_value_env: "BROKEN_KEY" });
      await addUpstream(server, { name: "env-cyr", url: `${upstream.url}/v1`, auth_style: "header", auth_value_env: "CYRILLIC_KEY" });
      await addUpstream(server, { name: "sys-break", url: `${upstream.url}/v1`, auth_credential: "two-lines" });
      const before = upstream.seen.length;
      for (const [name, from] of [["env-break", "environment variable BROKEN_KEY"], ["env-cyr", "environment variable CYRILLIC_KEY"], ["sys-break", "credential two-lines (from systemd)"]]) {
        const tested = await server.call("POST", `/api/upstreams/${name}/test`);
        expect(tested.body).toMatchObject({ auth: "missing", reachable: false, ok: false, error: `${from} holds a value no header can carry (a control character, a line break or a character beyond Latin-1): nothing is sent` });
        expect(JSON.stringify(tested.body)).not.toContain(half);
      }
      const listed = await server.call("GET", "/api/providers");
      expect(listed.body.filter((p: any) => ["env-break", "env-cyr", "sys-break"].includes(p.name)).map((p: any) => p.health)).toEqual(["missing_credential", "missing_credential", "missing_credential"]);
      expect(upstream.seen.length).toBe(before);
    } finally {
      rmSync(systemd, { recursive: true, force: true });
    }
  });

  it("a credential file that is there but cannot be read (a symlink loop) is not sent and fails no list: the probe says why, provider_list shows it absent", async () => {
    const systemd = mkdtempSync(join(tmpdir(), "hal0-creds-"));
    try {
      symlinkSync("sys-loop", join(systemd, "sys-loop"));
      const server = await start({ CREDENTIALS_DIRECTORY: systemd });
      mkdirSync(join(server.state, "credentials"), { recursive: true, mode: 0o700 });
      symlinkSync("loop", join(server.state, "credentials", "loop"));
      await addUpstream(server, { name: "looped", url: `${upstream.url}/v1`, auth_credential: "loop" });
      await addUpstream(server, { name: "sys-looped", url: `${upstream.url}/v1`, auth_credential: "sys-loop" });
      const before = upstream.seen.length;
      for (const [name, file, from] of [["looped", join(server.state, "credentials", "loop"), "credential loop"], ["sys-looped", join(systemd, "sys-loop"), "credential sys-loop (from systemd)"]] as const) {
        const tested = await server.call("POST", `/api/upstreams/${name}/test`);
        expect(tested.status).toBe(200);
        expect(tested.body).toMatchObject({ auth: "missing", reachable: false, error: `${from} is there but ${file} cannot be read: ELOOP: nothing is sent` });
      }
      for (const probe of ["false", "true"]) {
        const listed = await server.call("GET", `/api/providers?probe=${probe}`);
        expect(listed.status).toBe(200);
        expect(listed.body.find((p: any) => p.name === "looped").auth).toMatchObject({ present: false, source: "state" });
        expect(listed.body.find((p: any) => p.name === "sys-looped").auth).toMatchObject({ present: false, source: "systemd" });
      }
      expect(upstream.seen.length).toBe(before);
      // systemd's name is still systemd's: a write of it would land where hal0 never reads.
      expect((await server.call("POST", "/api/providers/sys-loop/credentials", { body: { value: secret() } })).body.error.code).toBe("provider.credential_systemd");
    } finally {
      rmSync(systemd, { recursive: true, force: true });
    }
  });

  it("a HAL0_UPSTREAM_ALLOW entry that is not host:port is ignored with a warning at start, not a refusal of every probe", async () => {
    const server = await start({ HAL0_UPSTREAM_ALLOW: `192.168.1.20,${upstream.host}` });
    const value = secret();
    accepted.add(value);
    await server.call("POST", "/api/providers/lan-key/credentials", { body: { value } });
    await addUpstream(server, { name: "lan", url: `${upstream.url}/v1`, auth_credential: "lan-key" });
    expect((await server.call("POST", "/api/upstreams/lan/test")).body).toMatchObject({ ok: true, status: 200, model_count: 3 });
    const listed = await server.call("GET", "/api/providers");
    expect(listed.body.find((p: any) => p.name === "lan")).toMatchObject({ health: "ok" });
    expect(log).toContain("HAL0_UPSTREAM_ALLOW entries that are not host:port");
    expect(log).toContain('"ignored":["192.168.1.20"]');
  });

  it("pointing an upstream at a stored credential is privileged: an agent's change waits for a person, and the card says where it is sent", async () => {
    const server = await start();
    await addUpstream(server, { name: "lan", url: `${upstream.url}/v1`, auth_style: "none" });
    const c = await agent(server);
    const queued = await callTool(c, "upstream_update", { name: "lan", auth_style: "bearer", auth_credential: "lan-key" });
    expect(queued.body).toMatchObject({ status: "pending_approval" });
    expect(server.hal0.approvals.get(queued.body.approval_id)!.effects).toContain(`sends stored credential lan-key to ${upstream.url}/v1`);
  });

  it("the SSRF guard refuses a remote upstream on a host no allow list names, and a redirect to one, with mcp.ssrf_blocked; provider_list says blocked", async () => {
    const server = await start();
    await addUpstream(server, { name: "lan", url: `${untrusted.url}/v1`, auth_style: "none" });
    const direct = await server.call("POST", "/api/upstreams/lan/test");
    expect(direct.status).toBe(403);
    expect(direct.body.error).toMatchObject({ code: "mcp.ssrf_blocked", details: { address: "127.0.0.1", range: "loopback" } });

    const value = secret();
    await server.call("POST", "/api/providers/lan-key/credentials", { body: { value } });
    await server.call("PATCH", "/api/upstreams/lan", { body: { url: `${upstream.url}/to-untrusted`, auth_style: "bearer", auth_credential: "lan-key" } });
    const hop = await server.call("POST", "/api/upstreams/lan/test");
    expect(hop.body.error).toMatchObject({ code: "mcp.ssrf_blocked", details: { url: `${untrusted.url}/v1/models`, range: "loopback" } });
    expect(untrusted.seen).toEqual([]);

    // A name that does not resolve (RFC 6761's .invalid) is unreachable, not refused.
    await addUpstream(server, { name: "gone", url: "http://hal0-nowhere.invalid/v1", auth_style: "none" });
    expect((await server.call("POST", "/api/upstreams/gone/test")).body).toMatchObject({ reachable: false, ok: false, status: null, error: expect.stringContaining("does not resolve") });

    const listed = await server.call("GET", "/api/providers");
    expect(listed.status).toBe(200);
    expect(listed.body.find((p: any) => p.name === "lan")).toMatchObject({ health: "blocked", error_code: "mcp.ssrf_blocked" });
    expect(listed.body.find((p: any) => p.name === "gone")).toMatchObject({ health: "unreachable", model_count: null });
    expect(untrusted.seen).toEqual([]);
  });
});

describe("provider_list with a slot", () => {
  let runner: ChildProcess | undefined;
  afterEach(() => {
    runner?.kill("SIGKILL");
    runner = undefined;
  });

  it("a slot upstream's credential goes only to the slot's own runner: with the slot stopped, whatever holds its port gets nothing", async () => {
    // Another process on the box listens on the coder slot's port while the slot is not running.
    const squatter = await fakeServer(() => ({ status: 200, body: { data: [{ id: "looks-fine" }] } }));
    const box = mkdtempSync(join(tmpdir(), "hal0-providers-box-"));
    try {
      cpSync(join(PROJECT, "fixtures/box"), box, { recursive: true });
      writeFileSync(join(box, "hal0.toml"), readFileSync(join(box, "hal0.toml"), "utf8").replace("port_range_start = 8081", "port_range_start = 1024").replace("port_range_end = 8200", "port_range_end = 65535"));
      const port = new URL(squatter.url).port;
      writeFileSync(join(box, "slots/coder.toml"), readFileSync(join(box, "slots/coder.toml"), "utf8").replace("port = 8082", `port = ${port}`));
      writeFileSync(join(box, "upstreams.toml"), readFileSync(join(box, "upstreams.toml"), "utf8").replace('slot_name = "coder"', 'slot_name = "coder"\nauth_style = "bearer"\nauth_credential = "coder-key"'));
      log = "";
      s = await startTestServer({ box, env: {} });
      const value = secret();
      expect((await s.call("POST", "/api/providers/coder-key/credentials", { body: { value } })).status).toBe(200);
      // Any caller may ask (both are autonomous reads): an anonymous one here.
      const listed = await s.call("GET", "/api/providers?timeout_ms=2000", { as: "anonymous" });
      expect(listed.status).toBe(200);
      expect(listed.body.find((p: any) => p.name === "local-coder")).toMatchObject({ health: "unreachable", status: null, error: expect.stringContaining("slot coder is not running") });
      const tested = await s.call("POST", "/api/upstreams/local-coder/test", { as: "anonymous" });
      expect(tested.body).toMatchObject({ reachable: false, auth: "none", error: expect.stringContaining(`not to whatever holds port ${port}`) });
      expect(squatter.seen.filter((r) => r.headers.authorization !== undefined)).toEqual([]);
      expect(JSON.stringify(squatter.seen)).not.toContain(value);
    } finally {
      await closeFake(squatter);
      rmSync(box, { recursive: true, force: true });
    }
  });

  it("a local slot is a provider whose health and model count come from its runner (the stand-in llama-server); a slot upstream is listed once", async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const p = (probe.address() as AddressInfo).port;
        probe.close(() => resolve(p));
      });
    });
    runner = spawn(process.execPath, [join(PROJECT, "fixtures/runner/fake-llama-server.mjs"), "-m", join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), "--port", String(port)], {
      stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, HAL0_FAKE_LOAD_MS: "0" },
    });
    let out = "";
    runner.stdout!.setEncoding("utf8").on("data", (t: string) => (out += t));
    const deadline = Date.now() + 5000;
    while (!out.includes("listening on")) {
      if (Date.now() > deadline) throw new Error(`the stand-in did not listen: ${out}`);
      await sleep(10);
    }
    const own = (await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json()) as { data: unknown[] };

    // The example box, with its chat slot moved onto the stand-in's port.
    const box = mkdtempSync(join(tmpdir(), "hal0-providers-box-"));
    try {
      cpSync(join(PROJECT, "fixtures/box"), box, { recursive: true });
      writeFileSync(join(box, "hal0.toml"), readFileSync(join(box, "hal0.toml"), "utf8").replace("port_range_start = 8081", "port_range_start = 1024").replace("port_range_end = 8200", "port_range_end = 65535"));
      writeFileSync(join(box, "slots/chat.toml"), readFileSync(join(box, "slots/chat.toml"), "utf8").replace("port = 8081", `port = ${port}`));
      log = "";
      s = await startTestServer({ box, env: {} });
      const c = await agent(s);
      const listed = await callTool(c, "provider_list", { timeout_ms: 2000 });
      expect(listed.isError).toBe(false);
      const providers = listed.body.providers as any[];
      expect(providers.find((p) => p.name === "chat")).toMatchObject({
        kind: "slot", source: "slot", slot_name: "chat", base_url: `http://127.0.0.1:${port}/v1`, enabled: true, auth: null,
        health: "ok", status: 200, model_count: own.data.length,
      });
      // The coder slot is reached through its upstream (local-coder), not listed twice.
      expect(providers.filter((p) => p.slot_name === "coder").map((p) => p.name)).toEqual(["local-coder"]);
      expect(providers.map((p) => p.name).sort()).toEqual(["local-coder", "openrouter", ...Object.keys((await s.hal0.box.model()).slots).filter((n) => n !== "coder")].sort());
      expect(listed.body.count).toBe(providers.length);
    } finally {
      rmSync(box, { recursive: true, force: true });
    }
  });
});
