import type { Db } from "./db.js";
import type { Call } from "./dispatch.js";
import { isMcpServerRoute, maskAll, readsWhole, redact, redactText } from "./redact.js";
import { randomUUID } from "node:crypto";
import type { ApiError } from "./errors.js";
import type { Caller, Route } from "./route.js";

export interface AuditRow {
  readonly id: number;
  readonly ts: string;
  readonly actor: string;
  readonly kind: string;
  readonly route: string | null;
  readonly tool: string | null;
  readonly target: string | null;
  readonly args: unknown;
  readonly outcome: string;
  readonly error_code: string | null;
  readonly plan_id: string | null;
  readonly approval_id: string | null;
  readonly duration_ms: number;
  readonly request_id: string | null;
  /** The `X-hal0-Agent` the caller sent when it is not its identity's name (never trusted). */
  readonly claimed: string | null;
  /** The peer address of the request. */
  readonly peer: string | null;
}

/**
 * A row as `reader` sees it: an operator whole, and so does the identity
 * that made the call; anyone else (another agent, an anonymous caller) sees
 * who called what, on which target, and how it went, with every value of its
 * args masked. What an agent sent (a value queued for a person to decide, an
 * env value under a name no rule can tell is a secret) is not read back by
 * every caller that may list the log (the approval queue reads the same way).
 */
export function auditRowReadBy(row: AuditRow, reader: Pick<Caller, "kind" | "agent">): AuditRow {
  // The actor is `<kind>:<name>` (a kind holds no colon), or `anonymous` (actorOf).
  const at = row.actor.indexOf(":");
  if (readsWhole(reader, at < 0 ? { kind: null, agent: row.actor } : { kind: row.actor.slice(0, at), agent: row.actor.slice(at + 1) })) return row;
  return { ...row, args: maskAll(row.args) };
}

export interface AuditEntry {
  readonly call: Call;
  readonly route: Pick<Route, "method" | "path" | "secretBody" | "auditBody">;
  readonly outcome: "ok" | "error" | "pending_approval";
  readonly durationMs: number;
  readonly errorCode?: string;
  readonly planId?: string;
  readonly approvalId?: string;
  readonly tool?: string;
  /** What the call acted on, when its path does not name it (an install names its server only once resolved): else the path's ids. */
  readonly target?: string;
}

export interface AuditQuery {
  readonly actor?: string;
  readonly kind?: string;
  readonly outcome?: string;
  readonly target?: string;
  /** Rows whose target is this one or below it (`<id>` and `<id>/start`…). */
  readonly under?: string;
  readonly route?: string;
  readonly since?: string;
  readonly until?: string;
  readonly limit?: number;
  readonly offset?: number;
}

/** Audit rows kept in memory while they cannot be written (a full disk). */
export const AUDIT_HELD_MAX = 10_000;

/** The audit table: one row per write, action and tool call, args with secrets redacted. */
export class Audit {
  private readonly insert: import("better-sqlite3").Statement<unknown[]>;
  private readonly insertAll: (rows: unknown[][]) => void;
  /** Rows recorded this turn of the event loop, written in one transaction right after it (and, while writes fail, kept for the next try). */
  private pending: unknown[][] = [];
  /** Rows given up while writes failed and more than AUDIT_HELD_MAX waited; said once writing works again. */
  private dropped = 0;
  private failing = false;

