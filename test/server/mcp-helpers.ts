import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { agentTokenFor } from "./harness.js";

/** The credential for `who`: an agent name (its token is minted), `{token}` as given, or nothing (anonymous). */
function authHeaders(url: string, who: string | { token: string } | undefined): Record<string, string> {
  if (who === undefined) return {};
  return { authorization: `Bearer ${typeof who === "string" ? agentTokenFor(url, who) : who.token}` };
}

/** The MCP SDK's own client, connected to `<url>/mcp/admin` over HTTP as agent `who` (its bearer token), or anonymous. */
export async function adminClient(url: string, who?: string | { token: string }): Promise<Client> {
  const client = new Client({ name: "hal0-test", version: "1.0.0" });
  const headers: Record<string, string> = authHeaders(url, who);
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp/admin`), { requestInit: { headers } }));
  return client;
}

/** Calls a tool with `{args}` and returns its structured result (or the parsed text) and isError. */
export async function callTool(client: Client, name: string, args: Record<string, unknown>): Promise<{ isError: boolean; body: any }> {
  const res = (await client.callTool({ name, arguments: { args } })) as { isError?: boolean; structuredContent?: unknown; content: Array<{ type: string; text?: string }> };
  const text = res.content[0]?.text ?? "";
  let body: unknown = res.structuredContent;
  if (body === undefined) {
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
  }
  return { isError: res.isError === true, body };
}

/** The SDK's client on `<url>/mcp/memory` as agent `who` (or anonymous), with `X-hal0-Private: 1` when `private`. */
export async function memoryClient(url: string, who?: string | { token: string }, options: { private?: boolean | string } = {}): Promise<Client> {
  const client = new Client({ name: "hal0-test", version: "1.0.0" });
  const flag = typeof options.private === "string" ? options.private : options.private ? "1" : undefined;
  const headers: Record<string, string> = { ...authHeaders(url, who), ...(flag !== undefined ? { "X-hal0-Private": flag } : {}) };
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp/memory`), { requestInit: { headers } }));
  return client;
}

/** Calls a hal0-memory tool (typed arguments, no `{args}` wrapper): the parsed reply and isError. */
export async function callMemory(client: Client, name: string, args: Record<string, unknown> = {}): Promise<{ isError: boolean; body: any }> {
  const res = (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: Array<{ type: string; text?: string }> };
  const text = res.content[0]?.text ?? "";
  return { isError: res.isError === true, body: JSON.parse(text) };
}
