import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { compile, loadTree, type Model } from "../../compiler/index.js";
import { Backoff } from "../../reconciler/backoff.js";
import { converge, PlanStaleError, previewPlan } from "../../reconciler/converge.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { acquireLock, LockedError } from "../../reconciler/lock.js";
import { StateStore } from "../../reconciler/state.js";
import { alive, freePort, RUNNER } from "./process-helpers.js";

/**
 * converge(): the one lock → observe → plan → review → hold back → execute →
 * conditions path every caller takes, on real runner processes.
 */
const MODEL = join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** A box of two slots (`a`, `b`) on free ports; `b` can be given a model file that does not exist, so its runner fails. */
async function box(opts: { brokenB?: boolean } = {}) {
  const root = mkdtempSync(join(tmpdir(), "hal0-converge-"));
  mkdirSync(join(root, "slots"));
  writeFileSync(join(root, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 10\nstop_grace_s = 2\n`);
  writeFileSync(join(root, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
  writeFileSync(join(root, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(MODEL)}\n[model.gone]\npath = "/nonexistent/model.gguf"\n`);
  for (const [name, model] of [["a", "tiny"], ["b", opts.brokenB ? "gone" : "tiny"]] as const) {
    writeFileSync(join(root, `slots/${name}.toml`), `profile = "fake"\nmodel = "${model}"\nport = ${await freePort()}\n[tune]\nctx_size = 2048\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "30" }\n`);
  }
  const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-converge-state-")));
  const driver = new ProcessDriver({ stateDir: state.dir });
  cleanups.push(async () => {
    await driver.stop("a", 1);
    await driver.stop("b", 1);
  });
  const loaded = await loadTree(root);
  const { model, diagnostics } = compile(loaded.tree, loaded.diagnostics);
  expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);
  return { root, state, driver, model: model as Model, target: { model: model as Model, driver, state } };
}

const pidOf = (state: StateStore, name: string): number => JSON.parse(readFileSync(join(state.dir, `slots/${name}/runtime.json`), "utf8")).pid;

describe("converge()", () => {
  it("converges the box, then has nothing to do; a review that says no runs nothing", async () => {
    const { state, target } = await box();
    let reviewed = 0;
    const no = await converge(target, { holder: "test", review: () => (reviewed++, false) });
    expect(no.outcome).toBe("cancelled");
    expect(no.plan.summary.create).toBe(2);
    expect(Object.keys((await state.readInventory()).slots)).toEqual([]);
    const done = await converge(target, { holder: "test", review: (plan) => (reviewed++, plan.has_changes) });
    expect(done.outcome).toBe("converged");
    expect(done.results.map((r) => `${r.address} ${r.action} ${r.ok}`)).toEqual(["slot.a create true", "slot.b create true", "settings update true"].sort());
    expect((await converge(target, { holder: "test" })).outcome).toBe("nothing_to_do");
    expect(reviewed).toBe(2);
    expect(await alive(pidOf(state, "a"))).toBe(true);
  });

  it("restarts one slot through the planner's replace option and touches no other", async () => {
    const { state, target } = await box();
    await converge(target, { holder: "test" });
    const [a, b] = [pidOf(state, "a"), pidOf(state, "b")];
    const done = await converge(target, { holder: "test", plan: { replace: ["slot.a"], only: { addresses: ["slot.a"] } } });
    expect(done.plan.changes.map((c) => `${c.address} ${c.action} ${c.reason}`)).toEqual(["slot.a replace restart"]);
    expect(done.outcome).toBe("converged");
    expect(pidOf(state, "a")).not.toBe(a);
    expect(await alive(a)).toBe(false);
    expect(pidOf(state, "b")).toBe(b);
  });

  it("holds back a slot that keeps failing (backoff), runs the rest, and says why", async () => {
    const { target } = await box({ brokenB: true });
    let clock = 1_000_000;
    const backoff = new Backoff(() => clock);
    const first = await converge(target, { holder: "test", backoff, now: () => clock });
    expect(first.outcome).toBe("failed");
    expect(first.results.find((r) => r.address === "slot.b")).toMatchObject({ ok: false });
    clock += 100; // well inside the first retry interval
    const second = await converge(target, { holder: "test", backoff, now: () => clock });
    expect(second.outcome).toBe("nothing_to_do");
    expect(second.runnable.changes.find((c) => c.address === "slot.b")).toMatchObject({ action: "no-op", reason: "backing_off" });
    expect(second.deferred.map((d) => d.address)).toEqual(["slot.b"]);
    expect(second.plan.changes.find((c) => c.address === "slot.b")?.action).toBe("create"); // the planner still wants it
  });

  it("refuses a saved plan whose box moved (PlanStaleError naming what), and a held lock (LockedError) before it observes", async () => {
    const { state, target } = await box();
    const { plan: saved } = await previewPlan(target);
    await converge(target, { holder: "test" });
    const stale = await converge(target, { holder: "test", saved }).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(PlanStaleError);
    expect((stale as PlanStaleError).moved.join("\n")).toMatch(/slot\.a: not running when planned; now running \(pid \d+\)/);
    const release = await acquireLock(state.dir, "someone else");
    try {
      await expect(converge(target, { holder: "test" })).rejects.toBeInstanceOf(LockedError);
    } finally {
      await release();
    }
  });

  it("without a runtime it plans only what needs none, and refuses to plan slots", async () => {
    const { target } = await box();
    const { driver: _driver, ...bare } = target;
    await expect(converge(bare, { holder: "test" })).rejects.toThrow(/no runtime/);
    const hermes = await converge(bare, { holder: "test", plan: { only: { kinds: ["hermes"] } } });
    expect(hermes.outcome).toBe("nothing_to_do");
    expect(hermes.plan.changes).toEqual([]);
  });
});
