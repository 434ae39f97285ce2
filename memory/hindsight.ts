import { randomBytes } from "node:crypto";
import { MemoryError } from "./errors.js";
import { docKey } from "./embedded-store.js";
import { OPERATION_STATUSES, projectModel } from "./engine.js";
import type { AddInput, AddResult, BankStats, CurateInput, Directive, DirectiveInput, FactType, HistoryEntry, ListInput, MemoryEngine, MemoryUnit } from "./engine.js";
import type { MentalModel, MentalModelDetail, MentalModelInput, Operation, OperationKind, OperationScope, OperationStatus, Page, RecallInput, RecallResult } from "./engine.js";
import type { ReflectInput, ReflectResult, Scope, SearchHit, SearchInput, TagCount } from "./engine.js";
import { estimateTokens } from "./extract.js";
import { HindsightHttp, notFound } from "./hindsight-http.js";
import type { HindsightHttpOptions, Query } from "./hindsight-http.js";
import * as map from "./hindsight-map.js";

export interface HindsightEngineOptions extends HindsightHttpOptions {
  /** The clock (ms since the epoch); tests inject one. */
  readonly now?: () => number;
}

/** Units per page when hal0 walks Hindsight's memory list. */
const LIST_PAGE = 200;
/**
 * How often one memory_list page follows a changed count (units arriving
 * while it pages) before it gives up: a count that changes on every request
 * would otherwise be asked for again for ever.
 */
const MAX_RECOUNTS = 8;
/** Token budget of the recall behind memory_search (its limit is a count, not a budget). */
const SEARCH_BUDGET = 4096;
/** Fact types Hindsight's recall accepts; hal0's `opinion` has no Hindsight counterpart. */
const RECALL_TYPES: readonly FactType[] = ["world", "experience", "observation"];

/** The value of a promise, or undefined when it is memory.not_found. */
async function unlessNotFound<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof MemoryError && err.code === "memory.not_found") return undefined;
    throw err;
  }
}

/**
 * hal0-memory's client for an external Hindsight server (vectorize-io/hindsight,
 * REST under `/v1/default/banks/{bank}`). Every dataset lives in one bank
 * as tags (hindsight-map.ts); scopes become tag filters on the server and
 * are enforced again on every result here, so a unit outside the scope is
 * never returned, even by a server that ignores a filter.
 *
 * Errors (hindsight-http.ts): cannot connect → `memory.engine_unavailable`
 * (retry_after_s 5); any failed reply → `memory.engine_error`; a 404 on an
 * id → `memory.not_found`; a 409 on cancel/retry → `memory.operation_state`.
 *
 * Where Hindsight differs: a unit delete is Hindsight's soft delete
 * (invalidation; its HTTP API has no hard delete of one fact); search
 * scores are by rank (Hindsight ranks without scores); history is what the
 * unit records (created, edited, invalidated); consolidate reports
 * deduplicated 0 (Hindsight dedupes during retain).
 */
export class HindsightEngine implements MemoryEngine {
  readonly kind = "hindsight" as const;
  private readonly http: HindsightHttp;
  private readonly bank: string;
  private readonly now: () => number;

  constructor(options: HindsightEngineOptions) {
    this.http = new HindsightHttp(options);
    this.bank = this.http.bank;
    this.now = options.now ?? Date.now;
  }

  /**
   * The scope's datasets; without a list, every `dataset:` tag in the bank
   * the scope may see. A page holding only tags already sent is
   * memory.engine_error (repeatedPage), not asked past for ever.
   */
  private async datasetsOf(scope: Scope): Promise<readonly string[]> {
    if (scope.datasets) return scope.datasets;
    const found: string[] = [];
    const seen = new Set<string>();
    for (let offset = 0; ; ) {
      const reply = await this.http.object("GET", "/tags", "tag list", { query: { q: `${map.DATASET_TAG}*`, limit: LIST_PAGE, offset } });
      const page = map.recs(reply.items, "tag list");
      const tags = page.map((item) => String(item.tag));
      if (page.length > 0 && tags.every((tag) => seen.has(tag))) throw repeatedPage("tag list", offset);
      for (const tag of tags) {
        seen.add(tag);
        if (tag.startsWith(map.DATASET_TAG) && map.visible(tag.slice(map.DATASET_TAG.length), scope)) found.push(tag.slice(map.DATASET_TAG.length));
      }
      offset += page.length;
      if (page.length < LIST_PAGE || (typeof reply.total === "number" && offset >= reply.total)) return [...new Set(found)].sort();
    }
  }

