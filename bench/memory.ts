import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { openDb } from "../server/db.js";
import { TokenStore } from "../server/identity/tokens.js";
import { EmbeddedEngine } from "../memory/embedded.js";
import { freePortRange } from "./apply.js";
import { startServe } from "./serve.js";

/**
 * `npm run bench` (memory part): hal0-memory's embedded engine holding
 * 10,000 facts. `memory_search` p50/p99 over MCP (the SDK's client, one
 * session, `hal0 serve` as a person runs it; target p50 ≤ 10 ms), beside
 * the same searches in process (the engine's floor) and a bare SDK server
 * answering the same bytes (the protocol's floor); then `memory_add`
 * throughput over MCP beside the engine's own.
 */
const FACTS = 10_000;
const SEARCHES = 1000;
const ADDS = 1000;
const TARGET_P50_MS = 10;

const WORDS = ("slot model profile stack runner llama server chat coder agent memory port gpu npu vulkan rocm quant context "
  + "embedding rerank vision whisper speech qwen gemma mistral phi deepseek llava box desk fan thermal power budget cache "
  + "prompt token batch flash attention offload layer split tensor kernel driver firmware update backup restore schedule").split(" ");

/** A deterministic stream of pseudo-random numbers (the same facts and queries every run). */
function prng(seed: number): () => number {
  let x = seed;
  return () => ((x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32);
}

function sentence(rand: () => number, words: number): string {
  const out = Array.from({ length: words }, () => WORDS[Math.floor(rand() * WORDS.length)]!);
  return `${out.join(" ")} ${Math.floor(rand() * 1e6)}.`;
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

async function timed(n: number, f: (i: number) => Promise<unknown>): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await f(i);
    ms.push(performance.now() - t0);
  }
  return ms;
}

/** A bare McpServer answering one tool with a fixed text: the SDK's own cost per call for a reply of this size. */
async function protocolFloor(reply: string, queries: string[]): Promise<number[]> {
  const server = new McpServer({ name: "floor", version: "1" });
  server.registerTool("search", { inputSchema: {} }, async () => ({ content: [{ type: "text", text: reply }] }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: true });
  await server.connect(transport);
  const http = createServer((req, res) => void transport.handleRequest(req, res)).listen(0, "127.0.0.1");
  await new Promise((r) => http.once("listening", r));
  const client = new Client({ name: "bench", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/`)));
  for (let i = 0; i < 50; i++) await client.callTool({ name: "search", arguments: {} });
  const ms = await timed(SEARCHES, (i) => client.callTool({ name: "search", arguments: { q: queries[i % queries.length] } }));
  await client.close();
  http.close();
  return ms;
}

export async function benchMemory(): Promise<string[]> {
  const base = mkdtempSync(join(tmpdir(), "hal0-bench-memory-"));
  const config = join(base, "box");
  const state = join(base, "state");
  mkdirSync(config, { recursive: true });
  const port = await freePortRange(1);
  writeFileSync(join(config, "hal0.toml"), `[server]\nport = ${port}\n[memory]\nengine = "embedded"\n`);
  const rand = prng(7);
  const queries = Array.from({ length: 200 }, () => `${WORDS[Math.floor(rand() * WORDS.length)]} ${WORDS[Math.floor(rand() * WORDS.length)]}`);

  // Seed 10,000 facts in process (the engine's own add rate is the anchor for add over MCP).
  const engine = new EmbeddedEngine({ stateDir: state });
  const t0 = performance.now();
  for (let i = 0; i < FACTS; i++) {
    await engine.add({ text: sentence(rand, 8 + Math.floor(rand() * 10)), dataset: i % 10 === 0 ? "private:bench" : "shared", tags: [`t${i % 17}`], metadata: { i }, source: "bench" });
  }
  const engineAddPerS = FACTS / ((performance.now() - t0) / 1000);
  const scope = { datasets: ["shared"], owner: "bench" };
  for (let i = 0; i < 50; i++) await engine.search({ query: queries[i]!, limit: 10, scope });
  const inProcess = await timed(SEARCHES, (i) => engine.search({ query: queries[i % queries.length]!, limit: 10, scope }));
  await engine.close();

  const { child, url } = await startServe(config, state);
  try {
    const client = new Client({ name: "hal0-bench", version: "1.0.0" });
    // The agent `bench`, authenticated by its own token (minted in the state folder's database, as `hal0 token create --agent bench` does).
    const db = openDb(state);
    const token = new TokenStore(db, state).mint("agent", "bench").token;
    db.close();
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp/memory`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    let reply = "";
    for (let i = 0; i < 50; i++) {
      const res = (await client.callTool({ name: "memory_search", arguments: { query: queries[i]! } })) as { isError?: boolean; content: Array<{ text: string }> };
      if (res.isError) throw new Error(`memory_search failed: ${res.content[0]?.text}`);
      reply = res.content[0]!.text;
    }
    const hits = (JSON.parse(reply) as { results: unknown[] }).results.length;
    const overMcp = await timed(SEARCHES, (i) => client.callTool({ name: "memory_search", arguments: { query: queries[i % queries.length]! } }));
    const addStart = performance.now();
    await timed(ADDS, () => client.callTool({ name: "memory_add", arguments: { text: sentence(rand, 12), tags: ["bench"] } }));
    const mcpAddPerS = ADDS / ((performance.now() - addStart) / 1000);
    await client.close();
    const floor = await protocolFloor(reply, queries);
    const p50 = pct(overMcp, 0.5);
    return [
      `memory_search over 10,000 facts (embedded engine, ${SEARCHES} sequential calls, limit 10, ${(reply.length / 1024).toFixed(1)} KiB reply, ${hits} hits):`,
      `  over MCP (hal0 serve, the SDK's client)  p50 ${p50.toFixed(2)} ms  p99 ${pct(overMcp, 0.99).toFixed(2)} ms   target p50 ≤ ${TARGET_P50_MS} ms: ${p50 <= TARGET_P50_MS ? "PASS" : "MISS"}`,
      `  the engine in process (its floor)        p50 ${pct(inProcess, 0.5).toFixed(2)} ms  p99 ${pct(inProcess, 0.99).toFixed(2)} ms`,
      `  a bare SDK server, same bytes (the protocol's floor)  p50 ${pct(floor, 0.5).toFixed(2)} ms  p99 ${pct(floor, 0.99).toFixed(2)} ms`,
      `memory_add throughput: over MCP ${mcpAddPerS.toFixed(0)}/s (sequential, one session)   the engine in process ${engineAddPerS.toFixed(0)}/s`,
    ];
  } finally {
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await exited;
    rmSync(base, { recursive: true, force: true });
  }
}
