import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { httpCall } from "../server/harness.js";
import { PROJECT, until } from "../reconciler/process-helpers.js";
import { main } from "../../cli/index.js";
import { captureIo, emptyServeBox, startServe } from "./helpers.js";
import { apiErrorOf, ApiError } from "../../server/errors.js";
import type Database from "better-sqlite3";

/**
 * A real `hal0 serve` on a state folder damaged between runs: a file of it
 * that cannot be read is refused with a code naming it, over REST and in the
 * sweep's log line, never an internal error with a stack.
 */
describe("hal0 serve on a damaged state folder", () => {
  const children: ChildProcess[] = [];
  const bases: string[] = [];
  afterAll(() => {
    for (const child of children) child.kill("SIGKILL");
    for (const base of bases) rmSync(base, { recursive: true, force: true });
  });

  it("a state file that is a folder (outcomes.json) is system.io naming it for the reads that need it, and the sweep logs one line with the code, not a stack", async () => {
    const { config, state } = emptyServeBox("hal0-damaged-");
    bases.push(dirname(config));
    const file = join(state, "outcomes.json");
    mkdirSync(file, { recursive: true });
    const serving = await startServe(config, state);
    children.push(serving.child);
    const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    const slots = await httpCall(serving.url, "GET", "/api/slots", { headers });
    expect(slots.status).toBe(500);
    expect(slots.body.error).toEqual({ code: "system.io", message: `cannot read the state file ${file}: it is a folder (EISDIR); move the folder away (hal0 writes the file again)`, details: {} });
    // What does not need the file still answers.
    expect((await httpCall(serving.url, "GET", "/api/status", { headers })).status).toBe(200);
    await until(async () => serving.lines().some((l) => l.msg === "sweep failed"), 10_000);
    const failed = serving.lines().filter((l) => l.msg === "sweep failed" || l.msg === "unhandled error");
    expect(failed[0]).toMatchObject({ msg: "sweep failed", code: "system.io", message: expect.stringContaining(file) });
    expect(JSON.stringify(failed)).not.toContain("stack");
  });

  it("hal0.db held by another process's write (a sqlite3 shell inside a transaction) is 503 state.db_busy for a call that writes it, and hal0 token create exits 1 with it; once let go, both work", async () => {
    const { config, state } = emptyServeBox("hal0-busy-");
    bases.push(dirname(config));
    const serving = await startServe(config, state, ["--no-reconcile"]);
    children.push(serving.child);
    const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    // Another process (real SQLite, as a sqlite3 shell would) takes the write lock and keeps it until it is killed.
    const holder = spawn(process.execPath, ["-e", `const Db = require(${JSON.stringify(join(PROJECT, "node_modules/better-sqlite3"))}); const db = new Db(${JSON.stringify(join(state, "hal0.db"))}); db.exec("BEGIN IMMEDIATE"); console.log("held"); setInterval(() => {}, 1000);`], { stdio: ["ignore", "pipe", "inherit"] });
    children.push(holder);
    await new Promise<void>((resolve) => holder.stdout!.on("data", (c: Buffer) => c.toString().includes("held") && resolve()));
    const edit = { body: { edits: [{ file: "slots/x.toml", op: "set", path: ["model"], value: "tiny" }] }, headers };
    const refused = await httpCall(serving.url, "POST", "/api/plans", edit);
    expect(refused.status).toBe(503);
    expect(refused.body.error).toMatchObject({ code: "state.db_busy", message: expect.stringContaining("(hal0.db) is held by another process's write"), details: { retry_after_s: 5 } });
    const io = captureIo();
    expect(await main(["token", "create", "--agent", "busy", "--state", state], io)).toBe(1);
    expect(io.err()).toMatch(/^hal0 token: state\.db_busy: the state folder's database \(hal0\.db\) is held by another process's write/);
    expect(serving.lines().filter((l) => l.msg === "unhandled error")).toEqual([]);
    holder.kill("SIGKILL");
    await new Promise((resolve) => holder.once("exit", resolve));
    expect((await httpCall(serving.url, "POST", "/api/plans", edit)).status).toBe(201);
    expect(await main(["token", "create", "--agent", "busy", "--state", state], captureIo())).toBe(0);
  });

  it("a state file hal0's user may not read (root's 0600 after a sudo run) is system.io naming it, what to do, and where the state folder came from", () => {
    const { config, state } = emptyServeBox("hal0-unreadable-");
    bases.push(dirname(config));
    const file = join(state, "inventory.json");
    mkdirSync(state, { recursive: true, mode: 0o700 });
    writeFileSync(file, `${JSON.stringify({ version: 1, box: "box-0123456789ab", slots: {} })}\n`, { mode: 0o600 });
    chmodSync(file, 0o000);
    // As root (here, as in CI) a mode refuses nothing: the command runs without the capabilities that override file modes.
    const argv = [process.execPath, join(PROJECT, "bin/hal0.js"), "status", "--config", config, "--state", state];
    const run = spawnSync(process.getuid?.() === 0 ? "setpriv" : argv[0]!, process.getuid?.() === 0 ? ["--bounding-set=-dac_override,-dac_read_search", ...argv] : argv.slice(1), { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(1);
    expect(run.stderr).toMatch(new RegExp(`^hal0 status: system\\.io: cannot read the state file ${file}: permission denied \\(EACCES\\); give the user hal0 runs as \\(uid \\d+\\) read and write access to it \\(a command run as another user may have made it\\); hal0 reads and writes its state folder ${state} \\(--state\\): run hal0 as a user who may, such as its owner, or name another with --state DIR\n$`));
  });

  it("a hal0.db hal0 may not write (mode 0444, or another user's after a sudo run) is system.io saying so for a command that writes it (exit 1), and the same over REST and MCP, not an internal error", () => {
    const state = mkdtempSync(join(tmpdir(), "hal0-readonly-db-"));
    bases.push(state);
    expect(spawnSync(process.execPath, [join(PROJECT, "bin/hal0.js"), "token", "list", "--state", state]).status).toBe(0); // makes hal0.db
    chmodSync(join(state, "hal0.db"), 0o444);
    // As root (here, as in CI) a mode refuses nothing: the command runs without the capabilities that override file modes.
    const argv = [process.execPath, join(PROJECT, "bin/hal0.js"), "token", "create", "--agent", "x", "--state", state];
    const run = spawnSync(process.getuid?.() === 0 ? "setpriv" : argv[0]!, process.getuid?.() === 0 ? ["--bounding-set=-dac_override,-dac_read_search", ...argv] : argv.slice(1), { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(1);
    expect(run.stderr).toBe(`hal0 token: system.io: could not write the database ${join(state, "hal0.db")}: hal0 may not write it (another user's, after a command run with sudo, or mode 0444; SQLITE_READONLY); give the user hal0 runs as (uid ${process.getuid?.()}) read and write access to it and to its folder, then retry\n`);
    // What a route's write throws on such a file (SQLite's own refusal, from a handle it opened read-only) is the same refusal.
    const Sqlite = createRequire(import.meta.url)("better-sqlite3") as typeof Database;
    const db = new Sqlite(join(state, "hal0.db"), { readonly: true });
    let thrown: unknown;
    try {
      db.prepare("DELETE FROM tokens").run();
    } catch (err) {
      thrown = err;
    } finally {
      db.close();
    }
    const refusal = apiErrorOf(thrown);
    expect(refusal).toBeInstanceOf(ApiError);
    expect(refusal).toMatchObject({ code: "system.io", status: 500, message: expect.stringContaining("could not write the state folder's database (hal0.db): hal0 may not write it") });
  });
});
