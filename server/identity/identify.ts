import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { isLoopbackHost } from "../../schema/settings.js";
import { ApiError } from "../errors.js";
import { SCOPES, type Scope, type TokenStore } from "./tokens.js";

export const IDENTITY_KINDS = ["operator", "agent", "anonymous"] as const;
export type IdentityKind = (typeof IDENTITY_KINDS)[number];

/**
 * Who is calling, decided once per request from a credential: a bearer
 * token, the web page's session cookie, or nothing (anonymous). A header
 * never decides it on its own.
 */
export interface Identity {
  readonly kind: IdentityKind;
  /** The operator's or agent's name; `anonymous` for anonymous. */
  readonly name: string;
  /** The token that proved it (a session names its operator token); absent for anonymous and auth off. */
  readonly tokenId?: string;
  readonly scopes: readonly Scope[];
  /** A bridge token's Hermes profiles (`*`: every one), as the token carries them (server/bridge/access.ts reads them). */
  readonly profiles?: readonly string[];
  /** How it was proved. */
  readonly by: "bearer" | "session" | "auth_off" | "none";
  /** `X-hal0-Agent` when the request sent one that is not the identity's own name (audit only; never trusted). */
  readonly claimed?: string;
  /** The session's CSRF token (cookie-authenticated requests only). */
  readonly csrf?: string;
}

export const ANONYMOUS: Identity = { kind: "anonymous", name: "anonymous", scopes: [], by: "none" };

/** What `identify` needs: the token store, `[server] auth` (read per request) and this box's session cookie name. */
export interface Authenticator {
  readonly tokens: TokenStore;
  readonly mode: () => "token" | "off";
  /** The web session's cookie: `sessionCookie(box id)`. */
  readonly cookie: string;
}

/**
 * The web session's cookie name on box `box` (its id): `hal0_session_` and 12
 * hex digits of the id's sha256. Browsers keep cookies by host name, not
 * port, so two boxes on one machine need two names, or logging in to one
 * would replace (and so log out) the other's session.
 */
