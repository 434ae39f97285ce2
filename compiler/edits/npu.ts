import type { ChangeSet, FileEdit } from "../changeset.js";
import type { Model, ResolvedSlot } from "../model.js";
import { EditRefusal } from "./refusal.js";

/**
 * The NPU backend's load and unload as ChangeSets of slot files: loading a
 * slot placed on the NPU enables it and disables every other enabled llm
 * slot there, so the change keeps the rule the compiler holds (at most one
 * enabled llm slot on the NPU, `slot.npu_exclusivity_violation`) instead of
 * being refused by it; unloading disables the llm slot that has the NPU.
 * Pure: from the compiled model and the request. The pipeline compiles,
 * plans and judges the change by its effect (each `enabled` edit is a
 * slot_load / slot_unload assignment), and refuses a pinned slot's stop
 * without `force` (compiler/change-checks.ts).
 */

/** Every slot placed on the NPU, by name. */
export function npuSlots(model: Model): ResolvedSlot[] {
  return Object.values(model.slots).filter((s) => s.device === "npu").sort((a, b) => (a.name < b.name ? -1 : 1));
}

/**
 * Whether two slots may run on one machine, and so on one NPU: always on one box; under the swarm runtime unless they
 * are pinned to different nodes (each node has its own NPU, and the compiler counts one enabled llm slot per node).
 */
export function mayShareNpu(a: ResolvedSlot, b: ResolvedSlot): boolean {
  const [x, y] = [a.spec.placement?.node, b.spec.placement?.node];
  return x === undefined || y === undefined || x === y;
}

/** The llm slots on the NPU that are enabled: the one that has it (the compiler allows at most one, per node under swarm). */
export function enabledNpuLlm(model: Model): ResolvedSlot[] {
  return npuSlots(model).filter((s) => s.type === "llm" && s.enabled);
}

/** Which NPU slot a load names: `slot` as given, or the one slot on the NPU that serves `model`. */
export function npuTarget(model: Model, which: { readonly slot?: string; readonly model?: string }): ResolvedSlot {
  const there = npuSlots(model);
  const npu_slots = there.map((s) => s.name);
  if (which.slot !== undefined) {
    const slot = Object.hasOwn(model.slots, which.slot) ? model.slots[which.slot] : undefined;
    if (!slot) throw new EditRefusal("slot.not_found", `no slot \`${which.slot}\``, { name: which.slot, known: Object.keys(model.slots).sort() });
    if (slot.device !== "npu") {
      throw new EditRefusal("slot.wrong_type", `slot \`${slot.name}\` is placed on ${slot.device}, not on the NPU`, { name: slot.name, device: slot.device, needed: "npu", npu_slots });
    }
    return slot;
  }
  const serving = there.filter((s) => s.model === which.model);
  if (serving.length === 0) throw new EditRefusal("npu.no_slot", `no slot on the NPU serves model \`${which.model}\``, { model: which.model, npu_slots });
  if (serving.length > 1) {
    throw new EditRefusal("npu.ambiguous", `${serving.length} slots on the NPU serve model \`${which.model}\`; name the slot`, { model: which.model, slots: serving.map((s) => s.name) });
  }
  return serving[0]!;
}

const enable = (s: ResolvedSlot, on: boolean): FileEdit => ({ file: s.file, op: "set", path: ["enabled"], value: on });

/**
 * Enable `target` and, when it is an llm, disable the other enabled llm slots on its NPU (under swarm, a slot pinned
 * to another node keeps its own); `force` lets that stop a pinned one.
 */
export function npuLoadChanges(model: Model, target: ResolvedSlot, force: boolean): ChangeSet {
  const others = target.type === "llm" ? enabledNpuLlm(model).filter((s) => s.name !== target.name && mayShareNpu(s, target)) : [];
  const instead = others.length > 0 ? ` in place of ${others.map((s) => s.name).join(", ")}` : "";
  return {
    edits: [enable(target, true), ...others.map((s) => enable(s, false))],
    summary: `load ${target.name} on the NPU${instead}`,
    ...(force ? { force } : {}),
  };
}

/** Disable the llm slot that has the NPU; `npu.idle` when none is enabled. */
export function npuUnloadChanges(model: Model, force: boolean): ChangeSet {
  const loaded = enabledNpuLlm(model);
  if (loaded.length === 0) {
    throw new EditRefusal("npu.idle", "no llm slot is enabled on the NPU: nothing to unload", { npu_slots: npuSlots(model).map((s) => s.name) });
  }
  return { edits: loaded.map((s) => enable(s, false)), summary: `unload ${loaded.map((s) => s.name).join(", ")} from the NPU`, ...(force ? { force } : {}) };
}
