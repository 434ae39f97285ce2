import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { executePlan } from "../../reconciler/execute.js";
import { StateStore } from "../../reconciler/state.js";
import type { Change } from "../../schema/index.js";
import { markedRunners, markerEnv } from "../../reconciler/drivers/process-orphans.js";
import { alive, freePort, until, viewFor } from "./process-helpers.js";

const pids: number[] = [];
afterEach(() => {
  for (const pid of pids.splice(0)) try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
});

/** A runner spawned as hal0 spawns one, whose record was never written (hal0 died in between); returned once it holds its port. */
async function orphan(stateDir: string, name: string, argv: readonly string[], cwd: string, port: number): Promise<number> {
  const child = spawn(argv[0]!, argv.slice(1), { cwd, env: { ...process.env, ...markerEnv(stateDir, name) }, detached: true, stdio: "ignore" });
  child.unref();
  pids.push(child.pid!);
  await until(() => listening(port), 10_000);
  return child.pid!;
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

describe("runners without a record", () => {
  it("are found by their markers; the driver alone does not touch them; the stop a create starts with clears them (no port_in_use, no duplicate), and so does stop", async () => {
    const stateDir = mkdtempSync(join(tmpdir(), "hal0-orphan-"));
    const root = mkdtempSync(join(tmpdir(), "hal0-orphan-root-"));
    const view = viewFor({ port: await freePort(), root });
    const lost = await orphan(stateDir, "s", view.spec.argv, root, view.spec.port);
    expect((await markedRunners(stateDir, "s")).map((r) => r.pid)).toEqual([lost]);
    expect(await markedRunners(stateDir, "other")).toEqual([]);
    const driver = new ProcessDriver({ stateDir });
    // Drivers decide nothing: a start over a runner it did not clear is refused, and the runner is left as it is.
    await expect(driver.start("s", view, { healthTimeoutS: 10, cwd: root })).rejects.toMatchObject({ code: "slot.port_in_use" });
    expect(await alive(lost)).toBe(true);
    // The executor's create: stop (clears what is left under the name), then start.
    const create: Change = { address: "slot.s", kind: "slot", action: "create", reason: "not_running", changed_paths: [], before: null, after: view, apply_class: "immediate", destructive: false, downtime: false };
    const [result] = await executePlan({ changes: [create] }, { driver, state: new StateStore(stateDir), healthTimeoutS: 10, stopGraceS: 2, cwd: root });
    expect(result).toMatchObject({ ok: true });
    expect(await alive(lost)).toBe(false);
    const [runner] = await markedRunners(stateDir, "s");
    pids.push(runner!.pid);
    expect((await markedRunners(stateDir, "s")).map((r) => r.pid)).toEqual([runner!.pid]);
    await driver.stop("s", 2);
    const other = viewFor({ port: await freePort(), root });
    const again = await orphan(stateDir, "s", other.spec.argv, root, other.spec.port);
    await driver.stop("s", 2);
    expect(await alive(again)).toBe(false);
  });
});
