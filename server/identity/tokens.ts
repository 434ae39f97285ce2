import { randomBytes, timingSafeEqual } from "node:crypto";
import { fingerprint, hashSecret } from "../../compiler/hash.js";
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Statement } from "better-sqlite3";
import type { Db } from "../db.js";
import { ApiError, storageFull } from "../errors.js";
import { redactText } from "../redact.js";
import { setBackPast } from "../clock-step.js";
import { PROFILE_NAME } from "../../reconciler/hermes-files.js";
import { sharedMode } from "../../reconciler/state-folder.js";

export const TOKEN_KINDS = ["operator", "agent"] as const;
export type TokenKind = (typeof TOKEN_KINDS)[number];

/** The surfaces a token reaches; `mcp:agents` is hal0-agents (the bridge, `hal0 bridge admit`). */
export const SCOPES = ["mcp:admin", "mcp:memory", "rest", "mcp:agents"] as const;
export type Scope = (typeof SCOPES)[number];

/** What a token of each kind reaches when `--scope` names nothing: a person everything, an agent the two MCP mounts (never the bridge). */
export const DEFAULT_SCOPES: Readonly<Record<TokenKind, readonly Scope[]>> = {
  operator: SCOPES,
  agent: ["mcp:admin", "mcp:memory"],
};

/** The prefix of each kind, so that secret scanners (and people) can tell a leaked hal0 token. */
export const TOKEN_PREFIX: Readonly<Record<TokenKind, string>> = { operator: "hal0_op_", agent: "hal0_ag_" };

/** The bootstrap operator's name: the person at the box, who can read the state folder. */
export const OWNER = "owner";

const NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
/**
 * The Hermes profiles a bridge token reaches, kept beside its scopes in the
 * same column: `profile:<name>` each, `profile:*` for every profile. Only a
 * token with `mcp:agents` may carry them. A name is any profile name the
 * bridge serves (PROFILE_NAME: letters of either case, digits, - and _, at
 * most 56), so that every such profile can be admitted to on its own.
 */
const PROFILE_ENTRY_RE = new RegExp(`^profile:(\\*|${PROFILE_NAME.source.replace(/^\^|\$$/g, "")})$`);
const TOKEN_RE = /^hal0_(op|ag)_[A-Za-z0-9_-]{32}$/;

/** One token as lists show it: never the secret, never its hash. */
export interface TokenInfo {
  readonly id: string;
  readonly kind: TokenKind;
  readonly name: string;
  readonly scopes: readonly Scope[];
  /** A bridge token's Hermes profiles (`*`: every one); absent on every other token. */
  readonly profiles?: readonly string[];
  readonly created_at: string;
  readonly last_used_at: string | null;
  readonly revoked_at: string | null;
}

/** A token just minted: the secret is in `token`, shown once. */
export interface Minted extends TokenInfo {
  readonly token: string;
}

