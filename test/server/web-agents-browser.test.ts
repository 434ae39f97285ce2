import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { BridgeToolDef } from "../../server/bridge/tool.js";
import { startTestServer, type TestServer } from "./harness.js";
import { chromiumFor } from "./web-helpers.js";

const SUITE = "the Agents page in a real browser (headless Chromium)";
const { path: CHROMIUM, available } = chromiumFor(SUITE);

const TOOLS: BridgeToolDef[] = [
  { name: "agent_profile_list", defaultTier: "autonomous_read", description: "stand-in", input: z.strictObject({}), run: async (ctx) => ({ profiles: ctx.profiles }) },
  { name: "agent_run_start", defaultTier: "autonomous_write", description: "stand-in", input: z.strictObject({}), run: async () => ({ run_id: "r" }) },
];

async function connect(url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: "browser-test", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return client;
}

describe.skipIf(!available)(SUITE, () => {
  let s: TestServer;
  let browser: Browser;
  beforeAll(async () => {
    s = await startTestServer({ extra: { bridgeTools: TOOLS } });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
  });
  afterAll(async () => {
    await browser?.close();
    await s?.close();
  });

  it("tool counts and badges match tools/list; the Cursor panel's snippet connects with the SDK client", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 1200 } });
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(err.message));
    page.on("console", (msg) => void (msg.type() === "error" && errors.push(msg.text())));
    const owner = s.hal0.tokens.verify(s.operator)!;
    await page.goto(`${s.url}/login?code=${s.hal0.tokens.loginCode(owner.id, 300)}`);
    errors.length = 0; // the inbox it lands on loads the built inbox script, which this suite does not need
    await page.goto(`${s.url}/agents?agent=hermes__coder`);
    expect(await page.title()).toBe("Agents · hal0");

    const operator = { authorization: `Bearer ${s.operator}` };
    for (const [id, mount] of [["hal0-admin", "/mcp/admin"], ["hal0-memory", "/mcp/memory"], ["hal0-agents", "/mcp/agents"]] as const) {
      const client = await connect(`${s.url}${mount}`, operator);
      const listed = (await client.listTools()).tools.map((t) => t.name).sort();
      await client.close();
      expect(await page.locator(`[data-tool-count="${id}"]`).textContent()).toBe(String(listed.length));
      const names = await page.locator(`ul[data-server="${id}"] li code`).allTextContents();
      expect(names.sort()).toEqual(listed);
    }
    const badge = (tool: string) => page.locator(`ul[data-server="hal0-admin"] li:has(code:text-is("${tool}")) .badge`);
    expect(await badge("slot_load").textContent()).toBe("gated"); // [agents.hermes__coder] gated = ["slot_load", …]
    expect(await badge("model_delete").textContent()).toBe("blocked");
    expect(await badge("slot_list").textContent()).toBe("read");
    // agents/coder.toml lists no hal0-agents server: its tools are blocked for hermes__coder (unknown_server).
    expect(await page.locator(`ul[data-server="hal0-agents"] li:has(code:text-is("agent_run_start")) .badge`).textContent()).toBe("blocked");

    await page.fill('input[name="name"]', "cursor-ide");
    await page.fill('input[name="profiles"]', "coder");
    await page.selectOption('select[name="client"]', "cursor");
    await page.click('form[action="/agents/admit"] button[type="submit"]');
    const snippet = await page.locator('code[data-client-config="cursor"]').textContent();
    const server = (JSON.parse(snippet!) as { mcpServers: Record<string, { url: string; headers: Record<string, string> }> }).mcpServers["hal0-agents"]!;
    const client = await connect(server.url, server.headers);
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(["agent_profile_list", "agent_run_start"]);
    const reply = (await client.callTool({ name: "agent_profile_list", arguments: {} })) as { content: Array<{ text: string }> };
    expect(JSON.parse(reply.content[0]!.text)).toEqual({ profiles: ["coder"] });
    await client.close();
    expect(errors).toEqual([]);
    await page.close();
  });

  it("the admit form says which named profiles the Hermes home has no folder of (a typo, a case slip), as hal0 bridge admit does, beside the config it still shows", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-admit-"));
    const box = join(dir, "box");
    const home = join(dir, "hermes");
    cpSync(join(import.meta.dirname, "../../fixtures/box"), box, { recursive: true });
    appendFileSync(join(box, "hal0.toml"), `\n[hermes]\nhome = ${JSON.stringify(home)}\n`);
    mkdirSync(join(home, "profiles", "coder"), { recursive: true });
    const box2 = await startTestServer({ box, extra: { bridgeTools: TOOLS } });
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${box2.url}/login?code=${box2.hal0.tokens.loginCode(box2.hal0.tokens.verify(box2.operator)!.id, 300)}`);
      const admit = async (name: string, profiles: string) => {
        await page.goto(`${box2.url}/agents`);
        await page.fill('input[name="name"]', name);
        await page.fill('input[name="profiles"]', profiles);
        await page.selectOption('select[name="client"]', "codex");
        await page.click('form[action="/agents/admit"] button[type="submit"]');
        await page.locator('code[data-client-config="codex"]').waitFor({ state: "visible" });
      };
      await admit("typo-agent", "Coder, writer");
      const warnings = await page.locator("[data-admit-warnings] li").allTextContents();
      expect(warnings).toHaveLength(2);
      expect(warnings[0]).toContain("no Hermes profile Coder");
      expect(warnings[0]).toContain("did you mean coder");
      expect(warnings[1]).toContain("no Hermes profile writer");
      expect(warnings[1]).toContain("there are: coder");
      // The admission stands, as asked: the token reaches the names given.
      expect(box2.hal0.tokens.list().find((t) => t.name === "typo-agent")?.profiles).toEqual(["Coder", "writer"]);
      // A profile the home holds, or every profile: nothing to say.
      await admit("good-agent", "coder");
      await expect(page.locator("[data-admit-warnings]").count()).resolves.toBe(0);
    } finally {
      await context.close();
      await box2.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a running run's page reloads every 2 s, and its first link stops that, so the keyboard reaches Cancel and a screen reader is not sent back to the top", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-follow-"));
    const box = join(dir, "box");
    const home = join(dir, "hermes");
    cpSync(join(import.meta.dirname, "../../fixtures/box"), box, { recursive: true });
    appendFileSync(join(box, "hal0.toml"), `\n[hermes]\nhome = ${JSON.stringify(home)}\ncommand = ${JSON.stringify(join(import.meta.dirname, "../../fixtures/hermes/hermes"))}\n`);
    mkdirSync(join(home, "profiles", "alpha", "memories"), { recursive: true });
    const box2 = await startTestServer({ box });
    const context = await browser.newContext();
    const admitted = box2.hal0.tokens.mint("agent", "claude-code", ["mcp:agents", "profile:alpha"]);
    const agent = await connect(`${box2.url}/mcp/agents`, { authorization: `Bearer ${admitted.token}` });
    try {
      const started = (await agent.callTool({ name: "agent_run_start", arguments: { profile: "alpha", prompt: "[hang]" } })) as { content: Array<{ text: string }> };
      const runId = (JSON.parse(started.content[0]!.text) as { run_id: string }).run_id;
      const page = await context.newPage();
      await page.goto(`${box2.url}/login?code=${box2.hal0.tokens.loginCode(box2.hal0.tokens.verify(box2.operator)!.id, 300)}`);
      await page.goto(`${box2.url}/agents/runs/${runId}`);
      await expect(page.locator('meta[http-equiv="refresh"]').count()).resolves.toBe(1);
      // The first link of the content (right after the skip link's target) stops the reloading.
      await expect(page.locator("main a").first().textContent()).resolves.toBe("Stop reloading");
      await page.locator("main a").first().click();
      await page.waitForURL((url) => url.searchParams.get("follow") === "off");
      await expect(page.locator('meta[http-equiv="refresh"]').count()).resolves.toBe(0);
      await expect(page.locator('[data-run-state]').textContent()).resolves.toBe("running");
      // The page stays put: Tab on to Cancel and press it.
      const cancel = page.locator(`form[action="/agents/runs/${runId}/cancel"] button`);
      for (let i = 0; i < 10 && !(await cancel.evaluate((b) => b === document.activeElement)); i++) await page.keyboard.press("Tab");
      await expect(cancel.evaluate((b) => b === document.activeElement)).resolves.toBe(true);
      await page.keyboard.press("Enter");
      await page.waitForURL((url) => url.pathname === `/agents/runs/${runId}` && url.search === "");
      await expect.poll(async () => {
        await page.reload();
        return page.locator("[data-run-state]").textContent();
      }, { timeout: 10_000 }).toBe("cancelled");
      // An ended run's page has nothing to follow.
      await expect(page.locator('meta[http-equiv="refresh"]').count()).resolves.toBe(0);
      await expect(page.locator("[data-run-follow]").count()).resolves.toBe(0);
    } finally {
      await agent.close();
      await context.close();
      await box2.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a profile name the admit form cannot take is refused for that field, naming it, and mints nothing", async () => {
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${s.url}/login?code=${s.hal0.tokens.loginCode(s.hal0.tokens.verify(s.operator)!.id, 300)}`);
      await page.goto(`${s.url}/agents`);
      await page.fill('input[name="name"]', "profile-typo");
      await page.fill('input[name="profiles"]', "coder, my writer");
      const [reply] = await Promise.all([page.waitForResponse((r) => r.url().endsWith("/agents/admit")), page.click('form[action="/agents/admit"] button[type="submit"]')]);
      expect(reply.status()).toBe(422);
      const text = await page.locator("main").textContent();
      expect(text).toContain('Hermes profiles: "my writer" is not a profile name');
      expect(text).not.toContain("scope");
      expect(s.hal0.tokens.list().some((t) => t.name === "profile-typo")).toBe(false);
    } finally {
      await context.close();
    }
  });
});
