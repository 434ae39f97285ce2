import { MemoryError } from "./errors.js";
import type { Operation, OperationKind, OperationScope, OperationStatus } from "./engine.js";
import { newId, notFoundError, scopeSql, type Store, type Visibility } from "./embedded-store.js";

/**
 * The embedded engine's asynchronous work, an in-process queue over the
 * `operations` table: one operation at a time, in the order they were
 * queued, each run on a later turn of the event loop. An operation's work
 * and its status change commit in one transaction, so it is applied exactly
 * when it completes; work that throws leaves nothing behind and the
 * operation `failed` with the error's message. Operations left pending or
 * processing by a previous process run again when the database is opened;
 * ones another process queues (and did not run) are found within POLL_MS.
 */

/** An operation's work: runs inside its transaction; returns its result, throws to fail it. */
export type OperationWork = (target: string | null, payload: unknown) => Record<string, unknown>;

interface OperationRow {
  readonly seq: number;
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  readonly target: string | null;
  readonly payload: string;
  readonly result: string | null;
  readonly error: string | null;
  readonly attempts: number;
  readonly created_at: string;
  readonly updated_at: string;
}

function operationOf(row: OperationRow): Operation {
  return {
    id: row.id,
    kind: row.kind,
    status: row.status,
    target: row.target,
    result: row.result === null ? null : (JSON.parse(row.result) as Record<string, unknown>),
    error: row.error,
    attempts: row.attempts,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/**
 * A WHERE fragment over `operations o` true for the operations `scope` may
 * see (engine.ts OperationScope): a retain by its payload's dataset; a
 * consolidation when every private dataset it covered (its payload's
 * `private`, or the datasets its target lists) is visible; a refresh always.
 */
export function operationScopeSql(scope: Visibility | "all"): { sql: string; params: unknown[] } {
  if (scope === "all") return { sql: "1", params: [] };
  const retain = scopeSql(scope, "json_extract(o.payload, '$.dataset')");
  const covered = scopeSql(scope, "j.value");
  const consolidated = "json_each(coalesce(json_extract(o.payload, '$.private'), CASE WHEN json_valid(o.target) THEN o.target END, '[]')) j";
  return {
    sql: `(o.kind = 'refresh' OR (o.kind = 'retain' AND ${retain.sql}) OR (o.kind = 'consolidate' AND NOT EXISTS (SELECT 1 FROM ${consolidated} WHERE NOT ${covered.sql})))`,
    params: [...retain.params, ...covered.params],
  };
}

/** How long the queue waits before trying again when its database refused a write. */
const RETRY_MS = 5000;
/**
 * How often an idle queue looks for operations another process queued on
 * the same database (`hal0 agent approvals` approving a memory_add with a
 * document_id closes its engine right after): nothing else would wake it.
 */
export const POLL_MS = 2000;

/** The queue one engine runs its operations on; pause()/resume() hold it between two operations. */
export class OperationQueue {
  private paused = false;
  private closed = false;
  private scheduled: NodeJS.Immediate | undefined;
  /** The next try after the database refused a turn's writes (a full disk). */
  private retryTimer: NodeJS.Timeout | undefined;
  /** The next look for operations another process queued, while none is pending here. */
  private pollTimer: NodeJS.Timeout | undefined;
  private waiters: Array<() => void> = [];

  constructor(
    private readonly store: Store,
    private readonly work: Readonly<Record<OperationKind, OperationWork>>,
  ) {
    store.q("UPDATE operations SET status = 'pending', updated_at = ? WHERE status = 'processing'").run(store.now());
    this.schedule();
  }

  /** Queues an operation (inside the caller's transaction, if any) and returns its id. */
  enqueue(kind: OperationKind, target: string | null, payload: unknown): string {
    const id = newId("op");
    const at = this.store.now();
    this.store
      .q("INSERT INTO operations (id, kind, status, target, payload, result, error, attempts, created_at, updated_at) VALUES (?, ?, 'pending', ?, ?, NULL, NULL, 0, ?, ?)")
      .run(id, kind, target, JSON.stringify(payload), at, at);
    this.schedule();
    return id;
  }

  /** Stops running operations (the one running finishes first); queued ones wait for resume(). */
  pause(): void {
    this.paused = true;
    this.unschedule();
    this.settle();
  }

  /** Runs queued operations again after pause(). */
  resume(): void {
    this.paused = false;
    this.schedule();
  }

  /** Resolves once no operation is pending; at once when paused or closed, or memory.db was removed or replaced (queued work then stays queued). */
  idle(): Promise<void> {
    if (this.paused || this.closed || this.store.moved() || !this.store.q("SELECT 1 FROM operations WHERE status = 'pending' LIMIT 1").get()) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push(resolve);
      this.schedule();
    });
  }

  /** Stops the worker for good (the database is about to close). */
  close(): void {
    this.closed = true;
    this.unschedule();
    this.settle();
  }

  /** One operation `scope` may see (memory.not_found when absent or not visible). */
  get(id: string, scope: OperationScope): Operation {
    return operationOf(this.row(id, scope));
  }

  /** Those `scope` may see, newest first, optionally one status and/or kind. */
  list(input: { status?: OperationStatus; kind?: OperationKind; limit: number; scope: OperationScope }): { items: Operation[] } {
    const visible = operationScopeSql(input.scope);
    const sql = `SELECT * FROM operations o WHERE (? IS NULL OR o.status = ?) AND (? IS NULL OR o.kind = ?) AND ${visible.sql} ORDER BY o.created_at DESC, o.seq DESC LIMIT ?`;
    const status = input.status ?? null;
    const kind = input.kind ?? null;
    const rows = this.store.q(sql).all(status, status, kind, kind, ...visible.params, input.limit) as OperationRow[];
    return { items: rows.map(operationOf) };
  }

  /** Pending or processing → cancelled (its work is never applied); else memory.operation_state. */
  cancel(id: string, scope: OperationScope): Operation {
    return this.transition(id, scope, ["pending", "processing"], "cancelled", "only a pending or processing operation can be cancelled");
  }

  /** Failed or cancelled → pending again, in its original place in the queue (attempts kept); else memory.operation_state. */
  retry(id: string, scope: OperationScope): Operation {
    const op = this.transition(id, scope, ["failed", "cancelled"], "pending", "only a failed or cancelled operation can be retried");
    this.schedule();
    return op;
  }

  private row(id: string, scope: OperationScope): OperationRow {
    const visible = operationScopeSql(scope);
    const row = this.store.q(`SELECT * FROM operations o WHERE o.id = ? AND ${visible.sql}`).get(id, ...visible.params) as OperationRow | undefined;
    if (!row) throw notFoundError("operation", id);
    return row;
  }

  private transition(id: string, scope: OperationScope, from: readonly OperationStatus[], to: OperationStatus, rule: string): Operation {
    const row = this.row(id, scope);
    if (!from.includes(row.status)) throw new MemoryError("memory.operation_state", `operation ${id} is ${row.status}: ${rule}`, { id, status: row.status });
    this.store.q("UPDATE operations SET status = ?, result = NULL, error = NULL, updated_at = ? WHERE id = ?").run(to, this.store.now(), id);
    return this.get(id, scope);
  }

  private schedule(): void {
    if (this.scheduled || this.paused || this.closed) return;
    this.scheduled = setImmediate(() => this.tick());
  }

  private unschedule(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.pollTimer) clearTimeout(this.pollTimer);
    this.pollTimer = undefined;
  }

  /** Looks again in POLL_MS for work another process queued (never keeps the process alive). */
  private poll(): void {
    if (this.pollTimer || this.paused || this.closed) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined;
      this.schedule();
    }, POLL_MS);
    this.pollTimer.unref();
  }

  private settle(): void {
    for (const resolve of this.waiters.splice(0)) resolve();
  }

  /**
   * Runs the oldest pending operation, then schedules the next turn; settles
   * idle() waiters when none is left, and looks again in POLL_MS (another
   * process may queue one). A database that cannot be written (a
   * full disk) leaves the operation pending and is tried again in
   * RETRY_MS, never thrown out of the timer (that would end the process).
   */
  private tick(): void {
    this.scheduled = undefined;
    if (this.paused || this.closed) return;
    try {
      this.store.check(); // memory.db removed or replaced: nothing runs (it would be lost), tried again in RETRY_MS
      const next = this.store.q("SELECT * FROM operations WHERE status = 'pending' ORDER BY seq LIMIT 1").get() as OperationRow | undefined;
      if (!next) {
        this.settle();
        return this.poll();
      }
      this.run(next);
    } catch {
      if (this.store.moved()) this.settle(); // none of its work can run: idle() waiters go on
      if (this.retryTimer === undefined) {
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          this.schedule();
        }, RETRY_MS);
        this.retryTimer.unref();
      }
      return;
    }
    this.schedule();
  }

  private run(op: OperationRow): void {
    const { store } = this;
    // Claimed only if still pending: another process on the same database (`hal0 agent approvals` runs one) may have taken it.
    const claimed = store.q("UPDATE operations SET status = 'processing', attempts = attempts + 1, updated_at = ? WHERE id = ? AND status = 'pending'").run(store.now(), op.id);
    if (claimed.changes === 0) return;
    try {
      store.tx(() => {
        const result = this.work[op.kind](op.target, JSON.parse(op.payload));
        const done = store.q("UPDATE operations SET status = 'completed', result = ?, error = NULL, updated_at = ? WHERE id = ? AND status = 'processing'").run(JSON.stringify(result), store.now(), op.id);
        if (done.changes === 0) throw new Cancelled();
      });
    } catch (err) {
      if (err instanceof Cancelled) return;
      store.q("UPDATE operations SET status = 'failed', error = ?, updated_at = ? WHERE id = ? AND status = 'processing'").run(err instanceof Error ? err.message : String(err), store.now(), op.id);
    }
  }
}

/** Thrown inside an operation's transaction when it was cancelled meanwhile: rolls its work back. */
class Cancelled extends Error {}
