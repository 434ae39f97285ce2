import { randomUUID } from "node:crypto";
import { createApp, createRouter, defineEventHandler, getQuery, getRouterParams, setResponseHeader, setResponseStatus, type App, type H3Event } from "h3";
import type { Logger } from "pino";
import { changesTree, invoke, proposeOnly, validate, type Call, type Dispatcher } from "./dispatch.js";
import { ApiError, envelope } from "./errors.js";
import { callerOf, checkGate, checkPrivateHeader, provenCaller, type GateConfig } from "./gate.js";
import { restVerdict, type RestVerdict } from "./identity/access.js";
import { actionPreview, agentWriteTier, pinnedTo, queueForPerson, withDryRunVerdict, type DryRunVerdict } from "./verdict.js";
import { checkCsrf } from "./identity/csrf.js";
import { ANONYMOUS, identify, requireScope, sameIdentity, type Authenticator, type Identity } from "./identity/identify.js";
import { guardEventStream } from "./sse.js";
import { bodyText, maxBodyBytes, readBodyLimited, requireJsonBody } from "./body.js";
import { parseJsonInput, queryRefusal } from "./input.js";
import { RawReply, routeId, type Caller, type Route } from "./route.js";
import type { McpEndpoint } from "./mcp/endpoint.js";
import { mountWeb, type PagePath } from "./web/index.js";
import { UNMATCHED } from "./metrics/registry.js";
import { isFrozenReply, jsonOf } from "./frozen-reply.js";

export interface AppDeps extends Dispatcher {
  /** Decides each request's identity (server/identity/identify.ts). */
  readonly auth: Authenticator;
  /** Read per request: `[server] allowed_*` may change while the server runs. */
  readonly gate: () => GateConfig;
  readonly logger?: Logger;
  /** MCP endpoints by mount name (`admin` → `/mcp/admin`, `memory` → `/mcp/memory`). */
  readonly mcp?: Readonly<Record<string, McpEndpoint>>;
}

/**
 * The h3 app: one handler per route of the table. Each request passes the
 * Host/Origin gate, gets a request id and a caller, has its JSON body read
 * (`[server] max_body_kb` at most, application/json only, nested 64 deep at
 * most, no prototype keys: server/body.ts, server/input.ts), and goes
 * through `invoke` (the same door MCP tools and approvals use). The MCP
 * endpoints read their POST bodies through the same reader (mcp/endpoint.ts).
 * Every non-2xx reply is the error envelope. The operator's HTML pages
 * (`/`, `/plans/{id}`, `/status`) are mounted beside the table (web/).
 */
