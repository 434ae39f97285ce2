import { ApiError } from "../errors.js";
import { identityLabel, requireScope, type Identity } from "../identity/identify.js";
import type { TokenStore } from "../identity/tokens.js";
import type { Caller } from "../route.js";
import type { BridgeContext } from "./tool.js";

/**
 * Who reaches `/mcp/agents`: an operator whose token reaches it (an
 * operator's default scopes do), or a token admitted to the bridge
 * (`mcp:agents`, minted by `hal0 bridge admit`). A token without
 * `mcp:agents` — a plain agent token, an operator token minted for other
 * surfaces — is `auth.scope_denied`; no credential is `auth.required` (the
 * bridge has no anonymous tools, whatever the tiers say).
 */
export function requireBridge(identity: Identity): void {
  if (identity.kind === "anonymous") throw new ApiError("auth.required", "/mcp/agents needs a credential: Authorization: Bearer <token> from `hal0 bridge admit NAME`");
  requireScope(identity, "mcp:agents");
}

/**
 * The Hermes profiles an identity reaches over the bridge: every one for an
 * operator (and everyone while `[server] auth = "off"`) and for a token
 * admitted with `profile:*`; else the token's `profile:<name>` entries.
 */
export function bridgeProfiles(identity: Pick<Identity, "kind" | "by" | "profiles">): readonly string[] | "all" {
  if (identity.kind === "operator" || identity.by === "auth_off") return "all";
  const profiles = identity.profiles ?? [];
  return profiles.includes("*") ? "all" : [...profiles].sort();
}

/**
 * What `kind:name`'s live bridge tokens reach now: `never` when it never had
 * one (`[server] auth = "off"`), `revoked` when every one was revoked
 * (`hal0 bridge revoke`, even while NAME keeps a token for hal0-admin), else
 * the profiles they reach (every one for an operator).
 */
export function liveBridgeReach(tokens: TokenStore, kind: "agent" | "operator", name: string): "never" | "revoked" | readonly string[] | "all" {
  const standing = tokens.standing(kind, name, "mcp:agents");
  if (standing !== "live") return standing === "none" ? "never" : "revoked";
  if (kind === "operator") return "all";
  const now = tokens.list().filter((t) => t.name === name && isAdmission(t)).map((t) => bridgeProfiles({ kind: "agent", by: "bearer", profiles: t.profiles }));
  return now.includes("all") ? "all" : [...new Set(now.flat() as string[])].sort();
}

/**
 * The profiles an approved request of an agent still reaches when it runs:
 * those it was queued with, never more than the agent's live bridge tokens
 * reach now. An agent whose every bridge token was revoked since it asked
 * (`hal0 bridge revoke`, even while NAME keeps a token for hal0-admin) is
 * refused `auth.invalid_token`: its request does not run. Any other call
 * (the caller's own, or an operator's) reaches what it was given.
 */
export function approvedProfiles(tokens: TokenStore | undefined, caller: Caller, asked: readonly string[] | "all"): readonly string[] | "all" {
  if (caller.via !== "approval" || caller.kind !== "agent" || tokens === undefined) return asked;
  const reach = liveBridgeReach(tokens, "agent", caller.agent);
  if (reach === "never" || reach === "all") return asked; // never admitted by a token ([server] auth = "off")
  if (reach === "revoked") throw new ApiError("auth.invalid_token", `agent:${caller.agent} is no longer admitted to the bridge (revoked since it asked); its request does not run`, { agent: caller.agent });
  return asked === "all" ? reach : asked.filter((p) => reach.includes(p));
}

/**
 * Why a queued run of `starter` (`agent:<name>`, `operator:<name>`) must not
 * start now, checked as an approved request is: its starter's every bridge
 * token was revoked since (`revoked`, what a request gets as
 * `auth.invalid_token`), or its live ones no longer reach the run's profile,
 * admitted again to fewer (`profile_denied`, as `bridge.profile_denied`).
 * Undefined: it starts (a name that never had a token, with auth off, too).
 */
export function queuedRunRefusal(tokens: TokenStore, starter: string, profile: string): { reason: "revoked" | "profile_denied"; error: string } | undefined {
  const at = starter.indexOf(":");
  const kind = starter.slice(0, at);
  if (kind !== "agent" && kind !== "operator") return undefined;
  const reach = liveBridgeReach(tokens, kind, starter.slice(at + 1));
  if (reach === "revoked") return { reason: "revoked", error: `${starter} was revoked before the run started (auth.invalid_token)` };
  if (reach === "never" || reach === "all" || reach.includes(profile)) return undefined;
  return { reason: "profile_denied", error: `${starter} is no longer admitted to Hermes profile ${JSON.stringify(profile)} (bridge.profile_denied); it reaches ${reach.length === 0 ? "no profile" : reach.join(", ")}` };
}

/** Whether this caller may reach `profile` (for filtering a list without refusing). */
export function mayReachProfile(ctx: Pick<BridgeContext, "profiles">, profile: string): boolean {
  return ctx.profiles === "all" || ctx.profiles.includes(profile);
}

/**
 * Refuses a tool call naming a profile the caller was not admitted to:
 * 403 `bridge.profile_denied`, naming the profiles it does reach. Every
 * bridge tool that takes a profile (or a run of one) calls this first.
 */
export function requireProfile(ctx: Pick<BridgeContext, "profiles" | "caller">, profile: string): void {
  if (mayReachProfile(ctx, profile)) return;
  const who = identityLabel({ kind: ctx.caller.kind === "operator" ? "operator" : "agent", name: ctx.caller.agent });
  throw new ApiError("bridge.profile_denied", `${who} is not admitted to Hermes profile ${JSON.stringify(profile)}; it reaches ${ctx.profiles.length === 0 ? "no profile" : (ctx.profiles as readonly string[]).join(", ")} (hal0 bridge admit NAME --profiles …)`, { profile, allowed: ctx.profiles });
}

/** The scopes of a bridge admission: /mcp/agents and each Hermes profile it reaches (`*`: every one). */
export function bridgeScopes(profiles: readonly string[]): string[] {
  return ["mcp:agents", ...profiles.map((p) => `profile:${p}`)];
}

/** Whether a token is a bridge admission (an agent token that reaches /mcp/agents). */
export function isAdmission(t: { readonly kind: string; readonly scopes: readonly string[] }): boolean {
  return t.kind === "agent" && t.scopes.includes("mcp:agents");
}
