import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { packageRoot } from "../reconciler/package-root.js";
import { freePortRange, writeBox } from "./apply.js";
import { startFloors, type Floors } from "./floors.js";
import { median, quartiles, stat, summarize } from "./measure.js";

/**
 * `npm run bench` (server part): `hal0 serve` on a 50-slot box of fake
 * runners, its reconcile loop converged. GET /api/slots over 2,000
 * sequential keep-alive requests, in turn with the same bytes from a bare
 * node:http server (the floor); slot_list over MCP beside GET /api/slots and
 * beside a bare server of the same MCP SDK (the SDK's floor); then idle RSS
 * beside a bare idle node. Rows are medians of per-batch p50s with their IQR.
 */
const SLOTS = 50;
const REQUESTS = 2000;
const RSS_TARGET_MB = 120;
const REST_P50_TARGET_MS = 0.8;
const MCP_RATIO_TARGET = 1.3;
const HAL0 = join(packageRoot(), "bin/hal0.cjs");
const exec = promisify(execFile);


function get(agent: Agent, url: string): Promise<{ ms: number; body: Buffer; status: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    request(url, { agent, headers: AUTH }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ ms: performance.now() - t0, body: Buffer.concat(chunks), status: res.statusCode ?? 0 }));
    }).on("error", reject).end();
  });
}

/** The operator's bearer token (`<state>/operator.token`): every request is authenticated, as in real use. */
let AUTH: Record<string, string> = {};

/** Requests per batch: each batch gives one p50 sample (the rows are medians of the batches' p50s). */
const BATCH = 100;

/** One GET that must answer 200, timed. */
async function timedGet(agent: Agent, url: string): Promise<number> {
  const r = await get(agent, url);
  if (r.status !== 200) throw new Error(`GET ${url}: ${r.status} ${r.body.toString().slice(0, 200)}`);
  return r.ms;
}

function percentile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * q))]!;
}

/** Per-batch p50s and the p50/p99 over every request. */
interface Latency {
  readonly batches: number[];
  readonly p50: number;
  readonly p99: number;
}

function latency(all: readonly number[], per = BATCH): Latency {
  const batches: number[] = [];
  for (let i = 0; i + per <= all.length; i += per) batches.push(percentile(all.slice(i, i + per), 0.5));
  return { batches, p50: percentile(all, 0.5), p99: percentile(all, 0.99) };
}

/**
 * GET /api/slots from hal0 and the same bytes from a bare node:http server,
 * request by request in turn (both see the same load), after a warm-up.
 */
async function restVsBare(url: string, bareUrl: string): Promise<{ hal0: Latency; bare: Latency }> {
  const a = new Agent({ keepAlive: true, maxSockets: 1 });
  const b = new Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < 100; i++) (await timedGet(a, url), await timedGet(b, bareUrl));
  const hal0: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    hal0.push(await timedGet(a, url));
    bare.push(await timedGet(b, bareUrl));
  }
  a.destroy();
  b.destroy();
  return { hal0: latency(hal0), bare: latency(bare) };
}

const MCP_CALLS = 1000;

