import type { AddInput, AddResult, CurateInput, HistoryEntry, MemoryUnit } from "./engine.js";
import { docKey, findUnit, newId, requireUnit, scopeSql, tagUnion, unitOf, type Store, type UnitRow, type Visibility } from "./embedded-store.js";
import { entitiesOf, normalise, splitSentences, textHash } from "./extract.js";

/**
 * The embedded engine's writes to facts: remembering one (deduplicated),
 * extracting a document's facts (the `retain` operation's work), curation
 * with its history, deletion, and merging duplicates. Every function runs
 * inside the caller's transaction.
 */

type Action = HistoryEntry["action"];
type Changes = Record<string, { before: unknown; after: unknown }>;

/** What a new unit is made of (it starts active, with no occurred range). */
interface NewUnit {
  readonly dataset: string;
  readonly text: string;
  readonly context: string | null;
  readonly source: string;
  readonly tags: readonly string[];
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly document_id: string | null;
  readonly doc_key: string | null;
}

/** What a queued `retain` operation carries: one version of one document. */
export interface RetainPayload {
  readonly text: string;
  readonly dataset: string;
  readonly document_id: string;
  readonly tags: readonly string[];
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly source: string;
  readonly context: string | null;
}

/** The notices a zero-yield retain reports (engine.ts Operation). */
export const ALREADY_KNOWN_NOTICE = "content was already known";
export const NOTHING_LEARNED_NOTICE = "nothing new was learned: every fact in it was already in memory";

/** Appends one entry to a unit's history (numbered 1, 2, … per unit). */
function recordHistory(store: Store, unitId: string, by: string, action: Action, changes: Changes): void {
  store
    .q("INSERT INTO unit_history (unit_id, seq, at, by, action, changes) SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM unit_history WHERE unit_id = ?")
    .run(unitId, store.now(), by, action, JSON.stringify(changes), unitId);
}

/** Inserts an active `world` fact with its tags and its `created` history entry. */
function insertUnit(store: Store, unit: NewUnit): { id: string; created_at: string } {
  const id = newId("mem");
  const at = store.now();
  const tags = tagUnion(unit.tags);
  store
    .q(`INSERT INTO units (id, dataset, text, norm, context, fact_type, source, tags, metadata, entities, document_id, doc_key, extracted, state, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, 'world', ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?)`)
    .run(id, unit.dataset, unit.text, normalise(unit.text), unit.context, unit.source, JSON.stringify(tags), JSON.stringify(unit.metadata), JSON.stringify(entitiesOf(unit.text)), unit.document_id, unit.doc_key, unit.doc_key === null ? null : unit.text, at, at);
  for (const tag of tags) store.q("INSERT INTO unit_tags (unit_id, tag) VALUES (?, ?)").run(id, tag);
  recordHistory(store, id, unit.source, "created", {});
  return { id, created_at: at };
}

/** Adds `tags` a unit lacks (one history entry with the tags change); false when it had them all. */
function addTags(store: Store, row: UnitRow, tags: readonly string[], by: string, action: Action, extra: Changes = {}): boolean {
  const before = JSON.parse(row.tags) as string[];
  const after = tagUnion(before, tags);
  if (after.length === before.length) return false;
  store.q("UPDATE units SET tags = ?, updated_at = ? WHERE id = ?").run(JSON.stringify(after), store.now(), row.id);
  for (const tag of after.slice(before.length)) store.q("INSERT INTO unit_tags (unit_id, tag) VALUES (?, ?)").run(row.id, tag);
  recordHistory(store, row.id, by, action, { tags: { before, after }, ...extra });
  return true;
}

/** The oldest active unit of `dataset` with this normalised text, optionally outside one document. */
function activeTwin(store: Store, dataset: string, norm: string, exceptDoc: string | null = null): UnitRow | undefined {
  return store
    .q("SELECT * FROM units WHERE dataset = ? AND norm = ? AND state = 'active' AND (doc_key IS NULL OR doc_key IS NOT ?) ORDER BY created_at, seq LIMIT 1")
    .get(dataset, norm, exceptDoc) as UnitRow | undefined;
}

/** Recounts a document's active facts into `documents.fact_count`. */
function recountDocument(store: Store, key: string): void {
  store.q("UPDATE documents SET fact_count = (SELECT COUNT(*) FROM units WHERE doc_key = @key AND state = 'active') WHERE id = @key").run({ key });
}

/**
 * Remembers one fact now. Text already active in the dataset (same
 * normalised form) is not stored twice: the existing unit is returned with
 * `already_known` and the new tags merged into it.
 */
