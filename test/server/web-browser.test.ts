import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/** Debian's Chromium (`apt-get install chromium`; `.ci/run` installs it). */
const CHROMIUM = process.env.HAL0_CHROMIUM ?? "/usr/bin/chromium";
const SUITE = "the approval inbox in a real browser (headless Chromium)";
/** Where the inbox screenshot is kept: a test artifact, not a golden. */
export const ARTIFACTS = join(import.meta.dirname, "../artifacts");

const available = existsSync(CHROMIUM);
if (!available) {
  if (process.env.CI) {
    describe(SUITE, () => {
      it("needs Chromium: a required service is missing", () => {
        throw new Error(`no Chromium at ${CHROMIUM}; .ci/run installs Debian's chromium package`);
      });
    });
  } else {
    console.warn(`[hal0 tests] SKIPPED ${SUITE}: no Chromium at ${CHROMIUM}. Install it with \`apt-get install chromium\` (or set HAL0_CHROMIUM), then rerun.`);
  }
}

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

  it("shows a gated MCP call within a second, approves it on a click, and the change lands in the tree", async () => {
    const page = await browser.newPage({ viewport: { width: 900, height: 1100 } });
    const errors: string[] = [];
    page.on("pageerror", (err) => errors.push(err.message));
    page.on("console", (msg) => void (msg.type() === "error" && errors.push(msg.text())));
    await page.goto(`${s.url}/`);
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
    expect(errors).toEqual([]);
    await page.close();
  });
});
