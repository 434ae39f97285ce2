import { randomUUID } from "node:crypto";
import { McpServer, type RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";
import type { CompiledPolicy } from "../../compiler/index.js";
import { AGENTS_GATED_TOOLS, AGENTS_READ_TOOLS, AGENTS_WRITE_TOOLS } from "../../schema/index.js";
import { auditRefusal } from "../audit.js";
import { approvedProfiles } from "../bridge/access.js";
import type { BridgeContext, BridgeProposal, BridgeToolDef } from "../bridge/tool.js";
import { RUN_TOOLS } from "../bridge/runs/tools.js";
import { TEACH_TOOLS } from "../bridge/teach/tools.js";
import { invoke, validate, type Call, type Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import { toolTier } from "../identity/access.js";
import type { Caller, Route, RouteContext } from "../route.js";
import { queueForPerson } from "../verdict.js";
import { followPolicy } from "./policy-sync.js";
import { envelopeSdkErrors, timedCall } from "./results.js";

/** The tools `/mcp/agents` serves: the run tools, then the teaching tools. */
export function bridgeTools(): readonly BridgeToolDef[] {
  return [...RUN_TOOLS, ...TEACH_TOOLS];
}

/** hal0-agents' rows of the tier tables, with their default tiers. */
const TABLE_TIERS = new Map<string, BridgeToolDef["defaultTier"]>([
  ...AGENTS_READ_TOOLS.map((t) => [t.tool, "autonomous_read"] as const),
  ...AGENTS_WRITE_TOOLS.map((t) => [t.tool, "autonomous_write"] as const),
  ...AGENTS_GATED_TOOLS.map((t) => [t.tool, "gated"] as const),
]);

/**
 * Every disagreement between the tools and the tier tables: a tool the tables
 * do not name, one whose `defaultTier` is not its table's, a name twice.
 * A table row with no tool yet is not one (the lists fill in as they land).
 */
export function bridgeCatalogProblems(tools: readonly BridgeToolDef[]): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const t of tools) {
    if (seen.has(t.name)) problems.push(`${t.name} is registered twice`);
    seen.add(t.name);
    const tier = TABLE_TIERS.get(t.name);
    if (tier === undefined) problems.push(`${t.name} is in no tier table (schema/data/hal0-tools.ts AGENTS_*_TOOLS)`);
    else if (tier !== t.defaultTier) problems.push(`${t.name} says its default tier is ${t.defaultTier}, the tier table says ${tier}`);
  }
  return problems.sort();
}

/** What every bridge route's query carries: the profiles of whoever asked (stored with a queued request, so an approved one reaches no more). */
const Reach = z.strictObject({ profiles: z.union([z.literal("all"), z.array(z.string())]) });
type Ctx = RouteContext<unknown, z.infer<typeof Reach>, unknown>;

/** The bridge's tools and, for each, its internal route (by tool name). */
export interface BridgeCatalog {
  readonly tools: readonly BridgeToolDef[];
  readonly routes: ReadonlyMap<string, Route>;
}

/**
 * The tools `/mcp/agents` serves (default: this build's run and teaching
 * tools), each with one internal route, so that a call runs through the
 * same door as every other (`invoke`: validated against the tool's schema,
 * audited, redacted) and an approved request finds its route again. Not
 * mounted over HTTP: hal0-agents is reached over MCP only. Tools that
 * disagree with the tier tables stop the server (`mcp.catalog_invalid`).
 */
export function bridgeCatalog(tools: readonly BridgeToolDef[] = bridgeTools()): BridgeCatalog {
  const problems = bridgeCatalogProblems(tools);
  if (problems.length > 0) throw new ApiError("mcp.catalog_invalid", `the hal0-agents tool catalog is inconsistent:\n${problems.map((p) => `  - ${p}`).join("\n")}`, { problems });
  const routes = new Map(tools.map((tool): [string, Route] => [tool.name, {
    kind: tool.defaultTier === "autonomous_read" ? "read" : "action",
    method: "POST",
    path: `/mcp/agents/${tool.name}`,
    summary: tool.description,
    query: Reach,
    body: tool.input,
    handle: (input: Ctx) => tool.run(contextOf(input), input.body),
    ...(tool.auditsItself ? { auditsItself: true } : {}),
    ...(tool.auditArgs ? { auditBody: tool.auditArgs } : {}),
    ...(tool.asIs ? { revealsSecret: true } : {}),
    ...(tool.precheck ? { precheck: (input: Ctx) => tool.precheck!(contextOf(input), input.body) } : {}),
    ...(tool.propose ? { describe: async (input: Ctx) => cardOf(await tool.propose!(contextOf(input), input.body), input.body) } : {}),
  }]));
  return { tools, routes };
}

