import { MemoryError } from "./errors.js";
import { OPERATION_STATUSES, type BankStats, type FactType, type ListInput, type MemoryUnit, type OperationStatus, type Page, type RecallInput, type RecallResult, type SearchHit, type SearchInput, type TagCount } from "./engine.js";
import { marks, scopeSql, unitOf, type Store, type UnitRow, type Visibility } from "./embedded-store.js";
import { operationScopeSql } from "./embedded-ops.js";
import { estimateTokens, ftsExpression, queryWords } from "./extract.js";

/**
 * The embedded engine's reads over facts: ranked full-text search (FTS5
 * matching, BM25 weighed over the datasets searched alone), paging in recording order, token-budgeted recall, tag counts and
 * bank statistics. Every filter is SQL and every result is LIMITed in SQL,
 * so a search costs the matching rows' ranking, not the bank's size.
 */

/** An engine input whose scope may also be the bank-level view (no private dataset). */
export type Scoped<T extends { scope: unknown }> = Omit<T, "scope"> & { readonly scope: Visibility };

/** Recall ranks at most this many candidates before packing the budget. */
export const RECALL_CANDIDATES = 200;

interface Filter {
  readonly scope: Visibility;
  readonly tags?: readonly string[];
  readonly tags_match?: "any" | "all";
  readonly before?: string;
  readonly after?: string;
  readonly types?: readonly FactType[];
  readonly include_invalid?: boolean;
}

type RankedRow = UnitRow & { readonly s: number };

/** An ISO-8601 bound in the stored form (UTC, milliseconds), or mcp.memory_schema. */
function isoBound(value: string, field: string): string {
  const ms = Date.parse(value);
  if (Number.isNaN(ms)) throw new MemoryError("mcp.memory_schema", `${field} is not an ISO-8601 instant: ${value}`, { detail: [{ path: field, message: "not an ISO-8601 instant" }] });
  return new Date(ms).toISOString();
}

/** The WHERE clause (over `units u`) for a filter. */
function filterSql(f: Filter): { sql: string; params: unknown[] } {
  const scope = scopeSql(f.scope);
  const parts = [scope.sql];
  const params = [...scope.params];
  if (!f.include_invalid) parts.push("u.state = 'active'");
  const tags = [...new Set(f.tags ?? [])];
  if (tags.length > 0 && f.tags_match === "all") {
    parts.push(`(SELECT COUNT(*) FROM unit_tags t WHERE t.unit_id = u.id AND t.tag IN (${marks(tags.length)})) = ?`);
    params.push(...tags, tags.length);
  } else if (tags.length > 0) {
    parts.push(`EXISTS (SELECT 1 FROM unit_tags t WHERE t.unit_id = u.id AND t.tag IN (${marks(tags.length)}))`);
    params.push(...tags);
  }
  if (f.before !== undefined) {
    parts.push("u.created_at < ?");
    params.push(isoBound(f.before, "before"));
  }
  if (f.after !== undefined) {
    parts.push("u.created_at >= ?");
    params.push(isoBound(f.after, "after"));
  }
  if (f.types && f.types.length > 0) {
    parts.push(`u.fact_type IN (${marks(f.types.length)})`);
    params.push(...f.types);
  }
  return { sql: parts.join(" AND "), params };
}

/** BM25's k1 and b (the usual values, FTS5's own). */
const BM25_K1 = 1.2;
const BM25_B = 0.75;

/** Queries of up to this many words rank the rows holding every word first (see ranked). */
const MAX_ALL_WORDS = 8;

/** A unit's length as search weighs it: characters of its text and context (what `datasets.chars` sums). */
const UNIT_LENGTH = "(length(u.text) + length(coalesce(u.context, '')))";

/**
 * What a search is weighed against: the active units of the datasets it
 * reads (`facts`, their mean length `avgLength`), and the FTS5 column
 * filter that keeps a match inside them. Nothing outside the scope counts,
 * so a score tells a caller nothing about facts it cannot read.
 */
interface Collection {
  readonly facts: number;
  readonly avgLength: number;
  /** `ds : ("3" OR "7")`: the scope's datasets' ids in units_fts's ds column (active units only). */
  readonly ds: string;
}

