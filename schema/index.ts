// Names and grammars
export {
  SLOT_NAME_PATTERN, RESOURCE_ID_PATTERN, AGENT_ID_PATTERN, ENV_NAME_PATTERN, TOOL_NAME_PATTERN,
  SlotName, ProfileName, ResourceId, AgentId, EnvName, ToolName, ChildName, NAME_GRAMMARS,
} from "./names.js";

// File kinds
export { Settings, RUNTIMES, DRIFT_POLICIES, MEMORY_ENGINES, PARALLEL_DEFAULT } from "./settings.js";
export { Profile, ProfilesFile, DEVICE_CLASSES, BACKENDS } from "./profile.js";
export { Slot, Placement, SlotServer, SLOT_TYPES, DEVICES, type SlotType, type Device } from "./slot.js";
export { ModelFacts, ModelsFile } from "./model.js";
export { Stack, StackSlot, STACK_MODES } from "./stack.js";
export { Upstream, UpstreamsFile } from "./upstream.js";
export { McpServer, ToolPolicy, Exposure, MCP_TRANSPORTS, RESERVED_MCP_IDS } from "./mcp-server.js";
export {
  CapabilitiesFile, Backend, CatalogSource, Selection, BACKEND_KINDS, SLOT_CHILDREN, CHILD_NAME_PATTERN, type BackendKind,
} from "./capabilities.js";
export {
  Agent, AgentServer, AgentAuth, AGENT_NAME_PATTERN, AGENT_AUTH_KINDS, defaultAgentWorkspace,
} from "./agent.js";
export { PolicyFile, TIERS, builtinServerOf, defaultTiers, tierRank, type BuiltinServer, type Tier, type TierLists } from "./policy.js";
export { FILE_KINDS, classifyPath, slotOfFile, type FileKind, type FileKindId } from "./file-kinds.js";

// Tune
export {
  Tune, TUNE_KEYS, BASE_TUNE, REASONING_EFFORTS, SPECULATION_MODES,
  SLOT_LEGACY_ROOT_KEYS, MODEL_LEGACY_TUNE_KEYS, type TuneKey, type FullTune,
} from "./tune.js";

// Built-in data
export { SEED_PROFILES } from "./data/seed-profiles.js";
export { SETTINGS_REGISTRY, type SettingsRegistryEntry, type SettingsService } from "./data/settings-registry.js";
export {
  AUTONOMOUS_READ_TOOLS, AUTONOMOUS_WRITE_TOOLS, GATED_TOOLS, EXCLUDED_TOOLS, NEVER_LOOSEN_TOOLS,
  type SeedTool,
} from "./data/seed-tiers.js";
export { HAL0_READ_TOOLS, HAL0_WRITE_TOOLS, HAL0_GATED_TOOLS, AGENTS_READ_TOOLS, AGENTS_WRITE_TOOLS, AGENTS_GATED_TOOLS } from "./data/hal0-tools.js";

// Diagnostics and codes
export { CODES, isCode, type Code, type CodeInfo } from "./codes.js";
export {
  Diagnostic, Severity, SourcePosition, RelatedPosition, type KeyPath,
} from "./diagnostic.js";

// JSON Schema export
export { HAL0_SCHEMA_ID, renderJsonSchemas, jsonSchemaOf } from "./json-schema.js";

// Plans
export {
  Plan, PlanBody, Change, SlotChange, SettingsChange, HermesChange, SettingsBuckets, PlanWarning,
  SlotSpecSchema, SlotViewSchema, HermesViewSchema,
  ACTIONS, APPLY_CLASSES, CHANGE_KINDS, PLAN_FORMAT_VERSION, SLOT_REASONS, SETTINGS_REASONS, HERMES_REASONS,
  slotAddress, slotNameOf, hermesAddress, hermesProfileOf, parseAddress,
  type Action, type ApplyClass, type ChangeKind, type Address, type SlotAddress, type HermesAddress,
  type SlotReason, type SettingsReason, type HermesReason, type Reason, type SlotSpec, type SlotPlacement, type SlotView, type HermesView,
} from "./plan.js";
