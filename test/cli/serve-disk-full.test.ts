import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, cpSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { httpCall } from "../server/harness.js";
import { callMemory, memoryClient } from "../server/mcp-helpers.js";
import { PROJECT, until } from "../reconciler/process-helpers.js";
import { main } from "../../cli/index.js";
import { captureIo, emptyServeBox, healthWithin, startServe, writeFakeBox } from "./helpers.js";

/**
 * A real full disk: the state folder on a 2 MiB tmpfs that the test mounts
 * (root, as CI runs; a machine where the mount is refused fails this test,
 * it does not skip it), filled to the last byte while `hal0 serve` runs.
 */
describe("hal0 serve on a state folder whose disk fills up (a real tmpfs)", () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-full-"));
  const disk = join(base, "disk");
  let child: ChildProcess | undefined;
  const mounted: string[] = [];
  let down: (() => Promise<unknown>) | undefined;
  let sweepChild: ChildProcess | undefined;
  let stdoutChild: ChildProcess | undefined;
  afterAll(async () => {
    child?.kill("SIGKILL");
    sweepChild?.kill("SIGKILL");
    stdoutChild?.kill("SIGKILL");
    await down?.();
    for (const m of mounted) {
      try {
        execFileSync("umount", ["-l", m]);
      } catch {
        /* not mounted */
      }
    }
    try {
      execFileSync("umount", ["-l", disk]);
    } catch {
      /* not mounted */
    }
    rmSync(base, { recursive: true, force: true });
  });

  it("stays up: reads answer, a call that must record is 507 server.storage_full, and the audit rows held meanwhile are written once there is room", async () => {
    mkdirSync(disk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", disk]);
    const config = join(base, "box");
    cpSync(join(PROJECT, "fixtures/box"), config, { recursive: true });
    const state = join(disk, "state");
    const serving = await startServe(config, state, ["--no-reconcile"]);
    child = serving.child;
    const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    expect((await httpCall(serving.url, "GET", "/api/slots", { headers })).status).toBe(200);
    const filler = join(disk, "filler");
    try {
      writeFileSync(filler, Buffer.alloc(4 * 1024 * 1024));
    } catch (err) {
      expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
    }
    const edit = (value: number) => ({ body: { edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value }] }, headers });
    const refused = await httpCall(serving.url, "POST", "/api/plans", edit(41));
    expect(refused.status).toBe(507);
    expect(refused.body.error.code).toBe("server.storage_full");
    for (let i = 0; i < 5; i++) expect((await httpCall(serving.url, "GET", "/api/slots", { headers })).status).toBe(200);
    expect((await httpCall(serving.url, "POST", "/api/plans", edit(42))).status).toBe(507);
    expect(serving.child.exitCode).toBeNull();
    rmSync(filler);
    expect((await httpCall(serving.url, "POST", "/api/plans", edit(43))).status).toBe(201);
    const rows = (await httpCall(serving.url, "GET", "/api/activity?route=POST%20/api/plans", { headers })).body.items;
    expect(rows.map((r: any) => [r.outcome, r.error_code])).toEqual([["ok", null], ["error", "server.storage_full"], ["error", "server.storage_full"]]);
    // The server's log reaches this process through a pipe, after the reply that caused it: wait for the lines.
    const log = () => serving.lines().map((l) => l.msg);
    await until(async () => log().includes("audit rows are written again"), 5000).catch(() => undefined);
    expect(log()).toContain("audit rows could not be written; they are kept in memory and written when the database takes them again");
    expect(log()).toContain("audit rows are written again");
  }, 60_000);

  it("a sweep whose state write meets the full disk logs server.storage_full, not a stack", async () => {
    const sweepDisk = join(base, "sweep-disk");
    mkdirSync(sweepDisk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", sweepDisk]);
    mounted.push(sweepDisk);
    const config = join(base, "sweep-box");
    const [port] = await writeFakeBox(config, ["solo"]);
    const state = join(sweepDisk, "state");
    const serving = await startServe(config, state);
    sweepChild = serving.child;
    down = () => main(["down", "--config", config, "--state", state], captureIo());
    expect(await healthWithin(port!, 20_000)).toBe(200);
    try {
      writeFileSync(join(sweepDisk, "filler"), Buffer.alloc(4 * 1024 * 1024));
    } catch (err) {
      expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
    }
    // Disabling the slot: the sweep stops its runner and must write the inventory.
    writeFileSync(join(config, "slots/solo.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\nenabled = false\n`);
    const failed = () => serving.lines().filter((l) => l.msg === "sweep failed" || (l.msg === "sweep" && l.level >= 40));
    await until(async () => failed().length > 0, 15_000);
    const line = failed()[0];
    expect(JSON.stringify(line)).not.toContain("    at ");
    expect(JSON.stringify(line)).toContain("server.storage_full");
    rmSync(join(sweepDisk, "filler"));
  }, 60_000);
  it("with its standard output on the disk that filled up, logs that once to its log file, keeps answering, and ends at SIGTERM", async () => {
    const outDisk = join(base, "out-disk");
    mkdirSync(outDisk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", outDisk]);
    mounted.push(outDisk);
    // `hal0 serve > hal0.out` on that disk; the state folder (and so hal0.log) elsewhere.
    const { config, state } = emptyServeBox("hal0-stdout-full-");
    const out = openSync(join(outDisk, "hal0.out"), "a");
    const serving = spawn(process.execPath, [join(PROJECT, "bin/hal0.js"), "serve", "--config", config, "--state", state, "--port", "0", "--no-reconcile"], { stdio: ["ignore", out, out] });
    closeSync(out);
    stdoutChild = serving;
    const exited = new Promise<number | null>((resolve) => serving.once("exit", (code) => resolve(code)));
    const logFile = join(state, "logs/hal0.log");
    const logged = () => (existsSync(logFile) ? readFileSync(logFile, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as { msg: string; url?: string }) : []);
    await until(async () => logged().some((l) => l.msg === "hal0 serve listening"), 15_000);
    const url = logged().find((l) => l.msg === "hal0 serve listening")!.url!.replace(/\/$/, "");
    const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    try {
      writeFileSync(join(outDisk, "filler"), Buffer.alloc(4 * 1024 * 1024));
    } catch (err) {
      expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
    }
    // Each request logs a line; the first page left of hal0.out takes a few, then stdout refuses them.
    const refused = (l: { msg: string }) => l.msg.startsWith("hal0 serve's standard output refused a line (ENOSPC)");
    for (let i = 0; i < 200 && !logged().some(refused); i++) expect((await httpCall(url, "GET", "/api/status", { headers })).status).toBe(200);
    await until(async () => logged().some(refused), 5000);
    for (let i = 0; i < 20; i++) expect((await httpCall(url, "GET", "/api/status", { headers })).status).toBe(200);
    const lines = logged();
    expect(lines.filter(refused)).toHaveLength(1);
    // Not the refusal of each line logged as one more line (each refused in turn: the server spun on it and grew).
    expect(lines.filter((l) => l.msg.startsWith("a write failed"))).toEqual([]);
    serving.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(logged().at(-1)!.msg).toBe("hal0 serve stopped");
    rmSync(join(outDisk, "filler"));
    rmSync(join(state, ".."), { recursive: true, force: true });
  }, 60_000);
  it("a command that must write the database of a running serve's full or read-only state folder is system.io naming it (exit 1), not an internal error", async () => {
    const dbDisk = join(base, "db-disk");
    mkdirSync(dbDisk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", dbDisk]);
    mounted.push(dbDisk);
    const { config } = emptyServeBox("hal0-db-refused-");
    const state = join(dbDisk, "state");
    const serving = await startServe(config, state, ["--no-reconcile"]);
    const hal0 = (...args: string[]) => spawnSync(process.execPath, [join(PROJECT, "bin/hal0.js"), ...args, "--state", state], { encoding: "utf8" });
    try {
      try {
        writeFileSync(join(dbDisk, "filler"), Buffer.alloc(4 * 1024 * 1024));
      } catch (err) {
        expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
      }
      const full = hal0("token", "create", "--agent", "ci");
      expect(full.stderr).toBe(`hal0 token: system.io: could not write the database ${join(state, "hal0.db")}: database or disk is full (SQLITE_FULL)\n`);
      expect(full.status).toBe(1);
      rmSync(join(dbDisk, "filler"));
      // The same folder read-only (a remount after a disk error): the serve's open handle still works, a new one cannot write.
      execFileSync("mount", ["--bind", state, state]);
      mounted.unshift(state);
      execFileSync("mount", ["-o", "remount,bind,ro", state]);
      for (const args of [["token", "rotate", "owner"], ["token", "create", "--agent", "ci", "--json"]]) {
        const refused = hal0(...args);
        expect(refused.stderr).not.toContain("internal error");
        expect(refused.status).toBe(1);
        expect(`${refused.stdout}${refused.stderr}`).toContain(`could not write the database ${join(state, "hal0.db")}: its file system is read-only (SQLITE_READONLY); remount it read-write, then retry`);
      }
      execFileSync("umount", [state]);
      mounted.shift();
      expect(hal0("token", "list").stdout).not.toMatch(/\bagent\s+ci\b/);
    } finally {
      serving.child.kill("SIGTERM");
      await new Promise((resolve) => serving.child.once("exit", resolve));
      rmSync(join(config, ".."), { recursive: true, force: true });
    }
  }, 60_000);
  it("memory.db opened first on the full disk (the first memory call): 507 server.storage_full naming it, as every full disk, and the call works once there is room", async () => {
    const memDisk = join(base, "mem-disk");
    mkdirSync(memDisk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", memDisk]);
    mounted.push(memDisk);
    const { config } = emptyServeBox("hal0-memory-full-");
    const state = join(memDisk, "state");
    const serving = await startServe(config, state, ["--no-reconcile"]);
    const token = readFileSync(join(state, "operator.token"), "utf8").trim();
    const client = await memoryClient(serving.url, { token });
    try {
      expect(existsSync(join(state, "memory.db"))).toBe(false);
      try {
        writeFileSync(join(memDisk, "filler"), Buffer.alloc(4 * 1024 * 1024));
      } catch (err) {
        expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
      }
      const refused = await callMemory(client, "memory_bank_stats");
      expect(refused.isError).toBe(true);
      expect(refused.body.error).toMatchObject({ code: "server.storage_full", details: { cause: "SQLITE_FULL" } });
      expect(refused.body.error.message).toBe(`hal0 could not write ${join(state, "memory.db")}: the disk is full (SQLITE_FULL); free space there, then retry`);
      rmSync(join(memDisk, "filler"));
      expect((await callMemory(client, "memory_bank_stats")).isError).toBe(false);
    } finally {
      await client.close();
      serving.child.kill("SIGTERM");
      await new Promise((resolve) => serving.child.once("exit", resolve));
      rmSync(join(config, ".."), { recursive: true, force: true });
    }
  }, 60_000);
  it("the first read of the slots after a start on a full disk answers with their ids, kept in memory and written once there is room, so a restart keeps them", async () => {
    const idDisk = join(base, "id-disk");
    mkdirSync(idDisk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", idDisk]);
    mounted.push(idDisk);
    const config = join(base, "id-box");
    cpSync(join(PROJECT, "fixtures/box"), config, { recursive: true });
    const state = join(idDisk, "state");
    let serving = await startServe(config, state, ["--no-reconcile"]);
    const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    try {
      writeFileSync(join(idDisk, "filler"), Buffer.alloc(4 * 1024 * 1024));
    } catch (err) {
      expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
    }
    const idsOf = (body: { slots: Array<{ name: string; id: string }> }) => new Map(body.slots.map((x) => [x.name, x.id]));
    const roster = await httpCall(serving.url, "GET", "/api/slots", { headers });
    expect(roster.status).toBe(200);
    const ids = idsOf(roster.body);
    expect(ids.get("chat")).toMatch(/^slt_[0-9a-f]{12}$/);
    const one = await httpCall(serving.url, "GET", "/api/slots/chat", { headers });
    expect([one.status, one.body.id]).toEqual([200, ids.get("chat")]);
    expect((await httpCall(serving.url, "GET", `/api/slots/by-id/${ids.get("chat")}`, { headers })).body.name).toBe("chat");
    expect((await httpCall(serving.url, "GET", "/api/stats", { headers })).status).toBe(200);
    rmSync(join(idDisk, "filler"));
    expect(idsOf((await httpCall(serving.url, "GET", "/api/slots", { headers })).body)).toEqual(ids);
    serving.child.kill("SIGTERM");
    await new Promise((resolve) => serving.child.once("exit", resolve));
    serving = await startServe(config, state, ["--no-reconcile"]);
    try {
      expect(idsOf((await httpCall(serving.url, "GET", "/api/slots", { headers })).body)).toEqual(ids);
    } finally {
      serving.child.kill("SIGTERM");
      await new Promise((resolve) => serving.child.once("exit", resolve));
    }
  }, 60_000);
});
