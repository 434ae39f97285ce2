import type { SeedTool } from "./seed-tiers.js";

/**
 * hal0-admin tools beyond seed 001: agents propose plan diffs. `plan_propose`
 * records a plan and writes nothing to the tree; `plan_submit` queues a
 * saved plan for a person (applied through the same path as REST).
 */
export const HAL0_READ_TOOLS: readonly SeedTool[] = [
  { tool: "plan_list", route: "GET /api/plans" },
  { tool: "plan_show", route: "GET /api/plans/{id}" },
];

export const HAL0_WRITE_TOOLS: readonly SeedTool[] = [
  { tool: "plan_propose", route: "POST /api/plans" },
];

export const HAL0_GATED_TOOLS: readonly SeedTool[] = [
  { tool: "plan_submit", route: "POST /api/plans/{id}/apply" },
];
