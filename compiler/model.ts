import type {
  AgentServer, Backend, CatalogSource, Device, Selection, FullTune, McpServer, ModelFacts, Profile, Settings, SlotSpec, SlotType, Stack, Tier, Tune, TuneKey, Upstream,
} from "../schema/index.js";

/**
 * The compiled, validated, linked and resolved desired state: what the planner
 * reads. Every map is keyed and ordered by name, so iteration is deterministic.
 * A Model exists only for a tree with no error diagnostics.
 */
export interface Model {
  /** sha256 over every file's path and text: identifies the tree a plan was made from. */
  readonly digest: string;
  /**
   * The argv check's findings over every slot, once each, sorted (the
   * compiler's order): errors are flags a runner would refuse. Not part of
   * compile's diagnostics: see `compile`.
   */
  readonly runnerDiagnostics: readonly import("../schema/index.js").Diagnostic[];
  readonly root: string;
  readonly settings: Settings;
  readonly profiles: Readonly<Record<string, CompiledProfile>>;
  readonly models: Readonly<Record<string, CompiledModelFacts>>;
  readonly slots: Readonly<Record<string, ResolvedSlot>>;
  readonly stacks: Readonly<Record<string, Stack & { slug: string; file: string }>>;
  readonly upstreams: readonly Upstream[];
  readonly mcpServers: Readonly<Record<string, McpServer & { id: string; file: string }>>;
  readonly policy: CompiledPolicy;
  readonly capabilities: CompiledCapabilities;
  /** `agents/<name>.toml`: each bundled agent's MCP policy, by name. */
  readonly agents: Readonly<Record<string, CompiledAgent>>;
}

/**
 * One bundled agent's MCP policy, linked: the name equals the file stem,
 * builtin servers are hal0's own, and the tool lists are disjoint. What
 * `server/agents/classify.ts` decides tool calls by.
 */
export interface CompiledAgent {
  readonly name: string;
  /** Tree-relative file, for diagnostics. */
  readonly file: string;
  /** `[agent] display`, or the name when that is empty. */
  readonly display: string;
  /** Absolute: `[agent] workspace`, or `/var/lib/hal0/agents/<name>/workspace` when empty. */
  readonly workspace: string;
  /** `[mcp.servers.<id>]` by id, sorted; disabled ones stay listed (and classify as unknown_server). */
  readonly servers: Readonly<Record<string, AgentServer>>;
  readonly tools: { readonly allow: readonly string[]; readonly gated: readonly string[]; readonly blocked: readonly string[] };
}

/** capabilities.toml, linked: backends and catalogs in file order, selections keyed slot → child in sorted order. */
export interface CompiledCapabilities {
  /** `capabilities.toml` when the tree has one. */
  readonly file?: string;
  readonly backends: readonly Backend[];
  readonly catalogs: readonly CatalogSource[];
  readonly selections: Readonly<Record<string, Readonly<Record<string, Selection>>>>;
}

export interface CompiledProfile extends Profile {
  readonly name: string;
  /** `seed` for a built-in profile, `file` when profiles.toml defines (or overrides) it. */
  readonly origin: "seed" | "file";
  /** `flags`, shell-split. */
  readonly flags_argv: readonly string[];
}

export interface CompiledModelFacts extends ModelFacts {
  readonly id: string;
  /** Absolute paths, resolved against the config folder. */
  readonly path_abs?: string;
  readonly draft_abs?: string;
  readonly mmproj_abs?: string;
  /** `chat_template` when it names a `.jinja` file, made absolute. */
  readonly chat_template_file_abs?: string;
}

/** Why a requested tune value is not what the slot runs with. */
export interface TuneUnavailable {
  readonly requested: unknown;
  readonly effective: unknown;
  readonly reason: string;
}

export interface ResolvedSlot {
  readonly name: string;
  /** Tree-relative file, for diagnostics and change sets. */
  readonly file: string;
  readonly profile: string;
  readonly model?: string;
  readonly port: number;
  readonly type: SlotType;
  readonly enabled: boolean;
  readonly priority: number;
  readonly pinned: boolean;
  readonly drift: "enforce" | "warn";
  readonly device: Device;
  readonly gpu_index: number;
  /** The slot's own sparse overrides, as written. */
  readonly tune: Tune;
  /** Profile tune overlaid by the slot's, then limited by what the model supports. */
  readonly tune_effective: FullTune;
  readonly tune_unavailable: Partial<Record<TuneKey, TuneUnavailable>>;
  /** What the runtime runs; `spec_hash` changes exactly when this does. */
  readonly spec: SlotSpec;
  readonly spec_hash: string;
  /** The runner the argv was written for, and what checking it against the runner's flag table found. */
  readonly runner: SlotRunner;
}

/**
 * A slot's runner as compile saw it (compiler/runner-facts.ts): the facts are
 * observed (the probe, reconciler/runner-probe.ts) and handed to compile.
 */
export interface SlotRunner {
  /** `process:<runner word>` or `docker:<image>`: its key in the facts. */
  readonly key: string;
  /**
   * `checked`: a probed llama-server, argv checked against its --help;
   * `not_checked`: probed, not llama-server (TTS, FLM, ComfyUI, whisper runners): argv not checked;
   * `unprobed`: no facts (not installed yet, or the caller passed none): the newest known dialect, argv not checked.
   */
  readonly status: "checked" | "not_checked" | "unprobed";
  /** The dialect id the argv is written in (compiler/runner-facts.ts `Dialect`). */
  readonly dialect: string;
  /** The runner's version line, null when unprobed. */
  readonly version: string | null;
  /** Where the facts came from (binary path, size and mtime; or image id), null when unprobed. */
  readonly source: string | null;
  /** The argv check's findings, located at the keys that wrote each word: errors mean the runner would refuse to start. */
  readonly diagnostics: readonly import("../schema/index.js").Diagnostic[];
}

/** The runtime-facing spec of one slot: the plan contract's (schema/plan.ts). */
export type { SlotSpec } from "../schema/index.js";

export interface CompiledPolicy {
  /** Every known tool's tier after `[tiers]` of policy.toml. */
  readonly tiers: Readonly<Record<string, Tier>>;
  /** Per caller identity, only the tools whose tier differs from `tiers` (`[agents.<id>]`, raised by a bound agent file). */
  readonly agents: Readonly<Record<string, Readonly<Record<string, Tier>>>>;
  /**
   * Per identity `hermes__<P>` that `agents/<P>.toml` binds: the file, and
   * its verdict for each of hal0's own tools whose tier it raised (by the
   * tool's builtin server, `builtinServerOf`: gated, or blocked for
   * blocked, unknown_tool and unknown_server). Folded into `agents` already;
   * kept to say why a call is refused.
   */
  readonly bound?: Readonly<Record<string, BoundAgentFile>>;
}

/** An agent file's say over the identity it binds (`CompiledPolicy.bound`). */
export interface BoundAgentFile {
  /** Tree-relative: `agents/<P>.toml`. */
  readonly file: string;
  readonly verdicts: Readonly<Record<string, "gated" | "blocked" | "unknown_server" | "unknown_tool">>;
}

export interface CompileResult {
  readonly model?: Model;
  readonly diagnostics: import("../schema/index.js").Diagnostic[];
  /**
   * A tree with errors whose hal0.toml validated (or has none: the defaults):
   * its settings, which depend on no other file. What `hal0 serve` listens on
   * and is guarded by before any version of the tree has compiled, rather
   * than the built-in defaults. Absent when hal0.toml itself has errors, and
   * on a tree that compiled (its model holds them).
   */
  readonly settings?: Settings;
}