interface Row {
  id: string;
  kind: TokenKind;
  name: string;
  scopes: string;
  hash: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

// sha256 hex of a secret, and its short fingerprint (the Hermes plan compares these, never the token):
// in compiler/hash.ts, so that the pure planner computes the same fingerprint without importing server/.
export { fingerprint, hashSecret };

/** Names an identity cannot take: they mean something else in audit rows and policy. */
const RESERVED_NAMES = new Set(["anonymous", "local"]);

export function checkName(name: string): string {
  // A secret pasted as a name (a token, a provider key) would be kept in plain text, shown by every list and masked in every reply and audit row: refused, and not repeated.
  if (redactText(name) !== name) throw new ApiError("auth.name_invalid", "a token name may not read as a secret (a hal0 token, a provider key): was a token pasted in place of the name?");
  if (!NAME_RE.test(name) || RESERVED_NAMES.has(name)) throw new ApiError("auth.name_invalid", `a token name is 1 to 64 letters, digits, - and _ (not anonymous or local), not ${JSON.stringify(name)}`, { name });
  return name;
}

/**
 * Names a bridge admission (an agent token with `mcp:agents`) cannot take: Hermes's
 * own identities (`hermes`, `hermes__<profile>`: hal0 mints and rotates
 * those, and policy gives them the profile's rules) and the owner's name.
 */
function checkAdmissionName(name: string): void {
  if (name === "hermes" || name.startsWith("hermes__") || name === OWNER) {
    throw new ApiError("auth.name_invalid", `${JSON.stringify(name)} is ${name === OWNER ? "the owner's name" : "a name of Hermes's own identities (hermes, hermes__<profile>)"}; admit the agent under another name`, { name });
  }
}

/** The scopes column's entries: known scopes, and `profile:` entries beside `mcp:agents` (sorted, unique). */
export function parseScopes(list: readonly string[] | undefined, kind: TokenKind): string[] {
  if (list === undefined) return [...DEFAULT_SCOPES[kind]];
  // Asked for nothing: a token that may do nothing, or a typo; never quietly the default.
  if (list.length === 0) throw new ApiError("auth.name_invalid", `an empty scope list gives a token nothing; leave scopes out for the ${kind} default (${DEFAULT_SCOPES[kind].join(", ")})`, { scopes: [] });
  const bad = list.filter((s) => !(SCOPES as readonly string[]).includes(s) && !PROFILE_ENTRY_RE.test(s));
  if (bad.length > 0) throw new ApiError("auth.name_invalid", `unknown scope ${bad.join(", ")}; scopes are ${SCOPES.join(", ")}, and profile:<name> or profile:* beside mcp:agents`, { scopes: bad });
  if (list.some((s) => s.startsWith("profile:")) && !list.includes("mcp:agents")) throw new ApiError("auth.name_invalid", "profile:<name> entries are for bridge tokens: add mcp:agents (hal0 bridge admit)", { scopes: [...list] });
  return [...new Set(list)].sort();
}

/** How often a token's `last_used_at` is written at most (a write per request would cost every call). */
const LAST_USED_EVERY_MS = 60_000;

/**
 * Live tokens already verified over one database handle, by hash: good while
 * no other connection has committed (SQLite's `data_version` is unchanged)
 * and no store on this handle has revoked one. A bearer request then costs a
 * pragma read instead of a table lookup, and a token revoked anywhere fails
 * its very next request, as before. Only tokens that verified are kept.
 */
interface Verified {
  version: number;
  readonly tokens: Map<string, TokenInfo>;
}
const VERIFIED_MAX = 1024;
const verifiedByDb = new WeakMap<Db, Verified>();

/**
 * hal0's credentials, in the state folder's SQLite database: tokens of two
 * kinds (operator = a person, agent = one identity each) stored as hashes,
 * the web page's one-time login codes and its sessions. Tokens hal0 must
 * hand on itself (the Hermes wiring) are also kept in plain text in
 * `<state>/tokens/<name>` (0600, folder 0700); only `handedOn` reads them.
 */
export class TokenStore {
  private readonly lastUsed = new Map<string, number>();
  /** The statements every bearer request runs (prepared once: preparing costs more than the lookup). */
  private byHash?: ReturnType<Db["prepare"]>;
  private dataVersion?: Statement<[], number>;

  constructor(private readonly db: Db, private readonly stateDir: string, private readonly now: () => number = Date.now) {}

  /** Mints a token; the secret is returned once and only its hash is kept. */
  mint(kind: TokenKind, name: string, scopes?: readonly string[]): Minted {
    checkName(name);
    // A name that reads as a command-line option could be named again only after `--`.
    if (name.startsWith("-")) throw new ApiError("auth.name_invalid", `a new token's name does not start with -, not ${JSON.stringify(name)}`, { name });
    const scopeList = parseScopes(scopes, kind);
    if (kind === "agent" && scopeList.includes("mcp:agents")) checkAdmissionName(name);
    const token = `${TOKEN_PREFIX[kind]}${randomBytes(24).toString("base64url")}`;
    const id = `tok_${randomBytes(6).toString("hex")}`;
    const at = iso(this.now());
    this.db.prepare("INSERT INTO tokens (id, kind, name, scopes, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)").run(id, kind, name, scopeList.join(" "), hashSecret(token), at);
    return { ...this.byId(id)!, token };
  }

  /** The live token a secret is, or undefined (unknown, malformed or revoked). Records its use. */
  verify(secret: string): TokenInfo | undefined {
    if (!TOKEN_RE.test(secret)) return undefined;
    const hash = hashSecret(secret);
    const verified = this.verified();
    const known = verified.tokens.get(hash);
    if (known !== undefined) {
      this.touch(known.id);
      return known;
    }
    this.byHash ??= this.db.prepare("SELECT * FROM tokens WHERE hash = ?");
    const row = this.byHash.get(hash) as Row | undefined;
    if (!row || row.revoked_at !== null || !timingSafeEqual(Buffer.from(row.hash), Buffer.from(hash))) return undefined;
    this.touch(row.id);
    const token = info(row);
    if (verified.tokens.size >= VERIFIED_MAX) verified.tokens.clear();
    verified.tokens.set(hash, token);
    return token;
  }

