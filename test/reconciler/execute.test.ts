import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { executePlan, type ExecEvent } from "../../reconciler/execute.js";
import { StateStore } from "../../reconciler/state.js";
import { DriverError, type SlotDriver, type SlotView } from "../../reconciler/index.js";
import { Settings, type Change, type Plan, type SlotChange } from "../../schema/index.js";

/** A driver that records every call and fails the slots it is told to. */
function recordingDriver(fail: Record<string, string> = {}) {
  const calls: string[] = [];
  const driver: SlotDriver = {
    runtime: "process",
    observe: async () => [],
    portHolder: async () => undefined,
    start: async (name, _view, { onPhase }) => {
      calls.push(`start ${name}`);
      await new Promise((r) => setTimeout(r, 5));
      if (fail[name]) throw new DriverError(fail[name]!, `${name} could not start`);
      onPhase?.("starting");
      onPhase?.("ready");
      return { pid: 100 };
    },
    stop: async (name) => {
      calls.push(`stop ${name}`);
      await new Promise((r) => setTimeout(r, 5));
    },
  };
  return { driver, calls };
}

const view = (port: number) => ({ port, spec: { runtime: "process" } }) as unknown as SlotView;

function change(address: `slot.${string}`, action: SlotChange["action"], after: SlotView | null = null): Change {
  return { address, kind: "slot", action, reason: "spec_changed", changed_paths: [], before: null, after, apply_class: "immediate", destructive: action === "delete" || action === "replace", downtime: action !== "create" };
}

function settingsChange(after: Settings): Change {
  const before = Settings.parse({});
  return { address: "settings", kind: "settings", action: "update", reason: "changed", changed_paths: [], before, after, apply_class: "immediate", destructive: false, downtime: false };
}

function plan(changes: Change[]): Plan {
  return {
    format_version: 1, id: "sha256:test", base: { config_digest: "x", observed: {} }, has_changes: true, changes, warnings: [],
    settings: { immediate: [], service_restart: {}, manual_restart: [], unknown: [] }, summary: { create: 0, update: 0, replace: 0, delete: 0, no_op: 0 },
  };
}

describe("executePlan", () => {
  it("stops and deletes before any start, clears a create's name just before it starts, keeps going past a failure, and records it all", async () => {
    const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-exec-")));
    await state.writeInventory({ version: 1, box: "box-1", slots: { old: { created_at: "t", runtime: "process" }, chat: { created_at: "t", runtime: "process" } } });
    const { driver, calls } = recordingDriver({ broken: "slot.port_in_use" });
    const events: ExecEvent[] = [];
    const results = await executePlan(
      plan([
        change("slot.broken", "create", view(8083)),
        change("slot.chat", "replace", view(8081)),
        change("slot.embed", "create", view(8082)),
        change("slot.idle", "no-op", view(8084)),
        change("slot.old", "delete"),
        settingsChange(Settings.parse({ reconcile: { interval_s: 30 } })),
      ]),
      { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: "/", parallel: 2, onEvent: (e) => events.push(e) },
    );
    // Wave 1: the replace's stop and the delete. Wave 2: each create first stops (clears) what is left under its name, then starts.
    expect(calls.slice(0, 2).sort()).toEqual(["stop chat", "stop old"]);
    expect(calls.slice(2).sort()).toEqual(["start broken", "start chat", "start embed", "stop broken", "stop embed"]);
    for (const name of ["broken", "embed"]) expect(calls.indexOf(`stop ${name}`)).toBeLessThan(calls.indexOf(`start ${name}`));
    expect(results.map((r) => `${r.address} ${r.action} ${r.ok ? "ok" : r.code}`)).toEqual([
      "settings update ok", "slot.broken create slot.port_in_use", "slot.chat replace ok", "slot.embed create ok", "slot.old delete ok",
    ]);
    expect(Object.keys((await state.readInventory()).slots).sort()).toEqual(["chat", "embed"]);
    expect((await state.readOutcomes()).broken).toMatchObject({ ok: false, code: "slot.port_in_use", error: "broken could not start" });
    expect((await state.readAppliedSettings())?.reconcile.interval_s).toBe(30);
    expect(events.filter((e) => e.address === "slot.embed").map((e) => e.phase)).toEqual(["starting", "ready"]);
    expect(events.find((e) => e.phase === "failed")?.address).toBe("slot.broken");
  });

  it("does not start a slot whose stop failed during a replace", async () => {
    const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-exec-")));
    const { driver, calls } = recordingDriver();
    driver.stop = async (name) => {
      calls.push(`stop ${name}`);
      throw new Error("stuck");
    };
    const results = await executePlan(plan([change("slot.chat", "replace", view(8081))]), { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: "/" });
    expect(calls).toEqual(["stop chat"]);
    expect(results).toMatchObject([{ address: "slot.chat", ok: false, code: "slot.apply_failed", error: "stuck" }]);
  });
});

