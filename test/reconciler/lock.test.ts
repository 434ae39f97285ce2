import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { acquireCommitLock, acquireLock, acquireLoopLock, acquirePullLock, acquireServeLock, CommitLockedError, LockedError, ServeLockedError } from "../../reconciler/lock.js";
import { procStat } from "../../reconciler/drivers/proc.js";

const children: number[] = [];
afterEach(() => {
  for (const pid of children.splice(0)) try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
});

function holderFile(dir: string, pid: number, pidStart: number | undefined) {
  writeFileSync(join(dir, "apply.lock"), JSON.stringify({ pid, pid_start: pidStart, host: hostname(), started_at: "2026-11-30T12:00:00.000Z", command: "hal0 apply --yes" }));
}

describe("a lock file that is a folder", () => {
  it("is system.io naming it and saying to remove it, for each lock; the folder and what it holds are left as they are", async () => {
    const takes: Record<string, (dir: string) => Promise<unknown>> = {
      "apply.lock": (dir) => acquireLock(dir, "hal0 apply"),
      "reconcile.lock": (dir) => acquireLoopLock(dir, "hal0 reconcile"),
      "pull.lock": (dir) => acquirePullLock(dir, "hal0 model pull"),
      "serve.lock": (dir) => acquireServeLock(dir),
      "commit.lock": (dir) => acquireCommitLock(dir, "a commit", 0),
    };
    for (const [file, take] of Object.entries(takes)) {
      const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
      const path = join(dir, file);
      mkdirSync(path);
      writeFileSync(join(path, "notes"), "mine");
      await expect(take(dir), file).rejects.toMatchObject({ code: "system.io", message: `cannot take the lock ${path}: a folder stands there, not a lock hal0 wrote; remove it (rmdir ${path}), then run the command again` });
      expect(statSync(path).isDirectory()).toBe(true);
      expect(readFileSync(join(path, "notes"), "utf8")).toBe("mine");
      expect(readdirSync(dir)).toEqual([file]);
    }
  });
});

describe("commit lock", () => {
  it("commits from several places at once take it one after the other, each waiting its turn; none is refused and no temp file stays", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
    const order: string[] = [];
    await Promise.all(Array.from({ length: 6 }, async (_, i) => {
      const release = await acquireCommitLock(dir, `commit #${i}`);
      order.push(`in ${i}`);
      expect(JSON.parse(readFileSync(join(dir, "commit.lock"), "utf8")).command).toBe(`commit #${i}`);
      await new Promise((r) => setTimeout(r, 30));
      order.push(`out ${i}`);
      await release();
    }));
    // Never two inside at once: each "in" is followed by its own "out".
    for (let i = 0; i < order.length; i += 2) expect(order[i + 1]).toBe(order[i]!.replace("in", "out"));
    expect(readdirSync(dir)).toEqual([]);
  });

  it("a holder that does not let go within the wait: config.locked, naming it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
    const release = await acquireCommitLock(dir, "hal0 model pull (registering)");
    const err = await acquireCommitLock(dir, "a commit", 100).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommitLockedError);
    expect(err).toMatchObject({ code: "config.locked", message: expect.stringContaining(`pid ${process.pid}`) });
    expect((err as Error).message).toContain("hal0 model pull (registering)");
    await release();
  });
});

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

  it("contenders at once: exactly one wins and the others are refused naming it (the lock is never found empty); no temp file stays", async () => {
    for (let round = 0; round < 5; round++) {
      const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
      const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => acquireLock(dir, `hal0 apply #${i}`)));
      const won = results.filter((r) => r.status === "fulfilled");
      expect(won).toHaveLength(1);
      for (const r of results) if (r.status === "rejected") expect(r.reason).toBeInstanceOf(LockedError);
      expect(readdirSync(dir)).toEqual(["apply.lock"]);
      await (won[0] as PromiseFulfilledResult<() => Promise<void>>).value();
      expect(readdirSync(dir)).toEqual([]);
    }
  });

  it("the serve lock is its own: held beside an apply's, refused with server.already_running naming the URL", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
    const serving = await acquireServeLock(dir);
    await serving.describe({ url: "http://127.0.0.1:8080/", reconcile: true });
    await (await acquireLock(dir, "hal0 apply"))();
    const err = await acquireServeLock(dir).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServeLockedError);
    expect((err as ServeLockedError).code).toBe("server.already_running");
    expect((err as Error).message).toContain(`pid ${process.pid} on ${hostname()} at http://127.0.0.1:8080/, since `);
    await serving.release();
    await (await acquireServeLock(dir)).release();
  });

  it("takes over a lock left by a hal0 of an earlier boot, though a process of this boot now has its pid and start time", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
    const stranger = spawn("sleep", ["30"]);
    children.push(stranger.pid!);
    await new Promise((r) => setTimeout(r, 50));
    const start = (await procStat(stranger.pid!))?.startTime;
    writeFileSync(join(dir, "apply.lock"), JSON.stringify({ pid: stranger.pid, pid_start: start, boot_id: "00000000-0000-4000-8000-000000000000", host: hostname(), started_at: "2026-11-30T12:00:00.000Z", command: "hal0 apply --yes" }));
    const release = await acquireLock(dir, "hal0 apply");
    const held = JSON.parse(readFileSync(join(dir, "apply.lock"), "utf8"));
    expect(held).toMatchObject({ pid: process.pid, boot_id: readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() });
    await release();
    // The same holder of this boot is live: refused.
    writeFileSync(join(dir, "apply.lock"), JSON.stringify({ pid: stranger.pid, pid_start: start, boot_id: held.boot_id, host: hostname(), started_at: "2026-11-30T12:00:00.000Z", command: "hal0 apply --yes" }));
    await expect(acquireLock(dir, "hal0 apply")).rejects.toBeInstanceOf(LockedError);
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

  it("a holder on another host is never taken over, and the refusal says how to free a lock whose hal0 is gone (a container since replaced)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-lock-"));
    const held = { pid: 1, pid_start: 1, host: "old-container", started_at: "2026-11-30T12:00:00.000Z" };
    writeFileSync(join(dir, "apply.lock"), JSON.stringify({ ...held, command: "hal0 apply --yes" }));
    writeFileSync(join(dir, "serve.lock"), JSON.stringify({ ...held, command: "hal0 serve" }));
    for (const [take, file] of [[() => acquireLock(dir, "hal0 apply"), "apply.lock"], [() => acquireServeLock(dir), "serve.lock"]] as const) {
      const err = await take().catch((e: unknown) => e);
      expect((err as Error).message).toContain(`pid 1 on old-container`);
      expect((err as Error).message).toContain(`hal0 cannot see the processes of old-container from ${hostname()}: if no hal0 runs there any more (a container or machine since replaced), remove ${join(dir, file)}`);
    }
  });
});
