import type { ServerResponse } from "node:http";
import type { H3Event } from "h3";

/** A comment line every 15 s keeps proxies and clients from timing an idle stream out. */
const KEEP_ALIVE_MS = 15_000;

/** How often an idle stream asks whether its caller's credential still holds (a stream with events asks before each). */
const RECHECK_MS = 2_000;

/**
 * What a stream may hold that its client has not read (a client that never
 * reads, a tab stalled with its connection open) before the stream is cut:
 * the server does not keep a client's unread events for ever.
 */
export const MAX_UNREAD_BYTES = 4 * 1024 * 1024;

/**
 * Whether the credential a stream was opened with still holds (the session
 * is not logged out, the token not revoked), by stream: set by the route
 * table before the stream's handler runs (server/app.ts).
 */
const GUARDS = new WeakMap<ServerResponse, () => boolean>();

/** `stillAllowed` is asked before each event of the stream on `res` and every 2 s; when it says no, the stream ends. */
export function guardEventStream(res: ServerResponse, stillAllowed: () => boolean): void {
  GUARDS.set(res, stillAllowed);
}

/** Writes one event: `event: <type>`, its JSON `data`, and `id` when given. */
export type SendEvent = (type: string, data: unknown, id?: number | string) => void;

/**
 * Open event streams (this module's and the MCP endpoints' GET streams), each
 * with how it ends itself: `hal0 serve`'s shutdown ends the ones on its
 * server, since a stream never finishes on its own (server/serve.ts).
 */
const STREAMS = new Map<ServerResponse, () => void>();

/** Registers `res` as an event stream that `end` finishes properly; returns the unregistration. */
export function trackEventStream(res: ServerResponse, end: () => void): () => void {
  STREAMS.set(res, end);
  return () => void (STREAMS.get(res) === end && STREAMS.delete(res));
}

/** `res` is an open event stream. */
export function isEventStream(res: ServerResponse): boolean {
  return STREAMS.has(res);
}

/** Ends the event streams among `responses` (the reply's last chunk: a client sees the stream end). Returns how many. */
export function endEventStreams(responses: Iterable<ServerResponse>): number {
  let n = 0;
  for (const res of [...responses]) {
    const end = STREAMS.get(res);
    if (!end) continue;
    STREAMS.delete(res);
    end();
    n++;
  }
  return n;
}

/**
 * Serves a server-sent-event reply on `event` until the client goes, the
 * server shuts down or the caller's credential ends (a logged-out session,
 * a revoked token: see `guardEventStream`): `start` gets `send`, begins
 * producing events, and returns its cleanup (unsubscribe, clear a timer),
 * which runs once the stream ends.
 */
export async function serveEvents(event: H3Event, start: (send: SendEvent) => () => void): Promise<void> {
  const res = event.node.res;
  const allowed = GUARDS.get(res);
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive", "X-Accel-Buffering": "no" });
  res.flushHeaders(); // the client sees the stream open before the first event
  (event as unknown as { _handled: boolean })._handled = true;
  let done = false;
  let stop: (() => void) | undefined;
  let resolveDone = (): void => {};
  const finished = new Promise<void>((resolve) => (resolveDone = resolve));
  const close = (): void => {
    if (done) return;
    done = true;
    untrack();
    clearInterval(keepAlive);
    clearInterval(recheck);
    stop?.();
    resolveDone();
  };
  /** Whether the caller's credential still holds; when it does not, the stream ends. */
  const holds = (): boolean => {
    if (done) return false;
    if (allowed === undefined || allowed()) return true;
    close();
    res.end(": the credential this stream was opened with has ended (logged out or revoked)\n\n");
    return false;
  };
  /** Writes `text`, unless the client has left more than MAX_UNREAD_BYTES unread: then the stream is cut (its connection closed). */
  const write = (text: string): void => {
    if (res.writableEnded || !holds()) return;
    if (res.writableLength <= MAX_UNREAD_BYTES) return void res.write(text);
    close();
    res.destroy();
  };
  const send: SendEvent = (type, data, id) => write(`${id === undefined ? "" : `id: ${id}\n`}event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  const keepAlive = setInterval(() => write(": keep-alive\n\n"), KEEP_ALIVE_MS);
  const recheck = allowed === undefined ? undefined : setInterval(holds, RECHECK_MS);
  const untrack = trackEventStream(res, () => {
    close();
    res.end(": hal0 serve is shutting down\n\n");
  });
  res.once("close", close);
  event.node.req.once("close", close);
  stop = start(send);
  // Ended while `start` ran (its first event met a credential already gone): its cleanup runs now.
  if (done) stop();
  await finished;
}