export function createHal0App(deps: AppDeps): App {
  const app = createApp();
  // The gate and the identity of every request read `[server]` (allowed_hosts / origins, public_origins, auth)
  // from the last tree read: the tree is looked at first (cached: at most a stat of each file a second), so a
  // hand edit of hal0.toml counts from the next request on, a request it lets in or shuts out included.
  app.use(defineEventHandler(async () => {
    await deps.box.snapshot().catch(() => undefined); // a tree that cannot be read: the routes say so
  }));
  const router = createRouter();
  // Two routers: the routes without params first, then those with. radix3 takes a static segment over a
  // `{param}` and never backtracks (`/api/slots/flm/models` would hide a slot named `flm`), and when a
  // static path has no handler for the method h3 borrows a param route's handler with the static node's
  // (empty) params: `DELETE /api/slots/capacity` ran slot_delete with no name. With the static routes
  // alone in the first router, what it does not answer goes to the param routes, each with its params.
  const byParam = createRouter();
  for (const route of deps.routes) {
    if (route.inProcess) continue; // an in-process probe: an MCP tool only, no REST route
    const handler = defineEventHandler((event) => handle(deps, route, event));
    const methods = methodsOf(route).map((m) => m.toLowerCase() as "get");
    (route.path.includes("{") ? byParam : router).add(toH3Path(route.path), handler, methods);
    // A stream answers HEAD with 405 (it has no head to send), not with a param route's reply for its last segment.
    if (route.kind === "stream" && !route.path.includes("{")) router.add(toH3Path(route.path), defineEventHandler((event) => unmatched(deps, pages, event, "HEAD")), "head");
  }
  for (const [name, endpoint] of Object.entries(deps.mcp ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) {
    app.use(`/mcp/${name}`, defineEventHandler(async (event) => {
      const started = performance.now();
      let who = "error";
      try {
        who = await endpoint.handle(event);
      } catch (err) {
        // The endpoint answers for itself (h3 leaves its response alone): a fault it did not answer is answered here, never left open.
        const api = asApiError(err, deps.logger, randomUUID());
        const { res } = event.node;
        if (!res.headersSent) res.writeHead(api.status, { "content-type": "application/json" }).end(JSON.stringify(envelope(api)));
        else res.destroy();
      }
      deps.logger?.info({ caller: who, route: `${event.method} /mcp/${name}`, status: event.node.res.statusCode, ms: Math.round((performance.now() - started) * 10) / 10 }, "request");
    }), { match: (url) => url === "" || url === "/" || url.startsWith("?") || url.startsWith("/?") }); // the mount, with or without a query string
  }
  const pages = mountWeb(router, deps);
  app.use(router);
  app.use(byParam);
  app.use(defineEventHandler((event) => unmatched(deps, pages, event)));
  return app;
}

async function handle(deps: AppDeps, route: Route, event: H3Event): Promise<unknown> {
  const started = performance.now();
  const requestId = event.node.req.headers["x-request-id"]?.toString().slice(0, 64) || randomUUID();
  setResponseHeader(event, "X-Request-Id", requestId);
  const headers = event.node.req.headers;
  const peer = event.node.req.socket.remoteAddress;
  let caller: Caller = callerOf(ANONYMOUS, headers, "rest", peer);
  let status = route.status ?? 200;
  let call: Call | undefined;
  let invoked = false;
  try {
    const gate = deps.gate();
    checkGate(headers, gate);
    checkPrivateHeader(headers);
    const identity = identify(headers, deps.auth, peer);
    caller = callerOf(identity, headers, "rest", peer);
    requireScope(identity, "rest");
    checkCsrf(identity, event, gate);
    call = await readCall(event, route, caller, requestId, maxBodyBytes(deps.box.lastSettings()));
    const policy = caller.kind === "operator" ? undefined : (await deps.box.model()).policy;
    let verdict: RestVerdict = policy === undefined ? { run: true } : restVerdict(route, caller, policy);
    let dryRun: DryRunVerdict | undefined = verdict.run ? undefined : actionPreview(route, call, verdict.tier);
    if (dryRun) verdict = { run: true };
    if (policy !== undefined && caller.kind === "agent" && changesTree(route)) {
      // Judged by what it does: planned first, queued when an effect needs a person; a dry run writes nothing and runs.
      const judged = await agentWriteTier(route, caller, policy, "autonomous_write", () => proposeOnly(deps, route, call!));
      dryRun = judged.dryRun;
      if (dryRun) verdict = { run: true };
      else if (judged.tier === "gated") verdict = { run: false, tool: judged.tool, tier: "gated" };
      else call = pinnedTo(call!, judged);
    }
    if (route.kind === "stream") {
      if (!verdict.run) throw new ApiError("auth.operator_required", `${routeId(route)} is a stream; a gated one cannot be queued`);
      // A stream outlives the request that proved its caller: it ends when the session logs out or the token is revoked.
      guardEventStream(event.node.res, () => stillSame(deps.auth, headers, peer, identity));
      await route.handle({ ...validate(route, call), box: deps.box, services: deps, caller, requestId }, event);
      return;
    }
    if (!verdict.run) {
      // Gated for this agent: planned and queued for a person, exactly as the same tool over MCP.
      // Audited by queueForPerson, queued or refused.
      invoked = true;
      const reply = await queueForPerson(deps, route, verdict.tool, { ...call, tool: verdict.tool }, started);
      status = 202;
      setResponseStatus(event, status);
      return reply;
    }
    invoked = true;
    const result = withDryRunVerdict(await invoke(deps, route, call), dryRun);
    setResponseStatus(event, status);
    if (result instanceof RawReply) {
      setResponseHeader(event, "Content-Type", result.contentType);
      for (const [k, v] of Object.entries(result.headers)) setResponseHeader(event, k, v);
      return result.text;
    }
    if (isFrozenReply(result)) {
      // Serialised once per reply object, however often it is read.
      setResponseHeader(event, "Content-Type", "application/json");
      return jsonOf(result);
    }
    return result ?? { ok: true };
  } catch (err) {
    const api = asApiError(err, deps.logger, requestId);
    status = api.status;
    caller = provenCaller(caller, api);
    // A call refused before it reached the pipeline (identity, scope, policy, a bad body) is audited too.
    // Its target too (the path's ids), when it was refused before its input was read: a bad or revoked token, a spoofed
    // X-hal0-Agent, a scope. Whoever looks at what was tried on apr_…, a slot, a token, finds it.
    if (!invoked) deps.audit.record({ call: call ?? { params: pathParams(event), query: {}, body: undefined, caller, requestId }, route, outcome: "error", errorCode: api.code, durationMs: performance.now() - started });
    setResponseStatus(event, status);
    // Refused with the body (or its rest) unread: close the connection rather than drain it for a next request.
    if (api.code === "request.too_large" || api.code === "request.unsupported_media_type") setResponseHeader(event, "Connection", "close");
    if (api.code === "route.method_not_allowed" && Array.isArray(api.details.allowed)) setResponseHeader(event, "Allow", api.details.allowed.join(", "));
    return envelope(api);
  } finally {
    const line = { reqId: requestId, caller: caller.kind === "anonymous" ? "anonymous" : `${caller.kind}:${caller.agent}`, route: routeId(route), status, ms: Math.round((performance.now() - started) * 10) / 10 };
    // Written once the reply is on its way (h3 sends it when this returns): the caller does not wait for its log line.
    if (deps.logger) setImmediate(() => deps.logger!.info(line, "request"));
    // By the route's template, never the raw path; an event stream that opened is a connection, not a latency.
    if (route.kind !== "stream" || status >= 400) deps.metrics?.observeRequest("rest", route.path, route.method, String(status), performance.now() - started);
  }
}


/** Whether the request's credential still proves `identity` (the session is live, the token not revoked). */
function stillSame(auth: Authenticator, headers: H3Event["node"]["req"]["headers"], peer: string | undefined, identity: Identity): boolean {
  try {
    return sameIdentity(identify(headers, auth, peer), identity);
  } catch {
    return false;
  }
}

/**
 * The route's input from the request. A body (every method but GET and
 * DELETE) must be application/json (415), at most `maxBody` bytes (413,
 * nothing read past the limit), JSON (400), nested at most 64 deep (400
 * `request.too_deep`), free of `__proto__` / `constructor` / `prototype`
 * keys (422, the path named) and an object (400): all judged before any
 * route, audit or redaction code walks it. A query parameter of those names
 * is refused the same way (h3's reader would drop it unseen).
 */
async function readCall(event: H3Event, route: Route, caller: Call["caller"], requestId: string, maxBody: number): Promise<Call> {
  const params = pathParams(event);
  const search = event.path.includes("?") ? event.path.slice(event.path.indexOf("?")) : "";
  const refused = queryRefusal(search);
  if (refused) throw refused;
  const query = getQuery(event) as Record<string, unknown>;
  let body: unknown;
  if (route.method !== "GET" && route.method !== "DELETE") {
    requireJsonBody(event.node.req.headers);
    const bytes = await readBodyLimited(event, maxBody);
    const text = bytes && bodyText(bytes);
    if (text !== undefined && text.trim() !== "") {
      body = parseJsonInput(text);
      if (typeof body !== "object" || body === null || Array.isArray(body)) throw new ApiError("request.not_an_object", "the body must be a JSON object");
    }
  }
  let base = ifMatch(event.node.req.headers["if-match"]);
  if (body && typeof (body as { base?: unknown }).base === "string") {
    const { base: named, ...rest } = body as { base: string };
    base ??= named;
    body = rest;
  }
  return { params, query, body, caller, requestId, base };
}

/**
 * The methods a route answers: a GET that is not a stream answers HEAD too,
 * exactly as its GET (node's http sends the headers and drops the body).
 * A stream has no HEAD: it is not opened to be dropped.
 */
function methodsOf(route: Route): string[] {
  return route.method === "GET" && route.kind !== "stream" ? ["GET", "HEAD"] : [route.method];
}

/**
 * A path no route nor page has is 404; a path some route or page (`pages`:
 * `PUT /`, `GET /logout`) has with another method is 405 (`refused`: a
 * method it has but refuses, never listed as allowed).
 */
function unmatched(deps: AppDeps, pages: readonly PagePath[], event: H3Event, refused?: string): unknown {
  const started = performance.now();
  // One label for every path no route has: a raw path would let any caller mint new series.
  event.node.res.once("finish", () => deps.metrics?.observeRequest("rest", UNMATCHED, event.method, String(event.node.res.statusCode), performance.now() - started));
  const path = (event.path.split("?")[0] ?? "/").replace(/\/+$/, "") || "/";
  const shown = printablePath(path);
  const allowed = [
    ...deps.routes.filter((r) => !r.inProcess && templateMatches(r.path, path)).flatMap(methodsOf),
    ...pages.filter((p) => templateMatches(p.path, path)).flatMap((p) => p.methods),
  ].filter((m) => m !== refused);
  const err = allowed.length > 0
    ? new ApiError("route.method_not_allowed", `${event.method} is not allowed on ${shown}`, { allowed: [...new Set(allowed)].sort() })
    : new ApiError("route.not_found", `no route for ${event.method} ${shown}`);
  try {
    checkGate(event.node.req.headers, deps.gate());
  } catch (gateErr) {
    return reply(event, gateErr as ApiError);
  }
  return reply(event, err);
}

/** What a reply no route made may do in a browser that opens it (a mistyped page's path): nothing. */
const UNMATCHED_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'";

/**
 * A request's path as a message shows it: each control character (C0, DEL,
 * C1) its percent-encoding again (`/api/x%00%1B[31m`), as the caller sent it.
 * The path comes decoded (`%00` is a NUL, `%1b` an escape): quoted as it is,
 * a message printed to a terminal or written to a log line by line would
 * carry the caller's escape sequences and line breaks.
 */
export function printablePath(path: string): string {
  return path.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => encodeURIComponent(c));
}

