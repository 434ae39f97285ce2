import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { agentTokenFor, httpCall, startTestServer, type TestServer } from "./harness.js";

/**
 * An MCP mount is its path, with or without a query string (some clients
 * add one, e.g. a tag of the connection): `/mcp/admin?client=x` is the
 * mount, and a path below it is not.
 */
let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => {
  await s.close();
});

describe("an MCP mount's URL", () => {
  it("takes a query string, with or without a slash before it; a path below the mount or a longer name is still route.not_found", async () => {
    for (const suffix of ["?client=x", "/?client=x", "/"]) {
      const client = new Client({ name: "hal0-test", version: "1.0.0" });
      const headers = { authorization: `Bearer ${agentTokenFor(s.url, "hermes__coder")}` };
      await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp/admin${suffix}`), { requestInit: { headers } }));
      expect((await client.listTools()).tools.length, suffix).toBeGreaterThan(10);
      await client.close();
    }
    for (const path of ["/mcp/admin/x?client=y", "/mcp/adminx", "/mcp/adminx?client=y"]) {
      const other = await httpCall(s.url, "POST", path, { body: {} });
      expect(other.status, path).toBe(404);
      expect(other.body.error.code, path).toBe("route.not_found");
    }
  });
});
