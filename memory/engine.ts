/**
 * The memory engine behind hal0-memory (`[memory] engine`): `embedded` (SQLite
 * with FTS5 in the state folder) or `hindsight` (a client for an external
 * Hindsight server at `[memory] url`). One interface, so the 26 tools
 * (tools.ts) never know which one answers.
 *
 * Namespaces are resolved before a call reaches an engine: every method gets
 * the datasets it may touch (`Scope`) and, for writes, the `source` (the
 * caller's identity). Engines never decide who may see what.
 *
 * Errors are `MemoryError`s (errors.ts; the server maps each to the
 * `ApiError` of the same code): `memory.not_found`, `memory.operation_state`,
 * `memory.engine_unavailable` (cannot connect; details.retry_after_s = 5),
 * `memory.engine_error` (the engine answered with an error; never
 * reclassified as unavailable).
 */

export const FACT_TYPES = ["world", "experience", "opinion", "observation"] as const;
export type FactType = (typeof FACT_TYPES)[number];

export const UNIT_STATES = ["active", "invalid"] as const;
export type UnitState = (typeof UNIT_STATES)[number];

/** One memory unit (a fact). Timestamps are ISO-8601 UTC. */
export interface MemoryUnit {
  readonly id: string;
  readonly text: string;
  readonly context: string | null;
  readonly dataset: string;
  readonly tags: readonly string[];
  /** Who added it: the caller's identity, set by the server. */
  readonly source: string;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly fact_type: FactType;
  readonly entities: readonly string[];
  /** The logical document it was extracted from (memory_add's document_id), if any. */
  readonly document_id: string | null;
  readonly occurred_start: string | null;
  readonly occurred_end: string | null;
  readonly state: UnitState;
  /** When it was recorded. */
  readonly timestamp: string;
  readonly updated_at: string;
}

export interface SearchHit extends MemoryUnit {
  /** Relevance in (0, 1], higher is better. */
  readonly score: number;
}

/**
 * Which datasets a call may read or change. `datasets` set = exactly these;
 * absent = every dataset visible to `owner`: all but other callers'
 * `private:<id>` ones (used by bank-wide reads: tags, stats, history).
 */
export interface Scope {
  readonly datasets?: readonly string[];
  /** The caller's identity: `private:<owner>` is its own private dataset. */
  readonly owner: string;
}

export interface AddInput {
  readonly text: string;
  readonly dataset: string;
  readonly tags: readonly string[];
  readonly metadata: Readonly<Record<string, unknown>>;
  /** Upserts one logical document: a new version replaces the facts of the old one. */
  readonly document_id?: string;
  readonly context?: string;
  readonly source: string;
}

export interface AddResult {
  readonly id: string;
  readonly timestamp: string;
  /** Set when extraction runs asynchronously: poll memory_operation_get. */
  readonly operation_id?: string;
  /** The text was already in this dataset: `id` is the existing unit (tags merged). */
  readonly already_known?: boolean;
}

export interface SearchInput {
  readonly query: string;
  readonly limit: number;
  readonly scope: Scope;
  /** Units carrying any of these tags (tags_match "any", the default) or all of them ("all"). */
  readonly tags?: readonly string[];
  readonly tags_match?: "any" | "all";
  /** Recorded strictly before / at or after (ISO-8601). */
  readonly before?: string;
  readonly after?: string;
  readonly types?: readonly FactType[];
}

/** memory_list's walk: in the order units were recorded, oldest first. */
export interface ListInput {
  readonly scope: Scope;
  readonly cursor?: string;
  readonly limit: number;
  readonly tags?: readonly string[];
  /** Include soft-invalidated units (default false). */
  readonly include_invalid?: boolean;
}

export interface Page<T> {
  readonly items: readonly T[];
  /** Opaque; null on the last page. */
  readonly next_cursor: string | null;
}

export interface RecallInput {
  readonly query: string;
  /** Token budget for the returned texts (1–32768). */
  readonly max_tokens: number;
  readonly scope: Scope;
  readonly types?: readonly FactType[];
  readonly tags?: readonly string[];
  readonly tags_match?: "any" | "all";
}