  /** This handle's verified tokens, emptied when another connection has committed since they were read. */
  private verified(): Verified {
    this.dataVersion ??= this.db.prepare<[], number>("PRAGMA data_version").pluck();
    const version = this.dataVersion.get()!;
    let verified = verifiedByDb.get(this.db);
    if (verified === undefined) verifiedByDb.set(this.db, (verified = { version, tokens: new Map() }));
    else if (verified.version !== version) {
      verified.version = version;
      verified.tokens.clear();
    }
    return verified;
  }

  byId(id: string): TokenInfo | undefined {
    const row = this.db.prepare("SELECT * FROM tokens WHERE id = ?").get(id) as Row | undefined;
    return row ? info(row) : undefined;
  }

  list(options: { all?: boolean } = {}): TokenInfo[] {
    const rows = this.db.prepare(`SELECT * FROM tokens ${options.all ? "" : "WHERE revoked_at IS NULL"} ORDER BY kind, name, created_at, id`).all() as Row[];
    return rows.map(info);
  }

  /** Whether `kind:name` has a live token (one reaching `scope`, when named), had only revoked ones, or never had one (one count query). */
  standing(kind: TokenKind, name: string, scope?: Scope): "live" | "revoked" | "none" {
    const reaches = scope === undefined ? "" : " AND (' ' || scopes || ' ') LIKE ?";
    const args = scope === undefined ? [kind, name] : [kind, name, `% ${scope} %`];
    const r = this.db.prepare(`SELECT count(*) AS total, count(*) FILTER (WHERE revoked_at IS NULL) AS live FROM tokens WHERE kind = ? AND name = ?${reaches}`).get(...args) as { total: number; live: number };
    return r.live > 0 ? "live" : r.total > 0 ? "revoked" : "none";
  }

  /** Revokes one token by id; its sessions and its login codes end with it. */
  revoke(id: string): TokenInfo {
    const row = this.db.prepare("SELECT * FROM tokens WHERE id = ?").get(id) as Row | undefined;
    if (!row) {
      // A token's secret given for its id (a leaked token pasted whole): named by its id, never repeated.
      if (redactText(id) !== id) {
        const owned = TOKEN_RE.test(id) ? (this.db.prepare("SELECT id FROM tokens WHERE hash = ?").get(hashSecret(id)) as Pick<Row, "id"> | undefined) : undefined;
        throw new ApiError("auth.token_not_found", `no token has that id: it reads as a token's secret, which is not repeated${owned ? `; it is the secret of ${owned.id}: revoke that id` : ""} (hal0 token list shows the ids)`);
      }
      // A name given for the id (`hal0 token revoke alice`): its live tokens' ids, to pick from.
      const named = (this.db.prepare("SELECT id, kind FROM tokens WHERE name = ? AND revoked_at IS NULL ORDER BY created_at").all(id) as Array<Pick<Row, "id" | "kind">>);
      if (named.length > 0) {
        throw new ApiError("auth.token_not_found", `no token has the id ${id}: revoke takes a token's id, and ${id} is a name, of ${named.map((r) => `${r.id} (${r.kind})`).join(", ")}; revoke ${named.length > 1 ? "each id" : "that id"}, or rotate the name (hal0 token rotate ${id})`, { id });
      }
      throw new ApiError("auth.token_not_found", `no token ${id}`, { id });
    }
    if (row.revoked_at === null) {
      verifiedByDb.get(this.db)?.tokens.clear();
      this.db.prepare("UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL").run(iso(this.now()), id);
      this.db.prepare("DELETE FROM web_sessions WHERE token_id = ?").run(id);
      this.db.prepare("DELETE FROM login_codes WHERE token_id = ?").run(id);
    }
    return this.byId(id)!;
  }

