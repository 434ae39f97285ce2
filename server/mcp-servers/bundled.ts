import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { Caller } from "../route.js";

/** A server hal0 itself serves (hal0-admin, hal0-memory): its mount and how to make one for a caller. */
export interface BundledServer {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  /** Its mount, e.g. `/mcp/admin`. */
  readonly path: string;
  readonly serverFor: (caller: Caller) => Promise<McpServer>;
  /** Whether it is mounted now (hal0-agents: `[bridge] enabled`); absent: always. A server that is off is not listed. */
  readonly enabled?: () => boolean;
}

export interface BundledView {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly bundled: true;
  readonly transport: "streamable-http";
  readonly url: string;
  readonly enabled: true;
  readonly state: "running";
  readonly tools: ReadonlyArray<{ readonly name: string; readonly description?: string }>;
  readonly tools_count: number;
  readonly resources: ReadonlyArray<{ readonly uri: string; readonly name: string }>;
  readonly prompts: ReadonlyArray<{ readonly name: string }>;
}

/**
 * A bundled server introspected live, as seed 001 asks: the very server a
 * client of this caller would get, connected in process to the SDK's client
 * over a linked in-memory pair, asked list_tools / list_resources /
 * list_prompts (the latter two only when it declares them).
 */
export async function introspect(b: BundledServer, caller: Caller, baseUrl: string): Promise<BundledView> {
  const server = await b.serverFor(caller);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "hal0-introspect", version: "1.0.0" });
  try {
    await client.connect(clientSide);
    const caps = client.getServerCapabilities() ?? {};
    const tools = (await client.listTools()).tools.map((t) => ({ name: t.name, ...(t.description ? { description: t.description } : {}) }));
    const resources = caps.resources ? (await client.listResources()).resources.map((r) => ({ uri: r.uri, name: r.name })) : [];
    const prompts = caps.prompts ? (await client.listPrompts()).prompts.map((p) => ({ name: p.name })) : [];
    return {
      id: b.id, name: b.name, description: b.description, bundled: true, transport: "streamable-http", url: `${baseUrl.replace(/\/+$/, "")}${b.path}`,
      enabled: true, state: "running", tools: tools.sort((x, y) => (x.name < y.name ? -1 : 1)), tools_count: tools.length, resources, prompts,
    };
  } finally {
    await client.close().catch(() => undefined);
    await server.close().catch(() => undefined);
  }
}
