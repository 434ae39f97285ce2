import type { Directive, DirectiveInput, MentalModel, MentalModelDetail, MentalModelInput } from "./engine.js";
import { projectModel } from "./engine.js";
import { recallUnits } from "./embedded-search.js";
import { marks, newId, notFoundError, tagUnion, type Store } from "./embedded-store.js";

/**
 * The embedded engine's bank-level objects: mental models (a recall kept as
 * content, refreshed by operations) and directives (standing instructions).
 * Neither belongs to a dataset; a mental model reads the facts of every
 * non-private dataset, so one caller's private facts never reach another
 * through it.
 */

/** A mental model's token budget when none is given. */
export const DEFAULT_MODEL_TOKENS = 2048;

interface ModelRow {
  readonly id: string;
  readonly name: string;
  readonly source_query: string;
  readonly max_tokens: number;
  readonly tags: string;
  readonly refresh_after_consolidation: number;
  readonly content: string | null;
  readonly refreshed_at: string | null;
  readonly refreshed_version: number | null;
  readonly created_at: string;
  readonly updated_at: string;
}

interface DirectiveRow {
  readonly id: string;
  readonly name: string;
  readonly content: string;
  readonly priority: number;
  readonly is_active: number;
  readonly tags: string;
  readonly created_at: string;
  readonly updated_at: string;
}

/** `AND EXISTS …`: rows of `alias` whose JSON `tags` hold any of `tags` (nothing when no tags). */
function anyTagSql(alias: string, tags: readonly string[] | undefined): { sql: string; params: string[] } {
  if (!tags || tags.length === 0) return { sql: "", params: [] };
  return { sql: ` AND EXISTS (SELECT 1 FROM json_each(${alias}.tags) j WHERE j.value IN (${marks(tags.length)}))`, params: [...tags] };
}

/** How many times non-private memory has changed (embedded-db.ts bank_version). */
function bankVersion(store: Store): number {
  return (store.q("SELECT n FROM bank_version").get() as { n: number }).n;
}

