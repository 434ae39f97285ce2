import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { pino } from "pino";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { isHostName, linkHost } from "../../cli/web-cmd.js";
import { openDb } from "../../server/db.js";
import { csrfOf } from "../../server/identity/identify.js";
import { httpCall, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";
import { cookiePair, csrfMeta, formPost, openLink, webLogin } from "./web-helpers.js";
import { untilTrue as until } from "../helpers/until.js";

const HAL0 = join(import.meta.dirname, "../../bin/hal0.js");
const BUILT_CLI = join(import.meta.dirname, "../../dist/cli/web-cmd.js");
const PAGES = ["/", "/status", "/plans/pln_nope"];
const SCRATCH = { name: "scratch", profile: "cpu-small", model: "qwen3-4b", port: 8150, type: "llm", enabled: false, placement: { device: "cpu" } };

let s: TestServer;
let logs = "";
let clients: Client[] = [];
async function start(): Promise<void> {
  logs = "";
  const sink = new Writable({ write: (chunk, _enc, done) => void ((logs += chunk.toString()), done()) });
  s = await startTestServer({ extra: { logger: pino({ level: "debug" }, sink) } });
}
afterEach(async () => {
  for (const c of clients) await c.close();
  clients = [];
  await s?.close();
});

/** A gated call queued by an agent over MCP: its approval id. */
async function queued(name = "scratch", port = 8150): Promise<string> {
  const c = await adminClient(s.url, "hermes__coder");
  clients.push(c);
  const res = await callTool(c, "slot_create", { ...SCRATCH, name, port });
  expect(res.body.status, JSON.stringify(res.body)).toBe("pending_approval");
  return res.body.approval_id;
}

const approval = async (id: string) => (await s.call("GET", `/api/agent/approvals/${id}`)).body.approval;
const page = (path: string, headers: Record<string, string> = {}) => httpCall(s.url, "GET", path, { headers });

describe("the pages need an operator: the web session (or an operator's bearer)", () => {
  it("answers a page without a session 401 with the login form (no script); the assets and /login stay open", async () => {
    await start();
    for (const path of PAGES) {
      const res = await page(path);
      expect(res.status, path).toBe(401);
      expect(res.headers.get("content-type"), path).toContain("text/html");
      const html = String(res.body);
      expect(html, path).toContain('<form class="login" method="post" action="/login">');
      expect(html, path).toContain('name="token"');
      expect(html, path).toContain("hal0 web");
      expect(html, path).not.toMatch(/<script/i);
      expect(html, path).not.toContain("Approval inbox");
    }
    // a stale or forged cookie is no session
    expect((await page("/", { cookie: `${s.hal0.auth.cookie}=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA` })).status).toBe(401);
    const login = await page("/login");
    expect(login.status).toBe(200);
    expect(String(login.body)).toContain('action="/login"');
    expect((await page("/assets/style.css")).status).toBe(200);
    expect((await page("/assets/icon.svg")).status).toBe(200);
    // still behind the Host gate
    expect((await page("/login", { host: "evil.example" })).status).toBe(421);
  });

  it("an agent's bearer on a page is 403; an operator's bearer reads it (without a session, so no CSRF token)", async () => {
    await start();
    const agent = await page("/", { authorization: `Bearer ${s.agentToken("hermes__coder")}` });
    expect(agent.status).toBe(403);
    expect(String(agent.body)).not.toContain("Approval inbox");
    const operator = await page("/", { authorization: `Bearer ${s.operator}` });
    expect(operator.status).toBe(200);
    expect(String(operator.body)).toContain("Approval inbox");
    expect(String(operator.body)).not.toContain('name="csrf-token"');
  });
});

describe("the pages' redirects and a mistyped page's 404 carry the pages' guard headers", () => {
  it("303s have Content-Security-Policy and X-Content-Type-Options: nosniff; so do JSON 404s under the pages' paths", async () => {
    await start();
    const owner = s.hal0.tokens.verify(s.operator)!;
    const login = await page(`/login?code=${s.hal0.tokens.loginCode(owner.id, 300)}`);
    expect(login.status).toBe(303);
    const session = { cookie: cookiePair(login.headers.get("set-cookie")) };
    const csrf = csrfMeta(String((await page("/", session)).body));
    const logout = await formPost(s, "/logout", { csrf }, { ...session, origin: s.url });
    for (const res of [login, logout]) {
      expect(res.status).toBe(303);
      expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    }
    for (const path of ["/plans/a/b", "/agents/runs/x/y", "/nope", "/approvals/x"]) {
      const res = await page(path, { authorization: `Bearer ${s.operator}` });
      expect(res.status, path).toBe(404);
      expect(res.headers.get("content-type"), path).toContain("application/json");
      expect(res.headers.get("content-security-policy"), path).toContain("default-src 'none'");
      expect(res.headers.get("x-content-type-options"), path).toBe("nosniff");
    }
  });

  it("a page's path with a method it does not take is 405 route.method_not_allowed naming the methods in Allow, not 404", async () => {
    await start();
    const cases: Array<[string, string, string]> = [
      ["PUT", "/", "GET, HEAD"],
      ["POST", "/status", "GET, HEAD"],
      ["DELETE", "/plans/pln_x", "GET, HEAD"],
      ["GET", "/logout", "POST"],
      ["GET", "/approvals/apr_x/approve", "POST"],
      ["PUT", "/login", "GET, HEAD, POST"],
      ["POST", "/assets/style.css", "GET, HEAD"],
    ];
    for (const [method, path, allow] of cases) {
      const res = await httpCall(s.url, method, path, { headers: { authorization: `Bearer ${s.operator}` } });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.body.error.code, `${method} ${path}`).toBe("route.method_not_allowed");
      expect(res.headers.get("allow"), `${method} ${path}`).toBe(allow);
      expect(res.headers.get("content-security-policy"), path).toContain("default-src 'none'");
    }
  });
});