  /** A unit `scope` may see, with Hindsight's record of it; memory.not_found otherwise. */
  private async unitIn(id: string, scope: Scope): Promise<{ raw: Record<string, unknown>; unit: MemoryUnit }> {
    if (!map.isUnitId(id)) throw notFound("memory unit", id);
    const raw = await this.http.object("GET", `/memories/${encodeURIComponent(id)}`, "memory unit", { notFound: ["memory unit", id] });
    const unit = map.unitOf(raw);
    if (!unit || !map.visible(unit.dataset, scope)) throw notFound("memory unit", id);
    return { raw, unit };
  }

  /**
   * Every unit of `scope` in one curation state, newest first (Hindsight's
   * order), with its Hindsight record; bank-wide reads (tags, stats) count these.
   * A page holding only units already sent is memory.engine_error
   * (repeatedPage): a server that ignores `offset` is not walked for ever.
   */
  private async *walk(scope: Scope, state: "valid" | "invalidated"): AsyncGenerator<{ raw: Record<string, unknown>; unit: MemoryUnit }> {
    const tags = scope.datasets?.map(map.datasetTag);
    const seen = new Set<unknown>();
    for (let offset = 0; ; ) {
      const reply = await this.http.object("GET", "/memories/list", "memory list", { query: { state, tags, tags_match: tags && "any_strict", limit: LIST_PAGE, offset } });
      const items = map.recs(reply.items, "memory list");
      if (items.length > 0 && items.every((raw) => typeof raw.id !== "string" || seen.has(raw.id))) throw repeatedPage("memory list", offset);
      for (const raw of items) {
        seen.add(raw.id);
        const unit = map.unitOf(raw);
        if (unit && map.visible(unit.dataset, scope)) yield { raw, unit };
      }
      offset += items.length;
      if (items.length < LIST_PAGE || offset >= map.num(reply.total)) return;
    }
  }

  /**
   * Retained asynchronously (`async: true` → operation_id) as one Hindsight
   * document: `doc_<hash(dataset, document_id)>` with a document_id (a new
   * version replaces the old one's facts), else a fresh `doc_<random>`.
   * `id` is that document, which memory_delete accepts.
   */
  async add(input: AddInput): Promise<AddResult> {
    const recordedAt = new Date(this.now()).toISOString();
    const id = input.document_id === undefined ? `doc_${randomBytes(8).toString("hex")}` : docKey(input.dataset, input.document_id);
    const scopeTags = input.dataset.startsWith("private:") ? [map.datasetTag(input.dataset), map.PRIVATE_TAG] : [map.datasetTag(input.dataset)];
    const item = { content: input.text, context: input.context, metadata: map.itemMetadata(input, recordedAt), document_id: id, tags: map.itemTags(input.dataset, input.source, input.tags), observation_scopes: [scopeTags] };
    const reply = await this.http.object("POST", "/memories", "retain reply", { body: { items: [item], async: true } });
    return typeof reply.operation_id === "string" ? { id, timestamp: recordedAt, operation_id: reply.operation_id } : { id, timestamp: recordedAt };
  }

  /** Hindsight's recall, filtered to `datasets` and the caller's tags and types, in its rank order. */
  private async recalled(query: string, maxTokens: number, datasets: readonly string[], f: { types?: readonly FactType[]; tags?: readonly string[]; tags_match?: "any" | "all" }): Promise<MemoryUnit[]> {
    const types = (f.types ?? RECALL_TYPES).filter((t) => RECALL_TYPES.includes(t));
    if (datasets.length === 0 || types.length === 0) return [];
    const body = { query, max_tokens: maxTokens, budget: "mid", types, tag_groups: map.tagGroups(datasets, f.tags, f.tags_match) };
    const reply = await this.http.object("POST", "/memories/recall", "recall reply", { body });
    return map
      .recs(reply.results, "recall results")
      .map(map.unitOf)
      .filter((u): u is MemoryUnit => u !== undefined && datasets.includes(u.dataset) && u.state === "active" && types.includes(u.fact_type) && map.hasTags(u, f.tags, f.tags_match));
  }

