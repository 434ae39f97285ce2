import type { IncomingHttpHeaders } from "node:http";
import { ApiError } from "./errors.js";
import type { Identity } from "./identity/identify.js";
import { SCOPES, type Scope } from "./identity/tokens.js";
import type { Caller } from "./route.js";

const LOOPBACK = ["127.0.0.1:*", "localhost:*", "[::1]:*"];

/** The caller of a request: its authenticated identity, `X-hal0-Private`, the door and the peer. */
export function callerOf(identity: Identity, headers: IncomingHttpHeaders, via: Caller["via"], peer?: string): Caller {
  const flag = one(headers["x-hal0-private"])?.trim().toLowerCase();
  return {
    kind: identity.kind, agent: identity.name, private: flag === "1" || flag === "true", via,
    ...(identity.claimed !== undefined ? { claimed: identity.claimed } : {}), ...(peer !== undefined ? { peer } : {}),
    ...(identity.kind === "operator" ? narrowedScopes(identity.scopes) : {}),
  };
}

/**
 * An operator's scopes as a Caller carries them: only when its token reaches
 * less than every surface (`--scope rest`); none means it reaches them all.
 */
export function narrowedScopes(scopes: readonly Scope[]): { scopes?: readonly Scope[] } {
  return SCOPES.some((s) => !scopes.includes(s)) ? { scopes } : {};
}

/** The values X-hal0-Private takes: on, off (or the header absent). */
const PRIVATE_VALUES = new Set(["1", "true", "0", "false"]);

/**
 * X-hal0-Private with a value it does not take (`yes`, `on`, a typo) is
 * refused (request.invalid_header): read as "not private", a note meant for
 * the caller's private memory would be written to `shared`.
 */
export function checkPrivateHeader(headers: IncomingHttpHeaders): void {
  const raw = headers["x-hal0-private"];
  if (raw === undefined) return;
  const values = [raw].flat();
  const flag = values[0]?.trim().toLowerCase();
  if (values.length === 1 && flag !== undefined && PRIVATE_VALUES.has(flag)) return;
  throw new ApiError("request.invalid_header", `X-hal0-Private takes 1, true, 0 or false, not ${JSON.stringify(values.join(", ").slice(0, 64))}`, { header: "X-hal0-Private" });
}

/** A spoofed X-hal0-Agent: the audit row names the identity the token proved and the claim it made. */
export function provenCaller(caller: Caller, err: ApiError): Caller {
  if (err.code !== "auth.identity_mismatch" || typeof err.details.identity !== "string" || typeof err.details.claimed !== "string") return caller;
  const [kind, ...name] = err.details.identity.split(":");
  if (kind !== "operator" && kind !== "agent") return caller;
  return { ...caller, kind, agent: name.join(":"), claimed: err.details.claimed };
}

export interface GateConfig {
  /** Host patterns: `host`, `host:port`, `host:*`; `*` turns the check off. */
  readonly hosts: readonly string[];
  /** Origin patterns: the same host patterns, or full origins (`https://box.lan:*`); `*` turns it off. */
  readonly origins: readonly string[];
  /** `[server] public_origins` (lower case): where browsers reach the pages besides `http://<Host>`, so a session's own page posts from them. */
  readonly pages: readonly string[];
}

/**
 * Loopback, widened by `[server] allowed_hosts / allowed_origins` and
 * HAL0_MCP_ALLOWED_HOSTS / _ORIGINS (comma-separated); a public origin
 * passes as an Origin, and its host as a Host (a proxy that passes it on).
 */
export function gateConfig(settings: { allowed_hosts: readonly string[]; allowed_origins: readonly string[]; public_origins?: readonly string[] }, env: NodeJS.ProcessEnv = process.env): GateConfig {
  const list = (v: string | undefined) => (v ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  const pages = (settings.public_origins ?? []).map((o) => o.toLowerCase());
  const hosts = [...LOOPBACK, ...settings.allowed_hosts, ...list(env.HAL0_MCP_ALLOWED_HOSTS), ...pages.map((o) => new URL(o).host)];
  return { hosts, origins: [...hosts, ...settings.allowed_origins, ...list(env.HAL0_MCP_ALLOWED_ORIGINS), ...pages], pages };
}

/**
 * The origins a session's page posts from: `http://<Host>` of the request,
 * and the public origins (`[server] public_origins`: an HTTPS reverse proxy's
 * address, which the Host alone cannot tell). No X-Forwarded-* header counts:
 * any client can send one.
 */
export function pageOrigins(headers: IncomingHttpHeaders, gate: GateConfig): readonly string[] {
  return [`http://${String(one(headers.host) ?? "").toLowerCase()}`, ...gate.pages];
}

/** DNS-rebinding guard: a Host or Origin outside the allowlist is 421. A request without Origin (curl, scripts) passes that half. */
export function checkGate(headers: IncomingHttpHeaders, gate: GateConfig): void {
  const host = one(headers.host)?.toLowerCase() ?? "";
  if (!gate.hosts.includes("*") && !gate.hosts.some((p) => hostMatches(p, host))) {
    throw new ApiError("request.host_denied", `Host ${JSON.stringify(host)} is not allowed; add it to [server] allowed_hosts or HAL0_MCP_ALLOWED_HOSTS`, { host });
  }
  const origin = one(headers.origin)?.toLowerCase();
  if (origin === undefined || gate.origins.includes("*")) return;
  if (!gate.origins.some((p) => originMatches(p, origin))) {
    throw new ApiError("request.origin_denied", `Origin ${JSON.stringify(origin)} is not allowed; add it to [server] allowed_origins or HAL0_MCP_ALLOWED_ORIGINS`, { origin });
  }
}

function hostMatches(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase();
  if (p === host) return true;
  if (p.endsWith(":*")) {
    const name = p.slice(0, -2);
    return host === name || (host.startsWith(`${name}:`) && /^\d+$/.test(host.slice(name.length + 1)));
  }
  return false;
}

function originMatches(pattern: string, origin: string): boolean {
  const p = pattern.toLowerCase();
  if (p.includes("://")) {
    if (p === origin) return true;
    return p.endsWith(":*") && (origin === p.slice(0, -2) || (origin.startsWith(p.slice(0, -1)) && /^\d+$/.test(origin.slice(p.length - 1))));
  }
  const m = /^https?:\/\/(.+)$/.exec(origin);
  return m !== null && hostMatches(p, m[1]!);
}

function one(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
