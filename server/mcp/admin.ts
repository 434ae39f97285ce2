import { randomUUID } from "node:crypto";
import { McpServer, type RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { CompiledPolicy } from "../../compiler/index.js";
import { invoke, type Call, type Dispatcher } from "../dispatch.js";
import { callTier, queueForPerson, withDryRunVerdict } from "../verdict.js";
import { ApiError } from "../errors.js";
import { auditRefusal } from "../audit.js";
import { toolTier } from "../identity/access.js";
import { scopeRefusal, type Identity } from "../identity/identify.js";
import { checkPathArgs, pathParams } from "../path-args.js";
import { callMemoryTool } from "../memory/service.js";
import type { Caller, Route } from "../route.js";
import type { ToolDef } from "./catalog.js";
import { followPolicy } from "./policy-sync.js";
import { envelopeSdkErrors, failure, ok } from "./results.js";
import { mcpCode } from "../metrics/registry.js";

/**
 * One hal0-admin MCP server (per session): every tool of the catalog the
 * caller's policy does not block, each taking `{"args": {...}}`. Reads and
 * autonomous writes run in process through `invoke` (the REST path, no HTTP
 * hop); gated calls are validated, planned and queued for a person.
 * The memory_* tools are hal0-memory's: a token minted without `mcp:memory`
 * (`identity`'s scopes) neither lists nor calls them here
 * (`auth.scope_denied`), as it cannot open /mcp/memory.
 */
export function adminServer(d: Dispatcher, catalog: readonly ToolDef[], policy: CompiledPolicy, caller: Caller, version: string, identity?: Pick<Identity, "kind" | "name" | "scopes">): McpServer {
  const server = new McpServer({ name: "hal0-admin", version }, { capabilities: { tools: { listChanged: true } } });
  const tools = new Map<string, RegisteredTool>();
  const peers = new Map<string, readonly string[]>();
  for (const tool of catalog) {
    tools.set(tool.name, server.registerTool(tool.name, { description: tool.description, inputSchema: inputSchemaOf(tool), annotations: tool.annotations }, async (params) => {
      return callTool(d, tool, (params as { args?: Record<string, unknown> }).args ?? {}, caller);
    }));
    peers.set(tool.name, [tool.name, ...(tool.route?.revealPeers ?? [])]);
  }
  // A blocked tool (or one that reads what a blocked tool reads: its peers) is neither listed nor callable: the SDK answers a disabled tool,
  // which createToolError turns into mcp.tool_not_allowed. Anonymous callers see every tool a read reaches.
  const memory = catalog.filter((t) => t.memory).map((t) => t.name);
  const outOfReach = (name: string) => (memory.includes(name) && identity !== undefined ? scopeRefusal(identity, "mcp:memory") : undefined);
  followPolicy(server, { tools, caller, box: d.box, peers, outOfReach }, policy);
  envelopeSdkErrors(server, "hal0-admin", (name, err) => auditRefusal(d, name, caller, err));
  return server;
}

const inputSchemas = new WeakMap<ToolDef, z.ZodType>();

/**
 * What the SDK validates and advertises for a tool: `{args: {...}}`, any object
 * accepted (the path rules and the route's own schemas answer with envelopes),
 * the advertised JSON Schema carried as metadata. Built once per tool.
 */
function inputSchemaOf(tool: ToolDef): z.ZodObject {
  let schema = inputSchemas.get(tool);
  if (!schema) {
    schema = z.object({ args: z.looseObject({}).optional().meta(tool.argsSchema) }).meta({ required: ["args"] });
    inputSchemas.set(tool, schema);
  }
  return schema as z.ZodObject;
}

async function callTool(d: Dispatcher, tool: ToolDef, args: Record<string, unknown>, caller: Caller): Promise<CallToolResult> {
  const started = performance.now();
  let code = "ok";
  /** The call once its arguments were read, and whether it reached `queueForPerson` or `invoke` (which audit it themselves). */
  let call: Call | undefined;
  let invoked = false;
  try {
    if (tool.memory || !tool.route) {
      const result = await callMemoryTool(d, tool.name, args, caller, "admin");
      code = mcpCode(result);
      return ok(result);
    }
    const route = tool.route;
    const model = await d.box.model();
    const floor = toolTier(model.policy, route, tool.name, caller);
    call = toCall(route, tool.name, args, caller);
    // An agent's write is judged by what it does, after compile and plan (the tool's tier is only its floor).
    const judged = await callTier(d, route, floor, call);
    invoked = true;
    if (judged.tier === "gated") {
      code = "pending_approval";
      return ok(await queueForPerson(d, route, tool.name, call, started));
    }
    return ok(withDryRunVerdict(wrapList(route, await invoke(d, route, judged.call)), judged.dryRun));
  } catch (err) {
    code = err instanceof ApiError ? err.code : "system.internal";
    // A call of a route's tool refused before it was queued or run (its arguments, its tier, a change the judging plan refuses) is audited too, as on REST.
    // Past that, `invoke` and `queueForPerson` audited it, and a memory tool's call is hal0-memory's, which audits its own (as on /mcp/memory).
    if (err instanceof ApiError && !invoked && !tool.memory && tool.route) {
      d.audit.record({ call: call ?? { params: {}, query: {}, body: undefined, caller: { ...caller, via: "mcp" }, requestId: randomUUID(), tool: tool.name }, route: tool.route, outcome: "error", errorCode: err.code, durationMs: performance.now() - started, tool: tool.name });
    }
    return failure(err, d.logger);
  } finally {
    d.metrics?.observeRequest("mcp", tool.name, "call", code, performance.now() - started);
  }
}

/** Path args checked and decoded; for GET and DELETE the rest is the query, else the route's query fields are and the rest is the body. */
function toCall(route: Route, tool: string, args: Record<string, unknown>, caller: Caller): Call {
  const params = checkPathArgs(route, args);
  const toolBody = toolBodyOf(route, tool, args);
  const names = new Set(pathParams(route.path).map((p) => p.name));
  const rest = Object.fromEntries(Object.entries(args).filter(([k]) => !names.has(k) && k !== "base"));
  const queryKeys = new Set(Object.keys((route.query as { shape?: object } | undefined)?.shape ?? {}));
  const toQuery = route.method === "GET" || route.method === "DELETE" || !route.body;
  const query: Record<string, unknown> = {};
  const body: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rest)) {
    if (toQuery || queryKeys.has(k)) {
      // A query argument given as null is left out (its default), as `base: null` is: a URL has no spelling for null, and the
      // text "null" would be a value (model_list's q: null matched no model, capability_list's section: null was an unknown section).
      if (v === null) continue;
      query[k] = Array.isArray(v) ? v.map(String) : typeof v === "object" ? JSON.stringify(v) : String(v);
    } else body[k] = v;
  }
  const base = baseOf(args.base);
  return { params, query, body: toQuery ? undefined : (toolBody ?? body), caller: { ...caller, via: "mcp" }, requestId: randomUUID(), base, tool };
}