  /** Recall in rank order, filtered by recording time; score = 1 / rank. */
  async search(input: SearchInput): Promise<{ results: SearchHit[] }> {
    const units = await this.recalled(input.query, SEARCH_BUDGET, await this.datasetsOf(input.scope), input);
    const inWindow = units.filter((u) => (input.before === undefined || Date.parse(u.timestamp) < Date.parse(input.before)) && (input.after === undefined || Date.parse(u.timestamp) >= Date.parse(input.after)));
    return { results: inWindow.slice(0, input.limit).map((u, i) => ({ ...u, score: 1 / (i + 1) })) };
  }

  /**
   * Units in the order they were recorded (oldest first), though Hindsight
   * lists newest first: the cursor counts units consumed from the oldest end,
   * which new units do not shift. Pages are filled from as many Hindsight
   * pages as the scope filter needs. A Hindsight page holding fewer units
   * than its count says it has (its count and its pages disagree) is
   * memory.engine_error, not asked for again, as is a count that changed
   * on more than MAX_RECOUNTS pages of one call.
   */
  async list(input: ListInput): Promise<Page<MemoryUnit>> {
    const tags = input.scope.datasets?.map(map.datasetTag);
    const query: Query = { state: input.include_invalid ? undefined : "valid", tags, tags_match: tags && "any_strict" };
    let consumed = map.decodeCursor(input.cursor);
    let total = map.num((await this.http.object("GET", "/memories/list", "memory list", { query: { ...query, limit: 1, offset: 0 } })).total);
    const items: MemoryUnit[] = [];
    let recounts = 0;
    while (items.length < input.limit && consumed < total) {
      const n = Math.min(LIST_PAGE, total - consumed);
      const reply = await this.http.object("GET", "/memories/list", "memory list", { query: { ...query, limit: n, offset: total - consumed - n } });
      if (map.num(reply.total) !== total) {
        if (++recounts > MAX_RECOUNTS) {
          throw new MemoryError("memory.engine_error", `the memory engine's memory list changed its count of units on each of ${recounts} pages hal0 asked for (last ${total}, then ${map.num(reply.total)}); retry when it settles`, { recounts, total, then: map.num(reply.total) });
        }
        total = map.num(reply.total);
        continue;
      }
      const page = map.recs(reply.items, "memory list");
      if (page.length !== n) {
        // Asked again, the same short page would come back for ever; a short page's units are not the window's oldest either.
        throw new MemoryError("memory.engine_error", `the memory engine's memory list counts ${total} units but its page at offset ${total - consumed - n} held ${page.length} of the ${n} asked for`, { total, offset: total - consumed - n, limit: n, items: page.length });
      }
      for (const raw of page.reverse()) {
        consumed++;
        const unit = map.unitOf(raw);
        if (unit && map.visible(unit.dataset, input.scope) && map.hasTags(unit, input.tags) && (input.include_invalid || unit.state === "active")) items.push(unit);
        if (items.length === input.limit) break;
      }
    }
    return { items, next_cursor: consumed < total ? map.encodeCursor(consumed) : null };
  }

  /** Hindsight's recall packed into max_tokens by extract.ts estimateTokens, in rank order. */
  async recall(input: RecallInput): Promise<RecallResult> {
    const units = await this.recalled(input.query, input.max_tokens, await this.datasetsOf(input.scope), input);
    const results: SearchHit[] = [];
    let used = 0;
    let truncated = false;
    for (const unit of units) {
      const tokens = estimateTokens(unit.text);
      if (used + tokens > input.max_tokens) truncated = true;
      else {
        results.push({ ...unit, score: 1 / (results.length + 1) });
        used += tokens;
      }
    }
    return { results, tokens_used: used, max_tokens: input.max_tokens, truncated };
  }

