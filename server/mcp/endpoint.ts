import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isInitializeRequest, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import type { H3Event } from "h3";
import { bodyText, maxBodyBytes, readBodyLimited, requireJsonBody } from "../body.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { ApiError, envelope } from "../errors.js";
import { callerOf, checkGate, checkPrivateHeader, provenCaller, type GateConfig } from "../gate.js";
import { identify, identityLabel, requireScope, sameIdentity, type Authenticator, type Identity } from "../identity/identify.js";
import type { Scope } from "../identity/tokens.js";
import type { Caller } from "../route.js";
import { trackEventStream } from "../sse.js";
import { syncTools } from "./policy-sync.js";
import type { CompiledPolicy } from "../../compiler/index.js";

type Transport = WebStandardStreamableHTTPServerTransport;

interface Session {
  readonly transport: Transport;
  /** The session's own server: its tools follow policy.toml (policy-sync.ts). */
  readonly server: McpServer;
  /** The identity that opened the session: every later request on it must prove the same one. */
  readonly identity: Identity;
  /**
   * When it was last used, on the monotonic clock: a step of the wall clock
   * (NTP, `date -s`) neither closes every session as idle nor keeps idle
   * ones for as long, nor turns which one is least recently used around.
   */
  lastSeen: number;
}

/** What a mount may add to the plain scope check (hal0-agents: mounted only while `[bridge] enabled`; operators and bridge tokens only). */
export interface EndpointOptions {
  /** Read per request; false: the mount answers 404 `route.not_found` and closes every open session. */
  readonly mounted?: () => boolean | Promise<boolean>;
  /** The mount's path, for that 404's message. */
  readonly path?: string;
  /** Replaces `requireScope(identity, scope)`: throws the refusal for an identity that may not open or use a session. */
  readonly admit?: (identity: Identity) => void;
}

/** The methods of a Streamable-HTTP MCP endpoint. */
const MCP_METHODS: readonly string[] = ["DELETE", "GET", "POST"];

/** Sessions idle this long are closed (a client that vanished without DELETE). */
const IDLE_MS = 30 * 60_000;

/**
 * Open sessions one identity may hold on one endpoint. Each costs its own
 * McpServer (~150 KiB with the admin tools, measured), so a client that
 * reconnects in a loop without DELETE would otherwise grow the server for
 * `IDLE_MS`; past this, its least recently used session is closed (its next
 * request is 404 "Session not found", and the client initializes again, as
 * the protocol has it). Per identity, so no caller can close another's;
 * callers without a token hold no session at all (`serveOnce`).
 */
export const SESSIONS_PER_IDENTITY = 32;

/**
 * One Streamable-HTTP MCP endpoint (`/mcp/admin`, `/mcp/memory`), stateful:
 * one transport and one McpServer per `mcp-session-id`, made at
 * `initialize` by `serverFor` for that caller (its policy decides the tools);
 * an anonymous caller's requests, one each (`serveOnce`).
 */
export class McpEndpoint {
  private readonly sessions = new Map<string, Session>();

  constructor(
    private readonly gate: () => GateConfig,
    private readonly auth: Authenticator,
    /** `mcp:admin` or `mcp:memory`: what a token must reach to open a session here. */
    private readonly scope: Scope,
    private readonly serverFor: (caller: Caller, identity: Identity) => Promise<McpServer>,
    /** Records a request refused before any tool ran (identity, scope, session mismatch, a body refused). */
    private readonly onRefused?: (caller: Caller, err: ApiError) => void,
    /** The largest body a POST may carry, in bytes (`[server] max_body_kb` of the tree in force). */
    private readonly maxBody: () => number = () => maxBodyBytes(undefined),
    private readonly options: EndpointOptions = {},
  ) {}

