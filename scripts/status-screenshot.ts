// Regenerates docs/status.png, the status page with real numbers: `npx vite-node scripts/status-screenshot.ts [minutes]`
// (default 6). It copies the example box (fixtures/box) to a temp folder, moves the slots it starts to ports
// 8171-8175, serves it (`serve()`, the scraper every 5 s, no sweep), starts five slots through the REST restart
// route, sends chat completions to two of them, spread over each minute (a varying number), and after `minutes` minutes
// opens /status in Debian's Chromium (/usr/bin/chromium, or $HAL0_CHROMIUM) as the operator and screenshots the
// page down to the end of its throughput table. It stops what it started and removes the temp folder.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { ProcessDriver } from "../reconciler/index.js";
import { serve, serveLogger } from "../server/serve.js";

const ROOT = join(import.meta.dirname, "..");
const OUT = join(ROOT, "docs/status.png");
const MINUTES = Number(process.argv[2] ?? 6);
const CHROMIUM = process.env.HAL0_CHROMIUM ?? "/usr/bin/chromium";
const RUN: Record<string, number> = { chat: 8171, coder: 8172, utility: 8173, embed: 8174, speech: 8175 };

const dir = mkdtempSync(join(tmpdir(), "hal0-screenshot-"));
const config = join(dir, "config");
const state = join(dir, "state");
cpSync(join(ROOT, "fixtures/box"), config, { recursive: true });
cpSync(join(ROOT, "fixtures/runner"), join(dir, "runner"), { recursive: true });
for (const [slot, port] of Object.entries(RUN)) {
  const file = join(config, "slots", `${slot}.toml`);
  writeFileSync(file, readFileSync(file, "utf8").replace(/^port = \d+$/m, `port = ${port}`));
}

const serving = await serve({
  root: config, stateDir: state, driverFor: async () => new ProcessDriver({ stateDir: state }), env: { PATH: process.env.PATH ?? "" },
  host: "127.0.0.1", port: 0, reconcile: false, scrapeIntervalS: 5, logger: serveLogger("warn"),
});
const operator = readFileSync(join(state, "operator.token"), "utf8").trim();
const api = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${serving.url}${path}`, { method, headers: { authorization: `Bearer ${operator}`, ...(body ? { "content-type": "application/json" } : {}) }, body: body ? JSON.stringify(body) : undefined });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.json();
};
const chat = async (port: number, words: number) => {
  const content = Array.from({ length: words }, (_, i) => `word${i}`).join(" ");
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ messages: [{ role: "user", content }] }) });
  if (!res.ok) throw new Error(`chat on ${port}: ${res.status}`);
};

try {
  for (const slot of Object.keys(RUN)) await api("POST", `/api/slots/${slot}/restart`);
  // A varying load per minute, so the sparklines have a shape: [requests to chat, to utility] each minute.
  const load = [[6, 2], [14, 3], [9, 6], [20, 4], [12, 8], [24, 5], [16, 7], [10, 3]];
  const end = Date.now() + MINUTES * 60_000;
  for (let minute = 0; Date.now() < end; minute++) {
    const [toChat, toUtility] = load[minute % load.length]!;
    // Spread over the minute, so every scrape window sees some.
    const calls = [...Array.from({ length: toChat! }, (_, i) => () => chat(RUN.chat!, 40 + 25 * i)), ...Array.from({ length: toUtility! }, (_, i) => () => chat(RUN.utility!, 12 + 4 * i))];
    const gap = 60_000 / calls.length;
    for (const [i, call] of calls.entries()) {
      await call();
      await new Promise((r) => setTimeout(r, Math.max(0, Math.min(end, Date.now() + gap) - Date.now())));
      if (Date.now() >= end && i < calls.length - 1) break;
    }
    console.log(`minute ${minute + 1}/${MINUTES}: ${toChat} chat and ${toUtility} utility completions`);
  }
  await serving.server.stats.scrapeNow();
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"] });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, extraHTTPHeaders: { authorization: `Bearer ${operator}` }, colorScheme: "light" });
    await page.goto(`${serving.url}/status`);
    const section = await page.locator("section[aria-labelledby=throughput-h]").boundingBox();
    if (!section) throw new Error("the status page has no throughput section");
    await page.screenshot({ path: OUT, fullPage: true, clip: { x: 0, y: 0, width: 1280, height: Math.ceil(section.y + section.height + 24) } });
  } finally {
    await browser.close();
  }
  console.log(`wrote ${OUT}`);
} finally {
  const driver = new ProcessDriver({ stateDir: state });
  await Promise.all(Object.keys(RUN).map((slot) => driver.stop(slot, 2)));
  await serving.close();
  rmSync(dir, { recursive: true, force: true });
}
