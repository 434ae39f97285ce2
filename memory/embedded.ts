import { MemoryError } from "./errors.js";
import type {
  AddInput,
  AddResult,
  BankStats,
  CurateInput,
  Directive,
  DirectiveInput,
  HistoryEntry,
  ListInput,
  MemoryEngine,
  MemoryUnit,
  MentalModel,
  MentalModelDetail,
  MentalModelInput,
  Operation,
  OperationKind,
  OperationScope,
  OperationStatus,
  Page,
  RecallInput,
  RecallResult,
  ReflectResult,
  Scope,
  SearchHit,
  SearchInput,
  TagCount,
} from "./engine.js";
import { openMemoryDb } from "./embedded-db.js";
import { damagedInUse, DbFile, sqliteCode, unopenable } from "./sqlite.js";
import { addFact, curateUnit, deletableIds, deleteIds, mergeDuplicates, runRetain, unitHistory, upsertDocument, type RetainPayload } from "./embedded-facts.js";
import * as models from "./embedded-models.js";
import { OperationQueue } from "./embedded-ops.js";
import { bankStats, listUnits, recallUnits, searchUnits, tagCounts } from "./embedded-search.js";
import { requireUnit, scopeSql, Store, unitOf } from "./embedded-store.js";
import { splitSentences } from "./extract.js";

/**
 * The most sentences one version of a document may split into. Its retain
 * operation writes each as a fact in one transaction, which holds the
 * server's one thread (~0.2 ms a fact here: 5 000 take about 1 s; the
 * 200 000 characters memory_add takes, one short line each, were ~49 000
 * and held it ~10 s, replacing them again as long).
 */
export const MAX_DOCUMENT_SENTENCES = 5000;

function refuseLongDocument(text: string): void {
  const n = splitSentences(text).length;
  if (n <= MAX_DOCUMENT_SENTENCES) return;
  const message = `a document splits into at most ${MAX_DOCUMENT_SENTENCES} sentences (line breaks and . ! ? … end one); this one has ${n}: send it as several documents`;
  throw new MemoryError("mcp.memory_schema", `text: ${message}`, { tool: "memory_add", detail: [{ path: "text", message }] });
}

/** How to open an embedded engine. */
export interface EmbeddedEngineOptions {
  /** The state folder: the engine keeps `<stateDir>/memory.db`. */
  readonly stateDir: string;
  /** The clock (ms since the epoch); tests inject one. */
  readonly now?: () => number;
  /** The bank's name in stats (default `hal0`). */
  readonly bank?: string;
}

/**
 * hal0-memory's embedded engine: SQLite (WAL) with FTS5 in the state folder,
 * no language model. Facts are ranked by BM25 over their text and context,
 * weighed over the datasets searched alone (embedded-search.ts);
 * duplicates are recognised by normalised text (extract.ts); a document's
 * facts are its sentences. Writes of one fact are synchronous; document
 * extraction, mental model refreshes and consolidation run as operations on
 * an in-process queue (embedded-ops.ts) that survives restarts.
 *
 * Each call's reads and writes run in one SQLite transaction. After close()
 * every call is `memory.engine_unavailable` (the service opens a new engine).
 */
export class EmbeddedEngine implements MemoryEngine {
  readonly kind = "embedded" as const;
  private readonly store: Store;
  private readonly ops: OperationQueue;
  private readonly bank: string;
  private readonly file: DbFile;
  private closed = false;

  constructor(options: EmbeddedEngineOptions) {
    const db = openMemoryDb(options.stateDir);
    this.file = new DbFile(db.name);
    this.store = new Store(db, options.now ?? Date.now, this.file);
    this.bank = options.bank ?? "hal0";
    const store = this.store;
    try {
      // Its first write (operations a stopped process left processing go back to pending): a read-only memory.db is refused here.
      this.ops = new OperationQueue(store, {
        retain: (target, payload) => runRetain(store, target!, payload as RetainPayload),
        refresh: (target) => models.refreshModel(store, target!),
        consolidate: (_target, payload) => {
          const refreshed = models.modelsRefreshedByConsolidation(store);
          for (const id of refreshed) models.refreshModel(store, id);
          return { deduplicated: (payload as { deduplicated: number }).deduplicated, refreshed };
        },
      });
    } catch (err) {
      db.close();
      throw unopenable(db.name, err);
    }
  }