  constructor(
    private readonly db: Db,
    private readonly now: () => number = Date.now,
    /** Told when writing the rows fails (a full disk: SQLITE_FULL) and when it works again; the rows wait in memory meanwhile. */
    private readonly onWriteError: (err: unknown, held: number) => void = () => undefined,
    private readonly onRecovered: (written: number, dropped: number) => void = () => undefined,
  ) {
    this.insert = db.prepare(`INSERT INTO audit (ts, actor, kind, route, tool, target, args, outcome, error_code, plan_id, approval_id, duration_ms, request_id, claimed, peer)
                               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.insertAll = db.transaction((rows: unknown[][]) => {
      for (const row of rows) this.insert.run(...row);
    });
  }

  /**
   * Writes the rows still queued (a query, the server's close and each
   * turn's setImmediate call it). Never throws: when the write fails (the
   * disk is full) the rows stay queued, at most AUDIT_HELD_MAX of them (the
   * oldest beyond are counted and given up), and the next row or query tries
   * again; the server logs the failure and the recovery.
   */
  flush(): void {
    if (this.pending.length === 0 || !this.db.open) return;
    const rows = this.pending;
    this.pending = [];
    try {
      this.insertAll(rows);
    } catch (err) {
      this.pending = rows.concat(this.pending);
      if (this.pending.length > AUDIT_HELD_MAX) this.dropped += this.pending.splice(0, this.pending.length - AUDIT_HELD_MAX).length;
      if (!this.failing) this.onWriteError(err, this.pending.length);
      this.failing = true;
      return;
    }
    if (this.failing) {
      this.failing = false;
      this.onRecovered(rows.length, this.dropped);
      this.dropped = 0;
    }
  }

  /**
   * Queues one row. Never throws, whatever the call carries: the args are
   * copied at most {@link ARGS_DEPTH} levels deep before redaction (deeper
   * values are `[too deep]`), and args that still cannot be serialised are
   * recorded as a note, not as the call's values.
   */
  record(e: AuditEntry): void {
    const { call, route } = e;
    // The target and the claimed header are what the caller wrote (a token pasted as an id, or as X-hal0-Agent): kept with secrets redacted, as the args are.
    const target = e.target ?? targetOf(call);
    const row = [new Date(this.now()).toISOString(), actorOf(call), call.caller.via, `${route.method} ${route.path}`, e.tool ?? null, target === null ? null : redactText(target), argsOf(call, route), e.outcome,
      e.errorCode ?? null, e.planId ?? null, e.approvalId ?? null, Math.round(e.durationMs * 100) / 100, call.requestId, call.caller.claimed === undefined ? null : redactText(call.caller.claimed), call.caller.peer ?? null];
    if (this.pending.push(row) === 1) setImmediate(() => this.flush());
  }

  query(q: AuditQuery): { items: AuditRow[]; total: number } {
    this.flush();
    const { clause, values } = whereOf(q);
    const total = (this.db.prepare(`SELECT count(*) AS n FROM audit ${clause}`).get(...values) as { n: number }).n;
    const rows = this.db.prepare(`SELECT * FROM audit ${clause} ORDER BY id DESC LIMIT ? OFFSET ?`).all(...values, q.limit ?? 100, q.offset ?? 0) as Array<AuditRow & { args: string }>;
    return { items: rows.map((r) => ({ ...r, args: JSON.parse(r.args ?? "null") })), total };
  }

  /** Rows after `afterId` (oldest first, at most `limit`), optionally of one kind: a tail to follow. */
  tail(afterId: number, kind?: string, limit = 500): AuditRow[] {
    this.flush();
    const rows = (kind === undefined
      ? this.db.prepare("SELECT * FROM audit WHERE id > ? ORDER BY id LIMIT ?").all(afterId, limit)
      : this.db.prepare("SELECT * FROM audit WHERE id > ? AND kind = ? ORDER BY id LIMIT ?").all(afterId, kind, limit)) as Array<AuditRow & { args: string }>;
    return rows.map((r) => ({ ...r, args: JSON.parse(r.args ?? "null") }));
  }

  /** Every identity that called MCP tools: first and last call, and the routes it reached. */
  clients(): AuditClient[] {
    this.flush();
    const rows = this.db.prepare(`SELECT actor, min(ts) AS since, max(ts) AS last, group_concat(DISTINCT route) AS routes
                                  FROM audit WHERE kind = 'mcp' GROUP BY actor ORDER BY actor`).all() as Array<{ actor: string; since: string; last: string; routes: string | null }>;
    return rows.map((r) => ({ actor: r.actor, since: r.since, last: r.last, routes: (r.routes ?? "").split(",").filter(Boolean).sort() }));
  }

  /** Every row matching `q` (paging ignored), oldest first, for export as JSON lines. */
  *all(q: AuditQuery = {}): Iterable<AuditRow> {
    this.flush();
    const { clause, values } = whereOf(q);
    for (const r of this.db.prepare(`SELECT * FROM audit ${clause} ORDER BY id`).iterate(...values) as Iterable<AuditRow & { args: string }>) {
      yield { ...r, args: JSON.parse(r.args ?? "null") };
    }
  }
}

/** One MCP client as the audit log knows it: an identity that called tools, since when, on which servers. */
export interface AuditClient {
  readonly actor: string;
  readonly since: string;
  readonly last: string;
  readonly routes: readonly string[];
}

function whereOf(q: AuditQuery): { clause: string; values: unknown[] } {
  const where: string[] = [];
  const values: unknown[] = [];
  for (const col of ["actor", "kind", "outcome", "target", "route"] as const) {
    if (q[col] !== undefined) where.push(`${col} = ?`), values.push(q[col]);
  }
  if (q.under !== undefined) where.push("(target = ? OR substr(target, 1, ?) = ?)"), values.push(q.under, q.under.length + 1, `${q.under}/`);
  if (q.since) where.push("ts >= ?"), values.push(q.since);
  if (q.until) where.push("ts < ?"), values.push(q.until);
  return { clause: where.length ? `WHERE ${where.join(" AND ")}` : "", values };
}

/** The authenticated identity: `operator:<name>`, `agent:<name>` or `anonymous` (the door is the row's `kind`). */
function actorOf(call: Call): string {
  const { kind, agent } = call.caller;
  return kind === "anonymous" ? "anonymous" : `${kind}:${agent}`;
}

/**
 * The most JSON an audit row keeps of a call's arguments; longer ones are
 * recorded as their size. A body up to `[server] max_body_kb` (1 MiB) would
 * otherwise be kept whole, from any caller: an anonymous one is refused, and
 * audited, as often as it asks, and each row was the whole body on disk.
 */
export const ARGS_MAX = 64 * 1024;

/** How deep an audit row's args are kept; deeper values are recorded as {@link TOO_DEEP}. */
const ARGS_DEPTH = 32;
const TOO_DEEP = "[too deep]";

/**
 * The longest target a row keeps. Every id a route takes is far shorter; a
 * refused request's path is whatever its sender wrote (an anonymous
 * `POST /approvals/<3 KB>/approve`), and the row names it, not holds it.
 */
export const TARGET_MAX = 256;

/** The path params, `/`-joined, at most {@link TARGET_MAX} characters (a longer one ends in `…`); null when there are none. */
function targetOf(call: Call): string | null {
  try {
    const target = Object.values(call.params).map((v) => (typeof v === "string" ? v : JSON.stringify(bounded(v, 4)) ?? "")).join("/") || null;
    return target !== null && target.length > TARGET_MAX ? `${target.slice(0, TARGET_MAX - 1)}…` : target;
  } catch {
    return null;
  }
}

/** The call's params, query and body as one redacted JSON object (see {@link Audit.record}); a `secretBody` route's body masked whole, an `auditBody` route's body as it says. */
function argsOf(call: Call, route: Pick<Route, "path" | "secretBody" | "auditBody">): string {
  try {
    const recorded = route.auditBody !== undefined && call.body !== undefined ? route.auditBody(call.body) : call.body;
    const body = route.secretBody === true && recorded !== undefined ? maskAll(bounded(recorded, ARGS_DEPTH)) : recorded;
    const merged = { ...call.params, ...call.query, ...(isObject(body) ? body : body === undefined ? {} : { body }) };
    const json = JSON.stringify(redact(bounded(merged, ARGS_DEPTH), { allEnv: isMcpServerRoute(route.path) }));
    return json.length <= ARGS_MAX ? json : JSON.stringify({ _unrecorded: `the arguments are ${json.length} characters of JSON; an audit row keeps at most ${ARGS_MAX}` });
  } catch {
    return JSON.stringify({ _unrecorded: "the arguments could not be recorded" });
  }
}

/**
 * A JSON-safe copy of `v` at most `depth` containers deep: deeper ones (and
 * cycles) become `[too deep]`, a bigint its decimal string, functions and
 * symbols are dropped. Own keys are copied as data (`__proto__` included,
 * never set as a prototype). Recursion is bounded by `depth`.
 */
function bounded(v: unknown, depth: number): unknown {
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "function" || typeof v === "symbol") return undefined;
  if (v === null || typeof v !== "object") return v;
  if (depth <= 0) return TOO_DEEP;
  if (Array.isArray(v)) return v.map((x) => bounded(x, depth - 1) ?? null);
  if (v instanceof Date) return v;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    const x = bounded((v as Record<string, unknown>)[k], depth - 1);
    if (x !== undefined) Object.defineProperty(out, k, { value: x, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** One audit row for a tool call refused before it ran (blocked, anonymous, disabled). */
export function auditRefusal(d: { readonly audit: Audit }, tool: string, caller: Caller, err: ApiError, route?: Pick<Route, "method" | "path">): void {
  const r: Pick<Route, "method" | "path"> = route ?? { method: "POST", path: `/mcp/tool/${tool}` };
  d.audit.record({ call: { params: {}, query: {}, body: undefined, caller: { ...caller, via: "mcp" }, requestId: randomUUID(), tool }, route: r, outcome: "error", errorCode: err.code, durationMs: 0, tool });
}
