import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireLock, LockedError } from "../../reconciler/lock.js";
import { procStat } from "../../reconciler/drivers/proc.js";

const children: number[] = [];
afterEach(() => {
  for (const pid of children.splice(0)) try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
});

function holderFile(dir: string, pid: number, pidStart: number | undefined) {
  writeFileSync(join(dir, "apply.lock"), JSON.stringify({ pid, pid_start: pidStart, host: hostname(), started_at: "2026-11-30T12:00:00.000Z", command: "hal0 apply --yes" }));
}

describe("apply lock", () => {
  it("names its holder and is released", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
    const release = await acquireLock(dir, "hal0 apply --yes");
    const held = JSON.parse(readFileSync(join(dir, "apply.lock"), "utf8"));
    expect(held).toMatchObject({ pid: process.pid, host: hostname(), command: "hal0 apply --yes" });
    await expect(acquireLock(dir, "hal0 apply")).rejects.toBeInstanceOf(LockedError);
    await release();
    await (await acquireLock(dir, "hal0 apply"))();
  });

  it("refuses fast while a live holder has it: apply.locked, naming pid and command", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
    const child = spawn("sleep", ["30"]);
    children.push(child.pid!);
    await new Promise((r) => setTimeout(r, 50));
    holderFile(dir, child.pid!, (await procStat(child.pid!))?.startTime);
    const t0 = Date.now();
    const err = await acquireLock(dir, "hal0 apply").catch((e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(500);
    expect(err).toBeInstanceOf(LockedError);
    expect((err as LockedError).code).toBe("apply.locked");
    expect((err as Error).message).toContain(`pid ${child.pid}`);
    expect((err as Error).message).toContain("hal0 apply --yes");
  });

  it("takes over the lock of a dead holder, and of a holder whose pid was reused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
    const dead = spawn("true");
    await new Promise((r) => dead.on("exit", r));
    holderFile(dir, dead.pid!, 12345);
    await (await acquireLock(dir, "hal0 apply"))();
    const reused = spawn("sleep", ["30"]);
    children.push(reused.pid!);
    holderFile(dir, reused.pid!, 1);
    const release = await acquireLock(dir, "hal0 apply");
    expect(JSON.parse(readFileSync(join(dir, "apply.lock"), "utf8")).pid).toBe(process.pid);
    await release();
  });
});