  /** Hindsight's reflect over the scope's datasets; based_on = the facts it cites that the scope may see. */
  async reflect(input: ReflectInput): Promise<ReflectResult> {
    const datasets = await this.datasetsOf(input.scope);
    if (datasets.length === 0) return { text: "", based_on: [] };
    const body = { query: input.query, max_tokens: input.max_tokens, include: { facts: {} }, tag_groups: map.tagGroups(datasets) };
    const reply = await this.http.object("POST", "/reflect", "reflect reply", { body });
    const basedOn = reply.based_on !== null && typeof reply.based_on === "object" ? (reply.based_on as { memories?: unknown }).memories : undefined;
    const ids = [...new Set((Array.isArray(basedOn) ? basedOn : []).map((m) => (m as { id?: unknown }).id).filter((id): id is string => typeof id === "string"))];
    const units: MemoryUnit[] = [];
    for (const id of ids) {
      const found = await unlessNotFound(this.unitIn(id, { datasets, owner: input.scope.owner }));
      if (found) units.push(found.unit);
    }
    return { text: typeof reply.text === "string" ? reply.text : "", based_on: units.map((u, i) => ({ ...u, score: 1 / (i + 1) })) };
  }

  async get(id: string, scope: Scope): Promise<MemoryUnit> {
    return (await this.unitIn(id, scope)).unit;
  }

  async history(id: string, scope: Scope): Promise<{ id: string; history: HistoryEntry[] }> {
    const { raw, unit } = await this.unitIn(id, scope);
    return { id, history: map.historyOf(raw, unit) };
  }

  /** PATCH /memories/{id}: null clears context and dates (Hindsight's ""); invalidating records `by` in the reason. */
  async curate(id: string, change: CurateInput, scope: Scope, by: string): Promise<MemoryUnit> {
    await this.unitIn(id, scope);
    const cleared = (v: string | null | undefined) => (v === null ? "" : v);
    const body = {
      text: change.text,
      context: cleared(change.context),
      occurred_start: cleared(change.occurred_start),
      occurred_end: cleared(change.occurred_end),
      fact_type: change.fact_type,
      entities: change.entities,
      state: change.state === undefined ? undefined : change.state === "invalid" ? "invalidated" : "valid",
      reason: change.state === "invalid" ? map.invalidationReason(by, "curated") : undefined,
    };
    await this.http.call("PATCH", `/memories/${encodeURIComponent(id)}`, { body, notFound: ["memory unit", id] });
    return (await this.unitIn(id, scope)).unit;
  }

  /**
   * `doc_…` ids: the Hindsight document with all its facts (counts 1 + its
   * facts). Unit ids: invalidated (Hindsight's soft delete: out of recall,
   * search and list, kept in its archive); an already invalid unit counts as
   * not found. Ids the scope cannot see come back in `not_found`, sorted.
   */
  async delete(ids: readonly string[], scope: Scope): Promise<{ deleted: number; not_found: string[] }> {
    let deleted = 0;
    const missing: string[] = [];
    for (const id of new Set(ids)) {
      const n = id.startsWith("doc_") ? await this.deleteDocument(id, scope) : await this.invalidate(id, scope);
      if (n === undefined) missing.push(id);
      else deleted += n;
    }
    return { deleted, not_found: missing.sort() };
  }

  /** What delete() would find: documents `scope` may see, and its active units. */
  async deletable(ids: readonly string[], scope: Scope): Promise<string[]> {
    const found: string[] = [];
    for (const id of new Set(ids)) {
      const visible = id.startsWith("doc_") ? await this.documentVisible(id, scope) : (await unlessNotFound(this.unitIn(id, scope)))?.unit.state === "active";
      if (visible) found.push(id);
    }
    return found.sort();
  }

  /** A Hindsight document whose dataset `scope` may see. */
  private async documentVisible(id: string, scope: Scope): Promise<boolean> {
    const dataset = await this.documentDataset(id);
    return dataset !== undefined && map.visible(dataset, scope);
  }

