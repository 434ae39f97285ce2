import { existsSync } from "node:fs";
import { join } from "node:path";
import type { HermesCredentials } from "../../reconciler/index.js";
import { openDb, type Db } from "../db.js";
import { TokenStore } from "./tokens.js";

/**
 * The Hermes wiring's credentials (reconciler/observed.ts `HermesCredentials`)
 * over the token store: `fingerprint` is `handedOnFingerprint` (never mints,
 * so planning, `hal0 plan` and `hal0 doctor` write nothing), `token` is
 * `handedOn` (the executor's, as it writes a profile: mints and keeps
 * `<state>/tokens/<identity>` on first wiring, or when the kept one was
 * revoked). A rotation (`hal0 token rotate hermes__<p>`) rewrites the kept
 * file, so the next observation's fingerprint differs from the file's bearer
 * and the next sweep writes the new token.
 */
export function hermesCredentials(tokens: TokenStore): HermesCredentials {
  return {
    fingerprint: (identity) => tokens.handedOnFingerprint(identity) ?? null,
    token: (identity) => tokens.handedOn(identity),
    revoke: (identity) => tokens.forgetHandedOn(identity),
  };
}

/**
 * The same for a CLI command: the token store over `<state>/hal0.db`, opened
 * for each call and closed right after (a command holds no database handle;
 * `hal0 serve` may have the same file open, in WAL mode). On a box without a
 * database a fingerprint is null and nothing is created; the first `token`
 * creates it.
 */
export function stateHermesCredentials(stateDir: string): HermesCredentials {
  const withStore = <T>(fn: (tokens: TokenStore) => T): T => {
    const db: Db = openDb(stateDir);
    try {
      return fn(new TokenStore(db, stateDir));
    } finally {
      db.close();
    }
  };
  return {
    fingerprint: (identity) => (existsSync(join(stateDir, "hal0.db")) ? withStore((t) => t.handedOnFingerprint(identity) ?? null) : null),
    token: (identity) => withStore((t) => t.handedOn(identity)),
    revoke: (identity) => void (existsSync(join(stateDir, "hal0.db")) ? withStore((t) => t.forgetHandedOn(identity)) : undefined),
  };
}
