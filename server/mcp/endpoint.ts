import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { readRawBody, type H3Event } from "h3";
import type { Dispatcher } from "../dispatch.js";
import { ApiError, envelope } from "../errors.js";
import { callerOf, checkGate, type GateConfig } from "../gate.js";
import { adminServer } from "./admin.js";
import { buildCatalog, type ToolDef } from "./catalog.js";

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  lastSeen: number;
}

/** Sessions idle this long are closed (a client that vanished without DELETE). */
const IDLE_MS = 30 * 60_000;

/**
 * `/mcp/admin`: the Streamable-HTTP endpoint, stateful (one transport and
 * one McpServer per `mcp-session-id`, made at `initialize` for that
 * caller's policy). The catalog is built once, at startup: an inconsistent
 * one (`mcp.catalog_invalid`) stops the server from starting.
 */
export class AdminEndpoint {
  readonly catalog: readonly ToolDef[];
  private readonly sessions = new Map<string, Session>();

  /** `catalog` comes from `buildCatalog(routes)`, built before anything else opens so a bad one fails fast. */
  constructor(private readonly d: Dispatcher, private readonly gate: () => GateConfig, private readonly version: string, catalog?: readonly ToolDef[]) {
    this.catalog = catalog ?? buildCatalog(d.routes);
  }

  async handle(event: H3Event): Promise<void> {
    const { req, res } = event.node;
    (event as unknown as { _handled: boolean })._handled = true;
    try {
      checkGate(req.headers, this.gate());
    } catch (err) {
      return sendJson(res, (err as ApiError).status, envelope(err as ApiError));
    }
    this.closeIdle();
    const sid = [req.headers["mcp-session-id"]].flat()[0];
    const body = req.method === "POST" ? parseBody(await readRawBody(event, "utf8")) : undefined;
    if (body === INVALID) return sendJson(res, 400, rpcError(-32700, "Parse error: the body is not JSON"));
    const known = sid ? this.sessions.get(sid) : undefined;
    if (known) {
      known.lastSeen = Date.now();
      return known.transport.handleRequest(req, res, body);
    }
    if (sid) return sendJson(res, 404, rpcError(-32001, `Session not found: ${sid}`));
    if (req.method !== "POST" || !isInitializeRequest(body)) return sendJson(res, 400, rpcError(-32000, "Bad Request: no valid mcp-session-id; send initialize first"));
    const model = await this.d.box.model();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void this.sessions.set(id, { transport, lastSeen: Date.now() }),
    });
    transport.onclose = () => {
      if (transport.sessionId) this.sessions.delete(transport.sessionId);
    };
    await adminServer(this.d, this.catalog, model.policy, callerOf(req.headers, "mcp"), this.version).connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /** Open sessions (for tests and status). */
  get sessionCount(): number {
    return this.sessions.size;
  }

  async close(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => s.transport.close().catch(() => undefined)));
    this.sessions.clear();
  }

  private closeIdle(): void {
    const now = Date.now();
    for (const [id, s] of this.sessions) {
      if (now - s.lastSeen > IDLE_MS) {
        this.sessions.delete(id);
        void s.transport.close().catch(() => undefined);
      }
    }
  }
}

const INVALID = Symbol("invalid");

function parseBody(text: string | undefined): unknown {
  if (text === undefined || text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return INVALID;
  }
}

function rpcError(code: number, message: string) {
  return { jsonrpc: "2.0", error: { code, message }, id: null };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}