async function mcpClient(url: string): Promise<Client> {
  const client = new Client({ name: "hal0-bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: AUTH } }));
  return client;
}

async function timedCall(client: Client): Promise<{ ms: number; text: string }> {
  const t0 = performance.now();
  const res = (await client.callTool({ name: "slot_list", arguments: { args: {} } })) as { isError?: boolean; content: Array<{ text: string }> };
  const ms = performance.now() - t0;
  if (res.isError) throw new Error(`slot_list over MCP failed: ${res.content[0]?.text}`);
  return { ms, text: res.content[0]!.text };
}

/**
 * slot_list through the SDK's client on one session, GET /api/slots with
 * keep-alive, and the same call to the bare SDK server, in turn call by call
 * (load hits all three alike). Each batch of 50 gives a p50 of each and their
 * ratios MCP/REST and MCP/bare SDK server (hal0's own share of the MCP path).
 */
async function mcpVsRest(url: string, floors: Floors): Promise<{ mcp: Latency; rest: Latency; sdk: Latency; canned: Latency; ratios: number[]; overSdk: number[] }> {
  const client = await mcpClient(`${url}/mcp/admin`);
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const { text } = await timedCall(client);
  const sdkClient = await mcpClient(floors.sdk);
  const cannedClient = await mcpClient(floors.canned);
  if ((await timedCall(sdkClient)).text !== text || (await timedCall(cannedClient)).text !== text) throw new Error("a floor server does not answer hal0's bytes");
  const m: number[] = [];
  const r: number[] = [];
  const s: number[] = [];
  const k: number[] = [];
  for (let i = 0; i < MCP_CALLS + 50; i++) {
    const a = await timedCall(client);
    const b = await timedGet(agent, `${url}/api/slots`);
    const c = await timedCall(sdkClient);
    const d = await timedCall(cannedClient);
    if (i < 50) continue;
    m.push(a.ms);
    r.push(b);
    s.push(c.ms);
    k.push(d.ms);
  }
  await Promise.all([client.close(), sdkClient.close(), cannedClient.close()]);
  agent.destroy();
  const per = MCP_CALLS / 20;
  const ratios: number[] = [];
  const overSdk: number[] = [];
  for (let i = 0; i + per <= m.length; i += per) {
    const mcp = percentile(m.slice(i, i + per), 0.5);
    ratios.push(mcp / percentile(r.slice(i, i + per), 0.5));
    overSdk.push(mcp / percentile(s.slice(i, i + per), 0.5));
  }
  return { mcp: latency(m, per), rest: latency(r, per), sdk: latency(s, per), canned: latency(k, per), ratios, overSdk };
}

/** "1.21× (IQR 1.15–1.30, n=20)": a median ratio with its spread. */
function ratioStat(xs: number[]): string {
  const q = quartiles(xs);
  return `${median(xs).toFixed(2)}× (IQR ${q.q1.toFixed(2)}–${q.q3.toFixed(2)}, n=${q.n})`;
}

function rssMb(pid: number): number {
  const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  return kb / 1024;
}

export async function startServe(config: string, state: string): Promise<{ child: ChildProcess; url: string }> {
  // Run as a person does (`hal0 serve`): the bin's own shebang line sets its V8 flags.
  const child = spawn(HAL0, ["serve", "--config", config, "--state", state, "--port", "0"], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  for (let i = 0; i < 300; i++) {
    const line = out.split("\n").find((l) => l.includes("hal0 serve listening"));
    if (line) return { child, url: JSON.parse(line).url.replace(/\/$/, "") };
    await sleep(50);
  }
  throw new Error(`hal0 serve did not start: ${out}`);
}

async function allHealthy(first: number): Promise<void> {
  for (let tries = 0; tries < 600; tries++) {
    const ok = await Promise.all(Array.from({ length: SLOTS }, (_, i) => fetch(`http://127.0.0.1:${first + i}/health`).then((r) => r.status === 200, () => false)));
    if (ok.every(Boolean)) return;
    await sleep(200);
  }
  throw new Error("the sweep did not bring 50 slots up");
}

export async function benchServe(): Promise<string[]> {
  const base = mkdtempSync(join(tmpdir(), "hal0-bench-serve-"));
  const config = join(base, "box");
  const state = join(base, "state");
  const first = (await freePortRange(SLOTS + 1)) + 1;
  writeBox(config, first);
  const { child, url } = await startServe(config, state);
  AUTH = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
  try {
    await allHealthy(first);
    await sleep(3000);
    const rssConverged = rssMb(child.pid!);
    const body = (await get(new Agent(), `${url}/api/slots`)).body;
    const floors = await startFloors(body, base);
    let rest: Awaited<ReturnType<typeof restVsBare>>;
    let mcp: Awaited<ReturnType<typeof mcpVsRest>>;
    try {
      rest = await restVsBare(`${url}/api/slots`, floors.rest);
      mcp = await mcpVsRest(url, floors);
    } finally {
      floors.stop();
    }
    await sleep(3000);
    const rss = rssMb(child.pid!);
    const idle = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    await sleep(1000);
    const nodeRss = rssMb(idle.pid!);
    idle.kill();
    const restP50 = median(rest.hal0.batches);
    summarize({
      measure: "GET /api/slots p50, 50 slots", hal0: stat(rest.hal0.batches, "ms", 2),
      anchor: `bare node:http, same bytes: ${stat(rest.bare.batches, "ms", 2)}`, target: `≤ ${REST_P50_TARGET_MS} ms`, pass: restP50 <= REST_P50_TARGET_MS,
    });
    const ratio = median(mcp.ratios);
    summarize({
      measure: "slot_list over MCP vs GET /api/slots", hal0: `${ratioStat(mcp.ratios)}: MCP ${median(mcp.mcp.batches).toFixed(2)} ms, REST ${median(mcp.rest.batches).toFixed(2)} ms`,
      anchor: `bare SDK server ${stat(mcp.sdk.batches, "ms", 2)}; SDK client alone ${median(mcp.canned.batches).toFixed(2)} ms`, target: `≤ ${MCP_RATIO_TARGET}×`, pass: ratio <= MCP_RATIO_TARGET,
    });
    // The same bound against the row's anchor: what hal0 adds to the SDK's own path (the bare SDK server answers the same bytes).
    summarize({
      measure: "slot_list over MCP vs the bare SDK server", hal0: `${ratioStat(mcp.overSdk)}: hal0 MCP ${median(mcp.mcp.batches).toFixed(2)} ms`,
      anchor: `bare SDK server ${stat(mcp.sdk.batches, "ms", 2)}`, target: `≤ ${MCP_RATIO_TARGET}×`, pass: median(mcp.overSdk) <= MCP_RATIO_TARGET,
    });
    const line = (name: string, l: Latency, note = "") => `  ${name.padEnd(20)} p50 ${stat(l.batches, "ms", 2)}   all: p50 ${l.p50.toFixed(2)} ms  p99 ${l.p99.toFixed(2)} ms${note}`;
    return [
      `GET /api/slots, 50 slots, ${REQUESTS} sequential keep-alive requests each, in turn (${(body.length / 1024).toFixed(1)} KiB reply; p50 = median of the ${BATCH}-request batches' p50s):`,
      line("hal0 serve", rest.hal0),
      line("bare node:http", rest.bare, "   (the same bytes, no work: the floor)"),
      `  → hal0 p50 ${restP50.toFixed(2)} ms, target ≤ ${REST_P50_TARGET_MS} ms: ${restP50 <= REST_P50_TARGET_MS ? "PASS" : "MISS"}`,
      `slot_list over MCP (the SDK's client, one session) vs GET /api/slots vs the floors, ${MCP_CALLS} calls each, in turn (p50 = median of 50-call batches' p50s):`,
      line("hal0 MCP", mcp.mcp),
      line("hal0 REST", mcp.rest),
      line("bare SDK server", mcp.sdk, "   (the same SDK and bytes, no hal0: the SDK's floor)"),
      line("canned replies", mcp.canned, "   (the SDK's client against fixed bytes, no server work: the client's floor)"),
      `  → MCP/REST ${ratioStat(mcp.ratios)}, target ≤ ${MCP_RATIO_TARGET}×: ${ratio <= MCP_RATIO_TARGET ? "PASS" : "MISS"}`,
      `  → hal0 MCP / bare SDK server (hal0's own share of the MCP path) ${ratioStat(mcp.overSdk)}, target ≤ ${MCP_RATIO_TARGET}×: ${median(mcp.overSdk) <= MCP_RATIO_TARGET ? "PASS" : "MISS"}`,
      `idle RSS of hal0 serve (sweep loop on, 50 slots running), converged and idle: ${rssConverged.toFixed(1)} MB — target ≤ ${RSS_TARGET_MB} MB: ${rssConverged <= RSS_TARGET_MB ? "PASS" : "MISS"}`,
      `  idle again 3 s after the ${REQUESTS + 100 + MCP_CALLS + 50} REST and ${MCP_CALLS + 51} MCP calls to hal0 above: ${rss.toFixed(1)} MB (${rss <= RSS_TARGET_MB ? "within" : "above"} the target)   an idle bare node: ${nodeRss.toFixed(1)} MB`,
    ];
  } finally {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
    await exec(process.execPath, [HAL0, "down", "--config", config, "--state", state]).catch(() => undefined);
  }
}
