import { randomUUID } from "node:crypto";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "pino";
import { ApiError, envelope } from "../errors.js";
import { jsonOf } from "../frozen-reply.js";
import { inputRefusal } from "../input.js";
import { RawReply } from "../route.js";
import type { Dispatcher } from "../dispatch.js";
import { mcpCode } from "../metrics/registry.js";
import { blockedRefusal } from "./policy-sync.js";

/** Success: the reply's JSON as the text content (what agents read; one serialisation, no structured copy). */
export function ok(result: unknown): CallToolResult {
  if (result instanceof RawReply) return { content: [{ type: "text", text: result.text }] };
  return { content: [{ type: "text", text: jsonOf(result ?? { ok: true }) }] };
}

/**
 * The full envelope, `isError: true` — the only result that is an error.
 * A schema refusal (`mcp.memory_schema`) also carries its problems as
 * `error.detail`, the field seed 001 names.
 */
export function failure(err: unknown, logger?: Pick<Logger, "error">): CallToolResult {
  const api = err instanceof ApiError ? err : internalError(err, logger);
  const detail = api.details.detail === undefined ? {} : { detail: api.details.detail };
  const { error } = envelope(api);
  const reply = { status: "error", error: { code: error.code, message: error.message, ...detail, details: error.details }, http_status: api.status };
  return { content: [{ type: "text", text: JSON.stringify(reply) }], isError: true };
}

/**
 * Makes the SDK's own refusals (unknown tool, disabled tool, arguments that
 * are not an object) answer with hal0's envelope too: SDK 1.x builds them
 * through the server's `createToolError`. And judges every `tools/call`'s
 * arguments as they arrived, before the SDK's schemas copy them (which
 * would drop a top-level `__proto__` silently) and before any tool walks
 * them: nested deeper than 64 is `request.too_deep`, a `__proto__` /
 * `constructor` / `prototype` key anywhere is `validation.invalid` naming
 * its path (server/input.ts), each the envelope with `isError`.
 * `onBlocked` hears of a blocked tool and of refused arguments (the audit).
 */
export function envelopeSdkErrors(server: McpServer, name: string, onBlocked?: (tool: string, err: ApiError) => void): void {
  (server as unknown as { createToolError: (message: string) => CallToolResult }).createToolError = (message) => sdkError(name, message, onBlocked, (tool) => blockedRefusal(server, tool));
  guardToolArguments(server, name, onBlocked);
  invalidParamsAsSuch(server);
}

/** JSON-RPC's code for a request whose params do not fit its method. */
const INVALID_PARAMS = -32602;

/**
 * Makes a request whose params do not fit its method (`tools/call` without a
 * `name`, or with a number for one; `tools/list` with a number for `cursor`)
 * answer -32602 invalid params naming each field. The SDK parses the params
 * with zod in each handler, before the handler runs, and answered what zod
 * threw as -32603 internal error carrying zod's raw issue list. Only what the
 * parse throws (synchronously, before any handler's work) is caught here.
 */
function invalidParamsAsSuch(server: McpServer): void {
  const handlers = (server.server as unknown as { _requestHandlers?: Map<string, RequestHandler> })._requestHandlers;
  if (!handlers) throw new Error("server/mcp/results.ts: the MCP SDK has no request handler table (SDK changed?)");
  for (const [method, handler] of handlers) {
    handlers.set(method, (request, extra) => {
      try {
        return handler(request, extra);
      } catch (err) {
        // zod's error (the SDK parses with zod/mini: `$ZodError`; full zod: `ZodError`).
        const { name, issues } = (err ?? {}) as { name?: unknown; issues?: Array<{ path: PropertyKey[]; message: string }> };
        if (name !== "ZodError" && name !== "$ZodError") throw err;
        if (!Array.isArray(issues)) throw err;
        const fields = issues.slice(0, 20).map((i) => ({ loc: i.path.map(String), msg: i.message }));
        throw Object.assign(new Error(`invalid params of ${method}: ${fields.map((f) => `${f.loc.join(".") || "params"}: ${f.msg}`).join("; ")}`), { code: INVALID_PARAMS, data: { fields } });
      }
    });
  }
}

type RequestHandler = (request: { params?: { name?: unknown; arguments?: unknown } }, extra: unknown) => Promise<unknown>;

/**
 * Wraps the SDK's `tools/call` handler (registered with the first tool):
 * the raw request is judged before the SDK parses it. SDK 1.x keeps its
 * handlers in the low-level server's `_requestHandlers`; if that moves, the
 * server refuses to start rather than run unguarded.
 */