  /** The dataset of a document Hindsight holds (from its tags); undefined when it holds none by that id. */
  private async documentDataset(id: string): Promise<string | undefined> {
    const doc = await unlessNotFound(this.http.object("GET", `/documents/${encodeURIComponent(id)}`, "document", { notFound: ["document", id] }));
    return doc ? map.decodeTags(Array.isArray(doc.tags) ? doc.tags.map(String) : []).dataset : undefined;
  }

  private async deleteDocument(id: string, scope: Scope): Promise<number | undefined> {
    const path = `/documents/${encodeURIComponent(id)}`;
    if (!(await this.documentVisible(id, scope))) return undefined;
    const reply = await unlessNotFound(this.http.object("DELETE", path, "document delete reply", { notFound: ["document", id] }));
    return reply && 1 + map.num(reply.memory_units_deleted);
  }

  private async invalidate(id: string, scope: Scope): Promise<number | undefined> {
    const found = await unlessNotFound(this.unitIn(id, scope));
    if (!found || found.unit.state === "invalid") return undefined;
    await this.http.call("PATCH", `/memories/${encodeURIComponent(id)}`, { body: { state: "invalidated", reason: map.invalidationReason(scope.owner, "deleted") }, notFound: ["memory unit", id] });
    return 1;
  }

  /** By name (ties by id), those with any of `tags`; projected per detail like the embedded engine. */
  async mentalModelList(input: { detail: MentalModelDetail; tags?: readonly string[] }): Promise<{ items: Array<Partial<MentalModel>> }> {
    const reply = await this.http.object("GET", "/mental-models", "mental model list", { query: { detail: "full", tags: input.tags, tags_match: "any", limit: 1000 } });
    const models = map.recs(reply.items, "mental model list").map(map.mentalModelOf);
    const wanted = models.filter((m) => !input.tags?.length || input.tags.some((t) => m.tags.includes(t)));
    wanted.sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
    return { items: wanted.map((m) => projectModel(m, input.detail)) };
  }

  async mentalModelGet(id: string): Promise<MentalModel> {
    return map.mentalModelOf(await this.http.object("GET", `/mental-models/${encodeURIComponent(id)}`, "mental model", { query: { detail: "full" }, notFound: ["mental model", id] }));
  }

  /**
   * Its refreshes read every dataset but the private ones (a tag group
   * excluding `hal0:private`), as the embedded engine's do; its tags label
   * it. Hindsight records no author, so `by` is not kept.
   */
  async mentalModelCreate(input: MentalModelInput): Promise<{ mental_model_id: string; operation_id: string }> {
    const id = `mm-${randomBytes(8).toString("hex")}`;
    const body = { id, name: input.name, source_query: input.source_query, max_tokens: input.max_tokens, tags: input.tags, trigger: map.modelTrigger(input.trigger?.refresh_after_consolidation ?? false) };
    const reply = await this.http.object("POST", "/mental-models", "mental model create reply", { body });
    return { mental_model_id: typeof reply.mental_model_id === "string" ? reply.mental_model_id : id, operation_id: String(reply.operation_id) };
  }

  async mentalModelUpdate(id: string, change: Partial<MentalModelInput>): Promise<MentalModel> {
    const after = change.trigger?.refresh_after_consolidation;
    const body = { name: change.name, source_query: change.source_query, max_tokens: change.max_tokens, tags: change.tags, trigger: after === undefined ? undefined : map.modelTrigger(after) };
    await this.http.call("PATCH", `/mental-models/${encodeURIComponent(id)}`, { body, notFound: ["mental model", id] });
    return this.mentalModelGet(id);
  }

  async mentalModelRefresh(id: string): Promise<{ operation_id: string; status: OperationStatus; mental_model_id: string }> {
    const reply = await this.http.object("POST", `/mental-models/${encodeURIComponent(id)}/refresh`, "refresh reply", { notFound: ["mental model", id] });
    return { operation_id: String(reply.operation_id), status: map.statusOf(reply.status) ?? "pending", mental_model_id: id };
  }

  async mentalModelDelete(id: string): Promise<{ deleted: number; id: string }> {
    await this.http.call("DELETE", `/mental-models/${encodeURIComponent(id)}`, { notFound: ["mental model", id] });
    return { deleted: 1, id };
  }

