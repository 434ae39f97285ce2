import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

/**
 * The servers the serve bench measures hal0 against, each answering the
 * same bytes hal0 answered: a bare node:http server (GET), a bare server of
 * the same MCP SDK and canned JSON-RPC replies (slot_list). They run in a
 * process of their own, as `hal0 serve` does, so a floor is not spared the
 * hop from the client's process to the server's that hal0 pays.
 */
export interface Floors {
  /** GET: the bytes, no work. */
  readonly rest: string;
  /** The MCP endpoint of the bare SDK server. */
  readonly sdk: string;
  /** The MCP endpoint of the canned replies. */
  readonly canned: string;
  stop(): void;
}

/** Starts the floors' process on `body` (written under `dir`) and resolves once they listen. */
export async function startFloors(body: Buffer, dir: string): Promise<Floors> {
  const file = join(dir, "floor-body.json");
  writeFileSync(file, body);
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), file], { stdio: ["ignore", "pipe", "inherit"] });
  const urls = await new Promise<Omit<Floors, "stop">>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (c: Buffer) => {
      out += c.toString();
      if (out.includes("\n")) resolve(JSON.parse(out.split("\n")[0]!) as Omit<Floors, "stop">);
    });
    child.once("exit", (code) => reject(new Error(`the floors' process exited (${code}) before it listened`)));
  });
  return { ...urls, stop: () => void child.kill("SIGTERM") };
}

async function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const http = createServer(handler).listen(0, "127.0.0.1");
  await new Promise((r) => http.once("listening", r));
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
}

/**
 * A bare MCP server of the same SDK, written as its README writes one: the
 * node Streamable HTTP transport, one session, JSON replies (as hal0 serves
 * them), one tool `slot_list` that answers `text` (the bytes hal0's
 * slot_list answered). No auth, no policy, no audit: the SDK's own floor.
 */
async function bareMcp(text: string): Promise<string> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  return `${await listen(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    const sid = req.headers["mcp-session-id"];
    let transport = typeof sid === "string" ? transports.get(sid) : undefined;
    if (!transport) {
      const server = new McpServer({ name: "bare", version: "1.0.0" }, { capabilities: { tools: {} } });
      server.registerTool("slot_list", { description: "the roster", inputSchema: { args: z.looseObject({}).optional() } }, async () => ({ content: [{ type: "text", text }] }));
      const made: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: true, onsessioninitialized: (id) => void transports.set(id, made) });
      await server.connect(made);
      transport = made;
    }
    await transport.handleRequest(req, res, body);
  })}/mcp`;
}

/**
 * Canned JSON-RPC replies over node:http (an initialize result, 202 for
 * notifications, `text` as every tool call's result): what the SDK's client
 * alone costs a call of this size, with no server work at all.
 */
async function cannedMcp(text: string): Promise<string> {
  return `${await listen(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const msg = chunks.length > 0 ? (JSON.parse(Buffer.concat(chunks).toString("utf8")) as { id?: number; method: string; params?: { protocolVersion?: string } }) : undefined;
    if (msg?.id === undefined) return void res.writeHead(202).end();
    const result = msg.method === "initialize"
      ? { protocolVersion: msg.params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "canned", version: "1.0.0" } }
      : { content: [{ type: "text", text }] };
    res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "canned" }).end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result }));
  })}/mcp`;
}

/** Run as its own process (startFloors): serves the body in argv[2] and prints the three URLs as one JSON line. */
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const body = readFileSync(process.argv[2]!);
  const text = body.toString("utf8");
  const rest = await listen((_req, res) => res.writeHead(200, { "content-type": "application/json" }).end(body));
  process.stdout.write(`${JSON.stringify({ rest, sdk: await bareMcp(text), canned: await cannedMcp(text) })}\n`);
}

