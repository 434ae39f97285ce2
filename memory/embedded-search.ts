import { MemoryError } from "./errors.js";
import { OPERATION_STATUSES, type BankStats, type FactType, type ListInput, type MemoryUnit, type OperationStatus, type Page, type RecallInput, type RecallResult, type SearchHit, type SearchInput, type TagCount } from "./engine.js";
import { marks, scopeSql, unitOf, type Store, type UnitRow, type Visibility } from "./embedded-store.js";
import { operationScopeSql } from "./embedded-ops.js";
import { estimateTokens, ftsExpression, queryWords } from "./extract.js";

/**
 * The embedded engine's reads over facts: ranked full-text search (FTS5,
 * bm25), paging in recording order, token-budgeted recall, tag counts and
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

type RankedRow = UnitRow & { readonly r: number };

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

/** FTS5's bm25 k1 (fixed by SQLite; b is 0.75). */
const BM25_K1 = 1.2;

/** Queries of up to this many words rank the rows holding every word first (see ranked). */
const MAX_ALL_WORDS = 8;

/** Up to `limit` units matching an FTS5 expression, best bm25 first (ties by id). */
function rankedBy(store: Store, match: string, f: Filter, limit: number): RankedRow[] {
  const where = filterSql(f);
  return store
    .q(`SELECT u.*, bm25(units_fts) AS r FROM units_fts JOIN units u ON u.seq = units_fts.rowid WHERE units_fts MATCH ? AND ${where.sql} ORDER BY r, u.id LIMIT ?`)
    .all(match, ...where.params, limit) as RankedRow[];
}

/**
 * Up to `limit` units holding any of `words`, best bm25 first (ties by id).
 * Ranking costs a few microseconds per matching row, and common words match
 * thousands; rows holding every word are far fewer and usually the best. So
 * for 2–MAX_ALL_WORDS words those are ranked first, and kept when the last
 * of them outscores the most any row missing a word can score
 * (partialBound): then they are exactly what ranking every row would give.
 * Otherwise every row with any word is ranked.
 */
function ranked(store: Store, words: readonly string[], f: Filter, limit: number): RankedRow[] {
  if (words.length > 1 && words.length <= MAX_ALL_WORDS) {
    const all = rankedBy(store, ftsExpression(words, "AND"), f, limit);
    const last = all[limit - 1];
    if (last && -last.r > partialBound(store, words)) return all;
  }
  return rankedBy(store, ftsExpression(words, "OR"), f, limit);
}

/**
 * The highest score (−bm25) a row missing one of `words` can reach. FTS5's
 * bm25 sums, per word w in the row, idf(w)·tf·(k1+1) / (tf + k1·(1 − b +
 * b·len/avglen)), which is below idf(w)·(k1+1); so a row without w scores
 * below the sum of that over the other words, and the bound is the largest
 * such sum: the one leaving out the least informative word. idf is FTS5's:
 * ln((N − n + 0.5) / (n + 0.5)), at least 1e-6, with N the indexed rows (one
 * per unit) and n those holding the word.
 */
function partialBound(store: Store, words: readonly string[]): number {
  const { n: rows } = store.q("SELECT COUNT(*) AS n FROM units").get() as { n: number };
  const idf = words.map((word) => {
    const { n } = store.q("SELECT COUNT(*) AS n FROM units_fts WHERE units_fts MATCH ?").get(ftsExpression([word], "OR")) as { n: number };
    return Math.max(Math.log((rows - n + 0.5) / (n + 0.5)), 1e-6);
  });
  const sum = idf.reduce((a, b) => a + b, 0);
  return (sum - Math.min(...idf)) * (BM25_K1 + 1) * (1 + 1e-9);
}

/** A ranked row as a hit: score = s / (1 + s) with s = -bm25 > 0, so 0 < score < 1. */
function hitOf(row: RankedRow): SearchHit {
  const s = Math.max(-row.r, 1e-9);
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
