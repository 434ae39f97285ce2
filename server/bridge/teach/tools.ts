import type { BridgeToolDef } from "../tool.js";

/** hal0-agents' seven teaching tools (profile_skill_*, profile_memory_*, profile_persona_get): written on the teaching branch; empty until it is merged. */
export const TEACH_TOOLS: readonly BridgeToolDef[] = [];
