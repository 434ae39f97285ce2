import {
  classifyPath, type Agent, type CapabilitiesFile, type FileKindId, type McpServer, type ModelFacts, type PolicyFile, type Profile,
  type Settings, type Slot, type Stack, type Upstream,
} from "../schema/index.js";
import type { SourceTree } from "./sources.js";
import type { Reporter } from "./report.js";
import { explainName, quoteName } from "./explain.js";
import { parseToml, validateFile } from "./validate.js";

/** One valid resource file: its tree-relative path and its parsed value. */
export interface Parsed<T> {
  readonly file: string;
  readonly value: T;
}

/**
 * Every file of the tree, parsed and validated on its own. A fixed-name file
 * that is present but invalid is `"invalid"`; per-resource kinds list every
 * resource whose file exists (`names`) apart from those that validated (`valid`),
 * so later rules can tell "missing" from "broken".
 */
export interface TreeFiles {
  settings?: Parsed<Settings> | "invalid";
  profiles?: Parsed<{ profile: Record<string, Profile> }> | "invalid";
  models?: Parsed<{ model: Record<string, ModelFacts> }> | "invalid";
  upstreams?: Parsed<{ upstream: Upstream[] }> | "invalid";
  policy?: Parsed<PolicyFile> | "invalid";
  capabilities?: Parsed<CapabilitiesFile> | "invalid";
  slots: ResourceFiles<Slot>;
  stacks: ResourceFiles<Stack>;
  mcpServers: ResourceFiles<McpServer>;
  agents: ResourceFiles<Agent>;
}

export interface ResourceFiles<T> {
  /** name → file, for every file whose name is valid (valid content or not). */
  readonly names: Map<string, string>;
  readonly valid: Map<string, Parsed<T>>;
}

const FOLDER_HINTS: Record<string, string> = {
  "stacks.toml": "Stacks live one per file in `stacks/<slug>.toml`.",
  "slots.toml": "Slots live one per file in `slots/<name>.toml`.",
  "agents.toml": "Agents live one per file in `agents/<name>.toml`.",
};

/** `unreadable` files (already reported by the loader) count as present but invalid. */
export function readTree(tree: SourceTree, reporter: Reporter, unreadable: readonly string[] = []): TreeFiles {
  const out: TreeFiles = { slots: resources(), stacks: resources(), mcpServers: resources(), agents: resources() };
  for (const [rel, text] of tree.files) readFile(out, rel, text, reporter);
  for (const rel of unreadable) readFile(out, rel, undefined, reporter);
  return out;
}

function readFile(out: TreeFiles, rel: string, text: string | undefined, reporter: Reporter): void {
  const hit = classifyPath(rel);
  if (!hit) {
    reporter.report("config.unknown_file", { file: rel, path: [] }, `hal0 does not read ${rel}`,
      `This file is ignored. ${FOLDER_HINTS[rel] ?? "hal0 reads hal0.toml, profiles.toml, models.toml, upstreams.toml, policy.toml, capabilities.toml and the folders slots/, stacks/, mcp-servers/ and agents/."}`);
    return;
  }
  const { kind, stem } = hit;
  if (stem !== undefined && !kind.stemPattern!.test(stem)) {
    reporter.report("config.invalid_name", { file: rel, path: [] }, `invalid file name ${quoteName(stem)}`,
      `The file's name is the ${kind.id}'s name. ${explainName(stem, kind.stemPattern)}`);
  }
  const raw = text === undefined ? undefined : parseToml(rel, text, reporter);
  const value = raw === undefined ? undefined : validateFile<unknown>(kind, rel, raw, reporter);
  store(out, kind.id, rel, stem, value, stem === undefined || kind.stemPattern!.test(stem));
}

function store(out: TreeFiles, id: FileKindId, file: string, stem: string | undefined, value: unknown, nameOk: boolean): void {
  const parsed = value === undefined ? "invalid" : { file, value };
  switch (id) {
    case "settings": out.settings = parsed as TreeFiles["settings"]; return;
    case "profiles": out.profiles = parsed as TreeFiles["profiles"]; return;
    case "models": out.models = parsed as TreeFiles["models"]; return;
    case "upstreams": out.upstreams = parsed as TreeFiles["upstreams"]; return;
    case "policy": out.policy = parsed as TreeFiles["policy"]; return;
    case "capabilities": out.capabilities = parsed as TreeFiles["capabilities"]; return;
    case "slot": return addResource(out.slots, stem!, file, value, nameOk);
    case "stack": return addResource(out.stacks, stem!, file, value, nameOk);
    case "mcp-server": return addResource(out.mcpServers, stem!, file, value, nameOk);
    case "agent": return addResource(out.agents, stem!, file, value, nameOk);
  }
}

function addResource<T>(into: ResourceFiles<T>, name: string, file: string, value: unknown, nameOk: boolean): void {
  if (!nameOk) return;
  into.names.set(name, file);
  if (value !== undefined) into.valid.set(name, { file, value: value as T });
}

function resources<T>(): ResourceFiles<T> {
  return { names: new Map(), valid: new Map() };
}

/** The parsed value of a fixed-name file, or undefined when absent or invalid. */
export function validOf<T>(entry: Parsed<T> | "invalid" | undefined): Parsed<T> | undefined {
  return entry === "invalid" ? undefined : entry;
}