  /**
   * Runs `work` in one transaction, unless the engine is closed: one that may
   * write takes the write lock first (Store.tx). A lock another process held
   * past the wait (busy_timeout, 5 s) is memory.engine_unavailable, to retry;
   * a database found damaged is system.io naming memory.db.
   */
  private tx<T>(work: (store: Store) => T, mode: "write" | "read" = "write"): T {
    if (this.closed) throw new MemoryError("memory.engine_unavailable", "the embedded memory engine was closed; retry", { retry_after_s: 5 });
    try {
      return this.store.tx(() => work(this.store), mode);
    } catch (err) {
      const code = sqliteCode(err);
      if (code?.startsWith("SQLITE_BUSY")) {
        throw new MemoryError("memory.engine_unavailable", `the memory database ${this.store.db.name} is held by another process's write; retry shortly`, { retry_after_s: 5, cause: code });
      }
      throw damagedInUse(this.store.db.name, err);
    }
  }

  /** Runs `work`, which only reads, in one transaction. */
  private read<T>(work: (store: Store) => T): T {
    return this.tx(work, "read");
  }

  /**
   * Without document_id: stored now as one fact (or the existing identical
   * one returned with `already_known`). With document_id: the document is
   * recorded and its extraction queued (`operation_id`); `id` is the
   * document's `doc_…` id, which memory_delete accepts.
   */
  async add(input: AddInput): Promise<AddResult> {
    const documentId = input.document_id;
    if (documentId === undefined) return this.tx((s) => addFact(s, input));
    refuseLongDocument(input.text);
    return this.tx((s) => {
      const doc = upsertDocument(s, { ...input, document_id: documentId });
      const payload: RetainPayload = { text: input.text, dataset: input.dataset, document_id: documentId, tags: input.tags, metadata: input.metadata, source: input.source, context: input.context ?? null };
      return { id: doc.id, timestamp: doc.timestamp, operation_id: this.ops.enqueue("retain", doc.id, payload) };
    });
  }

  async search(input: SearchInput): Promise<{ results: SearchHit[] }> {
    return this.read((s) => searchUnits(s, input));
  }

  async list(input: ListInput): Promise<Page<MemoryUnit>> {
    return this.read((s) => listUnits(s, input));
  }

  async recall(input: RecallInput): Promise<RecallResult> {
    return this.read((s) => recallUnits(s, input));
  }

  /** The embedded engine has no language model to synthesise with. */
  async reflect(): Promise<ReflectResult> {
    return { status: "unsupported", message: "the embedded engine has no language model; use memory_recall" };
  }

  async get(id: string, scope: Scope): Promise<MemoryUnit> {
    return this.read((s) => unitOf(requireUnit(s, id, scope)));
  }

  async history(id: string, scope: Scope): Promise<{ id: string; history: HistoryEntry[] }> {
    return this.read((s) => unitHistory(s, id, scope));
  }

  async curate(id: string, change: CurateInput, scope: Scope, by: string): Promise<MemoryUnit> {
    return this.tx((s) => curateUnit(s, id, change, scope, by));
  }

  async deletable(ids: readonly string[], scope: Scope): Promise<string[]> {
    return this.read((s) => deletableIds(s, ids, scope));
  }

  /** Unit ids and document (`doc_…`) ids; a document counts 1 plus the facts it took with it. */
  async delete(ids: readonly string[], scope: Scope): Promise<{ deleted: number; not_found: string[] }> {
    return this.tx((s) => deleteIds(s, ids, scope));
  }

  async mentalModelList(input: { detail: MentalModelDetail; tags?: readonly string[] }): Promise<{ items: Array<Partial<MentalModel>> }> {
    return this.read((s) => models.listModels(s, input));
  }

  async mentalModelGet(id: string): Promise<MentalModel> {
    return this.read((s) => models.getModel(s, id));
  }

  /** `_by` is not stored: the audit log records who created it. */
  async mentalModelCreate(input: MentalModelInput, _by: string): Promise<{ mental_model_id: string; operation_id: string }> {
    return this.tx((s) => {
      const id = models.createModel(s, input);
      return { mental_model_id: id, operation_id: this.ops.enqueue("refresh", id, {}) };
    });
  }

