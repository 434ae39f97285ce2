import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { capRunnerLog } from "../../reconciler/drivers/runtime-record.js";
import { freePort, viewFor } from "./process-helpers.js";

/**
 * A start whose record cannot be written (the state folder's disk is full):
 * the start fails with the system's reason, and the runner it spawned is
 * stopped — never left running with no record, which nothing would stop.
 * On a real tmpfs, filled up.
 */
const base = mkdtempSync(join(tmpdir(), "hal0-full-disk-"));
const mount = join(base, "tiny");
mkdirSync(mount);
execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", mount]);

afterAll(async () => {
  for (const r of await markedRunners(join(mount, "state"), "full")) process.kill(r.pid, "SIGKILL");
  execFileSync("umount", ["-l", mount]);
  rmSync(base, { recursive: true, force: true });
});

describe("the process runtime on a full disk", () => {
  it("a start whose record cannot be written fails with ENOSPC and stops the runner it spawned", async () => {
    const stateDir = join(mount, "state");
    mkdirSync(join(stateDir, "slots", "full"), { recursive: true });
    // Fill the tmpfs but one page (4 KiB): room for the log's first line, none for the record.
    writeFileSync(join(mount, "fill"), Buffer.alloc(60 * 1024));
    const driver = new ProcessDriver({ stateDir });
    const root = mkdtempSync(join(base, "root-"));
    const view = viewFor({ port: await freePort(), root });
    const err = await driver.start("full", view, { healthTimeoutS: 10, cwd: root }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "ENOSPC", path: join(stateDir, "slots", "full", "runtime.json") });
    // The message (a step's slot.apply_failed shows it) names the file, not only "no space left on device, write".
    expect((err as Error).message).toBe(`ENOSPC: no space left on device, write '${join(stateDir, "slots", "full", "runtime.json")}'`);
    expect(await markedRunners(stateDir, "full")).toEqual([]);
    expect(readdirSync(join(stateDir, "slots", "full")).filter((f) => f.startsWith("."))).toEqual([]);
  });
  it("a runner's log over its cap on a disk it filled is cut all the same, its newest lines kept in runner.log.1 (no room for a copy)", async () => {
    const disk = join(base, "log-disk");
    mkdirSync(disk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", disk]);
    try {
      const log = join(disk, "runner.log");
      const lines = Array.from({ length: 20_000 }, (_, i) => `srv  log line ${String(i).padStart(8, "0")}: what a chatty runner says\n`);
      writeFileSync(log, lines.join(""));
      writeFileSync(join(disk, "runner.log.1"), "the log before\n");
      try {
        writeFileSync(join(disk, "filler"), Buffer.alloc(2 * 1024 * 1024));
      } catch (err) {
        expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
      }
      const cap = 512 * 1024;
      expect(statSync(log).size).toBeGreaterThan(cap);
      expect(await capRunnerLog(log, cap)).toBe(true);
      expect(statSync(log).size).toBe(0);
      const kept = readFileSync(`${log}.1`, "utf8");
      expect(kept.length).toBeLessThanOrEqual(cap);
      // The newest lines, from a whole line on.
      expect(kept.endsWith(lines.at(-1)!)).toBe(true);
      expect(lines).toContain(kept.slice(0, kept.indexOf("\n") + 1));
      const { bavail, bsize } = statfsSync(disk);
      expect(bavail * bsize).toBeGreaterThan(0);
    } finally {
      execFileSync("umount", ["-l", disk]);
    }
  });
});
