import { z } from "zod";
import { configMcpServerEdits, exposureEdits, installMcpServerEdits, mcpServerFile, toolPolicyEdits, uninstallMcpServerEdits } from "../../compiler/edits/mcp-servers.js";
import type { Model } from "../../compiler/index.js";
import { enforceableInHermes } from "../../reconciler/hermes-wire.js";
import { EnvName, ToolName, RESERVED_MCP_IDS } from "../../schema/index.js";
import type { BoxService } from "../box.js";
import type { Dispatcher } from "../dispatch.js";
import { ApiError, refusing } from "../errors.js";
import { restoreMasked } from "../redact.js";
import { resolveManifest, validateManifest } from "../mcp-servers/manifest.js";
import { listRemoteTools } from "../mcp-servers/probe.js";
import { defineRoute, type WriteIntent } from "../route.js";
import { installedView } from "./mcp.js";

const Id = z.strictObject({ server_id: z.string().min(1).max(64) });
const Action = z.strictObject({ server_id: z.string().min(1).max(64), action: z.enum(["start", "stop", "restart"]) });
const ResolveQuery = z.strictObject({ url: z.string().max(4096) });
const InstallBody = z.union([z.strictObject({ url: z.string().max(4096) }), z.strictObject({ manifest: z.record(z.string(), z.unknown()) })]);
const ConfigBody = z.strictObject({ env: z.record(EnvName, z.string().max(4096)).optional(), enabled: z.boolean().optional() })
  .refine((b) => b.env !== undefined || b.enabled !== undefined, "give env, enabled or both");
const ToolsBody = z.strictObject({ allow: z.array(ToolName).default([]), gated: z.array(ToolName).default([]), blocked: z.array(ToolName).default([]) });
const EXPOSURE_KEYS = ["hermes", "brain", "openwebui", "opencode"] as const;

