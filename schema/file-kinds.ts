import type { z } from "zod";
import { Settings } from "./settings.js";
import { ProfilesFile } from "./profile.js";
import { Slot } from "./slot.js";
import { ModelsFile } from "./model.js";
import { Stack } from "./stack.js";
import { UpstreamsFile } from "./upstream.js";
import { McpServer } from "./mcp-server.js";
import { PolicyFile } from "./policy.js";
import { CapabilitiesFile } from "./capabilities.js";
import { Agent, AGENT_NAME_PATTERN } from "./agent.js";
import { RESOURCE_ID_PATTERN, SLOT_NAME_PATTERN } from "./names.js";

/**
 * Every file kind of the tree (DESIGN.md §3): where it lives, its schema, the
 * grammar its file stem must follow (one-resource-per-file kinds), and the
 * name of its JSON Schema under `schema/json/`.
 */
export type FileKindId = "settings" | "profiles" | "slot" | "models" | "stack" | "upstreams" | "mcp-server" | "policy" | "capabilities" | "agent";

export interface FileKind {
  readonly id: FileKindId;
  /** A fixed file name, or the folder that holds one file per resource. */
  readonly file?: string;
  readonly folder?: string;
  readonly schema: z.ZodType;
  /** Grammar of the file stem for per-resource kinds. */
  readonly stemPattern?: RegExp;
  readonly jsonSchema: string;
  readonly title: string;
}

export const FILE_KINDS: readonly FileKind[] = [
  { id: "settings", file: "hal0.toml", schema: Settings, jsonSchema: "hal0.schema.json", title: "hal0 settings (hal0.toml)" },
  { id: "profiles", file: "profiles.toml", schema: ProfilesFile, jsonSchema: "profiles.schema.json", title: "hal0 profiles (profiles.toml)" },
  { id: "slot", folder: "slots", schema: Slot, stemPattern: SLOT_NAME_PATTERN, jsonSchema: "slot.schema.json", title: "hal0 slot (slots/<name>.toml)" },
  { id: "models", file: "models.toml", schema: ModelsFile, jsonSchema: "models.schema.json", title: "hal0 models (models.toml)" },
  { id: "stack", folder: "stacks", schema: Stack, stemPattern: RESOURCE_ID_PATTERN, jsonSchema: "stack.schema.json", title: "hal0 stack (stacks/<slug>.toml)" },
  { id: "upstreams", file: "upstreams.toml", schema: UpstreamsFile, jsonSchema: "upstreams.schema.json", title: "hal0 upstreams (upstreams.toml)" },
  { id: "mcp-server", folder: "mcp-servers", schema: McpServer, stemPattern: RESOURCE_ID_PATTERN, jsonSchema: "mcp-server.schema.json", title: "hal0 installed MCP server (mcp-servers/<id>.toml)" },
  { id: "policy", file: "policy.toml", schema: PolicyFile, jsonSchema: "policy.schema.json", title: "hal0 tool policy (policy.toml)" },
  { id: "capabilities", file: "capabilities.toml", schema: CapabilitiesFile, jsonSchema: "capabilities.schema.json", title: "hal0 capabilities (capabilities.toml)" },
  { id: "agent", folder: "agents", schema: Agent, stemPattern: AGENT_NAME_PATTERN, jsonSchema: "agent.schema.json", title: "hal0 bundled agent's MCP policy (agents/<name>.toml)" },
];

/** Which kind a tree-relative path (forward slashes) is, and its stem for per-resource kinds. */
/** The slot a tree path is the file of (`slots/<name>.toml` → `<name>`), or undefined. */
export function slotOfFile(rel: string): string | undefined {
  return /^slots\/([^/]+)\.toml$/.exec(rel)?.[1];
}

export function classifyPath(rel: string): { kind: FileKind; stem?: string } | undefined {
  for (const kind of FILE_KINDS) {
    if (kind.file === rel) return { kind };
    if (kind.folder !== undefined && rel.startsWith(kind.folder) && rel.charCodeAt(kind.folder.length) === 47 /* / */ && rel.endsWith(".toml")) {
      const stem = rel.slice(kind.folder.length + 1, -".toml".length);
      if (!stem.includes("/")) return { kind, stem };
    }
  }
  return undefined;
}