function reply(event: H3Event, err: ApiError): unknown {
  setResponseStatus(event, err.status);
  setResponseHeader(event, "Content-Security-Policy", UNMATCHED_CSP);
  setResponseHeader(event, "X-Content-Type-Options", "nosniff");
  if (Array.isArray(err.details.allowed)) setResponseHeader(event, "Allow", err.details.allowed.join(", "));
  return envelope(err);
}

function asApiError(err: unknown, logger: Logger | undefined, requestId: string): ApiError {
  if (err instanceof ApiError) return err;
  logger?.error({ reqId: requestId, err }, "unhandled error");
  return new ApiError("system.internal", `internal error (request ${requestId})`, { request_id: requestId });
}

function templateMatches(template: string, path: string): boolean {
  const a = template.split("/");
  const b = path.split("/");
  return a.length === b.length && a.every((seg, i) => seg.startsWith("{") || seg.startsWith(":") || seg === b[i]);
}

/** `/api/slots/{name}` → `/api/slots/:name` (h3's router syntax). */
function toH3Path(path: string): string {
  return path.replace(/\{([a-z_]+)(?::path)?\}/g, ":$1");
}

/** One element of an `If-Match` list: an entity-tag (`"rev_…"`, weak `W/"…"` told apart), or a bare revision. */
const IF_MATCH_ELEMENT = /^(?:(W\/)?"([\x21\x23-\x7e\x80-\xff]*)"|([\x21\x23-\x2b\x2d-\x7e]+))$/;

