import { z } from "zod";
import type { ChangeSet } from "../compiler/changeset.js";
import type { Diagnostic, Plan } from "../schema/index.js";
import type { Base, BoxService, Proposal } from "./box.js";
import type { Dispatcher } from "./dispatch.js";

export type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE";

/**
 * Who is calling — the identity its credential proved (server/identity/
 * identify.ts, the one place that decides it) — `X-hal0-Private`, and
 * through which door. `agent` is the identity's name (an agent's, an
 * operator's, or `anonymous`); policy.toml's `[agents.<name>]` looks it up.
 */
export interface Caller {
  /** `system`: hal0 itself, finishing what a person approved (a pulled model's registration, `system:pull`). */
  readonly kind: "operator" | "agent" | "anonymous" | "system";
  readonly agent: string;
  readonly private: boolean;
  readonly via: "rest" | "mcp" | "approval" | "cli";
  /** An `X-hal0-Agent` that is not the identity's own name (recorded, never trusted). */
  readonly claimed?: string;
  /** The peer address the request came from. */
  readonly peer?: string;
  /** An approved request's decider (`operator:<name>`): who the call runs on behalf of. */
  readonly approvedBy?: string;
  /**
   * What an operator's token reaches when it was minted narrower than every
   * scope (`--scope rest`): a token it mints or rotates reaches no more.
   * Absent for an operator with every scope, the CLI and every other caller.
   */
  readonly scopes?: readonly string[];
}

export interface RouteContext<P, Q, B> {
  readonly params: P;
  readonly query: Q;
  readonly body: B;
  readonly box: BoxService;
  /** The stores and the route table (plans, approvals, audit). */
  readonly services: Dispatcher;
  readonly caller: Caller;
  readonly requestId: string;
  /** The revision the caller based a write on (`If-Match`, or the body's `base`); absent = no check. */
  readonly base?: Base;
}

/**
 * What a write route proposes. The pipeline (dispatch.ts) compiles the
 * change set against the tree, plans it, refuses it when invalid or stale,
 * commits it, then runs `after` and builds the reply. Routes never write.
 */
export interface WriteIntent {
  readonly changes: ChangeSet;
  /** Plan only and write nothing (e.g. `?dry_run=true`). */
  readonly dryRun?: boolean;
  /**
   * A check of the tree the change was planned from (the proposal's snapshot), before anything is committed or
   * queued: a saved plan's files as they were when it was made. Thrown, nothing is written.
   */
  readonly stillHolds?: (proposal: Proposal) => void;
  /** After the commit: a runtime step (restart, …); its result is `outcome.after`. */
  readonly after?: (box: BoxService) => Promise<unknown>;
  /** The reply body; default `{revision, files, plan}`. */
  readonly reply?: (outcome: WriteOutcome) => unknown;
}

export interface WriteOutcome {
  /** The revision after the write (the same as before for a dry run). */
  readonly revision: string;
  /** Files the change set touched. */
  readonly files: readonly string[];
  readonly plan: Plan;
  readonly warnings: readonly Diagnostic[];
  readonly committed: boolean;
  readonly after?: unknown;
  /** What the commit observers reported (`hermes_sync` when an installed MCP server's file changed, …). */
  readonly observed: Readonly<Record<string, unknown>>;
}

interface RouteBase<P, Q, B> {
  readonly method: Method;
  /** Seed 001's template: `/api/slots/{name}`. */
  readonly path: string;
  readonly summary: string;
  readonly params?: z.ZodType<P>;
  readonly query?: z.ZodType<Q>;
  readonly body?: z.ZodType<B>;
  /** The MCP tool names that alias this route (seed 001); the next layer builds its tools from these. */
  readonly tools?: readonly string[];
  /**
   * A host probe seed 001 runs in process (its tier tables say `in-process`):
   * an MCP tool only, never mounted as REST; its path only names it.
   */
  readonly inProcess?: boolean;
  /**
   * A route with no tool of its own that the policy judges as this tool (its
   * tier for the caller), without being its MCP alias: `GET /metrics` is
   * read by whoever may read `metrics_snapshot`.
   */
  readonly policyTool?: string;
  /**
   * What the reply holds that another route's reply holds too (`hal0-log`:
   * hal0's own log lines, whether read from its file or from the journal).
   * A call is judged by the strictest tier, for the caller, of every tool
   * whose route reveals the same, so a looser tool does not read what a
   * stricter one guards (server/identity/access.ts).
   */
  readonly reveals?: string;
  /**
   * What the reply may hold besides, that other routes `reveal` as their own
   * (`slot-log`: logs_tail's `?slot=` adds that slot's runner log, slot_logs'
   * reply): a call is judged with those routes' tools too. One way: those
   * routes are not judged with this one, as they show less.
   */
  readonly alsoReveals?: readonly string[];
  /** The tools of the other routes that reveal what this one does (or `alsoReveals`): filled in by the route table (routes/index.ts). */
  readonly revealPeers?: readonly string[];
  /** A bare-list reply is wrapped as `{<listKey>: [...], count}` by the MCP layer. */
  readonly listKey?: string;
  /** Success status; default 200 (201 for creates is declared here). */
  readonly status?: number;
  /**
   * For a gated action (not a file edit): refuses a call that could not run,
   * before it is queued for a person and again when it is approved.
   */
  readonly precheck?: (ctx: RouteContext<P, Q, B>) => Promise<void> | void;
  /**
   * For a gated action: what approving it would do, for the card (a summary
   * and one line each: a file's change and its diff), planned without
   * writing. `body`, when given, is what runs after approval instead of the
   * call's own (the same arguments plus what was planned against, so a file
   * that moved meanwhile is refused as stale rather than overwritten).
   */
  readonly describe?: (ctx: RouteContext<P, Q, B>) => Promise<{ summary: string; effects: readonly string[]; body?: unknown }>;
  /**
   * For an action that can only preview (its `dry_run`): true when this call
   * changes nothing, so an agent's runs at once even where the tool is gated,
   * with what the real call would meet beside it (server/verdict.ts).
   */
  readonly previewOnly?: (input: { params: P; query: Q; body: B }) => boolean;
  /**
   * The reply carries a secret on purpose (a token minted or rotated, shown
   * once; a Hermes profile's files as a teaching read returns them) and is
   * not redacted; every other reply is (dispatch.ts).
   */
  readonly revealsSecret?: boolean;
  /**
   * Every value of the body is a secret (a credential being stored), whatever
   * its key is called: the audit row and every read of a stored approval mask
   * the body whole. The stored request keeps it, for running it when approved.
   */
  readonly secretBody?: boolean;
  /**
   * What the audit row records of the body, when not the body itself:
   * hal0-memory's tools carry memory (a fact's text, a query, a directive's
   * content), which is readable only where that memory is (another agent's
   * private dataset never), while audit rows are read by any caller; their
   * rows keep each such field's size, not its words.
   */
  readonly auditBody?: (body: unknown) => unknown;
  /** The audit row's target from the reply of a call that ran, when the path names none (an install: the server it installed). */
  readonly auditTarget?: (reply: unknown) => string | undefined;
  /**
   * The handler records the call's one audit row itself (ok or refused),
   * with a target it learns as it runs (the run it started, the skill it
   * wrote); `invoke` records none, so a call is never audited twice.
   */
  readonly auditsItself?: boolean;
  /**
   * A tool's own body where it differs from the route's: what the tool may
   * send (strict), parsed into the body the route gets. An alias that takes
   * less than its route (`model_assign`: only `model`) is refused with
   * validation.invalid for anything more; one that names a field as seed
   * 003 does (`model_swap`'s `model_id`) is translated.
   */
  readonly toolBodies?: Readonly<Record<string, z.ZodType>>;
  /**
   * The fields a body that passes them through (a slot file's keys, which the
   * compiler judges) takes, for its tools to advertise as hints: never used
   * to parse a call. Its required fields are advertised as required.
   */
  readonly bodyHints?: z.ZodType;
}

