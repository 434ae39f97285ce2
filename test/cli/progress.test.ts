import { PassThrough } from "node:stream";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatResults, progressReporter } from "../../cli/progress.js";
import { main } from "../../cli/index.js";
import { captureIo } from "./helpers.js";

describe("apply progress", () => {
  it("on a TTY, rewrites one line per slot in place", () => {
    const io = captureIo();
    (io.stdout as { isTTY: boolean }).isTTY = true;
    const report = progressReporter(io);
    report({ address: "slot.chat", phase: "starting", elapsed_ms: 10 });
    report({ address: "slot.embed", phase: "starting", elapsed_ms: 20 });
    report({ address: "slot.chat", phase: "ready", elapsed_ms: 1500 });
    const frames = io.out().split(/\u001b\[\d+A/);
    expect(frames).toHaveLength(3);
    expect(frames[2]).toBe("\u001b[2Kslot.chat                ready       1.5s\n\u001b[2Kslot.embed               starting    0.0s\n");
  });

  it("otherwise, prints one plain line per event", () => {
    const io = captureIo();
    const report = progressReporter(io);
    report({ address: "slot.chat", phase: "failed", elapsed_ms: 250, message: "slot.port_in_use: port 8081 is in use" });
    expect(io.out()).toBe("slot.chat: failed (0.3s) slot.port_in_use: port 8081 is in use\n");
  });

  it("closes with counts and each failure", () => {
    expect(formatResults([
      { address: "slot.a", action: "create", ok: true, elapsed_ms: 1 },
      { address: "slot.b", action: "create", ok: false, code: "slot.health_failed", error: "no 200 within 5 s", elapsed_ms: 1 },
    ])).toBe("Apply finished with errors: 1 created, 0 replaced, 0 deleted, 0 updated, 1 failed.\n  ✗ slot.b (create): slot.health_failed: no 200 within 5 s");
  });

  it("a down's every step is a stop, said as such (its deletes leave the config alone)", () => {
    expect(formatResults([
      { address: "slot.a", action: "delete", ok: true, elapsed_ms: 1 },
      { address: "slot.b", action: "delete", ok: true, elapsed_ms: 1 },
    ], "down")).toBe("Down complete: 2 stopped, 0 failed.");
    expect(formatResults([
      { address: "slot.a", action: "delete", ok: true, elapsed_ms: 1 },
      { address: "slot.b", action: "delete", ok: false, code: "apply.interrupted", error: "not started: the apply was interrupted", elapsed_ms: 0 },
    ], "down")).toBe("Down interrupted: 1 stopped, 0 failed, 1 left to the next down.\n  - slot.b (delete): not started: the apply was interrupted");
  });
});

describe("apply asks before changing anything", () => {
  const box = () => {
    const state = mkdtempSync(join(tmpdir(), "hal0-ask-"));
    return ["--config", join(import.meta.dirname, "../../fixtures/box"), "--state", state];
  };

  it("refuses without --yes when nobody can answer (a usage error: exit 64)", async () => {
    const io = captureIo();
    expect(await main(["apply", ...box()], io)).toBe(64);
    expect(io.err()).toContain("pass --yes");
  });

  it("cancels on any answer but yes, changing nothing", async () => {
    const stdin = Object.assign(new PassThrough(), { isTTY: true });
    const io = { ...captureIo(), stdin };
    const args = box();
    setTimeout(() => stdin.write("no\n"), 50);
    expect(await main(["apply", ...args], io)).toBe(1);
    expect(io.out()).toContain("Apply cancelled.");
    const status = captureIo();
    await main(["status", "--json", ...args.slice(0, 4)], status);
    expect(JSON.parse(status.out()).slots.every((s: { state: string }) => s.state === "offline")).toBe(true);
  });

  it.each([
    ["Ctrl-D (the input ends; output piped, as `hal0 apply | tee log`)", false, (stdin: PassThrough) => stdin.end()],
    ["Ctrl-C on a terminal", true, (stdin: PassThrough) => stdin.write("\u0003")],
  ])("cancels on %s at the question: exit 1, the lock released", async (_what, tty, answer) => {
    const stdin = Object.assign(new PassThrough(), { isTTY: true });
    const io = { ...captureIo(), stdin };
    // A terminal: readline's raw mode, which takes Ctrl-C as a key rather than a signal (it follows resizes).
    if (tty) Object.assign(io.stdout, { isTTY: true, columns: 80, on: () => io.stdout, off: () => io.stdout, removeListener: () => io.stdout });
    const args = box();
    setTimeout(() => answer(stdin), 50);
    expect(await main(["apply", ...args], io)).toBe(1);
    expect(io.out()).toContain("Apply cancelled.");
    expect(existsSync(join(args[3]!, "apply.lock"))).toBe(false);
  });
});
