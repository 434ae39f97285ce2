import { z } from "zod";
import { AGENT_NAME_PATTERN, RESERVED_MCP_IDS, RESOURCE_ID_PATTERN, ToolPolicy, defaultAgentWorkspace, type Agent } from "../schema/index.js";
import type { CompiledAgent } from "./model.js";
import { tableOf, validPart, type ResourceFiles } from "./read.js";
import type { Reporter } from "./report.js";
import { didYouMean } from "./suggest.js";

const TOOL_LISTS = ["allow", "gated", "blocked"] as const;

/**
 * The rules of `agents/<name>.toml` that need more than one key: `[agent]
 * name` repeats the file stem (`agent.name_mismatch`), a `builtin = true`
 * server is one hal0 serves (`agent.builtin_unknown`), and no tool is on two
 * of `[tools]` allow / gated / blocked (`agent.tools_overlap`, each later
 * listing related to the first). Agents in name order, so reports are stable.
 * An agent file that did not validate is checked too, rule by rule, on the
 * parts each rule reads when those are valid on their own — unless its
 * schema_version is not one hal0 reads (a newer file is never half-read).
 */
export function linkAgents(agents: ResourceFiles<Agent>, reporter: Reporter): void {
  const names = [...new Set([...agents.valid.keys(), ...agents.broken.keys()])].sort();
  for (const name of names) {
    const valid = agents.valid.get(name);
    const parts = valid ? { file: valid.file, ...partsOfValid(valid.value) } : partsOfBroken(agents.broken.get(name)!.file, agents.broken.get(name)!.value);
    if (parts === undefined) continue;
    const { file, agentName, builtin, tools } = parts;
    if (agentName !== undefined && agentName !== name) {
      reporter.report("agent.name_mismatch", { file, path: ["agent", "name"], target: "value" }, `\`${agentName}\` is not the file's name \`${name}\``,
        `An agent's name is its file's name: write \`name = "${name}"\`, or rename the file to agents/${agentName}.toml.`);
    }
    for (const id of builtin) {
      if ((RESERVED_MCP_IDS as readonly string[]).includes(id)) continue;
      reporter.report("agent.builtin_unknown", { file, path: ["mcp", "servers", id, "builtin"], target: "value" }, `\`${id}\` is not one of hal0's own servers`,
        `Only ${RESERVED_MCP_IDS.join(", ")} are builtin.${didYouMean(id, RESERVED_MCP_IDS)} Any other server needs \`url\` and \`builtin = false\`.`);
    }
    if (tools === undefined) continue;
    const seen = new Map<string, Array<string | number>>();
    for (const list of TOOL_LISTS) {
      tools[list].forEach((tool, index) => {
        const path = ["tools", list, index];
        const first = seen.get(tool);
        if (first === undefined) {
          seen.set(tool, path);
          return;
        }
        reporter.report("agent.tools_overlap", { file, path, target: "value" }, `\`${tool}\` is on two tool lists`,
          `A tool is on at most one of allow, gated and blocked; \`${tool}\` is already under \`${String(first[1])}\`.`,
          [{ file, path: first, target: "value", message: "first listed here" }]);
      });
    }
  }
}

/** What the agent rules read: `[agent] name`, the ids of servers marked builtin (sorted), `[tools]`. */
interface AgentParts {
  readonly file: string;
  readonly agentName?: string;
  readonly builtin: readonly string[];
  readonly tools?: Agent["tools"];
}

function partsOfValid(agent: Agent): Omit<AgentParts, "file"> {
  return { agentName: agent.agent.name, builtin: Object.keys(agent.mcp.servers).filter((id) => agent.mcp.servers[id]!.builtin).sort(), tools: agent.tools };
}

const AgentName = z.string().regex(AGENT_NAME_PATTERN);
const ServerId = z.string().regex(RESOURCE_ID_PATTERN);

function partsOfBroken(file: string, raw: Record<string, unknown>): AgentParts | undefined {
  if (raw.schema_version !== undefined && raw.schema_version !== 1) return undefined;
  const servers = tableOf(tableOf(raw.mcp)?.servers) ?? {};
  return {
    file,
    agentName: validPart(AgentName, tableOf(raw.agent)?.name),
    builtin: Object.keys(servers).filter((id) => ServerId.safeParse(id).success && tableOf(servers[id])?.builtin === true).sort(),
    tools: validPart(ToolPolicy, raw.tools ?? {}),
  };
}

/** The valid agents as the model holds them: by name, each with its workspace made explicit. Call only for a tree without errors. */
export function compileAgents(agents: ResourceFiles<Agent>): Record<string, CompiledAgent> {
  const out = Object.create(null) as Record<string, CompiledAgent>; // as the model's other records (compile.ts, recordOf)
  for (const name of [...agents.valid.keys()].sort()) {
    const { file, value } = agents.valid.get(name)!;
    const servers = Object.fromEntries(Object.keys(value.mcp.servers).sort().map((id) => [id, value.mcp.servers[id]!]));
    out[name] = {
      name,
      file,
      display: value.agent.display === "" ? name : value.agent.display,
      workspace: value.agent.workspace === "" ? defaultAgentWorkspace(name) : trimSlash(value.agent.workspace),
      servers,
      tools: value.tools,
    };
  }
  return out;
}

function trimSlash(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  return trimmed === "" ? "/" : trimmed.replace(/\/{2,}/g, "/");
}

/** What an agent's policy says about one tool of one server. */
export type ToolVerdict = "allow" | "gated" | "blocked" | "unknown_server" | "unknown_tool";

/**
 * The verdict for `tool` on `server`: `unknown_server` when the agent has no
 * `[mcp.servers.<server>]` or it is disabled, then the first list naming the
 * tool in the order blocked → gated → allow, else `unknown_tool`. The
 * compiler keeps the lists disjoint; the order only matters for a
 * hand-built agent, and always favours the stricter list. Pure.
 */
export function classifyTool(agent: Pick<CompiledAgent, "servers" | "tools">, server: string, tool: string): ToolVerdict {
  const entry = Object.hasOwn(agent.servers, server) ? agent.servers[server] : undefined;
  if (entry === undefined || !entry.enabled) return "unknown_server";
  if (agent.tools.blocked.includes(tool)) return "blocked";
  if (agent.tools.gated.includes(tool)) return "gated";
  if (agent.tools.allow.includes(tool)) return "allow";
  return "unknown_tool";
}
