import { z } from "zod";
import {
  AGENTS_GATED_TOOLS, AGENTS_READ_TOOLS, AGENTS_WRITE_TOOLS,
  AUTONOMOUS_READ_TOOLS, AUTONOMOUS_WRITE_TOOLS, EXCLUDED_TOOLS, GATED_TOOLS, HAL0_GATED_TOOLS, HAL0_READ_TOOLS, HAL0_WRITE_TOOLS, type SeedTool,
} from "../../schema/index.js";
import { ApiError } from "../errors.js";
import { advertisedSchema, MEMORY_TOOL_BY_NAME, memoryAnnotations } from "../memory/tools.js";
import { pathParams } from "../path-args.js";
import { routeId, type Route } from "../route.js";

/** One hal0-admin tool: its route (or a delegation), the JSON Schema it advertises, its annotations. */
export interface ToolDef {
  readonly name: string;
  readonly description: string;
  /** The REST route it runs through; undefined for a memory_* tool (delegated to hal0-memory). */
  readonly route?: Route;
  readonly memory: boolean;
  /** The advertised `args` schema: path args and the fields the route cannot do without required, the other query/body fields as hints. */
  readonly argsSchema: Record<string, unknown>;
  readonly annotations: { readOnlyHint?: boolean; destructiveHint?: boolean; openWorldHint?: boolean };
}

const TABLES: ReadonlyArray<readonly [string, readonly SeedTool[]]> = [
  // hal0-agents' rows (route "agents") are here for the two-tiers check only: hal0-admin serves none of them.
  ["autonomous_read", [...AUTONOMOUS_READ_TOOLS, ...HAL0_READ_TOOLS, ...AGENTS_READ_TOOLS]],
  ["autonomous_write", [...AUTONOMOUS_WRITE_TOOLS, ...HAL0_WRITE_TOOLS, ...AGENTS_WRITE_TOOLS]],
  ["gated", [...GATED_TOOLS, ...HAL0_GATED_TOOLS, ...AGENTS_GATED_TOOLS]],
];
/**
 * Writes that only add: a new file or entry (refused when it is already
 * there), a download beside what is there, a cache read again. Every other
 * write may change or remove what is there (an edit, a whole-file rewrite, a
 * stack applied in replace mode, a plan's change set, a restart), which MCP
 * clients read from `destructiveHint: true`.
 */
const ADDITIVE = new Set(["slot_create", "stack_create", "stack_snapshot", "profile_create", "upstream_create", "model_register", "model_add", "mcp_server_install", "plan_propose", "slot_pull_image", "runner_image_sync", "hardware_reprobe"]);
/**
 * Actions that change nothing, here or there: audited like a write, but read-shaped (seed 001 lists them as
 * autonomous reads). upstream_test sends one GET <url>/models and records nothing.
 */
const CHANGES_NOTHING = new Set(["upstream_test"]);
/** Tools whose route reaches outside the box (another host, a registry). */
// mcp_server_install fetches a manifest from the url it is given (GET /api/mcp/resolve's fetch, behind the SSRF guard).
const OPEN_WORLD = new Set(["upstream_test", "model_pull", "hf_search", "model_catalogue", "model_update_check", "update_check", "runner_image_sync", "mcp_server_install"]);

/**
 * Every problem between the tier tables and the route table: a tool in two
 * tiers, an alias that is in no tier, an alias on another route than its
 * tier table names, a tier entry that is also excluded. Empty = consistent.
 */
export function catalogProblems(routes: readonly Route[]): string[] {
  const problems: string[] = [];
  const tierOf = new Map<string, { tier: string; route: string }>();
  for (const [tier, tools] of TABLES) {
    for (const { tool, route } of tools) {
      const before = tierOf.get(tool);
      if (before) problems.push(`${tool} is in two tiers: ${before.tier} and ${tier}`);
      else tierOf.set(tool, { tier, route });
      if (EXCLUDED_TOOLS.includes(tool)) problems.push(`${tool} is in ${tier} and also excluded`);
    }
  }
  for (const r of routes) {
    for (const tool of r.tools ?? []) {
      const entry = tierOf.get(tool);
      if (!entry) problems.push(`${tool} (alias of ${routeId(r)}) has no tier`);
      else if (entry.route !== (r.inProcess ? "in-process" : routeId(r))) problems.push(`${tool} aliases ${routeId(r)}, but its tier table names ${entry.route}, which no route serves as ${tool}`);
    }
  }
  return problems.sort();
}

/** The tools this build serves: every route alias, and the memory_* rows. Throws `mcp.catalog_invalid` when the tables disagree. */
export function buildCatalog(routes: readonly Route[]): ToolDef[] {
  const problems = catalogProblems(routes);
  if (problems.length > 0) throw new ApiError("mcp.catalog_invalid", `the hal0-admin tool catalog is inconsistent:\n${problems.map((p) => `  - ${p}`).join("\n")}`, { problems });
  const tools: ToolDef[] = [];
  for (const route of routes) {
    for (const name of route.tools ?? []) tools.push(routeTool(name, route));
  }
  for (const [, table] of TABLES) {
    for (const { tool, route } of table) {
      if (route === "memory") tools.push(memoryTool(tool));
    }
  }
  return tools.sort((a, b) => (a.name < b.name ? -1 : 1));
}