  /**
   * Replaces every live token of `name` by one new token of the same kind
   * and scopes (`auth.rotate_ambiguous` when they do not share their scopes). A plain copy hal0 keeps (`<state>/tokens/<name>`, or
   * `operator.token` for the owner) is rewritten, so the next sweep writes
   * the new one into the Hermes profile.
   */
  rotate(name: string, kind?: TokenKind, mayHandOn: (scopes: readonly string[]) => void = () => undefined): Minted {
    checkName(name);
    const rows = (this.db.prepare("SELECT * FROM tokens WHERE name = ? AND revoked_at IS NULL ORDER BY created_at DESC").all(name) as Row[]).filter((r) => kind === undefined || r.kind === kind);
    if (rows.length === 0) throw new ApiError("auth.token_not_found", `no live token is named ${name}`, { name });
    const kinds = [...new Set(rows.map((r) => r.kind))];
    if (kinds.length > 1) throw new ApiError("auth.name_invalid", `both an operator and an agent are named ${name}; say which (--kind operator|agent)`, { name });
    // One new token keeps one set of scopes: tokens of NAME that reach different things are not merged, nor narrowed to the newest's.
    const reach = (r: Row) => r.scopes.split(" ").filter(Boolean).sort().join(" ");
    if (new Set(rows.map(reach)).size > 1) {
      const list = rows.map((r) => ({ id: r.id, scopes: reach(r).split(" ") }));
      throw new ApiError("auth.rotate_ambiguous", `${kinds[0]}:${name} has ${rows.length} live tokens that reach different things (${list.map((t) => `${t.id}: ${t.scopes.join(", ")}`).join("; ")}); one new token cannot keep them all: revoke the ones no longer needed (hal0 token revoke ID), then rotate`, { name, tokens: list });
    }
    const newest = rows[0]!;
    // The caller may refuse to hand these scopes on (a narrower operator token: server/routes/tokens.ts).
    mayHandOn(newest.scopes.split(" ").filter(Boolean));
    const owner = this.readOwnerFile();
    // The kept copies are written inside the transaction: one that cannot be written undoes the rotation, so no token is revoked for a new one nobody holds.
    return this.db.transaction(() => {
      for (const r of rows) this.revoke(r.id);
      const minted = this.mint(newest.kind, name, newest.scopes.split(" "));
      if (existsSync(this.handedOnFile(name))) writeSecret(this.handedOnFile(name), minted.token);
      if (owner !== undefined && rows.some((r) => r.hash === hashSecret(owner))) writeSecret(this.ownerFile(), minted.token);
      return minted;
    })();
  }

  /**
   * The token hal0 hands on for agent `name` (the Hermes wiring): the one in
   * `<state>/tokens/<name>` while it is live, else a new one minted and kept
   * there. Only the code that writes it into a profile calls this.
   */
  handedOn(name: string, scopes: readonly Scope[] = DEFAULT_SCOPES.agent): string {
    const file = this.handedOnFile(checkName(name));
    const kept = readSecret(file);
    if (kept !== undefined && this.live(kept, "agent", name)) return kept;
    return this.db.transaction(() => {
      const minted = this.mint("agent", name, scopes);
      try {
        mkdirSync(join(this.stateDir, "tokens"), { recursive: true, mode: 0o700 });
        chmodSync(join(this.stateDir, "tokens"), 0o700);
      } catch (err) {
        throw secretNotWritten(file, err);
      }
      writeSecret(file, minted.token);
      return minted.token;
    })();
  }

  /**
   * Agent `name` is gone (a removed Hermes profile): every live agent token
   * of that name is revoked and the kept copy removed; a later `handedOn`
   * mints a fresh one.
   */
  forgetHandedOn(name: string): void {
    const file = this.handedOnFile(checkName(name));
    this.db.transaction(() => {
      for (const r of this.db.prepare("SELECT id FROM tokens WHERE kind = 'agent' AND name = ? AND revoked_at IS NULL").all(name) as { id: string }[]) this.revoke(r.id);
    })();
    rmSync(file, { force: true });
  }

  /** A fingerprint of the token `handedOn(name)` returns now, without minting one; undefined when none is kept. */
  handedOnFingerprint(name: string): string | undefined {
    const kept = readSecret(this.handedOnFile(checkName(name)));
    return kept !== undefined && this.live(kept, "agent", name) ? fingerprint(kept) : undefined;
  }

  /**
   * The bootstrap: `<state>/operator.token` (0600, the folder 0700) holds a
   * live operator token; one is minted when the file is missing or its token
   * is not live. Whoever can read the state folder is the person at the box.
   */
  ensureOwner(): { token: string; created: boolean } {
    const kept = this.readOwnerFile();
    if (kept !== undefined && this.live(kept, "operator")) return { token: kept, created: false };
    const minted = this.db.transaction(() => {
      const m = this.mint("operator", OWNER);
      writeSecret(this.ownerFile(), m.token);
      return m;
    })();
    try {
      const { mode } = statSync(this.stateDir);
      if ((mode & 0o077) !== 0 && !sharedMode(mode)) chmodSync(this.stateDir, 0o700);
    } catch {
      // a state folder we cannot chmod (not ours) keeps its mode; the file itself is 0600
    }
    return { token: minted.token, created: true };
  }

