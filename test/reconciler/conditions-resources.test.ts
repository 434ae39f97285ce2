import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { compile, loadTree } from "../../compiler/index.js";
import { refreshConditions } from "../../reconciler/conditions-store.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { executePlan } from "../../reconciler/execute.js";
import { observe } from "../../reconciler/observe.js";
import { planChanges } from "../../reconciler/plan.js";
import { StateStore } from "../../reconciler/state.js";
import { Sweeper } from "../../reconciler/sweep.js";

/** A box with no slots and a Hermes home of named profiles, on real files, swept in process. */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function box(profiles: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), "hal0-conditions-"));
  dirs.push(dir);
  const root = join(dir, "etc");
  mkdirSync(root);
  const writeSettings = (extra = "") => writeFileSync(join(root, "hal0.toml"), `[server]\nhost = "127.0.0.1"\n\n[hermes]\nhome = "../hermes"\n${extra}`);
  writeSettings();
  for (const [p, text] of Object.entries(profiles)) {
    mkdirSync(join(dir, "hermes/profiles", p), { recursive: true });
    writeFileSync(join(dir, "hermes/profiles", p, "config.yaml"), text);
  }
  const state = new StateStore(join(dir, "state"));
  const sweeper = new Sweeper({ root, state, driverFor: async () => new ProcessDriver({ stateDir: state.dir }) });
  return { dir, root, state, sweeper, writeSettings, file: (p: string) => join(dir, "hermes/profiles", p, "config.yaml") };
}

/** `address → type → "status reason"`, as persisted in conditions.json. */
function persisted(state: StateStore): Record<string, Record<string, string>> {
  const all = JSON.parse(readFileSync(join(state.dir, "conditions.json"), "utf8")) as Record<string, { conditions: Array<{ type: string; status: string; reason: string }> }>;
  return Object.fromEntries(Object.entries(all).map(([a, r]) => [a, Object.fromEntries(r.conditions.map((c) => [c.type, `${c.status} ${c.reason}`]))]));
}

describe("conditions of Hermes profiles", () => {
  it("Ready when wired, Stalled on a file that is not YAML, Degraded on drift left alone under drift = \"warn\"", async () => {
    const { state, sweeper, writeSettings, file } = box({ a: "model:\n  default: x\n", bad: "model: [unclosed\n" });
    expect((await sweeper.sweep()).outcome).toBe("converged");
    let c = persisted(state);
    expect(c["hermes.a"]).toEqual({ Ready: "True Wired", Reconciling: "False Converged", Stalled: "False Progressing", Degraded: "False AsExpected" });
    expect(c["hermes.bad"]).toEqual({ Ready: "False InvalidYaml", Reconciling: "False Converged", Stalled: "True InvalidYaml", Degraded: "False AsExpected" });
    writeSettings(`\n[reconcile]\ndrift = "warn"\n`);
    writeFileSync(file("a"), readFileSync(file("a"), "utf8").replace("timeout: 60", "timeout: 5"));
    await sweeper.sweep();
    c = persisted(state);
    expect(c["hermes.a"]).toEqual({ Ready: "False Drifted", Reconciling: "False Converged", Stalled: "False Progressing", Degraded: "True DriftWarned" });
  });

  it("Reconciling while an update is pending; Degraded after a failed write, until a write succeeds", async () => {
    const { dir, root, state, sweeper, file } = box({ a: "model:\n  default: x\n", b: "model:\n  default: y\n" });
    const model = compile((await loadTree(root)).tree).model!;
    const driver = new ProcessDriver({ stateDir: state.dir });
    const { observed, inventory } = await observe(model, driver, state);
    const pending = await refreshConditions(model, observed, state, Date.now, false);
    expect(pending["hermes.a"]?.conditions.find((x) => x.type === "Reconciling")).toMatchObject({ status: "True", reason: "new" });
    expect(pending["hermes.a"]?.conditions.find((x) => x.type === "Ready")).toMatchObject({ status: "False", reason: "ChangePending" });
    const plan = planChanges(model, observed, inventory);
    // Between plan and write, a's config.yaml turns into a folder: the write fails, even for root.
    rmSync(file("a"));
    mkdirSync(file("a"));
    await executePlan(plan, { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: dir });
    await refreshConditions(model, observed, state, Date.now, true, plan);
    expect(persisted(state)["hermes.a"]).toMatchObject({ Degraded: "True hermes.write_failed" });
    rmSync(file("a"), { recursive: true });
    writeFileSync(file("a"), "model:\n  default: x\n");
    await sweeper.sweep();
    expect(persisted(state)["hermes.a"]).toEqual({ Ready: "True Wired", Reconciling: "False Converged", Stalled: "False Progressing", Degraded: "False AsExpected" });
  });
});

describe("conditions of the settings", () => {
  it("Ready once applied; Reconciling with the keys and what they wait for while some are pending (manual-restart keys named)", async () => {
    const { root, state, sweeper, writeSettings } = box({});
    await sweeper.sweep();
    expect(persisted(state).settings).toEqual({ Ready: "True Applied", Reconciling: "False Converged", Stalled: "False Progressing", Degraded: "False AsExpected" });
    writeSettings(`\n[slots]\nport_range_start = 9100\nport_range_end = 9199\n\n[reconcile]\ninterval_s = 60\n`);
    const model = compile((await loadTree(root)).tree).model!;
    const { observed } = await observe(model, new ProcessDriver({ stateDir: state.dir }), state);
    const settings = (await refreshConditions(model, observed, state, Date.now, false)).settings!;
    expect(settings.generation).toBe(2);
    expect(settings.conditions.find((x) => x.type === "Ready")).toMatchObject({ status: "False", reason: "ChangesPending" });
    expect(settings.conditions.find((x) => x.type === "Reconciling")).toMatchObject({
      status: "True",
      reason: "ManualRestartPending",
      message: "applied by the next apply or sweep: reconcile.interval_s; take effect after a manual restart of hal0: slots.port_range_end, slots.port_range_start",
    });
    await sweeper.sweep();
    expect(persisted(state).settings).toMatchObject({ Ready: "True Applied", Reconciling: "False Converged" });
  });
});
