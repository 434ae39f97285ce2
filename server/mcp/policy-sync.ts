import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import { tierFor, type CompiledPolicy } from "../../compiler/index.js";
import type { ApiError } from "../errors.js";
import { policyBlocks } from "../identity/access.js";
import type { Caller } from "../route.js";

/** A session's tools, how it reads the policy in force, which tools that policy blocks for its caller, and the policy applied last. */
interface Follower {
  readonly tools: ReadonlyMap<string, RegisteredTool>;
  readonly current: () => Promise<CompiledPolicy>;
  readonly blocked: (policy: CompiledPolicy, tool: string) => boolean;
  /** Why the policy blocks `tool` for the caller, as a fresh call of it would be refused (undefined when it does not). */
  readonly refusal: (policy: CompiledPolicy, tool: string) => ApiError | undefined;
  policy: CompiledPolicy;
}

const followers = new WeakMap<McpServer, Follower>();

/** What a session's server names to follow policy.toml. */
export interface Following {
  readonly tools: ReadonlyMap<string, RegisteredTool>;
  readonly caller: Pick<Caller, "kind" | "agent">;
  /** Where the policy in force is read (the box). */
  readonly box: { model(): Promise<{ readonly policy: CompiledPolicy }> };
  /** Per tool, the tools whose tier it also meets (itself and those that read what it reads); absent: itself alone. */
  readonly peers?: ReadonlyMap<string, readonly string[]>;
  /** The refusal of a tool the caller may not call whatever the policy says (a surface its token does not reach), else undefined. */
  readonly outOfReach?: (tool: string) => ApiError | undefined;
}

/**
 * Makes a session's tools follow policy.toml, which may change while the
 * session is open: a tool the policy blocks for the caller (the strictest
 * tier of it and its peers) is disabled (neither listed nor callable:
 * `mcp.tool_not_allowed`), and so is one out of the caller's reach
 * (`outOfReach`, its own refusal), the others enabled. An operator is a person:
 * tiers gate agents, not them. Applied now, and again by `syncTools`
 * whenever the policy in force is another one, which then tells the client
 * `notifications/tools/list_changed`.
 */
export function followPolicy(server: McpServer, o: Following, policy: CompiledPolicy): void {
  /** The tool (it, or a peer whose reads it shares) the policy blocks for the caller, if any: the strictest tier of them is blocked. */
  const blockedBy = (p: CompiledPolicy, name: string): string | undefined =>
    o.caller.kind === "operator" ? undefined : (o.peers?.get(name) ?? [name]).find((t) => (tierFor(p, t, o.caller.agent) ?? "blocked") === "blocked");
  const blocked = (p: CompiledPolicy, name: string) => o.outOfReach?.(name) !== undefined || blockedBy(p, name) !== undefined;
  for (const [name, tool] of o.tools) tool.enabled = !blocked(policy, name);
  const refusal = (p: CompiledPolicy, name: string): ApiError | undefined => {
    const reach = o.outOfReach?.(name);
    if (reach !== undefined) return reach;
    if (o.caller.kind !== "agent" || o.caller.agent === undefined) return undefined;
    const by = blockedBy(p, name);
    if (by === undefined) return undefined;
    return by === name ? policyBlocks(p, name, o.caller.agent) : policyBlocks(p, by, o.caller.agent, `, and ${name} reads what it reads`, { tool: name, by });
  };
  followers.set(server, { tools: o.tools, blocked, refusal, current: async () => (await o.box.model()).policy, policy });
}

/** The refusal a session's disabled tool answers with: as a call of it would be refused under the policy the session follows (naming an agent file that is why). */
export function blockedRefusal(server: McpServer, tool: string): ApiError | undefined {
  const f = followers.get(server);
  return f?.refusal(f.policy, tool);
}

/**
 * Brings a session's tools in step with the policy in force (`policy`, else
 * the box's own): run before each request on the session, and for every
 * session when a change is committed. A tree that does not compile keeps the
 * tools as they are.
 */
export async function syncTools(server: McpServer, policy?: CompiledPolicy): Promise<void> {
  const f = followers.get(server);
  if (!f) return;
  const now = policy ?? (await f.current().catch(() => undefined));
  if (now === undefined || now === f.policy) return;
  f.policy = now;
  let changed = false;
  for (const [name, tool] of f.tools) {
    const enabled = !f.blocked(now, name);
    if (tool.enabled !== enabled) {
      tool.enabled = enabled;
      changed = true;
    }
  }
  if (changed && server.isConnected()) server.sendToolListChanged();
}
