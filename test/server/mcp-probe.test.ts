import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { listRemoteTools, PROBE_DESCRIPTION_MAX, PROBE_PAGES_MAX, PROBE_REPLY_MAX, PROBE_TOOLS_MAX } from "../../server/mcp-servers/probe.js";

/** A loopback HTTP server that is no MCP server: `handle` answers each request its own way. */
async function httpServer(handle: Parameters<typeof createServer>[1]): Promise<{ url: string; close: () => Promise<void> }> {
  const http: Server = createServer(handle);
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, close: () => new Promise<void>((resolve) => { http.closeAllConnections(); http.close(() => resolve()); }) };
}

/** A loopback MCP server (JSON replies, no session) that answers initialize, and tools/list with `tools(cursor, res)`. */
async function mcpServer(tools: (message: { id: number; params?: { cursor?: string } }, res: import("node:http").ServerResponse) => void) {
  return httpServer(async (req, res) => {
    let body = "";
    for await (const chunk of req) body += chunk;
    if (req.method !== "POST") return res.writeHead(405).end();
    const message = JSON.parse(body) as { id?: number; method: string; params?: { protocolVersion?: string; cursor?: string } };
    if (message.id === undefined) return res.writeHead(202).end();
    if (message.method !== "tools/list") {
      return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: { protocolVersion: message.params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "t", version: "1" } } }));
    }
    tools(message as { id: number }, res);
  });
}

let server: { close: () => Promise<void> } | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("the tools/list probe of POST /api/mcp/{id}/test", () => {
  it("gives up on an sse server that opens its stream and never names an endpoint, within its timeout", async () => {
    const s = await httpServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write(": hello\n\n");
    });
    server = s;
    const started = performance.now();
    const probe = await listRemoteTools(s.url, "sse", 400);
    expect(performance.now() - started).toBeLessThan(3000);
    expect(probe).toMatchObject({ ok: false, tools: [] });
    expect(probe.error).toMatch(/400 ms/);
  }, 10_000);

  it("reports a server that does not speak MCP by the start of what it said, not all of it", async () => {
    const page = `<html>${"x".repeat(4 * 1024 * 1024)}</html>`;
    const s = await httpServer((_req, res) => res.writeHead(404, { "content-type": "text/html" }).end(page));
    server = s;
    const probe = await listRemoteTools(s.url, "streamable-http", 5000);
    expect(probe).toMatchObject({ ok: false, tools: [] });
    expect(probe.error).toContain("<html>xxx");
    expect(probe.error!.length).toBeLessThanOrEqual(1024);
  });

  it("cuts off a server that floods its reply instead of reading it whole", async () => {
    let sent = 0;
    const s = await mcpServer((message, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(`{"jsonrpc":"2.0","id":${message.id},"result":{"tools":[],"x":"`);
      const chunk = "a".repeat(1 << 16);
      const pump = (): void => {
        while (!res.destroyed && sent < 64 * PROBE_REPLY_MAX) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
      };
      pump();
    });
    server = s;
    const probe = await listRemoteTools(s.url, "streamable-http", 20_000);
    expect(probe).toMatchObject({ ok: false, tools: [] });
    expect(probe.error).toMatch(/more than 4194304 bytes/);
    expect(sent).toBeLessThan(8 * PROBE_REPLY_MAX);
  }, 30_000);

  it("fails a server that lists more tools than it may, page after page", async () => {
    const s = await mcpServer((message, res) => {
      const page = Number(message.params?.cursor ?? 0);
      const tools = Array.from({ length: 100 }, (_, i) => ({ name: `t${page}_${i}`, description: "d".repeat(10_000), inputSchema: { type: "object" } }));
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: { tools, nextCursor: String(page + 1) } }));
    });
    server = s;
    const probe = await listRemoteTools(s.url, "streamable-http", 20_000);
    expect(probe).toMatchObject({ ok: false, tools: [] });
    expect(probe.error).toBe(`the server lists more than ${PROBE_TOOLS_MAX} tools`);
  }, 30_000);

  it("fails a server that pages empty lists for ever", async () => {
    const s = await mcpServer((message, res) => {
      const page = Number(message.params?.cursor ?? 0);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: { tools: [], nextCursor: String(page + 1) } }));
    });
    server = s;
    const probe = await listRemoteTools(s.url, "streamable-http", 20_000);
    expect(probe).toMatchObject({ ok: false, tools: [] });
    expect(probe.error).toBe(`the server lists its tools over more than ${PROBE_PAGES_MAX} pages`);
  }, 30_000);

  it("cuts a tool's long description in what it reports", async () => {
    const s = await mcpServer((message, res) => {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: { tools: [{ name: "big", description: "D".repeat(100_000), inputSchema: { type: "object" } }] } }));
    });
    server = s;
    const probe = await listRemoteTools(s.url, "streamable-http", 20_000);
    expect(probe.ok).toBe(true);
    expect(probe.tools[0]!.description!.length).toBe(PROBE_DESCRIPTION_MAX);
    expect(probe.tools[0]!.description).toMatch(/… \(100000 characters\)$/);
  });
});