function collectionOf(store: Store, v: Visibility): Collection | undefined {
  const scope = scopeSql(v, "d.name");
  const rows = store.q(`SELECT d.id AS id, d.facts AS facts, d.chars AS chars FROM datasets d WHERE d.facts > 0 AND ${scope.sql} ORDER BY d.id`).all(...scope.params) as Array<{ id: number; facts: number; chars: number }>;
  const facts = rows.reduce((n, r) => n + r.facts, 0);
  if (facts === 0) return undefined;
  const chars = rows.reduce((n, r) => n + r.chars, 0);
  return { facts, avgLength: Math.max(chars / facts, 1), ds: `ds : (${rows.map((r) => `"${r.id}"`).join(" OR ")})` };
}

/** An FTS5 expression for query words in the body column only (a word never matches the ds column's ids). */
function bodyMatch(words: readonly string[], op: "OR" | "AND"): string {
  return `body : (${ftsExpression(words, op)})`;
}

/** idf values are summed as integers in units of 2^-32 (exact in any order, in SQL and here alike). */
const IDF_UNIT = 2 ** 32;

/**
 * Each word's idf over the collection, ln(1 + (N − n + 0.5) / (n + 0.5))
 * in IDF_UNITs, N its facts, n those holding the word (always > 0: a word
 * in most facts still counts a little, as in Lucene's BM25).
 */
function idfs(store: Store, words: readonly string[], c: Collection): number[] {
  return words.map((word) => {
    const { n } = store.q("SELECT COUNT(*) AS n FROM units_fts WHERE units_fts MATCH ?").get(`${bodyMatch([word], "OR")} AND ${c.ds}`) as { n: number };
    return Math.round(Math.log(1 + (c.facts - n + 0.5) / (n + 0.5)) * IDF_UNIT);
  });
}

/**
 * The BM25 score of a unit of length `len` (SQL) holding query words whose
 * idf sums to `held` (SQL, IDF_UNITs): held × (k1 + 1) / (1 + k1·(1 − b +
 * b·len/avgLength)), with the parameters it binds. A word counts once per
 * unit, however often it repeats (facts are sentences).
 */
function scoreSql(held: string, len: string, c: Collection): { sql: string; params: number[] } {
  return { sql: `${held} * ? / (1 + ? * (? + ? * ${len}))`, params: [(BM25_K1 + 1) / IDF_UNIT, BM25_K1, 1 - BM25_B, BM25_B / c.avgLength] };
}

/** Up to `limit` units matching `match`, each holding words whose idf sums to `held`, best first (ties by id). */
function rankedBy(store: Store, match: string, held: number, f: Filter, c: Collection, limit: number): RankedRow[] {
  const where = filterSql(f);
  const score = scoreSql("?", UNIT_LENGTH, c);
  return store
    .q(`SELECT u.*, ${score.sql} AS s FROM units_fts JOIN units u ON u.seq = units_fts.rowid WHERE units_fts MATCH ? AND ${where.sql} ORDER BY s DESC, u.id LIMIT ?`)
    .all(held, ...score.params, `${match} AND ${c.ds}`, ...where.params, limit) as RankedRow[];
}

/**
 * Up to `limit` units holding any of several words, best first (ties by
 * id): each row's idf sum is counted over the words' matches in the
 * collection (FTS5 alone), then the rows the filter keeps are scored.
 */
function rankedAny(store: Store, words: readonly string[], idf: readonly number[], f: Filter, c: Collection, limit: number): RankedRow[] {
  const where = filterSql(f);
  const score = scoreSql("h.held", UNIT_LENGTH, c);
  const matches = words.map(() => "SELECT rowid AS seq, ? AS idf FROM units_fts WHERE units_fts MATCH ?").join(" UNION ALL ");
  return store
    .q(`WITH h (seq, held) AS (SELECT seq, SUM(idf) FROM (${matches}) GROUP BY seq)
        SELECT u.*, ${score.sql} AS s FROM h JOIN units u ON u.seq = h.seq WHERE ${where.sql} ORDER BY s DESC, u.id LIMIT ?`)
    .all(...words.flatMap((w, i) => [idf[i], `${bodyMatch([w], "OR")} AND ${c.ds}`]), ...score.params, ...where.params, limit) as RankedRow[];
}

