import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";
import { chromiumFor } from "./web-helpers.js";

const SUITE = "the approval inbox in a real browser (headless Chromium)";
/** The built CLI (`npm run build`): the test logs in through the link `hal0 web` prints. */
const HAL0 = join(import.meta.dirname, "../../bin/hal0.js");
/** Where the inbox screenshot is kept: a test artifact, not a golden. */
export const ARTIFACTS = join(import.meta.dirname, "../artifacts");

const { path: CHROMIUM, available } = chromiumFor(SUITE);

describe.skipIf(!available)(SUITE, () => {
  let s: TestServer;
  let browser: Browser;
  let client: Client;
  beforeAll(async () => {
    s = await startTestServer();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
    client = await adminClient(s.url, "hermes__coder");
  });
  afterAll(async () => {
    await client?.close();
    await browser?.close();
    await s?.close();
  });

  /**
   * A fresh browser context logged in as the owner, its inbox open and live:
   * `renders` counts the inbox's re-renders, and `queue` asks a gated
   * slot_create over MCP (an event every open inbox re-renders on) and waits
   * for this page's re-render showing its card.
   */
  async function liveInbox() {
    const context = await browser.newContext();
    const owner = s.hal0.tokens.verify(s.operator)!;
    const page = await context.newPage();
    await page.goto(`${s.url}/login?code=${s.hal0.tokens.loginCode(owner.id, 300)}`);
    await page.locator(`body[data-inbox-live="connected"]`).waitFor({ state: "attached", timeout: 5000 });
    const renders = async () => Number(await page.evaluate(() => document.body.dataset.inboxRenders ?? "0"));
    const queue = async (name: string, port: number): Promise<string> => {
      const before = await renders();
      const queued = (await callTool(client, "slot_create", { name, profile: "cpu-small", model: "qwen3-4b", port, type: "llm", enabled: false, placement: { device: "cpu" } })).body;
      expect(queued.status).toBe("pending_approval");
      await expect.poll(renders, { timeout: 5000 }).toBeGreaterThan(before);
      // (the page's first render, of the stream's snapshot, may be the one counted: its card shows the one that counts)
      await page.locator(`article.pending[data-approval="${queued.approval_id}"]`).waitFor({ state: "attached", timeout: 5000 });
      return queued.approval_id as string;
    };
    return { context, owner, page, renders, queue };
  }

  /** The one-time link `hal0 web` prints for this server. */
  function hal0WebLink(): string {
    const run = spawnSync(process.execPath, [HAL0, "web", "--config", s.config, "--state", s.state, "--port", new URL(s.url).port], { encoding: "utf8", env: { PATH: process.env.PATH ?? "" }, timeout: 20_000 });
    expect(run.status, run.stderr).toBe(0);
    return run.stdout.trim();
  }

  it("logs in through hal0 web's link, shows a gated MCP call within a second, approves it on a click, and the change lands in the tree", async () => {
    const page = await browser.newPage({ viewport: { width: 900, height: 1100 } });
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(err.message));
    page.on("console", (msg) => void (msg.type() === "error" && errors.push(msg.text())));
    // without a session the inbox is the login page
    const anonymous = await page.goto(`${s.url}/`);
    expect(anonymous?.status()).toBe(401);
    await page.locator('form[action="/login"] input[name="token"]').waitFor({ state: "visible", timeout: 2000 });
    errors.length = 0; // the 401 itself is reported as a console error
    const link = hal0WebLink();
    expect(link).toMatch(/\/login\?code=/);
    await page.goto(link);
    expect(new URL(page.url()).pathname).toBe("/");
    const cookies = await page.context().cookies();
    expect(cookies.find((c) => c.name === s.hal0.auth.cookie)).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" });
    await expect.poll(() => page.locator("text=Nothing is waiting").count()).toBe(1);
    await page.locator(`body[data-inbox-live="connected"]`).waitFor({ state: "attached", timeout: 5000 });

    const args = { name: "scratch", profile: "cpu-small", model: "qwen3-4b", port: 8150, type: "llm", enabled: false, placement: { device: "cpu" } };
    const queued = (await callTool(client, "slot_create", args)).body;
    expect(queued.status).toBe("pending_approval");
    const card = page.locator(`article.pending[data-approval="${queued.approval_id}"]`);
    await card.waitFor({ state: "visible", timeout: 1000 });
    await expect(card.textContent()).resolves.toContain("hermes__coder");
    await expect(card.textContent()).resolves.toContain("slot_create");
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, "inbox.png"), fullPage: true });

    await card.locator('form[data-decision="approve"] button').click();
    await expect.poll(() => existsSync(join(s.config, "slots/scratch.toml")), { timeout: 5000 }).toBe(true);
    expect(readFileSync(join(s.config, "slots/scratch.toml"), "utf8")).toMatch(/profile = "cpu-small"/);
    await page.locator(`article.decided#${queued.approval_id}`).waitFor({ state: "visible", timeout: 3000 });
    await expect(page.locator(`article.pending[data-approval="${queued.approval_id}"]`).count()).resolves.toBe(0);
    await expect(page.locator(`article.decided#${queued.approval_id}`).textContent()).resolves.toContain("by owner");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("two boxes on one host name keep their own sessions: logging in to one leaves the other logged in, logging out of one ends only its own", async () => {
    const second = await startTestServer();
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const link = (box: TestServer) => `${box.url}/login?code=${box.hal0.tokens.loginCode(box.hal0.tokens.verify(box.operator)!.id, 300)}`;
      await page.goto(link(s));
      await page.goto(link(second));
      // Browsers keep cookies by host name, not port: each box's cookie has its own name.
      expect(s.hal0.auth.cookie).not.toBe(second.hal0.auth.cookie);
      expect((await context.cookies()).map((c) => c.name).sort()).toEqual([s.hal0.auth.cookie, second.hal0.auth.cookie].sort());
      for (const box of [s, second]) {
        expect((await page.goto(`${box.url}/status`))?.status(), box.url).toBe(200);
        await expect(page.locator("form.who button").count()).resolves.toBe(1);
      }
      // Log out of the second (its CSRF field, its cookie): the first box's session is untouched.
      await page.locator("form.who button").click();
      await page.waitForURL((url) => url.pathname === "/login");
      expect((await page.goto(`${second.url}/status`))?.status()).toBe(401);
      expect((await page.goto(`${s.url}/status`))?.status()).toBe(200);
      await expect(page.locator("form.who button").count()).resolves.toBe(1);
    } finally {
      await context.close();
      await second.close();
    }
  });

  it("when the session ends under an open inbox (logged out in another tab), the inbox says its live updates stopped", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(hal0WebLink());
    await page.locator(`body[data-inbox-live="connected"]`).waitFor({ state: "attached", timeout: 5000 });
    const other = await context.newPage();
    await other.goto(`${s.url}/status`);
    await other.locator("form.who button").click();
    await other.waitForURL((url) => url.pathname === "/login");
    // The stream ends within 2 s of the session; the browser's reconnect is refused and not retried.
    await page.locator(`body[data-inbox-live="stopped"]`).waitFor({ state: "attached", timeout: 10_000 });
    await expect(page.locator("#inbox-status").textContent()).resolves.toContain("Live updates stopped");
    await context.close();
  });

  it("after logging in again in another tab, the open inbox takes the new session's CSRF token: its Approve and Log out still work", async () => {
    const { context, owner, page, renders } = await liveInbox();
    const before = await renders();
    // A second login in this browser (a fresh hal0 web link) ends the session the open inbox was rendered for.
    const other = await context.newPage();
    await other.goto(`${s.url}/login?code=${s.hal0.tokens.loginCode(owner.id, 300)}`);
    await other.close();
    // The inbox's stream ends with the old session and comes back on the new cookie: its snapshot re-renders the page.
    await expect.poll(renders, { timeout: 15_000 }).toBeGreaterThan(before);
    const args = { name: "scratch11", profile: "cpu-small", model: "qwen3-4b", port: 8161, type: "llm", enabled: false, placement: { device: "cpu" } };
    const queued = (await callTool(client, "slot_create", args)).body;
    expect(queued.status).toBe("pending_approval");
    const card = page.locator(`article.pending[data-approval="${queued.approval_id}"]`);
    await card.waitFor({ state: "visible", timeout: 5000 });
    await card.locator('form[data-decision="approve"] button').click();
    // The outcome is announced once the approve call returned, that is once the change ran.
    await expect.poll(() => page.locator("#inbox-status").textContent(), { timeout: 5000 }).toContain(`${queued.approval_id}: executed`);
    expect((await s.call("GET", `/api/agent/approvals/${queued.approval_id}`)).body.approval.state).toBe("executed");
    await page.locator(`article.decided#${queued.approval_id}`).waitFor({ state: "visible", timeout: 5000 });
    // Log out sits outside the re-rendered region; its form carries the new token too.
    await page.locator("form.who button").click();
    await page.waitForURL((url) => url.pathname === "/login");
    expect((await page.goto(`${s.url}/`))?.status()).toBe(401);
    await context.close();
  });

  it("a re-render keeps the keyboard where it was: the caret in a reason being typed, a card's link; a card decided elsewhere moves the focus to the status region, which says so", async () => {
    const { context, page, renders, queue } = await liveInbox();
    let port = 8170;
    /** Queues one more request and waits for this page's re-render. */
    const another = () => (port++, queue(`keys${port}`, port));
    const first = await another();
    const card = () => page.locator(`article.pending[data-approval="${first}"]`);
    const active = () => page.evaluate(() => {
      const el = document.activeElement;
      return { id: el?.id, tag: el?.tagName, card: el?.closest("article")?.id, href: el?.getAttribute("href"), name: el?.getAttribute("name") };
    });

    // Typing a reason: the caret in the middle of it, a re-render, and typing goes on there.
    const reason = card().locator('input[name="reason"]');
    await reason.click();
    await page.keyboard.type("hello world");
    await page.keyboard.press("Home");
    await page.keyboard.press("ArrowRight");
    await page.keyboard.press("ArrowRight");
    await another();
    expect(await active()).toMatchObject({ card: first, name: "reason" });
    await page.keyboard.type("X");
    expect(await reason.inputValue()).toBe("heXllo world");

    // A card's link keeps the focus too (it is no control of a decision form).
    await card().locator('a[href^="/plans/"]').focus();
    const href = await card().locator('a[href^="/plans/"]').getAttribute("href");
    await another();
    expect(await active()).toMatchObject({ tag: "A", card: first, href });

    // The card is decided elsewhere: the focus goes to the status region, which names it, not to the page's top.
    await card().locator('form[data-decision="approve"] button').focus();
    const before = await renders();
    expect((await s.call("POST", `/api/agent/approvals/${first}/deny`, { body: { reason: "decided in the terminal" } })).status).toBe(200);
    await expect.poll(renders, { timeout: 5000 }).toBeGreaterThan(before);
    expect(await active()).toMatchObject({ id: "inbox-status" });
    await expect(page.locator("#inbox-status").textContent()).resolves.toContain(`${first} is no longer waiting`);
    await expect(page.locator("#inbox-status").isVisible()).resolves.toBe(true);
    await context.close();
  });

  it("a re-render leaves open what the operator opened on a card (the whole plan, a change's before → after)", async () => {
    const { context, page, queue } = await liveInbox();
    const first = await queue("open1", 8181);
    const details = page.locator(`article.pending[data-approval="${first}"] details`);
    expect(await details.count()).toBeGreaterThan(1);
    await details.first().locator("summary").first().click();
    await details.nth(1).locator("summary").first().click();
    const open = () => details.evaluateAll((all) => all.map((d) => (d as HTMLDetailsElement).open));
    const opened = await open();
    expect(opened.slice(0, 2)).toEqual([true, true]);
    await queue("open2", 8182);
    expect(await open()).toEqual(opened);
    await context.close();
  });

  it("at phone width a long unbroken value (a reason, a plan's summary, a diagnostic, a path, an operator's name) wraps: no page is wider than the screen", async () => {
    const long = (c: string, n: number) => c.repeat(n);
    // An operator with the longest name a token takes, logged in at 375 px.
    const operator = s.hal0.tokens.mint("operator", long("o", 64));
    const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${s.url}/login?code=${s.hal0.tokens.loginCode(operator.id, 300)}`);
    // A request denied with a 500-character reason (a pasted URL or log line has no space either).
    const queued = (await callTool(client, "slot_create", { name: "narrow1", profile: "cpu-small", model: "qwen3-4b", port: 8191, type: "llm", enabled: false, placement: { device: "cpu" } })).body;
    expect((await s.call("POST", `/api/agent/approvals/${queued.approval_id}/deny`, { body: { reason: long("R", 500) } })).status).toBe(200);
    // A saved plan an agent proposed: its summary and the diagnostics of a file it names, both its own strings.
    const plan = await s.call("POST", "/api/plans", { as: "agent:hermes__coder", body: { summary: long("S", 400), edits: [{ file: `slots/${long("q", 40)}.toml`, op: "text", text: `${long("k", 300)} = 1\n` }] } });
    expect(plan.status, JSON.stringify(plan.body)).toBe(201);
    expect(plan.body.valid).toBe(false);
    const widths: Record<string, number> = {};
    for (const path of ["/", `/plans/${plan.body.id}`, `/plans/${long("x", 200)}`, "/status", "/agents"]) {
      const res = await page.goto(`${s.url}${path}`);
      expect(res?.status(), path).toBeLessThan(500);
      await page.evaluate(() => document.querySelectorAll("details").forEach((d) => (d.open = true)));
      widths[path.slice(0, 30)] = await page.evaluate(() => document.documentElement.scrollWidth);
    }
    expect(widths).toEqual(Object.fromEntries(Object.keys(widths).map((k) => [k, 375])));
    await page.goto(`${s.url}/`);
    await expect(page.locator(`article.decided#${queued.approval_id}`).textContent()).resolves.toContain(long("R", 500));
    await expect(page.locator("header .who").textContent()).resolves.toContain(long("o", 64));
    await context.close();
  });

  it("a login link opened a second time (another tab, a reload) is refused as used, and says this browser is still logged in, with the way to the inbox", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const link = `${s.url}/login?code=${s.hal0.tokens.loginCode(s.hal0.tokens.verify(s.operator)!.id, 300)}`;
    await page.goto(link);
    expect(new URL(page.url()).pathname).toBe("/");
    const again = await context.newPage();
    expect((await again.goto(link))?.status()).toBe(401);
    await expect(again.locator('[role="alert"]').textContent()).resolves.toContain("unknown, used or expired");
    await expect(again.locator("[data-logged-in]").textContent()).resolves.toContain("still logged in as owner");
    await again.locator("[data-logged-in] a").click();
    await again.waitForURL((url) => url.pathname === "/");
    await expect(again.locator("h1").textContent()).resolves.toBe("Approval inbox");
    // Logged out, the same link says nothing of a session.
    await again.locator("form.who button").click();
    await again.waitForURL((url) => url.pathname === "/login");
    expect((await again.goto(link))?.status()).toBe(401);
    await expect(again.locator("[data-logged-in]").count()).resolves.toBe(0);
    await context.close();
  });

  it("with JavaScript off, Deny with a reason is a plain form post that lands back on the decided card; another origin's form post is refused", async () => {
    const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 900, height: 1100 } });
    const page = await context.newPage();
    await page.goto(hal0WebLink());
    expect(new URL(page.url()).pathname).toBe("/");
    const args = { name: "scratch9", profile: "cpu-small", model: "qwen3-4b", port: 8159, type: "llm", enabled: false, placement: { device: "cpu" } };
    const queued = (await callTool(client, "slot_create", args)).body;
    expect(queued.status).toBe("pending_approval");
    await page.reload();
    const card = page.locator(`article.pending[data-approval="${queued.approval_id}"]`);
    await card.locator('form[data-decision="deny"] input[name="reason"]').fill("not <today>");
    await card.locator('form[data-decision="deny"] button').click();
    await page.waitForURL((url) => url.hash === `#${queued.approval_id}`, { timeout: 5000 });
    const decided = page.locator(`article.decided#${queued.approval_id}`);
    await expect(decided.textContent()).resolves.toContain("not <today>");
    await expect(decided.textContent()).resolves.toContain("by owner");
    const approval = (await s.call("GET", `/api/agent/approvals/${queued.approval_id}`)).body.approval;
    expect(approval).toMatchObject({ state: "denied", reason: "not <today>", decided_by: "owner" });
    expect(existsSync(join(s.config, "slots/scratch9.toml"))).toBe(false);

    // A page of another origin on this very host (same site, so the SameSite=Strict cookie goes along)
    // posting the approve form, even with the right csrf field: refused, nothing changes.
    const next = (await callTool(client, "slot_create", { ...args, name: "scratch10", port: 8160 })).body;
    expect(next.status).toBe("pending_approval");
    await page.reload();
    const csrf = await page.locator('meta[name="csrf-token"]').getAttribute("content");
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{32}$/);
    const evil = createServer((_req, res) => {
      res.setHeader("content-type", "text/html");
      res.end(`<form method="post" action="${s.url}/approvals/${next.approval_id}/approve"><input type="hidden" name="csrf" value="${csrf}"><button>win a prize</button></form>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, "127.0.0.1", resolve));
    try {
      await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
      const [reply] = await Promise.all([page.waitForResponse((r) => r.url().includes("/approvals/")), page.locator("button").click()]);
      expect(reply.status()).toBe(403);
      expect((await s.call("GET", `/api/agent/approvals/${next.approval_id}`)).body.approval.state).toBe("pending");
    } finally {
      evil.closeAllConnections();
      await new Promise<void>((resolve) => evil.close(() => resolve()));
    }
    await context.close();
  });
});
