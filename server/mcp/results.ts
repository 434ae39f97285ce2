import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ApiError } from "../errors.js";
import { RawReply, type Caller } from "../route.js";

/** Success: the reply's JSON as the text content (what agents read; one serialisation, no structured copy). */
export function ok(result: unknown): CallToolResult {
  if (result instanceof RawReply) return { content: [{ type: "text", text: result.text }] };
  return { content: [{ type: "text", text: JSON.stringify(result ?? { ok: true }) }] };
}

/**
 * The full envelope, `isError: true` — the only result that is an error.
 * A schema refusal (`mcp.memory_schema`) also carries its problems as
 * `error.detail`, the field seed 001 names.
 */
export function failure(err: unknown): CallToolResult {
  const api = err instanceof ApiError ? err : new ApiError("system.internal", (err as Error).message ?? String(err));
  const detail = api.details.detail === undefined ? {} : { detail: api.details.detail };
  const envelope = { status: "error", error: { code: api.code, message: api.message, ...detail, details: api.details }, http_status: api.status };
  return { content: [{ type: "text", text: JSON.stringify(envelope) }], isError: true };
}

/**
 * Makes the SDK's own refusals (unknown tool, disabled tool, arguments that
 * are not an object) answer with hal0's envelope too: SDK 1.x builds them
 * through the server's `createToolError`.
 */
export function envelopeSdkErrors(server: McpServer, name: string, onBlocked?: (tool: string, err: ApiError) => void): void {
  (server as unknown as { createToolError: (message: string) => CallToolResult }).createToolError = (message) => sdkError(name, message, onBlocked);
}

/** The envelope for a refusal the SDK makes itself (unknown or disabled tool, arguments that are not an object). */
function sdkError(server: string, message: string, onBlocked?: (tool: string, err: ApiError) => void): CallToolResult {
  const disabled = /Tool (\S+) disabled/.exec(message);
  if (disabled) {
    const err = new ApiError("mcp.tool_not_allowed", `policy blocks ${disabled[1]} for this caller`, { tool: disabled[1] });
    onBlocked?.(disabled[1]!, err);
    return failure(err);
  }
  const unknown = /Tool (\S+) not found/.exec(message);
  if (unknown) return failure(new ApiError("mcp.unknown_tool", `${server} has no tool ${unknown[1]}`, { tool: unknown[1] }));
  return failure(new ApiError("validation.invalid", message));
}
