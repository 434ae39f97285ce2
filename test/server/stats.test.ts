import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/index.js";
import { slotPaths } from "../../reconciler/drivers/runtime-record.js";
import { AUTONOMOUS_READ_TOOLS } from "../../schema/data/seed-tiers.js";
import { scrapeRunner } from "../../server/stats/scraper.js";
import { httpCall, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";
import { sysroots } from "../helpers/sysroot.js";

/**
 * The stats tools against real runners: the example box's utility slot (the
 * llama-server stand-in, started by the process runtime with hal0's
 * `--metrics`) and its speech slot (the generic stand-in, not llama-server),
 * scraped by the scraper's `scrapeNow()` while the server's clock moves a
 * minute per scrape; the host figures from a written /proc and /sys tree.
 * Ports 8163/8164 are this file's own.
 */
const UTILITY_PORT = 8163;
const SPEECH_PORT = 8164;
const dirs: string[] = [];
let s: TestServer;
// The server's clock starts a second past a minute's turn, so the scrapes (a minute apart on it) each fall in a minute
// of their own however long the run takes between them (up to ~59 s); from 0 a scrape near a turn could skip a minute.
let offset = 61_000 - (Date.now() % 60_000);
let host: string;

const tree = sysroots("hal0-stats-root-");

// user nice system idle iowait irq softirq steal guest guest_nice: busy 300 of 1000 since boot.
const STAT_A = "cpu  200 0 100 650 50 0 0 0 0 0\ncpu0 200 0 100 650 50 0 0 0 0 0\nintr 1\n";
// 400 more ticks, 100 of them busy.
const STAT_B = "cpu  260 0 140 940 60 0 0 0 0 0\ncpu0 260 0 140 940 60 0 0 0 0 0\nintr 2\n";

beforeAll(async () => {
  host = tree({
    "proc/stat": STAT_A,
    "proc/meminfo": "MemTotal:       131072000 kB\nMemFree:         1000000 kB\nMemAvailable:   98304000 kB\nSwapTotal:       8000000 kB\nSwapFree:        6000000 kB\n",
    "proc/loadavg": "1.50 0.75 0.25 3/812 4242\n",
    "proc/uptime": "86400.25 1000.00\n",
    "proc/cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD RYZEN AI MAX+ 395\nflags\t\t: avx avx2 avx512f\n\n",
    "proc/mounts": `/dev/nvme0n1p2 / ext4 rw 0 0\n`,
    "proc/sys/kernel/osrelease": "6.17.0-hal0\n",
    "sys/class/hwmon/hwmon0/name": "k10temp\n",
    "sys/class/hwmon/hwmon0/temp1_input": "54250\n",
    "sys/class/hwmon/hwmon3/name": "amdgpu\n",
    "sys/class/hwmon/hwmon3/power1_average": "23500000\n",
    "sys/class/hwmon/hwmon3/power1_label": "PPT\n",
    "sys/class/hwmon/hwmon3/power2_input": "4250000\n",
    "sys/class/kfd/kfd/topology/nodes/1/properties": "simd_count 80\ngfx_target_version 110501\n",
  });
  s = await startTestServer({ extra: { hostRoot: host, now: () => Date.now() + offset } });
  cpSync(join(import.meta.dirname, "../../fixtures/runner"), join(s.config, "../runner"), { recursive: true });
  expect((await s.call("PUT", "/api/slots/utility/config", { body: { port: UTILITY_PORT } })).status).toBe(200);
  expect((await s.call("PUT", "/api/slots/speech/config", { body: { port: SPEECH_PORT } })).status).toBe(200);
});

afterAll(async () => {
  const driver = new ProcessDriver({ stateDir: s.state });
  await Promise.all([driver.stop("utility", 2), driver.stop("speech", 2)]);
  await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A chat completion straight to the runner (as a client of the slot would), returning its usage. */
async function chat(port: number, words: number): Promise<{ prompt_tokens: number; completion_tokens: number }> {
  const content = Array.from({ length: words }, (_, i) => `w${i}`).join(" ");
  const res = await httpCall(`http://127.0.0.1:${port}`, "POST", "/v1/chat/completions", { body: { messages: [{ role: "user", content }] } });
  expect(res.status).toBe(200);
  return res.body.usage;
}

/** One scrape, a minute after the last one on the server's clock. */
async function scrapeAMinuteLater(): Promise<void> {
  offset += 60_000;
  await s.hal0.stats.scrapeNow();
}

const slotLine = async (name: string) => (await s.call("GET", "/api/stats/slots")).body.slots.find((x: any) => x.name === name);

describe("the slot scraper against the stand-in runner", () => {
  it("tells a stopped slot, one not scraped yet and one whose runner is not llama-server, each with a reason", async () => {
    expect(await slotLine("utility")).toMatchObject({ available: false, status: "stopped", reason: "not running (stopped)", last_scraped_at: null });
    expect((await s.call("POST", "/api/slots/utility/restart")).status).toBe(200);
    expect(await slotLine("utility")).toMatchObject({ available: false, status: "running", reason: expect.stringContaining("not scraped yet") });
    expect((await s.call("POST", "/api/slots/speech/restart")).status).toBe(200);
    await s.hal0.stats.scrapeNow();
    expect(await slotLine("speech")).toMatchObject({ available: false, status: "running", reason: "a tts slot: its runner is not llama-server and has no llamacpp metrics" });
    expect(s.hal0.stats.ring.count("speech")).toBe(0);
  });

  it("derives tokens/s from the counters' growth: exactly the tokens sent, over the scrape window", async () => {
    const first = await slotLine("utility");
    expect(first).toMatchObject({ available: true, window_s: null, prompt: { tokens_total: 0, tokens: null, tokens_per_s: null }, generation: { tokens_total: 0 } });
    // 15 words: 20 prompt tokens and 16 generated, each (the stand-in's count); twice.
    const usage = [await chat(UTILITY_PORT, 15), await chat(UTILITY_PORT, 15)];
    expect(usage).toEqual([{ prompt_tokens: 20, completion_tokens: 16, total_tokens: 36 }, { prompt_tokens: 20, completion_tokens: 16, total_tokens: 36 }]);
    await scrapeAMinuteLater();
    const line = await slotLine("utility");
    expect(line.window_s).toBeGreaterThanOrEqual(60);
    expect(line.window_s).toBeLessThan(70);
    expect(line).toMatchObject({
      available: true, restarted: false,
      prompt: { tokens_total: 40, tokens: 40, processing_tokens_per_s: 20_000 },
      generation: { tokens_total: 32, tokens: 32, processing_tokens_per_s: 2000 },
      requests: { processing: 0, deferred: 0 },
      kv: { available: false, reason: expect.stringContaining("no KV cache metrics") },
    });
    expect(line.generation.tokens_per_s).toBeCloseTo(32 / line.window_s, 2);
    expect(line.prompt.tokens_per_s).toBeCloseTo(40 / line.window_s, 2);
    expect(Date.parse(line.scraped_at)).toBeGreaterThan(Date.now() + offset - 10_000);
  });

  it("handles a counter reset when the slot restarts: the new run's tokens count whole, never negative", async () => {
    expect((await s.call("POST", "/api/slots/utility/restart")).body).toMatchObject({ action: "replace", result: { ok: true } });
    await chat(UTILITY_PORT, 3); // 8 prompt, 4 generated
    await scrapeAMinuteLater();
    expect(await slotLine("utility")).toMatchObject({ available: true, restarted: true, prompt: { tokens_total: 8, tokens: 8 }, generation: { tokens_total: 4, tokens: 4 } });
    await chat(UTILITY_PORT, 5); // 10 prompt, 6 generated
    await scrapeAMinuteLater();
    expect(await slotLine("utility")).toMatchObject({ restarted: false, prompt: { tokens_total: 18, tokens: 10 }, generation: { tokens_total: 10, tokens: 6 } });
  });

  it("throughput_history buckets the ring by step since `since`; the overview sums it", async () => {
    const h = await s.call("GET", "/api/stats/throughput/history?since=600&step=60&slot=utility");
    expect(h.status, JSON.stringify(h.body)).toBe(200);
    expect(h.body.step_s).toBe(60);
    expect(h.body.slots).toHaveLength(1);
    const points = h.body.slots[0].points as Array<{ generated_tokens: number | null; prompt_tokens: number | null }>;
    expect(points.length).toBeGreaterThanOrEqual(10);
    expect(points.map((p) => p.generated_tokens).filter((n) => n !== null)).toEqual([32, 4, 6]);
    expect(points.reduce((t, p) => t + (p.prompt_tokens ?? 0), 0)).toBe(58);
    const iso = await s.call("GET", `/api/stats/throughput/history?since=${encodeURIComponent(new Date(Date.now() + offset - 3_600_000).toISOString())}&step=600`);
    expect(iso.body.total.reduce((t: number, p: any) => t + (p.generated_tokens ?? 0), 0)).toBe(42);

    const overview = await s.call("GET", "/api/stats");
    expect(overview.status).toBe(200);
    expect(overview.body).toMatchObject({
      slots: { by_status: { running: 2 }, scraped: 1 },
      throughput_last_hour: { prompt_tokens: 58, generated_tokens: 42 },
      system: { memory: { total_bytes: 131072000 * 1024 } },
    });
    expect(overview.body.slots.tokens_per_s.generation).toBe((await slotLine("utility")).generation.tokens_per_s);
    // hal0's own request totals, from the registry request_metrics reads: every REST call of this test so far (the one in flight is counted when it ends).
    const before = (await s.call("GET", "/api/stats/requests")).body.totals;
    const again = await s.call("GET", "/api/stats");
    expect(again.body.requests.by_door.rest.count).toBe(before.by_door.rest.count + 1);
    expect(again.body.requests.count).toBe(before.count + 1);
    expect(overview.body.requests.by_door.rest.count).toBeGreaterThan(3);
  });

  it("refuses a bad window or an unknown slot with a coded error", async () => {
    for (const q of ["since=yesterday", "step=30", "since=2026-13-45T00:00:00Z", "since=86400&step=59", "bogus=1"]) {
      const r = await s.call("GET", `/api/stats/throughput/history?${q}`);
      expect(r.status, q).toBe(422);
      expect(r.body.error.code, q).toBe("validation.invalid");
    }
    // A time with something after it (V8's Date.parse reads past a NUL) is no ISO time.
    const recent = new Date(Date.now() + offset - 600_000).toISOString();
    for (const tail of ["%00x", "%00", "x"]) {
      const r = await s.call("GET", `/api/stats/throughput/history?since=${recent}${tail}`);
      expect(r.status, tail).toBe(422);
      expect(r.body.error.code, tail).toBe("validation.invalid");
    }
    // A day the calendar does not have is no ISO time either (V8's Date.parse rolls 02-30 over into March).
    const year = new Date(Date.now() + offset).getUTCFullYear() - 1;
    for (const day of [`${year}-02-30`, `${year}-04-31T10:00:00Z`, `${year}-00-10`]) {
      const r = await s.call("GET", `/api/stats/throughput/history?since=${day}&step=86400`);
      expect(r.status, day).toBe(422);
      expect(r.body.error.code, day).toBe("validation.invalid");
    }
    const fine = await s.call("GET", `/api/stats/throughput/history?since=${recent}`);
    expect(fine.status).toBe(200);
    const future = await s.call("GET", `/api/stats/throughput/history?since=${new Date(Date.now() + offset + 3_600_000).toISOString()}`);
    expect(future.body.error).toMatchObject({ code: "validation.invalid", message: expect.stringContaining("in the future") });
    const long = await s.call("GET", "/api/stats/throughput/history?since=172800&step=60");
    expect(long.body.error).toMatchObject({ code: "validation.invalid", message: expect.stringContaining("larger step") });
    const unknown = await s.call("GET", "/api/stats/throughput/history?slot=utilty");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: "slot.not_found", details: { did_you_mean: "utility" } });
  });

  it("a runner found running whose runtime record cannot be read is unavailable with that reason, not 'not scraped yet' for ever", async () => {
    const record = slotPaths(s.state, "utility").record;
    const kept = readFileSync(record);
    writeFileSync(record, "{ not json");
    try {
      s.hal0.box.forgetLiveness(); // the record was changed behind the box's back: observe afresh
      await s.hal0.stats.scrapeNow();
      expect(await slotLine("utility")).toMatchObject({
        available: false, status: "running",
        reason: expect.stringMatching(/^its runner runs but its runtime record cannot be read, so hal0 does not know where to scrape it \(runtime\.json is unreadable: .*; its runner \(pid \d+\) still runs\)$/),
      });
    } finally {
      writeFileSync(record, kept);
      s.hal0.box.forgetLiveness();
    }
    await s.hal0.stats.scrapeNow();
    expect(await slotLine("utility")).toMatchObject({ available: true });
  });

  it("a runner started without --metrics answers 501: unavailable with the reason; nothing listening: the same, never an error", async () => {
    const port = 8165;
    const runner: ChildProcess = spawn(process.execPath, [join(import.meta.dirname, "../../fixtures/runner/fake-llama-server.mjs"), "--port", String(port)], { env: { ...process.env, HAL0_FAKE_LOAD_MS: "0" }, stdio: "ignore" });
    try {
      let got: Awaited<ReturnType<typeof scrapeRunner>> | undefined;
      for (let i = 0; i < 50; i++) {
        got = await scrapeRunner("bare", "llm", { host: "127.0.0.1", port, headers: {} }, null, Date.now);
        if (!("reason" in got) || !got.reason.includes("ECONNREFUSED")) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(got).toEqual({ reason: "the runner answers 501 to GET /metrics: it was started without --metrics (it gets the flag when it is restarted)" });
    } finally {
      runner.kill("SIGTERM");
    }
    expect(await scrapeRunner("gone", "llm", { host: "127.0.0.1", port: 8166, headers: {} }, null, Date.now)).toEqual({ reason: "GET /metrics on port 8166: ECONNREFUSED" });
  });

  it("a runner still loading its model answers 503 and one refusing the key 401: each unavailable with what the runner said and why, never as a runner without --metrics", async () => {
    const port = 8167;
    const runner: ChildProcess = spawn(process.execPath, [join(import.meta.dirname, "../../fixtures/runner/fake-llama-server.mjs"), "--port", String(port), "--metrics", "--api-key", "sk-runner-key"], { env: { ...process.env, HAL0_FAKE_LOAD_MS: "600000" }, stdio: "ignore" });
    try {
      let got: Awaited<ReturnType<typeof scrapeRunner>> | undefined;
      for (let i = 0; i < 50; i++) {
        got = await scrapeRunner("warming", "llm", { host: "127.0.0.1", port, headers: { authorization: "Bearer sk-runner-key" } }, null, Date.now);
        if (!("reason" in got) || !got.reason.includes("ECONNREFUSED")) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(got).toEqual({ reason: `GET /metrics on port ${port} answered 503 ("Loading model"): the runner is not ready yet (llama-server answers 503 while it loads its model); it is scraped again at the next tick` });
    } finally {
      runner.kill("SIGTERM");
    }
    const refusing = createServer((req, res) => {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { code: 401, message: `Invalid API Key ${req.headers.authorization ?? ""}`, type: "authentication_error" } }));
    });
    await new Promise<void>((resolve) => refusing.listen(0, "127.0.0.1", resolve));
    const at = { host: "127.0.0.1", port: (refusing.address() as AddressInfo).port, headers: { authorization: "Bearer sk-old-key" } };
    try {
      const refused = await scrapeRunner("keyed", "llm", at, null, Date.now);
      expect(refused).toEqual({ reason: `GET /metrics on port ${at.port} answered 401 ("Invalid API Key Bearer ***"): the runner refuses the key hal0 sends it (the slot's --api-key); hal0 sends the first key of the --api-key it started the runner with` });
      expect(JSON.stringify(refused)).not.toContain("sk-old-key");
    } finally {
      refusing.closeAllConnections();
      await new Promise((resolve) => refusing.close(resolve));
    }
  });

  it("reads the values a C++ stream writes (nan, -nan, inf): a gauge that is not a number is left out, the sample kept", async () => {
    const counters = "llamacpp:prompt_tokens_total 29\nllamacpp:prompt_seconds_total 0.013\nllamacpp:tokens_predicted_total 4\nllamacpp:tokens_predicted_seconds_total 0.002\n";
    let body = "";
    const runner = createServer((_req, res) => res.end(body));
    await new Promise<void>((resolve) => runner.listen(0, "127.0.0.1", resolve));
    const at = { host: "127.0.0.1", port: (runner.address() as AddressInfo).port, headers: {} };
    const scrape = (text: string) => {
      body = text;
      return scrapeRunner("cpp", "llm", at, null, Date.now);
    };
    try {
      expect(await scrape(`${counters}llamacpp:kv_cache_usage_ratio -nan\nllamacpp:kv_cache_tokens 512\nllamacpp:n_busy_slots_per_decode nan\nllamacpp:requests_processing 1\n`))
        .toEqual({ sample: expect.objectContaining({ prompt_tokens: 29, predicted_tokens: 4, kv_usage_ratio: null, kv_tokens: 512, busy_slots_per_decode: null, requests_processing: 1 }) });
      expect(await scrape(counters.replace("prompt_seconds_total 0.013", "prompt_seconds_total inf")))
        .toEqual({ reason: "GET /metrics: llamacpp:prompt_seconds_total is +Inf (each of llama-server's four counters must be there, a finite number ≥ 0)" });
    } finally {
      runner.closeAllConnections();
      await new Promise((resolve) => runner.close(resolve));
    }
  });

  it("a runner serving llama-server's counters with one missing or not a finite number ≥ 0 is told so by name and value, not as another program's metrics", async () => {
    const counters = "llamacpp:prompt_tokens_total 29\nllamacpp:prompt_seconds_total 0.013\nllamacpp:tokens_predicted_total 4\nllamacpp:tokens_predicted_seconds_total 0.002\n";
    let body = "";
    const runner = createServer((_req, res) => res.end(body));
    await new Promise<void>((resolve) => runner.listen(0, "127.0.0.1", resolve));
    const at = { host: "127.0.0.1", port: (runner.address() as AddressInfo).port, headers: {} };
    const reasonOf = async (text: string) => {
      body = text;
      const got = await scrapeRunner("odd", "llm", at, null, Date.now);
      return "reason" in got ? got.reason : "a sample";
    };
    try {
      expect(await reasonOf(counters)).toBe("a sample");
      expect(await reasonOf(counters.replace("prompt_seconds_total 0.013", "prompt_seconds_total NaN").replace("tokens_predicted_total 4", "tokens_predicted_total -4")))
        .toBe("GET /metrics: llamacpp:prompt_seconds_total is NaN, llamacpp:tokens_predicted_total is -4 (each of llama-server's four counters must be there, a finite number ≥ 0)");
      expect(await reasonOf(counters.replace("llamacpp:tokens_predicted_seconds_total 0.002", "llamacpp:tokens_predicted_seconds_total +Inf")))
        .toContain("llamacpp:tokens_predicted_seconds_total is +Inf");
      expect(await reasonOf(counters.replace(/^llamacpp:prompt_seconds_total .*$/m, "")))
        .toBe("GET /metrics: llamacpp:prompt_seconds_total is missing (each of llama-server's four counters must be there, a finite number ≥ 0)");
      expect(await reasonOf("process_cpu_seconds_total 3\n")).toBe("GET /metrics has no llamacpp:prompt_tokens_total / tokens_predicted_total counters: not llama-server's metrics");
    } finally {
      runner.closeAllConnections();
      await new Promise((resolve) => runner.close(resolve));
    }
  });

  it("a runner that trickles its /metrics a byte at a time is given 3 s for the whole reply, not 3 s between bytes: unavailable, and the scrape ends", async () => {
    const trickle = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      const timer = setInterval(() => res.write("#"), 200);
      res.on("close", () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => trickle.listen(0, "127.0.0.1", resolve));
    const port = (trickle.address() as AddressInfo).port;
    try {
      const started = Date.now();
      expect(await scrapeRunner("slow", "llm", { host: "127.0.0.1", port, headers: {} }, null, Date.now)).toEqual({ reason: `GET /metrics on port ${port}: no whole reply within 3 s` });
      expect(Date.now() - started).toBeLessThan(4500);
    } finally {
      trickle.closeAllConnections();
      await new Promise((resolve) => trickle.close(resolve));
    }
  }, 15_000);
});