function routeTool(name: string, route: Route): ToolDef {
  const params = pathParams(route.path).map((p) => p.name);
  const query = jsonOf(route.query, true);
  const bodyless = route.method === "GET" || route.method === "DELETE" || !route.body;
  // A tool narrower than its route (model_assign) advertises what it takes, not the route's whole body.
  const body = bodyless ? undefined : jsonOf(route.toolBodies?.[name] ?? route.body);
  // A body that passes a file's keys through (slot_create, slot_edit) advertises them from its hints; its hints describe the fields more closely than the body that lets them through.
  const hints = bodyless || route.toolBodies?.[name] ? undefined : jsonOf(route.bodyHints);
  const properties: Record<string, unknown> = { ...query?.properties, ...body?.properties, ...hints?.properties };
  for (const p of params) properties[p] = { type: "string", description: "path argument: a string, or an integer below 2^53" };
  // Required: the path arguments, and the query and body fields the route cannot do without (model_store_probe's path).
  const required = [...new Set([...params, ...(query?.required ?? []), ...(body?.required ?? []), ...(hints?.required ?? [])])];
  // A write takes `base` (the revision its change is planned against, as If-Match).
  if (route.kind === "write") properties.base ??= { type: "string", description: "the revision (rev_…) the change is planned against: refused as stale if the tree moved (If-Match)" };
  // An argument the route does not take is refused (a query it does not know, a strict body's unknown key): advertised as closed.
  // A body that is not one plain object (a union) is advertised open; the route still judges it.
  const closed = (route.query === undefined || query?.additionalProperties === false) && (bodyless || body?.additionalProperties === false);
  const read = route.kind === "read" || CHANGES_NOTHING.has(name);
  return {
    name, route, memory: false,
    description: `${route.summary} (${routeId(route)})`,
    argsSchema: { type: "object", properties, required, additionalProperties: closed ? false : {} },
    annotations: {
      readOnlyHint: read,
      ...(read ? {} : { destructiveHint: !ADDITIVE.has(name) }),
      openWorldHint: OPEN_WORLD.has(name),
    },
  };
}

/** A memory_* tool: hal0-memory's own description and typed schema, under `args`. */
function memoryTool(name: string): ToolDef {
  const tool = MEMORY_TOOL_BY_NAME.get(name);
  if (!tool) throw new ApiError("mcp.catalog_invalid", `the tier tables name ${name}, which hal0-memory does not have`, { problems: [name] });
  return { name, memory: true, description: `${tool.description} (hal0-memory, in process)`, argsSchema: advertisedSchema(tool), annotations: memoryAnnotations(tool) };
}

const BOOL_TEXT = new Set(["true", "false", "1", "0"]);

type JsonObjectSchema = { properties?: Record<string, unknown>; required?: string[]; additionalProperties?: unknown };

/** A zod schema as input JSON Schema; undefined when absent or not representable. */
function jsonOf(schema: z.ZodType | undefined, query = false): JsonObjectSchema | undefined {
  if (!schema) return undefined;
  try {
    const json = z.toJSONSchema(schema, {
      target: "draft-7", io: "input", unrepresentable: "any",
      // An integer query parameter's default is its input text ("50"): advertised as the integer it reads as (server/query.ts).
      override: ({ jsonSchema: js }) => {
        if (js.type === "integer" && typeof js.default === "string" && /^-?\d+$/.test(js.default)) js.default = Number(js.default);
        // A yes/no query parameter is the text "true" / "false" (or "1" / "0") in a URL; over MCP it is a JSON boolean
        // (dry_run: true, summary: true), which the call sends on as that text: advertised as the boolean it is.
        if (query && js.type === "string" && Array.isArray(js.enum) && js.enum.includes("true") && js.enum.includes("false") && js.enum.every((v) => BOOL_TEXT.has(v as string))) {
          const given = js.default;
          delete js.enum;
          delete js.default;
          js.type = "boolean";
          if (given === "true" || given === "false") js.default = given === "true";
        }
        if (query && js.type === "boolean" && (js.default === "true" || js.default === "false")) js.default = js.default === "true";
      },
    }) as JsonObjectSchema & { anyOf?: JsonObjectSchema[] };
    return json.anyOf ? branchesOf(json.anyOf) : json;
  } catch {
    return undefined;
  }
}

/**
 * A union body (model_inspect's path | hf_repo | hf_url) as one object: every
 * branch's fields as hints, required only what every branch requires. It
 * stays open (the route judges which branch a call is).
 */
function branchesOf(branches: readonly JsonObjectSchema[]): JsonObjectSchema {
  const properties: Record<string, unknown> = {};
  for (const b of branches) for (const [k, v] of Object.entries(b.properties ?? {})) properties[k] ??= v;
  const required = (branches[0]?.required ?? []).filter((k) => branches.every((b) => b.required?.includes(k)));
  return { properties, required };
}
