import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import type { SlotDriver } from "../../reconciler/index.js";
import { StateStore } from "../../reconciler/state.js";
import { Sweeper } from "../../reconciler/sweep.js";
import { freePort, RUNNER } from "./process-helpers.js";

const MODEL = join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");
const FULL_PROBE_MS = 1500;
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** A two-slot box of fake runners and a sweeper whose driver counts the /health probes it is asked for. */
async function box() {
  const root = mkdtempSync(join(tmpdir(), "hal0-sweep-health-"));
  mkdirSync(join(root, "slots"));
  writeFileSync(join(root, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 10\nstop_grace_s = 2\n`);
  writeFileSync(join(root, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
  writeFileSync(join(root, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(MODEL)}\n`);
  for (const name of ["a", "b"]) writeFileSync(join(root, `slots/${name}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${await freePort()}\n`);
  const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-sweep-health-state-")));
  const real = new ProcessDriver({ stateDir: state.dir });
  const probes: string[] = [];
  const driver: SlotDriver = Object.assign(Object.create(real) as SlotDriver, {
    observe: (options: Parameters<SlotDriver["observe"]>[0] = {}) => real.observe({
      ...options,
      probe: (slot) => {
        const yes = options.probe === undefined || options.probe(slot);
        if (yes && options.health !== false) probes.push(slot.name);
        return yes;
      },
    }),
  });
  const sweeper = new Sweeper({ root, state, driverFor: async () => driver, fullProbeMs: FULL_PROBE_MS });
  cleanups.push(() => Promise.all(["a", "b"].map((n) => real.stop(n, 1))));
  return { state, sweeper, probes };
}

function ready(state: StateStore, slot: string): string | undefined {
  const all = JSON.parse(readFileSync(join(state.dir, "conditions.json"), "utf8"));
  return all[`slot.${slot}`]?.conditions.find((c: { type: string }) => c.type === "Ready")?.status;
}

function pidOf(state: StateStore, slot: string): number {
  return JSON.parse(readFileSync(join(state.dir, `slots/${slot}/runtime.json`), "utf8")).pid;
}

describe("the sweep's health probes", () => {
  it("an idle sweep reuses fresh 200 answers; every runner is probed again after the full-probe interval", async () => {
    const { state, sweeper, probes } = await box();
    expect((await sweeper.sweep()).outcome).toBe("converged");
    expect(probes.sort()).toEqual(["a", "b"]); // after an apply: all of them
    probes.length = 0;
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
    expect(probes).toEqual([]);
    expect([ready(state, "a"), ready(state, "b")]).toEqual(["True", "True"]);
    await sleep(FULL_PROBE_MS + 50);
    await sweeper.sweep();
    expect(probes.sort()).toEqual(["a", "b"]);
  });

  it("a runner that stops answering (SIGSTOP) is not Ready within the full-probe interval; one that exits, at once", async () => {
    const { state, sweeper } = await box();
    await sweeper.sweep();
    const a = pidOf(state, "a");
    process.kill(a, "SIGSTOP");
    cleanups.push(() => process.kill(a, "SIGCONT"));
    const stoppedAt = Date.now();
    await sweeper.sweep();
    while (ready(state, "a") === "True") {
      expect(Date.now() - stoppedAt).toBeLessThan(FULL_PROBE_MS + 2000); // the bound, plus one probe's 1 s timeout
      await sleep(100);
      await sweeper.sweep();
    }
    expect(ready(state, "a")).toBe("Unknown");
    expect(ready(state, "b")).toBe("True");
    process.kill(pidOf(state, "b"), "SIGKILL");
    await sleep(100);
    const report = await sweeper.sweep(); // liveness is never cached: b is restarted at once
    expect(report.plan?.changes.find((c) => c.address === "slot.b")?.reason).toBe("not_running");
  }, 20_000);
});
