import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { H3Event } from "h3";
import { MAX_BODY_KB_DEFAULT } from "../schema/settings.js";
import { ApiError } from "./errors.js";

/** `[server] max_body_kb` of the last tree that compiled (read per request), in bytes. */
export function maxBodyBytes(settings: { readonly server: { readonly max_body_kb?: number } } | undefined): number {
  return (settings?.server.max_body_kb ?? MAX_BODY_KB_DEFAULT) * 1024;
}

/** Whether the request says it carries a body: a non-zero Content-Length, or a Transfer-Encoding (chunked). */
export function declaresBody(headers: IncomingHttpHeaders): boolean {
  if (headers["transfer-encoding"] !== undefined) return true;
  const length = headers["content-length"];
  return length !== undefined && Number(length) > 0;
}

/** `application/json` or any `application/<x>+json`, parameters (charset) ignored. */
export function isJsonMediaType(contentType: string | undefined): boolean {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  return type === "application/json" || /^application\/[a-z0-9.!#$&^_-]+\+json$/.test(type);
}

/**
 * A route that reads JSON refuses a body of another type with 415
 * `request.unsupported_media_type` before reading it: a form post or a
 * `text/plain` body (what a browser may send cross-site without asking) is
 * never parsed as JSON. A request without a body passes.
 */
export function requireJsonBody(headers: IncomingHttpHeaders): void {
  if (!declaresBody(headers)) return;
  const type = [headers["content-type"]].flat()[0];
  if (!isJsonMediaType(type)) throw new ApiError("request.unsupported_media_type", `the body is ${type ? JSON.stringify(type.split(";")[0]!.trim()) : "of no declared type"}; send it as application/json`, { content_type: type ?? null, accepted: ["application/json", "application/*+json"] });
  // JSON is UTF-8 (RFC 8259 §8.1): a body said to be in another charset would be read as UTF-8 and its text changed.
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(type!)?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== "utf-8" && charset !== "utf8") {
    throw new ApiError("request.unsupported_media_type", `the body is in charset ${JSON.stringify(charset)}; JSON bodies are UTF-8 (send charset=utf-8, or none)`, { content_type: type, accepted: ["application/json", "application/*+json"], charset: "utf-8" });
  }
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A JSON body's text: strict UTF-8, a leading byte order mark dropped (RFC
 * 8259 §8.1 lets a reader ignore it). Bytes that are not UTF-8 (a Latin-1
 * `é`) are 400 `request.invalid_json`, never replaced with U+FFFD and
 * written to the tree that way.
 */
export function bodyText(bytes: Buffer): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new ApiError("request.invalid_json", "the body is not JSON: it is not valid UTF-8 (JSON is sent as UTF-8)");
  }
}

export function tooLarge(limit: number, declared?: number): ApiError {
  return new ApiError("request.too_large", `the body is larger than ${limit / 1024} KiB ([server] max_body_kb)`, { max_body_kb: limit / 1024, ...(declared !== undefined ? { content_length: declared } : {}) });
}

/**
 * The request body, at most `limit` bytes: a Content-Length over the limit
 * is refused (413 `request.too_large`) before a byte is read; a body without
 * one (chunked) is counted as it arrives and reading stops at the chunk that
 * crosses the limit. What was read is kept on the event, so h3's
 * `readRawBody` (the MCP endpoint, the pages' forms) gets the same bytes
 * without reading the stream again. `undefined` when there is no body.
 *
 * After a refusal the rest of the body is still on the socket: reply with
 * `Connection: close` so Node drops it with the connection instead of
 * draining it for the next request.
 */
export function readBodyLimited(event: H3Event, limit: number): Promise<Buffer | undefined> {
  const held = (event as unknown as { _requestBody?: unknown })._requestBody;
  if (Buffer.isBuffer(held)) return held.length > limit ? Promise.reject(tooLarge(limit)) : Promise.resolve(held);
  const req = event.node.req;
  if (!declaresBody(req.headers)) return Promise.resolve(undefined);
  const declared = req.headers["content-length"] === undefined ? undefined : Number(req.headers["content-length"]);
  if (declared !== undefined && declared > limit) return Promise.reject(tooLarge(limit, declared));
  const cut = CUT.get(req)?.reason;
  if (cut && !req.complete) return Promise.reject(cut);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      req.off("data", onData).off("end", onEnd).off("error", onGone).off("close", onGone);
      CUT.get(req)?.waiting.delete(onCut);
    };
    const onCut = (reason: ApiError) => {
      stop();
      reject(reason);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stop();
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      const body = Buffer.concat(chunks, size);
      (event as unknown as { _requestBody?: Buffer })._requestBody = body;
      resolve(body);
    };
    // The client went (or broke the framing) before the body it announced had arrived: its doing, not the server's.
    const onGone = () => {
      stop();
      reject(incomplete(size));
    };
    req.on("data", onData).on("end", onEnd).on("error", onGone).on("close", onGone);
    waitingOn(req).add(onCut);
  });
}

function incomplete(received: number): ApiError {
  return new ApiError("request.incomplete", "the connection closed before the request's body had all arrived; nothing was done", { received_bytes: received });
}

interface Cut {
  /** Set once the request is cut: a read that starts later is refused at once. */
  reason?: ApiError;
  /** The reads waiting for this request's body. */
  readonly waiting: Set<(reason: ApiError) => void>;
}

/** Per request: the reads waiting for its body, and why it was cut. */
const CUT = new WeakMap<IncomingMessage, Cut>();

function waitingOn(req: IncomingMessage): Set<(reason: ApiError) => void> {
  let cut = CUT.get(req);
  if (!cut) CUT.set(req, (cut = { waiting: new Set() }));
  return cut.waiting;
}

/**
 * Stops waiting for the rest of `req`'s body: a read of it under way, or
 * one that starts later, fails with `reason`, which the route answers as
 * any refusal (hal0 serve's shutdown: 503 `server.shutting_down`). Nothing
 * acts on a request before its whole body is read, so a cut request did
 * nothing. A request whose body had all arrived is left alone; returns
 * whether `req` was cut.
 */
export function cutBody(req: IncomingMessage, reason: ApiError): boolean {
  if (req.complete || CUT.get(req)?.reason) return false;
  const cut = CUT.get(req) ?? { waiting: new Set() };
  cut.reason = reason;
  CUT.set(req, cut);
  for (const reader of [...cut.waiting]) reader(reason);
  return true;
}
