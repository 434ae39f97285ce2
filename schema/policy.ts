import { z } from "zod";
import { AgentId, ToolName } from "./names.js";
import { AUTONOMOUS_READ_TOOLS, AUTONOMOUS_WRITE_TOOLS, EXCLUDED_TOOLS, GATED_TOOLS } from "./data/seed-tiers.js";
import { AGENTS_GATED_TOOLS, AGENTS_READ_TOOLS, AGENTS_WRITE_TOOLS, HAL0_GATED_TOOLS, HAL0_READ_TOOLS, HAL0_WRITE_TOOLS } from "./data/hal0-tools.js";

/**
 * `policy.toml`: moves tools between tiers, globally (`[tiers]`) and per caller
 * identity (`[agents.<id>]`). Tiers start from the built-in default below.
 */

/** From loosest to strictest; the index is the strictness. */
export const TIERS = ["autonomous_read", "autonomous_write", "gated", "blocked"] as const;
export type Tier = (typeof TIERS)[number];

const TierLists = z.strictObject({
  autonomous_read: z.array(ToolName).default([]),
  autonomous_write: z.array(ToolName).default([]),
  gated: z.array(ToolName).default([]),
  blocked: z.array(ToolName).default([]),
});
export type TierLists = z.infer<typeof TierLists>;

export const PolicyFile = z.strictObject({
  tiers: TierLists.prefault({}),
  agents: z.record(AgentId, TierLists).default({}),
});
export type PolicyFile = z.infer<typeof PolicyFile>;

/** The built-in default: seed 001's three tables (and hal0's plan tools and hal0-agents' sixteen), and its excluded list as `blocked`. */
export function defaultTiers(): Map<string, Tier> {
  const tiers = new Map<string, Tier>();
  for (const { tool } of [...AUTONOMOUS_READ_TOOLS, ...HAL0_READ_TOOLS, ...AGENTS_READ_TOOLS]) tiers.set(tool, "autonomous_read");
  for (const { tool } of [...AUTONOMOUS_WRITE_TOOLS, ...HAL0_WRITE_TOOLS, ...AGENTS_WRITE_TOOLS]) tiers.set(tool, "autonomous_write");
  for (const { tool } of [...GATED_TOOLS, ...HAL0_GATED_TOOLS, ...AGENTS_GATED_TOOLS]) tiers.set(tool, "gated");
  for (const tool of EXCLUDED_TOOLS) tiers.set(tool, "blocked");
  return tiers;
}

/** hal0's own MCP servers, by which an agent file's `[mcp.servers.<id>]` names them. */
export type BuiltinServer = "hal0-admin" | "hal0-memory" | "hal0-agents";

/**
 * The builtin server a tool is hal0's as: hal0-memory for the memory_* rows
 * (hal0-admin also serves them, delegated: still hal0-memory's tools),
 * hal0-agents for its sixteen, hal0-admin for every other (the excluded
 * tools included). Undefined for a name hal0 does not have.
 */
export function builtinServerOf(tool: string): BuiltinServer | undefined {
  return SERVER_OF_TOOL.get(tool);
}

const SERVER_OF_TOOL: ReadonlyMap<string, BuiltinServer> = new Map<string, BuiltinServer>([
  ...EXCLUDED_TOOLS.map((tool) => [tool, "hal0-admin"] as const),
  ...[...AUTONOMOUS_READ_TOOLS, ...HAL0_READ_TOOLS, ...AGENTS_READ_TOOLS, ...AUTONOMOUS_WRITE_TOOLS, ...HAL0_WRITE_TOOLS, ...AGENTS_WRITE_TOOLS, ...GATED_TOOLS, ...HAL0_GATED_TOOLS, ...AGENTS_GATED_TOOLS]
    .map(({ tool, route }) => [tool, route === "memory" ? "hal0-memory" : route === "agents" ? "hal0-agents" : "hal0-admin"] as const),
]);

export function tierRank(tier: Tier): number {
  return TIERS.indexOf(tier);
}
