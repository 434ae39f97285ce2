import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { captureIo, healthWithin, startServe, writeFakeBox } from "./helpers.js";

const exitOf = (child: ChildProcess) => new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

describe("hal0 serve whose state folder is removed while it runs (real processes)", () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-gone-"));
  const config = join(base, "box");
  const state = join(base, "state");
  let port: number;
  beforeAll(async () => {
    port = (await writeFakeBox(config, ["solo"]))[0]!;
  });
  afterAll(async () => {
    await main(["down", "--config", config, "--state", state], captureIo());
    rmSync(base, { recursive: true, force: true });
  });

  it("says state.folder_gone once, puts back the runners' records, exits 1; status and down still find the runner", async () => {
    const { child, lines } = await startServe(config, state);
    let err = "";
    child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
    expect(await healthWithin(port, 20_000)).toBe(200);
    // The sweep has recorded the runner it started.
    const record = join(state, "slots/solo/runtime.json");
    for (let i = 0; i < 100 && !existsSync(record); i++) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 1500));
    const exited = exitOf(child);
    rmSync(state, { recursive: true, force: true });
    // A sweep asked now would meet the missing folder.
    expect(await exited).toBe(1);
    expect(err).toContain("state.folder_gone");
    const gone = lines().filter((l) => l.code === "state.folder_gone");
    expect(gone).toHaveLength(1);
    expect(gone[0].message).toContain("hal0 status and hal0 down still find them");
    expect(lines().filter((l) => l.msg === "sweep failed")).toEqual([]);
    // The runner was left running, and its records are back.
    expect(await healthWithin(port, 2000)).toBe(200);
    expect(existsSync(record)).toBe(true);
    expect(existsSync(join(state, "inventory.json"))).toBe(true);
    const status = captureIo();
    await main(["status", "--config", config, "--state", state], status);
    expect(status.out()).toMatch(/^solo +ready +\d+/m);
    expect(status.out()).not.toContain("ChangesPending");
    const down = captureIo();
    expect(await main(["down", "--config", config, "--state", state], down)).toBe(0);
    expect(down.out() + down.err()).toContain("solo");
    expect(await healthWithin(port, 1000).catch(() => 0)).not.toBe(200);
  }, 60_000);

  it("a serve.lock removed by hand is written again at once: a second hal0 serve on the folder still refuses to start", async () => {
    const lockState = join(base, "state-lock");
    const { child, lines } = await startServe(config, lockState, ["--no-reconcile"]);
    const lock = join(lockState, "serve.lock");
    const before = readFileSync(lock, "utf8");
    rmSync(lock);
    for (let i = 0; i < 50 && !existsSync(lock); i++) await new Promise((r) => setTimeout(r, 100));
    expect(readFileSync(lock, "utf8")).toBe(before);
    const second = await startServe(config, lockState, ["--no-reconcile"]).then((s) => {
      s.child.kill("SIGKILL");
      return "started";
    }, (err: Error) => err.message);
    expect(second).toMatch(/exited 1/);
    expect(lines().filter((l) => l.code === "server.lock_restored")).toHaveLength(1);
    expect(child.exitCode).toBeNull();
    const exited = exitOf(child);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(existsSync(lock)).toBe(false);
  }, 60_000);

  it("a serve.lock that names another process now (another serve took the folder): server.lock_lost, exit 1, and that lock is left to its holder", async () => {
    const lockState = join(base, "state-taken");
    const { child, lines } = await startServe(config, lockState, ["--no-reconcile"]);
    const lock = join(lockState, "serve.lock");
    const other = `${JSON.stringify({ pid: process.pid, host: "here", started_at: new Date().toISOString(), command: "hal0 serve" })}\n`;
    const exited = exitOf(child);
    rmSync(lock);
    writeFileSync(lock, other);
    expect(await exited).toBe(1);
    expect(lines().filter((l) => l.code === "server.lock_lost")).toHaveLength(1);
    expect(readFileSync(lock, "utf8")).toBe(other);
  }, 60_000);

  it("hal0.db removed, or replaced by a rename, while serve runs: state.database_gone once, exit 1", async () => {
    for (const how of ["removed", "replaced"] as const) {
      const dbState = join(base, `state-db-${how}`);
      const { child, lines } = await startServe(config, dbState, ["--no-reconcile"]);
      const exited = exitOf(child);
      const db = join(dbState, "hal0.db");
      if (how === "removed") rmSync(db);
      else {
        writeFileSync(`${db}.restored`, readFileSync(db));
        renameSync(`${db}.restored`, db);
      }
      expect(await exited).toBe(1);
      const gone = lines().filter((l) => l.code === "state.database_gone");
      expect(gone).toHaveLength(1);
      expect(gone[0].message).toContain(how === "removed" ? "was removed" : "was replaced by another file");
    }
  }, 60_000);

  it("a hal0 reconcile loop whose state folder is removed: state.folder_gone once on stderr, the records put back, exit 1 (before, it failed sweep after sweep); its reconcile.lock removed by hand is written again", async () => {
    const loopState = join(base, "state-loop");
    const child = spawn(process.execPath, [join(import.meta.dirname, "../../bin/hal0.js"), "reconcile", "--config", config, "--state", loopState], { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
    const exited = exitOf(child);
    try {
      expect(await healthWithin(port, 20_000)).toBe(200);
      const record = join(loopState, "slots/solo/runtime.json");
      for (let i = 0; i < 100 && !existsSync(record); i++) await new Promise((r) => setTimeout(r, 100));
      // The loop's lock, removed by hand, is put back as it was.
      const lock = join(loopState, "reconcile.lock");
      const before = readFileSync(lock, "utf8");
      rmSync(lock);
      for (let i = 0; i < 50 && !existsSync(lock); i++) await new Promise((r) => setTimeout(r, 100));
      expect(readFileSync(lock, "utf8")).toBe(before);
      expect(err).toContain("hal0 reconcile: server.lock_restored: reconcile.lock was removed while hal0 reconcile runs");
      await new Promise((r) => setTimeout(r, 1200));
      rmSync(loopState, { recursive: true, force: true });
      // Before, the loop went on, each sweep failing on the missing folder.
      expect(await Promise.race([exited, new Promise((r) => setTimeout(() => r("still running"), 10_000))])).toBe(1);
      expect(err.match(/state\.folder_gone/g)).toHaveLength(1);
      expect(err).toContain("hal0 reconcile: state.folder_gone: the state folder");
      expect(err).not.toContain("sweep failed");
      // The runner was left running, and its records are back for status and down.
      expect(await healthWithin(port, 2000)).toBe(200);
      expect(existsSync(record)).toBe(true);
      expect(existsSync(join(loopState, "inventory.json"))).toBe(true);
      const down = captureIo();
      expect(await main(["down", "--config", config, "--state", loopState], down)).toBe(0);
      expect(down.out() + down.err()).toContain("solo");
    } finally {
      child.kill("SIGKILL");
      // A failed run leaves no runner behind (down finds it by the records, wherever the test stopped).
      await main(["down", "--config", config, "--state", loopState], captureIo());
    }
  }, 60_000);
});