describe("the status page", () => {
  it("shows each slot's tokens/s and an inline SVG sparkline of the last hour from the ring; a slot not scraped says why", async () => {
    const res = await s.call("GET", "/status");
    expect(res.status).toBe(200);
    const html = res.body as string;
    const row = (name: string) => html.slice(html.indexOf(`<th scope="row">${name}</th>`), html.indexOf("</tr>", html.indexOf(`<th scope="row">${name}</th>`)));
    const line = await slotLine("utility");
    const utility = row("utility");
    expect(utility).toContain(`<strong>${line.generation.tokens_per_s.toFixed(1)}</strong> tok/s</td><td>${line.prompt.tokens_per_s.toFixed(1)} tok/s`);
    expect(utility).toMatch(/<svg class="spark" role="img" aria-label="generated tokens\/s per minute since [^"]+: peak [\d.]+" viewBox="0 0 160 32"/);
    // Four minutes were scraped with a gap of none: one line through the three measured minutes after the first sample.
    expect(utility.match(/<polyline points="([^"]+)"/)?.[1]?.split(" ")).toHaveLength(3);
    expect(row("speech")).toContain("a tts slot: its runner is not llama-server");
    expect(row("speech")).toContain("no samples this hour");
    expect(row("chat")).toContain("not running (stopped)");
    // The sparkline is markup the page's CSP allows: no script, no inline style.
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(utility).not.toMatch(/ style=|<script/);
  });
});

