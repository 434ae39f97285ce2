import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Audit } from "../../server/audit.js";
import { openDb } from "../../server/db.js";
import type { Call } from "../../server/dispatch.js";
import type { Route } from "../../server/route.js";
import { startTestServer, type TestServer } from "./harness.js";

/**
 * A full disk under the state folder, as SQLite reports it: `PRAGMA
 * max_page_count` at the database's size makes every write that needs a
 * page fail with SQLITE_FULL, exactly as a full file system does.
 */
function fill(db: { pragma(source: string, options?: { simple: boolean }): unknown }): void {
  const pages = db.pragma("page_count", { simple: true }) as number;
  db.pragma(`max_page_count = ${pages}`);
}
function unfill(db: { pragma(source: string): unknown }): void {
  db.pragma("max_page_count = 1073741823");
}

const route = { method: "POST", path: "/api/x", kind: "action" } as unknown as Route;
const call = (n: number) => ({ caller: { kind: "operator", agent: "owner", private: false, via: "rest" }, params: {}, query: {}, body: { n, pad: "p".repeat(2000) }, requestId: `r${n}` }) as unknown as Call;
const tick = () => new Promise((r) => setImmediate(r));

describe("a full disk under the state folder", () => {
  it("audit rows wait in memory while they cannot be written, said once, and are all written when the database takes them again", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-audit-full-"));
    const db = openDb(dir);
    const errors: Array<{ code: unknown; held: number }> = [];
    const recovered: Array<[number, number]> = [];
    const audit = new Audit(db, Date.now, (err, held) => errors.push({ code: (err as { code?: unknown }).code, held }), (written, dropped) => recovered.push([written, dropped]));
    audit.record({ call: call(0), route, outcome: "ok", durationMs: 1 });
    await tick();
    fill(db);
    for (let i = 1; i <= 30; i++) {
      audit.record({ call: call(i), route, outcome: "ok", durationMs: 1 });
      await tick(); // each turn's flush fails; none throws out of the timer
    }
    expect(errors).toHaveLength(1);
    expect(errors[0]!.code).toBe("SQLITE_FULL");
    unfill(db);
    expect(audit.query({ limit: 100 }).total).toBe(31);
    expect(audit.query({ limit: 100 }).items.map((r) => r.request_id)).toEqual(Array.from({ length: 31 }, (_, i) => `r${30 - i}`));
    expect(recovered).toEqual([[30, 0]]);
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe("hal0's server", () => {
    let s: TestServer;
    afterEach(async () => {
      unfill(s.hal0.db);
      await s.close();
    });

    it("reads still answer; a call that must record is 507 server.storage_full, not system.internal; its audit row is written once there is room", async () => {
      s = await startTestServer();
      const agent = s.agentToken("filler");
      expect((await s.call("GET", "/api/slots")).status).toBe(200); // the slots' stable ids are given at the first read
      // A token's last use is a note: a database that cannot take it refuses no caller. (An update in place needs no
      // new page, so max_page_count would not refuse it: `query_only` refuses every write.)
      s.hal0.db.pragma("query_only = 1");
      const read = await s.call("GET", "/api/slots", { headers: { authorization: `Bearer ${agent}` } });
      s.hal0.db.pragma("query_only = 0");
      expect(read.status).toBe(200);
      fill(s.hal0.db);
      const planned = await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value: 42 }] } });
      expect(planned.status).toBe(507);
      expect(planned.body.error).toMatchObject({ code: "server.storage_full", details: { cause: "SQLITE_FULL" } });
      expect(planned.body.error.message).toBe("hal0 could not write the state folder's database: the disk is full (SQLITE_FULL); free space there, then retry");
      await tick();
      unfill(s.hal0.db);
      const rows = (await s.call("GET", "/api/activity?route=POST%20/api/plans")).body.items;
      expect(rows[0]).toMatchObject({ route: "POST /api/plans", outcome: "error", error_code: "server.storage_full" });
      expect((await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value: 42 }] } })).status).toBe(201);
    });
  });
});
