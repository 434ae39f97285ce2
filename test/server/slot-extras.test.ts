import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer, type ServerResponse } from "node:http";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/index.js";
import { npuStatus } from "../../reconciler/host/probes.js";
import { StateStore } from "../../reconciler/state.js";
import { Sweeper, type SweepReport } from "../../reconciler/sweep.js";
import { AUTONOMOUS_READ_TOOLS, GATED_TOOLS } from "../../schema/data/seed-tiers.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";
import type { ResolvedSlot } from "../../compiler/index.js";
import type { ObservedSlot } from "../../reconciler/index.js";
import { ApiError } from "../../server/errors.js";
import { readRunner } from "../../server/runner-read.js";

/**
 * Slot extras on a served copy of the example box whose only enabled slots
 * are the NPU helper (npu-assist, FLM) and the speech slot (speech, Kokoro),
 * both run by the generic stand-in runner as real processes, brought up and
 * changed by a real sweep: a TTS slot's voices and the FLM runner's models
 * passed on from the runners, who holds the NPU, and the NPU backend's load
 * and unload as gated ChangeSets an agent asks for and an operator approves.
 */
const KEEP = new Set(["npu-assist", "npu-qwen", "speech"]);

let s: TestServer;
let dir: string;
let sweeper: Sweeper;
let last: SweepReport | undefined;
let agent: Client;

/** A port in the box's slot range (8081–8200) that nothing listens on now, not one of `taken`. */
async function freeInRange(taken: Set<number>): Promise<number> {
  const ports = Array.from({ length: 120 }, (_, i) => 8081 + i).filter((p) => !taken.has(p)).sort(() => Math.random() - 0.5);
  for (const port of ports) {
    const ok = await new Promise<boolean>((resolve) => {
      const srv = createServer().once("error", () => resolve(false)).listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
    });
    if (ok) {
      taken.add(port);
      return port;
    }
  }
  throw new Error("no free port in 8081-8200");
}