export function addFact(store: Store, input: AddInput): AddResult {
  const twin = activeTwin(store, input.dataset, normalise(input.text));
  if (twin) {
    addTags(store, twin, input.tags, input.source, "curated");
    return { id: twin.id, timestamp: twin.created_at, already_known: true };
  }
  const { id, created_at } = insertUnit(store, { ...input, context: input.context ?? null, document_id: null, doc_key: null });
  return { id, timestamp: created_at };
}

/** Records (or touches) the document a `memory_add` with document_id names; its facts come with the retain operation. */
export function upsertDocument(store: Store, input: AddInput & { document_id: string }): { id: string; timestamp: string } {
  const id = docKey(input.dataset, input.document_id);
  const at = store.now();
  store
    .q(`INSERT INTO documents (id, dataset, document_id, text_hash, fact_count, source, created_at, updated_at) VALUES (?, ?, ?, NULL, 0, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET source = excluded.source, updated_at = excluded.updated_at`)
    .run(id, input.dataset, input.document_id, input.source, at, at);
  return { id, timestamp: at };
}

/**
 * A `retain` operation's work: the document's new version replaces the old
 * one's facts. A version identical to the last one extracted changes
 * nothing ("content was already known"). Otherwise, split into sentences:
 * the document's facts whose sentence (as extracted, whatever curation made
 * of their text) is still in it stay, curation kept; the others go; and
 * each new sentence becomes a fact unless the dataset already holds it
 * actively from elsewhere.
 */
export function runRetain(store: Store, key: string, p: RetainPayload): Record<string, unknown> {
  const doc = store.q("SELECT text_hash FROM documents WHERE id = ?").get(key) as { text_hash: string | null } | undefined;
  if (!doc) throw new Error(`document ${key} no longer exists`);
  const hash = textHash(p.text);
  if (doc.text_hash === hash) {
    const { n } = store.q("SELECT COUNT(*) AS n FROM units WHERE doc_key = ? AND state = 'active'").get(key) as { n: number };
    return { facts_extracted: 0, document_id: p.document_id, document_fact_count: n, notice: ALREADY_KNOWN_NOTICE };
  }
  const sentences = new Map<string, string>();
  for (const s of splitSentences(p.text)) if (!sentences.has(normalise(s))) sentences.set(normalise(s), s);
  // Each fact is matched by the sentence it was extracted from, not its (maybe curated) text.
  const own = (store.q("SELECT id, coalesce(extracted, text) AS extracted FROM units WHERE doc_key = ?").all(key) as Array<{ id: string; extracted: string }>).map((f) => ({ id: f.id, norm: normalise(f.extracted) }));
  for (const fact of own) if (!sentences.has(fact.norm)) store.q("DELETE FROM units WHERE id = ?").run(fact.id);
  const kept = new Set(own.map((f) => f.norm));
  let inserted = 0;
  for (const [norm, text] of sentences) {
    if (kept.has(norm) || activeTwin(store, p.dataset, norm, key)) continue;
    insertUnit(store, { ...p, text, doc_key: key });
    inserted++;
  }
  store.q("UPDATE documents SET text_hash = ?, updated_at = ? WHERE id = ?").run(hash, store.now(), key);
  recountDocument(store, key);
  return inserted > 0 ? { facts_extracted: inserted, document_id: p.document_id } : { facts_extracted: 0, document_id: p.document_id, nothing_learned: true, notice: NOTHING_LEARNED_NOTICE };
}

/** A unit's history, oldest first (memory.not_found outside `v`). */
export function unitHistory(store: Store, id: string, v: Visibility): { id: string; history: HistoryEntry[] } {
  requireUnit(store, id, v);
  const rows = store.q("SELECT at, by, action, changes FROM unit_history WHERE unit_id = ? ORDER BY seq").all(id) as Array<Omit<HistoryEntry, "changes"> & { changes: string }>;
  return { id, history: rows.map((r) => ({ at: r.at, by: r.by, action: r.action, changes: JSON.parse(r.changes) as Changes })) };
}

const CURATED_FIELDS = ["text", "context", "occurred_start", "occurred_end", "fact_type", "entities", "state"] as const;

/**
 * Applies the fields given (undefined = unchanged) and records one history
 * entry with each changed field's before/after: `invalidated` or `restored`
 * when the state changed, else `curated`. Nothing changed, nothing recorded.
 */