  /** Highest priority first, then name, then id; active_only false (Hindsight's default is true) lists all. */
  async directiveList(input: { active_only?: boolean; tags?: readonly string[] }): Promise<{ items: Directive[] }> {
    const reply = await this.http.object("GET", "/directives", "directive list", { query: { active_only: input.active_only === true, tags: input.tags, tags_match: "any", limit: 1000 } });
    const items = map.recs(reply.items, "directive list").map(map.directiveOf);
    const wanted = items.filter((d) => (!input.active_only || d.is_active) && (!input.tags?.length || input.tags.some((t) => d.tags.includes(t))));
    return { items: wanted.sort(map.byPriority) };
  }

  async directiveGet(id: string): Promise<Directive> {
    return map.directiveOf(await this.http.object("GET", `/directives/${encodeURIComponent(id)}`, "directive", { notFound: ["directive", id] }));
  }

  async directiveCreate(input: DirectiveInput): Promise<Directive> {
    return map.directiveOf(await this.http.object("POST", "/directives", "directive", { body: input }));
  }

  async directiveUpdate(id: string, change: Partial<DirectiveInput>): Promise<Directive> {
    return map.directiveOf(await this.http.object("PATCH", `/directives/${encodeURIComponent(id)}`, "directive", { body: change, notFound: ["directive", id] }));
  }

  async directiveDelete(id: string): Promise<{ deleted: number; id: string }> {
    await this.http.call("DELETE", `/directives/${encodeURIComponent(id)}`, { notFound: ["directive", id] });
    return { deleted: 1, id };
  }

  /**
   * Newest first (Hindsight's order), at most 100; Hindsight's own kinds
   * (graph maintenance, webhooks) are left out, and so are retains of a
   * document in a dataset `scope` may not see.
   */
  async operationList(input: { status?: OperationStatus; kind?: OperationKind; limit: number; scope: OperationScope }): Promise<{ items: Operation[] }> {
    const query = { status: input.status, type: input.kind && map.HINDSIGHT_OPERATION_TYPE[input.kind], limit: Math.min(Math.max(input.limit, 1), 100) };
    const reply = await this.http.object("GET", "/operations", "operation list", { query });
    const ops = map.recs(reply.operations, "operation list").map(map.operationOf);
    const items: Operation[] = [];
    for (const op of ops) if (op !== undefined && (!input.status || op.status === input.status) && (!input.kind || op.kind === input.kind) && (await this.operationVisible(op, input.scope))) items.push(op);
    return { items };
  }

  async operationGet(id: string, scope: OperationScope): Promise<Operation> {
    const op = map.operationOf(await this.http.object("GET", `/operations/${encodeURIComponent(id)}`, "operation", { notFound: ["operation", id] }));
    if (!op || !(await this.operationVisible(op, scope))) throw notFound("operation", id);
    return op;
  }

  async operationCancel(id: string, scope: OperationScope): Promise<Operation> {
    return this.transition(id, scope, ["pending", "processing"], "DELETE", `/operations/${encodeURIComponent(id)}`);
  }

  async operationRetry(id: string, scope: OperationScope): Promise<Operation> {
    return this.transition(id, scope, ["failed", "cancelled"], "POST", `/operations/${encodeURIComponent(id)}/retry`);
  }

  /**
   * Whether `scope` may see an operation. Hindsight's operations carry no
   * tags, so only a retain whose document Hindsight already holds can be
   * told apart: it is visible when the document's dataset is. A retain whose
   * document is not stored yet, and every other kind, is visible.
   */
  private async operationVisible(op: Operation, scope: OperationScope): Promise<boolean> {
    if (scope === "all" || op.kind !== "retain" || op.target === null) return true;
    const dataset = await this.documentDataset(op.target);
    return dataset === undefined || map.visible(dataset, scope);
  }

