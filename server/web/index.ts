import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { defineEventHandler, getRouterParam, setResponseHeader, setResponseStatus, type H3Event, type Router } from "h3";
import type { Logger } from "pino";
import { packageRoot } from "../../cli/package-root.js";
import type { Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import { checkGate, type GateConfig } from "../gate.js";
import { errorPage, inboxPage, planPage, statusPage } from "./pages.js";
import { ICON_SVG, STYLE_CSS } from "./style.js";

/**
 * Only same-origin scripts run (the inbox's `/assets/inbox.js`; inline or
 * injected ones are refused) and they may only fetch / stream from this
 * origin; styles and form posts stay same-origin; no framing.
 */
const CSP = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

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

/**
 * Mounts the operator's pages on `router`: `GET /` (approval inbox),
 * `/plans/{id}`, `/status`, and the assets `/assets/style.css`,
 * `/assets/icon.svg` and `/assets/inbox.js` (the compiled
 * server/web/client/inbox.ts; 503 when it is not built). They are HTML, not
 * part of the REST route table, and pass the same Host/Origin gate as every
 * route (a refused request gets the gate's status with an HTML page).
 * Server-rendered: they read fine with JavaScript off (deciding in place
 * needs the inbox script; the forms still post plainly without it).
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
  router.get("/assets/style.css", asset(() => [200, "text/css; charset=utf-8", STYLE_CSS]));
  router.get("/assets/icon.svg", asset(() => [200, "image/svg+xml", ICON_SVG]));
  // Read once, on the first request that finds the compiled file.
  let inboxJs: string | undefined;
  router.get("/assets/inbox.js", asset(() => {
    if (inboxJs === undefined) {
      const path = inboxScriptPath();
      if (path === null) return [503, "text/plain; charset=utf-8", "hal0: the inbox script is not built (dist/server/web/client/inbox.js is missing); run `npm run build`.\n"];
      inboxJs = readFileSync(path, "utf8");
    }
    return [200, "text/javascript; charset=utf-8", inboxJs];
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
