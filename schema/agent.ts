import { z } from "zod";
import { EnvName, ResourceId } from "./names.js";
import { ToolPolicy } from "./mcp-server.js";
import { HttpUrl } from "./url.js";
import { whenValid } from "./when.js";

/**
 * `agents/<name>.toml`: a bundled agent's MCP policy (reference §1.4
 * AgentConfig, seed 001 "hal0 as an MCP client"): which MCP servers it may
 * reach, how it authenticates to each, which tools it may call freely, only
 * with an approval, or never, and the workspace its filesystem-style tool
 * arguments are pinned to. The file stem is the agent's name, and
 * `[agent] name` must repeat it (`agent.name_mismatch`, a link rule).
 */

/** Agent names: 1–32 characters, lowercase a–z, digits and `-`, starting with a letter or digit. */
export const AGENT_NAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,31}$/;
export const AGENT_AUTH_KINDS = ["none", "bearer-from-env"] as const;

/** Where an agent's workspace is when `[agent] workspace` is empty. */
export function defaultAgentWorkspace(name: string): string {
  return `/var/lib/hal0/agents/${name}/workspace`;
}

/**
 * Empty, or an absolute path without `.` or `..` segments: the workspace is a
 * sandbox boundary, so it is written exactly as meant, never relative to
 * anything. (The JSON Schema says the same for editors: the pattern wants an
 * absolute path or nothing, the `not` pattern refuses `.`/`..` segments and NUL.)
 */
const Workspace = z.string().superRefine((value, ctx) => {
  if (value === "") return;
  const why = !value.startsWith("/")
    ? "is not an absolute path"
    : value.split("/").some((seg) => seg === "." || seg === "..")
      ? "has a `.` or `..` segment"
      : value.includes("\u0000") ? "holds a NUL character" : undefined;
  if (why === undefined) return;
  ctx.addIssue({
    code: "custom", message: `workspace ${JSON.stringify(value)} ${why}`,
    params: { code: "config.invalid_value", target: "value", detail: `\`agent.workspace\` ${why}: write an absolute path such as "/var/lib/hal0/agents/<name>/workspace", or leave it empty for that default.` },
  });
}).meta({ pattern: "^(/.*)?$", not: { pattern: "(^|/)\\.{1,2}(/|$)|\\u0000" } });

/**
 * How hal0 authenticates to one server. `bearer-from-env` sends
 * `Authorization: Bearer <value of $env>`; `env` is a variable's name, never
 * the token.
 */
export const AgentAuth = z
  .strictObject({
    kind: z.enum(AGENT_AUTH_KINDS),
    env: EnvName.optional(),
  })
  .superRefine((a, ctx) => {
    if (a.kind === "bearer-from-env" && a.env === undefined) {
      ctx.addIssue({ code: "custom", path: ["kind"], message: "auth kind \"bearer-from-env\" needs env", params: { code: "agent.auth_env_required", detail: "Name the environment variable that holds the token in `env = \"<NAME>\"`; the token itself never goes in the tree." } });
    }
  }, { when: whenValid("kind", "env") })
  // The rule above, for editors (Taplo reads the JSON Schema).
  .meta({ if: { properties: { kind: { const: "bearer-from-env" } }, required: ["kind"] }, then: { required: ["env"] } });
export type AgentAuth = z.infer<typeof AgentAuth>;

/** One `[mcp.servers.<id>]` table: a server the agent may reach. */
export const AgentServer = z
  .strictObject({
    url: HttpUrl.optional(),
    enabled: z.boolean().default(true),
    /** One of hal0's own servers (hal0-admin, hal0-memory, hal0-agents), reached without a url. */
    builtin: z.boolean().default(false),
    auth: AgentAuth.prefault({ kind: "none" }),
  })
  .superRefine((s, ctx) => {
    if (!s.builtin && s.url === undefined) {
      ctx.addIssue({ code: "custom", path: ["url"], message: "a server that is not builtin needs url", params: { code: "agent.url_required", detail: "The agent reaches this server at its url: add `url = \"http://127.0.0.1:<port>/mcp\"`, or `builtin = true` for one of hal0's own servers." } });
    }
  }, { when: whenValid("builtin", "url") })
  .meta({ if: { properties: { builtin: { const: true } }, required: ["builtin"] }, else: { required: ["url"] } });
export type AgentServer = z.infer<typeof AgentServer>;

export const Agent = z.strictObject({
  /** 1 is the only version; a newer file is refused, never half-read. */
  schema_version: z.literal(1).default(1),
  agent: z.strictObject({
    name: z.string().regex(AGENT_NAME_PATTERN, "an agent name: 1–32 characters, lowercase a–z, digits and `-`, starting with a letter or digit"),
    display: z.string().default(""),
    /** Empty ⇒ defaultAgentWorkspace(name). */
    workspace: Workspace.default(""),
  }),
  mcp: z
    .strictObject({
      servers: z.record(ResourceId, AgentServer).default({}),
    })
    .prefault({}),
  /** Tool names; a tool is on at most one list (`agent.tools_overlap`, a link rule). */
  tools: ToolPolicy.prefault({}),
});
export type Agent = z.infer<typeof Agent>;
