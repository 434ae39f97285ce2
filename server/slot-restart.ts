import type { Model, ResolvedSlot } from "../compiler/index.js";
import { converge, LockedError, type StepResult } from "../reconciler/index.js";
import { isCode, slotAddress, type Plan } from "../schema/index.js";
import type { BoxService } from "./box.js";
import { ApiError } from "./errors.js";

/**
 * Restarts one slot's runner: a converge of that slot alone with the planner
 * told to restart it (`replace`: stop, then start the desired spec when it
 * runs; create when it does not), under the state folder's apply lock (so it
 * never races an apply or a sweep). Nothing else in the box is planned.
 */
/** A disabled slot is not restarted (slot.illegal_transition): it is loaded. */
export function restartable(slot: ResolvedSlot): void {
  if (!slot.enabled) {
    throw new ApiError("slot.illegal_transition", `slot \`${slot.name}\` is disabled; load it (POST /api/slots/${slot.name}/load) instead of restarting it`, { name: slot.name, enabled: false });
  }
}

export async function restartSlot(box: BoxService, model: Model, slot: ResolvedSlot): Promise<{ name: string; action: string; result: StepResult; plan: Plan }> {
  restartable(slot);
  const address = slotAddress(slot.name);
  let done;
  try {
    done = await converge({ model, driver: await box.driver(model), state: box.state, hermesCredentials: box.options.hermesCredentials }, {
      holder: `hal0 serve: restart slot ${slot.name}`,
      plan: { replace: [address], only: { addresses: [address] } },
      parallel: 1,
      now: () => box.now(),
      signal: box.stoppingSignal, // the server stopping: 409 apply.interrupted, the runner left running
      review: (plan) => {
        const change = plan.changes.find((c) => c.address === address);
        if (change?.reason === "port_held") {
          // Its new port is held by a process hal0 did not start: refused, and the slot keeps running as it is.
          const held = plan.warnings.find((w) => w.address === address && w.code === "slot.port_in_use");
          throw new ApiError("slot.port_in_use", held?.message ?? `slot ${slot.name}'s port is held by a process hal0 did not start`, { name: slot.name, port: slot.port });
        }
        if (change?.reason === "unplaced") {
          // A swarm slot no ready node can take: a new service would not be placed, and the one Swarm holds for its node's return would be gone.
          const held = plan.warnings.find((w) => w.address === address && w.code === "slot.unplaced");
          throw new ApiError("slot.unplaced", held?.message ?? `slot ${slot.name}: no ready, active node of the swarm matches its placement`, { name: slot.name });
        }
        if (change === undefined || change.action === "no-op" || change.action === "delete") throw new ApiError("slot.illegal_transition", "the planner has no desired spec for this slot", {});
        return true;
      },
    });
  } catch (err) {
    if (err instanceof LockedError) throw new ApiError("apply.locked", err.message, { holder: err.holder });
    throw err;
  } finally {
    box.forgetLiveness(); // the runner moved: the next read observes it
  }
  const change = done.plan.changes.find((c) => c.address === address)!;
  const result = done.results.find((r) => r.address === address)!;
  if (!result.ok) {
    const code = result.code && isCode(result.code) ? result.code : "slot.apply_failed";
    throw new ApiError(code, result.error ?? `restarting slot ${slot.name} failed`, { name: slot.name, step: result });
  }
  return { name: slot.name, action: change.action, result, plan: done.plan };
}