/** The example box with every slot but KEEP disabled, KEEP on free ports, Hermes in the temp folder. */
async function prepareBox(): Promise<string> {
  const box = join(dir, "box");
  cpSync(join(import.meta.dirname, "../../fixtures/box"), box, { recursive: true });
  const taken = new Set<number>();
  for (const f of readdirSync(join(box, "slots"))) {
    const name = f.slice(0, -".toml".length);
    const path = join(box, "slots", f);
    let text = readFileSync(path, "utf8");
    if (KEEP.has(name)) text = text.replace(/^port = \d+$/m, `port = ${await freeInRange(taken)}`);
    else text = text.replace(/^enabled = .*\n/m, "").replace(/^(?!#)/m, "enabled = false\n"); // a root key, before the first key or table
    writeFileSync(path, text);
  }
  writeFileSync(join(box, "hal0.toml"), `${readFileSync(join(box, "hal0.toml"), "utf8")}\n[hermes]\nhome = ${JSON.stringify(join(dir, "hermes"))}\n`);
  return box;
}

const sweep = async (): Promise<SweepReport> => (last = await sweeper.sweep());
const enabledIn = (name: string): boolean | undefined => {
  const m = /^enabled = (true|false)$/m.exec(readFileSync(join(s.config, `slots/${name}.toml`), "utf8"));
  return m ? m[1] === "true" : undefined;
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hal0-slot-extras-"));
  s = await startTestServer({ box: await prepareBox(), extra: { sweeps: () => ({ running: true, last }) } });
  // Wired to the server as `hal0 serve` wires its loop's: its observations and steps reach the liveness reads.
  sweeper = new Sweeper({
    root: s.config, state: new StateStore(s.state), driverFor: async () => new ProcessDriver({ stateDir: s.state }),
    onObserved: (model, slots, startedAt) => s.hal0.box.seedLiveness(model, slots, startedAt), onEvent: () => s.hal0.box.forgetLiveness(),
  });
  agent = await adminClient(s.url, "hermes__ops");
}, 60_000);

afterAll(async () => {
  await agent?.close();
  const driver = new ProcessDriver({ stateDir: s.state });
  for (const o of await driver.observe()) await driver.stop(o.name, 2).catch(() => undefined);
  await s.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("slot extras against the stand-in runners", () => {
  it("the read tools are autonomous reads of seed 001 and the NPU backend's load and unload are gated", () => {
    for (const tool of ["slot_voices", "flm_model_list", "npu_occupancy", "npu_swap_status"]) expect(AUTONOMOUS_READ_TOOLS.some((t) => t.tool === tool), tool).toBe(true);
    for (const tool of ["npu_backend_load", "npu_backend_unload"]) expect(GATED_TOOLS.some((t) => t.tool === tool), tool).toBe(true);
  });

  it("before anything runs: voices and FLM models are slot.not_ready (503), a slot that is not TTS is slot.wrong_type, an unknown one slot.not_found", async () => {
    const voices = await s.call("GET", "/api/slots/speech/voices");
    expect(voices.status).toBe(503);
    expect(voices.body.error).toMatchObject({ code: "slot.not_ready", details: { name: "speech", state: "stopped" } });
    const flm = await s.call("GET", "/api/slots/flm/models");
    expect(flm.status).toBe(503);
    expect(flm.body.error.code).toBe("slot.not_ready");
    expect(flm.body.error.details.slots).toEqual([{ name: "npu-assist", enabled: true }, { name: "npu-qwen", enabled: false }]);
    const wrong = await callTool(agent, "slot_voices", { name: "npu-assist" });
    expect(wrong.isError).toBe(true);
    expect(wrong.body.error).toMatchObject({ code: "slot.wrong_type", details: { name: "npu-assist", type: "llm", needed: "tts" } });
    const missing = await s.call("GET", "/api/slots/speach/voices");
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ code: "slot.not_found", details: { did_you_mean: "speech" } });
  });

  it("after a sweep: slot_voices over MCP (an agent, autonomous) passes on the TTS runner's voices; flm_model_list the FLM runner's models", async () => {
    const report = await sweep();
    expect(report.outcome, JSON.stringify(report.results)).toBe("converged");
    expect(report.results.filter((r) => r.address.startsWith("slot.")).map((r) => [r.address, r.ok]).sort()).toEqual([["slot.npu-assist", true], ["slot.speech", true]]);

    const voices = await callTool(agent, "slot_voices", { name: "speech" });
    expect(voices.isError, JSON.stringify(voices.body)).toBe(false);
    expect(voices.body).toMatchObject({ name: "speech", model: "kokoro-82m", default_voice: "af_heart" });
    expect(voices.body.voices).toEqual(expect.arrayContaining(["af_heart", "af_bella", "am_adam", "bf_emma"]));
    // Exactly what the runner itself says.
    const port = Number(/^port = (\d+)$/m.exec(readFileSync(join(s.config, "slots/speech.toml"), "utf8"))![1]);
    const direct = (await (await fetch(`http://127.0.0.1:${port}/v1/audio/voices`)).json()) as { voices: string[] };
    expect(voices.body.voices).toEqual(direct.voices);
    expect(voices.body.count).toBe(direct.voices.length);

    const flm = await callTool(agent, "flm_model_list", {});
    expect(flm.isError, JSON.stringify(flm.body)).toBe(false);
    expect(flm.body.models).toEqual([{ id: "llama3.2-1b-npu", object: "model", created: expect.any(Number), owned_by: "FastFlowLM", slot: "npu-assist" }]);
    expect(flm.body.slots).toEqual([
      { name: "npu-assist", model: "llama3.2-1b-npu", running: true, served: 1, error: null },
      { name: "npu-qwen", model: "qwen3-1.7b-npu", running: false, served: null, error: null },
    ]);
  });

  it("npu_occupancy: npu-assist holds the NPU and is the one the files want; the NPU's own facts are npu_status's; npu_swap_status is idle", async () => {
    const occ = await callTool(agent, "npu_occupancy", {});
    expect(occ.isError, JSON.stringify(occ.body)).toBe(false);
    expect(occ.body).toMatchObject({ holder: "npu-assist", running: ["npu-assist"], desired: "npu-assist" });
    expect(occ.body.npu).toEqual(await npuStatus());
    expect(occ.body.slots.map((x: any) => [x.name, x.status, x.state])).toEqual([["npu-assist", "running", "ready"], ["npu-qwen", "disabled", "offline"]]);
    const swap = await callTool(agent, "npu_swap_status", {});
    expect(swap.body).toMatchObject({ swapping: false, phase: "idle", holder: "npu-assist", desired: "npu-assist", stopping: [], starting: null, apply: null, pending_approvals: [] });
    expect(swap.body.last_sweep).toMatchObject({ outcome: "converged" });
  });

  it("enabling the second NPU llm slot beside the first is refused by the compiler: slot.npu_exclusivity_violation, through slot_load and a proposed plan; nothing written", async () => {
    const before = readFileSync(join(s.config, "slots/npu-qwen.toml"), "utf8");
    const load = await s.call("POST", "/api/slots/npu-qwen/load");
    expect(load.status).toBe(422);
    expect(load.body.error.code).toBe("config.invalid");
    expect(load.body.error.details.diagnostics.map((d: any) => d.code)).toContain("slot.npu_exclusivity_violation");
    const plan = await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/npu-qwen.toml", op: "set", path: ["enabled"], value: true }] } });
    expect(plan.status).toBe(201);
    expect(plan.body).toMatchObject({ valid: false, plan: null });
    expect(plan.body.diagnostics.find((d: any) => d.code === "slot.npu_exclusivity_violation")).toMatchObject({ severity: "error", file: "slots/npu-qwen.toml" });
    expect(readFileSync(join(s.config, "slots/npu-qwen.toml"), "utf8")).toBe(before);
  });

  it("npu_backend_load by an agent over MCP is pending approval with its effect lines; the operator approves; the files swap; the sweep moves the NPU to npu-qwen", async () => {
    const queued = await callTool(agent, "npu_backend_load", { slot: "npu-qwen" });
    expect(queued.body, JSON.stringify(queued.body)).toMatchObject({ status: "pending_approval" });
    expect(queued.body.effects).toEqual(expect.arrayContaining(["enables slot npu-qwen (it starts)", "disables slot npu-assist (it serves now: it stops)"]));
    expect([enabledIn("npu-assist"), enabledIn("npu-qwen")]).toEqual([undefined, false]);
    const waiting = await callTool(agent, "npu_swap_status", {});
    expect(waiting.body.pending_approvals).toEqual([expect.objectContaining({ id: queued.body.approval_id, tool: "npu_backend_load", caller: "hermes__ops" })]);
    expect(waiting.body.phase).toBe("idle");

    // The agent cannot approve its own request; the operator can.
    const own = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`, { as: "agent:hermes__ops" });
    expect(own.status).toBe(403);
    const approved = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
    expect(approved.body.approval.state, JSON.stringify(approved.body)).toBe("executed");
    expect(approved.body.approval.result).toMatchObject({ loaded: ["npu-qwen"], unloaded: ["npu-assist"], committed: true });
    expect([enabledIn("npu-assist"), enabledIn("npu-qwen")]).toEqual([false, true]);

    // Written, not yet swept: the old runner still holds the NPU, the new one is wanted.
    const mid = await s.call("GET", "/api/npu/swap-status");
    expect(mid.body).toMatchObject({ swapping: true, phase: "stopping", holder: "npu-assist", desired: "npu-qwen", stopping: ["npu-assist"], pending_approvals: [] });

    const report = await sweep();
    expect(report.outcome, JSON.stringify(report.results)).toBe("converged");
    const occ = await callTool(agent, "npu_occupancy", {});
    expect(occ.body).toMatchObject({ holder: "npu-qwen", running: ["npu-qwen"], desired: "npu-qwen" });
    expect(occ.body.slots.map((x: any) => [x.name, x.status, x.state])).toEqual([["npu-assist", "disabled", "offline"], ["npu-qwen", "running", "ready"]]);
    expect((await callTool(agent, "npu_swap_status", {})).body).toMatchObject({ swapping: false, phase: "idle", holder: "npu-qwen" });
    expect((await callTool(agent, "flm_model_list", {})).body.models.map((m: any) => [m.id, m.slot])).toEqual([["qwen3-1.7b-npu", "npu-qwen"]]);
  }, 30_000);

  it("npu_backend_unload disables the loaded slot (npu.idle when none is); a load by model finds its NPU slot; bad bodies are coded", async () => {
    const unload = await s.call("POST", "/api/backends/npu/unload");
    expect(unload.status, JSON.stringify(unload.body)).toBe(200);
    expect(unload.body).toMatchObject({ loaded: [], unloaded: ["npu-qwen"], committed: true });
    expect(enabledIn("npu-qwen")).toBe(false);
    const idle = await s.call("POST", "/api/backends/npu/unload");
    expect(idle.status).toBe(409);
    expect(idle.body.error).toMatchObject({ code: "npu.idle", details: { npu_slots: ["npu-assist", "npu-qwen"] } });

    const unloadByAgent = await callTool(agent, "npu_backend_unload", {});
    expect([unloadByAgent.isError, unloadByAgent.body.error?.code]).toEqual([true, "npu.idle"]); // refused before anyone sees a card

    const byModel = await s.call("POST", "/api/backends/npu/load", { body: { model: "llama3.2-1b-npu" } });
    expect(byModel.status, JSON.stringify(byModel.body)).toBe(200);
    expect(byModel.body).toMatchObject({ loaded: ["npu-assist"], unloaded: [] });
    expect([enabledIn("npu-assist"), enabledIn("npu-qwen")]).toEqual([true, false]);

    const cases: Array<[unknown, number, string]> = [
      [{ model: "qwen2.5-coder-0.5b" }, 404, "npu.no_slot"],
      [{ slot: "speech" }, 409, "slot.wrong_type"],
      [{ slot: "nope" }, 404, "slot.not_found"],
      [{ slot: "npu-qwen", model: "qwen3-1.7b-npu" }, 422, "validation.invalid"],
      [{}, 422, "validation.invalid"],
    ];
    for (const [body, status, code] of cases) {
      const r = await s.call("POST", "/api/backends/npu/load", { body });
      expect([r.status, r.body.error?.code], JSON.stringify(body)).toEqual([status, code]);
    }
    const swept = await sweep();
    expect(swept.outcome, JSON.stringify(swept.results)).toBe("converged");
    expect((await s.call("GET", "/api/npu/occupancy")).body).toMatchObject({ holder: "npu-assist", desired: "npu-assist" });
  }, 30_000);

  it("a TTS slot whose runner has no voices endpoint (llama-server's stand-in answers 404) is slot.runner_error (502) with the runner's status", async () => {
    const port = await freeInRange(new Set());
    const made = await s.call("POST", "/api/slots", { body: { name: "voice2", profile: "cpu-small", model: "kokoro-82m", type: "tts", port, placement: { device: "cpu" } } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const report = await sweep();
    expect(report.results.find((r) => r.address === "slot.voice2"), JSON.stringify(report.results)).toMatchObject({ ok: true });
    const r = await s.call("GET", "/api/slots/voice2/voices");
    expect(r.status).toBe(502);
    expect(r.body.error).toMatchObject({ code: "slot.runner_error", details: { name: "voice2", path: "/v1/audio/voices", status: 404 } });
  }, 30_000);

  it("a swap whose new runner cannot start leaves npu_swap_status failed, with nobody holding the NPU", async () => {
    rmSync(join(s.config, "models/flm/qwen3-1.7b-npu2.q4nx")); // the stand-in, like the real runner, exits when its model file is missing
    const load = await s.call("POST", "/api/backends/npu/load", { body: { slot: "npu-qwen" } });
    expect(load.body, JSON.stringify(load.body)).toMatchObject({ loaded: ["npu-qwen"], unloaded: ["npu-assist"], committed: true });
    const report = await sweep();
    expect(report.results.find((r) => r.address === "slot.npu-qwen"), JSON.stringify(report.results)).toMatchObject({ ok: false });
    const swap = await s.call("GET", "/api/npu/swap-status");
    expect(swap.body).toMatchObject({ swapping: false, phase: "failed", holder: null, desired: "npu-qwen", stopping: [], starting: null });
    expect(swap.body.slots.find((x: any) => x.name === "npu-qwen")).toMatchObject({ status: "stopped", state: "error" });
  }, 30_000);
});

describe("a read passed on to a runner that fails mid-reply", () => {
  /** A loopback HTTP server standing in for a runner, answering every request with `answer`. */
  async function runnerAt(answer: (res: ServerResponse) => void): Promise<{ slot: ResolvedSlot; close: () => Promise<void> }> {
    const srv = createHttpServer((_req, res) => answer(res));
    await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
    const port = (srv.address() as AddressInfo).port;
    const slot = { name: "voice9", enabled: true, spec: { host: "127.0.0.1", port, argv: [] } } as unknown as ResolvedSlot;
    return { slot, close: () => new Promise((resolve) => { srv.closeAllConnections(); srv.close(() => resolve()); }) };
  }
  const running = { name: "voice9", running: true } as unknown as ObservedSlot;
  const readFrom = (slot: ResolvedSlot) => readRunner(slot, running, "/v1/audio/voices").then(() => undefined, (err: unknown) => err);

  it("headers then silence: slot.runner_error (timeout) within the read's 3 s, never an uncoded error", async () => {
    const r = await runnerAt((res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"voices": [');
    });
    try {
      const started = Date.now();
      const err = await readFrom(r.slot);
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ code: "slot.runner_error", details: { name: "voice9", path: "/v1/audio/voices", status: 200, reason: "timeout" } });
      expect(Date.now() - started).toBeLessThan(4500);
    } finally {
      await r.close();
    }
  }, 15_000);

  it("a runner that dies mid-reply, or sends more than a list's worth: slot.runner_error with the reason", async () => {
    const cut = await runnerAt((res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
      res.write('{"voices": [', () => res.destroy());
    });
    try {
      expect(await readFrom(cut.slot)).toMatchObject({ code: "slot.runner_error", details: { status: 200 } });
    } finally {
      await cut.close();
    }
    const big = await runnerAt((res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      const more = (n: number): void => void (n > 0 && !res.destroyed ? res.write(chunk, () => more(n - 1)) : res.end());
      more(16);
    });
    try {
      expect(await readFrom(big.slot)).toMatchObject({ code: "slot.runner_error", details: { status: 200, reason: "too_large" } });
    } finally {
      await big.close();
    }
  }, 15_000);
});
