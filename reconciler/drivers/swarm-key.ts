import { StateKey } from "./state-key.js";

/**
 * The box's API key for the swarm runtime's runners, kept in
 * `<state>/swarm-api-key` (0600; see StateKey). Made by the first start of a
 * swarm slot and then passed to every runner as a Swarm secret; hal0's probes
 * and reads of a slot send it. It is never in argv, a plan, a reply or a log.
 */
export class SwarmKey extends StateKey {
  constructor(stateDir: string) {
    super(stateDir, "swarm-api-key");
  }
}
