import type { Model } from "../compiler/index.js";
import { enabledNpuLlm, npuSlots } from "../compiler/edits/npu.js";
import { npuStatus } from "../reconciler/host/probes.js";
import { lockHolder } from "../reconciler/lock.js";
import type { BoxService } from "./box.js";
import type { Dispatcher } from "./dispatch.js";
import { lifecycleOf, observeLiveness, probeHealth, statusOf } from "./slot-view.js";

/** The gated tools whose queued requests would move the NPU. */
const NPU_TOOLS = new Set(["npu_backend_load", "npu_backend_unload"]);

/**
 * Who has the NPU: the NPU's own facts (npu_status: accel devices and their
 * driver), each slot placed on it with what runs (liveness and a /health
 * probe, as slot_state reads them), the llm slot whose runner holds it now
 * and the one the files want there.
 */
export async function npuOccupancy(box: BoxService, model: Model) {
  const seen = await observeLiveness(box, model);
  const [outcomes, steps] = await Promise.all([box.state.readOutcomes(), box.state.readSteps()]);
  const slots = await Promise.all(npuSlots(model).map(async (s) => {
    const o = seen.get(s.name);
    const health = await probeHealth(o, await box.driver(model));
    return {
      name: s.name, type: s.type, model: s.model ?? null, profile: s.profile, port: s.port, enabled: s.enabled, pinned: s.pinned,
      status: statusOf(s, o), state: lifecycleOf(s, o, health, outcomes[s.name]?.ok, steps[s.name]), health,
      pid: o?.record?.pid ?? null, started_at: o?.record?.started_at ?? null,
    };
  }));
  const running = slots.filter((s) => s.type === "llm" && s.status === "running").map((s) => s.name);
  return { npu: await npuStatus(), holder: running[0] ?? null, running, desired: enabledNpuLlm(model)[0]?.name ?? null, slots };
}

/**
 * Whether the NPU is changing hands: `stopping` while an llm runner the files
 * no longer want still runs there, `starting` while the wanted one is not
 * ready yet, `failed` when its start failed (or it runs unhealthy), else
 * `idle`. Beside it what may move it next: an apply or sweep holding the
 * apply lock now, the last sweep, and gated load / unload requests waiting
 * for a person.
 */
export async function npuSwapStatus(box: BoxService, model: Model, services: Dispatcher) {
  const occupancy = await npuOccupancy(box, model);
  const { desired, holder } = occupancy;
  const { phase, stopping, starting } = swapPhase(occupancy.slots);
  const apply = await lockHolder(box.state.dir);
  const last = services.sweeps?.last;
  const pending = services.approvals.list("pending").filter((a) => NPU_TOOLS.has(a.tool));
  return {
    swapping: phase === "stopping" || phase === "starting", phase, holder, desired, stopping, starting,
    apply: apply ? { command: apply.command, pid: apply.pid, started_at: apply.started_at } : null,
    last_sweep: last ? { at: last.at, outcome: last.outcome } : null,
    pending_approvals: pending.map((a) => ({ id: a.id, tool: a.tool, summary: a.summary, caller: a.caller.agent, created_at: a.created_at })),
    slots: occupancy.slots,
  };
}

/**
 * The NPU's phase from its slots: `stopping` while an llm runner the files no longer want (disabled) still runs,
 * `failed` when a wanted one's start failed, `starting` while a wanted one is not ready, else `idle`. Every enabled
 * llm slot is wanted: one on a box, one per node's NPU under swarm.
 */
export function swapPhase(slots: ReadonlyArray<{ name: string; type: string; enabled: boolean; status: string; state: string }>) {
  const llm = slots.filter((s) => s.type === "llm");
  const stopping = llm.filter((s) => !s.enabled && s.status === "running").map((s) => s.name);
  const wanted = llm.filter((s) => s.enabled);
  const waiting = wanted.find((s) => s.state !== "ready" && s.state !== "error");
  const phase = stopping.length > 0 ? "stopping" : wanted.some((s) => s.state === "error") ? "failed" : waiting ? "starting" : "idle";
  return { phase, stopping, starting: phase === "starting" ? waiting!.name : null };
}
