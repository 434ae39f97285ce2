import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { markedRunners, markerEnv } from "../../reconciler/drivers/process-orphans.js";
import { alive, freePort, viewFor } from "./process-helpers.js";

const pids: number[] = [];
afterEach(() => {
  for (const pid of pids.splice(0)) try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
});

/** A runner spawned as hal0 spawns one, whose record was never written (hal0 died in between). */
async function orphan(stateDir: string, name: string, argv: readonly string[], cwd: string): Promise<number> {
  const child = spawn(argv[0]!, argv.slice(1), { cwd, env: { ...process.env, ...markerEnv(stateDir, name) }, detached: true, stdio: "ignore" });
  child.unref();
  pids.push(child.pid!);
  await sleep(400);
  return child.pid!;
}

describe("runners without a record", () => {
  it("are found by their markers, stopped before a start (no port_in_use, no duplicate), and by stop", async () => {
    const stateDir = mkdtempSync(join(tmpdir(), "hal0-orphan-"));
    const root = mkdtempSync(join(tmpdir(), "hal0-orphan-root-"));
    const view = viewFor({ port: await freePort(), root });
    const lost = await orphan(stateDir, "s", view.spec.argv, root);
    expect((await markedRunners(stateDir, "s")).map((r) => r.pid)).toEqual([lost]);
    expect(await markedRunners(stateDir, "other")).toEqual([]);
    const driver = new ProcessDriver({ stateDir });
    const { pid } = await driver.start("s", view, { healthTimeoutS: 10, cwd: root });
    pids.push(pid!);
    expect(await alive(lost)).toBe(false);
    expect((await markedRunners(stateDir, "s")).map((r) => r.pid)).toEqual([pid]);
    await driver.stop("s", 2);
    const again = await orphan(stateDir, "s", viewFor({ port: await freePort(), root }).spec.argv, root);
    await driver.stop("s", 2);
    expect(await alive(again)).toBe(false);
  });
});