  /** Serves one request; resolves to the label of the identity it ran as (for the request log). */
  async handle(event: H3Event): Promise<string> {
    const { req, res } = event.node;
    (event as unknown as { _handled: boolean })._handled = true;
    let identity: Identity | undefined;
    try {
      checkGate(req.headers, this.gate());
      checkPrivateHeader(req.headers);
      if (this.options.mounted && !(await this.options.mounted())) {
        await this.close();
        sendJson(res, 404, envelope(new ApiError("route.not_found", `no route for ${req.method} ${this.options.path ?? "this MCP mount"}: it is turned off`)));
        return "unmounted";
      }
      // The protocol's three methods only (Streamable HTTP): a HEAD, OPTIONS or PUT is refused as a REST path refuses a
      // method it does not take, not told to send initialize first.
      if (!MCP_METHODS.includes(req.method ?? "")) {
        const err = new ApiError("route.method_not_allowed", `${req.method} is not allowed on ${this.options.path ?? "an MCP endpoint"}: it takes POST (JSON-RPC), GET (the session's event stream) and DELETE (ending the session)`, { allowed: [...MCP_METHODS] });
        res.writeHead(err.status, { "content-type": "application/json", allow: MCP_METHODS.join(", ") }).end(JSON.stringify(envelope(err)));
        return "refused";
      }
      identity = identify(req.headers, this.auth, req.socket.remoteAddress);
      // The web page's cookie is a browser's credential: a request it authenticates carries the page's
      // CSRF token and comes from the page's origin (REST checks both). MCP has neither, and a session
      // is an operator, whose calls run at once: an MCP client sends a bearer token.
      if (identity.by === "session") throw new ApiError("auth.csrf", "the web page's session cookie is not a credential on /mcp: an MCP client sends Authorization: Bearer hal0_…");
      if (this.options.admit) this.options.admit(identity);
      else requireScope(identity, this.scope);
    } catch (err) {
      const api = err as ApiError;
      // The audit row names who the credential proved, when it proved anyone (a scope refused, a spoofed X-hal0-Agent).
      const anonymous: Caller = { kind: "anonymous", agent: "anonymous", private: false, via: "mcp", peer: req.socket.remoteAddress };
      this.onRefused?.(identity ? callerOf(identity, req.headers, "mcp", req.socket.remoteAddress) : provenCaller(anonymous, api), api);
      sendJson(res, api.status, envelope(api));
      return "refused";
    }
    await this.serve(event, identity);
    return identityLabel(identity);
  }

