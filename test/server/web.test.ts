import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createServer } from "node:net";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { RunnerProbe } from "../../reconciler/runner-probe.js";
import { BASE_TUNE, type SlotView } from "../../schema/index.js";
import { changeHtml } from "../../server/web/plan-view.js";
import { clip, lineDiff } from "../../server/web/render.js";
import { httpCall, startServerWithDeadEngine, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";
import { webLogin, type WebSession } from "./web-helpers.js";

let s: TestServer;
let clients: Client[] = [];
/** The owner's browser session: the pages need an operator. */
let session: WebSession;
beforeEach(async () => {
  s = await startTestServer();
  session = await webLogin(s);
});
afterEach(async () => {
  for (const c of clients) await c.close();
  clients = [];
  await s.close();
});

async function client(agent: string): Promise<Client> {
  const c = await adminClient(s.url, agent);
  clients.push(c);
  return c;
}

/** GET a page as text, with the owner's session cookie. */
async function get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await httpCall(s.url, "GET", path, { headers: { cookie: session.cookie, ...headers } });
  return { status: res.status, text: typeof res.body === "string" ? res.body : JSON.stringify(res.body), headers: res.headers };
}

const EVIL = "<script>alert(1)</script>";
const SCRATCH = { name: "scratch", profile: "cpu-small", model: "qwen3-4b", port: 8150, type: "llm", enabled: true, placement: { device: "cpu" }, description: EVIL };

/** fixtures/box enables max_slots (8) slots: raise the limit so an enabled slot can be created. */
function roomForMoreSlots(): void {
  const file = join(s.config, "hal0.toml");
  const text = readFileSync(file, "utf8");
  expect(text).toContain("max_slots = 8");
  writeFileSync(file, text.replace("max_slots = 8", "max_slots = 16"));
}

/** The `<article>` of one approval on the inbox page. */
function card(html: string, id: string): string {
  const start = html.indexOf(`<article class="card`, html.indexOf(`id="${id}"`) - 40);
  expect(start, `card ${id}`).toBeGreaterThanOrEqual(0);
  return html.slice(start, html.indexOf("</article>", start));
}