/**
 * Up to `limit` units holding any of `words`, best first (ties by id),
 * scored by BM25 over the scope's collection. Rows holding every word are
 * far fewer than rows holding any, and usually the best; so for
 * 2–MAX_ALL_WORDS words those are ranked first (each holds every word: the
 * same idf sum), and kept when the last of them outscores the most a row
 * missing a word can score: the idf sum without the least informative word,
 * times (k1 + 1) / (1 + k1·(1 − b)), the length factor of a unit of length
 * 0. Then they are exactly what ranking every row would give. Otherwise
 * every row with any word is ranked.
 */
function ranked(store: Store, words: readonly string[], f: Filter, limit: number): RankedRow[] {
  const c = collectionOf(store, f.scope);
  if (!c) return [];
  const idf = idfs(store, words, c);
  const sum = idf.reduce((a, b) => a + b, 0);
  if (words.length === 1) return rankedBy(store, bodyMatch(words, "OR"), sum, f, c, limit);
  if (words.length <= MAX_ALL_WORDS) {
    const all = rankedBy(store, bodyMatch(words, "AND"), sum, f, c, limit);
    const last = all[limit - 1];
    const bound = ((sum - Math.min(...idf)) / IDF_UNIT) * ((BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B))) * (1 + 1e-9);
    if (last && last.s > bound) return all;
  }
  return rankedAny(store, words, idf, f, c, limit);
}

/** A ranked row as a hit: score = s / (1 + s) with s > 0 its BM25 score, so 0 < score < 1. */
function hitOf(row: RankedRow): SearchHit {
  const s = Math.max(row.s, 1e-9);
  return { ...unitOf(row), score: s / (1 + s) };
}

/** Active units matching any word of the query, best first. A query without a word matches nothing. */
export function searchUnits(store: Store, input: Scoped<SearchInput>): { results: SearchHit[] } {
  const words = queryWords(input.query);
  return { results: words.length === 0 ? [] : ranked(store, words, input, input.limit).map(hitOf) };
}

/**
 * The best matches that fit `max_tokens` (extract.ts estimateTokens of their
 * text): up to RECALL_CANDIDATES ranked, near-duplicates (same normalised
 * text) dropped, then taken in score order, skipping any that would overflow
 * the budget. `truncated` when a match was skipped or more than the
 * candidates matched.
 */
export function recallUnits(store: Store, input: Scoped<RecallInput>): RecallResult {
  const words = queryWords(input.query);
  const rows = words.length === 0 ? [] : ranked(store, words, input, RECALL_CANDIDATES + 1);
  let truncated = rows.length > RECALL_CANDIDATES;
  const seen = new Set<string>();
  const results: SearchHit[] = [];
  let used = 0;
  for (const row of rows.slice(0, RECALL_CANDIDATES)) {
    if (seen.has(row.norm)) continue;
    seen.add(row.norm);
    const tokens = estimateTokens(row.text);
    if (used + tokens > input.max_tokens) truncated = true;
    else {
      results.push(hitOf(row));
      used += tokens;
    }
  }
  return { results, tokens_used: used, max_tokens: input.max_tokens, truncated };
}

/** A page cursor: base64url of JSON [created_at, seq] of the page's last unit. */
function encodeCursor(row: UnitRow): string {
  return Buffer.from(JSON.stringify([row.created_at, row.seq])).toString("base64url");
}

function decodeCursor(cursor: string): [string, number] {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (Array.isArray(value) && value.length === 2 && typeof value[0] === "string" && Number.isSafeInteger(value[1])) return [value[0], value[1] as number];
  } catch {
    // not JSON: refused below like any other cursor this engine did not issue
  }
  throw new MemoryError("mcp.memory_schema", "cursor is not one memory_list returned", { tool: "memory_list", detail: [{ path: "cursor", message: "not a cursor memory_list returned" }] });
}

/**
 * Units in recording order (created_at, then insertion order), keyset-paged:
 * `next_cursor` resumes after the last item, null on the last page. Tags
 * filter with "any"; invalid units only with include_invalid.
 */
