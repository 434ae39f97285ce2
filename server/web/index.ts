import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import type { IncomingHttpHeaders } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineEventHandler, getQuery, getRouterParam, setResponseHeader, setResponseStatus, type H3Event, type Router } from "h3";
import { readBodyLimited } from "../body.js";
import type { Logger } from "pino";
import { packageRoot } from "../../reconciler/package-root.js";
import { missingProfileLines } from "../../reconciler/hermes-files.js";
import { hermesHome } from "../../reconciler/hermes-plan.js";
import { checkCsrf } from "../identity/csrf.js";
import { invoke, type Call, type Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import { callerOf, checkGate, pageOrigins, type GateConfig } from "../gate.js";
import { ANONYMOUS, cookieOf, identify, requireOperator, requireScope, type Authenticator, type Identity } from "../identity/identify.js";
import { routeId, type Caller, type Route } from "../route.js";
import { errorPage, inboxPage, loginPage, planPage, statusPage } from "./pages.js";
import type { Viewer } from "./render.js";
import { ICON_SVG, STYLE_CSS } from "./style.js";
import { admitForm, agentsPage, requireRunsReach, runPage } from "./agents-page.js";
import { bridgeScopes, isAdmission } from "../bridge/access.js";
import { clientConfigs } from "../bridge/clients.js";

/**
 * Only same-origin scripts run (the inbox's `/assets/inbox.js`; inline or
 * injected ones are refused) and they may only fetch / stream from this
 * origin; styles and form posts stay same-origin; no framing.
 */
const CSP = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/**
 * No URL of these pages leaks to another origin. Not `no-referrer`: under it
 * a browser sends `Origin: null` with the page's own form posts, which the
 * gate (and the CSRF check) must refuse; `same-origin` keeps the real Origin
 * on same-origin posts and sends `null` only cross-origin.
 */
const REFERRER_POLICY = "same-origin";

/**
 * Where the compiled inbox script is: next to this module when it runs from
 * dist/, else the build output under the package root (the TS sources run
 * under vitest; `npm test` builds first). Null when neither exists.
 */
function inboxScriptPath(): string | null {
  const beside = fileURLToPath(new URL("./client/inbox.js", import.meta.url));
  if (existsSync(beside)) return beside;
  const built = join(packageRoot(), "dist", "server", "web", "client", "inbox.js");
  return existsSync(built) ? built : null;
}

/** How long a web session lasts (the cookie's Max-Age and the session row's expiry): 12 hours. */
export const SESSION_TTL_S = 12 * 60 * 60;

type WebDeps = Dispatcher & { readonly auth: Authenticator; readonly gate: () => GateConfig; readonly logger?: Logger };

/**
 * Mounts the operator's pages on `router`: `GET /` (approval inbox),
 * `/plans/{id}`, `/status`; the no-script decisions `POST
 * /approvals/{id}/approve|deny`; `GET|POST /login` and `POST /logout`; and
 * the assets `/assets/style.css`, `/assets/icon.svg` and `/assets/inbox.js`
 * (the compiled server/web/client/inbox.ts; 503 when it is not built). They
 * are HTML, not part of the REST route table, and pass the same Host/Origin
 * gate as every route (a refused request gets the gate's status with an
 * HTML page).
 *
 * The pages need an operator: the web session's cookie (or an operator's
 * bearer token); without one they answer 401 with the login page, an
 * agent's token gets 403. The login page and the assets are open.
 * Server-rendered: they read fine with JavaScript off, and the Approve /
 * Deny forms work as plain form posts. Returns the paths it mounted with
 * their methods, so that another method on one is 405 (app.ts).
 */
export function mountWeb(router: Router, deps: WebDeps): readonly PagePath[] {
  const mounted: PagePath[] = [];
  /** A page or asset answers HEAD as its GET (node's http drops the body). */
  const get = (path: string, handler: Parameters<Router["get"]>[1]) => {
    mounted.push({ path, methods: ["GET", "HEAD"] });
    router.add(path, handler, ["get", "head"]);
  };
  /** A form's target: POST only. */
  const post = (path: string, handler: Parameters<Router["post"]>[1]) => {
    const known = mounted.find((m) => m.path === path);
    if (known) known.methods = [...known.methods, "POST"];
    else mounted.push({ path, methods: ["POST"] });
    router.post(path, handler);
  };
  /** The operator a page is for, from the request's identity (a 401 / 403 ApiError otherwise). */
  const viewerOf = (identity: Identity): Viewer => {
    requireOperator(identity, "see the operator's pages");
    requireScope(identity, "rest");
    return { name: identity.name, scopes: identity.scopes, ...(identity.csrf !== undefined ? { csrf: identity.csrf } : {}) };
  };
  /** An ApiError as a page: 401 is the login page, anything else the error page. */
  const refusal = (event: H3Event, err: ApiError, viewer?: Viewer) =>
    err.status === 401 ? send(event, 401, loginPage(err.message)) : send(event, err.status, errorPage(err.status, err.message, viewer));
  const failed = (event: H3Event, err: unknown) => {
    // The path only, never the query: /login?code=… carries a secret.
    deps.logger?.error({ err, route: `${event.method} ${pathOf(event)}` }, "page failed");
    return send(event, 500, errorPage(500, "the page could not be made; the server log has the error"));
  };
  const html = (render: (event: H3Event, viewer: Viewer) => Promise<string | undefined>, notFound: (event: H3Event) => string) =>
    defineEventHandler(async (event) => {
      let viewer: Viewer | undefined;
      try {
        checkGate(event.node.req.headers, deps.gate());
        viewer = viewerOf(identify(event.node.req.headers, deps.auth, event.node.req.socket.remoteAddress));
        const out = await render(event, viewer);
        if (out === undefined) return send(event, 404, errorPage(404, notFound(event), viewer));
        return send(event, 200, out);
      } catch (err) {
        if (err instanceof ApiError) return refusal(event, err, viewer);
        return failed(event, err);
      }
    });
  get("/", html((_e, viewer) => inboxPage(deps, viewer), () => "no such page"));
  get("/status", html((_e, viewer) => statusPage(deps, viewer), () => "no such page"));
  get("/plans/:id", html((event, viewer) => planPage(deps, param(event), viewer), (event) => `no plan ${param(event)}`));
  get("/agents", html((event, viewer) => agentsPage(deps, originOf(event, deps.gate()), agentQuery(event), viewer), () => "no such page"));
  get("/agents/runs/:id", html((event, viewer) => runPage(deps, param(event), viewer, getQuery(event).follow !== "off"), (event) => `no run ${param(event)}`));

  // ── logging in and out ───────────────────────────────────────────────
  /**
   * A new session: its cookie, then 303 to the inbox. The session this
   * browser held until now (its cookie is replaced) ends on the server too,
   * so no copy of the old cookie stays a credential.
   */
  const loggedIn = (event: H3Event, session: string, linkOrigin?: string) => {
    const before = sessionOf(event, deps.auth);
    if (before !== undefined) deps.auth.tokens.endSession(before);
    setResponseHeader(event, "Set-Cookie", `${deps.auth.cookie}=${session}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${SESSION_TTL_S}${secureFlag(event, deps.gate(), linkOrigin)}`);
    return redirect(event, "/");
  };
  /** A login-page handler: behind the gate; a refusal is a page with its status, anything else the failure page. */
  const gated = (work: (event: H3Event) => unknown) => defineEventHandler(async (event) => {
    try {
      checkGate(event.node.req.headers, deps.gate());
      return await work(event);
    } catch (err) {
      if (err instanceof ApiError) return refusal(event, err);
      return failed(event, err);
    }
  });
  // `/login?code=…` (the link `hal0 web` prints) exchanges a one-time code; `/login` alone is the form.
  // A HEAD (a link checker, a chat's preview) never spends the code: it gets the form's headers.
  get("/login", gated((event) => {
    const code = getQuery(event).code;
    if (code === undefined || event.method === "HEAD") return send(event, 200, loginPage());
    try {
      const { session, origin } = deps.auth.tokens.redeemCode(String(Array.isArray(code) ? code[0] : code), SESSION_TTL_S);
      return loggedIn(event, session, origin);
    } catch (err) {
      // A link opened twice (two tabs, a reload of its tab): the first logged this browser in, and the refusal says so.
      const cookie = sessionOf(event, deps.auth);
      const still = err instanceof ApiError && err.code === "auth.login_invalid" && cookie !== undefined ? deps.auth.tokens.session(cookie) : undefined;
      if (err instanceof ApiError && still?.kind === "operator") return send(event, err.status, loginPage(err.message, still.name));
      throw err;
    }
  }));
  // A pasted operator token; only from this very origin (no logging a browser into someone else's session).
  post("/login", gated(async (event) => {
    sameOrigin(event.node.req.headers, deps.gate());
    const form = await readForm(event);
    const { session } = deps.auth.tokens.sessionForToken(form.get("token") ?? "", SESSION_TTL_S);
    return loggedIn(event, session);
  }));
  // Ends this browser's session (CSRF-checked like every session post) and forgets the cookie.
  post("/logout", gated(async (event) => {
    const identity = identify(event.node.req.headers, deps.auth, event.node.req.socket.remoteAddress);
    const form = await readForm(event);
    checkCsrf(identity, event, deps.gate(), form.get("csrf") ?? undefined);
    const cookie = sessionOf(event, deps.auth);
    if (identity.by === "session" && cookie !== undefined) deps.auth.tokens.endSession(cookie);
    setResponseHeader(event, "Set-Cookie", `${deps.auth.cookie}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0${secureFlag(event, deps.gate())}`);
    return redirect(event, "/login");
  }));

  // ── the pages' forms (no script): through the REST routes (validated, audited, each route's own access rule) ──
  /** A session form post to `routeKey`: the operator and its CSRF field, then `work` with the route and the caller; a refusal is a page. */
  const formPost = (routeKey: string | Route, work: (event: H3Event, form: URLSearchParams, run: (call: Omit<Call, "caller" | "requestId">) => Promise<unknown>, viewer: Viewer) => Promise<string>) => {
    const route = typeof routeKey === "string" ? deps.routes.find((r) => routeId(r) === routeKey) : routeKey;
    if (!route) throw new Error(`the operator's pages need the route ${routeKey}`);
    return defineEventHandler(async (event) => {
      const started = performance.now();
      const headers = event.node.req.headers;
      const peer = event.node.req.socket.remoteAddress;
      const requestId = randomUUID();
      let caller: Caller = callerOf(ANONYMOUS, headers, "rest", peer);
      let viewer: Viewer | undefined;
      let invoked = false;
      try {
        checkGate(headers, deps.gate());
        // The caller first: a refusal's audit row names the identity the credential proved (an agent's bearer, say).
        const identity = identify(headers, deps.auth, peer);
        caller = callerOf(identity, headers, "rest", peer);
        viewer = viewerOf(identity);
        const form = await readForm(event);
        checkCsrf(identity, event, deps.gate(), form.get("csrf") ?? undefined);
        return await work(event, form, (call) => {
          invoked = true;
          return invoke(deps, route, { ...call, caller, requestId });
        }, viewer);
      } catch (err) {
        // A post refused before it reached its route (identity, CSRF, the form, an agent admitted already) is audited too, as on REST and the inbox's forms.
        if (!invoked && err instanceof ApiError) {
          const id = getRouterParam(event, "id") === undefined ? {} : { id: param(event) };
          deps.audit.record({ call: { params: id, query: {}, body: undefined, caller, requestId }, route, outcome: "error", errorCode: err.code, durationMs: performance.now() - started });
        }
        if (err instanceof ApiError) return refusal(event, err, viewer);
        return failed(event, err);
      }
    });
  };
  /**
   * `POST /approvals/{id}/approve|deny` (form-encoded: `csrf`, and `reason`
   * to deny): the operator's session and its CSRF field, then the route
   * table's own approve / deny route through `invoke` (validated, audited;
   * decided by the operator's name), then 303 back to `/#<id>`, where the
   * card shows how it ended. A refusal is a page with its status.
   */
  const decide = (decision: "approve" | "deny") => formPost(`POST /api/agent/approvals/{id}/${decision}`, async (event, form, run) => {
    const id = param(event);
    const reason = (form.get("reason") ?? "").trim();
    await run({ params: { id }, query: {}, body: decision === "deny" ? (reason === "" ? {} : { reason }) : undefined });
    return redirect(event, `/#${encodeURIComponent(id)}`);
  });
  post("/approvals/:id/approve", decide("approve"));
  post("/approvals/:id/deny", decide("deny"));
  // Mints an agent token admitted to the bridge (never an operator's) and shows the chosen client's config once, in this reply only.
  post("/agents/admit", formPost("POST /api/auth/tokens", async (event, form, run, viewer) => {
    const { name, profiles, client } = admitForm(form);
    if (deps.auth.tokens.list().some((t) => isAdmission(t) && t.name === name)) {
      throw new ApiError("bridge.already_admitted", `${name} is admitted already; revoke it below first`);
    }
    const { token } = (await run({ params: {}, query: {}, body: { kind: "agent", name, scopes: bridgeScopes(profiles) } })) as { token: { token: string } };
    const url = `${originOf(event, deps.gate())}/mcp/agents`;
    // A profile named that the Hermes home has no folder of (a typo, a case slip) is said beside the config, as hal0 bridge admit says it.
    const warnings = await missingProfileLines(hermesHome(await deps.box.model()), profiles.filter((p) => p !== "*")).catch(() => []);
    return send(event, 200, await agentsPage(deps, originOf(event, deps.gate()), undefined, viewer, { name, client, url, token: token.token, configs: clientConfigs(url, token.token), warnings }));
  }));
  // Cancels a run through agent_run_cancel's own route (audited like the tool), as the operator.
  const cancelRoute = deps.bridgeRoutes?.get("agent_run_cancel");
  if (cancelRoute) post("/agents/runs/:id/cancel", formPost(cancelRoute, async (event, _form, run, viewer) => {
    requireRunsReach(viewer);
    const id = param(event);
    await run({ params: {}, query: { profiles: "all" }, body: { run_id: id } });
    return redirect(event, `/agents/runs/${encodeURIComponent(id)}`);
  }));
  post("/agents/revoke/:id", formPost("POST /api/auth/tokens/{id}/revoke", async (event, _form, run) => {
    await run({ params: { id: param(event) }, query: {}, body: undefined });
    return redirect(event, "/agents");
  }));

  /** A gated static asset: `content` gives its status, Content-Type and body. */
  const asset = (content: () => readonly [number, string, string]) => defineEventHandler((event) => {
    try {
      checkGate(event.node.req.headers, deps.gate());
    } catch (err) {
      if (err instanceof ApiError) return send(event, err.status, errorPage(err.status, err.message));
      throw err;
    }
    const [status, type, body] = content();
    setResponseStatus(event, status);
    setResponseHeader(event, "Content-Type", type);
    setResponseHeader(event, "X-Content-Type-Options", "nosniff");
    return body;
  });
  get("/assets/style.css", asset(() => [200, "text/css; charset=utf-8", STYLE_CSS]));
  get("/assets/icon.svg", asset(() => [200, "image/svg+xml", ICON_SVG]));
  // Read once, on the first request that finds the compiled file.
  let inboxJs: string | undefined;
  get("/assets/inbox.js", asset(() => {
    if (inboxJs === undefined) {
      const path = inboxScriptPath();
      if (path === null) return [503, "text/plain; charset=utf-8", "hal0: the inbox script is not built (dist/server/web/client/inbox.js is missing); run `npm run build`.\n"];
      inboxJs = readFileSync(path, "utf8");
    }
    return [200, "text/javascript; charset=utf-8", inboxJs];
  }));
  return mounted;
}

/** A path the pages answer (h3's syntax, `:id` for a segment) and its methods: a request with another one is 405, not 404 (app.ts). */
export interface PagePath {
  readonly path: string;
  methods: string[];
}

/** The session cookie's value the request presents (this box's cookie name), if any. */
function sessionOf(event: H3Event, auth: Authenticator): string | undefined {
  return cookieOf([event.node.req.headers.cookie].flat()[0], auth.cookie);
}

/**
 * The address the operator's browser (and so, likely, an agent) reaches this
 * box at: the request's Origin when it is a public origin (`[server]
 * public_origins`; a form post behind a proxy that sends its upstream's Host
 * carries it), else the public origin of the request's Host, else
 * `http://<Host>`.
 */
function originOf(event: H3Event, gate: GateConfig): string {
  const origin = [event.node.req.headers.origin].flat()[0]?.toLowerCase();
  if (origin !== undefined && gate.pages.includes(origin)) return origin;
  const host = String(event.node.req.headers.host ?? "127.0.0.1");
  return gate.pages.find((o) => new URL(o).host === host.toLowerCase()) ?? `http://${host}`;
}

/**
 * `; Secure` for a session cookie set for an https page: the request's Origin
 * is an https public origin (`[server] public_origins`: a form posted through
 * an HTTPS reverse proxy), or its Host is one's and no plain-http public
 * origin shares that host (a proxy that passes the Host on), or the login
 * link was printed under one (`hal0 web --origin`, whatever Host the proxy
 * sends). Else nothing: a browser on plain http (`http://127.0.0.1:<port>`)
 * would drop a Secure cookie, and no X-Forwarded-* header counts.
 */
function secureFlag(event: H3Event, gate: GateConfig, linkOrigin?: string): string {
  const https = (o: string) => o.startsWith("https://");
  const origin = [event.node.req.headers.origin].flat()[0]?.toLowerCase();
  if (origin !== undefined && gate.pages.includes(origin)) return https(origin) ? "; Secure" : "";
  const host = String(event.node.req.headers.host ?? "").toLowerCase();
  const sameHost = gate.pages.filter((o) => new URL(o).host === host);
  if (sameHost.length > 0 && sameHost.every(https)) return "; Secure";
  return linkOrigin !== undefined && https(linkOrigin) && gate.pages.includes(linkOrigin.toLowerCase()) ? "; Secure" : "";
}

/** `?agent=` of the Agents page. */
function agentQuery(event: H3Event): string | undefined {
  const v = getQuery(event).agent;
  const one = Array.isArray(v) ? v[0] : v;
  return typeof one === "string" && one.trim() !== "" ? one.trim() : undefined;
}

/** The decoded `:id` of the path. */
function param(event: H3Event): string {
  const raw = getRouterParam(event, "id") ?? "";
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

function pathOf(event: H3Event): string {
  return event.path.split("?")[0] ?? "/";
}

/** A 303 See Other to `location` (same-origin paths only), with the pages' headers. */
function redirect(event: H3Event, location: string): string {
  setResponseStatus(event, 303);
  setResponseHeader(event, "Location", location);
  setResponseHeader(event, "Content-Security-Policy", CSP);
  setResponseHeader(event, "X-Content-Type-Options", "nosniff");
  setResponseHeader(event, "Referrer-Policy", REFERRER_POLICY);
  setResponseHeader(event, "Cache-Control", "no-store");
  return "";
}

/** Past this a form post is refused (a token, a CSRF field and a 500-character reason are far smaller). */
const FORM_LIMIT = 16 * 1024;

/** A form post's fields: `application/x-www-form-urlencoded` (or no body at all); anything else is refused. */
async function readForm(event: H3Event): Promise<URLSearchParams> {
  const tooLarge = () => new ApiError("validation.invalid", "the form is too large", { fields: [{ loc: ["body"], msg: `at most ${FORM_LIMIT} bytes`, type: "too_big" }] });
  // Counted as it arrives (a chunked post too): nothing past the limit is read.
  const body = await readBodyLimited(event, FORM_LIMIT).catch((err: unknown) => {
    throw err instanceof ApiError && err.code === "request.too_large" ? tooLarge() : err;
  });
  const text = body?.toString("utf8") ?? "";
  if (text === "") return new URLSearchParams();
  const type = String(event.node.req.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded") {
    throw new ApiError("validation.invalid", "a page's form posts application/x-www-form-urlencoded fields (the JSON API is under /api/)", { fields: [{ loc: ["body"], msg: `content type ${type || "none"}`, type: "content_type" }] });
  }
  return new URLSearchParams(text);
}

/** A browser's post that names another origin than this page's (`pageOrigins`) is 403 `auth.csrf`; one without Origin (curl) passes. */
function sameOrigin(headers: IncomingHttpHeaders, gate: GateConfig): void {
  const origin = [headers.origin].flat()[0];
  if (origin !== undefined && !pageOrigins(headers, gate).includes(origin.toLowerCase())) {
    throw new ApiError("auth.csrf", `a login from ${JSON.stringify(origin)} is not from this page's origin`);
  }
}

function send(event: H3Event, status: number, body: string): string {
  setResponseStatus(event, status);
  setResponseHeader(event, "Content-Type", "text/html; charset=utf-8");
  setResponseHeader(event, "Content-Security-Policy", CSP);
  setResponseHeader(event, "X-Content-Type-Options", "nosniff");
  setResponseHeader(event, "Referrer-Policy", REFERRER_POLICY);
  setResponseHeader(event, "Cache-Control", "no-store");
  return body;
}
