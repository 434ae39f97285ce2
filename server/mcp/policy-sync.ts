import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CompiledPolicy } from "../../compiler/index.js";

/** What a session's server needs to follow policy.toml: its tools, how to read the policy in force, which tools it blocks. */
interface Follower {
  readonly tools: ReadonlyMap<string, RegisteredTool>;
  readonly current: () => Promise<CompiledPolicy>;
  readonly blocked: (policy: CompiledPolicy, tool: string) => boolean;
  policy: CompiledPolicy;
}

const followers = new WeakMap<McpServer, Follower>();

/**
 * Makes a session's tools follow policy.toml, which may change while the
 * session is open: a tool the policy blocks for the caller is disabled
 * (neither listed nor callable: `mcp.tool_not_allowed`), the others enabled.
 * Applied now, and again by `syncTools` whenever the policy in force is
 * another one, which then tells the client `notifications/tools/list_changed`.
 */
export function followPolicy(server: McpServer, follower: Omit<Follower, "policy">, policy: CompiledPolicy): void {
  for (const [name, tool] of follower.tools) tool.enabled = !follower.blocked(policy, name);
  followers.set(server, { ...follower, policy });
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