export interface RecallResult {
  readonly results: readonly SearchHit[];
  /** Estimated tokens of the returned texts (≤ max_tokens). */
  readonly tokens_used: number;
  readonly max_tokens: number;
  /** More matched than fit the budget. */
  readonly truncated: boolean;
}

export interface ReflectInput {
  readonly query: string;
  readonly scope: Scope;
  readonly max_tokens?: number;
}

export type ReflectResult = { readonly status: "unsupported"; readonly message: string } | { readonly text: string; readonly based_on: readonly SearchHit[] };

export interface HistoryEntry {
  readonly at: string;
  /** The caller's identity (or `engine` for consolidation). */
  readonly by: string;
  readonly action: "created" | "curated" | "invalidated" | "restored" | "merged";
  /** field → {before, after} */
  readonly changes: Readonly<Record<string, { before: unknown; after: unknown }>>;
}

export interface CurateInput {
  readonly text?: string;
  readonly context?: string | null;
  readonly occurred_start?: string | null;
  readonly occurred_end?: string | null;
  readonly fact_type?: FactType;
  readonly entities?: readonly string[];
  readonly state?: UnitState;
}

export interface MentalModel {
  readonly id: string;
  readonly name: string;
  readonly source_query: string;
  readonly max_tokens: number;
  readonly tags: readonly string[];
  readonly trigger: { readonly refresh_after_consolidation: boolean };
  /** Null until the first refresh completes. */
  readonly content: string | null;
  readonly refreshed_at: string | null;
  /** Memory changed since the last refresh (or it never ran). */
  readonly stale: boolean;
  readonly created_at: string;
  readonly updated_at: string;
}

/** What memory_mental_model_list returns per model: metadata, plus content for `content`, plus everything for `full`. */
export const MENTAL_MODEL_DETAILS = ["metadata", "content", "full"] as const;
export type MentalModelDetail = (typeof MENTAL_MODEL_DETAILS)[number];

/**
 * What memory_mental_model_list shows of a model, whichever engine holds it:
 * `metadata` (id, name, tags, trigger, stale, refreshed_at, created_at,
 * updated_at); `content` adds the content; `full` is every field.
 */
export function projectModel(model: MentalModel, detail: MentalModelDetail): Partial<MentalModel> {
  const { source_query: _query, max_tokens: _budget, content, ...metadata } = model;
  if (detail === "full") return model;
  return detail === "content" ? { ...metadata, content } : metadata;
}

export interface MentalModelInput {
  readonly name: string;
  readonly source_query: string;
  readonly max_tokens?: number;
  readonly tags?: readonly string[];
  readonly trigger?: { readonly refresh_after_consolidation?: boolean };
}

export interface Directive {
  readonly id: string;
  readonly name: string;
  readonly content: string;
  /** Higher first. */
  readonly priority: number;
  readonly is_active: boolean;
  readonly tags: readonly string[];
  readonly created_at: string;
  readonly updated_at: string;
}

export interface DirectiveInput {
  readonly name: string;
  readonly content: string;
  readonly priority?: number;
  readonly is_active?: boolean;
  readonly tags?: readonly string[];
}

export const OPERATION_KINDS = ["retain", "refresh", "consolidate"] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];
export const OPERATION_STATUSES = ["pending", "processing", "completed", "failed", "cancelled"] as const;
export type OperationStatus = (typeof OPERATION_STATUSES)[number];

/**
 * Async work. A completed retain's `result` is
 * `{facts_extracted, document_id}`, plus `nothing_learned: true` and a
 * `notice` when zero facts made it into memory, or — a zero-yield retain of
 * content already extracted — `document_fact_count` and the notice
 * "content was already known".
 */
export interface Operation {
  readonly id: string;
  readonly kind: OperationKind;
  readonly status: OperationStatus;
  /** What it works on: a document id, a mental model id, a dataset list. */
  readonly target: string | null;
  readonly result: Readonly<Record<string, unknown>> | null;
  readonly error: string | null;
  readonly attempts: number;
  readonly created_at: string;
  readonly updated_at: string;
}

/**
 * Which operations a call may see and act on: `"all"` (an operator), or
 * those whose datasets `Scope` may see. A retain works on one document's
 * dataset; a consolidation on the datasets it was asked for (its private
 * ones must all be visible); a mental model refresh belongs to the bank,
 * like the model, and every caller sees it. Another caller's operation is
 * memory.not_found, as if it did not exist.
 */