export function curateUnit(store: Store, id: string, change: CurateInput, v: Visibility, by: string): MemoryUnit {
  const row = requireUnit(store, id, v);
  const changes: Changes = {};
  const sets: string[] = [];
  const params: unknown[] = [];
  for (const field of CURATED_FIELDS) {
    const after = change[field];
    if (after === undefined) continue;
    const before = field === "entities" ? (JSON.parse(row.entities) as string[]) : row[field];
    if (JSON.stringify(before) === JSON.stringify(after)) continue;
    changes[field] = { before, after };
    sets.push(`${field} = ?`);
    params.push(field === "entities" ? JSON.stringify(after) : after);
    if (field === "text") {
      sets.push("norm = ?");
      params.push(normalise(after as string));
    }
  }
  if (sets.length === 0) return unitOf(row);
  store.q(`UPDATE units SET ${sets.join(", ")}, updated_at = ? WHERE id = ?`).run(...params, store.now(), id);
  const state = changes.state?.after;
  recordHistory(store, id, by, state === "invalid" ? "invalidated" : state === "active" ? "restored" : "curated", changes);
  if (row.doc_key && state !== undefined) recountDocument(store, row.doc_key);
  return unitOf(requireUnit(store, id, v));
}

/** The units and documents among `ids` that `v` may see (what deleteIds would delete), sorted, each once. */
export function deletableIds(store: Store, ids: readonly string[], v: Visibility): string[] {
  return [...new Set(ids)].filter((id) => (id.startsWith("doc_") ? documentVisible(store, id, v) : findUnit(store, id, v) !== undefined)).sort();
}

/** Whether `v` may see document `id` (`doc_…`). */
function documentVisible(store: Store, id: string, v: Visibility): boolean {
  const docScope = scopeSql(v, "d.dataset");
  return store.q(`SELECT 1 FROM documents d WHERE d.id = ? AND ${docScope.sql}`).get(id, ...docScope.params) !== undefined;
}

/**
 * Deletes the units and documents among `ids` that `v` may see. A document
 * (`doc_…`) goes with all its facts and counts 1 + its facts; a unit counts
 * 1. Ids not visible (or not existing) come back in `not_found`, sorted;
 * an id given twice counts once.
 */
export function deleteIds(store: Store, ids: readonly string[], v: Visibility): { deleted: number; not_found: string[] } {
  let deleted = 0;
  const notFound: string[] = [];
  const touched = new Set<string>();
  for (const id of new Set(ids)) {
    if (id.startsWith("doc_")) {
      if (!documentVisible(store, id, v)) notFound.push(id);
      else deleted += store.q("DELETE FROM units WHERE doc_key = ?").run(id).changes + store.q("DELETE FROM documents WHERE id = ?").run(id).changes;
      continue;
    }
    const row = findUnit(store, id, v);
    if (!row) notFound.push(id);
    else {
      deleted += store.q("DELETE FROM units WHERE id = ?").run(id).changes;
      if (row.doc_key) touched.add(row.doc_key);
    }
  }
  for (const key of touched) recountDocument(store, key);
  return { deleted, not_found: notFound.sort() };
}

/**
 * Merges active duplicates (same dataset and normalised text) within `v`:
 * the oldest stays and takes the others' tags; the others become invalid
 * (history `merged`, by `engine`, naming the unit kept). Returns how many
 * were merged away.
 */
export function mergeDuplicates(store: Store, v: Visibility): number {
  const scope = scopeSql(v);
  const groups = store
    .q(`SELECT u.dataset AS dataset, u.norm AS norm FROM units u WHERE u.state = 'active' AND ${scope.sql} GROUP BY u.dataset, u.norm HAVING COUNT(*) > 1 ORDER BY u.dataset, u.norm`)
    .all(...scope.params) as Array<{ dataset: string; norm: string }>;
  let merged = 0;
  for (const group of groups) {
    const [keep, ...dupes] = store.q("SELECT * FROM units WHERE dataset = ? AND norm = ? AND state = 'active' ORDER BY created_at, seq").all(group.dataset, group.norm) as UnitRow[];
    addTags(store, keep!, dupes.flatMap((d) => JSON.parse(d.tags) as string[]), "engine", "merged");
    for (const dupe of dupes) {
      store.q("UPDATE units SET state = 'invalid', updated_at = ? WHERE id = ?").run(store.now(), dupe.id);
      recordHistory(store, dupe.id, "engine", "merged", { state: { before: "active", after: "invalid" }, merged_into: { before: null, after: keep!.id } });
      if (dupe.doc_key) recountDocument(store, dupe.doc_key);
      merged++;
    }
  }
  return merged;
}
