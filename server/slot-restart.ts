import type { Model, ResolvedSlot } from "../compiler/index.js";
import { refreshConditions } from "../reconciler/conditions-store.js";
import { acquireLock, executePlan, LockedError, observe, planChanges, type StepResult } from "../reconciler/index.js";
import { isCode, type Change, type Plan } from "../schema/index.js";
import type { BoxService } from "./box.js";
import { ApiError } from "./errors.js";

/**
 * Restarts one slot's runner through the reconciler's executor, holding the
 * state folder's apply lock (so it never races an apply or a sweep): the
 * planner's change for the slot, forced to a `replace` when it runs (stop,
 * then start the desired spec) or a `create` when it does not. Nothing else
 * in the plan runs.
 */
export async function restartSlot(box: BoxService, model: Model, slot: ResolvedSlot): Promise<{ name: string; action: string; result: StepResult; plan: Plan }> {
  if (!slot.enabled) {
    throw new ApiError("slot.illegal_transition", `slot \`${slot.name}\` is disabled; load it (POST /api/slots/${slot.name}/load) instead of restarting it`, { name: slot.name, enabled: false });
  }
  let release: () => Promise<void>;
  try {
    release = await acquireLock(box.state.dir, `hal0 serve: restart slot ${slot.name}`);
  } catch (err) {
    if (err instanceof LockedError) throw new ApiError("apply.locked", err.message, { holder: err.holder });
    throw err;
  }
  try {
    const driver = await box.driver(model);
    const { observed, inventory } = await observe(model, driver, box.state, { health: false, hermesCredentials: box.options.hermesCredentials });
    const full = planChanges(model, observed, inventory);
    const change = restartChange(full.changes.find((c) => c.address === `slot.${slot.name}`), observed.slots[slot.name]?.running ?? false);
    const plan: Plan = { ...full, has_changes: true, changes: [change], warnings: full.warnings.filter((w) => w.address === change.address) };
    const { slots } = model.settings;
    const [result] = await executePlan(plan, { driver, state: box.state, cwd: model.root, healthTimeoutS: slots.health_timeout_s, stopGraceS: slots.stop_grace_s, parallel: 1 });
    // With /health probes: conditions say Ready only from an answer.
    await refreshConditions(model, (await observe(model, driver, box.state, { hermesCredentials: box.options.hermesCredentials })).observed, box.state, () => box.now()).catch(() => undefined);
    if (!result!.ok) {
      const code = result!.code && isCode(result!.code) ? result!.code : "slot.apply_failed";
      throw new ApiError(code, result!.error ?? `restarting slot ${slot.name} failed`, { name: slot.name, step: result });
    }
    return { name: slot.name, action: change.action, result: result!, plan };
  } finally {
    await release();
  }
}

/** The planner's change for the slot, made to restart it: replace when it runs, create when it does not. */
function restartChange(planned: Change | undefined, running: boolean): Change {
  if (!planned || planned.after === null) throw new ApiError("slot.illegal_transition", "the planner has no desired spec for this slot", {});
  const action = running ? "replace" : "create";
  return { ...planned, action, reason: running ? "restart" : planned.reason, destructive: running, downtime: running, changed_paths: planned.changed_paths.length > 0 || !running ? planned.changed_paths : ["restart"] };
}
