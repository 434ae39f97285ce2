import { setMaxListeners } from "node:events";
import { connect } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";

/** How long GET /api/mcp/servers waits for a TCP connect to an installed server (seed 001). */
export const STATE_PROBE_MS = 1500;

export type ServerState = "reachable" | "unreachable" | "disabled" | "stopped";

/** Whether a TCP connection to the url's host and port opens within `timeoutMs`. Never sends a byte. */
export function tcpReachable(url: string, timeoutMs = STATE_PROBE_MS): Promise<boolean> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return Promise.resolve(false);
  }
  const port = Number(target.port || (target.protocol === "https:" ? 443 : 80));
  const host = target.hostname.replace(/^\[|\]$/g, "");
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: timeoutMs });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("connect", () => done(true)).once("timeout", () => done(false)).once("error", () => done(false));
  });
}

/** An installed server's state: stdio servers have no supervisor (`stopped`); others by a TCP connect, `disabled` when reachable but switched off. */
export async function serverState(s: { transport: string; url?: string; enabled: boolean }, timeoutMs = STATE_PROBE_MS): Promise<ServerState> {
  if (s.transport === "stdio" || s.url === undefined) return "stopped";
  if (!(await tcpReachable(s.url, timeoutMs))) return "unreachable";
  return s.enabled ? "reachable" : "disabled";
}

/** The longest failure a probe reports: the SDK's message carries a non-MCP server's whole reply body (an HTML page, a dump). */
export const PROBE_ERROR_MAX = 512;

/** The most a probe reads of one reply (initialize, a tools/list page, an sse stream): a server that floods is cut off, not buffered. */
export const PROBE_REPLY_MAX = 4 * 1024 * 1024;
/** The most tools, and pages of them, a probe lists: a server that pages for ever fails the probe instead of growing its list. */
export const PROBE_TOOLS_MAX = 1000;
export const PROBE_PAGES_MAX = 100;
/** A tool's description in the probe's reply is cut to this many characters. */
export const PROBE_DESCRIPTION_MAX = 1024;

export interface ToolsProbe {
  readonly ok: boolean;
  readonly transport: string;
  readonly url: string;
  readonly ms: number;
  readonly server?: { readonly name: string; readonly version: string };
  readonly tools: ReadonlyArray<{ readonly name: string; readonly description?: string }>;
  readonly error?: string;
}

/**
 * A real MCP handshake against a remote server: initialize, then tools/list, with the SDK's own client; failures are reported, not thrown.
 * The whole handshake has `timeoutMs`: the SDK bounds each request, but not the opening of an sse stream (a server that
 * answers the GET and never names its endpoint would hold the probe, and the request, for ever).
 */
export async function listRemoteTools(url: string, transport: "streamable-http" | "sse", timeoutMs = 10_000): Promise<ToolsProbe> {
  const started = performance.now();
  const client = new Client({ name: "hal0-probe", version: "1.0.0" });
  const ms = () => Math.round(performance.now() - started);
  const signal = AbortSignal.timeout(timeoutMs);
  setMaxListeners(PROBE_PAGES_MAX + 10, signal); // each request listens on it
  const capped = cappedFetch(PROBE_REPLY_MAX);
  const handshake = async () => {
    const opts = { fetch: capped.fetch };
    await client.connect(transport === "sse" ? new SSEClientTransport(new URL(url), opts) : new StreamableHTTPClientTransport(new URL(url), opts), { signal, timeout: timeoutMs });
    const tools: Array<{ name: string; description?: string }> = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      if (++pages > PROBE_PAGES_MAX) throw new Error(`the server lists its tools over more than ${PROBE_PAGES_MAX} pages`);
      const page = await client.listTools(cursor === undefined ? {} : { cursor }, { signal, timeout: timeoutMs });
      tools.push(...page.tools.map((t) => ({ name: shortened(t.name, 128), ...(t.description ? { description: shortened(t.description, PROBE_DESCRIPTION_MAX) } : {}) })));
      if (tools.length > PROBE_TOOLS_MAX) throw new Error(`the server lists more than ${PROBE_TOOLS_MAX} tools`);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return tools;
  };
  try {
    const tools = await withDeadline(handshake(), signal, `no MCP answer within ${timeoutMs} ms`);
    const info = client.getServerVersion();
    return { ok: true, transport, url, ms: ms(), ...(info ? { server: { name: info.name, version: info.version } } : {}), tools: tools.sort((a, b) => (a.name < b.name ? -1 : 1)) };
  } catch (err) {
    const why = capped.cut() ? `the server sent more than ${PROBE_REPLY_MAX} bytes in one reply: ${(err as Error).message}` : (err as Error).message;
    return { ok: false, transport, url, ms: ms(), tools: [], error: shortened(why) };
  } finally {
    await client.close().catch(() => undefined);
  }
}

/** `work`, or a rejection with `message` once `signal` aborts (the work is left to fail on its own when its client closes). */
function withDeadline<T>(work: Promise<T>, signal: AbortSignal, message: string): Promise<T> {
  work.catch(() => undefined);
  if (signal.aborted) return Promise.reject(new Error(message));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new Error(message));
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * `fetch` whose reply bodies end after `max` bytes (the connection is dropped there): the SDK reads a reply whole, so a
 * server that floods would otherwise be buffered until the deadline. `cut()` says whether a reply was cut.
 */
function cappedFetch(max: number): { fetch: FetchLike; cut: () => boolean } {
  let cut = false;
  const capped: FetchLike = async (url, init) => {
    const res = await fetch(url, init);
    if (res.body === null) return res;
    let seen = 0;
    const body = res.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        const room = max - seen;
        seen += chunk.byteLength;
        if (seen <= max) return controller.enqueue(chunk);
        cut = true;
        if (room > 0) controller.enqueue(chunk.subarray(0, room));
        controller.terminate();
      },
    }));
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return { fetch: capped, cut: () => cut };
}

/** A text cut to `max` characters (a failure's message to {@link PROBE_ERROR_MAX}), saying how long it was. */
function shortened(message: string, max = PROBE_ERROR_MAX): string {
  if (message.length <= max) return message;
  const tail = `… (${message.length} characters)`;
  return `${message.slice(0, max - tail.length)}${tail}`;
}