/**
 * The revision(s) an `If-Match` names (RFC 9110 §13.1.1): `*` (any current
 * revision) is no check, as no header is; a list (`"rev_a", "rev_b"`, or the
 * header sent twice) holds when any of its revisions does. A value that is
 * not a list of entity-tags is 400 `request.invalid_header`, not a revision
 * looked up as it stands.
 */
function ifMatch(v: string | undefined): string | readonly string[] | undefined {
  if (v === undefined) return undefined;
  const tags: string[] = [];
  for (const raw of splitList(v)) {
    const element = raw.trim();
    if (element === "") continue; // an empty list element (`a, , b`) is no element (RFC 9110 §5.6.1)
    const m = IF_MATCH_ELEMENT.exec(element);
    if (!m) throw new ApiError("request.invalid_header", `If-Match must be * or a list of revisions (If-Match: "rev_…"), not ${JSON.stringify(element.slice(0, 80))}`, { header: "if-match" });
    // If-Match compares strongly (RFC 9110 §13.1.1): a weak tag matches nothing, so it would hold no write back. Said, not taken as the revision.
    if (m[1] !== undefined) throw new ApiError("request.invalid_header", `If-Match compares revisions strongly: a weak tag (${JSON.stringify(element.slice(0, 80))}) never matches; send the revision as a reply gave it (If-Match: "rev_…")`, { header: "if-match" });
    tags.push(m[2] ?? m[3]!);
  }
  if (tags.length === 0 || tags.includes("*")) return undefined;
  const unique = [...new Set(tags)];
  return unique.length === 1 ? unique[0] : unique;
}

/** A header's comma-separated list, a comma inside a quoted string kept in its element. */
function splitList(v: string): string[] {
  const out: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < v.length; i++) {
    if (v[i] === '"') quoted = !quoted;
    else if (v[i] === "," && !quoted) {
      out.push(v.slice(start, i));
      start = i + 1;
    }
  }
  out.push(v.slice(start));
  return out;
}

/** The path's params, each percent-decoded (left as sent when it does not decode). */
function pathParams(event: H3Event): Record<string, string> {
  return Object.fromEntries(Object.entries(getRouterParams(event)).map(([k, v]) => [k, safeDecode(v)]));
}

function safeDecode(v: string): string {
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}
