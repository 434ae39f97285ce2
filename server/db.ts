import { openSqlite, type Db } from "../memory/sqlite.js";

export type { Db };

/**
 * Schema migrations, applied in order once each (`PRAGMA user_version`
 * counts them). Append only: a released migration never changes.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE revisions (
     id TEXT PRIMARY KEY,          -- rev_<hash of files>
     files TEXT NOT NULL,          -- JSON {file: hash}
     created_at TEXT NOT NULL
   );
   CREATE TABLE plans (
     id TEXT PRIMARY KEY,
     created_at TEXT NOT NULL,
     actor TEXT NOT NULL,
     summary TEXT NOT NULL,
     changes TEXT NOT NULL,        -- JSON ChangeSet
     base_revision TEXT NOT NULL,
     base_files TEXT NOT NULL,     -- JSON {file: hash} of the files the change set touches, as planned
     plan TEXT NOT NULL,           -- JSON Plan
     diagnostics TEXT NOT NULL,    -- JSON Diagnostic[]
     valid INTEGER NOT NULL,
     state TEXT NOT NULL,          -- proposed | applied | stale
     applied_at TEXT,
     stale_reason TEXT
   );
   CREATE INDEX plans_created ON plans(created_at);
   CREATE TABLE approvals (
     id TEXT PRIMARY KEY,
     tool TEXT NOT NULL,
     route TEXT NOT NULL,
     args TEXT NOT NULL,           -- JSON, the call as made
     dedup_key TEXT NOT NULL,      -- tool + canonical args
     caller TEXT NOT NULL,
     plan_id TEXT,
     base_revision TEXT,
     summary TEXT NOT NULL,
     state TEXT NOT NULL,          -- pending approved executing executed failed denied expired stale
     reason TEXT,
     created_at TEXT NOT NULL,
     expires_at TEXT NOT NULL,
     decided_at TEXT,
     decided_by TEXT,
     result TEXT,
     error TEXT
   );
   CREATE INDEX approvals_state ON approvals(state, created_at);
   CREATE TABLE audit (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     ts TEXT NOT NULL,
     actor TEXT NOT NULL,
     kind TEXT NOT NULL,           -- rest | mcp | approval | cli | sweep
     route TEXT,
     tool TEXT,
     target TEXT,
     args TEXT,                    -- JSON, secrets redacted
     outcome TEXT NOT NULL,        -- ok | error | pending_approval
     error_code TEXT,
     plan_id TEXT,
     approval_id TEXT,
     duration_ms REAL NOT NULL,
     request_id TEXT
   );
   CREATE INDEX audit_ts ON audit(ts);
   CREATE TABLE slot_ids (
     name TEXT PRIMARY KEY,
     id TEXT NOT NULL UNIQUE,
     created_at TEXT NOT NULL
   );`,
  // Identities (issue 14): tokens are stored as sha256 hashes only; login codes and web sessions likewise.
  `CREATE TABLE tokens (
     id TEXT PRIMARY KEY,          -- tok_<hex>, shown in lists; never the secret
     kind TEXT NOT NULL,           -- operator | agent
     name TEXT NOT NULL,
     scopes TEXT NOT NULL,         -- space-separated: mcp:admin mcp:memory rest
     hash TEXT NOT NULL UNIQUE,    -- sha256 hex of the whole token
     created_at TEXT NOT NULL,
     last_used_at TEXT,
     revoked_at TEXT
   );
   CREATE INDEX tokens_name ON tokens(kind, name);
   CREATE TABLE login_codes (
     hash TEXT PRIMARY KEY,        -- sha256 hex of the one-time code
     token_id TEXT NOT NULL,
     expires_at TEXT NOT NULL,
     used_at TEXT
   );
   CREATE TABLE web_sessions (
     hash TEXT PRIMARY KEY,        -- sha256 hex of the session cookie
     token_id TEXT NOT NULL,
     created_at TEXT NOT NULL,
     expires_at TEXT NOT NULL
   );
   ALTER TABLE audit ADD COLUMN claimed TEXT;
   ALTER TABLE audit ADD COLUMN peer TEXT;`,
  // Gate by effect (issue 15): what a queued change does, in words, for the card.
  `ALTER TABLE approvals ADD COLUMN effects TEXT;     -- JSON string[]`,
  // Model pulls from the Hugging Face Hub (issue 18): durable jobs, resumed after a restart.
  `CREATE TABLE pulls (
     model_id TEXT PRIMARY KEY,
     mode TEXT NOT NULL,           -- pull (a new model) | update (a registered model's file, replaced in place)
     hf_repo TEXT NOT NULL,
     hf_filename TEXT NOT NULL,
     revision TEXT NOT NULL,       -- as asked (main, a tag or a commit)
     commit_sha TEXT,              -- x-repo-commit of the first reply
     sha256 TEXT,                  -- the Hub's LFS oid: what the bytes must hash to
     size INTEGER,                 -- bytes in all (x-linked-size)
     bytes INTEGER NOT NULL DEFAULT 0,
     state TEXT NOT NULL,          -- queued downloading verifying done failed cancelled
     reason TEXT,                  -- failed: checksum no_space register not_found network
     error TEXT,
     dest TEXT NOT NULL,           -- the file's final path (in the store)
     extras TEXT NOT NULL,         -- JSON: draft / mmproj files that come down with it
     requested_by TEXT NOT NULL,
     approved_by TEXT,
     created_at TEXT NOT NULL,
     updated_at TEXT NOT NULL,
     finished_at TEXT
   );
   CREATE INDEX pulls_state ON pulls(state, created_at);`,
  // Slot stats (issue 19): a ring of each running llama-server slot's /metrics, one row per slot per minute (server/stats/ring.ts).
  `CREATE TABLE slot_samples (
     slot TEXT NOT NULL,
     minute INTEGER NOT NULL,      -- floor(ts / 60000): a later scrape in the same minute replaces the row
     ts INTEGER NOT NULL,          -- ms since the epoch, when it was scraped
     run TEXT,                     -- when the runner started (its runtime record): another run means counters from zero
     prompt_tokens REAL NOT NULL,  -- llamacpp:prompt_tokens_total
     prompt_seconds REAL NOT NULL, -- llamacpp:prompt_seconds_total
     predicted_tokens REAL NOT NULL, -- llamacpp:tokens_predicted_total
     predicted_seconds REAL NOT NULL, -- llamacpp:tokens_predicted_seconds_total
     decodes REAL,                 -- llamacpp:n_decode_total
     requests_processing REAL,
     requests_deferred REAL,
     busy_slots_per_decode REAL,
     kv_usage_ratio REAL,          -- llamacpp:kv_cache_usage_ratio (older builds only)
     kv_tokens REAL,               -- llamacpp:kv_cache_tokens (older builds only)
     PRIMARY KEY (slot, minute)
   ) WITHOUT ROWID;
   CREATE INDEX slot_samples_minute ON slot_samples(minute);`,
  // Hermes runs of the agent bridge (issue 20, server/bridge/runs/): durable records; the output is <state>/runs/<id>.log.
  `CREATE TABLE bridge_runs (
     id TEXT PRIMARY KEY,          -- run_<hex>
     profile TEXT NOT NULL,
     prompt TEXT NOT NULL,
     toolsets TEXT NOT NULL,       -- JSON string[]
     max_turns INTEGER,
     timeout_s INTEGER NOT NULL,
     resume TEXT,                  -- the Hermes session id it continues
     parent_run TEXT,              -- agent_run_message: the run whose session it continues
     session_id TEXT,              -- as Hermes reported it
     state TEXT NOT NULL,          -- queued running done failed cancelled interrupted
     reason TEXT,                  -- exit timed_out cancelled spawn_failed hal0_restart hal0_stopped
     caller TEXT NOT NULL,         -- operator:<name> | agent:<name>
     created_at TEXT NOT NULL,
     started_at TEXT,
     ended_at TEXT,
     pid INTEGER,                  -- leads its own process group (pgid = pid)
     pid_start INTEGER,            -- /proc start time: with the pid it names one process
     exit_code INTEGER,
     signal TEXT,
     error TEXT,
     log_base INTEGER NOT NULL DEFAULT 0,  -- output bytes dropped from the log's head (the bound keeps the tail)
     log_bytes INTEGER NOT NULL DEFAULT 0  -- output bytes in all
   );
   CREATE INDEX bridge_runs_state ON bridge_runs(state, created_at);`,
  // What a queued write was judged to do (server/dispatch.ts effectsDigest): approving it runs it only if it still does that.
  `ALTER TABLE approvals ADD COLUMN judged TEXT;`,
  // /mcp/agents holds an operator token to its scopes too: one minted with every scope there was before the bridge
  // (mcp:admin, mcp:memory, rest: an operator's default then) reached everything, and keeps reaching it.
  `UPDATE tokens SET scopes = scopes || ' mcp:agents'
     WHERE kind = 'operator'
       AND ' ' || scopes || ' ' LIKE '% mcp:admin %' AND ' ' || scopes || ' ' LIKE '% mcp:memory %' AND ' ' || scopes || ' ' LIKE '% rest %'
       AND ' ' || scopes || ' ' NOT LIKE '% mcp:agents %';`,
  // Who saved a plan, by kind as well as name: what it carries is read whole only by an operator and by the identity
  // that proposed it (server/plans.ts planReadBy). A plan saved before this has no kind, and reads masked to all but operators.
  `ALTER TABLE plans ADD COLUMN actor_kind TEXT;      -- operator | agent | system`,
  // The process running an approved request (server/approvals.ts): one that is gone before the request ended leaves it
  // failed (approvals.interrupted) instead of approved or executing for ever.
  `ALTER TABLE approvals ADD COLUMN executor TEXT;    -- JSON {host, pid, start}`,
  // The public origin a login link was printed under (`hal0 web --origin`): a session it opens under an https one gets a
  // Secure cookie, though a proxy that sends its upstream's Host leaves the request itself no sign of https.
  `ALTER TABLE login_codes ADD COLUMN origin TEXT;`,
  // A cancel of a running Hermes run asked for by a process that does not run it (a CLI command's approval beside
  // hal0 serve): the serve, whose process group it is, stops it at its next look (server/bridge/runs/service.ts).
  `ALTER TABLE bridge_runs ADD COLUMN cancel_requested TEXT;  -- when`,
  // What a Hermes run did to its profile's skills/ (its own skill_manage writes there, past hal0's gate): the skills
  // added, changed or removed between the run's start and its end (server/bridge/runs/skills-diff.ts).
  `ALTER TABLE bridge_runs ADD COLUMN skill_changes TEXT;     -- JSON {changes: [{skill, change}], more, complete}`,
  // The run's profile's skills/ as it started, kept while it runs: a hal0 restarted meanwhile compares against it.
  `ALTER TABLE bridge_runs ADD COLUMN skills_before TEXT;     -- JSON {home, files: [[path, hash]], partial, cut}`,
  // The boot a run was started in (/proc/sys/kernel/random/boot_id), as a slot's runtime.json names it: pid + start time
  // name one process for one boot only, so after a restart of the host they may name a process of the new boot.
  `ALTER TABLE bridge_runs ADD COLUMN boot_id TEXT;`,
  // What a saved plan's change does as it was planned (server/routes/plans.ts): applying it by id commits it only while it
  // still does that, though a file it reads and does not edit (the profile it switches a slot to) moved since.
  `ALTER TABLE plans ADD COLUMN effects TEXT;         -- JSON [{where, line}]`,
  // When a login code was made (server/identity/tokens.ts): one made at a time still to come (the clock set back since)
  // is refused, as a web session and an approval are, rather than live its 5 minutes again on top of the step.
  `ALTER TABLE login_codes ADD COLUMN created_at TEXT;`,
];

/** Opens (creating it) `<state>/hal0.db` in WAL mode and brings its schema up to date. */
export function openDb(stateDir: string, file = "hal0.db"): Db {
  return openSqlite(stateDir, file, MIGRATIONS);
}
