import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { hostname } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/index.js";
import { startTestServer, type TestServer } from "./harness.js";

/**
 * Slot routes against a real runner: the fake llama-server of
 * fixtures/runner, started by the process runtime. The utility slot moves to
 * port 8177 first, so this file never contends with the CLI tests for the
 * box's own ports.
 */
let s: TestServer;
const PORT = 8177;

beforeAll(async () => {
  s = await startTestServer();
  cpSync(join(import.meta.dirname, "../../fixtures/runner"), join(s.config, "../runner"), { recursive: true });
  const moved = await s.call("PUT", "/api/slots/utility/config", { body: { port: PORT } });
  expect(moved.status).toBe(200);
});

afterAll(async () => {
  await new ProcessDriver({ stateDir: s.state }).stop("utility", 2);
  await s.close();
});

const runtimePid = (): number => JSON.parse(readFileSync(join(s.state, "slots", "utility", "runtime.json"), "utf8")).pid;

describe("slot restart and runtime reads", () => {
  it("starts a stopped slot, then restarts it as a new process; status, state, metrics and logs follow", async () => {
    const first = await s.call("POST", "/api/slots/utility/restart");
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body).toMatchObject({ name: "utility", action: "create", result: { ok: true, address: "slot.utility" } });
    const pid1 = runtimePid();

    const status = await s.call("GET", "/api/slots/utility");
    expect(status.body).toMatchObject({ status: "running", runtime: { running: true, health: "ok", pid: pid1, up_to_date: true } });
    expect((await s.call("GET", "/api/slots")).body.slots.find((x: any) => x.name === "utility").status).toBe("running");
    const state = await s.call("GET", "/api/slots/utility/state");
    expect(state.body).toMatchObject({ state: "ready", running: true, health: "ok", last_outcome: { ok: true, action: "create" } });
    expect(state.body.conditions.find((c: any) => c.type === "Ready")).toMatchObject({ status: "True" });
    const metrics = await s.call("GET", "/api/slots/metrics");
    expect(metrics.body.by_status.running).toBe(1);
    expect(metrics.body.running[0]).toMatchObject({ name: "utility", port: PORT, pid: pid1 });

    const again = await s.call("POST", "/api/slots/utility/restart");
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ action: "replace", result: { ok: true } });
    expect(runtimePid()).not.toBe(pid1);

    const logs = await s.call("GET", "/api/slots/utility/logs?lines=50");
    expect(logs.body.exists).toBe(true);
    expect(logs.body.lines.filter((l: string) => l.includes("hal0 starts:"))).toHaveLength(2);
  });

  it("refuses to restart a disabled slot (409 slot.illegal_transition) and while another apply holds the lock (409 apply.locked)", async () => {
    const disabled = await s.call("POST", "/api/slots/vision/restart");
    expect(disabled.status).toBe(409);
    expect(disabled.body.error.code).toBe("slot.illegal_transition");

    const lock = join(s.state, "apply.lock");
    writeFileSync(lock, JSON.stringify({ pid: process.pid, host: hostname(), started_at: new Date().toISOString(), command: "hal0 apply" }));
    const locked = await s.call("POST", "/api/slots/utility/restart");
    expect(locked.status).toBe(409);
    expect(locked.body.error).toMatchObject({ code: "apply.locked", details: { holder: { command: "hal0 apply" } } });
    expect(locked.body.error.message).toContain("hal0 apply");
    rmSync(lock);
  });

  it("the roster says why an enabled slot is not running (last_error, the failed step's code and first line) until a step on it succeeds", async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(PORT + 1, "127.0.0.1", resolve));
    try {
      expect((await s.call("PUT", "/api/slots/utility/config", { body: { port: PORT + 1 } })).status).toBe(200);
      // Running, and moved to a port a stranger holds: the restart is refused and the slot keeps serving where it is.
      const pid = runtimePid();
      const refused = await s.call("POST", "/api/slots/utility/restart");
      expect(refused.body.error, JSON.stringify(refused.body)).toMatchObject({ code: "slot.port_in_use" });
      expect(refused.body.error.message).toMatch(new RegExp(`^port ${PORT + 1} is held by pid ${process.pid}\\b.*keeps running as it is on port ${PORT} until it is freed$`));
      expect(runtimePid()).toBe(pid);
      expect(process.kill(pid, 0)).toBe(true);
      // Not running (its runner killed): the restart's start fails on the port, and the roster says why.
      process.kill(pid, "SIGKILL");
      await new Promise((resolve) => setTimeout(resolve, 300));
      const failed = await s.call("POST", "/api/slots/utility/restart");
      expect(failed.body.error, JSON.stringify(failed.body)).toMatchObject({ code: "slot.port_in_use", details: { step: { ok: false } } });
      const line = (await s.call("GET", "/api/slots")).body.slots.find((x: any) => x.name === "utility");
      expect(line).toMatchObject({ status: "stopped", last_error: { code: "slot.port_in_use" } });
      expect(line.last_error.message).toContain(`port ${PORT + 1} is already in use`);
      expect(line.last_error.message).not.toContain("\n");
      expect((await s.call("GET", "/api/slots")).body.slots.find((x: any) => x.name === "vision").last_error).toBeNull();
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
    expect((await s.call("POST", "/api/slots/utility/restart")).body.result).toMatchObject({ ok: true });
    // The roster is read again past its liveness window.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await s.call("GET", "/api/slots")).body.slots.find((x: any) => x.name === "utility")).toMatchObject({ status: "running", last_error: null });
  });
});