function modelOf(row: ModelRow, version: number): MentalModel {
  return {
    id: row.id,
    name: row.name,
    source_query: row.source_query,
    max_tokens: row.max_tokens,
    tags: JSON.parse(row.tags) as string[],
    trigger: { refresh_after_consolidation: row.refresh_after_consolidation === 1 },
    content: row.content,
    refreshed_at: row.refreshed_at,
    stale: row.refreshed_version === null || version > row.refreshed_version,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function modelRow(store: Store, id: string): ModelRow {
  const row = store.q("SELECT * FROM mental_models WHERE id = ?").get(id) as ModelRow | undefined;
  if (!row) throw notFoundError("mental model", id);
  return row;
}

/** Stores a new mental model (no content until its first refresh) and returns its id. */
export function createModel(store: Store, input: MentalModelInput): string {
  const id = newId("mm");
  const at = store.now();
  store
    .q(`INSERT INTO mental_models (id, name, source_query, max_tokens, tags, refresh_after_consolidation, content, refreshed_at, refreshed_version, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?, ?)`)
    .run(id, input.name, input.source_query, input.max_tokens ?? DEFAULT_MODEL_TOKENS, JSON.stringify(tagUnion(input.tags ?? [])), input.trigger?.refresh_after_consolidation ? 1 : 0, at, at);
  return id;
}

/** One mental model (memory.not_found when absent). `stale`: never refreshed, or non-private memory changed since. */
export function getModel(store: Store, id: string): MentalModel {
  return modelOf(modelRow(store, id), bankVersion(store));
}

/** Mental models by name (ties by id), those with any of `tags` when given, projected per `detail` (engine.ts projectModel). */
export function listModels(store: Store, input: { detail: MentalModelDetail; tags?: readonly string[] }): { items: Array<Partial<MentalModel>> } {
  const tags = anyTagSql("m", input.tags);
  const rows = store.q(`SELECT * FROM mental_models m WHERE 1${tags.sql} ORDER BY m.name, m.id`).all(...tags.params) as ModelRow[];
  const version = bankVersion(store);
  return { items: rows.map((row) => projectModel(modelOf(row, version), input.detail)) };
}

/** Applies the fields given (undefined = unchanged); the content waits for the next refresh. */
export function updateModel(store: Store, id: string, change: Partial<MentalModelInput>): MentalModel {
  const row = modelRow(store, id);
  const after = change.trigger?.refresh_after_consolidation ?? row.refresh_after_consolidation === 1;
  store
    .q("UPDATE mental_models SET name = ?, source_query = ?, max_tokens = ?, tags = ?, refresh_after_consolidation = ?, updated_at = ? WHERE id = ?")
    .run(change.name ?? row.name, change.source_query ?? row.source_query, change.max_tokens ?? row.max_tokens, change.tags ? JSON.stringify(tagUnion(change.tags)) : row.tags, after ? 1 : 0, store.now(), id);
  return getModel(store, id);
}

/** Deletes a mental model (memory.not_found when absent); a refresh still queued for it then fails. */
export function deleteModel(store: Store, id: string): { deleted: number; id: string } {
  modelRow(store, id);
  store.q("DELETE FROM mental_models WHERE id = ?").run(id);
  return { deleted: 1, id };
}

/** Ids of the models consolidation refreshes (trigger.refresh_after_consolidation), in id order. */
export function modelsRefreshedByConsolidation(store: Store): string[] {
  return (store.q("SELECT id FROM mental_models WHERE refresh_after_consolidation = 1 ORDER BY id").all() as Array<{ id: string }>).map((r) => r.id);
}

/**
 * A `refresh` operation's work: the model's content becomes the recall of its
 * source_query within its max_tokens over every non-private dataset, one
 * "- <text>" line per fact ("" when nothing matched). Fails when the model
 * was deleted after the refresh was queued.
 */
export function refreshModel(store: Store, id: string): Record<string, unknown> {
  const row = store.q("SELECT * FROM mental_models WHERE id = ?").get(id) as ModelRow | undefined;
  if (!row) throw new Error(`mental model ${id} no longer exists`);
  const recalled = recallUnits(store, { query: row.source_query, max_tokens: row.max_tokens, scope: { owner: null } });
  const content = recalled.results.map((hit) => `- ${hit.text}`).join("\n");
  store.q("UPDATE mental_models SET content = ?, refreshed_at = ?, refreshed_version = ? WHERE id = ?").run(content, store.now(), bankVersion(store), id);
  return { mental_model_id: id, facts: recalled.results.length, tokens_used: recalled.tokens_used };
}

function directiveOf(row: DirectiveRow): Directive {
  return { ...row, is_active: row.is_active === 1, tags: JSON.parse(row.tags) as string[] };
}

/** One directive (memory.not_found when absent). */
export function getDirective(store: Store, id: string): Directive {
  const row = store.q("SELECT * FROM directives WHERE id = ?").get(id) as DirectiveRow | undefined;
  if (!row) throw notFoundError("directive", id);
  return directiveOf(row);
}

/** A new directive: priority 0 and active unless given. */
export function createDirective(store: Store, input: DirectiveInput): Directive {
  const id = newId("dir");
  const at = store.now();
  store
    .q("INSERT INTO directives (id, name, content, priority, is_active, tags, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
    .run(id, input.name, input.content, input.priority ?? 0, input.is_active === false ? 0 : 1, JSON.stringify(tagUnion(input.tags ?? [])), at, at);
  return getDirective(store, id);
}

/** Directives by priority (highest first), then name, then id; only active ones with active_only; any of `tags` when given. */
export function listDirectives(store: Store, input: { active_only?: boolean; tags?: readonly string[] }): { items: Directive[] } {
  const tags = anyTagSql("d", input.tags);
  const sql = `SELECT * FROM directives d WHERE (? = 0 OR d.is_active = 1)${tags.sql} ORDER BY d.priority DESC, d.name, d.id`;
  return { items: (store.q(sql).all(input.active_only ? 1 : 0, ...tags.params) as DirectiveRow[]).map(directiveOf) };
}

/** Applies the fields given (undefined = unchanged). */
export function updateDirective(store: Store, id: string, change: Partial<DirectiveInput>): Directive {
  const d = getDirective(store, id);
  store
    .q("UPDATE directives SET name = ?, content = ?, priority = ?, is_active = ?, tags = ?, updated_at = ? WHERE id = ?")
    .run(change.name ?? d.name, change.content ?? d.content, change.priority ?? d.priority, (change.is_active ?? d.is_active) ? 1 : 0, JSON.stringify(tagUnion(change.tags ?? d.tags)), store.now(), id);
  return getDirective(store, id);
}

/** Deletes a directive (memory.not_found when absent). */
export function deleteDirective(store: Store, id: string): { deleted: number; id: string } {
  getDirective(store, id);
  store.q("DELETE FROM directives WHERE id = ?").run(id);
  return { deleted: 1, id };
}