export function sessionCookie(box: string): string {
  return `hal0_session_${createHash("sha256").update(box).digest("hex").slice(0, 12)}`;
}
const CLAIM_RE = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The one place a request's identity is decided.
 *
 * - `Authorization: Bearer <token>`: that token's operator or agent; an
 *   unknown or revoked token is 401 `auth.invalid_token` (never anonymous).
 * - else the box's session cookie (`auth.cookie`) of a logged-in web page: its operator.
 * - else `[server] auth = "off"` and the peer (`peer`, the socket's remote
 *   address) is loopback: an `X-hal0-Agent` caller is that agent (a value
 *   that is no agent's name is 400 `request.invalid_header`), any other the
 *   operator `local`. A caller from any other address is judged as under
 *   `auth = "token"`: the server may listen beyond loopback (`hal0 serve
 *   --host`, whatever hal0.toml's `[server] host` says since), and "off"
 *   trusts the person at the box, not the network.
 * - else anonymous.
 *
 * `X-hal0-Agent` must be absent or name the identity itself: anything else is
 * 403 `auth.identity_mismatch`.
 */
export function identify(headers: IncomingHttpHeaders, auth: Authenticator, peer: string | undefined): Identity {
  const claimRaw = one(headers["x-hal0-agent"])?.trim();
  const claim = claimRaw === undefined || claimRaw === "" ? undefined : claimRaw;
  const bearer = bearerOf(one(headers.authorization));
  if (bearer !== undefined) {
    const token = auth.tokens.verify(bearer);
    if (!token) throw new ApiError("auth.invalid_token", "the bearer token is unknown, revoked or rotated; ask the operator for a new one (hal0 token create)");
    return checked({ kind: token.kind, name: token.name, tokenId: token.id, scopes: token.scopes, ...(token.profiles ? { profiles: token.profiles } : {}), by: "bearer" }, claim);
  }
  const cookie = cookieOf(one(headers.cookie), auth.cookie);
  if (cookie !== undefined) {
    const token = auth.tokens.session(cookie);
    if (token && token.kind === "operator") return checked({ kind: "operator", name: token.name, tokenId: token.id, scopes: token.scopes, by: "session", csrf: csrfOf(cookie) }, claim);
  }
  if (auth.mode() === "off" && isLoopbackPeer(peer)) {
    if (claimRaw === undefined) return { kind: "operator", name: "local", scopes: SCOPES, by: "auth_off" };
    // The header is all that tells an agent from the operator here: one sent that names no agent (empty too: an unset
    // variable in a client's config) is refused, never read as absent (the operator).
    if (claim === undefined || !CLAIM_RE.test(claim)) throw new ApiError("request.invalid_header", "X-hal0-Agent names an agent: 1 to 64 letters, digits, - and _; with [server] auth = \"off\" a caller that sends it is that agent (its tiers apply), so a name hal0 cannot read is refused rather than taken for the operator", { header: "X-hal0-Agent" });
    return { kind: "agent", name: claim, scopes: SCOPES, by: "auth_off" };
  }
  return claim === undefined ? ANONYMOUS : { ...ANONYMOUS, claimed: claim.slice(0, 64) };
}

/** A socket's remote address on this machine: 127.0.0.0/8, ::1, or either as an IPv4-mapped IPv6 address. */
export function isLoopbackPeer(peer: string | undefined): boolean {
  if (peer === undefined) return false;
  const address = peer.toLowerCase().replace(/^::ffff:/, "");
  return address !== "localhost" && isLoopbackHost(address);
}

function checked(identity: Identity, claim: string | undefined): Identity {
  if (claim === undefined || claim === identity.name) return identity;
  throw new ApiError("auth.identity_mismatch", `X-hal0-Agent says ${JSON.stringify(claim.slice(0, 64))} but the credential is ${identity.kind} ${identity.name}; drop the header or use that identity's own token`, { claimed: claim.slice(0, 64), identity: `${identity.kind}:${identity.name}` });
}

/** `operator:alice`, `agent:hermes__coder`, `anonymous`: how audit rows and messages name an identity. */
export function identityLabel(i: { kind: IdentityKind; name: string }): string {
  return i.kind === "anonymous" ? "anonymous" : `${i.kind}:${i.name}`;
}

/** The same identity (the MCP session check): the same token, or the same anonymous/auth-off caller. */
export function sameIdentity(a: Identity, b: Identity): boolean {
  return a.kind === b.kind && a.name === b.name && a.tokenId === b.tokenId;
}

/** A scope this identity lacks is 403 `auth.scope_denied`; anonymous callers pass (what they reach is decided per route and tool). */
export function requireScope(identity: Pick<Identity, "kind" | "name" | "scopes">, scope: Scope): void {
  const refusal = scopeRefusal(identity, scope);
  if (refusal !== undefined) throw refusal;
}

/** `requireScope`'s refusal as a value: `auth.scope_denied` when the identity lacks `scope`, else undefined. */
export function scopeRefusal(identity: Pick<Identity, "kind" | "name" | "scopes">, scope: Scope): ApiError | undefined {
  if (identity.kind === "anonymous" || identity.scopes.includes(scope)) return undefined;
  return new ApiError("auth.scope_denied", `the token of ${identityLabel(identity)} does not reach ${scope}; mint one with --scope ${scope}`, { needed: scope, scopes: identity.scopes });
}

export function requireOperator(identity: Pick<Identity, "kind" | "name">, what: string): void {
  if (identity.kind === "operator") return;
  if (identity.kind === "anonymous") throw new ApiError("auth.required", `${what} needs an operator's credential (Authorization: Bearer hal0_op_…, or the web page's session)`);
  throw new ApiError("auth.operator_required", `only an operator may ${what}; ${identityLabel(identity)} is not one`, { identity: identityLabel(identity) });
}

/** The CSRF token of a session: derived from its cookie, so nothing more is stored. */
export function csrfOf(sessionCookie: string): string {
  return createHash("sha256").update(`csrf:${sessionCookie}`).digest("base64url").slice(0, 32);
}

function bearerOf(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(value);
  // A malformed Authorization header is a bad credential, not an absent one.
  return m ? m[1]! : value.trim() === "" ? undefined : "invalid";
}

export function cookieOf(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
