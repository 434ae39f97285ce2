import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { MAX_PLAN_BYTES } from "../../cli/apply-cmd.js";
import { boxCommand } from "./helpers.js";

/**
 * `hal0 apply --plan` reads at most MAX_PLAN_BYTES, from a file and from a pipe alike: more is plan.invalid, with
 * the same message, once that much was read (a pipe was read until node ran out of memory).
 */
const HAL0 = join(import.meta.dirname, "../../bin/hal0.js");
const MIB = 1024 * 1024;

describe("hal0 apply --plan of something too large", () => {
  let base: string;
  let config: string;
  let state: string;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), "hal0-plan-size-"));
    config = join(base, "box");
    state = join(base, "state");
    mkdirSync(config);
    writeFileSync(join(config, "hal0.toml"), "[meta]\nschema_version = 1\n");
  });

  it("a regular file past the bound is plan.invalid", async () => {
    const file = join(base, "big.json");
    writeFileSync(file, "");
    truncateSync(file, MAX_PLAN_BYTES + 1);
    const { code, err } = await boxCommand(config, state)("apply", "--plan", file, "--yes");
    expect(code).toBe(1);
    expect(err).toContain(`plan.invalid: ${file} holds more than ${MAX_PLAN_BYTES / MIB} MiB`);
  });

  it("a pipe that never ends is refused once the bound is read, not read whole", async () => {
    // Through cat, so hal0's stdin is a real pipe (node hands a child a socket), as a shell's `|` gives it.
    const hal0 = [process.execPath, HAL0, "apply", "--plan", "/dev/stdin", "--yes", "--config", config, "--state", state].map((a) => `'${a}'`).join(" ");
    const child = spawn("sh", ["-c", `cat | exec ${hal0}`], { stdio: ["pipe", "pipe", "pipe"] });
    let err = "";
    child.stderr.on("data", (c: Buffer) => (err += c.toString()));
    child.stdout.resume();
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    let done = false;
    void exited.then(() => (done = true));
    child.stdin.on("error", () => {}); // EPIPE once hal0 stops reading
    const chunk = Buffer.alloc(MIB, 0x20);
    let written = 0;
    // Up to three times the bound: a reader without one reads all of it and then finds no plan.
    while (!done && written < 3 * MAX_PLAN_BYTES) {
      const ok = child.stdin.write(chunk);
      written += chunk.length;
      if (!ok) await Promise.race([new Promise((resolve) => child.stdin.once("drain", resolve)), exited]);
    }
    child.stdin.end();
    const code = await exited;
    expect(code).toBe(1);
    expect(err).toContain(`plan.invalid: /dev/stdin holds more than ${MAX_PLAN_BYTES / MIB} MiB`);
    // Stopped at the bound: what it took is the bound and what the pipe held, not all that was offered.
    expect(written).toBeLessThan(2 * MAX_PLAN_BYTES);
  });
});