function guardToolArguments(server: McpServer, name: string, onRefused?: (tool: string, err: ApiError) => void): void {
  const handlers = (server.server as unknown as { _requestHandlers?: Map<string, RequestHandler> })._requestHandlers;
  const inner = handlers?.get("tools/call");
  const tools = (server as unknown as { _registeredTools?: Record<string, unknown> })._registeredTools;
  if (!handlers || !inner || typeof tools !== "object" || tools === null) throw new Error("server/mcp/results.ts: the MCP SDK has no tools/call handler or tool table where hal0 guards tool calls (SDK changed?)");
  handlers.set("tools/call", (request, extra) => {
    // The SDK looks a tool up in a plain object: `constructor` or `toString` would be found there, and answered as a disabled tool.
    const called = request.params?.name;
    // No tool named (no name, or not a string): not a tool call at all, refused by the SDK's parse as invalid params (-32602).
    if (typeof called !== "string") return inner(request, extra);
    if (!Object.hasOwn(tools, called)) return Promise.resolve(unknownTool(name, called));
    const refusal = argumentsRefusal(request.params?.arguments) ?? inputRefusal(request.params?.arguments, []);
    if (!refusal) return inner(request, extra);
    const tool = request.params?.name;
    if (typeof tool === "string" && tool.length <= 128) onRefused?.(tool, refusal);
    return Promise.resolve(failure(refusal));
  });
}

/**
 * A tool call's `arguments` that are there but not an object (`[1]`, `"x"`,
 * `5`, `null`): refused here as every bad input is, naming the field; the
 * SDK would answer a JSON-RPC internal error carrying zod's raw issue list.
 */
function argumentsRefusal(args: unknown): ApiError | undefined {
  if (args === undefined || (typeof args === "object" && args !== null && !Array.isArray(args))) return undefined;
  const got = args === null ? "null" : Array.isArray(args) ? "an array" : `a ${typeof args}`;
  return new ApiError("validation.invalid", `invalid request: arguments: a tool call's arguments are an object, not ${got}`, {
    fields: [{ loc: ["arguments"], msg: `expected an object, got ${got}`, type: "object_type" }],
  });
}

/** The envelope for a refusal the SDK makes itself (unknown or disabled tool, arguments that are not an object). */
function sdkError(server: string, message: string, onBlocked?: (tool: string, err: ApiError) => void, why?: (tool: string) => ApiError | undefined): CallToolResult {
  const disabled = /Tool (\S+) disabled/.exec(message);
  if (disabled) {
    const err = why?.(disabled[1]!) ?? new ApiError("mcp.tool_not_allowed", `policy blocks ${disabled[1]} for this caller`, { tool: disabled[1] });
    onBlocked?.(disabled[1]!, err);
    return failure(err);
  }
  const unknown = /Tool (\S+) not found/.exec(message);
  if (unknown) return unknownTool(server, unknown[1]!);
  return failure(new ApiError("validation.invalid", message));
}

/**
 * A fault that is not one of hal0's coded refusals (a bug): as REST answers
 * it (app.ts), `system.internal` with only a request id, the error itself
 * in the server's log under that id. Its text (a path, a value) never
 * reaches the caller.
 */
function internalError(err: unknown, logger?: Pick<Logger, "error">): ApiError {
  const requestId = randomUUID();
  logger?.error({ reqId: requestId, err }, "unhandled error in an MCP tool call");
  return new ApiError("system.internal", `internal error (request ${requestId})`, { request_id: requestId });
}

function unknownTool(server: string, tool: string): CallToolResult {
  return failure(new ApiError("mcp.unknown_tool", `${server} has no tool ${tool}`, { tool }));
}

/**
 * One tool call of a server that is not the route table's (hal0-memory,
 * hal0-agents): its reply or its error envelope, timed into the server's
 * metrics by tool and outcome (`ok`, `pending_approval`, or the error code).
 */
export async function timedCall(d: Pick<Dispatcher, "metrics" | "logger">, tool: string, run: () => Promise<unknown>): Promise<CallToolResult> {
  const started = performance.now();
  let code = "ok";
  try {
    const result = await run();
    code = mcpCode(result);
    return ok(result);
  } catch (err) {
    code = err instanceof ApiError ? err.code : "system.internal";
    return failure(err, d.logger);
  } finally {
    d.metrics?.observeRequest("mcp", tool, "call", code, performance.now() - started);
  }
}
