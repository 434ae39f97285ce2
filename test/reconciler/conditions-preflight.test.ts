import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { slotConditions, type ResourceConditions } from "../../reconciler/conditions.js";
import { sharedPreflight } from "../../reconciler/conditions-store.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import type { ObservedSlot, SlotView } from "../../reconciler/index.js";
import type { Finding } from "../../reconciler/preflight.js";
import { StateStore } from "../../reconciler/state.js";
import { Sweeper } from "../../reconciler/sweep.js";
import { freePort, RUNNER } from "./process-helpers.js";

/** The preflight's findings (a runner not found, a model file missing) as slot conditions: Stalled, never a change to the plan. */
const MODEL = join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");
const byType = (r: ResourceConditions) => Object.fromEntries(r.conditions.map((c) => [c.type, `${c.status} ${c.reason}`]));
const finding = (code: Finding["code"], summary: string, problem: Finding["problem"] = code.slice("slot.".length) as Finding["problem"]): Finding => ({
  code, problem, severity: "warning", summary, detail: "", file: "models.toml", line: null, column: null, path: [], related: [], slot: "chat", subject: "model", target: "/m.gguf",
});

describe("slot conditions from the preflight", () => {
  const missing = finding("slot.model_missing", "the model file of slot chat does not exist: /m.gguf");

  it("Stalled True (ModelMissing, naming the path) for a slot that would start; the first finding gives the reason", () => {
    const c = slotConditions({ desiredHash: "h1", preflight: [missing, finding("slot.runner_missing", "the runner `x` of slot chat is not on PATH nor in hal0's bin/", "runner_not_found")] }, undefined, "T1");
    expect(byType(c)).toEqual({ Ready: "False NotRunning", Reconciling: "True ChangePending", Stalled: "True ModelMissing", Degraded: "False AsExpected" });
    expect(c.conditions.find((x) => x.type === "Stalled")!.message).toBe("the model file of slot chat does not exist: /m.gguf; the runner `x` of slot chat is not on PATH nor in hal0's bin/ — hal0 apply would fail until it is fixed");
    // It wins over the terminal outcome the failed start left: it says why.
    const outcome = { ok: false, action: "create", code: "slot.spawn_failed", error: "spawn ENOENT", at: "t" };
    expect(byType(slotConditions({ desiredHash: "h1", outcome, preflight: [missing] }, undefined, "T1"))).toMatchObject({ Stalled: "True ModelMissing", Degraded: "True slot.spawn_failed" });
  });

  it("a slot that runs the desired spec anyway is Degraded (a restart would fail), not Stalled; a disabled one neither", () => {
    const running: ObservedSlot = { name: "chat", running: true, health: "ok", record: { view: { spec_hash: "h1" } as unknown as SlotView, pid: 10, started_at: "t" } };
    expect(byType(slotConditions({ desiredHash: "h1", seen: running, preflight: [missing] }, undefined, "T1"))).toEqual({
      Ready: "True Healthy", Reconciling: "False Converged", Stalled: "False Progressing", Degraded: "True ModelMissing",
    });
    expect(byType(slotConditions({ preflight: [missing] }, undefined, "T1"))).toMatchObject({ Stalled: "False Progressing", Degraded: "False AsExpected" });
  });

  it("slot.runner_missing: the reason says which (RunnerNotFound, RunnerNotExecutable), by the finding's problem", () => {
    const notExec = finding("slot.runner_missing", "the runner `./run` of slot chat is not executable: /x/run", "runner_not_executable");
    expect(byType(slotConditions({ desiredHash: "h1", preflight: [notExec] }, undefined, "T1"))).toMatchObject({ Stalled: "True RunnerNotExecutable" });
    const notFound = finding("slot.runner_missing", "the runner `x` of slot chat is not on PATH nor in hal0's bin/", "runner_not_found");
    expect(byType(slotConditions({ desiredHash: "h1", preflight: [notFound] }, undefined, "T1"))).toMatchObject({ Stalled: "True RunnerNotFound" });
  });

  it("advisory findings (ctx above the training context, a models.toml fact the header contradicts) make a slot neither Stalled nor Degraded", () => {
    const ctx = finding("slot.ctx_exceeds_training", "slot chat asks ctx_size 40960 > the model's training context 8192 (n_ctx_train in /m.gguf)");
    const fact = finding("slot.model_fact_mismatch", "models.toml says context_length = 131072 for model `tiny` (slot chat), but its GGUF header says 8192 (llama.context_length in /m.gguf)");
    expect(ctx.problem).toBe("ctx_exceeds_training");
    expect(fact.problem).toBe("model_fact_mismatch");
    // A slot that would start: Stalled only by what apply would fail on.
    expect(byType(slotConditions({ desiredHash: "h1", preflight: [ctx, fact] }, undefined, "T1"))).toEqual({
      Ready: "False NotRunning", Reconciling: "True ChangePending", Stalled: "False Progressing", Degraded: "False AsExpected",
    });
    // A running one: not Degraded either.
    const running: ObservedSlot = { name: "chat", running: true, health: "ok", record: { view: { spec_hash: "h1" } as unknown as SlotView, pid: 10, started_at: "t" } };
    expect(byType(slotConditions({ desiredHash: "h1", seen: running, preflight: [ctx, fact] }, undefined, "T1"))).toMatchObject({ Stalled: "False Progressing", Degraded: "False AsExpected" });
    // Next to a blocking one (listed first or not), the reason and message are the blocking one's alone.
    const c = slotConditions({ desiredHash: "h1", preflight: [ctx, missing, fact] }, undefined, "T1");
    expect(c.conditions.find((x) => x.type === "Stalled")).toMatchObject({ status: "True", reason: "ModelMissing", message: "the model file of slot chat does not exist: /m.gguf — hal0 apply would fail until it is fixed" });
  });
});

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A one-slot box on real files, swept in process. */
async function box(o: { runner: string; model: string }) {
  const dir = mkdtempSync(join(tmpdir(), "hal0-cond-preflight-"));
  dirs.push(dir);
  const root = join(dir, "etc");
  mkdirSync(join(root, "slots"), { recursive: true });
  writeFileSync(join(root, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 5\nstop_grace_s = 1\n`);
  writeFileSync(join(root, "profiles.toml"), `[profile.fake]\nrunner = ${o.runner}\ndevice_class = "cpu"\n`);
  writeFileSync(join(root, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(o.model)}\n`);
  writeFileSync(join(root, "slots/chat.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${await freePort()}\n`);
  const state = new StateStore(join(dir, "state"));
  const sweeper = new Sweeper({ root, state, driverFor: async () => new ProcessDriver({ stateDir: state.dir }) });
  const conditions = () => {
    const all = JSON.parse(readFileSync(join(state.dir, "conditions.json"), "utf8")) as Record<string, { conditions: Array<{ type: string; status: string; reason: string; message: string }> }>;
    return all["slot.chat"]!.conditions;
  };
  return { root, sweeper, conditions };
}

describe("the sweep's conditions show what the preflight found", () => {
  it("a runner on no PATH nor bin/: Stalled True RunnerNotFound; the plan still creates the slot; idle sweeps do not check again", async () => {
    const { sweeper, conditions } = await box({ runner: '["no-such-runner-xyz"]', model: MODEL });
    const first = await sweeper.sweep();
    expect(first.plan!.changes.find((c) => c.address === "slot.chat")).toMatchObject({ action: "create", reason: "new" });
    const stalled = conditions().find((c) => c.type === "Stalled")!;
    expect(stalled).toMatchObject({ status: "True", reason: "RunnerNotFound" });
    expect(stalled.message).toContain("the runner `no-such-runner-xyz` of slot chat is not on PATH nor in hal0's bin/");
    const runs = sharedPreflight.runs;
    for (let i = 0; i < 5; i++) expect((await sweeper.sweep()).outcome).toBe("nothing_to_do"); // the failed create backs off
    expect(sharedPreflight.runs).toBe(runs);
    expect(conditions().find((c) => c.type === "Stalled")).toMatchObject({ status: "True", reason: "RunnerNotFound" });
  });

  it("a model file that does not exist: Stalled True ModelMissing, naming the path", async () => {
    const { root, sweeper, conditions } = await box({ runner: JSON.stringify(["node", RUNNER]), model: "models/nope.gguf" });
    await sweeper.sweep();
    const stalled = conditions().find((c) => c.type === "Stalled")!;
    expect(stalled).toMatchObject({ status: "True", reason: "ModelMissing" });
    expect(stalled.message).toContain(`the model file of slot chat does not exist: ${join(root, "models/nope.gguf")}`);
  });
});
