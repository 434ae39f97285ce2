/**
 * The HTTP layer of HindsightEngine (hindsight.ts): one request at a time to
 * a Hindsight bank's REST API (`/v1/default/banks/{bank}`), its failures
 * classified as hal0 errors:
 *
 * - cannot connect: before each request a TCP connect to the server must
 *   succeed within connectTimeoutMs; refused, unreachable, unresolvable or
 *   timed out (or the engine closed) → `memory.engine_unavailable`
 *   {retry_after_s: 5, url, cause}.
 * - any reply error: once connected, an HTTP error reply →
 *   `memory.engine_error` {status, body ≤ 2 KB}, as is a reply that is not
 *   JSON, a request with no reply within requestTimeoutMs ("timed out") or a
 *   connection dropped mid-request. An engine error is never reclassified as
 *   unavailable.
 * - HTTP 404 on an id call (CallOptions.notFound) → `memory.not_found`.
 * - HTTP 409 → the call's onConflict runs instead (cancel/retry turn it into
 *   `memory.operation_state`); without one it is an engine error.
 */
import { connect } from "node:net";
import { MemoryError } from "./errors.js";
import * as map from "./hindsight-map.js";

export interface HindsightHttpOptions {
  /** The Hindsight server, e.g. `http://127.0.0.1:8888` (`[memory] url`). */
  readonly url: string;
  /** The one Hindsight bank every hal0 dataset lives in (default `hal0`). */
  readonly bank?: string;
  /** The HTTP client (default globalThis.fetch). */
  readonly fetch?: typeof globalThis.fetch;
  /** How long connecting may take before the engine counts as unreachable (default 3000). */
  readonly connectTimeoutMs?: number;
  /** How long one request may take once connected (default 30000; reflect runs an LLM). */
  readonly requestTimeoutMs?: number;
}

export type Query = Record<string, string | number | boolean | readonly string[] | undefined>;

export interface CallOptions {
  readonly query?: Query;
  readonly body?: unknown;
  /** An id-based call: HTTP 404 is memory.not_found for [what, id]. */
  readonly notFound?: readonly [string, string];
  /** HTTP 409 (an operation's state refuses the call) runs this instead. */
  readonly onConflict?: () => Promise<never>;
}

/** Socket error codes meaning the connection could not be made. */
const CONNECT_FAILURES = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "EADDRNOTAVAIL", "ETIMEDOUT", "UND_ERR_CONNECT_TIMEOUT"]);
/** An engine reply's body is kept in error details up to this many bytes. */
const BODY_LIMIT = 2048;

/** A socket error's code; Node's fetch wraps it as `err.cause.code`. */
function errCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.cause?.code ?? e?.code;
  return typeof code === "string" ? code : undefined;
}

/** At most BODY_LIMIT bytes of a reply body. */
function truncate(text: string): string {
  const bytes = Buffer.from(text);
  return bytes.length <= BODY_LIMIT ? text : bytes.subarray(0, BODY_LIMIT).toString("utf8");
}

/** `?a=1&t=x&t=y` (lists repeat their key, as FastAPI reads them); "" when empty. */
function queryString(query: Query | undefined): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) params.append(key, String(v));
  }
  const s = params.toString();
  return s === "" ? "" : `?${s}`;
}

/** memory.not_found for the `what` with this id (an id call's HTTP 404, or one the scope cannot see). */
export function notFound(what: string, id: string): MemoryError {
  return new MemoryError("memory.not_found", `no ${what} ${id} is visible here`, { id });
}

/** Requests to one Hindsight bank, failures classified as the module comment says. */
export class HindsightHttp {
  readonly url: string;
  readonly bank: string;
  private readonly base: string;
  private readonly fetchFn: typeof globalThis.fetch;
  private readonly connectTimeoutMs: number;
  private readonly requestTimeoutMs: number;
  private closed = false;

  constructor(options: HindsightHttpOptions) {
    this.url = options.url.replace(/\/+$/, "");
    this.bank = options.bank ?? "hal0";
    this.base = `${this.url}/v1/default/banks/${encodeURIComponent(this.bank)}`;
    this.fetchFn = options.fetch ?? globalThis.fetch;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 3000;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  }

  private unavailable(cause: string): MemoryError {
    return new MemoryError("memory.engine_unavailable", `the memory engine at ${this.url} cannot be reached; retry shortly`, { retry_after_s: 5, url: this.url, cause });
  }

  /** Resolves once a TCP connection to the server opens (then closes it); memory.engine_unavailable otherwise. */
  private probe(): Promise<void> {
    const { hostname, port, protocol } = new URL(this.url);
    return new Promise((resolve, reject) => {
      const socket = connect({ host: hostname.replace(/^\[|\]$/g, ""), port: Number(port || (protocol === "https:" ? 443 : 80)) });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(this.unavailable("ETIMEDOUT"));
      }, this.connectTimeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.destroy();
        resolve();
      });
      socket.once("error", (err) => {
        clearTimeout(timer);
        reject(this.unavailable(errCode(err) ?? err.message));
      });
    });
  }

  private transportError(err: unknown, what: string): MemoryError {
    const code = errCode(err);
    if (code !== undefined && CONNECT_FAILURES.has(code)) return this.unavailable(code);
    const name = err instanceof Error ? err.name : "";
    if (name === "TimeoutError" || name === "AbortError") {
      return new MemoryError("memory.engine_error", `the memory engine at ${this.url} timed out: no reply to ${what} within ${this.requestTimeoutMs} ms`, { url: this.url, timeout_ms: this.requestTimeoutMs });
    }
    const message = err instanceof Error ? err.message : String(err);
    return new MemoryError("memory.engine_error", `${what} to the memory engine at ${this.url} failed: ${message}`, { url: this.url, cause: code ?? message });
  }

  /** One request to the bank's API; the parsed JSON reply (null when empty). */
  async call(method: string, path: string, options: CallOptions = {}): Promise<unknown> {
    if (this.closed) throw this.unavailable("closed");
    const what = `${method} ${path}`;
    await this.probe();
    let res: Response;
    let text: string;
    try {
      const body = options.body === undefined ? undefined : JSON.stringify(options.body);
      const headers: Record<string, string> = body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" };
      res = await this.fetchFn(`${this.base}${path}${queryString(options.query)}`, { method, headers, body, signal: AbortSignal.timeout(this.requestTimeoutMs) });
      text = await res.text();
    } catch (err) {
      throw this.transportError(err, what);
    }
    if (res.status === 404 && options.notFound) throw notFound(...options.notFound);
    if (res.status === 409 && options.onConflict) return options.onConflict();
    if (!res.ok) throw new MemoryError("memory.engine_error", `the memory engine at ${this.url} answered ${what} with HTTP ${res.status}`, { status: res.status, body: truncate(text) });
    if (text.trim() === "") return null;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new MemoryError("memory.engine_error", `the memory engine at ${this.url} answered ${what} with a body that is not JSON`, { status: res.status, body: truncate(text) });
    }
  }

  /** call()'s reply as a JSON object; memory.engine_error naming `what` when it is not one. */
  async object(method: string, path: string, what: string, options?: CallOptions): Promise<Record<string, unknown>> {
    return map.rec(await this.call(method, path, options), what);
  }

  /** Later calls are memory.engine_unavailable (cause "closed"); calls under way finish. */
  close(): void {
    this.closed = true;
  }
}
