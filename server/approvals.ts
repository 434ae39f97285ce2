import { createHash, randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { readlinkSync } from "node:fs";
import { hostname } from "node:os";
import { bootId, isLive, procStatNow, sameBoot } from "../reconciler/drivers/proc.js";
import { canonicalJson } from "../compiler/index.js";
import { effectLines, effectVerdict } from "./verdict.js";
import type { Db } from "./db.js";
import { changesTree, checkJudged, effectsDigest, invoke, proposalEffects, proposeOnly, validate, type Call, type Dispatcher } from "./dispatch.js";
import { checkPathArgs } from "./path-args.js";
import { routeFloor, toolTier } from "./identity/access.js";
import { ApiError } from "./errors.js";
import { setBackPast } from "./clock-step.js";
import { isMcpServerRoute, maskAll, redact, redactText } from "./redact.js";
import { routeId, type Caller, type Route } from "./route.js";
import type { ApprovalState } from "./approval-states.js";

/** Who decides a request: only a person, i.e. an operator identity (REST, the CLI, the web page). */
export interface Decider {
  readonly kind: "operator";
  readonly name: string;
  /** The surfaces the deciding operator's token reaches, when it was minted narrower than every one (Caller.scopes). */
  readonly scopes?: readonly string[];
}

export { APPROVAL_STATES, type ApprovalState } from "./approval-states.js";

export interface Approval {
  readonly id: string;
  readonly tool: string;
  readonly route: string;
  readonly args: { params: Record<string, unknown>; query: Record<string, unknown>; body: unknown };
  readonly caller: Caller;
  readonly plan_id: string | null;
  readonly base_revision: string | null;
  readonly summary: string;
  /** What the change does, one line each ("sets env NODE_OPTIONS for slot utility", …): what the card leads with. */
  readonly effects: readonly string[];
  readonly state: ApprovalState;
  readonly reason: string | null;
  readonly created_at: string;
  readonly expires_at: string;
  readonly decided_at: string | null;
  readonly decided_by: string | null;
  readonly result: unknown;
  readonly error: unknown;
}

export type ApprovalEvent = { type: "enqueued" | "approved" | "denied" | "executed" | "failed" | "expired" | "stale"; approval: Approval };

/** Requests one caller may have waiting for a person at once; one more is 429 `approvals.too_many_pending`. */
export const PENDING_PER_CALLER = 50;

/**
 * Gated calls waiting for a person (DESIGN.md §4), in SQLite so they survive
 * a restart: pending → approved → executing → executed | failed, and
 * pending → denied | expired | stale. A request stores the call, the caller,
 * the plan it would make and the revision it was based on; approving
 * re-validates and re-plans it against that revision and refuses it (stale,
 * naming what moved) when the files it edits changed meanwhile. An approved
 * request names the process running it (`executor`): one left approved or
 * executing by a process that is gone (killed, crashed, a Ctrl-C of `hal0
 * agent approvals approve`) is failed, `approvals.interrupted`, at the next read.
 */
export class Approvals extends EventEmitter<{ event: [ApprovalEvent] }> {
  constructor(
    private readonly db: Db,
    private readonly dispatcher: Dispatcher,
    private readonly routeFor: (route: string) => Route | undefined,
    private readonly ttlS: () => number,
    private readonly now: () => number = Date.now,
  ) {
    super();
    // One listener per open events stream (an inbox tab, an operator's client): any number is expected, not a leak.
    this.setMaxListeners(0);
  }

  /** Queues a call (or returns the pending one with exactly the same tool and args, once the call passed the same checks as a fresh one). Its arguments are validated and a write is planned first: an invalid one is refused now. */
  async enqueue(tool: string, route: Route, call: Call): Promise<Approval> {
    // Arguments the route would refuse are refused now (validation.invalid), never handed to a person to approve.
    validate(route, call);
    this.expireDue();
    const args: { params: Record<string, unknown>; query: Record<string, unknown>; body: unknown } = { params: call.params, query: call.query, body: call.body ?? null };
    // Per caller: two agents asking the same thing get two requests, each decided on its own.
    // Hashed: the args (a credential being stored, say) are kept once, in `args`, for running the request.
    const dedup = createHash("sha256").update(`${call.caller.kind}:${call.caller.agent} ${tool} ${canonicalJson(args)}`).digest("hex");
    // The caller's limit is met now, before anything is planned. A copy of a pending request is not returned yet: it
    // meets every check a fresh call meets first (a tool policy.toml has blocked since it asked is refused, not handed
    // the pending request's id), and is found again below.
    this.waitingAs(dedup, call.caller);
    let planId: string | null = null;
    // Several revisions (an If-Match list): the one it was planned on below, which held.
    let base: string | null = typeof call.base === "string" ? call.base : null;
    let summary = `${tool} ${Object.values(call.params).join("/")}`.trim();
    let effects: string[] = [];
    let judged: string | null = null;
    if (changesTree(route)) {
      // An action that commits a ChangeSet is checked as it would run, then carded by what its change does, as a write is.
      if (route.kind !== "write") await precheck(this.dispatcher, route, call);
      const { intent, proposal } = await proposeOnly(this.dispatcher, route, call);
      planId = proposal.plan.id;
      base ??= proposal.snapshot.revision;
      summary = intent.changes.summary ?? `${summary}: ${proposal.applied.files.map((f) => f.file).join(", ")}`;
      summary = `${summary} — ${deltaSummary(proposal.delta)}`;
      const all = proposalEffects(proposal);
      effects = effectLines(all);
      judged = effectsDigest(all);
    } else {
      await precheck(this.dispatcher, route, call);
      const described = await describe(this.dispatcher, route, call);
      if (described) {
        summary = described.summary;
        effects = [...described.effects];
        if (described.body !== undefined) args.body = described.body;
      }
    }
    // Asked again now that it is planned: calls sent at once (a client's retries, a loop) were planned side by side, and
    // one queued meanwhile may be this very call, or the caller's last place. Looked up and inserted with nothing awaited
    // between, so the copies of one call are one request and no caller passes its limit.
    const queued = this.waitingAs(dedup, call.caller);
    if (queued) return this.get(queued.id)!;
    const id = `apr_${randomBytes(8).toString("hex")}`;
    const at = this.now();
    this.db.prepare(`INSERT INTO approvals (id, tool, route, args, dedup_key, caller, plan_id, base_revision, summary, effects, judged, state, created_at, expires_at)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)`)
      .run(id, tool, routeId(route), JSON.stringify(args), dedup, JSON.stringify(call.caller), planId, base, summary, JSON.stringify(effects), judged, iso(at), iso(at + this.ttlS() * 1000));
    return this.emitNow("enqueued", id);
  }

  /**
   * The pending request that is this call (the same caller, tool and args), or
   * none; refused (429 `approvals.too_many_pending`) when the caller already
   * has PENDING_PER_CALLER requests waiting: a caller in a loop (each ask a
   * little different) must not bury the person's inbox.
   */
  private waitingAs(dedup: string, caller: Caller): { id: string } | undefined {
    const same = this.db.prepare("SELECT id FROM approvals WHERE dedup_key = ? AND state = 'pending'").get(dedup) as { id: string } | undefined;
    if (same) return same;
    const waiting = (this.db.prepare("SELECT count(*) AS n FROM approvals WHERE state = 'pending' AND json_extract(caller, '$.kind') = ? AND json_extract(caller, '$.agent') = ?")
      .get(caller.kind, caller.agent) as { n: number }).n;
    if (waiting >= PENDING_PER_CALLER) {
      throw new ApiError("approvals.too_many_pending", `${caller.kind}:${caller.agent} already has ${waiting} requests waiting for a person; wait for decisions on them (or for them to expire) before asking again`, { pending: waiting, max: PENDING_PER_CALLER });
    }
    return undefined;
  }

  /** One request as every reader sees it (API, inbox, events, CLI): values under secret-like keys are `[redacted]`. */
  get(id: string): Approval | undefined {
    const a = this.unredacted(id);
    return a ? redacted(a, this.routeFor(a.route)) : undefined;
  }

  /** The request as stored, secrets and all: only for running it (approve) and re-planning it (the inbox's plan). */
  unredacted(id: string): Approval | undefined {
    const row = this.db.prepare("SELECT * FROM approvals WHERE id = ?").get(id) as Row | undefined;
    return row ? fromRow(row) : undefined;
  }

  /** One page of `list(state)` (oldest first) and how many there are in all. */
  page(state: ApprovalState | undefined, limit: number, offset: number): { items: Approval[]; total: number } {
    this.expireDue();
    const where = state ? "WHERE state = ?" : "";
    const args = state ? [state] : [];
    const total = (this.db.prepare(`SELECT COUNT(*) AS n FROM approvals ${where}`).get(...args) as { n: number }).n;
    const rows = this.db.prepare(`SELECT * FROM approvals ${where} ORDER BY created_at, id LIMIT ? OFFSET ?`).all(...args, limit, offset) as Row[];
    return { items: this.readable(rows), total };
  }

  list(state?: ApprovalState): Approval[] {
    this.expireDue();
    const rows = (state
      ? this.db.prepare("SELECT * FROM approvals WHERE state = ? ORDER BY created_at, id").all(state)
      : this.db.prepare("SELECT * FROM approvals ORDER BY created_at, id").all()) as Row[];
    return this.readable(rows);
  }

  /** Stored rows as a reader sees them: each request's secrets masked as its route masks them. */
  private readable(rows: readonly Row[]): Approval[] {
    return rows.map((r) => {
      const a = fromRow(r);
      return redacted(a, this.routeFor(a.route));
    });
  }

  /**
   * The `n` requests decided last (every state but pending), the last decided
   * first (one without a decision time by when it was made; ties newest
   * first), as `list` reads them: the inbox's "recently decided", which reads
   * these rows and not the whole history of the queue.
   */
  recentlyDecided(n: number): Approval[] {
    this.expireDue();
    const rows = this.db.prepare("SELECT * FROM approvals WHERE state != 'pending' ORDER BY COALESCE(decided_at, created_at) DESC, created_at DESC, id DESC LIMIT ?").all(n) as Row[];
    return this.readable(rows);
  }

  /**
   * Approves and runs a pending request. Resolves to its final state
   * (executed, failed or stale). The decision is one conditional update, so
   * two deciders racing (even in two processes) give one decision; the other
   * gets `approvals.already_resolved`.
   */
  async approve(id: string, decider: Decider): Promise<Approval> {
    const by = decider.name;
    const approval = this.pending(id, decider);
    reachesSurface(decider, approval);
    const route = this.routeFor(approval.route);
    if (route && changesTree(route)) await this.refuseBrokenSince(approval);
    this.decide(id, "approved", by);
    if (!route) return this.finish(id, "failed", by, { error: { code: "system.internal", message: `route ${approval.route} no longer exists` } });
    this.emitNow("approved", id);
    // What the person approved is what runs: the revision it was planned at, and what it was judged to do (a request queued before hal0 kept that has none).
    const judged = this.judgedOf(id);
    const call: Call = { ...approval.args, body: approval.args.body ?? undefined, caller: { ...approval.caller, via: "approval", approvedBy: `operator:${by}` }, requestId: id, base: approval.base_revision ?? undefined, tool: approval.tool, ...(judged ? { judged } : {}) };
    try {
      requesterLive(this.dispatcher, approval.caller, approval.route);
      // policy.toml as it is now: a tool blocked for the agent since it asked is not run, even approved (blocked is never).
      const policy = approval.caller.kind === "agent" ? (await this.dispatcher.box.model()).policy : undefined;
      if (policy && approval.tool !== "") toolTier(policy, route, approval.tool, approval.caller);
      // …nor one whose route another tool aliases that is blocked for it now, where a fresh call meets every alias (routeFloor: a write, and any REST call).
      if (policy && (approval.tool === "" || changesTree(route) || approval.caller.via === "rest")) routeFloor(route, approval.caller, policy);
      // The same checks as when it was queued: path arguments, then the re-plan (a write) or the route's precheck (an action).
      if (approval.caller.via === "mcp") checkPathArgs(route, approval.args.params);
      if (route.kind !== "write") await precheck(this.dispatcher, route, call);
      if (changesTree(route)) {
        const { proposal } = await proposeOnly(this.dispatcher, route, call);
        // …and so is a change that does what a tool blocked since would (a slot deleted, a model removed).
        if (policy) effectVerdict(proposal, "gated", approval.caller, policy);
        checkJudged(proposal, call.judged);
      }
    } catch (err) {
      if (err instanceof ApiError && STALE_CODES.has(err.code)) return this.finish(id, "stale", by, { reason: staleReason(err) });
      return this.finish(id, "failed", by, { error: errorOf(err) });
    }
    this.db.prepare("UPDATE approvals SET state = 'executing' WHERE id = ?").run(id);
    try {
      const result = await invoke(this.dispatcher, route, call);
      return this.finish(id, "executed", by, { result });
    } catch (err) {
      if (err instanceof ApiError && STALE_CODES.has(err.code)) return this.finish(id, "stale", by, { reason: staleReason(err) });
      return this.finish(id, "failed", by, { error: errorOf(err) });
    }
  }

  /**
   * A tree that stopped compiling since the request was made (a person's edit of another file, saved half done)
   * refuses the approval, not the request: no write commits on it, and the request would otherwise end stale for a
   * reason it did not cause. 422 `config.invalid` naming the files, and the request stays pending to approve once they
   * are fixed. Errors the tree already had when it was asked are the request's to meet (it may be their fix).
   */
  private async refuseBrokenSince(approval: Approval): Promise<void> {
    const snap = await this.dispatcher.box.snapshot();
    const errors = snap.diagnostics.filter((d) => d.severity === "error");
    if (errors.length === 0) return;
    const base = approval.base_revision === null ? undefined : this.dispatcher.box.revisionFiles(approval.base_revision);
    const since = errors.filter((d) => d.file !== undefined && (base === undefined || base[d.file] !== snap.files[d.file]));
    if (since.length === 0) return;
    const files = [...new Set(since.map((d) => d.file!))].sort();
    throw new ApiError("config.invalid", `the config tree has errors in ${files.join(", ")}, which changed since request ${approval.id} was made; nothing was decided and the request stays pending: fix ${files.length === 1 ? "it" : "them"} (hal0 validate), then approve it again`, { id: approval.id, files, diagnostics: since });
  }

  deny(id: string, decider: Decider, reason?: string): Approval {
    reachesSurface(decider, this.pending(id, decider));
    const done = this.db.prepare("UPDATE approvals SET state = 'denied', decided_at = ?, decided_by = ?, reason = ? WHERE id = ? AND state = 'pending'").run(iso(this.now()), decider.name, reason ?? null, id);
    if (done.changes !== 1) throw this.resolvedError(id);
    this.scrubSecretBody(id);
    this.dispatcher.metrics?.observeDecision("denied");
    return this.emitNow("denied", id);
  }

  /**
   * Pending requests past their TTL become expired, and so do those asked at a
   * time still to come (the clock set back since); approved ones whose
   * process is gone before they ended become failed (`settleInterrupted`).
   */
  expireDue(): void {
    this.settleInterrupted();
    const now = iso(this.now());
    // One asked "after" now (by more than a synchronised clock's steps, CLOCK_STEP_GRACE_MS) was asked before the clock was set
    // back (NTP, `date -s`): how long it has waited is not known, so it is not kept for its whole time to live again on top of it.
    const ahead = setBackPast(this.now());
    const due = this.db.prepare("SELECT id, created_at > ? AS ahead FROM approvals WHERE state = 'pending' AND (expires_at <= ? OR created_at > ?)").all(ahead, now, ahead) as Array<{ id: string; ahead: number }>;
    for (const { id, ahead } of due) {
      const reason = ahead === 1 ? `the clock was set back past the time it was asked, so how long it waited is not known; ask again` : "its time to live ([approvals] ttl_s) ran out";
      // Only if still pending: another process sharing hal0.db (hal0 agent approvals) may have decided it since the SELECT.
      const done = this.db.prepare("UPDATE approvals SET state = 'expired', reason = ? WHERE id = ? AND state = 'pending'").run(reason, id);
      if (done.changes !== 1) continue;
      this.scrubSecretBody(id);
      this.dispatcher.metrics?.observeDecision("expired");
      this.emitNow("expired", id);
    }
  }

  /**
   * A request approved by a process that stopped before it ended (killed,
   * crashed, a Ctrl-C of `hal0 agent approvals approve`) would read approved
   * or executing for ever, and its agent wait for a result that never comes:
   * it is failed, `approvals.interrupted`. Whether it took effect is not known
   * (a write may have committed), so the error says to look. A live process's
   * request (this one's, another `hal0` on the same database) is left to it.
   */
  private settleInterrupted(): void {
    const running = this.db.prepare("SELECT id, executor FROM approvals WHERE state IN ('approved', 'executing')").all() as Array<{ id: string; executor: string | null }>;
    for (const { id, executor } of running) {
      const by = executorOf(executor);
      if (by !== undefined && stillRunning(by)) continue;
      const error = {
        code: "approvals.interrupted",
        message: `the process that ran this approved request${by ? ` (pid ${by.pid})` : ""} stopped before it ended; whether it took effect is unknown: check the box (hal0 plan, GET /api/slots) before asking again`,
      };
      const done = this.db.prepare("UPDATE approvals SET state = 'failed', error = ? WHERE id = ? AND state IN ('approved', 'executing')").run(JSON.stringify(error), id);
      if (done.changes !== 1) continue;
      this.scrubSecretBody(id);
      this.emitNow("failed", id);
    }
  }

  private judgedOf(id: string): string | undefined {
    return (this.db.prepare("SELECT judged FROM approvals WHERE id = ?").get(id) as { judged: string | null } | undefined)?.judged ?? undefined;
  }

  private pending(id: string, decider: Decider): Approval {
    if (decider.kind !== "operator") throw new ApiError("auth.operator_required", "only an operator may approve or deny a request");
    this.expireDue();
    const a = this.unredacted(id);
    if (!a) throw new ApiError("approvals.not_found", `no approval request ${id}`, { id });
    if (a.state !== "pending") throw new ApiError("approvals.already_resolved", `approval ${id} is already ${a.state}`, { id, state: a.state });
    if (a.caller.kind === "operator" && a.caller.agent === decider.name) throw new ApiError("approvals.self_approval", `operator ${decider.name} made request ${id} and cannot decide it too`, { id });
    return a;
  }

  /** pending → `state`, only if it is still pending: the one decision, made by this process (which runs it). */
  private decide(id: string, state: ApprovalState, by: string): void {
    const done = this.db.prepare("UPDATE approvals SET state = ?, decided_at = ?, decided_by = ?, executor = ? WHERE id = ? AND state = 'pending'").run(state, iso(this.now()), by, thisExecutor(), id);
    if (done.changes !== 1) throw this.resolvedError(id);
    this.dispatcher.metrics?.observeDecision("approved");
  }

  private resolvedError(id: string): ApiError {
    const state = this.unredacted(id)?.state ?? "gone";
    return new ApiError("approvals.already_resolved", `approval ${id} is already ${state}`, { id, state });
  }

  private finish(id: string, state: "executed" | "failed" | "stale", by: string, out: { result?: unknown; error?: unknown; reason?: string }): Approval {
    this.db.prepare("UPDATE approvals SET state = ?, decided_at = coalesce(decided_at, ?), decided_by = coalesce(decided_by, ?), result = ?, error = ?, reason = ? WHERE id = ?")
      // Kept redacted: a result or error is only ever read, never run (the route's reply is already redacted; its error may quote a value).
      .run(state, iso(this.now()), by, out.result === undefined ? null : JSON.stringify(redact(out.result)), out.error === undefined ? null : JSON.stringify(redact(out.error)), out.reason === undefined ? null : redactText(out.reason), id);
    this.scrubSecretBody(id);
    return this.emitNow(state, id);
  }

  /**
   * A `secretBody` route's stored body (a credential being stored) is kept
   * only while the request may still run: once it is decided and done
   * (executed, failed, stale, denied, expired) it is masked in the table too.
   */
  private scrubSecretBody(id: string): void {
    const a = this.unredacted(id);
    if (!a || this.routeFor(a.route)?.secretBody !== true || a.args.body === null || a.args.body === undefined) return;
    this.db.prepare("UPDATE approvals SET args = ? WHERE id = ?").run(JSON.stringify({ ...a.args, body: maskAll(a.args.body) }), id);
  }

  private emitNow(type: ApprovalEvent["type"], id: string): Approval {
    const approval = this.get(id)!;
    this.emit("event", { type, approval });
    return approval;
  }
}

/**
 * The process running an approved request: its host, its pid namespace (a
 * container's pids are not this one's) and its pid with its /proc start time
 * (so a reused pid is not taken for it), and the boot it ran in (a start time
 * counts clock ticks after boot: after a restart of the host, a serve started
 * at boot may well get the pid and start time the one before had).
 */
interface Executor {
  readonly host: string;
  readonly ns: string | null;
  /** /proc/sys/kernel/random/boot_id; absent in a request an older hal0 approved. */
  readonly boot?: string | null;
  readonly pid: number;
  readonly start: number | null;
}

let executorJson: string | undefined;

function thisExecutor(): string {
  executorJson ??= JSON.stringify({ host: hostname(), ns: pidNamespace(), boot: bootId() ?? null, pid: process.pid, start: procStatNow(process.pid)?.startTime ?? null } satisfies Executor);
  return executorJson;
}

function pidNamespace(): string | null {
  try {
    return readlinkSync("/proc/self/ns/pid");
  } catch {
    return null;
  }
}

function executorOf(json: string | null): Executor | undefined {
  if (json === null) return undefined; // decided before hal0 recorded who runs a request
  try {
    return JSON.parse(json) as Executor;
  } catch {
    return undefined;
  }
}

/** Whether the process still runs; one this process cannot look at (another host, another pid namespace) is taken to. */
function stillRunning(e: Executor): boolean {
  if (e.host !== hostname() || (e.ns ?? null) !== pidNamespace()) return true;
  if (!sameBoot(e.boot ?? undefined)) return false; // it ran before the host restarted: no process of this boot is it
  const stat = procStatNow(e.pid);
  return isLive(stat) && (e.start === null || stat.startTime === e.start);
}

/** The surface a request of each mount's internal routes acts on: an operator token kept from it approves none of them. */
const SURFACES = [["/mcp/memory/", "mcp:memory"], ["/mcp/agents/", "mcp:agents"]] as const;

/**
 * The surface (`mcp:memory`, `mcp:agents`) a request of `route` acts on that a
 * token of `scopes` does not reach, if any: the route is one of those mounts'
 * internal routes and the token was minted without it (undefined `scopes`
 * reach every surface).
 */
export function surfaceMissed(scopes: readonly string[] | undefined, route: string): string | undefined {
  if (scopes === undefined) return undefined;
  const needed = surfaceOf(route);
  return needed !== undefined && !scopes.includes(needed) ? needed : undefined;
}

/** The surface (`mcp:memory`, `mcp:agents`) a request of `route` (`METHOD /path`) acts on, when it is one of those mounts' internal routes. */
function surfaceOf(route: string): (typeof SURFACES)[number][1] | undefined {
  const path = route.slice(route.indexOf(" ") + 1);
  return SURFACES.find(([prefix]) => path.startsWith(prefix))?.[1];
}

/**
 * An operator whose token was minted without the surface a request acts on
 * (a `--scope rest` CI token, and a hal0-memory deletion or a Hermes skill
 * write) cannot run it by approving it, as it cannot call it itself, nor
 * deny it, reading only its masked card: 403 `auth.scope_denied`, the
 * request left pending for one who can decide it.
 */
function reachesSurface(decider: Decider, approval: Pick<Approval, "route">): void {
  const needed = surfaceMissed(decider.scopes, approval.route);
  if (needed === undefined) return;
  throw new ApiError("auth.scope_denied", `the token of operator:${decider.name} does not reach ${needed}, which request ${approval.route} acts on; approve it with an operator token that reaches it`, { needed, scopes: decider.scopes });
}

/** Refusals that mean "the box moved since this was asked": the request is stale, not failed. */
const STALE_CODES = new Set(["config.stale", "config.effects_changed", "config.invalid", "config.unknown_revision", "plan.stale"]);

/**
 * An agent whose every token was revoked since it asked (`hal0 bridge revoke`,
 * `hal0 token revoke`) no longer acts on this box: its request does not run
 * (failed, `auth.invalid_token`). So is a request whose agent has no live
 * token reaching its surface any more: hal0-memory's or hal0-agents' for their
 * requests (`route`), else the door it asked through, `rest` or hal0-admin's
 * `mcp:admin` (its `mcp:memory` token revoked, one `--scope mcp:admin` kept; its
 * `rest` token revoked, one `--scope mcp:memory` kept): a fresh call of it is
 * refused so. A rotated token leaves a live one of the same name and scopes,
 * so a rotation keeps the request; an agent that never had a token (a name
 * claimed while `[server] auth = "off"`) is not judged by tokens.
 */
function requesterLive(d: Dispatcher, caller: Caller, route: string): void {
  const tokens = d.auth?.tokens;
  if (caller.kind !== "agent" || tokens === undefined) return;
  const standing = tokens.standing("agent", caller.agent);
  if (standing === "none") return;
  if (standing === "revoked") throw new ApiError("auth.invalid_token", `agent:${caller.agent} has no live token any more (revoked since it asked); its request does not run`, { agent: caller.agent });
  // The surface a fresh call of it needs: hal0-memory's or hal0-agents' own, else the door it came through (REST, or hal0-admin over MCP).
  const needed = surfaceOf(route) ?? (caller.via === "rest" ? "rest" : caller.via === "mcp" ? "mcp:admin" : undefined);
  if (needed === undefined || tokens.standing("agent", caller.agent, needed) === "live") return;
  throw new ApiError("auth.invalid_token", `agent:${caller.agent} has no live token reaching ${needed} any more (revoked since it asked), which request ${route} acts on; its request does not run`, { agent: caller.agent, needed });
}

async function precheck(d: Dispatcher, route: Route, call: Call): Promise<void> {
  if (!route.precheck) return;
  const input = validate(route, call);
  await route.precheck({ ...input, box: d.box, services: d, caller: call.caller, requestId: call.requestId, base: call.base });
}

/** A gated action's card: what it would do, planned and not run (Route.describe). */
async function describe(d: Dispatcher, route: Route, call: Call): Promise<{ summary: string; effects: readonly string[]; body?: unknown } | undefined> {
  if (!route.describe) return undefined;
  const input = validate(route, call);
  return route.describe({ ...input, box: d.box, services: d, caller: call.caller, requestId: call.requestId, base: call.base });
}

/** What the request changes in the plan, e.g. `plan: + slot.scratch, ~ settings`. */
function deltaSummary(delta: ReadonlyArray<{ address: string; action: string }>): string {
  if (delta.length === 0) return "plan: no runtime change";
  const sign: Record<string, string> = { create: "+", update: "~", replace: "-/+", delete: "-" };
  return `plan: ${delta.map((c) => `${sign[c.action] ?? c.action} ${c.address}`).join(", ")}`;
}

function staleReason(err: ApiError): string {
  const files = Array.isArray(err.details.files) ? (err.details.files as string[]) : Array.isArray(err.details.moved) ? (err.details.moved as string[]) : [];
  if (files.length > 0) return `the files it edits changed since it was requested: ${files.join(", ")}`;
  if (err.code === "config.effects_changed" && Array.isArray(err.details.effects)) {
    return `what it does changed since it was requested (a file it reads moved); it would now: ${(err.details.effects as string[]).join("; ")}`;
  }
  return `it no longer applies: ${err.message}`;
}

function errorOf(err: unknown): { code: string; message: string } {
  return err instanceof ApiError ? { code: err.code, message: err.message } : { code: "system.internal", message: (err as Error).message };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

type Row = Omit<Approval, "args" | "caller" | "result" | "error" | "effects"> & { args: string; caller: string; result: string | null; error: string | null; effects: string | null };

/** What readers see: args, result and error with secret-like values masked (an MCP server route's env whole, a `secretBody` route's body whole), the summary's and reason's secrets too. */
function redacted(a: Approval, route: Pick<Route, "secretBody"> | undefined): Approval {
  const options = { allEnv: isMcpServerRoute(a.route.slice(a.route.indexOf(" ") + 1)) };
  const args = route?.secretBody === true ? { ...a.args, body: maskAll(a.args.body) } : a.args;
  return {
    ...a, args: redact(args, options) as Approval["args"], result: redact(a.result, options), error: redact(a.error, options),
    summary: redactText(a.summary), effects: a.effects.map(redactText), reason: a.reason === null ? null : redactText(a.reason),
  };
}

function fromRow(r: Row): Approval {
  const { dedup_key: _d, judged: _j, executor: _e, ...rest } = r as Row & { dedup_key?: string; judged?: string | null; executor?: string | null };
  return { ...rest, args: JSON.parse(r.args), caller: JSON.parse(r.caller), effects: r.effects === null ? [] : JSON.parse(r.effects), result: r.result === null ? null : JSON.parse(r.result), error: r.error === null ? null : JSON.parse(r.error) };
}