describe("the host's figures from a written /proc and /sys", () => {
  it("system_stats: CPU since boot and over the window since the last reading, memory, load, uptime, the store's disk", async () => {
    const first = await s.call("GET", "/api/system-stats");
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      cpu: { available: true, logical: 1, model: "AMD RYZEN AI MAX+ 395", usage_since_boot: 0.3 },
      memory: { available: true, total_bytes: 131072000 * 1024, available_bytes: 98304000 * 1024, used_bytes: (131072000 - 98304000) * 1024, used_ratio: 0.25, swap_used_bytes: 2000000 * 1024 },
      load: { available: true, one: 1.5, five: 0.75, fifteen: 0.25, runnable: 3, tasks: 812 },
      uptime: { host_s: 86400.25 },
      store: { available: true, path: join(s.config, "models/pulled"), mount: "/", fstype: "ext4" },
    });
    writeFileSync(join(host, "proc/stat"), STAT_B);
    const second = await s.call("GET", "/api/system-stats");
    expect(second.body.cpu).toMatchObject({ usage_since_boot: 0.2857, usage_recent: 0.25 });
    expect(second.body.cpu.window_s).toBeGreaterThanOrEqual(0);
  });

  it("power_stats: watts from power1_average (µW), power2_input where there is no average, with each hwmon device's name", async () => {
    const power = await s.call("GET", "/api/stats/power");
    expect(power.body).toEqual({
      available: true, total_watts: 27.75,
      devices: [{ hwmon: "hwmon3", name: "amdgpu", watts: 27.75, sensors: [{ sensor: "power1", label: "PPT", watts: 23.5, source: "average" }, { sensor: "power2", label: null, watts: 4.25, source: "input" }] }],
    });
    const hw = await s.call("GET", "/api/hardware");
    expect(hw.body).toMatchObject({
      kernel: "6.17.0-hal0", cpu: { model: "AMD RYZEN AI MAX+ 395" }, memory: { total_bytes: 131072000 * 1024 },
      gpus: { targets: { available: true, gpus: [{ target: "gfx1151" }] } },
      npu: { available: false, reason: expect.stringContaining("no /sys/class/accel") },
      power: { available: true, sensors: ["amdgpu/power1", "amdgpu/power2"] },
      temperatures: [{ chip: "k10temp", sensor: "temp1", celsius: 54.25 }],
    });
  });
});

