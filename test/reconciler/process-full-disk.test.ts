import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
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
    expect(await markedRunners(stateDir, "full")).toEqual([]);
    expect(readdirSync(join(stateDir, "slots", "full")).filter((f) => f.startsWith("."))).toEqual([]);
  });
});