export function listUnits(store: Store, input: Scoped<ListInput>): Page<MemoryUnit> {
  const where = filterSql({ scope: input.scope, tags: input.tags, include_invalid: input.include_invalid });
  const after = input.cursor === undefined ? undefined : decodeCursor(input.cursor);
  const sql = `SELECT u.* FROM units u WHERE ${where.sql}${after ? " AND (u.created_at, u.seq) > (?, ?)" : ""} ORDER BY u.created_at, u.seq LIMIT ?`;
  const rows = store.q(sql).all(...where.params, ...(after ?? []), input.limit + 1) as UnitRow[];
  const page = rows.slice(0, input.limit);
  return { items: page.map(unitOf), next_cursor: rows.length > input.limit ? encodeCursor(page.at(-1)!) : null };
}

/** Tags of active units in scope with how many carry each, most used first (ties by tag). */
export function tagCounts(store: Store, v: Visibility): { tags: TagCount[] } {
  const scope = scopeSql(v);
  const sql = `SELECT t.tag AS tag, COUNT(*) AS count FROM unit_tags t JOIN units u ON u.id = t.unit_id WHERE u.state = 'active' AND ${scope.sql} GROUP BY t.tag ORDER BY count DESC, tag`;
  return { tags: store.q(sql).all(...scope.params) as TagCount[] };
}

/**
 * Counts for the bank as `v` sees it: units per state and per dataset,
 * documents and entity links (for each entity, case-insensitively, each
 * unordered pair of active units naming it: two units sharing two entities
 * are linked twice, as an engine keeping a link per entity counts them) in
 * scope; operations the scope may see
 * (embedded-ops.ts operationScopeSql); mental models and directives
 * bank-wide (they belong to no dataset).
 */
export function bankStats(store: Store, v: Visibility, bank: string): BankStats {
  const scope = scopeSql(v);
  const perDataset = store
    .q(`SELECT u.dataset AS dataset, SUM(u.state = 'active') AS active, SUM(u.state = 'invalid') AS invalid, SUM(u.state = 'active' AND u.fact_type = 'observation') AS observations
        FROM units u WHERE ${scope.sql} GROUP BY u.dataset ORDER BY u.dataset`)
    .all(...scope.params) as Array<{ dataset: string; active: number; invalid: number; observations: number }>;
  // Counted per entity (k units naming it make k·(k−1)/2 links), never by pairing rows: one entity in
  // thousands of facts would make millions of pairs, and the engine's calls hold the event loop.
  const links = store
    .q(`WITH e AS (SELECT DISTINCT u.seq AS seq, lower(j.value) AS entity FROM units u, json_each(u.entities) j WHERE u.state = 'active' AND ${scope.sql})
        SELECT coalesce(SUM(k * (k - 1) / 2), 0) AS n FROM (SELECT COUNT(*) AS k FROM e GROUP BY entity)`)
    .get(...scope.params) as { n: number };
  const docScope = scopeSql(v, "d.dataset");
  const counts = store
    .q(`SELECT (SELECT COUNT(*) FROM documents d WHERE ${docScope.sql}) AS documents, (SELECT COUNT(*) FROM mental_models) AS mental_models, (SELECT COUNT(*) FROM directives) AS directives`)
    .get(...docScope.params) as { documents: number; mental_models: number; directives: number };
  const operations = Object.fromEntries(OPERATION_STATUSES.map((s) => [s, 0])) as Record<OperationStatus, number>;
  const ops = operationScopeSql(v);
  for (const row of store.q(`SELECT o.status AS status, COUNT(*) AS n FROM operations o WHERE ${ops.sql} GROUP BY o.status`).all(...ops.params) as Array<{ status: OperationStatus; n: number }>) operations[row.status] = row.n;
  const sum = (f: (r: (typeof perDataset)[number]) => number) => perDataset.reduce((n, r) => n + f(r), 0);
  return {
    bank,
    engine: "embedded",
    nodes: sum((r) => r.active),
    links: links.n,
    observations: sum((r) => r.observations),
    invalidated: sum((r) => r.invalid),
    documents: counts.documents,
    mental_models: counts.mental_models,
    directives: counts.directives,
    operations,
    datasets: Object.fromEntries(perDataset.map((r) => [r.dataset, r.active])),
  };
}