describe("the stats tools over MCP", () => {
  it("each answers an agent in its seed tier (autonomous read) with the REST reply", async () => {
    const c = await adminClient(s.url, "hermes__coder");
    try {
      for (const [tool, args] of [["slot_stats", {}], ["throughput_history", { since: 600, step: 60 }], ["system_stats", {}], ["hardware_snapshot", {}], ["power_stats", {}], ["stats_overview", {}]] as const) {
        expect(AUTONOMOUS_READ_TOOLS.some((t) => t.tool === tool), tool).toBe(true);
        const res = await callTool(c, tool, args);
        expect(res.isError, `${tool}: ${JSON.stringify(res.body)}`).toBe(false);
        expect(res.body.status, tool).not.toBe("pending_approval");
      }
      expect((await callTool(c, "power_stats", {})).body.total_watts).toBe(27.75);
      expect((await callTool(c, "slot_stats", {})).body.slots.find((x: any) => x.name === "utility")).toMatchObject({ available: true, generation: { tokens: 6 } });
      expect((await callTool(c, "throughput_history", { since: 600, step: 60, slot: "utility" })).body.slots[0].points.map((p: any) => p.generated_tokens).filter((n: any) => n !== null)).toEqual([32, 4, 6]);
      const bad = await callTool(c, "throughput_history", { step: 10 });
      expect(bad).toMatchObject({ isError: true, body: { status: "error", error: { code: "validation.invalid" } } });
    } finally {
      await c.close();
    }
  });
});

describe("the scraper's timer (last: its scrapes move the ring's newest row)", () => {
  it("scrapes on its own timer once started (hal0 serve starts it at 60 s), and stops with close", async () => {
    const before = s.hal0.stats.outcome("utility")!.at;
    expect(s.hal0.stats.intervalS).toBeUndefined(); // the harness server runs no timer
    s.hal0.stats.start(0.2);
    expect(s.hal0.stats.intervalS).toBe(0.2);
    await expect.poll(() => s.hal0.stats.outcome("utility")?.at, { timeout: 5000 }).not.toBe(before);
    await s.hal0.stats.close();
    expect(s.hal0.stats.intervalS).toBeUndefined();
    const after = s.hal0.stats.outcome("utility")!.at;
    await new Promise((r) => setTimeout(r, 500));
    expect(s.hal0.stats.outcome("utility")!.at).toBe(after);
  });
});
