import { normalise, NORM_RULE } from "./extract.js";
import { openSqlite, unopenable, type Db } from "./sqlite.js";

/**
 * The embedded memory engine's schema migrations, applied in order once each
 * (`PRAGMA user_version` counts them). Append only: a released migration
 * never changes.
 *
 * Invariants kept by the schema itself:
 * - `units_fts` (FTS5, external content) indexes every unit's text and
 *   context as one column (`units_body.body`: text, a line break, context)
 *   and an active unit's dataset id as another (`ds`, see the fourth
 *   migration), kept in sync by triggers; `units.seq` is its rowid.
 * - `datasets` holds each dataset's search statistics (active units, their
 *   summed length), kept by the same triggers.
 * - `unit_tags` mirrors `units.tags` (the JSON array is what is returned, the
 *   rows are what filters and counts use); tags and history rows go with
 *   their unit (ON DELETE CASCADE).
 * - `bank_version.n` grows whenever a unit outside every `private:` dataset
 *   is inserted, updated or deleted: a mental model is stale when it grew
 *   since its refresh (mental models read non-private facts only).
 */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE units (
     seq INTEGER PRIMARY KEY,      -- FTS rowid and recording-order tie-breaker
     id TEXT NOT NULL UNIQUE,      -- mem_<16 hex>
     dataset TEXT NOT NULL,
     text TEXT NOT NULL,
     norm TEXT NOT NULL,           -- extract.ts normalise(text), for deduplication
     context TEXT,
     fact_type TEXT NOT NULL,
     source TEXT NOT NULL,
     tags TEXT NOT NULL,           -- JSON string[], distinct
     metadata TEXT NOT NULL,       -- JSON object
     entities TEXT NOT NULL,       -- JSON string[]
     document_id TEXT,             -- the caller's document_id
     doc_key TEXT,                 -- documents.id (doc_<16 hex>)
     occurred_start TEXT,
     occurred_end TEXT,
     state TEXT NOT NULL,          -- active | invalid
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL
   );
   CREATE INDEX units_dataset_created ON units(dataset, created_at);  -- (every index ends in seq, the rowid)
   CREATE INDEX units_created ON units(created_at);
   CREATE INDEX units_norm ON units(dataset, norm, created_at);
   CREATE INDEX units_doc ON units(doc_key);
   CREATE VIEW units_body AS SELECT seq, text || char(10) || coalesce(context, '') AS body FROM units;
   CREATE VIRTUAL TABLE units_fts USING fts5(body, content='units_body', content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2');
   CREATE TRIGGER units_fts_insert AFTER INSERT ON units BEGIN
     INSERT INTO units_fts(rowid, body) VALUES (new.seq, new.text || char(10) || coalesce(new.context, ''));
   END;
   CREATE TRIGGER units_fts_delete AFTER DELETE ON units BEGIN
     INSERT INTO units_fts(units_fts, rowid, body) VALUES ('delete', old.seq, old.text || char(10) || coalesce(old.context, ''));
   END;
   CREATE TRIGGER units_fts_update AFTER UPDATE OF text, context ON units BEGIN
     INSERT INTO units_fts(units_fts, rowid, body) VALUES ('delete', old.seq, old.text || char(10) || coalesce(old.context, ''));
     INSERT INTO units_fts(rowid, body) VALUES (new.seq, new.text || char(10) || coalesce(new.context, ''));
   END;
   CREATE TABLE unit_tags (
     unit_id TEXT NOT NULL REFERENCES units(id) ON DELETE CASCADE,
     tag TEXT NOT NULL,
     PRIMARY KEY (unit_id, tag)
   ) WITHOUT ROWID;
   CREATE INDEX unit_tags_tag ON unit_tags(tag, unit_id);
   CREATE TABLE unit_history (
     unit_id TEXT NOT NULL REFERENCES units(id) ON DELETE CASCADE,
     seq INTEGER NOT NULL,         -- 1, 2, … per unit
     at TEXT NOT NULL,
     by TEXT NOT NULL,
     action TEXT NOT NULL,         -- created curated invalidated restored merged
     changes TEXT NOT NULL,        -- JSON {field: {before, after}}
     PRIMARY KEY (unit_id, seq)
   ) WITHOUT ROWID;
   CREATE TABLE bank_version (n INTEGER NOT NULL);
   INSERT INTO bank_version (n) VALUES (0);
   CREATE TRIGGER units_version_insert AFTER INSERT ON units WHEN substr(new.dataset, 1, 8) <> 'private:' BEGIN
     UPDATE bank_version SET n = n + 1;
   END;
   CREATE TRIGGER units_version_update AFTER UPDATE ON units WHEN substr(new.dataset, 1, 8) <> 'private:' BEGIN
     UPDATE bank_version SET n = n + 1;
   END;
   CREATE TRIGGER units_version_delete AFTER DELETE ON units WHEN substr(old.dataset, 1, 8) <> 'private:' BEGIN
     UPDATE bank_version SET n = n + 1;
   END;
   CREATE TABLE documents (
     id TEXT PRIMARY KEY,          -- doc_<16 hex of sha256(dataset NUL document_id)>
     dataset TEXT NOT NULL,
     document_id TEXT NOT NULL,
     text_hash TEXT,               -- sha256 of the last version extracted (null until the first retain runs)
     fact_count INTEGER NOT NULL,  -- its active facts
     source TEXT NOT NULL,         -- who added the latest version
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL,
     UNIQUE (dataset, document_id)
   );
   CREATE TABLE mental_models (
     id TEXT PRIMARY KEY,          -- mm_<16 hex>
     name TEXT NOT NULL,
     source_query TEXT NOT NULL,
     max_tokens INTEGER NOT NULL,
     tags TEXT NOT NULL,           -- JSON string[]
     refresh_after_consolidation INTEGER NOT NULL,
     content TEXT,
     refreshed_at TEXT,
     refreshed_version INTEGER,    -- bank_version.n the content was computed at
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL
   );
   CREATE TABLE directives (
     id TEXT PRIMARY KEY,          -- dir_<16 hex>
     name TEXT NOT NULL,
     content TEXT NOT NULL,
     priority INTEGER NOT NULL,
     is_active INTEGER NOT NULL,
     tags TEXT NOT NULL,           -- JSON string[]
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL
   );
   CREATE TABLE operations (
     seq INTEGER PRIMARY KEY,      -- queue order
     id TEXT NOT NULL UNIQUE,      -- op_<16 hex>
     kind TEXT NOT NULL,           -- retain | refresh | consolidate
     status TEXT NOT NULL,         -- pending processing completed failed cancelled
     target TEXT,
     payload TEXT NOT NULL,        -- JSON, what the work needs
     result TEXT,                  -- JSON
     error TEXT,
     attempts INTEGER NOT NULL,
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL
   );
   CREATE INDEX operations_status ON operations(status, seq);
   CREATE INDEX operations_created ON operations(created_at, seq);`,
  // A document's fact remembers the sentence it was extracted from, so a new
  // version of the document recognises it after curation changed its text.
  // Facts curated before: the text their first text change started from.
  // bank_version is put back: nothing a mental model reads changed.
  `ALTER TABLE units ADD COLUMN extracted TEXT;  -- a document fact's sentence as extracted (curation never changes it); null for a fact added on its own
   CREATE TEMP TABLE kept_version AS SELECT n FROM bank_version;
   UPDATE units SET extracted = coalesce(
     (SELECT json_extract(h.changes, '$.text.before') FROM unit_history h WHERE h.unit_id = units.id AND json_type(h.changes, '$.text.before') = 'text' ORDER BY h.seq LIMIT 1),
     text) WHERE doc_key IS NOT NULL;
   UPDATE bank_version SET n = (SELECT n FROM kept_version);
   DROP TABLE kept_version;`,
  // Which extract.ts normalise rule units.norm was computed by (openMemoryDb recomputes older ones).
  `CREATE TABLE norm_rule (version INTEGER NOT NULL);
   INSERT INTO norm_rule (version) VALUES (1);`,
  // Search statistics per dataset, so a search is weighed over the datasets it
  // reads and nothing else (embedded-search.ts): \`datasets\` counts each
  // dataset's active units and their length (characters of text and context),
  // and the index gets a second column, \`ds\`, holding an active unit's
  // dataset id (all digits, which the porter stemmer leaves alone; nothing for
  // an invalid unit), so FTS5 counts a word's units in given datasets alone.
  // A dataset's row (and id) is never removed. bank_version is put back.
  `CREATE TEMP TABLE kept_version AS SELECT n FROM bank_version;
   DROP TRIGGER units_fts_insert;
   DROP TRIGGER units_fts_delete;
   DROP TRIGGER units_fts_update;
   DROP TABLE units_fts;
   DROP VIEW units_body;
   CREATE TABLE datasets (
     id INTEGER PRIMARY KEY,
     name TEXT NOT NULL UNIQUE,
     facts INTEGER NOT NULL,       -- its active units
     chars INTEGER NOT NULL        -- their length(text) + length(context), summed
   );
   INSERT INTO datasets (name, facts, chars)
     SELECT dataset, SUM(state = 'active'), SUM(CASE WHEN state = 'active' THEN length(text) + length(coalesce(context, '')) ELSE 0 END) FROM units GROUP BY dataset ORDER BY dataset;
   CREATE VIEW units_body AS SELECT u.seq AS seq, u.text || char(10) || coalesce(u.context, '') AS body,
     CASE WHEN u.state = 'active' THEN (SELECT d.id FROM datasets d WHERE d.name = u.dataset) END AS ds FROM units u;
   CREATE VIRTUAL TABLE units_fts USING fts5(body, ds, content='units_body', content_rowid='seq', tokenize='porter unicode61 remove_diacritics 2');
   INSERT INTO units_fts(units_fts) VALUES ('rebuild');
   CREATE TRIGGER units_fts_insert AFTER INSERT ON units BEGIN
     INSERT OR IGNORE INTO datasets (name, facts, chars) VALUES (new.dataset, 0, 0);
     UPDATE datasets SET facts = facts + 1, chars = chars + length(new.text) + length(coalesce(new.context, '')) WHERE name = new.dataset AND new.state = 'active';
     INSERT INTO units_fts(rowid, body, ds) VALUES (new.seq, new.text || char(10) || coalesce(new.context, ''),
       CASE WHEN new.state = 'active' THEN (SELECT d.id FROM datasets d WHERE d.name = new.dataset) END);
   END;
   CREATE TRIGGER units_fts_delete AFTER DELETE ON units BEGIN
     UPDATE datasets SET facts = facts - 1, chars = chars - length(old.text) - length(coalesce(old.context, '')) WHERE name = old.dataset AND old.state = 'active';
     INSERT INTO units_fts(units_fts, rowid, body, ds) VALUES ('delete', old.seq, old.text || char(10) || coalesce(old.context, ''),
       CASE WHEN old.state = 'active' THEN (SELECT d.id FROM datasets d WHERE d.name = old.dataset) END);
   END;
   CREATE TRIGGER units_fts_update AFTER UPDATE OF text, context, state, dataset ON units BEGIN
     UPDATE datasets SET facts = facts - 1, chars = chars - length(old.text) - length(coalesce(old.context, '')) WHERE name = old.dataset AND old.state = 'active';
     INSERT OR IGNORE INTO datasets (name, facts, chars) VALUES (new.dataset, 0, 0);
     UPDATE datasets SET facts = facts + 1, chars = chars + length(new.text) + length(coalesce(new.context, '')) WHERE name = new.dataset AND new.state = 'active';
     INSERT INTO units_fts(units_fts, rowid, body, ds) VALUES ('delete', old.seq, old.text || char(10) || coalesce(old.context, ''),
       CASE WHEN old.state = 'active' THEN (SELECT d.id FROM datasets d WHERE d.name = old.dataset) END);
     INSERT INTO units_fts(rowid, body, ds) VALUES (new.seq, new.text || char(10) || coalesce(new.context, ''),
       CASE WHEN new.state = 'active' THEN (SELECT d.id FROM datasets d WHERE d.name = new.dataset) END);
   END;
   UPDATE bank_version SET n = (SELECT n FROM kept_version);
   DROP TABLE kept_version;`,
];

/**
 * Opens (creating it) `<stateDir>/memory.db` in WAL mode and brings its
 * schema up to date, and its units' normal forms: ones computed by an older
 * normalise rule are recomputed in one transaction (bank_version is put
 * back: no fact changed). A file it cannot write (read-only) is refused
 * here, as system.io naming it (sqlite.ts unopenable; a full disk keeps SQLITE_FULL, naming it), as is one that fails
 * the engine's first write (EmbeddedEngine's constructor).
 */
export function openMemoryDb(stateDir: string): Db {
  const db = openSqlite(stateDir, "memory.db", MIGRATIONS);
  try {
    renormalise(db);
  } catch (err) {
    db.close();
    throw unopenable(db.name, err);
  }
  return db;
}

function renormalise(db: Db): void {
  const rule = db.prepare("SELECT version FROM norm_rule").pluck();
  if ((rule.get() as number) < NORM_RULE) {
    db.transaction(() => {
      if ((rule.get() as number) >= NORM_RULE) return; // another process opening it at once did it first
      const { n } = db.prepare("SELECT n FROM bank_version").get() as { n: number };
      const update = db.prepare("UPDATE units SET norm = ? WHERE seq = ?");
      for (const row of db.prepare("SELECT seq, text, norm FROM units").all() as Array<{ seq: number; text: string; norm: string }>) {
        const norm = normalise(row.text);
        if (norm !== row.norm) update.run(norm, row.seq);
      }
      db.prepare("UPDATE bank_version SET n = ?").run(n);
      db.prepare("UPDATE norm_rule SET version = ?").run(NORM_RULE);
    }).immediate(); // it reads before it writes: the write lock first, as Store.tx takes it
  }
}
