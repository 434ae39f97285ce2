import type Database from "better-sqlite3";
import { createHash, randomBytes } from "node:crypto";
import type { Db, DbFile } from "./sqlite.js";
import { MemoryError } from "./errors.js";
import type { FactType, MemoryUnit, UnitState } from "./engine.js";

/** Prepared statements kept at most (filters make a few shapes per call; the first prepared is dropped first). */
const MAX_STATEMENTS = 500;

/**
 * What every part of the embedded engine shares: the database, the clock,
 * prepared statements (one per SQL text, prepared on first use), ids, and
 * the SQL that keeps a call inside the datasets it may see.
 */
export class Store {
  private readonly statements = new Map<string, Database.Statement>();
  private instant: string | undefined;

  constructor(
    readonly db: Db,
    private readonly clock: () => number,
    /** The file `db` opened, checked before each transaction (check()). */
    private readonly file?: DbFile,
  ) {}

  /**
   * Whether memory.db's path no longer names the file this engine opened
   * (removed, or another file moved over it). check() then refuses
   * (memory.store_replaced): what it would write is lost at the next start,
   * and what it reads is not what the folder holds. Restarting hal0 serve
   * opens the file now there.
   */
  moved(): boolean {
    return (this.file?.state() ?? "same") !== "same";
  }

  /** Throws memory.store_replaced when moved(). */
  check(): void {
    const state = this.file?.state() ?? "same";
    if (state === "same") return;
    throw new MemoryError(
      "memory.store_replaced",
      `${this.db.name} was ${state === "removed" ? "removed" : "replaced"} while hal0 runs; nothing was read or written: restart hal0 serve to open the ${state === "removed" ? "empty memory it makes" : "new file"} (docs/operations.md, restoring a backup)`,
      { path: this.db.name, state },
    );
  }

  /** The prepared statement for `sql` (its shape: parameters are always bound, never inlined). */
  q(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      if (this.statements.size >= MAX_STATEMENTS) this.statements.delete(this.statements.keys().next().value!);
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  /** Now, ISO-8601 UTC; inside tx() the instant the transaction began, so one change carries one timestamp. */
  now(): string {
    return this.instant ?? new Date(this.clock()).toISOString();
  }

  /**
   * Runs `work` in one transaction (a savepoint when already in one). One
   * that may write takes the write lock as it begins (BEGIN IMMEDIATE): it
   * waits out another process's write (busy_timeout), where a transaction
   * that had read first would be refused at once (SQLITE_BUSY) on its first
   * write. `read` begins one that only reads, which takes no lock.
   */
  tx<T>(work: () => T, mode: "write" | "read" = "write"): T {
    if (this.instant !== undefined) return this.db.transaction(work)();
    this.check();
    this.instant = new Date(this.clock()).toISOString();
    try {
      const transaction = this.db.transaction(work);
      return mode === "write" ? transaction.immediate() : transaction();
    } finally {
      this.instant = undefined;
    }
  }
}

/**
 * Which datasets a read or write covers: `datasets` = exactly those; absent =
 * every dataset except `private:<x>` for x ≠ owner (owner null: no private
 * dataset at all, the view of bank-level mental models). `Scope` is one.
 */
export interface Visibility {
  readonly datasets?: readonly string[];
  readonly owner: string | null;
}

/** A WHERE fragment (with its parameters) true for rows of `column` the visibility covers. */
export function scopeSql(v: Visibility, column = "u.dataset"): { sql: string; params: unknown[] } {
  if (v.datasets) return v.datasets.length === 0 ? { sql: "0", params: [] } : { sql: `${column} IN (${marks(v.datasets.length)})`, params: [...v.datasets] };
  if (v.owner === null) return { sql: `substr(${column}, 1, 8) <> 'private:'`, params: [] };
  return { sql: `(substr(${column}, 1, 8) <> 'private:' OR ${column} = ?)`, params: [`private:${v.owner}`] };
}

/** `?, ?, …` n times. */
export function marks(n: number): string {
  return Array.from({ length: n }, () => "?").join(", ");
}

/** A fresh random id: `<prefix>_<16 hex>`. */
export function newId(prefix: "mem" | "mm" | "dir" | "op"): string {
  return `${prefix}_${randomBytes(8).toString("hex")}`;
}

/** A document's stable id: `doc_` + the first 16 hex of sha256(dataset NUL document_id). */
export function docKey(dataset: string, documentId: string): string {
  return `doc_${createHash("sha256").update(`${dataset}\0${documentId}`).digest("hex").slice(0, 16)}`;
}

/** The distinct union of tag lists, in order of first appearance (a unit's tags keep the order they were given in). */
export function tagUnion(...lists: ReadonlyArray<readonly string[]>): string[] {
  return [...new Set(lists.flat())];
}

/** memory.not_found for an id the caller cannot see (whether or not it exists elsewhere). */
export function notFoundError(what: string, id: string): MemoryError {
  return new MemoryError("memory.not_found", `no ${what} ${id} is visible here`, { id });
}

/** A `units` row as stored. */
export interface UnitRow {
  readonly seq: number;
  readonly id: string;
  readonly dataset: string;
  readonly text: string;
  readonly norm: string;
  readonly context: string | null;
  readonly fact_type: FactType;
  readonly source: string;
  readonly tags: string;
  readonly metadata: string;
  readonly entities: string;
  readonly document_id: string | null;
  readonly doc_key: string | null;
  /** A document fact's sentence as extracted (null for a fact added on its own). */
  readonly extracted: string | null;
  readonly occurred_start: string | null;
  readonly occurred_end: string | null;
  readonly state: UnitState;
  readonly created_at: string;
  readonly updated_at: string;
}

/** The unit a row holds, as the engine interface returns it. */
export function unitOf(row: UnitRow): MemoryUnit {
  return {
    id: row.id,
    text: row.text,
    context: row.context,
    dataset: row.dataset,
    tags: JSON.parse(row.tags) as string[],
    source: row.source,
    metadata: JSON.parse(row.metadata) as Record<string, unknown>,
    fact_type: row.fact_type,
    entities: JSON.parse(row.entities) as string[],
    document_id: row.document_id,
    occurred_start: row.occurred_start,
    occurred_end: row.occurred_end,
    state: row.state,
    timestamp: row.created_at,
    updated_at: row.updated_at,
  };
}

/** A unit `v` may see, or undefined. */
export function findUnit(store: Store, id: string, v: Visibility): UnitRow | undefined {
  const scope = scopeSql(v);
  return store.q(`SELECT * FROM units u WHERE u.id = ? AND ${scope.sql}`).get(id, ...scope.params) as UnitRow | undefined;
}

/** A unit `v` may see, else memory.not_found. */
export function requireUnit(store: Store, id: string, v: Visibility): UnitRow {
  const row = findUnit(store, id, v);
  if (!row) throw notFoundError("memory unit", id);
  return row;
}