/** A read: no side effect. */
export interface ReadRoute<P, Q, B> extends RouteBase<P, Q, B> {
  readonly kind: "read";
  readonly handle: (ctx: RouteContext<P, Q, B>) => unknown;
}

/** A write: proposes a ChangeSet, the pipeline does the rest. */
export interface WriteRoute<P, Q, B> extends RouteBase<P, Q, B> {
  readonly kind: "write";
  readonly handle: (ctx: RouteContext<P, Q, B>) => WriteIntent | Promise<WriteIntent>;
}

/** An action with an effect that is not a file edit (approve, restart, reload, test a connection); audited like a write. */
export interface ActionRoute<P, Q, B> extends RouteBase<P, Q, B> {
  readonly kind: "action";
  readonly handle: (ctx: RouteContext<P, Q, B>) => unknown;
  /**
   * An action that also commits a ChangeSet of its own (a model store
   * migration: files moved, then the store and their paths): the change it
   * would commit, planned and not run. An agent's call is judged by its
   * effects as a write's is (server/verdict.ts), so no tool's tier lets a
   * privileged change through without a person.
   */
  readonly proposes?: (ctx: RouteContext<P, Q, B>) => Promise<ChangeSet>;
}

/** A long-lived reply (server-sent events); gets the raw h3 event. Never an MCP tool. */
export interface StreamRoute<P, Q, B> extends RouteBase<P, Q, B> {
  readonly kind: "stream";
  readonly handle: (ctx: RouteContext<P, Q, B>, event: import("h3").H3Event) => Promise<void>;
}

export type Route<P = any, Q = any, B = any> = ReadRoute<P, Q, B> | WriteRoute<P, Q, B> | ActionRoute<P, Q, B> | StreamRoute<P, Q, B>;

/** Declares a route with its types inferred from its zod schemas. */
export function defineRoute<P = Record<string, never>, Q = Record<string, never>, B = undefined>(route: Route<P, Q, B>): Route {
  return route as Route;
}

/** `METHOD /path`, as seed 001 writes a route. */
export function routeId(route: Pick<Route, "method" | "path">): string {
  return `${route.method} ${route.path}`;
}

/** A reply that is not JSON (JSON lines, a log tail): HTTP sends it as is; the MCP layer returns it as text. */
export class RawReply {
  constructor(readonly contentType: string, readonly text: string, readonly headers: Readonly<Record<string, string>> = {}) {}
}

/**
 * A body's hints for a sparse edit (`bodyHints`): each field of `o` optional
 * and also null (an edit's null removes the key), without the default the
 * file gives it; a table named in `tables` is sparse in turn (each of its keys
 * set on its own).
 */
export function sparseFields(o: z.ZodObject, tables: ReadonlySet<string> = new Set()): z.ZodObject {
  return z.object(Object.fromEntries(Object.entries(o.shape).map(([k, v]) => {
    const inner = bare(v as z.ZodType);
    return [k, (inner instanceof z.ZodObject && tables.has(k) ? sparseFields(inner) : inner).nullable().optional()];
  })));
}

/** A field's own type, without the default or optionality its file gives it. */
function bare(t: z.ZodType): z.ZodType {
  let v: z.ZodType = t;
  while (v instanceof z.ZodDefault || v instanceof z.ZodPrefault || v instanceof z.ZodOptional) v = v.unwrap() as z.ZodType;
  return v;
}
