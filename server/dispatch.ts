import { createHash } from "node:crypto";
import { z } from "zod";
import { effectsOf, type Effect } from "../compiler/effects.js";
import type { Base, BoxService, JudgedProposal, ObservePass, Proposal } from "./box.js";
import { ApiError, apiErrorOf, refusing } from "./errors.js";
import { derivedOnce, isFrozenReply } from "./frozen-reply.js";
import { isMcpServerRoute, redact, redactText } from "./redact.js";
import type { Audit } from "./audit.js";
import type { Approvals } from "./approvals.js";
import type { PlanStore } from "./plans.js";
import type { Plan } from "../schema/index.js";
import { RawReply, type Caller, type Route, type RouteContext, type WriteIntent, type WriteOutcome } from "./route.js";

/** A call to a route, however it arrived (HTTP, an MCP tool, an approved request). */
export interface Call {
  readonly params: Record<string, unknown>;
  readonly query: Record<string, unknown>;
  readonly body: unknown;
  readonly caller: Caller;
  readonly requestId: string;
  /** The revision(s) the write is based on (`If-Match`, a body's or a tool's `base`); absent = no check. */
  readonly base?: Base;
  /** The MCP tool the call came through, for the audit row. */
  readonly tool?: string;
  /**
   * The digest of what the change was judged to do (`effectsDigest`): set
   * when a verdict or a person judged it, so that it commits only if it still
   * does exactly that (else 409 `config.effects_changed`, nothing written).
   */
  readonly judged?: string;
}

/** What routes reach through their context: the box, the stores, the route table itself. */
export interface Dispatcher {
  readonly box: BoxService;
  readonly audit: Audit;
  readonly plans: PlanStore;
  readonly approvals: Approvals;
  readonly routes: readonly Route[];
  /** What the reconcile loop last did, when it runs in this process. */
  readonly sweeps?: SweepStatus;
  /** The MCP servers this server serves itself (hal0-admin, hal0-memory), for /api/mcp/servers. */
  readonly bundled?: readonly import("./mcp-servers/bundled.js").BundledServer[];
  /** Credentials and `[server] auth` (identity is decided in server/identity/identify.ts). */
  readonly auth?: import("./identity/identify.js").Authenticator;
  /** hal0.db as this server opened it: every call is refused (state.db_replaced) once its path names another file or none. */
  readonly dbFile?: import("../memory/sqlite.js").DbFile;
  /** hal0-memory's engine, when this server serves it. */
  readonly memory?: import("./memory/service.js").MemoryService;
  /** Model pulls from the Hugging Face Hub (durable jobs), when this server runs them. */
  readonly pulls?: import("./pulls/service.js").PullService;
  /** Provider credentials, the server's environment and trusted upstream hosts (server/providers/probe.ts). */
  readonly providers?: import("./providers/probe.js").ProviderServices;
  /** This server's Prometheus metrics (its own registry), fed by the doors, the sweep loop and the approvals. */
  readonly metrics?: import("./metrics/registry.js").Hal0Metrics;
  /** The sweep loop's handle (service_list, service_action restart): attached by `hal0 serve`, never attached without a loop. */
  readonly loop?: import("../reconciler/loop.js").LoopControl;
  /** Runner image pulls (in memory), when this server runs them. */
  readonly images?: import("./image-pulls.js").ImagePulls;
  /** The slot scraper, its ring and the host root of the stats routes, when this server keeps them. */
  readonly stats?: import("./stats/scraper.js").SlotStats;
  /** The agent bridge's Hermes runs (durable records, bounded logs), when this server runs them. */
  /** hal0-agents' tools as internal routes (server/mcp/agents.ts), for the pages' forms that act on runs. */
  readonly bridgeRoutes?: ReadonlyMap<string, Route>;
  readonly runs?: import("./bridge/runs/service.js").RunService;
  /** `hal0 serve`'s logger: where an internal error's stack goes, under the request id its reply gives. */
  readonly logger?: Pick<import("pino").Logger, "error">;
}

export interface SweepStatus {
  readonly running: boolean;
  readonly last?: import("../reconciler/sweep.js").SweepReport;
}

/** The query of a route that takes none: any parameter is refused, as a route's own query schema refuses one it does not know (a typo is never ignored). */
const NO_QUERY = z.strictObject({});

/** The body of a route that takes none: absent, null or `{}` (what clients send for an empty POST); anything else is refused. */
const NO_BODY = z.union([z.undefined(), z.null(), z.strictObject({})]).transform(() => undefined);