  async mentalModelUpdate(id: string, change: Partial<MentalModelInput>): Promise<MentalModel> {
    return this.tx((s) => models.updateModel(s, id, change));
  }

  async mentalModelRefresh(id: string): Promise<{ operation_id: string; status: OperationStatus; mental_model_id: string }> {
    return this.tx((s) => {
      models.getModel(s, id);
      return { operation_id: this.ops.enqueue("refresh", id, {}), status: "pending" as const, mental_model_id: id };
    });
  }

  async mentalModelDelete(id: string): Promise<{ deleted: number; id: string }> {
    return this.tx((s) => models.deleteModel(s, id));
  }

  async directiveList(input: { active_only?: boolean; tags?: readonly string[] }): Promise<{ items: Directive[] }> {
    return this.read((s) => models.listDirectives(s, input));
  }

  async directiveGet(id: string): Promise<Directive> {
    return this.read((s) => models.getDirective(s, id));
  }

  async directiveCreate(input: DirectiveInput): Promise<Directive> {
    return this.tx((s) => models.createDirective(s, input));
  }

  async directiveUpdate(id: string, change: Partial<DirectiveInput>): Promise<Directive> {
    return this.tx((s) => models.updateDirective(s, id, change));
  }

  async directiveDelete(id: string): Promise<{ deleted: number; id: string }> {
    return this.tx((s) => models.deleteDirective(s, id));
  }

  async operationList(input: { status?: OperationStatus; kind?: OperationKind; limit: number; scope: OperationScope }): Promise<{ items: Operation[] }> {
    return this.read(() => this.ops.list(input));
  }

  async operationGet(id: string, scope: OperationScope): Promise<Operation> {
    return this.read(() => this.ops.get(id, scope));
  }

  async operationCancel(id: string, scope: OperationScope): Promise<Operation> {
    return this.tx(() => this.ops.cancel(id, scope));
  }

  async operationRetry(id: string, scope: OperationScope): Promise<Operation> {
    return this.tx(() => this.ops.retry(id, scope));
  }

  async tags(scope: Scope): Promise<{ tags: TagCount[] }> {
    return this.read((s) => tagCounts(s, scope));
  }

  async stats(scope: Scope): Promise<BankStats> {
    return this.read((s) => bankStats(s, scope, this.bank));
  }

  /**
   * Merges active duplicates in `scope` now (see embedded-facts.ts
   * mergeDuplicates) and queues the consolidation pass, which refreshes every
   * mental model whose trigger asks for it → result {deduplicated, refreshed}.
   */
  async consolidate(scope: Scope): Promise<{ operation_id: string; deduplicated: number }> {
    return this.tx((s) => {
      const deduplicated = mergeDuplicates(s, scope);
      const target = scope.datasets ? JSON.stringify(scope.datasets) : "all";
      // The private datasets it covered: only callers who may see them all see the operation.
      const where = scopeSql(scope);
      const covered = s.q(`SELECT DISTINCT u.dataset AS d FROM units u WHERE substr(u.dataset, 1, 8) = 'private:' AND ${where.sql} ORDER BY d`).all(...where.params) as Array<{ d: string }>;
      const privates = [...new Set([...(scope.datasets ?? []).filter((d) => d.startsWith("private:")), ...covered.map((r) => r.d)])].sort();
      return { operation_id: this.ops.enqueue("consolidate", target, { deduplicated, private: privates }), deduplicated };
    });
  }

  /** Stops running operations between two of them (maintenance, tests); queued ones wait for resume(). */
  pause(): void {
    this.ops.pause();
  }

  /** Runs queued operations again after pause(). */
  resume(): void {
    this.ops.resume();
  }

  /** Resolves when no operation is queued; at once while paused (the queued ones stay queued). */
  async idle(): Promise<void> {
    return this.ops.idle();
  }

  /** Stops the operation worker and closes the database; operations still queued run when it is next opened. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.ops.close();
    this.store.db.close();
    // memory.db removed or replaced meanwhile: its old -wal would be replayed onto the file now there at the next open.
    if (this.file.state() !== "same") this.file.dropOrphans();
  }
}
