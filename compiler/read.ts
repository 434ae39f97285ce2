import type { z } from "zod";
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
 *
 * A file that parsed but did not validate is also kept as raw data
 * (`broken`): the link step checks the parts of it that are valid on their
 * own (`validPart`), so one run reports every independent error of a file —
 * a stdio server without a command *and* a tool on two lists — instead of the
 * first kind of problem. Nothing of a broken file reaches the model.
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
  /** Fixed-name files that parsed but did not validate, as raw data. */
  broken: Partial<Record<"settings" | "profiles" | "models" | "upstreams" | "policy" | "capabilities", Parsed<Record<string, unknown>>>>;
}

export interface ResourceFiles<T> {
  /** name → file, for every file whose name is valid (valid content or not). */
  readonly names: Map<string, string>;
  readonly valid: Map<string, Parsed<T>>;
  /** The files of valid name that parsed but did not validate, as raw TOML data. */
  readonly broken: Map<string, Parsed<Record<string, unknown>>>;
}

const FOLDER_HINTS: Record<string, string> = {
  "stacks.toml": "Stacks live one per file in `stacks/<slug>.toml`.",
  "slots.toml": "Slots live one per file in `slots/<name>.toml`.",
  "agents.toml": "Agents live one per file in `agents/<name>.toml`.",
};

/** `unreadable` files (already reported by the loader) count as present but invalid. */
export function readTree(tree: SourceTree, reporter: Reporter, unreadable: readonly string[] = []): TreeFiles {
  const out: TreeFiles = { slots: resources(), stacks: resources(), mcpServers: resources(), agents: resources(), broken: {} };
  for (const [rel, text] of tree.files) readFile(out, rel, text, reporter);
  // A folder's read error (`slots` a link that leads nowhere) is all there is to say of it: it is no file of a kind.
  for (const rel of unreadable) if (rel.endsWith(".toml")) readFile(out, rel, undefined, reporter);
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
  const broken = raw !== undefined && value === undefined ? { file: rel, value: raw } : undefined;
  store(out, kind.id, rel, stem, value, stem === undefined || kind.stemPattern!.test(stem), broken);
}

function store(out: TreeFiles, id: FileKindId, file: string, stem: string | undefined, value: unknown, nameOk: boolean, broken: Parsed<Record<string, unknown>> | undefined): void {
  const parsed = value === undefined ? "invalid" : { file, value };
  if (broken !== undefined && stem === undefined) out.broken[id as keyof TreeFiles["broken"]] = broken;
  switch (id) {
    case "settings": out.settings = parsed as TreeFiles["settings"]; return;
    case "profiles": out.profiles = parsed as TreeFiles["profiles"]; return;
    case "models": out.models = parsed as TreeFiles["models"]; return;
    case "upstreams": out.upstreams = parsed as TreeFiles["upstreams"]; return;
    case "policy": out.policy = parsed as TreeFiles["policy"]; return;
    case "capabilities": out.capabilities = parsed as TreeFiles["capabilities"]; return;
    case "slot": return addResource(out.slots, stem!, file, value, nameOk, broken);
    case "stack": return addResource(out.stacks, stem!, file, value, nameOk, broken);
    case "mcp-server": return addResource(out.mcpServers, stem!, file, value, nameOk, broken);
    case "agent": return addResource(out.agents, stem!, file, value, nameOk, broken);
  }
}

function addResource<T>(into: ResourceFiles<T>, name: string, file: string, value: unknown, nameOk: boolean, broken: Parsed<Record<string, unknown>> | undefined): void {
  if (!nameOk) return;
  into.names.set(name, file);
  if (value !== undefined) into.valid.set(name, { file, value: value as T });
  else if (broken !== undefined) into.broken.set(name, broken);
}

function resources<T>(): ResourceFiles<T> {
  return { names: new Map(), valid: new Map(), broken: new Map() };
}

/**
 * A part of a broken file (a key's value, one entry of a list or table) when
 * it validates on its own against `schema`, its own rules included; else
 * undefined. What the link step checks of a file that did not validate.
 */
export function validPart<T>(schema: z.ZodType<T>, value: unknown): T | undefined {
  const result = schema.safeParse(value);
  return result.success ? result.data : undefined;
}

/** `value` when it is a TOML table (not an array, a date or a scalar marker). */
export function tableOf(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date) ? (value as Record<string, unknown>) : undefined;
}

/** The entries of a broken file's array of tables at `value` that validate on their own, with their index (their position in the file). */
export function validEntries<T>(schema: z.ZodType<T>, value: unknown): Array<{ index: number; entry: T }> {
  if (!Array.isArray(value)) return [];
  return value.flatMap((item, index) => {
    const entry = validPart(schema, item);
    return entry === undefined ? [] : [{ index, entry }];
  });
}

/** The parsed value of a fixed-name file, or undefined when absent or invalid. */
export function validOf<T>(entry: Parsed<T> | "invalid" | undefined): Parsed<T> | undefined {
  return entry === "invalid" ? undefined : entry;
}