describe("the operator's pages (server-rendered; they read fine without script)", () => {
  it("the inbox shows a queued gated call: caller, tool, escaped args, its plan, approve/deny forms", async () => {
    roomForMoreSlots();
    const queued = await callTool(await client("hermes__coder"), "slot_create", SCRATCH);
    expect(queued.body.status, JSON.stringify(queued.body)).toBe("pending_approval");
    const id: string = queued.body.approval_id;
    const res = await get("/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/html");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'; connect-src 'self'");
    const html = card(res.text, id);
    expect(html).toContain("hermes__coder");
    expect(html).toContain("via mcp");
    expect(html).toContain("<code>slot_create</code>");
    expect(html).toContain("&quot;port&quot;: 8150");
    const brings = html.slice(html.indexOf("What this change brings (1)"), html.indexOf("The whole plan"));
    expect(brings).toContain("+ slot.scratch");
    expect(brings).toContain("reason <code>new</code>");
    const approval = (await s.call("GET", `/api/agent/approvals/${id}`)).body.approval;
    expect(html).toContain(`<a href="/plans/${encodeURIComponent(approval.plan_id)}">`);
    // the forms post to the page routes (form-encoded, no script needed), each with the session's CSRF field
    expect(html).toContain(`<form method="post" action="/approvals/${id}/approve" data-approval="${id}" data-decision="approve"><input type="hidden" name="csrf" value="${session.csrf}">`);
    expect(html).toContain(`action="/approvals/${id}/deny" data-approval="${id}" data-decision="deny"><input type="hidden" name="csrf" value="${session.csrf}">`);
    expect(res.text).toContain(`<meta name="csrf-token" content="${session.csrf}">`);
    expect(res.text).toContain('<form class="who" method="post" action="/logout">');
    // user-controlled text is escaped everywhere on the page
    expect(res.text).not.toContain(EVIL);
    // the one script is the inbox's own same-origin module
    expect(res.text.match(/<script[^>]*>/gi)).toEqual(['<script type="module" src="/assets/inbox.js">']);
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    // the page's own scaffolding: viewport, same-origin stylesheet, skip link
    expect(res.text).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    expect(res.text).toContain('<a class="skip" href="#main">');
    const css = await get("/assets/style.css");
    expect(css.status).toBe(200);
    expect(css.headers.get("content-type")).toContain("text/css");
    expect(css.text).toContain(":focus-visible");
  });

  it("re-renders the inbox without compiling each pending request again, with the same cards; what the box shows and the tree are planned afresh", async () => {
    // A server that compiles with a runner probe: each compile of a change set asks it for its cached facts once.
    await s.close();
    const runners = new RunnerProbe({ stateDir: null, root: join(import.meta.dirname, "../../fixtures/box") });
    s = await startTestServer({ extra: { runners } });
    session = await webLogin(s);
    roomForMoreSlots();
    const settings = join(s.config, "hal0.toml");
    writeFileSync(settings, readFileSync(settings, "utf8").replace("port_range_end = 8200", "port_range_end = 28999"));
    const c = await client("hermes__coder");
    const port = 28431;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const queued = await callTool(c, "slot_create", { ...SCRATCH, name: `scratch${i}`, port: port + i, description: `n${i}` });
      expect(queued.body.status, JSON.stringify(queued.body)).toBe("pending_approval");
      ids.push(queued.body.approval_id);
    }
    const first = await get("/");
    // Each request's change set was compiled for the first render; the next render compiles none of them again.
    const checks = vi.spyOn(runners, "cachedAll");
    const again = await get("/");
    expect(checks).not.toHaveBeenCalled();
    expect(again.text).toBe(first.text);
    // The box is observed on every render: a port taken behind hal0's back shows on the card that wants it, with no tree change.
    expect(card(again.text, ids[2]!)).not.toContain("slot.port_in_use");
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(port + 2, "127.0.0.1", resolve));
    try {
      const taken = await get("/");
      expect(checks).not.toHaveBeenCalled();
      expect(card(taken.text, ids[2]!)).toContain(`port ${port + 2} is held by`);
      expect(card(taken.text, ids[1]!)).not.toContain("slot.port_in_use");
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
    // A change to the tree: every request is compiled again, against it.
    const chat = join(s.config, "slots/chat.toml");
    writeFileSync(chat, readFileSync(chat, "utf8").replace("priority = 90", "priority = 91"));
    await s.hal0.box.snapshot().then(() => new Promise((resolve) => setTimeout(resolve, 1100)));
    await get("/");
    expect(checks).toHaveBeenCalledTimes(ids.length);
  });

  it("a render re-plans every pending request with one probe of each port between them, not one per request", async () => {
    // A server whose runtime counts who-holds-this-port questions.
    await s.close();
    const asked: number[] = [];
    const driver = new ProcessDriver({ stateDir: mkdtempSync(join(tmpdir(), "hal0-ports-")) });
    const holder = driver.portHolder.bind(driver);
    driver.portHolder = (port) => (asked.push(port), holder(port));
    s = await startTestServer({ extra: { driverFor: async () => driver } });
    session = await webLogin(s);
    roomForMoreSlots();
    const c = await client("hermes__coder");
    const REQUESTS = 5;
    for (let i = 0; i < REQUESTS; i++) {
      const queued = await callTool(c, "slot_create", { ...SCRATCH, name: `scratch${i}`, port: 8140 + i, description: `n${i}` });
      expect(queued.body.status, JSON.stringify(queued.body)).toBe("pending_approval");
    }
    asked.length = 0;
    const page = await get("/");
    expect(page.status).toBe(200);
    expect(page.text.match(/<article class="card pending"/g)).toHaveLength(REQUESTS);
    // Each request's plan probes the ports of the box's enabled slots (its own new one too): each port once in the render.
    expect(asked.length).toBeGreaterThan(REQUESTS);
    expect(asked.length).toBe(new Set(asked).size);
    // The next render asks afresh (a port taken since shows): once more each.
    const first = asked.length;
    await get("/");
    expect(asked.length).toBe(2 * first);
  });

  it("a card on a big box shows the first items of each list of its plan and links the plan page for the rest: its size does not grow with the box", async () => {
    const file = join(s.config, "hal0.toml");
    writeFileSync(file, readFileSync(file, "utf8").replace("max_slots = 8", "max_slots = 0"));
    /** `n` more enabled slots that do not run: each one a create in the whole plan of the next apply, with its warnings. */
    const grow = (from: number, n: number) => {
      for (let i = from; i < from + n; i++) writeFileSync(join(s.config, `slots/bulk${i}.toml`), `profile = "cpu-small"\nmodel = "qwen3-4b"\nport = ${8122 + i}\ntype = "llm"\n\n[placement]\ndevice = "cpu"\n`);
    };
    const items = (html: string, pattern: RegExp) => html.match(pattern)?.length ?? 0;
    const cardOf = async (id: string) => {
      await s.hal0.box.snapshot().then(() => new Promise((resolve) => setTimeout(resolve, 1100)));
      return card((await get("/")).text, id);
    };
    grow(0, 30);
    const queued = await callTool(await client("hermes__coder"), "slot_create", { ...SCRATCH, port: 8110 });
    expect(queued.body.status, JSON.stringify(queued.body)).toBe("pending_approval");
    const id: string = queued.body.approval_id;
    const planId: string = (await s.call("GET", `/api/agent/approvals/${id}`)).body.approval.plan_id;
    const small = await cardOf(id);
    expect(small).toContain("What this change brings (1)");
    expect(small).toMatch(/The whole plan of the next apply: 3\d to create/);
    // What the change brings; the whole plan's first 20 changes, then a link to all of them.
    expect(items(small, /<li class="change/g)).toBe(1 + 20);
    expect(items(small, /<summary>Before → after<\/summary>/g)).toBe(1 + 20);
    const link = `<a href="/plans/${encodeURIComponent(planId)}">the plan page</a>`;
    const whole = Number(/The whole plan of the next apply: (\d+) to create/.exec(small)![1]) + 1; // and the settings' update
    expect(small).toContain(`and ${whole - 20} more changes: ${link} lists all ${whole}`);
    expect(small).toContain(`more warnings: ${link}`);
    // Twice the slots: the card holds as many items as before.
    grow(30, 30);
    const big = await cardOf(id);
    expect(big).toMatch(/The whole plan of the next apply: 6\d to create/);
    expect(items(big, /<li class="change/g)).toBe(items(small, /<li class="change/g));
    expect(items(big, /<li/g)).toBe(items(small, /<li/g));
    // The plan page lists every change.
    const page = await get(`/plans/${encodeURIComponent(planId)}`);
    expect(page.status).toBe(200);
    expect(items(page.text, /<li class="change/g)).toBeGreaterThan(60);
    expect(page.text).not.toContain("the plan page</a> lists all");
  });

  it("lists pending ones newest first; decided ones are marked with their state and have no forms", async () => {
    const c = await client("hermes__coder");
    const first = (await callTool(c, "slot_create", { ...SCRATCH, enabled: false, description: "first" })).body.approval_id as string;
    const second = (await callTool(c, "slot_create", { ...SCRATCH, enabled: false, name: "scratch2", port: 8151, description: "second" })).body.approval_id as string;
    const third = (await callTool(c, "slot_create", { ...SCRATCH, enabled: false, name: "scratch3", port: 8152, description: "third" })).body.approval_id as string;
    const pending = (await get("/")).text;
    expect(pending.indexOf(`id="${third}"`)).toBeLessThan(pending.indexOf(`id="${second}"`));
    expect(pending.indexOf(`id="${second}"`)).toBeLessThan(pending.indexOf(`id="${first}"`));

    expect((await s.call("POST", `/api/agent/approvals/${first}/approve`)).body.approval.state).toBe("executed");
    expect((await s.call("POST", `/api/agent/approvals/${second}/deny`, { body: { reason: "not <b>now</b>" } })).body.approval.state).toBe("denied");
    const html = (await get("/")).text;
    const executed = card(html, first);
    const denied = card(html, second);
    expect(executed).toContain("state-executed");
    expect(executed).not.toContain("<form");
    expect(denied).toContain(">denied</span>");
    expect(denied).toContain("not &lt;b&gt;now&lt;/b&gt;");
    expect(denied).not.toContain("<form");
    expect(html.indexOf("Recently decided")).toBeLessThan(html.indexOf(`id="${first}"`));
    expect(html.indexOf(`id="${third}"`)).toBeLessThan(html.indexOf("Recently decided"));
    expect(card(html, third)).toContain("<form");
  });

  it("a queue with a long history: the inbox reads the last 20 decided requests, not every request ever made", async () => {
    const c = await client("hermes__coder");
    const denied = (await callTool(c, "slot_create", { ...SCRATCH, enabled: false, description: "kept" })).body.approval_id as string;
    expect((await s.call("POST", `/api/agent/approvals/${denied}/deny`, { body: { reason: "no" } })).status).toBe(200);
    // 300 older decided requests (copies of that row, decided in the past).
    const HISTORY = 300;
    const row = s.hal0.db.prepare("SELECT * FROM approvals WHERE id = ?").get(denied) as Record<string, unknown>;
    const columns = Object.keys(row);
    const insert = s.hal0.db.prepare(`INSERT INTO approvals (${columns.join(", ")}) VALUES (${columns.map(() => "?").join(", ")})`);
    for (let i = 0; i < HISTORY; i++) {
      const old: Record<string, unknown> = { ...row, id: `apr_old${String(i).padStart(5, "0")}`, dedup_key: `old${i}`, decided_at: new Date(Date.parse("2026-01-01T00:00:00Z") + i * 60_000).toISOString() };
      insert.run(...columns.map((k) => old[k]));
    }
    // Every approvals row an SQL statement hands back while the page renders, counted.
    let rows = 0;
    const prepare = s.hal0.db.prepare.bind(s.hal0.db);
    const spy = vi.spyOn(s.hal0.db, "prepare").mockImplementation(((sql: string) => {
      const statement = prepare(sql);
      if (!/FROM approvals/.test(sql)) return statement;
      const all = statement.all.bind(statement);
      return Object.assign(statement, { all: (...args: unknown[]) => { const out = all(...args) as unknown[]; rows += out.length; return out; } });
    }) as typeof s.hal0.db.prepare);
    let html: string;
    try {
      html = (await get("/")).text;
    } finally {
      spy.mockRestore();
    }
    const shown = [...html.matchAll(/<article class="card decided" id="([^"]+)"/g)].map((m) => m[1]);
    // The one just decided first, then the 19 decided last before it.
    expect(shown).toEqual([denied, ...Array.from({ length: 19 }, (_, i) => `apr_old${String(HISTORY - 1 - i).padStart(5, "0")}`)]);
    expect(rows).toBeLessThanOrEqual(20);
  });

  it("/plans/<id> shows an approval's plan and the TOML diff, and a saved plan's diff", async () => {
    roomForMoreSlots();
    const queued = await callTool(await client("hermes__coder"), "slot_create", SCRATCH);
    const approval = (await s.call("GET", `/api/agent/approvals/${queued.body.approval_id}`)).body.approval;
    expect(approval.plan_id).toMatch(/./);
    const res = await get(`/plans/${encodeURIComponent(approval.plan_id)}`);
    expect(res.status, res.text).toBe(200);
    expect(res.text).toContain("+ slot.scratch");
    expect(res.text).toContain("<code>slots/scratch.toml</code> (new file)");
    expect(res.text).toContain('<span class="add">+ port = 8150</span>');
    expect(res.text).toContain("+ description = &quot;&lt;script&gt;");
    expect(res.text).not.toContain(EVIL);

    const saved = await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value: 77 }], summary: "chat <first>" } });
    expect(saved.status, JSON.stringify(saved.body)).toBe(201);
    const page = await get(`/plans/${saved.body.id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain("chat &lt;first&gt;");
    expect(page.text).toContain('<span class="add">+ priority = 77</span>');
    expect(page.text).toContain("<code>slots/chat.toml</code>");
  });

  it("shows the invisible formatting characters an agent put in a summary or a value (bidi overrides, zero-width ones) as escapes, on the inbox and the plan page", async () => {
    const summary = "raise utility's priority \u202egpj.exe\u202c and\u200b nothing else";
    const edits = [{ file: "slots/utility.toml", op: "set", path: ["description"], value: "plain\u2066 \u2067reversed\u2069\ufeff" }];
    const planned = await s.call("POST", "/api/plans", { as: "agent:hermes__ops", body: { summary, edits } });
    expect(planned.status, JSON.stringify(planned.body)).toBe(201);
    const queued = await s.call("POST", `/api/plans/${planned.body.id}/apply`, { as: "agent:hermes__ops" });
    expect(queued.body, JSON.stringify(queued.body)).toMatchObject({ status: "pending_approval" });
    const inbox = await get("/");
    const plan = await get(`/plans/${encodeURIComponent(planned.body.id)}`);
    for (const res of [inbox, plan]) {
      expect(res.status, res.text).toBe(200);
      expect(res.text).not.toMatch(/\p{Cf}/u);
      expect(res.text).toContain("raise utility&#39;s priority \\u202egpj.exe\\u202c and\\u200b nothing else");
    }
    // The file's diff on the plan page.
    expect(plan.text).toContain("+ description = &quot;plain\\u2066 \\u2067reversed\\u2069\\ufeff&quot;");
  });

  it("/status lists every slot with its state, the doctor rows and the last audit entries", async () => {
    await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value: 5 }] } });
    const res = await get("/status");
    expect(res.status, res.text).toBe(200);
    const slots = (await s.call("GET", "/api/slots")).body.slots as Array<{ name: string }>;
    expect(slots.length).toBeGreaterThan(1);
    for (const { name } of slots) expect(res.text).toContain(`<th scope="row">${name}</th>`);
    expect(res.text).toContain("offline");
    expect(res.text).toContain("Doctor");
    const doctor = (await s.call("GET", "/api/doctor")).body.rows as Array<{ check: string }>;
    for (const { check } of doctor) expect(res.text).toContain(`<th scope="row">${check}</th>`);
    expect(res.text).toContain("<code>POST /api/plans</code>");
  });

  it("/status with the docker engine down: 200, the slots section says why, the doctor and the audit still render", async () => {
    const { s: down, dead } = await startServerWithDeadEngine();
    try {
      expect((await down.call("GET", "/api/slots")).status).toBe(503);
      const { cookie } = await webLogin(down);
      const res = await httpCall(down.url, "GET", "/status", { headers: { cookie } });
      const text = String(res.body);
      expect(res.status, text).toBe(200);
      expect(text).toContain(`<strong>The slots cannot be read:</strong> [slots] runtime = &quot;docker&quot;: the engine at ${dead} does not answer`);
      expect(text).toContain('<h2 id="doctor-h">Doctor');
      expect(text).toContain("Last audit entries");
    } finally {
      await down.close();
    }
  });

  it("refuses Host: evil.example with 421 and answers an unknown plan with a 404 page", async () => {
    for (const path of ["/", "/status", "/plans/pln_nope", "/assets/style.css"]) {
      const res = await get(path, { host: "evil.example" });
      expect(res.status, path).toBe(421);
      expect(res.text, path).not.toContain("Approval inbox");
    }
    const missing = await get("/plans/pln_nope");
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toContain("text/html");
    expect(missing.text).toContain("no plan pln_nope");
    const evil = await get(`/plans/${encodeURIComponent(EVIL)}`);
    expect(evil.status).toBe(404);
    expect(evil.text).not.toContain(EVIL);
  });
});

describe("the inbox script", () => {
  it("is served from the build at /assets/inbox.js as JavaScript, loaded by the inbox only, with live and status regions", async () => {
    const js = await get("/assets/inbox.js");
    expect(js.status, js.text).toBe(200);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(js.headers.get("x-content-type-options")).toBe("nosniff");
    // it is the compiled client: the event stream, the JSON decision post, no imports
    expect(js.text).toContain('new EventSource("/api/agent/approvals/events")');
    expect(js.text).toContain('"content-type": "application/json"');
    // with the session's CSRF token from the page's meta, the cookie sent same-origin only
    expect(js.text).toContain('meta[name="csrf-token"]');
    expect(js.text).toContain('"x-csrf-token"');
    expect(js.text).toContain('credentials: "same-origin"');
    expect(js.text).not.toMatch(/^import /m);
    const built = readFileSync(join(import.meta.dirname, "../../dist/server/web/client/inbox.js"), "utf8");
    expect(js.text).toBe(built);

    const inbox = (await get("/")).text;
    expect(inbox).toContain('<script type="module" src="/assets/inbox.js"></script>');
    expect(inbox).toContain('<div id="inbox-status" class="status" role="status" aria-live="polite" tabindex="-1"></div>');
    // the status region sits outside the region the script swaps
    expect(inbox.indexOf('id="inbox-status"')).toBeLessThan(inbox.indexOf('<div id="inbox-live">'));
    expect(inbox.indexOf('<div id="inbox-live">')).toBeLessThan(inbox.indexOf("Waiting for you"));
    for (const path of ["/status", "/plans/pln_nope"]) {
      const other = await get(path);
      expect(other.text, path).not.toMatch(/<script/i);
      expect(other.headers.get("content-security-policy"), path).toContain("script-src 'self'");
    }
    expect((await get("/assets/inbox.js", { host: "evil.example" })).status).toBe(421);
  });
});

describe("clip", () => {
  it("cuts to max units with an ellipsis, never between the halves of a character", () => {
    expect(clip("short", 80)).toBe("short");
    expect(clip("abcdef", 4)).toBe("abc…");
    // 🦙 is two UTF-16 units: a cut after its first half would leave a lone surrogate (shown as �).
    const cut = clip(`ab🦙cd`, 4);
    expect(cut).toBe("ab…");
    expect(cut).not.toMatch(/[\uD800-\uDFFF]/);
    expect(clip(`abc🦙d`, 5)).toBe("abc…");
    expect(clip(`ab🦙cd`, 5)).toBe("ab🦙…");
  });
});

describe("lineDiff (LCS)", () => {
  it("keeps common lines, removes before adding, and handles absent files", () => {
    const show = (a: string | null, b: string | null) => lineDiff(a, b).map((l) => `${l.op}${l.text}`);
    expect(show("a\nb\nd\n", "a\nc\nd\n")).toEqual([" a", "-b", "+c", " d"]);
    expect(show("x\ny\n", "y\nx\n")).toEqual(["-x", " y", "+x"]);
    expect(show(null, "p = 1\n")).toEqual(["+p = 1"]);
    expect(show("p = 1\n", null)).toEqual(["-p = 1"]);
    expect(show("same\n", "same\n")).toEqual([" same"]);
  });
});

/** A slot's view with this context size and `--threads` value. */
function view(ctx: number, threads: string): SlotView {
  const spec = { spec_version: 1, runtime: "process" as const, argv: ["llama-server", "--threads", threads, "--ctx-size", String(ctx)], env: {}, host: "127.0.0.1", port: 8081, health_path: "/health", device: "cpu" as const, gpu_index: 0 };
  return { profile: "cpu", model: "m", type: "llm", port: 8081, device: "cpu", tune: { ...BASE_TUNE, ctx_size: ctx }, spec, spec_hash: `sha256:${ctx}${threads}` };
}

describe("changeHtml", () => {
  it("marks a destructive replace, names its downtime, and shows each changed path before → after", () => {
    const html = changeHtml({
      address: "slot.chat", kind: "slot", action: "replace", reason: "spec_changed", changed_paths: ["tune.ctx_size", "argv.--threads"],
      before: view(8192, "4"), after: view(16384, "<8>"),
      apply_class: "immediate", destructive: true, downtime: true,
    });
    expect(html).toContain('class="change destructive"');
    expect(html).toContain("-/+ slot.chat");
    expect(html).toContain('<span class="destructive-mark">destructive</span>');
    expect(html).toContain("Downtime: the slot chat is unavailable while it restarts");
    expect(html).toContain("<code>tune.ctx_size</code>: <code>8192</code> → <code>16384</code>");
    expect(html).toContain("<code>argv.--threads</code>: <code>&quot;4&quot;</code> → <code>&quot;&lt;8&gt;&quot;</code>");
    const create = changeHtml({ address: "slot.new", kind: "slot", action: "create", reason: "new", changed_paths: [], before: null, after: view(8192, "4"), apply_class: "immediate", destructive: false, downtime: false });
    expect(create).toContain("+ slot.new");
    expect(create).not.toContain("destructive");
    expect(create).not.toContain("Downtime");
  });

  it("with an excerpt (an inbox card), shows the first paths and the first characters of a long before → after, and links the plan page for the rest", () => {
    const paths = Array.from({ length: 30 }, (_, i) => `env.K${i}`);
    const env = Object.fromEntries(paths.map((p, i) => [p.slice(4), `v${i}`.repeat(200)]));
    const after = { ...view(8192, "4"), spec: { ...view(8192, "4").spec, env } };
    const change = { address: "slot.chat", kind: "slot", action: "create", reason: "new", changed_paths: paths, before: null, after, apply_class: "immediate", destructive: false, downtime: false } as const;
    const whole = changeHtml(change);
    const cut = changeHtml(change, { shown: 5, viewChars: 1000, rest: "/plans/p1" });
    expect(whole.match(/<li><code>env\./g)).toHaveLength(30);
    expect(cut.match(/<li><code>env\./g)).toHaveLength(5);
    expect(cut).toContain('and 25 more paths: <a href="/plans/p1">the plan page</a> lists all 30');
    const after1 = /<pre class="json" aria-label="after">([^<]*)<\/pre>/;
    expect(after1.exec(whole)![1]!.length).toBeGreaterThan(10_000);
    const unescaped = (html: string) => html.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
    expect(unescaped(after1.exec(cut)![1]!).length).toBeLessThanOrEqual(1000);
    expect(cut).toContain('(cut: <a href="/plans/p1">the plan page</a> shows it whole)');
  });
});