/**
 * A tool's `base` (the revision its write is planned against): a string, or
 * none (absent or null). Anything else (`123`, `["rev_…"]`) is
 * `validation.invalid`: dropped, it would let the write through unchecked
 * against a tree the caller meant it to be refused on.
 */
function baseOf(base: unknown): string | undefined {
  if (base === undefined || base === null) return undefined;
  if (typeof base === "string") return base;
  const got = Array.isArray(base) ? "an array" : `a ${typeof base}`;
  throw new ApiError("validation.invalid", `invalid request: args.base: a revision (rev_…) as a string, not ${got}`, { fields: [{ loc: ["args", "base"], msg: `expected a string, got ${got}`, type: "invalid_type" }] });
}

/**
 * A tool whose body is its own (seed 003: `model_assign` takes only `model`,
 * `model_swap` also `model_id`): the body the route gets, parsed from it;
 * anything else is `validation.invalid`, before anything is planned.
 * Undefined for a tool that sends the route's own body.
 */
function toolBodyOf(route: Route, tool: string, args: Record<string, unknown>): Record<string, unknown> | undefined {
  const schema = route.toolBodies?.[tool];
  if (!schema) return undefined;
  const names = new Set([...pathParams(route.path).map((p) => p.name), "base"]);
  const body = Object.fromEntries(Object.entries(args).filter(([k]) => !names.has(k)));
  const r = schema.safeParse(body);
  if (r.success) return r.data as Record<string, unknown>;
  const fields = r.error.issues.map((i) => ({ loc: ["body", ...i.path.map(String)], msg: i.message, type: i.code }));
  const shape = (schema as { shape?: object }).shape;
  const problems = fields.map((f) => `${f.loc.join(".")}: ${f.msg}`).join("; ");
  throw new ApiError("validation.invalid", shape ? `${tool} takes ${Object.keys(shape).join(", ") || "nothing"} only: ${problems}` : `invalid arguments for ${tool}: ${problems}`, { fields, tool });
}

/** A bare list becomes `{<listKey>: [...], count}` (the route table's wrap key; `items` when it names none). */
function wrapList(route: Route, result: unknown): unknown {
  return Array.isArray(result) ? { [route.listKey ?? "items"]: result, count: result.length } : result;
}
