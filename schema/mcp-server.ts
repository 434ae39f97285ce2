import { z } from "zod";
import { EnvName, ToolName } from "./names.js";
import { HttpUrl } from "./url.js";
import { whenValid } from "./when.js";

/** `mcp-servers/<id>.toml`: an installed third-party MCP server; the file stem is its id. */

export const MCP_TRANSPORTS = ["stdio", "streamable-http", "sse"] as const;
/** Ids of the servers hal0 itself serves; an installed server may not take them. */
export const RESERVED_MCP_IDS = ["hal0-admin", "hal0-memory", "hal0-agents"] as const;

export const ToolPolicy = z.strictObject({
  allow: z.array(ToolName).default([]),
  gated: z.array(ToolName).default([]),
  blocked: z.array(ToolName).default([]),
});

export const Exposure = z.strictObject({
  hermes: z.boolean().default(false),
  brain: z.boolean().default(false),
  openwebui: z.boolean().default(false),
  opencode: z.boolean().default(false),
});

export const McpServer = z
  .strictObject({
    name: z.string().min(1).max(128),
    description: z.string().default(""),
    /**
     * Where it came from: oci://, npm:/npx:, uvx:/uv:, git+https://, a manifest URL (https://, or http:// where
     * HAL0_MCP_FETCH_INSECURE_HTTP=1 lets resolve fetch one), or `manual:<id>` (a manifest posted to POST /api/mcp/install).
     */
    spec: z.string().regex(/^(oci:\/\/|npm:|npx:|uvx:|uv:|git\+https:\/\/|https?:\/\/|manual:)\S+$/, "a package spec: oci://, npm:, npx:, uvx:, uv:, git+https://, https:// (or http://) or manual: and then no spaces"),
    transport: z.enum(MCP_TRANSPORTS),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    url: HttpUrl.optional(),
    enabled: z.boolean().default(true),
    env: z.record(EnvName, z.string()).default({}),
    /** Names only: values live outside the tree. */
    secrets: z.array(EnvName).default([]),
    tools_count: z.int().min(0).optional(),
    /** How many resources and prompts its manifest named (the API's `resources` / `prompts`, as `tools_count` is its `tools`). */
    resources_count: z.int().min(0).optional(),
    prompts_count: z.int().min(0).optional(),
    tools: ToolPolicy.prefault({}),
    exposure: Exposure.prefault({}),
    source_url: z.string().optional(),
    author: z.string().optional(),
    verified: z.boolean().default(false),
    installed_at: z.string().optional(),
  })
  // Each rule runs when the keys it reads are valid, so a file with several problems reports them all at once.
  .superRefine((s, ctx) => {
    if (s.transport !== "stdio" && s.url === undefined) {
      ctx.addIssue({ code: "custom", path: ["transport"], message: `transport "${s.transport}" needs url`, params: { code: "mcp.url_required", detail: "A streamable-http or sse server is reached at its url: add `url = \"http://127.0.0.1:<port>/mcp\"`." } });
    }
  }, { when: whenValid("transport", "url") })
  .superRefine((s, ctx) => {
    if (s.transport === "stdio" && s.command === undefined) {
      ctx.addIssue({ code: "custom", path: ["transport"], message: "transport \"stdio\" needs command", params: { code: "mcp.command_required", detail: "A stdio server is started as a command: add `command` (and `args`)." } });
    }
  }, { when: whenValid("transport", "command") })
  // The two rules above, for editors (Taplo reads the JSON Schema).
  .meta({ if: { properties: { transport: { const: "stdio" } }, required: ["transport"] }, then: { required: ["command"] }, else: { required: ["url"] } });
export type McpServer = z.infer<typeof McpServer>;
