import { execFileSync, type ChildProcess } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { httpCall } from "../server/harness.js";
import { PROJECT, until } from "../reconciler/process-helpers.js";
import { startServe } from "./helpers.js";

/**
 * A real full disk: the state folder on a 2 MiB tmpfs that the test mounts
 * (root, as CI runs; a machine where the mount is refused fails this test,
 * it does not skip it), filled to the last byte while `hal0 serve` runs.
 */
describe("hal0 serve on a state folder whose disk fills up (a real tmpfs)", () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-full-"));
  const disk = join(base, "disk");
  let child: ChildProcess | undefined;
  afterAll(() => {
    child?.kill("SIGKILL");
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
});
