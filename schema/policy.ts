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

export function tierRank(tier: Tier): number {
  return TIERS.indexOf(tier);
}