describe("executePlan's parallelism per machine", () => {
  it("starts `parallel` slots at once on each swarm node a slot is pinned to, the nodes side by side, and the label-placed slots as one more group", async () => {
    const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-exec-")));
    await state.writeInventory({ version: 1, box: "box-1", slots: {} });
    const running = new Map<string, number>();
    const peak = new Map<string, number>();
    let all = 0;
    let allPeak = 0;
    const machine = (v: SlotView) => v.spec.placement?.node ?? "(labels)";
    const driver: SlotDriver = {
      runtime: "swarm",
      observe: async () => [],
      portHolder: async () => undefined,
      stop: async () => {},
      start: async (_name, v) => {
        const m = machine(v);
        running.set(m, (running.get(m) ?? 0) + 1);
        peak.set(m, Math.max(peak.get(m) ?? 0, running.get(m)!));
        allPeak = Math.max(allPeak, ++all);
        // Held until six run at once (two per group), or 500 ms: the staggered state writes before each start do not decide the peak.
        for (const t0 = Date.now(); allPeak < 6 && Date.now() - t0 < 500;) await new Promise((r) => setTimeout(r, 2));
        await new Promise((r) => setTimeout(r, 5));
        running.set(m, running.get(m)! - 1);
        all--;
        return {};
      },
    };
    const pinned = (port: number, node?: string) => ({ port, spec: { runtime: "swarm", placement: { labels: node ? {} : { gpu: "rocm" }, ...(node ? { node } : {}) } } }) as unknown as SlotView;
    const changes = [
      ...[1, 2, 3, 4, 5].map((i) => change(`slot.a${i}`, "create", pinned(9000 + i, "node-1"))),
      ...[1, 2, 3, 4, 5].map((i) => change(`slot.b${i}`, "create", pinned(9000 + i, "node-2"))),
      ...[1, 2, 3].map((i) => change(`slot.c${i}`, "create", pinned(9100 + i))),
    ];
    const results = await executePlan(plan(changes), { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: "/", parallel: 2 });
    expect(results.every((r) => r.ok)).toBe(true);
    // Two at once on each node and among the label-placed slots, and the groups overlapped (not 2 at once in all).
    expect(Object.fromEntries(peak)).toEqual({ "node-1": 2, "node-2": 2, "(labels)": 2 });
    expect(allPeak).toBe(6);
  });
});

