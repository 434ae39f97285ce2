import type { FileEdit } from "../changeset.js";
import type { Model } from "../model.js";
import { EditRefusal } from "./refusal.js";

/**
 * Installed MCP server changes as edits of `mcp-servers/<id>.toml` (one file
 * per server). Pure: from the compiled record and what a caller sent.
 */

export const mcpServerFile = (id: string): string => `mcp-servers/${id}.toml`;

type Record_ = Model["mcpServers"][string];

/** What an install writes, from a resolved spec or manifest (server/mcp-servers/manifest.ts resolves one). */
export interface McpServerSource {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly spec: string;
  readonly transport: string;
  readonly command?: string;
  readonly args: readonly string[];
  readonly url?: string;
  readonly tools: readonly unknown[];
  readonly resources: readonly unknown[];
  readonly prompts: readonly unknown[];
  readonly env_required: readonly string[];
  readonly source_url?: string;
  readonly author: string;
  readonly verified: boolean;
}

/** The TOML document of a newly installed server: names of needed env vars go to `secrets`, never values. */
export function mcpServerDoc(m: McpServerSource, now: number): Record<string, unknown> {
  return {
    name: m.name, description: m.description, spec: m.spec, transport: m.transport,
    ...(m.command === undefined ? {} : { command: m.command }), ...(m.args.length > 0 ? { args: [...m.args] } : {}), ...(m.url === undefined ? {} : { url: m.url }),
    enabled: true, ...(m.env_required.length > 0 ? { secrets: [...m.env_required] } : {}), tools_count: m.tools.length,
    ...(m.resources.length > 0 ? { resources_count: m.resources.length } : {}), ...(m.prompts.length > 0 ? { prompts_count: m.prompts.length } : {}),
    ...(m.source_url === undefined ? {} : { source_url: m.source_url }), ...(m.author ? { author: m.author } : {}), verified: m.verified,
    installed_at: new Date(now).toISOString(),
  };
}

export function installMcpServerEdits(m: McpServerSource, now: number): FileEdit[] {
  return [{ file: mcpServerFile(m.id), op: "put", doc: mcpServerDoc(m, now) }];
}

export function uninstallMcpServerEdits(id: string): FileEdit[] {
  return [{ file: mcpServerFile(id), op: "delete" }];
}

/** The whole env table and/or the enabled switch (each only when given). */
export function configMcpServerEdits(id: string, env: Record<string, string> | undefined, enabled: boolean | undefined): FileEdit[] {
  return [
    ...(env === undefined ? [] : [{ file: mcpServerFile(id), op: "set" as const, path: ["env"], value: env }]),
    ...(enabled === undefined ? [] : [{ file: mcpServerFile(id), op: "set" as const, path: ["enabled"], value: enabled }]),
  ];
}

/**
 * A server's `[tools]` policy replaced (each list sorted): a tool on two
 * lists is `mcp.tools_invalid`; gated tools on a server exposed to Hermes
 * (which cannot hold a call for a person) are `mcp.exposure_policy_unenforced`.
 */
export function toolPolicyEdits(id: string, record: Pick<Record_, "exposure">, policy: { allow: readonly string[]; gated: readonly string[]; blocked: readonly string[] }): FileEdit[] {
  const seen = new Map<string, string>();
  const twice: string[] = [];
  for (const list of ["allow", "gated", "blocked"] as const) for (const t of policy[list]) (seen.has(t) ? twice.push(`${t} (${seen.get(t)} and ${list})`) : seen.set(t, list));
  if (twice.length > 0) throw new EditRefusal("mcp.tools_invalid", `a tool is on two lists: ${twice.join(", ")}`, { tools: twice });
  if (policy.gated.length > 0 && (record.exposure.hermes || record.exposure.brain)) {
    throw new EditRefusal("mcp.exposure_policy_unenforced", `${id} is exposed to Hermes, which cannot hold gated tools for approval; turn hermes/brain exposure off first`, { server_id: id, gated: policy.gated });
  }
  const tools = { allow: [...policy.allow].sort(), gated: [...policy.gated].sort(), blocked: [...policy.blocked].sort() };
  return [{ file: mcpServerFile(id), op: "set", path: ["tools"], value: tools }];
}

/** Exposure flags merged over the record's (the route has checked them). */
export function exposureEdits(id: string, record: Pick<Record_, "exposure">, flags: Readonly<Record<string, boolean>>): FileEdit[] {
  return [{ file: mcpServerFile(id), op: "set", path: ["exposure"], value: { ...record.exposure, ...flags } }];
}