  private async serve(event: H3Event, identity: Identity): Promise<void> {
    const { req, res } = event.node;
    this.closeIdle();
    const sid = [req.headers["mcp-session-id"]].flat()[0];
    let text: string | undefined;
    if (req.method === "POST") {
      // The REST routes' own reader: JSON only (415), nothing read past the limit (413); the caller is the one identified above.
      try {
        requireJsonBody(req.headers);
        const bytes = await readBodyLimited(event, this.maxBody());
        text = bytes && bodyText(bytes);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        this.onRefused?.(callerOf(identity, req.headers, "mcp", req.socket.remoteAddress), err);
        // Refused with the body (or its rest) unread: close rather than drain it for a next request.
        res.writeHead(err.status, { "content-type": "application/json", connection: "close" }).end(JSON.stringify(envelope(err)));
        return;
      }
    }
    const body = parseBody(text);
    if (body === INVALID) return sendJson(res, 400, rpcError(-32700, "Parse error: the body is not JSON"));
    const invalid = body === undefined ? undefined : invalidMessage(body);
    if (invalid) return sendJson(res, 400, rpcError(-32600, `Invalid Request: ${invalid}`));
    const known = sid ? this.sessions.get(sid) : undefined;
    if (known) {
      if (!sameIdentity(known.identity, identity)) {
        const opener = identityLabel(known.identity);
        const asWho = identityLabel(identity) === opener ? `with another token of ${opener} (rotated, or admitted again)` : `as ${identityLabel(identity)}`;
        const err = new ApiError("auth.identity_mismatch", `this MCP session was opened by ${opener}'s token; a request on it ${asWho} is refused: open a new session`, { session: opener, identity: identityLabel(identity) });
        this.onRefused?.(callerOf(identity, req.headers, "mcp", req.socket.remoteAddress), err);
        return sendJson(res, err.status, envelope(err));
      }
      known.lastSeen = performance.now();
      // policy.toml may have moved since the last request: the tools are listed and refused as it says now.
      await syncTools(known.server);
      return relay(known.transport, req, res, text, body);
    }
    if (sid) return sendJson(res, 404, rpcError(-32001, `Session not found: ${sid}`));
    if (identity.kind === "anonymous") return this.serveOnce(event, identity, text, body);
    if (req.method !== "POST" || !isInitializeRequest(body)) return sendJson(res, 400, rpcError(-32000, "Bad Request: no valid mcp-session-id; send initialize first"));
    const server = await this.serverFor(callerOf(identity, req.headers, "mcp", req.socket.remoteAddress), identity);
    const transport: Transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      // One JSON reply per request: hal0's tools neither stream nor notify mid-call, and SSE framing costs every call.
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        this.evictBeyondLimit(identity);
        this.sessions.set(id, { transport, server, identity, lastSeen: performance.now() });
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) this.sessions.delete(transport.sessionId);
    };
    await server.connect(transport);
    await relay(transport, req, res, text, body);
  }

  /**
   * A caller without a token holds no session: nothing tells two of them
   * apart, so sessions of theirs would be one identity's, each able to close
   * another's (the limit) or use one whose id it learned. Each of its POSTs
   * is served on its own, by a server made for it and closed after it (the
   * protocol's stateless mode: no `mcp-session-id`, so no event stream and
   * nothing to DELETE: 405).
   */
  private async serveOnce(event: H3Event, identity: Identity, text: string | undefined, body: unknown): Promise<void> {
    const { req, res } = event.node;
    if (req.method !== "POST") {
      res.writeHead(405, { "content-type": "application/json", allow: "POST" }).end(JSON.stringify(rpcError(-32000, `Method not allowed: a caller without a token holds no session, so it has no event stream (GET) and nothing to end (DELETE); send Authorization: Bearer <token> for a session`)));
      return;
    }
    const server = await this.serverFor(callerOf(identity, req.headers, "mcp", req.socket.remoteAddress), identity);
    const transport: Transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    try {
      await relay(transport, req, res, text, body);
    } finally {
      void server.close().catch(() => undefined);
    }
  }

  /** Open sessions (for tests and status). */
  get sessionCount(): number {
    return this.sessions.size;
  }

  /** POST replies the SDK still holds across sessions (for the leak test; the standalone GET stream is not one). */
  heldStreams(): number {
    let n = 0;
    for (const s of this.sessions.values()) {
      const streams = (s.transport as unknown as { _streamMapping?: Map<unknown, { resolveJson?: unknown }> })._streamMapping;
      for (const stream of streams?.values() ?? []) if (stream.resolveJson) n++;
    }
    return n;
  }

  /**
   * Brings every open session's tools in step with `policy` (a committed change), telling each client whose list changed.
   * A session whose token was revoked since (or rotated) is closed instead: its event stream ends, and it is told nothing more.
   */
  async syncTools(policy: CompiledPolicy): Promise<void> {
    for (const [id, s] of this.sessions) if (!this.stillLive(s.identity)) this.drop(id, s);
    await Promise.all([...this.sessions.values()].map((s) => syncTools(s.server, policy)));
  }

  /** Whether the token that opened a session is still live (anonymous and auth-off sessions have none). */
  private stillLive(identity: Identity): boolean {
    if (identity.tokenId === undefined) return true;
    const token = this.auth.tokens.byId(identity.tokenId);
    return token !== undefined && token.revoked_at === null;
  }

  async close(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => s.transport.close().catch(() => undefined)));
    this.sessions.clear();
  }

  /** Makes room for one more session of `identity`: closes its least recently used ones beyond `SESSIONS_PER_IDENTITY - 1`. */
  private evictBeyondLimit(identity: Identity): void {
    const own = [...this.sessions].filter(([, s]) => sameIdentity(s.identity, identity));
    if (own.length < SESSIONS_PER_IDENTITY) return;
    own.sort(([, a], [, b]) => a.lastSeen - b.lastSeen);
    for (const [id, s] of own.slice(0, own.length - SESSIONS_PER_IDENTITY + 1)) this.drop(id, s);
  }

  /** Forgets a session and closes its transport (and with it its McpServer). */
  private drop(id: string, session: Session): void {
    this.sessions.delete(id);
    void session.transport.close().catch(() => undefined);
  }

  private closeIdle(): void {
    const now = performance.now();
    for (const [id, s] of this.sessions) {
      if (now - s.lastSeen > IDLE_MS) this.drop(id, s);
    }
  }
}

/**
 * Works around the SDK (1.32) in JSON-response mode: it never deletes a
 * POST's stream entry once the JSON reply is sent, so every call's reply
 * stayed reachable (~17 KiB per slot_list). An entry no pending request
 * maps to has been answered; drop it. A test holds the map empty.
 */
function releaseAnswered(transport: Transport): void {
  const inner = transport as unknown as { _streamMapping?: Map<string, { resolveJson?: unknown }>; _requestToStreamMapping?: Map<unknown, string> };
  const streams = inner._streamMapping;
  if (!streams || !inner._requestToStreamMapping) return;
  const pending = new Set(inner._requestToStreamMapping.values());
  for (const [id, stream] of streams) if (stream.resolveJson && !pending.has(id)) streams.delete(id);
}

