import { defineEventHandler, getRouterParam, setResponseHeader, setResponseStatus, type H3Event, type Router } from "h3";
import type { Logger } from "pino";
import type { Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import { checkGate, type GateConfig } from "../gate.js";
import { errorPage, inboxPage, planPage, statusPage } from "./pages.js";
import { STYLE_CSS } from "./style.js";

/**
 * No script runs on these pages (none is served yet, and an injected one is
 * refused too); styles and form posts stay same-origin; no framing.
 */
const CSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/**
 * Mounts the operator's pages on `router`: `GET /` (approval inbox),
 * `/plans/{id}`, `/status` and `/assets/style.css`. They are HTML, not part
 * of the REST route table, and pass the same Host/Origin gate as every
 * route (a refused request gets the gate's status with an HTML page).
 * Read-only and server-rendered: they work with JavaScript off.
 */
export function mountWeb(router: Router, deps: Dispatcher & { readonly gate: () => GateConfig; readonly logger?: Logger }): void {
  const html = (render: (event: H3Event) => Promise<string | undefined>, notFound: (event: H3Event) => string) =>
    defineEventHandler(async (event) => {
      try {
        checkGate(event.node.req.headers, deps.gate());
        const out = await render(event);
        if (out === undefined) return send(event, 404, errorPage(404, notFound(event)));
        return send(event, 200, out);
      } catch (err) {
        if (err instanceof ApiError) return send(event, err.status, errorPage(err.status, err.message));
        deps.logger?.error({ err, route: `GET ${event.path}` }, "page failed");
        return send(event, 500, errorPage(500, "the page could not be made; the server log has the error"));
      }
    });
  router.get("/", html(() => inboxPage(deps), () => "no such page"));
  router.get("/status", html(() => statusPage(deps), () => "no such page"));
  router.get("/plans/:id", html((event) => planPage(deps, planId(event)), (event) => `no plan ${planId(event)}`));
  router.get("/assets/style.css", defineEventHandler((event) => {
    try {
      checkGate(event.node.req.headers, deps.gate());
    } catch (err) {
      if (err instanceof ApiError) return send(event, err.status, errorPage(err.status, err.message));
      throw err;
    }
    setResponseHeader(event, "Content-Type", "text/css; charset=utf-8");
    setResponseHeader(event, "X-Content-Type-Options", "nosniff");
    return STYLE_CSS;
  }));
}

function planId(event: H3Event): string {
  const raw = getRouterParam(event, "id") ?? "";
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

function send(event: H3Event, status: number, body: string): string {
  setResponseStatus(event, status);
  setResponseHeader(event, "Content-Type", "text/html; charset=utf-8");
  setResponseHeader(event, "Content-Security-Policy", CSP);
  setResponseHeader(event, "X-Content-Type-Options", "nosniff");
  setResponseHeader(event, "Referrer-Policy", "no-referrer");
  setResponseHeader(event, "Cache-Control", "no-store");
  return body;
}
