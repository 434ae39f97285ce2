import { McpServer, type RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import type { CompiledPolicy } from "../../compiler/index.js";
import { auditRefusal } from "../audit.js";
import type { Dispatcher } from "../dispatch.js";
import { callMemoryTool } from "../memory/service.js";
import { advertisedSchema, MEMORY_TOOLS, memoryAnnotations, type MemoryToolDef } from "../memory/tools.js";
import type { Caller } from "../route.js";
import { followPolicy } from "./policy-sync.js";
import { envelopeSdkErrors, timedCall } from "./results.js";

/**
 * One hal0-memory MCP server (per session): the 26 memory tools, each with
 * its real typed signature in `tools/list`. The SDK passes arguments through
 * untouched; hal0 validates them against that same schema so a refusal is
 * `mcp.memory_schema` naming every problem. Tools the caller's policy
 * blocks are neither listed nor callable.
 */
export function memoryServer(d: Dispatcher, policy: CompiledPolicy, caller: Caller, version: string): McpServer {
  const server = new McpServer({ name: "hal0-memory", version }, { capabilities: { tools: { listChanged: true } } });
  const tools = new Map<string, RegisteredTool>();
  for (const tool of MEMORY_TOOLS) {
    tools.set(tool.name, server.registerTool(tool.name, { description: tool.description, inputSchema: inputSchemaOf(tool), annotations: memoryAnnotations(tool) }, async (args) => {
      return timedCall(d, tool.name, () => callMemoryTool(d, tool.name, args, caller, "memory"));
    }));
  }
  followPolicy(server, { tools, caller, box: d.box }, policy);
  // A call refused before its tool runs (a tool the policy blocks, arguments nested too deep or naming __proto__) is audited, as on hal0-admin.
  envelopeSdkErrors(server, "hal0-memory", (tool, err) => auditRefusal(d, tool, caller, err));
  return server;
}

const inputSchemas = new WeakMap<MemoryToolDef, z.ZodObject>();

/** Accepts any object (hal0 validates, for coded errors) and advertises the tool's real JSON Schema. Built once per tool. */
function inputSchemaOf(tool: MemoryToolDef): z.ZodObject {
  let schema = inputSchemas.get(tool);
  if (!schema) {
    schema = z.looseObject({}).meta(advertisedSchema(tool));
    inputSchemas.set(tool, schema);
  }
  return schema;
}
