import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { alive } from "../reconciler/process-helpers.js";
import { boxCommand, writeFakeBox } from "./helpers.js";

/**
 * Two hal0 boxes on one host, on the process runtime: each its own config
 * and state folder. One box's commands never touch the other's runners, also
 * when one box is a copy of the other (`cp -a`, its runtime records with it).
 */
const base = mkdtempSync(join(tmpdir(), "hal0-two-boxes-"));
const states: string[] = [];

afterAll(async () => {
  for (const state of states) for (const r of await markedRunners(state, "tb")) process.kill(r.pid, "SIGKILL");
  rmSync(base, { recursive: true, force: true });
});

const recordedPid = (state: string): number => JSON.parse(readFileSync(join(state, "slots", "tb", "runtime.json"), "utf8")).pid;

describe("two boxes on one host (process runtime)", () => {
  it("a box copied with cp -a, state and all, does not take the original's runners: its status shows them not running, its down stops none", async () => {
    const original = { config: join(base, "a", "box"), state: join(base, "a", "state") };
    states.push(original.state);
    await writeFakeBox(original.config, ["tb"]);
    const a = boxCommand(original.config, original.state);
    expect((await a("apply", "--yes")).code).toBe(0);
    const pid = recordedPid(original.state);

    cpSync(join(base, "a"), join(base, "c"), { recursive: true, preserveTimestamps: true });
    const copy = { config: join(base, "c", "box"), state: join(base, "c", "state") };
    states.push(copy.state);
    expect(recordedPid(copy.state)).toBe(pid); // the copy's record names the original's runner
    const c = boxCommand(copy.config, copy.state);

    const status = await c("status", "tb");
    expect(status.out).toContain(`pid ${pid} is the runner of the state folder ${original.state}, not of this one`);
    expect(status.out).not.toMatch(/\bready\b/);

    const down = await c("down");
    expect(down.code, down.out + down.err).toBe(0);
    expect(await alive(pid)).toBe(true);
    const still = await a("status");
    expect(still.out).toMatch(new RegExp(`tb\\s+ready\\s+${pid}\\b`));

    expect((await a("down")).code).toBe(0);
    expect(await alive(pid)).toBe(false);
  });
});