  // ── the web page: one-time login codes and sessions ─────────────────

  /** A one-time login code for operator token `tokenId`, valid `ttlS` seconds; `origin`: the public origin its link is printed under. */
  loginCode(tokenId: string, ttlS = 300, origin?: string): string {
    const token = this.byId(tokenId);
    if (!token || token.kind !== "operator" || token.revoked_at !== null) throw new ApiError("auth.login_invalid", "only a live operator token can log in");
    pagesReach(token);
    const code = randomBytes(24).toString("base64url");
    const at = this.now();
    this.db.prepare("INSERT INTO login_codes (hash, token_id, created_at, expires_at, origin) VALUES (?, ?, ?, ?, ?)").run(hashSecret(code), tokenId, iso(at), iso(at + ttlS * 1000), origin ?? null);
    return code;
  }

  /**
   * Exchanges a login code (once, before it expires, while its operator token
   * is live) for a new session cookie value. A code of a revoked token is
   * refused and stays unused: no cookie that no page would take. `origin`:
   * the public origin the code's link was printed under, if any. A code made
   * at a time still to come (the clock set back since: NTP, `date -s`) is
   * refused and spent: how long it has lived is not known.
   */
  redeemCode(code: string, ttlS: number): { session: string; token: TokenInfo; origin?: string } {
    const hash = hashSecret(code);
    const at = iso(this.now());
    if (this.db.prepare("DELETE FROM login_codes WHERE hash = ? AND created_at > ?").run(hash, setBackPast(this.now())).changes > 0) {
      throw new ApiError("auth.login_invalid", "this login link was made at a time still to come (the clock was set back since), so how long it has lived is not known; run `hal0 web` for a new one");
    }
    const used = this.db.prepare(`UPDATE login_codes SET used_at = ? WHERE hash = ? AND used_at IS NULL AND expires_at > ?
                                  AND token_id IN (SELECT id FROM tokens WHERE kind = 'operator' AND revoked_at IS NULL)`).run(at, hash, at);
    if (used.changes !== 1) throw new ApiError("auth.login_invalid", "this login link is unknown, used or expired, or its token was revoked; run `hal0 web` for a new one");
    const { token_id, origin } = this.db.prepare("SELECT token_id, origin FROM login_codes WHERE hash = ?").get(hash) as { token_id: string; origin: string | null };
    return { ...this.openSession(token_id, ttlS), ...(origin !== null ? { origin } : {}) };
  }

  /** A session for a pasted operator token. */
  sessionForToken(secret: string, ttlS: number): { session: string; token: TokenInfo } {
    const token = this.verify(secret.trim());
    if (!token || token.kind !== "operator") throw new ApiError("auth.login_invalid", "that is not a live operator token");
    pagesReach(token);
    return this.openSession(token.id, ttlS);
  }

  /**
   * The live operator token behind a session cookie, or undefined. A session
   * opened at a time still to come (the clock set back since: NTP, `date -s`)
   * ends: how long it has lasted is not known, so it does not get its whole
   * time to live again on top of it.
   */
  session(cookie: string): TokenInfo | undefined {
    if (!/^[A-Za-z0-9_-]{32}$/.test(cookie)) return undefined;
    const now = iso(this.now());
    const hash = hashSecret(cookie);
    const row = this.db.prepare(`SELECT t.*, s.created_at AS session_created_at FROM web_sessions s JOIN tokens t ON t.id = s.token_id
                                 WHERE s.hash = ? AND s.expires_at > ? AND t.revoked_at IS NULL`).get(hash, now) as (Row & { session_created_at: string }) | undefined;
    if (!row) return undefined;
    if (row.session_created_at > setBackPast(this.now())) {
      this.db.prepare("DELETE FROM web_sessions WHERE hash = ?").run(hash);
      return undefined;
    }
    this.touch(row.id);
    return info(row);
  }

  endSession(cookie: string): void {
    this.db.prepare("DELETE FROM web_sessions WHERE hash = ?").run(hashSecret(cookie));
  }