/** Where `resolve` may fetch from besides the public internet: HAL0_MCP_FETCH_ALLOW (host:port, comma-separated). */
function fetchOptions() {
  const allow = (process.env.HAL0_MCP_FETCH_ALLOW ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  return { allow, allowInsecureHttp: process.env.HAL0_MCP_FETCH_INSECURE_HTTP === "1" };
}

function bundledIds(services: Dispatcher): Set<string> {
  return new Set<string>([...RESERVED_MCP_IDS, ...(services.bundled ?? []).map((b) => b.id)]);
}

/** The installed record, or 409 mcp.bundled / 404 mcp.not_found (also when the tree's `files` are given and its file is not among them). */
async function installed(box: BoxService, services: Dispatcher, id: string, files?: ReadonlyMap<string, string>): Promise<Model["mcpServers"][string]> {
  if (bundledIds(services).has(id)) throw new ApiError("mcp.bundled", `${id} is served by hal0 itself; it cannot be changed or uninstalled`, { server_id: id });
  const record = (await box.model()).mcpServers[id];
  if (!record || (files !== undefined && !files.has(mcpServerFile(id)))) throw new ApiError("mcp.not_found", `no installed MCP server ${id}`, { server_id: id, known: Object.keys((await box.model()).mcpServers).sort() });
  return record;
}

/** Routes that change installed servers: each a ChangeSet on mcp-servers/<id>.toml, then the Hermes join (`hermes_sync`, never failing the request). */
export const mcpWriteRoutes = [
  defineRoute({
    method: "GET", path: "/api/mcp/resolve", kind: "read", query: ResolveQuery,
    summary: "Resolve an oci://, npm:/npx:, uvx:/uv:, git+https:// or https://…/manifest.json spec to a manifest (fetches are SSRF-guarded)",
    handle: ({ query }) => resolveManifest(query.url, fetchOptions()),
  }),
  defineRoute({
    method: "POST", path: "/api/mcp/install", kind: "write", status: 201, body: InstallBody, tools: ["mcp_server_install"],
    summary: "Install a server from {url} (resolved) or {manifest}: writes mcp-servers/<id>.toml (409 for a bundled or installed id)",
    // The row is the server's first event (GET /api/mcp/{id}/logs): its id is known once the spec is resolved.
    auditTarget: (reply) => (reply as { installed?: { id?: string } } | undefined)?.installed?.id,
    handle: async ({ body, box, services }) => {
      const manifest = "url" in body ? await resolveManifest(body.url, fetchOptions()) : validateManifest(body.manifest, typeof body.manifest.spec === "string" ? body.manifest.spec : `manual:${String(body.manifest.id)}`);
      if (bundledIds(services).has(manifest.id)) throw new ApiError("mcp.bundled", `${manifest.id} is a server hal0 serves itself`, { server_id: manifest.id });
      if ((await box.model()).mcpServers[manifest.id]) throw new ApiError("mcp.already_installed", `${manifest.id} is already installed`, { server_id: manifest.id });
      // Its file, too, when it does not compile (a hand edit in progress): an install adds, it never rewrites what is there.
      if ((await box.snapshot()).tree.files.has(mcpServerFile(manifest.id))) {
        throw new ApiError("mcp.already_installed", `${mcpServerFile(manifest.id)} is already there, though it does not compile; fix it, or uninstall ${manifest.id} first`, { server_id: manifest.id, file: mcpServerFile(manifest.id) });
      }
      const id = manifest.id;
      return {
        changes: { edits: installMcpServerEdits(manifest, Date.now()), summary: `install MCP server ${id}` },
        // hermes_sync is a commit observer (hal0-server.ts): a plan of this change set applied by id syncs the same way.
        reply: async (o) => ({ installed: installedView((await box.model()).mcpServers[id]!), hermes_sync: o.observed.hermes_sync, revision: o.revision }),
      } as WriteIntent;
    },
  }),
  defineRoute({
    method: "DELETE", path: "/api/mcp/{server_id}", kind: "write", params: Id, tools: ["mcp_server_uninstall"],
    summary: "Uninstall a server: its file goes, and Hermes profiles drop it (409 mcp.bundled)",
    handle: async ({ params, box, services }) => {
      // The file, not the compiled record: a file that does not compile (a hand edit) is what an uninstall repairs.
      const files = (await box.snapshot()).tree.files;
      if (bundledIds(services).has(params.server_id) || !files.has(mcpServerFile(params.server_id))) await installed(box, services, params.server_id, files);
      return {
        changes: { edits: uninstallMcpServerEdits(params.server_id), summary: `uninstall MCP server ${params.server_id}` },
        reply: (o) => ({ uninstalled: params.server_id, hermes_sync: o.observed.hermes_sync, revision: o.revision }),
      } as WriteIntent;
    },
  }),
  defineRoute({
    method: "PATCH", path: "/api/mcp/{server_id}/config", kind: "write", params: Id, body: ConfigBody, tools: ["mcp_server_config_write"],
    summary: "Replace a server's env (the whole table) and/or switch it on or off",
    handle: async ({ params, body, box, services }) => {
      const record = await installed(box, services, params.server_id);
      // A `[redacted]` sent back (GET /api/mcp/servers masks every env value) keeps the value it stands for.
      const env = body.env === undefined ? undefined : restoreMasked(body.env, record.env);
      return viewIntent(box, params.server_id, configMcpServerEdits(params.server_id, env, body.enabled), `configure MCP server ${params.server_id}`, body.enabled !== undefined);
    },
  }),
  defineRoute({
    method: "PATCH", path: "/api/mcp/{server_id}/tools", kind: "write", params: Id, body: ToolsBody,
    summary: "Replace a server's [tools] policy (allow / gated / blocked); a tool on two lists is 400 mcp.tools_invalid",
    handle: async ({ params, body, box, services }) => {
      const record = await installed(box, services, params.server_id);
      const edits = refusing(() => toolPolicyEdits(params.server_id, record, body));
      return viewIntent(box, params.server_id, edits, `set the tool policy of MCP server ${params.server_id}`, true);
    },
  }),
  defineRoute({
    method: "PATCH", path: "/api/mcp/{server_id}/exposure", kind: "write", params: Id, body: z.record(z.string(), z.unknown()),
    summary: "Merge exposure flags (hermes, brain, openwebui, opencode); the Hermes profiles follow at once",
    handle: async ({ params, body, box, services }) => {
      const record = await installed(box, services, params.server_id);
      const keys = Object.keys(body);
      const bad = keys.filter((k) => !(EXPOSURE_KEYS as readonly string[]).includes(k) || typeof body[k] !== "boolean");
      if (keys.length === 0 || bad.length > 0) throw new ApiError("mcp.exposure_invalid", keys.length === 0 ? "give at least one of hermes, brain, openwebui, opencode" : `not an exposure flag with a boolean: ${bad.join(", ")}`, { keys: bad, allowed: [...EXPOSURE_KEYS] });
      const flags = body as Partial<Record<(typeof EXPOSURE_KEYS)[number], boolean>>;
      const unsupported = (["openwebui", "opencode"] as const).filter((k) => flags[k] === true);
      if (unsupported.length > 0) throw new ApiError("mcp.exposure_unsupported", `exposure to ${unsupported.join(" and ")} is not supported yet`, { keys: unsupported });
      const toAgents = (["hermes", "brain"] as const).filter((k) => flags[k] === true);
      if (toAgents.length > 0 && record.transport === "stdio") throw new ApiError("mcp.exposure_needs_supervisor", `${params.server_id} is a stdio server: nothing runs it to give Hermes a url`, { server_id: params.server_id });
      if (toAgents.length > 0 && !enforceableInHermes(record)) throw new ApiError("mcp.exposure_policy_unenforced", `${params.server_id} has gated tools (${record.tools.gated.join(", ")}), which Hermes cannot hold for approval`, { server_id: params.server_id, gated: record.tools.gated });
      return viewIntent(box, params.server_id, exposureEdits(params.server_id, record, flags as Record<string, boolean>), `expose MCP server ${params.server_id}`, true);
    },
  }),
  defineRoute({
    method: "POST", path: "/api/mcp/{server_id}/test", kind: "action", params: Id,
    summary: "A real MCP initialize + tools/list against the server's url; each tool classified by its [tools] policy (501 for stdio)",
    handle: async ({ params, box, services }) => {
      const record = await installed(box, services, params.server_id);
      if (record.transport === "stdio" || record.url === undefined) throw new ApiError("mcp.supervisor_unavailable", `${params.server_id} is a stdio server; testing it needs a supervisor to start it`, { server_id: params.server_id });
      const probe = await listRemoteTools(record.url, record.transport);
      const verdicts = probe.tools.map((t) => ({ tool: t.name, verdict: verdictOf(record.tools, t.name) }));
      const agent_exposure = enforceableInHermes(record)
        ? { available: true, hermes: record.exposure.hermes, brain: record.exposure.brain, filter: { include: record.tools.allow, exclude: record.tools.blocked } }
        : { available: false, code: "mcp.exposure_policy_unenforced", reason: `gated tools (${record.tools.gated.join(", ")}) cannot be held for approval by Hermes` };
      return { server_id: params.server_id, probe, verdicts, agent_exposure };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/mcp/{server_id}/{action}", kind: "action", params: Action, tools: ["mcp_server_action"],
    summary: "start / stop / restart: 501 mcp.supervisor_unavailable (hal0 has no MCP process supervisor yet)",
    // Never queued for a person: it could only fail.
    precheck: async ({ params, box, services }) => unsupervised(box, services, params),
    handle: async ({ params, box, services }) => unsupervised(box, services, params),
  }),
];

/** An installed server's start / stop / restart: 404 for one not installed, else 501 (no MCP process supervisor yet). */
async function unsupervised(box: BoxService, services: Dispatcher, params: { server_id: string; action: string }): Promise<never> {
  await installed(box, services, params.server_id);
  throw new ApiError("mcp.supervisor_unavailable", `${params.action} needs an MCP process supervisor, which hal0 does not have yet`, { server_id: params.server_id, action: params.action });
}

/** allow / gated / blocked by the record's [tools] policy; a tool on none is `unknown_tool`. */
function verdictOf(policy: { allow: readonly string[]; gated: readonly string[]; blocked: readonly string[] }, tool: string): string {
  if (policy.blocked.includes(tool)) return "blocked";
  if (policy.gated.includes(tool)) return "gated";
  if (policy.allow.includes(tool)) return "allow";
  return "unknown_tool";
}

/** An edit of one installed server, replying `{server, hermes_sync?}` from the tree after the commit. */
function viewIntent(box: BoxService, id: string, edits: WriteIntent["changes"]["edits"], summary: string, sync: boolean): WriteIntent {
  return {
    changes: { edits, summary },
    reply: async (o) => ({ server: installedView((await box.model()).mcpServers[id]!), ...(sync ? { hermes_sync: o.observed.hermes_sync } : {}), revision: o.revision }),
  };
}
