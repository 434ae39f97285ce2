import type { z } from "zod";
import type { Dispatcher } from "../dispatch.js";
import type { Caller } from "../route.js";

/**
 * One tool of hal0-agents (`/mcp/agents`, seed 000's agent bridge): the nine
 * that run and follow a Hermes run (server/bridge/runs/) and the seven that
 * teach a Hermes profile (server/bridge/teach/). Data plus a handler: the
 * mount (server/mcp/agents.ts) registers each, advertises `input`'s JSON
 * Schema, validates arguments with it (a refusal is a coded envelope), asks
 * the caller's policy for the tool's tier (`defaultTier` is its default in
 * the policy tables) and runs `run` only when the tier lets it run now.
 */
export interface BridgeToolDef {
  readonly name: string;
  readonly defaultTier: "autonomous_read" | "autonomous_write" | "gated";
  readonly description: string;
  readonly input: z.ZodObject;
  readonly run: (ctx: BridgeContext, args: any) => Promise<unknown>;
  /**
   * A write the mount may hold for an operator (a gated tool): plans the call
   * and writes nothing — the summary and each file's diff the approval card
   * shows, and `base`, the file hashes it planned against. The mount queues
   * `{...args, base}`, so that `run` after approval refuses (a coded stale
   * refusal) when a file moved meanwhile. Absent for reads.
   */
  readonly propose?: (ctx: BridgeContext, args: any) => Promise<BridgeProposal>;
  /**
   * Optional: refuses a call that could not run (a missing profile, a bad
   * SKILL.md), with the arguments already valid. A gated call is checked
   * before it is queued and again when a person approves it.
   */
  readonly precheck?: (ctx: BridgeContext, args: any) => Promise<void> | void;
  /**
   * The write records its call's one audit row itself (with the run or the
   * skill as its target), so the mount records none for it.
   */
  readonly auditsItself?: boolean;
  /**
   * What an audit row keeps of the arguments, when not the arguments
   * themselves (a skill's or a memory entry's text: its size and hash).
   * Used by every row of the call: the write's own, a refusal, a request
   * queued for a person.
   */
  readonly auditArgs?: (args: unknown) => unknown;
  /**
   * The reply holds a Hermes profile's files as they are (a teaching read):
   * not put through the redactor, as hal0-memory's content is not. Its
   * `sha256` is of those bytes, so a text read, edited and sent back as
   * `base` must be the file's own, never one with `[redacted]` in place of
   * a value (a put of that would replace the value with the mask).
   */
  readonly asIs?: boolean;
}

/** What a write would change, before anything is written (see BridgeToolDef.propose). */
export interface BridgeProposal {
  readonly summary: string;
  readonly files: ReadonlyArray<{ readonly file: string; readonly action: "create" | "update" | "delete"; readonly before_sha256: string | null; readonly after_sha256: string | null; readonly diff: string }>;
  /** Each touched file's hash as planned (null = absent): pass back as the tool's `base` argument. */
  readonly base: Readonly<Record<string, string | null>>;
}

export interface BridgeContext {
  /** The server's stores and services (the box, audit, approvals, …). */
  readonly d: Dispatcher;
  /** Who calls: an operator, or an agent token admitted to the bridge. */
  readonly caller: Caller;
  /** The Hermes profiles this caller may reach (`"all"` for an operator); a tool naming another profile is refused. */
  readonly profiles: readonly string[] | "all";
}
