import type { BoxService } from "../box.js";
import { lifecycleOf, observeLiveness, probeHealth } from "../slot-view.js";

/**
 * Each slot's lifecycle state as `GET /api/slots/{name}/state` reports it:
 * one liveness observation, the recorded outcomes and the steps under way for the whole box, and
 * a `/health` probe (1 s at most, in parallel) of each running slot.
 */
export async function slotStates(box: BoxService): Promise<Map<string, string>> {
  const model = await box.model();
  const [seen, outcomes, steps] = await Promise.all([observeLiveness(box, model), box.state.readOutcomes(), box.state.readSteps()]);
  const slots = Object.values(model.slots);
  const driver = await box.driver(model);
  const health = await Promise.all(slots.map((s) => probeHealth(seen.get(s.name), driver)));
  return new Map(slots.map((s, i) => [s.name, lifecycleOf(s, seen.get(s.name), health[i]!, outcomes[s.name]?.ok, steps[s.name])]));
}
