import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openDb } from "../../server/db.js";
import type { Db } from "../../memory/sqlite.js";
import { TokenStore } from "../../server/identity/tokens.js";
import { CLOCK_STEP_GRACE_MS } from "../../server/clock-step.js";

let dir: string;
let handles: Db[];
const open = () => {
  const db = openDb(dir);
  handles.push(db);
  return db;
};
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hal0-token-verify-"));
  handles = [];
});
afterEach(() => {
  for (const db of handles) db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("a verified token is re-checked whenever the tokens may have changed", () => {
  it("revoked over another connection: the next verify on a warm handle refuses it", () => {
    const served = new TokenStore(open(), dir);
    const minted = served.mint("agent", "coder");
    expect(served.verify(minted.token)?.id).toBe(minted.id);
    expect(served.verify(minted.token)?.id).toBe(minted.id);
    new TokenStore(open(), dir).revoke(minted.id);
    expect(served.verify(minted.token)).toBeUndefined();
  });

  it("revoked by another store on the same handle (no other connection commits): refused too", () => {
    const db = open();
    const served = new TokenStore(db, dir);
    const minted = served.mint("agent", "coder");
    expect(served.verify(minted.token)?.name).toBe("coder");
    new TokenStore(db, dir).revoke(minted.id);
    expect(served.verify(minted.token)).toBeUndefined();
  });

  it("rotated over another connection: the old secret is refused, the new one verifies", () => {
    const served = new TokenStore(open(), dir);
    const minted = served.mint("operator", "alice");
    expect(served.verify(minted.token)?.kind).toBe("operator");
    const rotated = new TokenStore(open(), dir).rotate("alice");
    expect(served.verify(minted.token)).toBeUndefined();
    expect(served.verify(rotated.token)?.name).toBe("alice");
  });

  it("rotating NAME keeps its scopes; tokens of NAME that reach different things are not merged: auth.rotate_ambiguous, nothing revoked", () => {
    const store = new TokenStore(open(), dir);
    const a = store.mint("agent", "bot", ["mcp:admin", "rest"]);
    const b = store.mint("agent", "bot", ["rest", "mcp:admin"]);
    const rotated = store.rotate("bot");
    expect(store.verify(rotated.token)?.scopes).toEqual(["mcp:admin", "rest"]);
    for (const old of [a, b]) expect(store.verify(old.token)).toBeUndefined();
    const bridge = store.mint("agent", "bot", ["mcp:agents", "profile:coder"]);
    let err: unknown;
    try {
      store.rotate("bot");
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: "auth.rotate_ambiguous", status: 409, details: { name: "bot", tokens: expect.arrayContaining([{ id: rotated.id, scopes: ["mcp:admin", "rest"] }]) } });
    expect((err as Error).message).toContain(`${bridge.id}: mcp:agents, profile:coder`);
    expect(store.verify(rotated.token)?.name).toBe("bot");
    expect(store.verify(bridge.token)?.name).toBe("bot");
    store.revoke(bridge.id);
    expect(store.verify(store.rotate("bot").token)?.scopes).toEqual(["mcp:admin", "rest"]);
  });

  it("an unknown or malformed secret is never remembered: minted later over another connection, it verifies", () => {
    const served = new TokenStore(open(), dir);
    served.mint("agent", "first");
    expect(served.verify("hal0_ag_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")).toBeUndefined();
    expect(served.verify("not a token")).toBeUndefined();
    const later = new TokenStore(open(), dir).mint("agent", "later");
    expect(served.verify(later.token)?.name).toBe("later");
  });
});

describe("operator tokens minted before the bridge", () => {
  it("one that held every scope of its time (mcp:admin, mcp:memory, rest) reaches mcp:agents after the upgrade; a narrower one and agent tokens do not", () => {
    const db = open();
    const store = new TokenStore(db, dir);
    const everything = store.mint("operator", "owner-then");
    const narrow = store.mint("operator", "reader", ["mcp:memory"]);
    const agent = store.mint("agent", "coder", ["mcp:admin", "mcp:memory", "rest"]);
    // As the database of a hal0 before the bridge holds them, and its schema as it was then: ten migrations behind
    // (the bridge's scopes, and after it the plans' actor_kind, the approvals' executor, the login codes' origin, the
    // runs' cancel_requested, skill_changes, skills_before and boot_id, the plans' effects, the login codes' created_at, undone).
    db.prepare("UPDATE tokens SET scopes = 'mcp:admin mcp:memory rest' WHERE id = ?").run(everything.id);
    db.exec("ALTER TABLE plans DROP COLUMN actor_kind");
    db.exec("ALTER TABLE approvals DROP COLUMN executor");
    db.exec("ALTER TABLE login_codes DROP COLUMN origin");
    db.exec("ALTER TABLE bridge_runs DROP COLUMN cancel_requested");
    db.exec("ALTER TABLE bridge_runs DROP COLUMN skill_changes");
    db.exec("ALTER TABLE bridge_runs DROP COLUMN skills_before");
    db.exec("ALTER TABLE bridge_runs DROP COLUMN boot_id");
    db.exec("ALTER TABLE plans DROP COLUMN effects");
    db.exec("ALTER TABLE login_codes DROP COLUMN created_at");
    const version = db.pragma("user_version", { simple: true }) as number;
    db.pragma(`user_version = ${version - 10}`);
    const upgraded = new TokenStore(open(), dir);
    expect(upgraded.verify(everything.token)?.scopes).toEqual(["mcp:admin", "mcp:memory", "rest", "mcp:agents"]);
    expect(upgraded.verify(narrow.token)?.scopes).toEqual(["mcp:memory"]);
    expect(upgraded.verify(agent.token)?.scopes).toEqual(["mcp:admin", "mcp:memory", "rest"]);
  });
});

describe("a token's last use", () => {
  it("is written at most once a minute, and at once after the clock was set back: never a time still to come", () => {
    let clock = Date.parse("2026-12-07T12:00:00Z");
    const tokens = new TokenStore(open(), dir, () => clock);
    const minted = tokens.mint("agent", "coder");
    const lastUsed = () => tokens.byId(minted.id)!.last_used_at;
    expect(lastUsed()).toBeNull();
    tokens.verify(minted.token);
    expect(lastUsed()).toBe("2026-12-07T12:00:00.000Z");
    clock += 30_000;
    tokens.verify(minted.token);
    expect(lastUsed()).toBe("2026-12-07T12:00:00.000Z"); // within the minute: not written again
    clock += 30_000;
    tokens.verify(minted.token);
    expect(lastUsed()).toBe("2026-12-07T12:01:00.000Z");
    clock -= 24 * 3600_000; // NTP steps the clock back a day
    tokens.verify(minted.token);
    expect(lastUsed()).toBe("2026-12-06T12:01:00.000Z");
  });
});

describe("a web session and the clock", () => {
  it("ends at its expiry exactly, and at once when the clock was set back past its opening: never its whole 12 h again", () => {
    let clock = Date.parse("2026-12-07T12:00:00Z");
    const tokens = new TokenStore(open(), dir, () => clock);
    const owner = tokens.mint("operator", "alice");
    const ttlS = 12 * 3600;
    const first = tokens.sessionForToken(owner.token, ttlS).session;
    expect(tokens.session(first)?.name).toBe("alice");
    clock += ttlS * 1000 - 1;
    expect(tokens.session(first)?.name).toBe("alice");
    clock += 1;
    expect(tokens.session(first)).toBeUndefined(); // at its expiry: ended
    const second = tokens.sessionForToken(owner.token, ttlS).session;
    clock -= 24 * 3600_000; // NTP steps the clock back a day: 36 h would be left on a clock read naively
    expect(tokens.session(second)).toBeUndefined();
    clock += 24 * 3600_000 + 60_000; // and once the clock is past its opening again, it stays ended
    expect(tokens.session(second)).toBeUndefined();
    expect(tokens.session(tokens.sessionForToken(owner.token, ttlS).session)?.name).toBe("alice");
  });

  it("lives on through a step back of a few seconds, as a synchronised clock makes (NTP at boot): within CLOCK_STEP_GRACE_MS", () => {
    let clock = Date.parse("2026-12-07T12:00:00Z");
    const tokens = new TokenStore(open(), dir, () => clock);
    const owner = tokens.mint("operator", "alice");
    const session = tokens.sessionForToken(owner.token, 12 * 3600).session;
    clock -= 3_000;
    expect(tokens.session(session)?.name).toBe("alice");
    const code = tokens.loginCode(owner.id, 300);
    clock -= CLOCK_STEP_GRACE_MS - 3_000; // the session's opening now stands the whole grace ahead, the code's 3 s less
    expect(tokens.redeemCode(code, 3600).token.name).toBe("alice");
    expect(tokens.session(session)?.name).toBe("alice");
    clock -= 1_000; // past the grace: taken for a clock set back
    expect(tokens.session(session)).toBeUndefined();
  });
});

describe("a login code and the clock", () => {
  it("is refused, and spent, when the clock was set back past its making: never its whole 5 minutes again", () => {
    let clock = Date.parse("2026-12-07T12:00:00Z");
    const tokens = new TokenStore(open(), dir, () => clock);
    const owner = tokens.mint("operator", "alice");
    const code = tokens.loginCode(owner.id, 300);
    clock -= 24 * 3600_000; // NTP steps the clock back a day: a day and 5 minutes would be left on a clock read naively
    expect(() => tokens.redeemCode(code, 3600)).toThrow(/clock was set back/);
    clock += 24 * 3600_000; // and once the clock is past its making again, it stays refused
    expect(() => tokens.redeemCode(code, 3600)).toThrow(/unknown, used or expired/);
    const fresh = tokens.loginCode(owner.id, 300);
    clock += 299_000;
    expect(tokens.redeemCode(fresh, 3600).token.name).toBe("alice");
  });
});
