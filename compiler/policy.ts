import {
  EXCLUDED_TOOLS, NEVER_LOOSEN_TOOLS, TIERS, builtinServerOf, defaultTiers, tierRank,
  type PolicyFile, type Tier, type TierLists,
} from "../schema/index.js";
import { classifyTool } from "./link-agents.js";
import type { BoundAgentFile, CompiledAgent, CompiledPolicy } from "./model.js";
import type { Parsed } from "./read.js";
import type { Reporter } from "./report.js";
import { didYouMean } from "./suggest.js";

const NEVER_LOOSEN = new Set([...NEVER_LOOSEN_TOOLS, ...EXCLUDED_TOOLS]);

/**
 * Tool tiers: the built-in default (seed 001), moved by `[tiers]`, then per
 * caller by `[agents.<id>]`. Stricter moves are always allowed; looser ones
 * except for the never-loosen set. Every known tool ends in exactly one tier.
 * Then each bundled agent's file (`agents/<P>.toml`, `agents`) binds the
 * identity `hermes__<P>` (`hermes` for `default`, see boundIdentity): for hal0's own tools it has the last word by
 * server and tool (`classifyTool`) — allow keeps the tier, gated is gated at
 * least, blocked, unknown_tool and unknown_server are blocked. Strictest wins.
 */
export function compilePolicy(file: Parsed<PolicyFile> | undefined, reporter: Reporter, agentFiles: Readonly<Record<string, CompiledAgent>> = {}): CompiledPolicy {
  const base = defaultTiers();
  const global = file ? applyMoves(base, file.value.tiers, { file: file.file, prefix: ["tiers"], scope: "the built-in default" }, reporter) : base;
  const moved = new Map<string, Map<string, Tier>>();
  for (const id of Object.keys(file?.value.agents ?? {}).sort()) {
    moved.set(id, applyMoves(global, file!.value.agents[id]!, { file: file!.file, prefix: ["agents", id], scope: "`[tiers]`" }, reporter));
  }
  const bound: Record<string, BoundAgentFile> = {};
  for (const name of Object.keys(agentFiles).sort()) {
    const id = boundIdentity(name);
    const agent = agentFiles[name]!;
    const tiers = new Map(moved.get(id) ?? global);
    const verdicts: Record<string, BoundAgentFile["verdicts"][string]> = {};
    warnRefused(file, id, agent, reporter);
    for (const [tool, tier] of [...tiers].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const verdict = classifyTool(agent, builtinServerOf(tool) ?? "hal0-admin", tool);
      if (verdict === "allow") continue;
      const cap: Tier = verdict === "gated" ? "gated" : "blocked";
      if (tierRank(cap) <= tierRank(tier)) continue;
      tiers.set(tool, cap);
      verdicts[tool] = verdict;
    }
    moved.set(id, tiers);
    bound[id] = { file: agent.file, verdicts };
  }
  const agents: Record<string, Record<string, Tier>> = {};
  for (const id of [...moved.keys()].sort()) {
    agents[id] = sortedRecord(new Map([...moved.get(id)!].filter(([tool, tier]) => global.get(tool) !== tier)));
  }
  return Object.keys(bound).length > 0 ? { tiers: sortedRecord(global), agents, bound } : { tiers: sortedRecord(global), agents };
}

/**
 * The identity `agents/<name>.toml` binds: the Hermes profile `<name>`'s
 * agent token, `hermes__<name>`; `default` is the default profile, whose
 * token is `hermes` (reconciler/hermes-plan.ts hermesIdentity).
 */
export function boundIdentity(name: string): string {
  return name === "default" ? "hermes" : `hermes__${name}`;
}

/** A tool `[agents.<id>]` of policy.toml puts in a tier other than blocked that the file binding `id` refuses: a warning each (the file wins). */
function warnRefused(file: Parsed<PolicyFile> | undefined, id: string, agent: CompiledAgent, reporter: Reporter): void {
  const lists = file?.value.agents[id];
  if (!file || !lists) return;
  for (const tier of TIERS) {
    if (tier === "blocked") continue;
    lists[tier].forEach((tool, index) => {
      const server = builtinServerOf(tool);
      if (server === undefined) return;
      const verdict = classifyTool(agent, server, tool);
      if (verdict === "allow" || verdict === "gated") return;
      const why = verdict === "blocked" ? "blocks it" : verdict === "unknown_tool" ? "lists it nowhere" : `does not list ${server}`;
      reporter.report("policy.agent_file_refuses", { file: file.file, path: ["agents", id, tier, index], target: "value" }, `${agent.file} refuses \`${tool}\` for ${id}`,
        `${agent.file} binds ${id} and ${why}, so \`${tool}\` stays refused for ${id} whatever tier this puts it in: list it in the file's [tools] (allow or gated), or drop it here.`,
        [{ file: agent.file, path: ["tools"], target: "key", message: "the agent file's tool lists" }]);
    });
  }
}

interface Scope {
  file: string;
  prefix: Array<string | number>;
  /** What the moves are relative to, for messages. */
  scope: string;
}

function applyMoves(from: ReadonlyMap<string, Tier>, lists: TierLists, where: Scope, reporter: Reporter): Map<string, Tier> {
  const out = new Map(from);
  const firstSeen = new Map<string, Array<string | number>>();
  for (const tier of TIERS) {
    lists[tier].forEach((tool, index) => {
      const path = [...where.prefix, tier, index];
      const site = { file: where.file, path, target: "value" as const };
      const current = from.get(tool);
      if (current === undefined) {
        reporter.report("policy.unknown_tool", site, `unknown tool \`${tool}\``, `hal0 has no tool named \`${tool}\`.${didYouMean(tool, from.keys())}`);
        return;
      }
      const earlier = firstSeen.get(tool);
      if (earlier) {
        reporter.report("policy.tool_in_two_tiers", site, `\`${tool}\` is in two tiers`,
          `A tool belongs to exactly one tier; \`${tool}\` is already listed under \`${String(earlier[earlier.length - 2])}\`.`,
          [{ file: where.file, path: earlier, target: "value", message: `\`${tool}\` first listed here` }]);
        return;
      }
      firstSeen.set(tool, path);
      if (tierRank(tier) < tierRank(current) && NEVER_LOOSEN.has(tool)) {
        reporter.report("policy.loosen_denied", site, `\`${tool}\` may not be loosened to ${tier}`,
          `\`${tool}\` is ${current} in ${where.scope} and is never moved to a looser tier (deletes, config_write, provider_credential_write and the excluded tools).`);
        return;
      }
      out.set(tool, tier);
    });
  }
  return out;
}

function sortedRecord(map: ReadonlyMap<string, Tier>): Record<string, Tier> {
  const out: Record<string, Tier> = {};
  for (const key of [...map.keys()].sort()) out[key] = map.get(key)!;
  return out;
}

/** The tier of `tool` for a caller, or undefined for a tool hal0 does not have. */
export function tierFor(policy: CompiledPolicy, tool: string, agent?: string): Tier | undefined {
  const override = agent === undefined ? undefined : policy.agents[agent]?.[tool];
  return override ?? policy.tiers[tool];
}
