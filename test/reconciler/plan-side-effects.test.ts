import { mkdtempSync, readdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compile, sourceTree } from "../../compiler/index.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { observe } from "../../reconciler/observe.js";
import { planChanges } from "../../reconciler/plan.js";
import { StateStore } from "../../reconciler/state.js";
import type { SlotDriver } from "../../reconciler/index.js";

/** Every method that could change the world throws: planning must never reach one. */
function readOnly<T extends object>(target: T, writes: readonly string[]): T {
  return new Proxy(target, {
    get(obj, key, receiver) {
      if (typeof key === "string" && writes.includes(key)) return () => { throw new Error(`planning called ${key}`); };
      const value = Reflect.get(obj, key, receiver);
      return typeof value === "function" ? value.bind(obj) : value;
    },
  });
}

function snapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      const info = statSync(path);
      out.push(`${path} ${info.size} ${info.mtimeMs}`);
      if (info.isDirectory()) walk(path);
    }
  };
  walk(dir);
  return out.sort();
}

describe("planning is side-effect free", () => {
  it("observes and plans with a driver and a state store whose every write throws", async () => {
    const stateDir = mkdtempSync(join(tmpdir(), "hal0-ro-"));
    const state = new StateStore(stateDir);
    await state.writeInventory({ version: 1, box: "box-ro", slots: { gone: { created_at: "2026-01-01T00:00:00Z", runtime: "process" } } });
    const { model } = compile(sourceTree("/box", [
      ["models.toml", `[model.m]\npath = "m.gguf"\n`],
      ["slots/chat.toml", `profile = "rocm"\nmodel = "m"\nport = 8181\n`],
      ["hal0.toml", `[reconcile]\ninterval_s = 30\n`],
    ]));
    const driver = readOnly<SlotDriver>(new ProcessDriver({ stateDir }), ["start", "stop"]);
    const store = readOnly(state, ["writeInventory", "writeAppliedSettings", "recordOutcome"]);
    const before = snapshot(stateDir);
    const { observed, inventory } = await observe(model!, driver, store);
    const plan = planChanges(model!, observed, inventory);
    expect(plan.changes.map((c) => `${c.action} ${c.address}`)).toEqual(["update settings", "create slot.chat", "delete slot.gone"]);
    expect(snapshot(stateDir)).toEqual(before);
  });
});