describe("logging in: /login?code= (hal0 web's link) and a pasted operator token", () => {
  it("a login code sets an HttpOnly SameSite=Strict session cookie once; a second use and an expired code are 401; neither code nor cookie is logged", async () => {
    await start();
    const owner = s.hal0.tokens.verify(s.operator)!;
    const code = s.hal0.tokens.loginCode(owner.id, 300);
    // A HEAD of the link (a link checker, a chat's preview) does not spend the code, nor open a session.
    const head = await httpCall(s.url, "HEAD", `/login?code=${code}`);
    expect(head.status).toBe(200);
    expect(head.headers.get("set-cookie")).toBeNull();
    const res = await page(`/login?code=${code}`);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/");
    const set = res.headers.get("set-cookie")!;
    expect(set).toMatch(/^hal0_session_[0-9a-f]{12}=[A-Za-z0-9_-]{32}; /);
    expect(set.startsWith(`${s.hal0.auth.cookie}=`)).toBe(true);
    for (const attr of ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"]) expect(set.split("; ")).toContain(attr);
    // Over plain http on loopback: not Secure, which a browser there would drop.
    expect(set.split("; ")).not.toContain("Secure");
    const cookie = cookiePair(set);
    const inbox = await page("/", { cookie });
    expect(inbox.status).toBe(200);
    // the session's CSRF token is on the page, derived from the cookie
    expect(csrfMeta(String(inbox.body))).toBe(csrfOf(cookie.split("=")[1]!));
    expect(String(inbox.body)).toContain("owner");

    const again = await page(`/login?code=${code}`);
    expect(again.status).toBe(401);
    expect(again.headers.get("set-cookie")).toBeNull();
    expect(String(again.body)).toContain('action="/login"');
    expect(String(again.body)).toContain("used or expired");

    const expired = s.hal0.tokens.loginCode(owner.id, -1);
    const late = await page(`/login?code=${expired}`);
    expect(late.status).toBe(401);
    expect(late.headers.get("set-cookie")).toBeNull();
    expect((await page(`/login?code=nonsense`)).status).toBe(401);

    // the server's log (every level) never holds a code or the cookie
    expect(logs).not.toContain(code);
    expect(logs).not.toContain(expired);
    expect(logs).not.toContain(cookie.split("=")[1]!);
  });

  it("a login link of an operator token revoked since is 401 and sets no cookie; revoking deletes the token's codes", async () => {
    await start();
    const alice = s.hal0.tokens.mint("operator", "alice");
    const code = s.hal0.tokens.loginCode(alice.id, 300);
    s.hal0.tokens.revoke(alice.id);
    const db = openDb(s.state);
    try {
      expect(db.prepare("SELECT COUNT(*) AS n FROM login_codes WHERE token_id = ?").get(alice.id)).toEqual({ n: 0 });
      // A token revoked by a write that left its codes (another hal0, by hand): the code is refused all the same, and stays unused.
      const bob = s.hal0.tokens.mint("operator", "bob");
      const bobCode = s.hal0.tokens.loginCode(bob.id, 300);
      db.prepare("UPDATE tokens SET revoked_at = ? WHERE id = ?").run(new Date().toISOString(), bob.id);
      for (const c of [code, bobCode]) {
        const res = await page(`/login?code=${c}`);
        expect(res.status).toBe(401);
        expect(res.headers.get("set-cookie")).toBeNull();
        expect(String(res.body)).toContain('action="/login"');
        expect(String(res.body)).toContain("its token was revoked");
      }
      expect(db.prepare("SELECT used_at FROM login_codes WHERE token_id = ?").get(bob.id)).toEqual({ used_at: null });
    } finally {
      db.close();
    }
  });

  it("a pasted operator token logs in; an agent token, a wrong one or a cross-origin post does not", async () => {
    await start();
    const ok = await formPost(s, "/login", { token: s.operator }, { origin: s.url });
    expect(ok.status, String(ok.body)).toBe(303);
    expect(ok.headers.get("location")).toBe("/");
    const cookie = cookiePair(ok.headers.get("set-cookie"));
    expect((await page("/status", { cookie })).status).toBe(200);

    for (const token of [s.agentToken("hermes__coder"), "hal0_op_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ""]) {
      const refused = await formPost(s, "/login", { token }, { origin: s.url });
      expect(refused.status, token).toBe(401);
      expect(refused.headers.get("set-cookie"), token).toBeNull();
      expect(String(refused.body)).toContain('action="/login"');
    }
    // another origin on this host (it passes the loopback gate) cannot log this browser in
    const other = `http://127.0.0.1:${Number(new URL(s.url).port) + 1}`;
    const foreign = await formPost(s, "/login", { token: s.operator }, { origin: other });
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get("set-cookie")).toBeNull();
  });

  it("an operator token without the rest scope (which the pages need) gets no session: neither pasted nor through a login code", async () => {
    await start();
    const memoryOnly = s.hal0.tokens.mint("operator", "memo", ["mcp:memory"]);
    const pasted = await formPost(s, "/login", { token: memoryOnly.token }, { origin: s.url });
    expect(pasted.status).toBe(401);
    expect(pasted.headers.get("set-cookie")).toBeNull();
    expect(String(pasted.body)).toContain("does not reach rest");
    expect(() => s.hal0.tokens.loginCode(memoryOnly.id, 300)).toThrow(/does not reach rest/);
  });

  it("logout ends the session (CSRF-checked: without the field it changes nothing)", async () => {
    await start();
    const session = await webLogin(s);
    expect((await formPost(s, "/logout", {}, { cookie: session.cookie, origin: s.url })).status).toBe(403);
    expect((await page("/", { cookie: session.cookie })).status).toBe(200);
    const out = await formPost(s, "/logout", { csrf: session.csrf }, { cookie: session.cookie, origin: s.url });
    expect(out.status).toBe(303);
    expect(out.headers.get("location")).toBe("/login");
    expect(out.headers.get("set-cookie")).toContain("Max-Age=0");
    expect((await page("/", { cookie: session.cookie })).status).toBe(401);
  });
});

describe("logging in again in the same browser ends the session it held", () => {
  it("a second link, or a pasted token, over a live session ends that session on the server; another browser's session stays", async () => {
    await start();
    const other = await webLogin(s);
    const first = await webLogin(s);
    const owner = s.hal0.tokens.verify(s.operator)!;
    // The browser follows a new link while it still holds its cookie: the old cookie is no credential any more.
    const again = await page(`/login?code=${s.hal0.tokens.loginCode(owner.id, 300)}`, { cookie: first.cookie });
    expect(again.status).toBe(303);
    const second = cookiePair(again.headers.get("set-cookie"));
    expect(second).not.toBe(first.cookie);
    expect((await page("/", { cookie: first.cookie })).status).toBe(401);
    expect((await page("/", { cookie: second })).status).toBe(200);
    // A pasted token over the second session does the same, whoever it logs in as.
    const alice = s.hal0.tokens.mint("operator", "alice").token;
    const pasted = await formPost(s, "/login", { token: alice }, { cookie: second, origin: s.url });
    expect(pasted.status).toBe(303);
    const third = cookiePair(pasted.headers.get("set-cookie"));
    expect((await page("/", { cookie: second })).status).toBe(401);
    expect(String((await page("/", { cookie: third })).body)).toContain("alice");
    // A refused login ends nothing; another browser's session was never touched.
    expect((await formPost(s, "/login", { token: "hal0_op_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }, { cookie: third, origin: s.url })).status).toBe(401);
    expect((await page("/", { cookie: third })).status).toBe(200);
    expect((await page("/", { cookie: other.cookie })).status).toBe(200);
  });
});

describe("two boxes on one machine: each its own session cookie", () => {
  it("a browser holding both boxes' cookies (one Cookie header, as for any port of the host) is logged in to each, and logging out of one leaves the other", async () => {
    await start();
    const second = await startTestServer();
    try {
      expect(s.hal0.auth.cookie).not.toBe(second.hal0.auth.cookie);
      const a = await webLogin(s);
      const b = await webLogin(second);
      const both = `${a.cookie}; ${b.cookie}`;
      for (const box of [s, second]) expect((await httpCall(box.url, "GET", "/status", { headers: { cookie: both } })).status, box.url).toBe(200);
      const out = await formPost(second, "/logout", { csrf: b.csrf }, { cookie: both, origin: second.url });
      expect(out.status).toBe(303);
      expect(out.headers.get("set-cookie")).toMatch(new RegExp(`^${second.hal0.auth.cookie}=;`));
      expect((await httpCall(second.url, "GET", "/status", { headers: { cookie: both } })).status).toBe(401);
      expect((await httpCall(s.url, "GET", "/status", { headers: { cookie: both } })).status).toBe(200);
    } finally {
      await second.close();
    }
  });
});

describe("behind an HTTPS reverse proxy: [server] public_origins", () => {
  const PUBLIC = "https://hal0.example.com";

  it("a session's login, decision and logout posted from a listed public origin are the page's own; another scheme, a foreign origin or X-Forwarded-* headers are not", async () => {
    await start();
    const local = new URL(s.url).host;
    // Without the setting, the proxy's origin is not this page's, whatever X-Forwarded-* say.
    const before = await formPost(s, "/login", { token: s.operator }, { origin: PUBLIC, host: local, "x-forwarded-proto": "https", "x-forwarded-host": "hal0.example.com" });
    expect(before.status).toBe(421);
    const forwarded = await formPost(s, "/login", { token: s.operator }, { origin: `https://${local}`, "x-forwarded-proto": "https" });
    expect(forwarded.status).toBe(403);
    expect(forwarded.headers.get("set-cookie")).toBeNull();

    const put = await s.call("PUT", "/api/settings", { body: { server: { public_origins: [PUBLIC] } } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const id = await queued();
    // A proxy that passes the Host on, and one that sends its upstream's (127.0.0.1:<port>).
    for (const host of ["hal0.example.com", local]) {
      const login = await formPost(s, "/login", { token: s.operator }, { origin: PUBLIC, host });
      expect(login.status, `${host}: ${String(login.body)}`).toBe(303);
      // Posted from the https public origin: the cookie is Secure, whichever Host the proxy sends.
      expect(login.headers.get("set-cookie")!.split("; "), host).toContain("Secure");
      const cookie = cookiePair(login.headers.get("set-cookie"));
      const inbox = await page("/", { cookie, host });
      expect(inbox.status).toBe(200);
      const csrf = csrfMeta(String(inbox.body));
      // Under the upstream's Host, the public host over plain http is another origin; a foreign one is the gate's 421.
      if (host === local) expect((await formPost(s, `/approvals/${id}/approve`, { csrf }, { cookie, host, origin: "http://hal0.example.com" })).status).toBe(403);
      expect((await formPost(s, `/approvals/${id}/approve`, { csrf }, { cookie, host, origin: "https://evil.example" })).status).toBe(421);
      expect((await approval(id)).state).toBe("pending");
      if (host === local) {
        const approved = await formPost(s, `/approvals/${id}/approve`, { csrf }, { cookie, host, origin: PUBLIC });
        expect(approved.status, String(approved.body)).toBe(303);
        expect((await approval(id)).state).toBe("executed");
      }
      const out = await formPost(s, "/logout", { csrf }, { cookie, host, origin: PUBLIC });
      expect(out.status).toBe(303);
      expect(out.headers.get("set-cookie")!.split("; ")).toContain("Secure");
      expect((await page("/", { cookie, host })).status).toBe(401);
    }
    // The Agents page names the MCP mounts at the public origin of its Host.
    const agents = String((await page("/agents", { authorization: `Bearer ${s.operator}`, host: "hal0.example.com" })).body);
    expect(agents).toContain(`${PUBLIC}/mcp/admin`);
    expect(agents).not.toContain("http://hal0.example.com/mcp");
  });

  it("written into hal0.toml by hand, a public origin is the page's own from the next request on, the first one through the proxy included", async () => {
    await start();
    const file = join(s.config, "hal0.toml");
    writeFileSync(file, readFileSync(file, "utf8").replace(/^\[server\]$/m, `[server]\npublic_origins = [${JSON.stringify(PUBLIC)}]`));
    const login = await formPost(s, "/login", { token: s.operator }, { origin: PUBLIC, host: "hal0.example.com" });
    expect(login.status, String(login.body)).toBe(303);
    expect(login.headers.get("set-cookie")).toMatch(/^hal0_session_[0-9a-f]{12}=/);
  });

  it("an entry that is not an origin as a browser sends it is refused: server.public_origin_invalid, nothing written", async () => {
    await start();
    for (const bad of ["https://hal0.example.com/", "https://hal0.example.com:443", "hal0.example.com", "ftp://hal0.example.com", "*"]) {
      const res = await s.call("PUT", "/api/settings", { body: { server: { public_origins: [bad] } } });
      expect(res.status, bad).toBe(422);
      expect(JSON.stringify(res.body), bad).toContain("server.public_origin_invalid");
    }
    expect(readFileSync(join(s.config, "hal0.toml"), "utf8")).not.toContain("public_origins");
  });
});

/** The approvals event stream opened with `headers`: the event types read so far, and whether the server ended it. */
function approvalStream(headers: Record<string, string>): { events: string[]; ended: () => boolean; close: () => void; opened: Promise<void> } {
  const events: string[] = [];
  let ended = false;
  const ctl = new AbortController();
  const opened = fetch(`${s.url}/api/agent/approvals/events`, { headers, signal: ctl.signal }).then((res) => {
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    void (async () => {
      let buf = "";
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          buf += Buffer.from(value).toString();
          for (const m of buf.matchAll(/^event: (.*)$/gm)) events.push(m[1]!);
          buf = buf.slice(buf.lastIndexOf("\n\n") + 2);
        }
        ended = true;
      } catch {
        /* closed by the test */
      }
    })();
  });
  return { events, ended: () => ended, close: () => ctl.abort(), opened };
}

describe("the approvals event stream ends with the credential it was opened with", () => {
  it("a logged-out session's stream delivers no later event and ends", async () => {
    await start();
    const session = await webLogin(s);
    const stream = approvalStream({ cookie: session.cookie });
    await stream.opened;
    await until(() => stream.events.includes("snapshot"));
    await queued("one", 8151);
    await until(() => stream.events.includes("enqueued"));
    expect((await formPost(s, "/logout", { csrf: session.csrf }, { cookie: session.cookie, origin: s.url })).status).toBe(303);
    await queued("two", 8152);
    await until(stream.ended);
    expect(stream.events).toEqual(["snapshot", "enqueued"]);
  });

  it("a revoked operator token's stream ends with no new event to send (it is checked every 2 s)", async () => {
    await start();
    const minted = s.hal0.tokens.mint("operator", "alice");
    const stream = approvalStream({ authorization: `Bearer ${minted.token}` });
    await stream.opened;
    await until(() => stream.events.includes("snapshot"));
    s.hal0.tokens.revoke(minted.id);
    await until(stream.ended, 4_000);
    expect(stream.events).toEqual(["snapshot"]);
  });
});

describe("deciding from the page: plain form posts with the session cookie and its CSRF field", () => {
  it("a cross-origin post, a post without (or with a wrong) csrf field, and a REST post without X-CSRF-Token change nothing", async () => {
    await start();
    const id = await queued();
    const session = await webLogin(s);
    const other = `http://127.0.0.1:${Number(new URL(s.url).port) + 1}`;
    const attempts = [
      () => formPost(s, `/approvals/${id}/approve`, { csrf: session.csrf }, { cookie: session.cookie, origin: other }),
      () => formPost(s, `/approvals/${id}/deny`, { csrf: session.csrf, reason: "x" }, { cookie: session.cookie, origin: other }),
      () => formPost(s, `/approvals/${id}/approve`, {}, { cookie: session.cookie, origin: s.url }),
      () => formPost(s, `/approvals/${id}/approve`, { csrf: "0".repeat(32) }, { cookie: session.cookie, origin: s.url }),
      () => formPost(s, `/approvals/${id}/deny`, { reason: "x" }, { cookie: session.cookie }),
      // the REST route with the cookie: a form's field is not read there, the header is missing
      () => formPost(s, `/api/agent/approvals/${id}/approve`, { csrf: session.csrf }, { cookie: session.cookie, origin: s.url }),
      () => httpCall(s.url, "POST", `/api/agent/approvals/${id}/approve`, { body: {}, headers: { cookie: session.cookie, origin: other, "x-csrf-token": session.csrf } }),
    ];
    for (const [i, attempt] of attempts.entries()) {
      const res = await attempt();
      expect(res.status, `attempt ${i}: ${typeof res.body === "string" ? res.body : JSON.stringify(res.body)}`).toBe(403);
      expect((await approval(id)).state, `attempt ${i}`).toBe("pending");
    }
    // a foreign host's Origin is the gate's (421), before anything else
    expect((await formPost(s, `/approvals/${id}/approve`, { csrf: session.csrf }, { cookie: session.cookie, origin: "http://evil.example" })).status).toBe(421);
    // without any credential: the login page
    expect((await formPost(s, `/approvals/${id}/approve`, {}, { origin: s.url })).status).toBe(401);
    // an agent's bearer cannot decide from the page either
    expect((await formPost(s, `/approvals/${id}/approve`, {}, { authorization: `Bearer ${s.agentToken("hermes__coder")}` })).status).toBe(403);
    expect((await approval(id)).state).toBe("pending");
    expect(existsSync(join(s.config, "slots/scratch.toml"))).toBe(false);
    // the refusals are audited, with the CSRF code
    s.hal0.audit.flush();
    const rows = s.hal0.audit.query({ limit: 50, offset: 0 }).items.filter((r) => r.error_code === "auth.csrf");
    expect(rows.length).toBeGreaterThanOrEqual(5);
  });

  it("approve and deny (with a reason) work without script: 303 back to the card; decided_by is the session's operator", async () => {
    await start();
    const first = await queued("scratch", 8150);
    const second = await queued("scratch2", 8151);
    const owner = await webLogin(s);
    const approved = await formPost(s, `/approvals/${first}/approve`, { csrf: owner.csrf }, { cookie: owner.cookie, origin: s.url });
    expect(approved.status, String(approved.body)).toBe(303);
    expect(approved.headers.get("location")).toBe(`/#${first}`);
    const a = await approval(first);
    expect(a.state).toBe("executed");
    expect(a.decided_by).toBe("owner");
    expect(readFileSync(join(s.config, "slots/scratch.toml"), "utf8")).toMatch(/profile = "cpu-small"/);
    // a second decision on the same card is a page saying so, not a change
    const twice = await formPost(s, `/approvals/${first}/approve`, { csrf: owner.csrf }, { cookie: owner.cookie, origin: s.url });
    expect(twice.status).toBe(409);
    expect(String(twice.body)).toContain("already executed");

    // another operator, logged in with a pasted token: the decision carries that name
    const alice = s.hal0.tokens.mint("operator", "alice").token;
    const login = await formPost(s, "/login", { token: alice }, { origin: s.url });
    const cookie = cookiePair(login.headers.get("set-cookie"));
    const csrf = csrfMeta(String((await page("/", { cookie })).body));
    const denied = await formPost(s, `/approvals/${second}/deny`, { csrf, reason: "not <now>" }, { cookie, origin: s.url });
    expect(denied.status, String(denied.body)).toBe(303);
    expect(denied.headers.get("location")).toBe(`/#${second}`);
    const d = await approval(second);
    expect(d.state).toBe("denied");
    expect(d.reason).toBe("not <now>");
    expect(d.decided_by).toBe("alice");
    expect(existsSync(join(s.config, "slots/scratch2.toml"))).toBe(false);
    // the inbox the redirect lands on shows both decided, escaped
    const inbox = String((await page("/", { cookie })).body);
    expect(inbox).toContain("by owner");
    expect(inbox).toContain("by alice");
    expect(inbox).toContain("not &lt;now&gt;");
    // the script's path: the REST route with the cookie and X-CSRF-Token works too
    const third = await queued("scratch3", 8152);
    const rest = await httpCall(s.url, "POST", `/api/agent/approvals/${third}/deny`, { body: {}, headers: { cookie, origin: s.url, "x-csrf-token": csrf } });
    expect(rest.status, JSON.stringify(rest.body)).toBe(200);
    expect(rest.body.approval.decided_by).toBe("alice");
  });
});

describe("a refused request's target on the status page", () => {
  it("an anonymous post to /approvals/<3 KB>/approve is audited with its target clipped, and the status page shows less of it", async () => {
    await start();
    const junk = `apr_${"x".repeat(3000)}`;
    expect((await formPost(s, `/approvals/${junk}/approve`, {}, { origin: s.url })).status).toBe(401);
    expect((await s.call("POST", `/api/agent/approvals/${junk}/deny`, { as: "anonymous" })).status).toBe(401);
    s.hal0.audit.flush();
    const rows = s.hal0.audit.query({ limit: 10, offset: 0 }).items.filter((r) => r.target?.startsWith("apr_x"));
    expect(rows).toHaveLength(2);
    for (const r of rows) {
      expect(r.target!.length).toBe(256);
      expect(r.target!.endsWith("…")).toBe(true);
    }
    const status = String((await page("/status", { authorization: `Bearer ${s.operator}` })).body);
    expect(status).toContain(`apr_${"x".repeat(75)}…`);
    expect(status).not.toContain("x".repeat(80));
  });
});

describe("the session cookie is the pages' and REST's credential, not MCP's", () => {
  it("an MCP mount refuses a request the cookie authenticates (auth.csrf), from any origin, and nothing it asked for runs", async () => {
    await start();
    const session = await webLogin(s);
    const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } } };
    for (const mount of ["/mcp/admin", "/mcp/memory", "/mcp/agents"]) {
      for (const origin of [undefined, s.url, `http://127.0.0.1:${Number(new URL(s.url).port) + 1}`]) {
        const res = await httpCall(s.url, "POST", mount, { body: init, headers: { cookie: session.cookie, accept: "application/json, text/event-stream", ...(origin ? { origin } : {}) } });
        expect(res.status, `${mount} from ${origin}`).toBe(403);
        expect(res.body.error.code, `${mount} from ${origin}`).toBe("auth.csrf");
        expect(res.headers.get("mcp-session-id")).toBeNull();
      }
    }
    // The SDK's own client with the cookie cannot connect; with the operator's bearer it can.
    const cookieClient = new (await import("@modelcontextprotocol/sdk/client/index.js")).Client({ name: "x", version: "1" });
    const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
    const refused = await cookieClient.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp/admin`), { requestInit: { headers: { cookie: session.cookie } } })).then(() => undefined, (e: Error) => e);
    expect(refused?.message).toContain("auth.csrf");
    const bearer = await adminClient(s.url, { token: s.operator });
    clients.push(bearer);
    expect((await callTool(bearer, "slot_list", {})).isError).toBe(false);
    s.hal0.audit.flush();
    expect(s.hal0.audit.query({ limit: 50, offset: 0 }).items.filter((r) => r.error_code === "auth.csrf" && r.kind === "mcp").length).toBeGreaterThanOrEqual(9);
  });
});

describe("hal0 web (the built CLI)", () => {
  beforeAll(() => {
    if (!existsSync(BUILT_CLI)) throw new Error("dist/cli/web-cmd.js is missing: run `npm run build` first");
  });
  const hal0 = (args: string[], env: Record<string, string> = {}) => spawnSync(process.execPath, [HAL0, "web", ...args], { encoding: "utf8", env: { PATH: process.env.PATH ?? "", ...env }, timeout: 20_000 });

  it("prints a link to [server] host:port that logs a browser in once", async () => {
    await start();
    const port = new URL(s.url).port;
    const run = hal0(["--config", s.config, "--state", s.state, "--port", port]);
    expect(run.status, run.stderr).toBe(0);
    const link = run.stdout.trim();
    expect(link).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${port}/login\\?code=[A-Za-z0-9_-]{32}$`));
    const session = await openLink(s, link);
    expect((await page("/status", { cookie: session.cookie })).status).toBe(200);
    expect((await page(new URL(link).pathname + new URL(link).search)).status).toBe(401);

    // without --port: the config's [server] port; --json names the operator and the expiry
    const json = hal0(["--config", s.config, "--state", s.state, "--json"]);
    expect(json.status, json.stderr).toBe(0);
    const out = JSON.parse(json.stdout);
    expect(new URL(out.url).host).toBe("127.0.0.1:8080");
    expect(out.operator).toBe("owner");
    expect(Date.parse(out.expires_at) - Date.now()).toBeGreaterThan(4 * 60_000);
    expect(Date.parse(out.expires_at) - Date.now()).toBeLessThanOrEqual(5 * 60_000);

    // $HAL0_TOKEN's operator logs in as that operator; an agent's token there is refused
    const alice = s.hal0.tokens.mint("operator", "alice").token;
    const as = hal0(["--config", s.config, "--state", s.state, "--port", port, "--json"], { HAL0_TOKEN: alice });
    expect(as.status, as.stderr).toBe(0);
    expect(JSON.parse(as.stdout).operator).toBe("alice");
    const theirs = await openLink(s, JSON.parse(as.stdout).url);
    expect(String((await page("/", { cookie: theirs.cookie })).body)).toContain("alice");
    const agent = hal0(["--config", s.config, "--state", s.state, "--json"], { HAL0_TOKEN: s.agentToken("hermes__coder") });
    expect(agent.status).toBe(1);
    // Under --json a failure is a JSON document on stdout too (issue 16): the code, no link.
    const refused = JSON.parse(agent.stdout);
    expect(refused).toMatchObject({ ok: false, exit_code: 1 });
    expect(refused.diagnostics.map((d: { code: string }) => d.code)).toEqual(["auth.invalid_token"]);
    expect(agent.stdout).not.toContain("/login?code=");
  });

  it("a wildcard [server] host prints 127.0.0.1", async () => {
    await start();
    const file = join(s.config, "hal0.toml");
    writeFileSync(file, readFileSync(file, "utf8").replace('host = "127.0.0.1"', 'host = "0.0.0.0"'));
    const run = hal0(["--config", s.config, "--state", s.state, "--json"]);
    expect(run.status, run.stderr).toBe(0);
    expect(new URL(JSON.parse(run.stdout).url).host).toBe("127.0.0.1:8080");
    expect(linkHost("::")).toBe("127.0.0.1");
    expect(linkHost("::1")).toBe("[::1]");
    expect(linkHost("box.lan")).toBe("box.lan");
  });

  it("--origin prints the link under a listed public origin (an HTTPS proxy's), which logs in through it; an unlisted one is a usage error", async () => {
    await start();
    const PUBLIC = "https://hal0.example.com";
    // None listed: refused, no code; the plain link's stderr says nothing of a proxy.
    const none = hal0(["--config", s.config, "--state", s.state, "--origin", PUBLIC]);
    expect(none.status).toBe(64);
    expect(none.stderr).toContain("public_origins lists no origin");
    expect(none.stdout).not.toContain("/login?code=");
    expect(hal0(["--config", s.config, "--state", s.state]).stderr).not.toContain("--origin");

    const put = await s.call("PUT", "/api/settings", { body: { server: { public_origins: [PUBLIC] } } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const plain = hal0(["--config", s.config, "--state", s.state]);
    expect(plain.status, plain.stderr).toBe(0);
    expect(plain.stdout).toMatch(/^http:\/\/127\.0\.0\.1:8080\/login\?code=/);
    expect(plain.stderr).toContain(`--origin ${PUBLIC}`);

    // As a browser would type it (a trailing slash, upper case): the listed origin, as listed.
    const run = hal0(["--config", s.config, "--state", s.state, "--origin", "HTTPS://hal0.example.com/", "--json"]);
    expect(run.status, run.stderr).toBe(0);
    const link = new URL(JSON.parse(run.stdout).url);
    expect(link.origin).toBe(PUBLIC);
    expect(link.pathname).toBe("/login");
    // Through the proxy (which passes the Host on), the link logs the browser in.
    const opened = await httpCall(s.url, "GET", `${link.pathname}${link.search}`, { headers: { host: "hal0.example.com" } });
    expect(opened.status, String(opened.body)).toBe(303);
    const cookie = cookiePair(opened.headers.get("set-cookie"));
    expect((await page("/", { cookie, host: "hal0.example.com" })).status).toBe(200);
    expect(opened.headers.get("set-cookie")!.split("; ")).toContain("Secure");
    // Through a proxy that sends its upstream's Host, the request shows no sign of https: the link printed under it does.
    const upstream = new URL(JSON.parse(hal0(["--config", s.config, "--state", s.state, "--origin", PUBLIC, "--json"]).stdout).url);
    const viaUpstream = await httpCall(s.url, "GET", `${upstream.pathname}${upstream.search}`);
    expect(viaUpstream.status, String(viaUpstream.body)).toBe(303);
    expect(viaUpstream.headers.get("set-cookie")!.split("; ")).toContain("Secure");
    // The plain link, opened on loopback over plain http: no Secure, as the browser there would drop it.
    const local = new URL(JSON.parse(hal0(["--config", s.config, "--state", s.state, "--json"]).stdout).url);
    const plainOpened = await httpCall(s.url, "GET", `${local.pathname}${local.search}`);
    expect(plainOpened.status, String(plainOpened.body)).toBe(303);
    expect(plainOpened.headers.get("set-cookie")!.split("; ")).not.toContain("Secure");

    for (const args of [["--origin", "https://evil.example"], ["--origin", PUBLIC, "--port", "8080"], ["--origin", PUBLIC, "--host", "box.lan"]]) {
      const bad = hal0(["--config", s.config, "--state", s.state, ...args]);
      expect(bad.status, args.join(" ")).toBe(64);
      expect(bad.stdout, args.join(" ")).not.toContain("/login?code=");
    }
    expect(hal0(["--config", s.config, "--state", s.state, "--origin", "https://evil.example"]).stderr).toContain(`not one of [server] public_origins: ${PUBLIC}`);
  });

  it("a --host that is not a host name or an IP address is a usage error (64) and mints no code", async () => {
    await start();
    const port = new URL(s.url).port;
    for (const host of ['evil"><script>alert(1)</script>', "box.lan/x", "a b", "user@box"]) {
      const run = hal0(["--config", s.config, "--state", s.state, "--host", host, "--port", port]);
      expect(run.status, host).toBe(64);
      expect(run.stdout, host).not.toContain("/login?code=");
      expect(run.stderr, host).toContain("--host must be a host name or an IP address");
    }
    for (const host of ["box.lan", "192.168.1.9", "::1", "[fe80::1]", "0.0.0.0", "localhost"]) expect(isHostName(host), host).toBe(true);
  });
});
