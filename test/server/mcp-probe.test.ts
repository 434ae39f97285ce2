import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { listRemoteTools } from "../../server/mcp-servers/probe.js";

/** A loopback HTTP server that is no MCP server: `handle` answers each request its own way. */
async function httpServer(handle: Parameters<typeof createServer>[1]): Promise<{ url: string; close: () => Promise<void> }> {
  const http: Server = createServer(handle);
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, close: () => new Promise<void>((resolve) => { http.closeAllConnections(); http.close(() => resolve()); }) };
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
});