export type OperationScope = Scope | "all";

export interface TagCount {
  readonly tag: string;
  readonly count: number;
}

export interface BankStats {
  readonly bank: string;
  readonly engine: "embedded" | "hindsight";
  /** Active memory units. */
  readonly nodes: number;
  /** Entity links: for each entity, the pairs of units naming it (a pair sharing two entities is two links). */
  readonly links: number;
  readonly observations: number;
  readonly invalidated: number;
  readonly documents: number;
  readonly mental_models: number;
  readonly directives: number;
  /** Operations per status, of those the scope may see (OperationScope). */
  readonly operations: Readonly<Record<OperationStatus, number>>;
  /** Active units per visible dataset. */
  readonly datasets: Readonly<Record<string, number>>;
}

export interface MemoryEngine {
  readonly kind: "embedded" | "hindsight";
  add(input: AddInput): Promise<AddResult>;
  search(input: SearchInput): Promise<{ results: SearchHit[] }>;
  list(input: ListInput): Promise<Page<MemoryUnit>>;
  recall(input: RecallInput): Promise<RecallResult>;
  reflect(input: ReflectInput): Promise<ReflectResult>;
  /** A unit by id, if `scope` may see it (else memory.not_found). */
  get(id: string, scope: Scope): Promise<MemoryUnit>;
  history(id: string, scope: Scope): Promise<{ id: string; history: HistoryEntry[] }>;
  curate(id: string, change: CurateInput, scope: Scope, by: string): Promise<MemoryUnit>;
  /** The ids among `ids` that delete() would find: units and documents (`doc_…`) `scope` may see; sorted, each once. */
  deletable(ids: readonly string[], scope: Scope): Promise<string[]>;
  /** Deletes the units (or documents, with their facts) among `ids` that `scope` may see; ids it cannot see count as not deleted. */
  delete(ids: readonly string[], scope: Scope): Promise<{ deleted: number; not_found: string[] }>;

  mentalModelList(input: { detail: MentalModelDetail; tags?: readonly string[] }): Promise<{ items: Array<Partial<MentalModel>> }>;
  mentalModelGet(id: string): Promise<MentalModel>;
  /** Creates it and queues its first refresh. */
  mentalModelCreate(input: MentalModelInput, by: string): Promise<{ mental_model_id: string; operation_id: string }>;
  mentalModelUpdate(id: string, change: Partial<MentalModelInput>): Promise<MentalModel>;
  mentalModelRefresh(id: string): Promise<{ operation_id: string; status: OperationStatus; mental_model_id: string }>;
  mentalModelDelete(id: string): Promise<{ deleted: number; id: string }>;

  directiveList(input: { active_only?: boolean; tags?: readonly string[] }): Promise<{ items: Directive[] }>;
  directiveGet(id: string): Promise<Directive>;
  directiveCreate(input: DirectiveInput): Promise<Directive>;
  directiveUpdate(id: string, change: Partial<DirectiveInput>): Promise<Directive>;
  directiveDelete(id: string): Promise<{ deleted: number; id: string }>;

  /** The operations `scope` may see, newest first. */
  operationList(input: { status?: OperationStatus; kind?: OperationKind; limit: number; scope: OperationScope }): Promise<{ items: Operation[] }>;
  /** An operation `scope` may see (else memory.not_found). */
  operationGet(id: string, scope: OperationScope): Promise<Operation>;
  /** Pending or processing → cancelled; else memory.operation_state (memory.not_found outside `scope`). */
  operationCancel(id: string, scope: OperationScope): Promise<Operation>;
  /** Failed (or cancelled) → pending again; else memory.operation_state (memory.not_found outside `scope`). */
  operationRetry(id: string, scope: OperationScope): Promise<Operation>;

  tags(scope: Scope): Promise<{ tags: TagCount[] }>;
  stats(scope: Scope): Promise<BankStats>;
  /** Merges duplicate facts now (counted in `deduplicated`) and queues the consolidation pass. */
  consolidate(scope: Scope): Promise<{ operation_id: string; deduplicated: number }>;

  /** Waits for queued operations to settle (tests, shutdown). */
  idle(): Promise<void>;
  close(): Promise<void>;
}
