import { spawn, type ChildProcess } from "node:child_process";
import { getEventListeners } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { compile, loadTree } from "../../compiler/index.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { executePlan } from "../../reconciler/execute.js";
import { waitHealthy } from "../../reconciler/drivers/runner.js";
import { observe } from "../../reconciler/observe.js";
import { planChanges } from "../../reconciler/plan.js";
import { StateStore } from "../../reconciler/state.js";
import { alive, PROJECT } from "../reconciler/process-helpers.js";
import { captureIo, startServe, writeFakeBox } from "./helpers.js";

/**
 * Ctrl-C (SIGINT) or SIGTERM while `hal0 apply` runs: the first ends the
 * wait for /health and starts nothing more, leaves the runners started
 * running and recorded, releases the lock and prints the summary (exit 1);
 * a second ends hal0 at once, by the signal.
 */
const HAL0 = join(PROJECT, "bin/hal0.cjs");
const SLOTS = ["int-a", "int-b", "int-c"];
const boxes: Array<{ config: string; state: string }> = [];

afterEach(async () => {
  for (const { config, state } of boxes.splice(0)) {
    await main(["down", "--config", config, "--state", state], captureIo());
    for (const name of SLOTS) for (const r of await markedRunners(state, name)) process.kill(r.pid, "SIGKILL");
  }
});

async function slowBox(): Promise<{ config: string; state: string; ports: number[] }> {
  const base = mkdtempSync(join(tmpdir(), "hal0-interrupt-"));
  const box = { config: join(base, "box"), state: join(base, "state") };
  const ports = await writeFakeBox(box.config, SLOTS, { HAL0_FAKE_LOAD_MS: "25000" }); // loads for 25 s, within health_timeout_s = 30
  boxes.push(box);
  return { ...box, ports };
}

/**
 * `hal0 apply --yes` as its own process: the first of `signals` sent once
 * `ready(stdout)` (by default: every slot is warming), each next one once
 * hal0 has said it took the one before; resolves with how it ended.
 */
function applyInterrupted(box: { config: string; state: string }, signals: NodeJS.Signals[], ready = (out: string) => SLOTS.every((s) => out.includes(`slot.${s}: warming`))): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string; ms: number }> {
  const child = spawn(process.execPath, [HAL0, "apply", "--yes", "--config", box.config, "--state", box.state], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  let sentAt = 0;
  let sent = 0;
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
    if (sent === 0 && ready(out)) {
      sentAt = Date.now();
      child.kill(signals[sent++]);
    }
  });
  child.stderr.on("data", (d: Buffer) => {
    err += d.toString();
    // Signals are not queued: the next one goes once hal0 has taken the one before.
    if (sent > 0 && sent < signals.length && err.includes("no further step starts")) child.kill(signals[sent++]);
  });
  return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal, out, err, ms: Date.now() - sentAt })));
}

