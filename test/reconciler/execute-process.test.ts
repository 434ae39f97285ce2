import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { executePlan } from "../../reconciler/execute.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { StateStore } from "../../reconciler/state.js";
import type { SlotView } from "../../reconciler/index.js";
import type { Change, SlotChange } from "../../schema/index.js";
import { freePort, viewFor } from "./process-helpers.js";

/** The executor's order with real runners (the fake llama-server) on real ports: the driver refuses a held port. */

let tmp: string;
let driver: ProcessDriver;
const started = new Set<string>();

beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), "hal0-exec-process-"));
  driver = new ProcessDriver({ stateDir: join(tmp, "state") });
});

afterEach(async () => {
  await Promise.allSettled([...started].map((name) => driver.stop(name, 1)));
  started.clear();
  await rm(tmp, { recursive: true, force: true });
});

const slotChange = (name: string, action: SlotChange["action"], before: SlotView | null, after: SlotView | null): Change =>
  ({ address: `slot.${name}`, kind: "slot", action, reason: action === "create" ? "new" : action === "delete" ? "removed_from_config" : "spec_changed", changed_paths: [], before, after, apply_class: "immediate", destructive: action !== "create", downtime: action !== "create" }) as Change;

it("starts a create on a port a delete frees only once that runner is stopped, a replace after its own stop, and creates elsewhere beside them; a runner that never turns healthy holds up none of them", async () => {
  const [shared, kept, far, stuck] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const env = { HAL0_FAKE_LOAD_MS: "0" };
  const oldView = viewFor({ root: tmp, port: shared, env });
  const keptBefore = viewFor({ root: tmp, port: kept, env });
  for (const [name, view] of [["old", oldView], ["kept", keptBefore]] as const) {
    started.add(name);
    await driver.start(name, view, { healthTimeoutS: 20, cwd: tmp });
  }
  for (const name of ["new", "far", "stuck"]) started.add(name);
  const events: string[] = [];
  const keptAfter = viewFor({ root: tmp, port: kept, env: { ...env, CHANGED: "1" } });
  const results = await executePlan({
    changes: [
      // First in the plan, so with one place it is launched first: its wait for /health must not keep it.
      slotChange("stuck", "create", null, viewFor({ root: tmp, port: stuck, env: { HAL0_FAKE_LOAD_MS: "60000" } })),
      slotChange("far", "create", null, viewFor({ root: tmp, port: far, env })),
      slotChange("kept", "replace", keptBefore, keptAfter),
      slotChange("new", "create", null, viewFor({ root: tmp, port: shared, env })),
      slotChange("old", "delete", oldView, null),
    ],
  }, { driver, state: new StateStore(join(tmp, "state")), healthTimeoutS: 3, stopGraceS: 1, cwd: tmp, parallel: 1, onEvent: (e) => events.push(`${e.address} ${e.phase}`) });
  expect(results.map((r) => `${r.address} ${r.action} ${r.ok ? "ok" : r.code}`)).toEqual([
    "slot.far create ok", "slot.kept replace ok", "slot.new create ok", "slot.old delete ok", "slot.stuck create slot.health_failed",
  ]);
  const running = await driver.observe();
  expect(running.map((s) => `${s.name} ${s.record?.view.spec.port} ${s.health}`).sort()).toEqual([
    `far ${far} ok`, `kept ${kept} ok`, `new ${shared} ok`,
  ]);
  // Every other slot was ready while the stuck one still waited.
  for (const name of ["far", "kept", "new"]) expect(events.indexOf(`slot.${name} ready`)).toBeLessThan(events.indexOf("slot.stuck failed"));
  expect(events.indexOf("slot.new starting")).toBeGreaterThan(events.indexOf("slot.old stopped"));
  expect(running.find((s) => s.name === "kept")?.record?.view.spec_hash).toBe(keptAfter.spec_hash);
}, 60_000);
