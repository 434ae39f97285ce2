import type { H3Event } from "h3";
import { ApiError } from "../errors.js";
import { pageOrigins, type GateConfig } from "../gate.js";
import type { Identity } from "./identify.js";

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * A request the web page's session cookie authenticates may change
 * something only with the session's CSRF token (`X-CSRF-Token`, or the
 * `csrf` field of a form the page routes parse) and, when it sends an
 * Origin, from the page's own origin (`pageOrigins`). With `[server] auth =
 * "off"` every loopback caller is the operator, a browser too: a request
 * that names an Origin may change something only from the page's own, or a
 * page on any other local port (which the gate lets through) would act as
 * the operator with a plain form post or a body-less fetch, which no
 * preflight stops. Bearer-token requests need neither: a page elsewhere
 * cannot know the token.
 */
export function checkCsrf(identity: Identity, event: H3Event, gate: GateConfig, formToken?: string): void {
  if ((identity.by !== "session" && identity.by !== "auth_off") || SAFE_METHODS.has(event.method)) return;
  const headers = event.node.req.headers;
  const origin = [headers.origin].flat()[0];
  if (origin !== undefined && !pageOrigins(headers, gate).includes(origin.toLowerCase())) {
    throw new ApiError("auth.csrf", `a ${identity.by === "session" ? "session " : ""}request from ${JSON.stringify(origin)} is not from this page's origin`);
  }
  if (identity.by === "auth_off") return; // no session, so no token to check: a client without Origin (curl, a script) passes
  const sent = [headers["x-csrf-token"]].flat()[0] ?? formToken;
  if (sent === undefined || sent !== identity.csrf) throw new ApiError("auth.csrf", "the request lacks this session's CSRF token (reload the page)");
}