/** Validated input: each part parsed by the route's zod schema, or `validation.invalid` naming every field. */
export function validate(route: Route, call: Call): Pick<RouteContext<unknown, unknown, unknown>, "params" | "query" | "body"> {
  const fields: Array<{ loc: string[]; msg: string; type: string }> = [];
  const part = <T>(where: string, schema: z.ZodType<T> | undefined, value: unknown): T => {
    if (!schema) return value as T;
    const r = schema.safeParse(value);
    if (r.success) return r.data;
    for (const issue of r.error.issues) fields.push({ loc: [where, ...issue.path.map(String)], msg: issue.message, type: issue.code });
    return undefined as T;
  };
  const params = part("path", route.params, call.params);
  const query = part("query", route.query ?? NO_QUERY, call.query ?? {});
  // A REST route that takes no body refuses one with anything in it, as a route's own schema refuses a key it does not know.
  // (hal0-memory's routes take no schema here: they read their arguments themselves, with their own refusals.)
  const body = part("body", route.body ?? (route.path.startsWith("/api/") ? NO_BODY : undefined), route.body ? (call.body ?? {}) : call.body);
  if (fields.length > 0) throw new ApiError("validation.invalid", `invalid request: ${fields.map((f) => `${f.loc.join(".")}: ${f.msg}`).join("; ")}`, { fields });
  return { params, query, body };
}

/**
 * Runs one call through its route: validate, then read / act / propose →
 * compile → plan → commit. Every write and action is audited, success or
 * not. The HTTP adapter, the MCP tools and approved requests all come here.
 */
export async function invoke(d: Dispatcher, route: Route, call: Call): Promise<unknown> {
  const started = performance.now();
  const audited = route.auditsItself !== true && (route.kind === "write" || route.kind === "action" || call.caller.via !== "rest");
  let planId: string | undefined;
  try {
    refuseMovedDb(d);
    const input = validate(route, call);
    const ctx: RouteContext<unknown, unknown, unknown> = { ...input, box: d.box, services: d, caller: call.caller, requestId: call.requestId, base: call.base };
    let result: unknown;
    if (route.kind === "write") {
      const write = async () => {
        const intent = await route.handle(ctx);
        const proposal = await d.box.propose(intent.changes, call.base);
        intent.stillHolds?.(proposal);
        planId = proposal.plan.id;
        guardOperatorOnly(proposal, call.caller);
        checkJudged(proposal, call.judged);
        return finish(d.box, intent, proposal);
      };
      result = call.base === undefined ? await d.box.unbasedWrite(write) : await write();
    } else if (route.kind === "stream") {
      throw new ApiError("route.method_not_allowed", `${route.path} is a stream; open it over HTTP`);
    } else {
      result = await route.handle(ctx);
    }
    if (audited) d.audit.record({ call, route, outcome: "ok", durationMs: performance.now() - started, planId, tool: call.tool, target: route.auditTarget?.(result) });
    return redactReply(route, result);
  } catch (thrown) {
    const err = apiErrorOf(thrown);
    if (audited) d.audit.record({ call, route, outcome: "error", errorCode: err instanceof ApiError ? err.code : "system.internal", durationMs: performance.now() - started, planId, tool: call.tool });
    throw err;
  }
}

/**
 * hal0.db removed, or another file moved over it, while hal0 serve runs: its
 * open handle would keep reading and writing the file no path names (lost at
 * the next start). Every call is refused until the restart opens the file now
 * there (the old one's -wal and -shm are removed as the server stops).
 */
function refuseMovedDb(d: Dispatcher): void {
  const state = d.dbFile?.state() ?? "same";
  if (state === "same") return;
  throw new ApiError("state.db_replaced", `${d.dbFile!.path} was ${state} while hal0 runs; nothing was read or written: restart hal0 serve to open the ${state === "removed" ? "new empty one it makes" : "file now there"} (docs/operations.md, restoring a backup)`, { path: d.dbFile!.path, state });
}

/**
 * A reply as its reader sees it: values under secret-like keys, tokens and
 * keys masked (server/redact.ts), every env value of an installed MCP
 * server's. Whatever door it leaves by (REST, an MCP tool, an approval's
 * stored result, a page) a reply is read by someone; the real values stay in
 * the files and stores for execution. Not redacted: a route that reveals a
 * secret on purpose (a minted token), hal0-memory's own content and a
 * Hermes profile's files as hal0-agents' teaching reads return them.
 */
function redactReply(route: Route, result: unknown): unknown {
  if (route.revealsSecret || route.path.startsWith("/mcp/memory")) return result;
  if (result instanceof RawReply) return new RawReply(result.contentType, redactText(result.text), result.headers);
  const allEnv = isMcpServerRoute(route.path);
  // A frozen reply never changes: its redacted copy is made once (and is frozen too).
  if (isFrozenReply(result)) return derivedOnce(allEnv ? redactedAllEnv : redacted, result, (r) => redact(r, { allEnv }) as object);
  return redact(result, { allEnv });
}

const redacted = new WeakMap<object, object>();
const redactedAllEnv = new WeakMap<object, object>();