  /** Cancel/retry: memory.operation_state unless the operation is in one of `from` (checked here and by the server's 409). */
  private async transition(id: string, scope: OperationScope, from: readonly OperationStatus[], method: string, path: string): Promise<Operation> {
    const refuse = (op: Operation) => new MemoryError("memory.operation_state", `operation ${id} is ${op.status}`, { id, status: op.status });
    const op = await this.operationGet(id, scope);
    if (!from.includes(op.status)) throw refuse(op);
    await this.http.call(method, path, { notFound: ["operation", id], onConflict: async () => { throw refuse(await this.operationGet(id, "all")); } });
    return this.operationGet(id, "all");
  }

  /** Tags of the scope's active units (namespace tags left out), most used first, ties by tag. */
  async tags(scope: Scope): Promise<{ tags: TagCount[] }> {
    const counts = new Map<string, number>();
    for await (const { unit } of this.walk(scope, "valid")) for (const tag of unit.tags) counts.set(tag, (counts.get(tag) ?? 0) + 1);
    const tags = [...counts].map(([tag, count]) => ({ tag, count }));
    return { tags: tags.sort((a, b) => b.count - a.count || (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0)) };
  }

  /**
   * Units, observations, documents and datasets counted over the scope;
   * links and operations are Hindsight's bank-wide counts (it keeps no
   * per-tag ones, so another caller's private retains are counted, though
   * never listed); mental models and directives belong to no dataset.
   */
  async stats(scope: Scope): Promise<BankStats> {
    let nodes = 0;
    let observations = 0;
    let invalidated = 0;
    const datasets: Record<string, number> = {};
    const documents = new Set<string>();
    for await (const { raw, unit } of this.walk(scope, "valid")) {
      nodes++;
      if (unit.fact_type === "observation") observations++;
      datasets[unit.dataset] = (datasets[unit.dataset] ?? 0) + 1;
      if (typeof raw.document_id === "string") documents.add(raw.document_id);
    }
    for await (const _ of this.walk(scope, "invalidated")) invalidated++;
    const s = await this.http.object("GET", "/stats", "bank stats");
    const byStatus = s.operations_by_status !== null && typeof s.operations_by_status === "object" ? (s.operations_by_status as Record<string, unknown>) : { pending: s.pending_operations, failed: s.failed_operations };
    const operations = Object.fromEntries(OPERATION_STATUSES.map((st) => [st, map.num(byStatus[st])])) as Record<OperationStatus, number>;
    const models = map.recs((await this.http.object("GET", "/mental-models", "mental model list", { query: { detail: "metadata", limit: 1000 } })).items, "mental model list");
    const directives = map.recs((await this.http.object("GET", "/directives", "directive list", { query: { active_only: false, limit: 1000 } })).items, "directive list");
    const sorted = Object.fromEntries(Object.keys(datasets).sort().map((d) => [d, datasets[d]!]));
    return { bank: this.bank, engine: "hindsight", nodes, links: map.num(s.total_links), observations, invalidated, documents: documents.size, mental_models: models.length, directives: directives.length, operations, datasets: sorted };
  }

  /** Queues Hindsight's consolidation for the scope's datasets (one observation scope each). */
  async consolidate(scope: Scope): Promise<{ operation_id: string; deduplicated: number }> {
    const datasets = await this.datasetsOf(scope);
    const body = datasets.length === 0 ? {} : { observation_scopes: datasets.map((d) => [map.datasetTag(d)]) };
    const reply = await this.http.object("POST", "/consolidate", "consolidation reply", { body });
    return { operation_id: String(reply.operation_id), deduplicated: 0 };
  }

  /** Nothing is queued in hal0: Hindsight runs its operations itself. */
  async idle(): Promise<void> {}

  /** Later calls are memory.engine_unavailable (the service opens a new engine); calls under way finish. */
  async close(): Promise<void> {
    this.http.close();
  }
}

/**
 * memory.engine_error for a page of a Hindsight list holding nothing the
 * pages before it did not (a server that ignores `offset` sends its first
 * page again): asking for the next one would go on for ever.
 */
function repeatedPage(what: string, offset: number): MemoryError {
  return new MemoryError("memory.engine_error", `the memory engine's ${what} answered the page at offset ${offset} with items it had already sent: it does not page by offset`, { list: what, offset });
}
