import { z } from "zod";
import { ApiError } from "../errors.js";
import { parseScopes, SCOPES, TOKEN_KINDS, type TokenStore } from "../identity/tokens.js";
import { defineRoute, type Caller } from "../route.js";
import type { Dispatcher } from "../dispatch.js";

const Create = z.strictObject({
  kind: z.enum(TOKEN_KINDS),
  name: z.string().min(1).max(64),
  scopes: z.array(z.string()).optional(),
});

/**
 * Identities over REST. `whoami` is open to everyone (it says who the
 * credential proves, or anonymous). The token routes are operator-only: no
 * tool maps to them, so the route table refuses agents (403) and anonymous
 * callers (401) before a handler runs. A minted token is in the reply once.
 */
export const tokenRoutes = [
  defineRoute({
    method: "GET", path: "/api/auth/whoami", kind: "read",
    summary: "The identity this request's credential proves: operator, agent or anonymous",
    handle: ({ caller }) => ({ kind: caller.kind, name: caller.agent, identity: caller.kind === "anonymous" ? "anonymous" : `${caller.kind}:${caller.agent}` }),
  }),
  defineRoute({
    method: "GET", path: "/api/auth/tokens", kind: "read", query: z.strictObject({ all: z.enum(["true", "false"]).optional() }),
    summary: "Tokens (live ones; ?all=true with revoked): id, kind, name, scopes, created, last used — never the secret",
    handle: ({ query, services }) => ({ tokens: tokensOf(services).list({ all: query.all === "true" }) }),
  }),
  defineRoute({
    method: "POST", path: "/api/auth/tokens", kind: "action", status: 201, body: Create, revealsSecret: true,
    summary: "Mint a token (operator or agent); the secret is in this reply only",
    handle: ({ body, services, caller }) => {
      withinReach(caller, parseScopes(body.scopes, body.kind));
      return { token: tokensOf(services).mint(body.kind, body.name, body.scopes) };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/auth/tokens/{id}/revoke", kind: "action", params: z.strictObject({ id: z.string().min(1).max(64) }),
    summary: "Revoke a token by id; its web sessions end with it",
    handle: ({ params, services, caller }) => {
      const target = tokensOf(services).byId(params.id);
      if (target !== undefined) withinReach(caller, target.scopes, "revoke");
      return { token: tokensOf(services).revoke(params.id) };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/auth/tokens/rotate", kind: "action", revealsSecret: true,
    body: z.strictObject({ name: z.string().min(1).max(64), kind: z.enum(TOKEN_KINDS).optional() }),
    summary: "Replace every live token of a name by a new one (a Hermes profile's converges on the next sweep)",
    handle: ({ body, services, caller }) => ({ token: tokensOf(services).rotate(body.name, body.kind, (scopes) => withinReach(caller, scopes)) }),
  }),
];

/**
 * A token reaches at most what the operator's token minting or rotating it
 * does: one minted with `--scope rest` cannot make a token for the MCP mounts
 * (hal0-memory, the bridge) it was kept from, nor revoke one that reaches them
 * (the owner's, a bridge admission: surfaces it may not act on). `profile:`
 * entries go with `mcp:agents`. An operator with every scope, and the CLI, do
 * anything.
 */
function withinReach(caller: Caller, scopes: readonly string[], act: "hand on" | "revoke" = "hand on"): void {
  if (caller.scopes === undefined) return;
  const beyond = scopes.filter((s) => (SCOPES as readonly string[]).includes(s) && !caller.scopes!.includes(s));
  if (beyond.length === 0) return;
  const why = act === "revoke" ? `it cannot revoke a token that reaches ${beyond.join(", ")} (revoke it with an operator token that reaches them, or hal0 token revoke)` : `it cannot hand on ${beyond.join(", ")} (mint that token with an operator token that reaches it, or hal0 token create)`;
  throw new ApiError("auth.scope_denied", `the token of operator:${caller.agent} reaches ${caller.scopes.join(", ")}; ${why}`, { needed: beyond[0], scopes: caller.scopes });
}

function tokensOf(d: Dispatcher): TokenStore {
  if (!d.auth) throw new ApiError("system.internal", "this server has no token store");
  return d.auth.tokens;
}
