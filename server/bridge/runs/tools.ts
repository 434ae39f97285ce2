import type { BridgeToolDef } from "../tool.js";

/** hal0-agents' nine run tools (agent_profile_list, agent_run_*): written on the runs branch; empty until it is merged. */
export const RUN_TOOLS: readonly BridgeToolDef[] = [];
