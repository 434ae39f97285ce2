import type { Model } from "../compiler/index.js";
import { allSlotConditions, type ResourceConditions } from "./conditions.js";
import type { Observed } from "./observed.js";
import type { StateStore } from "./state.js";

/**
 * Recomputes every slot's conditions from an observation and persists them
 * when they changed (an idle sweep writes nothing). Returns the current map.
 */
export async function refreshConditions(model: Model, observed: Observed, state: StateStore, now: () => number = Date.now, persist = true): Promise<Record<string, ResourceConditions>> {
  const [outcomes, previous] = await Promise.all([state.readOutcomes(), state.readConditions()]);
  const { next, changed } = allSlotConditions(model.slots, observed.slots, outcomes, previous, new Date(now()).toISOString());
  if (changed && persist) await state.writeConditions(next);
  return next;
}
