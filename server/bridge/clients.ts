import { shellWord } from "../../reconciler/shell-word.js";

/**
 * Ready MCP client configuration for hal0-agents, as `hal0 bridge admit`
 * (and the Agents page) print it once, with the token in place: Claude
 * Code's `claude mcp add` line, Codex's `~/.codex/config.toml` block and
 * Cursor's `.cursor/mcp.json`. `url` is the mount (`…/mcp/agents`).
 */
export interface ClientConfigs {
  readonly claude_code: string;
  readonly codex: string;
  readonly cursor: string;
}

export function clientConfigs(url: string, token: string): ClientConfigs {
  return {
    claude_code: `claude mcp add --transport http hal0-agents ${shellWord(url)} --header "Authorization: Bearer ${token}"`,
    codex: `[mcp_servers.hal0-agents]\nurl = ${JSON.stringify(url)}\nhttp_headers = { Authorization = ${JSON.stringify(`Bearer ${token}`)} }`,
    cursor: JSON.stringify({ mcpServers: { "hal0-agents": { url, headers: { Authorization: `Bearer ${token}` } } } }, null, 2),
  };
}

