import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { copyFileSync, existsSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { emptyServeBox, startServe } from "../cli/helpers.js";
import { httpCall } from "./harness.js";
import { callMemory, memoryClient } from "./mcp-helpers.js";

/**
 * memory.db removed, or a backup moved over it, while `hal0 serve` runs: the
 * server's handle kept writing the file no path named any more, so what was
 * remembered after an `rm` was gone at the next start, and a backup moved in
 * got the old file's -wal replayed onto it there (old and backup facts
 * mixed). Every memory call is now refused (memory.store_replaced) until
 * hal0 serve restarts, and the restart opens the file now there, alone.
 */

const children = new Set<ChildProcess>();
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

const emptyBox = () => emptyServeBox("hal0-memfile-");

/** The SDK's client on hal0-memory as the operator. */
async function connect(url: string, state: string): Promise<{ mem: Client }> {
  return { mem: await memoryClient(url, { token: readFileSync(join(state, "operator.token"), "utf8").trim() }) };
}

async function stop(child: ChildProcess): Promise<void> {
  child.kill("SIGTERM");
  if (child.exitCode === null && child.signalCode === null) await once(child, "exit");
}

async function texts(mem: Client, query: string): Promise<string[]> {
  const res = await callMemory(mem, "memory_search", { query });
  expect(res.isError, JSON.stringify(res.body)).toBe(false);
  return (res.body.results as Array<{ text: string }>).map((r) => r.text).sort();
}

async function add(mem: Client, text: string): Promise<void> {
  const res = await callMemory(mem, "memory_add", { text });
  expect(res.isError, JSON.stringify(res.body)).toBe(false);
}

describe("memory.db removed or replaced while hal0 serve runs", () => {
  it("refuses memory calls with memory.store_replaced once memory.db is removed, and the restart opens an empty one", async () => {
    const { config, state } = emptyBox();
    const { child, url } = await startServe(config, state, [], (c) => children.add(c));
    let { mem } = await connect(url, state);
    await add(mem, "the kettle is blue");
    rmSync(join(state, "memory.db"));

    const refused = await callMemory(mem, "memory_add", { text: "the kettle is green" });
    expect(refused.isError).toBe(true);
    expect(refused.body.error.code).toBe("memory.store_replaced");
    expect(refused.body.error.message).toContain("restart hal0 serve");
    const read = await callMemory(mem, "memory_search", { query: "kettle" });
    expect(read.body.error?.code).toBe("memory.store_replaced");

    await mem.close();
    await stop(child);
    const again = await startServe(config, state, [], (c) => children.add(c));
    ({ mem } = await connect(again.url, state));
    expect(await texts(mem, "kettle")).toEqual([]);
    await add(mem, "the kettle is red");
    expect(await texts(mem, "kettle")).toEqual(["the kettle is red"]);
    await mem.close();
    await stop(again.child);
  });

  it("refuses them once a backup is moved over memory.db, and the restart serves the backup alone, not mixed with the old file's -wal", async () => {
    const { config, state } = emptyBox();
    const first = await startServe(config, state, [], (c) => children.add(c));
    let { mem } = await connect(first.url, state);
    await add(mem, "the backup remembers the lighthouse");
    await mem.close();
    await stop(first.child); // a clean stop: memory.db alone, its -wal folded in
    expect(existsSync(join(state, "memory.db-wal"))).toBe(false);
    copyFileSync(join(state, "memory.db"), join(state, "backup.db"));

    const second = await startServe(config, state, [], (c) => children.add(c));
    ({ mem } = await connect(second.url, state));
    await add(mem, "only the running file knows the windmill");
    expect(existsSync(join(state, "memory.db-wal"))).toBe(true);
    renameSync(join(state, "backup.db"), join(state, "memory.db")); // the careless restore: serve running, -wal left

    const refused = await callMemory(mem, "memory_add", { text: "written after the restore" });
    expect(refused.body.error?.code).toBe("memory.store_replaced");
    expect(refused.body.error.details).toMatchObject({ state: "replaced" });
    await mem.close();
    await stop(second.child);

    const third = await startServe(config, state, [], (c) => children.add(c));
    ({ mem } = await connect(third.url, state));
    expect(await texts(mem, "lighthouse")).toEqual(["the backup remembers the lighthouse"]);
    expect(await texts(mem, "windmill")).toEqual([]);
    expect(await texts(mem, "restore")).toEqual([]);
    await add(mem, "the restored file takes new facts");
    expect(await texts(mem, "restored")).toEqual(["the restored file takes new facts"]);
    await mem.close();
    await stop(third.child);
  });
});

describe("memory's service_action restart after a backup was moved over memory.db", () => {
  it("opens the backup alone, without stopping hal0 serve", async () => {
    const { config, state } = emptyBox();
    const first = await startServe(config, state, [], (c) => children.add(c));
    let { mem } = await connect(first.url, state);
    await add(mem, "the backup remembers the lighthouse");
    await mem.close();
    await stop(first.child);
    copyFileSync(join(state, "memory.db"), join(state, "backup.db"));

    const second = await startServe(config, state, [], (c) => children.add(c));
    ({ mem } = await connect(second.url, state));
    await add(mem, "only the running file knows the windmill");
    renameSync(join(state, "backup.db"), join(state, "memory.db"));
    expect((await callMemory(mem, "memory_search", { query: "windmill" })).body.error?.code).toBe("memory.store_replaced");
    const operator = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    const restarted = await httpCall(second.url, "POST", "/api/services/memory/action", { body: { action: "restart" }, headers: operator });
    expect(restarted.status, JSON.stringify(restarted.body)).toBe(200);
    expect(await texts(mem, "lighthouse")).toEqual(["the backup remembers the lighthouse"]);
    expect(await texts(mem, "windmill")).toEqual([]);
    await add(mem, "the restored file takes new facts");
    expect(await texts(mem, "restored")).toEqual(["the restored file takes new facts"]);
    await mem.close();
    await stop(second.child);
  });
});

describe("hal0.db replaced while hal0 serve runs", () => {
  it("refuses every call with state.db_replaced, and the restart serves the backup alone, not mixed with the old file's -wal", async () => {
    const { config, state } = emptyBox();
    const db = join(state, "hal0.db");
    const first = await startServe(config, state, [], (c) => children.add(c));
    await stop(first.child);
    copyFileSync(db, join(state, "backup.db"));
    const auditRows = (file: string) => {
      const raw = new Database(file, { readonly: true });
      try {
        return (raw.prepare("SELECT count(*) AS n FROM audit WHERE tool = 'memory_add'").get() as { n: number }).n;
      } finally {
        raw.close();
      }
    };
    expect(auditRows(join(state, "backup.db"))).toBe(0);

    const second = await startServe(config, state, [], (c) => children.add(c));
    const operator = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    const { mem } = await connect(second.url, state);
    await add(mem, "an audited call the backup never saw"); // its audit row goes to hal0.db's -wal
    await mem.close();
    renameSync(join(state, "backup.db"), db);

    const refused = await httpCall(second.url, "GET", "/api/slots", { headers: operator });
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: "state.db_replaced", details: { state: "replaced" } });
    expect(refused.body.error.message).toContain("restart hal0 serve");
    await stop(second.child);

    const third = await startServe(config, state, [], (c) => children.add(c));
    expect((await httpCall(third.url, "GET", "/api/slots", { headers: operator })).status).toBe(200);
    await stop(third.child);
    expect(auditRows(db)).toBe(0);
  });
});