describe("hal0 apply interrupted", () => {
  it("the first SIGINT ends the wait for /health: the runners stay running and in the inventory, no outcome is recorded, the lock is released, exit 1 with the summary", async () => {
    const box = await slowBox();
    // An earlier apply's failure of int-a (its port was held then): the runner started now is another attempt.
    mkdirSync(box.state, { recursive: true, mode: 0o700 });
    writeFileSync(join(box.state, "outcomes.json"), JSON.stringify({ "int-a": { ok: false, action: "create", code: "slot.port_in_use", error: "port held by pid 1", at: "2026-01-01T00:00:00.000Z" } }));
    const ended = await applyInterrupted(box, ["SIGINT"]);
    expect(ended, ended.err).toMatchObject({ code: 1, signal: null });
    expect(ended.ms).toBeLessThan(10_000); // not the 25 s load
    expect(ended.err).toContain("SIGINT: no further step starts");
    expect(ended.out).toContain("Apply interrupted: 0 created, 0 replaced, 0 deleted, 0 updated, 0 failed, 4 left to the next apply.");
    expect(ended.out).toMatch(/- slot\.int-a \(create\): slot int-a: the apply was interrupted while it waited for GET \/health on port \d+; pid \d+ is left running/);
    expect(ended.out).toContain("- settings (update): not started: the apply was interrupted");
    // Each step left to the next apply says so as it ends: interrupted, not failed.
    expect(ended.out).toMatch(/^slot\.int-a: interrupted \(\d+\.\ds\) apply\.interrupted: /m);
    expect(ended.out).not.toMatch(/: failed \(/);
    expect(existsSync(join(box.state, "apply.lock"))).toBe(false);
    const inventory = JSON.parse(readFileSync(join(box.state, "inventory.json"), "utf8"));
    expect(Object.keys(inventory.slots).sort()).toEqual(SLOTS);
    for (const name of SLOTS) {
      const runners = await markedRunners(box.state, name);
      expect(runners).toHaveLength(1);
      expect(await alive(runners[0]!.pid)).toBe(true);
    }
    // No outcome is recorded for the steps left, and int-a's earlier failure is gone: it described no runner that runs now
    // (kept, the slot stayed Degraded slot.port_in_use once healthy, as no later no-op records anything).
    const outcomes = existsSync(join(box.state, "outcomes.json")) ? JSON.parse(readFileSync(join(box.state, "outcomes.json"), "utf8")) : {};
    expect(Object.keys(outcomes)).toEqual([]);
    const status = captureIo();
    expect(await main(["status", "int-a", "--json", "--config", box.config, "--state", box.state], status)).toBe(0);
    expect(JSON.parse(status.out()).slot).toMatchObject({ last_error: null, conditions: expect.arrayContaining([expect.objectContaining({ type: "Degraded", status: "False" })]) });
    // The next plan sees the runners as started (nothing to create); only the settings step is left.
    const io = captureIo();
    expect(await main(["plan", "--config", box.config, "--state", box.state], io)).toBe(0);
    expect(io.out()).toContain("Plan: 0 to create, 1 to update, 0 to replace, 0 to delete, 3 unchanged.");
  }, 60_000);

  it("a replace interrupted in its wait for /health leaves the inventory naming the spec it started: a later config edit is a spec change, not drift (drift = \"warn\" applies it)", async () => {
    const base = mkdtempSync(join(tmpdir(), "hal0-interrupt-"));
    const box = { config: join(base, "box"), state: join(base, "state") };
    boxes.push(box);
    await writeFakeBox(box.config, SLOTS, { HAL0_FAKE_LOAD_MS: "100" });
    writeFileSync(join(box.config, "hal0.toml"), `${readFileSync(join(box.config, "hal0.toml"), "utf8")}[reconcile]\ndrift = "warn"\n`);
    expect(await main(["apply", "--yes", "--config", box.config, "--state", box.state], captureIo())).toBe(0);
    const load = (from: string, to: string) => {
      for (const name of SLOTS) {
        const file = join(box.config, "slots", `${name}.toml`);
        writeFileSync(file, readFileSync(file, "utf8").replace(`HAL0_FAKE_LOAD_MS = "${from}"`, `HAL0_FAKE_LOAD_MS = "${to}"`));
      }
    };
    load("100", "25000");
    const ended = await applyInterrupted(box, ["SIGINT"]);
    expect(ended.out).toContain("3 left to the next apply");
    load("25000", "200"); // a person's edit, after the interrupted apply
    const io = captureIo();
    expect(await main(["plan", "--json", "--config", box.config, "--state", box.state], io)).toBe(0);
    const plan = JSON.parse(io.out());
    expect(plan.changes.filter((c: { kind: string }) => c.kind === "slot").map((c: { address: string; action: string; reason: string }) => `${c.address} ${c.action} ${c.reason}`))
      .toEqual(SLOTS.map((s) => `slot.${s} replace spec_changed`));
    expect(plan.warnings.filter((w: { code: string }) => w.code === "slot.drifted")).toEqual([]);
  }, 60_000);

  it("a second signal ends hal0 at once, by that signal (here while a stop waits out its grace); down then stops what is left", async () => {
    const base = mkdtempSync(join(tmpdir(), "hal0-interrupt-"));
    const box = { config: join(base, "box"), state: join(base, "state") };
    boxes.push(box);
    // Runners that ignore SIGTERM: each stop waits out stop_grace_s (2 s) before its SIGKILL.
    await writeFakeBox(box.config, SLOTS, { HAL0_FAKE_IGNORE_SIGTERM: "1", HAL0_FAKE_LOAD_MS: "100" });
    expect(await main(["apply", "--yes", "--config", box.config, "--state", box.state], captureIo())).toBe(0);
    for (const name of SLOTS) {
      const file = join(box.config, "slots", `${name}.toml`);
      writeFileSync(file, readFileSync(file, "utf8").replace('HAL0_FAKE_LOAD_MS = "100"', 'HAL0_FAKE_LOAD_MS = "101"'));
    }
    const ended = await applyInterrupted(box, ["SIGINT", "SIGINT"], (out) => SLOTS.every((s) => out.includes(`slot.${s}: stopping`)));
    expect(ended.err).toContain("SIGINT: no further step starts");
    expect(ended).toMatchObject({ code: null, signal: "SIGINT" });
    expect(ended.out).not.toContain("Apply interrupted");
    expect(await main(["down", "--config", box.config, "--state", box.state], captureIo())).toBe(0);
    for (const name of SLOTS) expect(await markedRunners(box.state, name)).toEqual([]);
  }, 60_000);

  it("executePlan under an aborted signal starts nothing and records nothing", async () => {
    const box = await slowBox();
    const model = compile((await loadTree(box.config)).tree).model!;
    const state = new StateStore(box.state);
    const driver = new ProcessDriver({ stateDir: state.dir });
    const { observed, inventory } = await observe(model, driver, state);
    const plan = planChanges(model, observed, inventory);
    const controller = new AbortController();
    controller.abort();
    const results = await executePlan(plan, { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: box.config, signal: controller.signal });
    expect(results.map((r) => `${r.address} ${r.ok} ${r.code} ${r.error}`)).toEqual([
      "settings false apply.interrupted not started: the apply was interrupted",
      ...SLOTS.map((s) => `slot.${s} false apply.interrupted not started: the apply was interrupted`),
    ]);
    for (const name of SLOTS) expect(await markedRunners(box.state, name)).toEqual([]);
    expect(existsSync(join(box.state, "outcomes.json"))).toBe(false);
    expect(existsSync(join(box.state, "inventory.json"))).toBe(false);
  });
});

/** Resolves once every slot's runner answers /health 503 (loading), i.e. the sweep waits for them. */
async function allWarming(ports: readonly number[]): Promise<void> {
  const end = Date.now() + 20_000;
  while (Date.now() < end) {
    const statuses = await Promise.all(ports.map((p) => fetch(`http://127.0.0.1:${p}/health`).then((r) => r.status, () => 0)));
    if (statuses.every((st) => st === 503)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("the runners never came up");
}

const exitOf = (child: ChildProcess) => new Promise<{ code: number | null; ms: number }>((resolve) => {
  const t0 = Date.now();
  child.once("exit", (code) => resolve({ code, ms: Date.now() - t0 }));
});

describe("a stopping server or sweep loop does not wait out a model load", () => {
  it("hal0 serve told to stop mid-sweep ends the sweep's wait for /health: exit 0 in seconds, not the 25 s load; the runners stay running, for the next sweep", async () => {
    const { ports, ...box } = await slowBox();
    const { child, lines } = await startServe(box.config, box.state);
    await allWarming(ports);
    const exited = exitOf(child);
    child.kill("SIGTERM");
    const ended = await exited;
    expect(ended.code).toBe(0);
    expect(ended.ms).toBeLessThan(10_000);
    expect(lines().find((l) => l.msg === "sweep")).toMatchObject({ sweep: "interrupted" });
    for (const name of SLOTS) expect(await markedRunners(box.state, name)).toHaveLength(1);
    expect(existsSync(join(box.state, "apply.lock"))).toBe(false);
  }, 60_000);

  it("a slot restart in flight when hal0 serve stops answers 409 apply.interrupted at once, its runner left running; the server exits 0", async () => {
    const box = await slowBox();
    const { child, url } = await startServe(box.config, box.state, ["--no-reconcile"]);
    const token = readFileSync(join(box.state, "operator.token"), "utf8").trim();
    const restart = fetch(`${url}/api/slots/int-a/restart`, { method: "POST", headers: { authorization: `Bearer ${token}` } })
      .then(async (r) => ({ status: r.status, body: (await r.json()) as { error: { code: string; message: string } } }));
    await allWarming(box.ports.slice(0, 1));
    const exited = exitOf(child);
    child.kill("SIGTERM");
    const reply = await restart;
    expect(reply.status).toBe(409);
    expect(reply.body.error.code).toBe("apply.interrupted");
    expect(reply.body.error.message).toMatch(/interrupted while it waited for GET \/health on port \d+; pid \d+ is left running/);
    const ended = await exited;
    expect(ended.code).toBe(0);
    expect(ended.ms).toBeLessThan(10_000);
    expect(await markedRunners(box.state, "int-a")).toHaveLength(1);
  }, 60_000);

  it("hal0 reconcile --once takes SIGINT as hal0 apply does: the sweep reports `interrupted`, exit 1", async () => {
    const { ports, ...box } = await slowBox();
    const child = spawn(process.execPath, [HAL0, "reconcile", "--once", "--json", "--config", box.config, "--state", box.state], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    const exited = exitOf(child);
    await allWarming(ports);
    child.kill("SIGINT");
    const ended = await exited;
    expect(ended.code).toBe(1);
    expect(ended.ms).toBeLessThan(10_000);
    const report = JSON.parse(out);
    expect(report.outcome).toBe("interrupted");
    expect(report.results.filter((r: { code?: string }) => r.code === "apply.interrupted")).toHaveLength(SLOTS.length + 1);
  }, 60_000);
});

describe("the loop's signal outlives every wait", () => {
  it("a wait for /health that ends takes its abort listener off the signal (a serve's loop sees every start of every sweep)", async () => {
    const server = createServer((_req, res) => res.writeHead(200).end("{}"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    const loop = new AbortController();
    try {
      for (let i = 0; i < 20; i++) {
        expect(await waitHealthy(port, "/health", { exited: new Promise(() => undefined) }, 5000, undefined, loop.signal)).toEqual({ kind: "ready" });
      }
      expect(getEventListeners(loop.signal, "abort")).toHaveLength(0);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe("a command's signal carries one listener per wait under way", () => {
  it("hal0 apply of 14 slots whose waits for /health overlap prints no MaxListenersExceededWarning (a wait holds no place in [slots] parallel)", async () => {
    const base = mkdtempSync(join(tmpdir(), "hal0-interrupt-many-"));
    const box = { config: join(base, "box"), state: join(base, "state") };
    const names = Array.from({ length: 14 }, (_, i) => `many-${i}`);
    await writeFakeBox(box.config, names, { HAL0_FAKE_LOAD_MS: "3000" }); // every start's wait is under way at once
    boxes.push(box);
    const child = spawn(process.execPath, [HAL0, "apply", "--yes", "--config", box.config, "--state", box.state], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const code = await new Promise((resolve) => child.once("exit", resolve));
    expect(code, err).toBe(0);
    expect(out).toContain("Apply complete: 14 created");
    expect(err).not.toContain("MaxListenersExceededWarning");
  }, 60_000);
});