/** Whether a call to `route` changes the tree: a write, or an action that commits a ChangeSet of its own (`proposes`). */
export function changesTree(route: Route): boolean {
  return route.kind === "write" || (route.kind === "action" && route.proposes !== undefined);
}

/**
 * Proposes a write without committing it: what plans and approval requests
 * store. For an action that commits a ChangeSet (`proposes`): that change,
 * a dry run when the call only previews (`previewOnly`).
 */
export async function proposeOnly(d: Dispatcher, route: Route, call: Call, pass?: ObservePass): Promise<{ intent: WriteIntent; proposal: Proposal }> {
  if (!changesTree(route)) throw new ApiError("validation.invalid", `${route.method} ${route.path} does not write the tree`);
  // A lower layer's coded refusal (the engine not answering while the plan observes the runtime) is that ApiError, as in `invoke`.
  return refusing(async () => {
    const input = validate(route, call);
    const ctx = { ...input, box: d.box, services: d, caller: call.caller, requestId: call.requestId, base: call.base };
    const intent: WriteIntent = route.kind === "action"
      ? { changes: await route.proposes!(ctx), dryRun: route.previewOnly?.(input as never) === true }
      : await (route as Extract<Route, { kind: "write" }>).handle(ctx);
    const proposal = await d.box.propose(intent.changes, call.base, pass);
    intent.stillHolds?.(proposal);
    guardOperatorOnly(proposal, call.caller);
    return { intent, proposal };
  });
}

/**
 * What a proposed change does (compiler/effects.ts), its stack-apply mark included: what every verdict, card and digest reads.
 * Judged against the tree on disk, or, when that does not compile, the last one that did (what runs).
 */
export function proposalEffects(proposal: JudgedProposal): Effect[] {
  return effectsOf({ before: proposal.snapshot.model ?? proposal.baseline, after: proposal.model, files: proposal.applied.files, ...(proposal.changes.stack ? { stack: proposal.changes.stack } : {}) });
}

/** The digest of what a change does: every effect line, in order (what a verdict and a person's card judge). */
export function effectsDigest(effects: readonly Effect[]): string {
  return createHash("sha256").update(effects.map((e) => `${e.class} ${e.line}`).join("\n")).digest("hex");
}

/**
 * A change judged to do one thing commits only while it does exactly that. A
 * file it edits that moved is already `config.stale` (its base); this catches
 * one it only reads (a stack applied, a profile a slot switches to).
 */
export function checkJudged(proposal: JudgedProposal, judged: string | undefined): void {
  if (judged === undefined) return;
  const effects = proposalEffects(proposal);
  if (effectsDigest(effects) === judged) return;
  throw new ApiError("config.effects_changed", "what this change does moved since it was judged (a file it reads changed); nothing was written — send it again to have it judged afresh", { effects: effects.map((e) => e.line).slice(0, 20) });
}

/**
 * Changes only an operator may make, whichever route or tool carries them
 * (and whoever approved them): `[server] auth`. An agent's change to it is
 * refused before it is queued, and again if it were ever run.
 */
export function guardOperatorOnly(proposal: Pick<Proposal, "snapshot" | "baseline" | "model">, caller: Caller): void {
  if (caller.kind === "operator") return;
  const before = (proposal.snapshot.model ?? proposal.baseline)?.settings.server.auth ?? "token";
  const after = proposal.model.settings.server.auth;
  if (before !== after) throw new ApiError("auth.operator_required", `only an operator may change [server] auth (${before} → ${after})`, { key: "server.auth" });
}

async function finish(box: BoxService, intent: WriteIntent, proposal: Proposal): Promise<unknown> {
  const files = proposal.applied.files.map((f) => f.file);
  const committed = !intent.dryRun && files.length > 0;
  // Not a dry run: committed even when no file moves (nothing is written, but the commit observers see the change).
  const revision = intent.dryRun ? proposal.snapshot.revision : await box.commit(proposal);
  const after = intent.dryRun || !intent.after ? undefined : await intent.after(box);
  const plan = writtenPlan(proposal.plan);
  const outcome: WriteOutcome = { revision, files, plan, warnings: proposal.warnings, committed, after, observed: box.observedFor(proposal) };
  return intent.reply ? intent.reply(outcome) : { revision, files, committed, plan, warnings: proposal.warnings };
}

/**
 * The plan a write's reply carries: what the write does. Its changes without the
 * no-op ones (a resource the write leaves as it was; `summary.no_op` counts them),
 * the rest of the plan as it is (id, base, settings, warnings, summary). The whole
 * plan, a before/after for every resource, is `POST /api/plans`'s (plan_propose)
 * and `GET /api/plans/{id}`'s: an edit of one slot of a box of 1000 would
 * otherwise answer with 1000 slots' views.
 */
export function writtenPlan(plan: Plan): Plan {
  return { ...plan, changes: plan.changes.filter((c) => c.action !== "no-op") };
}

export { redact };
