import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { PROJECT } from "../reconciler/process-helpers.js";
import { captureIo, healthWithin, writeFakeBox } from "./helpers.js";

/**
 * `hal0 apply | head -1`: the reader of hal0's output goes away after the
 * first line. The apply goes on to its end (every slot up, the lock let go,
 * exit 0); before, the EPIPE ended the process half-way with a node trace.
 */
const SLOTS = ["oc-0", "oc-1", "oc-2"];
const base = mkdtempSync(join(tmpdir(), "hal0-epipe-"));
const config = join(base, "box");
const state = join(base, "state");

afterAll(async () => {
  await main(["down", "--config", config, "--state", state], captureIo());
});

/** Runs the built CLI with its stdout closed by the reader after the first chunk; its exit code and stderr. */
function runClosingAfterFirstChunk(args: string[]): Promise<{ code: number | null; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(PROJECT, "bin/hal0.js"), ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr.on("data", (c) => (err += c));
    child.stdout.once("data", () => child.stdout.destroy());
    child.on("close", (code) => resolve({ code, err }));
  });
}

describe("the reader of hal0's output goes away mid-command", () => {
  it("apply goes on to its end: exit 0, every slot healthy, no lock left, no trace; down the same", async () => {
    const ports = await writeFakeBox(config, SLOTS, { HAL0_FAKE_LOAD_MS: "400" });
    const applied = await runClosingAfterFirstChunk(["apply", "--yes", "--config", config, "--state", state]);
    expect(applied.err).not.toMatch(/EPIPE|Unhandled|internal error/);
    expect(applied.code, applied.err).toBe(0);
    expect(existsSync(join(state, "apply.lock"))).toBe(false);
    for (const port of ports) expect(await healthWithin(port, 5000)).toBe(200);

    const down = await runClosingAfterFirstChunk(["down", "--config", config, "--state", state]);
    expect(down.err).not.toMatch(/EPIPE|Unhandled|internal error/);
    expect(down.code, down.err).toBe(0);
    expect(existsSync(join(state, "apply.lock"))).toBe(false);
    for (const port of ports) expect(await healthWithin(port, 300)).not.toBe(200);
  }, 60_000);
});

/** Runs the built CLI with its stdout on /dev/full (every write: ENOSPC, as a full disk under `> FILE`); its exit code and stderr. */
function runOnFullDisk(args: string[]): Promise<{ code: number | null; err: string }> {
  const full = openSync("/dev/full", "w");
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(PROJECT, "bin/hal0.js"), ...args], { stdio: ["ignore", full, "pipe"] });
    closeSync(full);
    let err = "";
    child.stderr!.on("data", (c) => (err += c));
    child.on("close", (code) => resolve({ code, err }));
  });
}

describe("hal0's output cannot be written (a full disk under > FILE)", () => {
  it("the command ends, then fails: exit 1 and one system.io line on stderr, no trace", async () => {
    for (const args of [["version"], ["status", "--json", "--config", config, "--state", state]]) {
      const res = await runOnFullDisk(args);
      expect(res.err).toBe("hal0: system.io: could not write stdout: no space left on device (ENOSPC)\n");
      expect(res.code).toBe(1);
    }
  }, 30_000);
});
