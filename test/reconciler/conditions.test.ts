import { describe, expect, it } from "vitest";
import { allSlotConditions, slotConditions, type ResourceConditions } from "../../reconciler/conditions.js";
import type { ObservedSlot, SlotView } from "../../reconciler/index.js";
import type { Diagnostic } from "../../schema/index.js";

const view = (spec_hash: string) => ({ spec_hash }) as unknown as SlotView;
const running = (hash: string, health: ObservedSlot["health"] = "ok"): ObservedSlot => ({ name: "chat", running: true, health, record: { view: view(hash), pid: 10, started_at: "t" } });
const byType = (r: ResourceConditions) => Object.fromEntries(r.conditions.map((c) => [c.type, `${c.status} ${c.reason}`]));

describe("slot conditions", () => {
  it("Ready when running the desired spec and healthy", () => {
    expect(byType(slotConditions({ desiredHash: "h1", seen: running("h1") }, undefined, "T1"))).toEqual({
      Ready: "True Healthy", Reconciling: "False Converged", Stalled: "False Progressing", Degraded: "False AsExpected",
    });
  });

  it("Reconciling while the spec is outdated or the slot is down; Degraded when health does not answer", () => {
    expect(byType(slotConditions({ desiredHash: "h2", seen: running("h1") }, undefined, "T1"))).toMatchObject({ Ready: "False SpecOutdated", Reconciling: "True ChangePending" });
    expect(byType(slotConditions({ desiredHash: "h1", seen: running("h1", "down") }, undefined, "T1"))).toMatchObject({ Ready: "Unknown NoHealthAnswer", Degraded: "True Unhealthy" });
    expect(byType(slotConditions({ desiredHash: "h1", seen: running("h1", "loading") }, undefined, "T1"))).toMatchObject({ Ready: "False Warming" });
  });

  it("Degraded WarmingTooLong when a runner no apply waits for still answers 503 past health_timeout_s (its start was interrupted)", () => {
    const loading = (startedAt: string): ObservedSlot => ({ ...running("h1", "loading"), record: { view: view("h1"), pid: 10, started_at: startedAt } });
    const at = "2026-12-07T10:10:00.000Z";
    const old = slotConditions({ desiredHash: "h1", seen: loading("2026-12-07T10:00:00.000Z"), healthTimeoutS: 240 }, undefined, at);
    expect(byType(old)).toMatchObject({ Ready: "False Warming", Degraded: "True WarmingTooLong" });
    expect(old.conditions.find((c) => c.type === "Degraded")!.message).toMatch(/^GET \/health still answers 503 600 s after its runner started, past \[slots\] health_timeout_s \(240 s\)/);
    // Within the timeout, or while an apply waits for it (it stops the runner itself at the timeout): still loading, nothing wrong.
    expect(byType(slotConditions({ desiredHash: "h1", seen: loading("2026-12-07T10:08:00.000Z"), healthTimeoutS: 240 }, undefined, at))).toMatchObject({ Degraded: "False AsExpected" });
    const step = { action: "create" as const, phase: "warming" as const, since: "2026-12-07T10:00:00.000Z" };
    expect(byType(slotConditions({ desiredHash: "h1", seen: loading("2026-12-07T10:00:00.000Z"), healthTimeoutS: 240, step }, undefined, at))).toMatchObject({ Degraded: "False AsExpected" });
    // The store passes the box's setting.
    const all = allSlotConditions({ chat: { enabled: true, spec_hash: "h1" } }, { chat: loading("2026-12-07T10:00:00.000Z") }, {}, {}, at, [], {}, undefined, undefined, 240).next["slot.chat"]!;
    expect(byType(all)).toMatchObject({ Degraded: "True WarmingTooLong" });
  });

  it("Degraded CrashLoop within 10 min of its second restart in a row, and not for as long as the clock was set back since", () => {
    const facts = { desiredHash: "h1", seen: running("h1"), outcome: { ok: true, action: "create" as const, at: "2026-12-07T10:00:00.000Z", restarts: 2 } };
    const degraded = (at: string) => byType(slotConditions(facts, undefined, at)).Degraded;
    expect(degraded("2026-12-07T10:05:00.000Z")).toBe("True CrashLoop");
    expect(degraded("2026-12-07T10:10:00.000Z")).toBe("False AsExpected");
    // NTP set the clock back a day: the restart reads as a day to come, of no known age, as the next death's count takes it.
    expect(degraded("2026-12-06T10:05:00.000Z")).toBe("False AsExpected");
    expect(byType(slotConditions({ ...facts, outcome: { ...facts.outcome, restarts: 1 } }, undefined, "2026-12-07T10:05:00.000Z")).Degraded).toBe("False AsExpected");
  });

  it("a running slot whose image's digest cannot be read now (removed from the engine) is not SpecOutdated or ChangePending: the planner leaves it running (image_unobserved)", () => {
    const spec = (digest?: string) => ({ runtime: "docker", image: "127.0.0.1:5000/hal0/voice:1", ...(digest ? { observed: { image_digest: digest } } : {}) }) as unknown as SlotView["spec"];
    const seen: ObservedSlot = { name: "chat", running: true, health: "ok", record: { view: { spec_hash: "h1", spec: spec("sha256:old") } as unknown as SlotView, started_at: "t" } };
    const gone = allSlotConditions({ chat: { enabled: true, spec_hash: "h2", spec: spec() } }, { chat: seen }, {}, {}, "T1").next["slot.chat"]!;
    expect(byType(gone)).toMatchObject({ Ready: "True Healthy", Reconciling: "False ImageUnobserved" });
    expect(gone.conditions.find((c) => c.type === "Reconciling")!.message).toContain("keeps running the image it was started with");
    // Read again as another image: a replace is pending.
    const moved = allSlotConditions({ chat: { enabled: true, spec_hash: "h3", spec: spec("sha256:new") } }, { chat: seen }, {}, {}, "T1").next["slot.chat"]!;
    expect(byType(moved)).toMatchObject({ Ready: "False SpecOutdated", Reconciling: "True ChangePending" });
  });

  it("Stalled on a terminal failure, Degraded on any failure", () => {
    const outcome = { ok: false, action: "create", code: "slot.spawn_failed", error: "exit 3", at: "t" };
    expect(byType(slotConditions({ desiredHash: "h1", outcome }, undefined, "T1"))).toMatchObject({ Ready: "False NotRunning", Stalled: "True slot.spawn_failed", Degraded: "True slot.spawn_failed" });
    const transient = { ...outcome, code: "slot.port_in_use" };
    expect(byType(slotConditions({ desiredHash: "h1", outcome: transient }, undefined, "T1"))).toMatchObject({ Stalled: "False Progressing", Degraded: "True slot.port_in_use" });
  });

  it("a failure counts while the slot is wanted or still runs: disabled since, and stopped, it is neither Stalled nor Degraded", () => {
    const outcome = { ok: false, action: "create", code: "slot.spawn_failed", error: "exit 3", at: "t" };
    expect(byType(slotConditions({ outcome }, undefined, "T1"))).toEqual({ Ready: "False Disabled", Reconciling: "False Converged", Stalled: "False Progressing", Degraded: "False AsExpected" });
    // A stop that failed: the runner still runs, so the failure still says something.
    const stop = { ...outcome, action: "delete", code: "slot.stop_failed" };
    expect(byType(slotConditions({ seen: running("h1"), outcome: stop }, undefined, "T1"))).toMatchObject({ Reconciling: "True ChangePending", Degraded: "True slot.stop_failed" });
  });

  it("keeps lastTransitionTime while a status holds, bumps the generation when the spec changes", () => {
    const first = slotConditions({ desiredHash: "h1", seen: running("h1") }, undefined, "T1");
    const same = slotConditions({ desiredHash: "h1", seen: running("h1") }, first, "T2");
    expect(same).toEqual(first);
    const changed = slotConditions({ desiredHash: "h2", seen: running("h1") }, same, "T3");
    expect(changed.generation).toBe(2);
    const readyNow = changed.conditions.find((c) => c.type === "Ready")!;
    expect(readyNow).toMatchObject({ status: "False", lastTransitionTime: "T3", observedGeneration: 2 });
    expect(changed.conditions.find((c) => c.type === "Stalled")!.lastTransitionTime).toBe("T1");
  });

  it("a running slot that is neither in the config nor in the inventory (hal0 did not start it) is not pending a stop: the plan leaves it alone", () => {
    const { next } = allSlotConditions({}, { stray: running("h1") }, {}, {}, "T1", [], {}, undefined, new Set(["chat"]));
    expect(byType(next["slot.stray"]!)).toMatchObject({ Reconciling: "False Unmanaged" });
    // One hal0 started and then removed from the config is.
    expect(byType(allSlotConditions({}, { stray: running("h1") }, {}, {}, "T1", [], {}, undefined, new Set(["stray"])).next["slot.stray"]!)).toMatchObject({ Reconciling: "True ChangePending" });
  });

  it("says when nothing changed, so an idle sweep writes nothing", () => {
    const desired = { chat: { enabled: true, spec_hash: "h1" } };
    const observed = { chat: running("h1") };
    const { next } = allSlotConditions(desired, observed, {}, {}, "T1");
    expect(allSlotConditions(desired, observed, {}, next, "T2").changed).toBe(false);
    expect(allSlotConditions(desired, { chat: running("h1", "down") }, {}, next, "T2").changed).toBe(true);
  });

  it("Stalled with RunnerRefusesArgv (and the code, located) when the runner would refuse the argv", () => {
    const refused: Diagnostic[] = [{
      code: "slot.runner_flag_removed", severity: "error", file: "profiles.toml", line: 74, column: 9, path: ["profile", "rocm-moe", "flags"], related: [],
      summary: "`--draft-max` was removed from llama-server", detail: "use --spec-draft-n-max",
    }];
    const desired = { coder: { enabled: true, spec_hash: "h2", runner: { diagnostics: refused } } };
    const { next } = allSlotConditions(desired, {}, {}, {}, "T1");
    const stalled = next["slot.coder"]!.conditions.find((c) => c.type === "Stalled")!;
    expect(stalled).toMatchObject({ status: "True", reason: "RunnerRefusesArgv" });
    expect(stalled.message).toContain("profiles.toml:74:9: slot.runner_flag_removed");
    // A warning alone (a deprecated flag) holds nothing back.
    const warned = { coder: { enabled: true, spec_hash: "h2", runner: { diagnostics: [{ ...refused[0]!, severity: "warning", code: "slot.runner_flag_deprecated" } as Diagnostic] } } };
    expect(byType(allSlotConditions(warned, {}, {}, {}, "T1").next["slot.coder"]!)).toMatchObject({ Stalled: "False Progressing" });
    // A disabled slot is not held back by anything.
    expect(byType(allSlotConditions({ coder: { ...desired.coder, enabled: false } }, {}, {}, {}, "T1").next["slot.coder"]!)).toMatchObject({ Stalled: "False Progressing" });
  });
});