/**
 * One request through the web-standard transport: a `Request` made from the
 * node request and the body already read, the `Response` written back
 * (streamed, for the GET event stream). Cheaper than the SDK's node
 * wrapper, which converts every request and reply through @hono/node-server.
 */
async function relay(transport: Transport, req: IncomingMessage, res: ServerResponse, text: string | undefined, body: unknown): Promise<void> {
  const headers = new Headers();
  for (const k of RELAYED_HEADERS) {
    const v = req.headers[k];
    if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
  }
  const url = `http://${req.headers.host ?? "localhost"}${req.url ?? "/"}`;
  // A parsed body is handed over as is: the transport then reads only the method, the URL and the headers, so a
  // plain object with those stands in for a `Request` (building one, with its body stream and abort signal, cost
  // more than the rest of the relay). Without a parsed body the transport reads the body: a real `Request`.
  const request = body === undefined ? new Request(url, { method: req.method, headers, body: text }) : ({ method: req.method, url, headers } as Request);
  const response = await transport.handleRequest(request, body === undefined ? {} : { parsedBody: body });
  releaseAnswered(transport);
  const replyHeaders = Object.fromEntries(response.headers);
  if (!response.body) return void res.writeHead(response.status, replyHeaders).end();
  if (!replyHeaders["content-type"]?.startsWith("text/event-stream")) {
    // A JSON reply is one string: read it whole (web-stream chunk pumping costs more than the call).
    const text = await response.text();
    // A batch is answered with an array (JSON-RPC 2.0 §6), however many of its messages are requests: the SDK sends
    // the lone response of a batch of one request (the rest notifications) as a bare object.
    const reply = Array.isArray(body) && response.status === 200 && text.startsWith("{") ? `[${text}]` : text;
    return void res.writeHead(response.status, { ...replyHeaders, ...(reply === text ? {} : { "content-length": String(Buffer.byteLength(reply)) }) }).end(reply);
  }
  res.writeHead(response.status, replyHeaders);
  res.flushHeaders(); // the client sees the stream open now, not at its first event (the SDK's keep-alive)
  const reader = response.body.getReader();
  const cancel = () => void reader.cancel().catch(() => undefined);
  res.once("close", cancel);
  // hal0 serve's shutdown ends the stream (server/sse.ts): the reader is cancelled, the loop ends the reply.
  const untrack = trackEventStream(res, cancel);
  try {
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      if (!res.writableEnded) res.write(value);
    }
  } finally {
    untrack();
  }
  res.end();
}

/** What the transport reads of a request (the gate and the identity were taken from the node request already; no credential is passed on). */
const RELAYED_HEADERS = ["accept", "content-type", "host", "mcp-session-id", "mcp-protocol-version", "last-event-id"] as const;

const INVALID = Symbol("invalid");

function parseBody(text: string | undefined): unknown {
  if (text === undefined || text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return INVALID;
  }
}

/**
 * Why a POST's JSON is not a JSON-RPC 2.0 message (or a batch of them) as the
 * SDK reads one, else undefined. JSON-RPC answers that -32600 Invalid
 * Request; the SDK's transport answered it -32700 Parse error, as if the
 * body were not JSON. An id must be a string or an integer (MCP: never null).
 */
function invalidMessage(body: unknown): string | undefined {
  if (Array.isArray(body) && body.length === 0) return "an empty batch";
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  for (const [i, m] of messages.entries()) {
    if (JSONRPCMessageSchema.safeParse(m).success) continue;
    const where = Array.isArray(body) ? `message ${i} of the batch: ` : "";
    return `${where}${whyNotMessage(m)}`;
  }
  return undefined;
}

function whyNotMessage(m: unknown): string {
  if (typeof m !== "object" || m === null || Array.isArray(m)) return `a JSON-RPC message is an object, not ${m === null ? "null" : Array.isArray(m) ? "an array" : `a ${typeof m}`}`;
  const { jsonrpc, id, method } = m as { jsonrpc?: unknown; id?: unknown; method?: unknown };
  if (jsonrpc !== "2.0") return `"jsonrpc" must be "2.0", not ${JSON.stringify(jsonrpc) ?? "missing"}`;
  if ("id" in m && typeof id !== "string" && !Number.isSafeInteger(id)) return `"id" must be a string or an integer, not ${JSON.stringify(id)}`;
  if ("method" in m && typeof method !== "string") return `"method" must be a string`;
  return "not a request (id and method), a notification (method) or a response (id and result or error) of JSON-RPC 2.0";
}

function rpcError(code: number, message: string) {
  return { jsonrpc: "2.0", error: { code, message }, id: null };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}
