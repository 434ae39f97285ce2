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

/**
 * hal0-agents (`/mcp/agents`, issue 20): the sixteen tools remote coding
 * agents admitted with `hal0 bridge` use to run and teach the box's Hermes.
 * Route "agents": served by that mount only, never aliased by hal0-admin.
 * Start, message, cancel and memory_add are autonomous-write: admission is
 * the operator's consent, and Hermes keeps its own approvals. A skill write
 * or delete changes what the agent does, so a person approves it.
 */
export const AGENTS_READ_TOOLS: readonly SeedTool[] = [
  "agent_profile_list", "agent_run_status", "agent_run_events", "agent_run_wait", "agent_run_list", "agent_run_result",
  "profile_skill_list", "profile_skill_get", "profile_memory_list", "profile_persona_get",
].map((tool) => ({ tool, route: "agents" }));

export const AGENTS_WRITE_TOOLS: readonly SeedTool[] = [
  "agent_run_start", "agent_run_message", "agent_run_cancel", "profile_memory_add",
].map((tool) => ({ tool, route: "agents" }));

export const AGENTS_GATED_TOOLS: readonly SeedTool[] = [
  "profile_skill_put", "profile_skill_delete",
].map((tool) => ({ tool, route: "agents" }));
