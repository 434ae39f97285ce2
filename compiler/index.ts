// Sources and loading (the compiler's only I/O)
export { sourceTree, type SourceTree } from "./sources.js";
export { loadTree, readTreeFile, startsWithBom, ConfigNotFoundError, configNotFoundMessage, type LoadResult } from "./load.js";

// Compiling
export { compile, defaultSettings, treeDigest, type CompileFacts } from "./compile.js";
export { countDiagnostics, errnoBrief, MAX_DIAGNOSTICS } from "./report.js";
export { runnerKey, type ImageDigests, type RunnerFacts, type RunnerFactsIndex, type FlagTable, type RunnerFlag, type Dialect, type RunnerVersion } from "./runner-facts.js";
export { SPEC_VERSION, SWARM_API_KEY_FILE, SWARM_HOST, rehashSpec } from "./resolve.js";
export { tierFor } from "./policy.js";
export { classifyTool, type ToolVerdict } from "./link-agents.js";
export { canonicalJson, fingerprint, hashOf, hashSecret, same } from "./hash.js";
export { normalizeArgv, shellSplit, groupArgv } from "./argv.js";

// The compiled model
export type {
  Model, CompileResult, CompiledProfile, CompiledModelFacts, ResolvedSlot, SlotRunner, SlotSpec, TuneUnavailable, CompiledPolicy,
  CompiledAgent,
} from "./model.js";
export { parsedOrUndefined } from "./fast-validate.js";