/** A bridge tool's context for one call through its route: an approved agent's request reaches no more than the agent's admission now does. */
function contextOf({ query, services, caller }: Ctx): BridgeContext {
  return { d: services, caller, profiles: approvedProfiles(services.auth?.tokens, caller, query.profiles) };
}

/** At most this many lines of diff on a card; the rest is counted. */
const CARD_DIFF_LINES = 60;

/**
 * A teaching write's approval card: its summary, then each file's change
 * and its unified diff, line by line; what runs after approval is the same
 * call planned against these file hashes (`base`), so a file that moved
 * meanwhile is refused as stale, never overwritten.
 */
function cardOf(proposal: BridgeProposal, body: unknown): { summary: string; effects: string[]; body: unknown } {
  const lines: string[] = [];
  for (const f of proposal.files) {
    lines.push(`${f.action} ${f.file}`);
    lines.push(...f.diff.split("\n").filter((l) => l.length > 0));
  }
  const effects = lines.length > CARD_DIFF_LINES ? [...lines.slice(0, CARD_DIFF_LINES - 1), `… and ${lines.length - CARD_DIFF_LINES + 1} more lines`] : lines;
  return { summary: proposal.summary, effects, body: { ...(body as Record<string, unknown>), base: proposal.base } };
}

/**
 * One bridge tool call: arguments validated (a refusal is
 * `validation.invalid` naming each field), the caller's tier looked up,
 * then run (audited) or — gated for an agent — queued for a person and
 * answered `pending_approval` (audited, as is a refusal before it could be
 * queued). An operator's own call runs.
 */
export async function callBridgeTool(d: Dispatcher, route: Route, name: string, args: unknown, caller: Caller, profiles: readonly string[] | "all"): Promise<unknown> {
  const started = performance.now();
  const call: Call = { params: {}, query: { profiles }, body: args ?? {}, caller: { ...caller, via: "mcp" }, requestId: randomUUID(), tool: name };
  let tier: string;
  try {
    validate(route, call);
    tier = toolTier((await d.box.model()).policy, route, name, call.caller);
  } catch (err) {
    if (err instanceof ApiError) auditRefusal(d, name, call.caller, err, route);
    throw err;
  }
  if (call.caller.kind === "operator" || tier !== "gated") return invoke(d, route, call);
  // Queued with one audit row, or refused before it could be (a bad SKILL.md, a stale base, too many waiting) with one too.
  return queueForPerson(d, route, name, call, started, `${name} is gated for ${call.caller.agent}`);
}

/**
 * One hal0-agents MCP server (per session): every bridge tool with its
 * typed signature in `tools/list`. The SDK passes arguments through; hal0
 * validates them against the same schema for coded refusals. Tools the
 * caller's policy blocks are neither listed nor callable.
 */
export function agentsServer(d: Dispatcher, catalog: BridgeCatalog, policy: CompiledPolicy, caller: Caller, profiles: readonly string[] | "all", version: string): McpServer {
  const server = new McpServer({ name: "hal0-agents", version }, { capabilities: { tools: { listChanged: true } } });
  const tools = new Map<string, RegisteredTool>();
  for (const tool of catalog.tools) {
    const route = catalog.routes.get(tool.name)!;
    tools.set(tool.name, server.registerTool(tool.name, { description: tool.description, inputSchema: inputSchemaOf(tool.input), annotations: annotationsOf(tool.defaultTier) }, async (args) => {
      return timedCall(d, tool.name, () => callBridgeTool(d, route, tool.name, args, caller, profiles));
    }));
  }
  followPolicy(server, { tools, caller, box: d.box }, policy);
  envelopeSdkErrors(server, "hal0-agents", (tool, err) => auditRefusal(d, tool, { ...caller, via: "mcp" }, err));
  return server;
}

/** Reads only look; the writes change a run or a profile's files; none reaches outside the box. */
function annotationsOf(tier: BridgeToolDef["defaultTier"]): { readOnlyHint: boolean; destructiveHint?: boolean; openWorldHint: boolean } {
  return tier === "autonomous_read" ? { readOnlyHint: true, openWorldHint: false } : { readOnlyHint: false, destructiveHint: tier === "gated", openWorldHint: false };
}

const inputSchemas = new WeakMap<z.ZodObject, z.ZodObject>();

/** Accepts any object (hal0 validates, for coded errors) and advertises the tool's real JSON Schema. Built once per tool. */
function inputSchemaOf(input: z.ZodObject): z.ZodObject {
  let schema = inputSchemas.get(input);
  if (!schema) {
    const { $schema: _drop, ...advertised } = z.toJSONSchema(input, { target: "draft-7", io: "input" }) as Record<string, unknown>;
    schema = z.looseObject({}).meta(advertised);
    inputSchemas.set(input, schema);
  }
  return schema;
}
