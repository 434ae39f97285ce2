import type { H3Event } from "h3";

/** A comment line every 15 s keeps proxies and clients from timing an idle stream out. */
const KEEP_ALIVE_MS = 15_000;

/** Writes one event: `event: <type>`, its JSON `data`, and `id` when given. */
export type SendEvent = (type: string, data: unknown, id?: number | string) => void;

/**
 * Serves a server-sent-event reply on `event` until the client goes:
 * `start` gets `send`, begins producing events, and returns its cleanup
 * (unsubscribe, clear a timer), which runs once the connection closes.
 */
export async function serveEvents(event: H3Event, start: (send: SendEvent) => () => void): Promise<void> {
  const res = event.node.res;
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive", "X-Accel-Buffering": "no" });
  res.flushHeaders(); // the client sees the stream open before the first event
  (event as unknown as { _handled: boolean })._handled = true;
  const send: SendEvent = (type, data, id) => void res.write(`${id === undefined ? "" : `id: ${id}\n`}event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  const stop = start(send);
  const keepAlive = setInterval(() => res.write(": keep-alive\n\n"), KEEP_ALIVE_MS);
  await new Promise<void>((resolve) => {
    let done = false;
    const close = () => {
      if (done) return;
      done = true;
      clearInterval(keepAlive);
      stop();
      resolve();
    };
    res.once("close", close);
    event.node.req.once("close", close);
  });
}
