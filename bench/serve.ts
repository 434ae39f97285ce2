import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { packageRoot } from "../reconciler/package-root.js";
import { freePortRange, writeBox } from "./apply.js";

/**
 * `npm run bench` (server part): `hal0 serve` on a 50-slot box of fake
 * runners, its reconcile loop converged. GET /api/slots p50/p99 over 2,000
 * sequential keep-alive requests, beside the same bytes from a bare
 * node:http server (the floor); then idle RSS beside a bare idle node.
 */
const SLOTS = 50;
const REQUESTS = 2000;
const RSS_TARGET_MB = 120;
const HAL0 = join(packageRoot(), "bin/hal0.js");
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

async function latencies(url: string): Promise<{ p50: number; p99: number; body: Buffer }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let body: Buffer = Buffer.alloc(0);
  for (let i = 0; i < 100; i++) body = (await get(agent, url)).body;
  const ms: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const r = await get(agent, url);
    if (r.status !== 200) throw new Error(`GET ${url}: ${r.status} ${r.body.toString().slice(0, 200)}`);
    ms.push(r.ms);
  }
  agent.destroy();
  ms.sort((a, b) => a - b);
  return { p50: ms[Math.floor(REQUESTS * 0.5)]!, p99: ms[Math.floor(REQUESTS * 0.99)]!, body };
}

const MCP_CALLS = 1000;

/** p50 of slot_list through the MCP SDK's client and of GET /api/slots with keep-alive, interleaved so load hits both alike. */
async function mcpVsRest(url: string): Promise<{ mcp: number; rest: number }> {
  const client = new Client({ name: "hal0-bench", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp/admin`), { requestInit: { headers: AUTH } }));
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const m: number[] = [];
  const r: number[] = [];
  for (let i = 0; i < MCP_CALLS + 50; i++) {
    let t0 = performance.now();
    const res = (await client.callTool({ name: "slot_list", arguments: { args: {} } })) as { isError?: boolean };
    if (res.isError) throw new Error("slot_list over MCP failed");
    if (i >= 50) m.push(performance.now() - t0);
    t0 = performance.now();
    await get(agent, `${url}/api/slots`);
    if (i >= 50) r.push(performance.now() - t0);
  }
  await client.close();
  agent.destroy();
  const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return { mcp: p50(m), rest: p50(r) };
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
    const hal0 = await latencies(`${url}/api/slots`);
    const mcp = await mcpVsRest(url);
    const bare = createServer((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(hal0.body)).listen(0, "127.0.0.1");
    await new Promise((r) => bare.once("listening", r));
    const floor = await latencies(`http://127.0.0.1:${(bare.address() as AddressInfo).port}/`);
    bare.close();
    await sleep(3000);
    const rss = rssMb(child.pid!);
    const idle = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    await sleep(1000);
    const nodeRss = rssMb(idle.pid!);
    idle.kill();
    return [
      `GET /api/slots, 50 slots, ${REQUESTS} sequential keep-alive requests (${(hal0.body.length / 1024).toFixed(1)} KiB reply):`,
      `  hal0 serve      p50 ${hal0.p50.toFixed(2)} ms  p99 ${hal0.p99.toFixed(2)} ms`,
      `  bare node:http  p50 ${floor.p50.toFixed(2)} ms  p99 ${floor.p99.toFixed(2)} ms   (the same bytes, no work: the floor)`,
      `slot_list over MCP (the SDK's client, one session) vs GET /api/slots, ${MCP_CALLS} calls each, alternating:`,
      `  MCP p50 ${mcp.mcp.toFixed(2)} ms   REST p50 ${mcp.rest.toFixed(2)} ms   → ${(mcp.mcp / mcp.rest).toFixed(2)}× (target ≤ 1.5×: ${mcp.mcp / mcp.rest <= 1.5 ? "PASS" : "MISS"})`,
      `idle RSS of hal0 serve (sweep loop on, 50 slots running), converged and idle: ${rssConverged.toFixed(1)} MB — target ≤ ${RSS_TARGET_MB} MB: ${rssConverged <= RSS_TARGET_MB ? "PASS" : "MISS"}`,
      `  idle again 3 s after the 4,000 REST and 1,050 MCP calls above: ${rss.toFixed(1)} MB (${rss <= RSS_TARGET_MB ? "within" : "above"} the target)   an idle bare node: ${nodeRss.toFixed(1)} MB`,
    ];
  } finally {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
    await exec(process.execPath, [HAL0, "down", "--config", config, "--state", state]).catch(() => undefined);
  }
}