  private openSession(tokenId: string, ttlS: number): { session: string; token: TokenInfo } {
    const session = randomBytes(24).toString("base64url");
    const at = this.now();
    this.db.prepare("DELETE FROM web_sessions WHERE expires_at <= ?").run(iso(at));
    this.db.prepare("INSERT INTO web_sessions (hash, token_id, created_at, expires_at) VALUES (?, ?, ?, ?)").run(hashSecret(session), tokenId, iso(at), iso(at + ttlS * 1000));
    return { session, token: this.byId(tokenId)! };
  }

  private live(secret: string, kind: TokenKind, name?: string): boolean {
    if (!TOKEN_RE.test(secret)) return false;
    const row = this.db.prepare("SELECT kind, name, revoked_at FROM tokens WHERE hash = ?").get(hashSecret(secret)) as Pick<Row, "kind" | "name" | "revoked_at"> | undefined;
    return row !== undefined && row.revoked_at === null && row.kind === kind && (name === undefined || row.name === name);
  }

  private touch(id: string): void {
    const at = this.now();
    const last = this.lastUsed.get(id);
    // Within the minute after the last write, and not before it: a clock set back (NTP, `date -s`) writes at once,
    // rather than keep a time still to come as the last use until the clock catches up with it.
    if (last !== undefined && at >= last && at - last < LAST_USED_EVERY_MS) return;
    this.lastUsed.set(id, at);
    // Only a note for `hal0 token list`: a database that cannot take it (a full disk) does not refuse the caller.
    try {
      this.db.prepare("UPDATE tokens SET last_used_at = ? WHERE id = ?").run(iso(at), id);
    } catch {
      /* written again at the next use past LAST_USED_EVERY_MS */
    }
  }

  private ownerFile(): string {
    return join(this.stateDir, "operator.token");
  }

  private readOwnerFile(): string | undefined {
    return readSecret(this.ownerFile());
  }

  private handedOnFile(name: string): string {
    return join(this.stateDir, "tokens", name);
  }
}

/** The operator token a CLI uses: `$HAL0_TOKEN`, else `<state>/operator.token`. */
export function operatorTokenFrom(stateDir: string, env: NodeJS.ProcessEnv): string | undefined {
  return env.HAL0_TOKEN?.trim() || readSecret(join(stateDir, "operator.token"));
}

function readSecret(file: string): string | undefined {
  try {
    const text = readFileSync(file, "utf8").trim();
    return text === "" ? undefined : text;
  } catch {
    return undefined;
  }
}

/** Atomic and 0600 from the first byte: a temp file in the same folder, then rename. */
function writeSecret(file: string, secret: string): void {
  // hal0's temp name (reconciler/atomic.ts): a writer that dies here leaves a temp `hal0 serve` removes at start.
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(6).toString("hex")}.hal0.tmp`);
  try {
    writeFileSync(tmp, `${secret}\n`, { mode: 0o600 });
    renameSync(tmp, file);
  } catch (err) {
    // A write that fails leaves no copy of the token behind.
    rmSync(tmp, { force: true });
    throw secretNotWritten(file, err);
  }
}

/** `auth.token_write_failed` naming the file and why (a full disk stays `server.storage_full`). */
function secretNotWritten(file: string, err: unknown): ApiError {
  const code = (err as NodeJS.ErrnoException).code;
  const why = code === "EISDIR" ? "a folder stands there (EISDIR)" : code === "ENOTDIR" || code === "EEXIST" ? `${dirname(file)} is not a folder (${code})` : String((err as Error).message);
  return storageFull(err) ?? new ApiError("auth.token_write_failed", `could not write the token's copy ${file}: ${why}; nothing was minted, revoked or rotated`, { file });
}

function info(r: Row): TokenInfo {
  const entries = r.scopes.split(" ").filter(Boolean);
  const profiles = entries.filter((e) => e.startsWith("profile:")).map((e) => e.slice("profile:".length));
  return {
    id: r.id, kind: r.kind, name: r.name, scopes: entries.filter((e) => !e.startsWith("profile:")) as Scope[], ...(profiles.length > 0 ? { profiles } : {}),
    created_at: r.created_at, last_used_at: r.last_used_at, revoked_at: r.revoked_at,
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** The pages are read with the `rest` scope: an operator token without it logs in to no page, so it is refused a session (no cookie that no page would take). */
function pagesReach(token: TokenInfo): void {
  if (!token.scopes.includes("rest")) throw new ApiError("auth.login_invalid", `the token of operator ${token.name} does not reach rest, which the pages need; log in with one minted with --scope rest`);
}