describe("executePlan's order and bound", () => {
  const at = (port: number, device = "cpu") => ({ port, spec: { runtime: "process", port, device, gpu_index: 0 } }) as unknown as SlotView;
  /** Settles when `ready()` holds (checked every few ms), or throws `why` after `ms`: a test that would hang fails instead. */
  const until = async (ready: () => boolean, why: string, ms = 3000) => {
    const deadline = Date.now() + ms;
    while (!ready()) {
      if (Date.now() > deadline) throw new Error(why);
      await new Promise((r) => setTimeout(r, 2));
    }
  };

  it("bounds the launches, not the /health waits: a slot still loading holds no place, and its failure does not hold up the others", async () => {
    const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-exec-")));
    const names = ["slow", "a", "b", "c", "d", "e"];
    const called: string[] = [];
    let launching = 0;
    let launchPeak = 0;
    let inStart = 0;
    let inStartPeak = 0;
    const driver: SlotDriver = {
      runtime: "docker",
      observe: async () => [],
      portHolder: async () => undefined,
      stop: async () => {},
      start: async (name, _view, { onPhase }) => {
        called.push(name);
        inStartPeak = Math.max(inStartPeak, ++inStart);
        launchPeak = Math.max(launchPeak, ++launching);
        try {
          // The engine's share (create and start) lasts until a second launch is under way, or every slot has been called.
          await until(() => launching >= 2 || called.length === names.length, `${name}: launched alone`);
          launching--;
          onPhase?.("starting");
          // Every slot waits for /health until all have been launched: only possible if a wait holds no place.
          await until(() => called.length === names.length, `${name}: the others were not launched while it waited for /health`);
          if (name === "slow") throw new DriverError("slot.health_failed", "slow: GET /health did not return 200 in time");
          onPhase?.("ready");
          return {};
        } finally {
          inStart--;
        }
      },
    };
    const results = await executePlan(plan(names.map((n, i) => change(`slot.${n}`, "create", at(9000 + i)))), { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: "/", parallel: 2 });
    expect(results.map((r) => `${r.address} ${r.ok ? "ok" : `${r.code}: ${r.error}`}`)).toEqual([
      "slot.a ok", "slot.b ok", "slot.c ok", "slot.d ok", "slot.e ok", "slot.slow slot.health_failed: slow: GET /health did not return 200 in time",
    ]);
    expect(launchPeak).toBe(2);
    expect(inStartPeak).toBe(6);
  });

  it("starts a slot after the stops it collides with (its own replace, a delete on its port or its device) and no others: a create on another device does not wait", async () => {
    const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-exec-")));
    const log: string[] = [];
    const driver: SlotDriver = {
      runtime: "process",
      observe: async () => [],
      portHolder: async () => undefined,
      stop: async (name) => {
        log.push(`stop ${name}`);
        // The delete on 8081 finishes only once the create on another port has started.
        if (name === "old") await until(() => log.includes("start far"), "the create on 8090 waited for the stop on 8081");
        else await new Promise((r) => setTimeout(r, 3));
        log.push(`stopped ${name}`);
      },
      start: async (name, _view, { onPhase }) => {
        log.push(`start ${name}`);
        onPhase?.("starting");
        onPhase?.("ready");
        return {};
      },
    };
    // old and chat run on the GPU; far loads onto the CPU, beside (the GPU's memory is not in its way).
    const del: Change = { ...change("slot.old", "delete"), before: at(8081, "gpu-rocm") } as Change;
    const replace: Change = { ...change("slot.chat", "replace", at(8082, "gpu-rocm")), before: at(8082, "gpu-rocm") } as Change;
    const results = await executePlan(plan([
      change("slot.far", "create", at(8090)),
      change("slot.new", "create", at(8081)),
      change("slot.gpu", "create", at(8091, "gpu-rocm")),
      replace,
      del,
    ]), { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: "/", parallel: 4 });
    expect(results.map((r) => `${r.address} ${r.action} ${r.ok ? "ok" : r.error}`)).toEqual(["slot.chat replace ok", "slot.far create ok", "slot.gpu create ok", "slot.new create ok", "slot.old delete ok"]);
    const when = (entry: string) => log.indexOf(entry);
    expect(when("start new")).toBeGreaterThan(when("stopped old")); // 8081 is free first
    expect(when("start chat")).toBeGreaterThan(when("stopped chat"));
    // A load onto the GPU waits for the GPU slots' stops: their memory is what it needs.
    expect(when("start gpu")).toBeGreaterThan(when("stopped old"));
    expect(when("start gpu")).toBeGreaterThan(when("stopped chat"));
    expect(when("start far")).toBeLessThan(when("stopped old"));
    // Each create still clears its name first.
    for (const name of ["far", "new", "gpu"]) expect(when(`stopped ${name}`)).toBeLessThan(when(`start ${name}`));
  });
});
