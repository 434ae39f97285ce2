/**
 * What hal0 knows of a runner binary (or a runner image): the observed facts
 * `compile()` takes as data, never reads. The observe side (the probe,
 * reconciler/runner-probe.ts) asks each runner `--version` and `--help` once,
 * keeps the texts in the state folder, and hands them to compile as
 * `RunnerFacts`; compile maps hal0's tune keys to the runner's dialect and
 * checks every argv word against its flag table (compiler/runner-check.ts).
 *
 * The parsers (compiler/runner-help.ts) are pure: text in, facts out.
 */

/** One entry of a llama-server flag table, as its `--help` prints it. */
export interface RunnerFlag {
  /** Every spelling, as printed (`-c`, `--ctx-size`); the first long one is `canonical`. */
  readonly names: readonly string[];
  /** The first `--long` name (the first name when there is none). */
  readonly canonical: string;
  /** Whether the flag takes a value (a placeholder such as `N`, `FNAME`, `{a,b}`, `[on|off]`, `<0|1>`). */
  readonly takes_value: boolean;
  /** The value as the help writes it (`N`, `{none,linear,yarn}`, `none,draft-simple,…`), null for none. */
  readonly placeholder: string | null;
  /** The allowed values when the help lists them (in the placeholder or in the description), else null: any value. */
  readonly values: readonly string[] | null;
  /** The value is a comma-separated list of `values` (`--spec-type`'s). */
  readonly list: boolean;
  /** Deprecated: still accepted, with a warning; `replacement` as the help names it (null: none named). */
  readonly deprecated: { readonly replacement: string | null } | null;
  /** Removed: the runner refuses it (exit 1); `hint` is the runner's own text (`use --spec-draft-n-max or …`). */
  readonly removed: { readonly hint: string } | null;
  /** The `LLAMA_ARG_*` (or other) environment variable that sets it, null for none. */
  readonly env: string | null;
  /** The description, lines joined with single spaces. */
  readonly description: string;
}

/** A parsed `--help`: every flag; lookups by any spelling and by env variable. */
export interface FlagTable {
  readonly flags: readonly RunnerFlag[];
  /** Any spelling (`-c`, `--ctx-size`, `--no-mmap`) → its flag. */
  readonly byName: ReadonlyMap<string, RunnerFlag>;
  /** Env variable (`LLAMA_ARG_CTX_SIZE`) → its flag. */
  readonly byEnv: ReadonlyMap<string, RunnerFlag>;
}

/** What `--version` says. `kind` is "llama-server" only for llama.cpp's `version: N (commit)` + `built with …` shape. */
export interface RunnerVersion {
  readonly kind: "llama-server" | "other";
  /** llama.cpp's build number (9749), null for other runners. */
  readonly build: number | null;
  /** llama.cpp's short commit (d32676d77), null for other runners. */
  readonly commit: string | null;
  /** The first non-empty line, trimmed (what people read), "" when it printed nothing. */
  readonly line: string;
}

/**
 * How hal0 writes its own mappings for one runner: derived from the flag
 * table (`dialectOf`), never from the version number. `id` names the
 * choices; it enters the spec (and so the spec hash) as
 * `spec.observed.runner_dialect`, so a runner upgrade that changes how hal0
 * must write the same config re-plans the slot, and one that does not, does not.
 */
export interface Dialect {
  /** Stable text of the choices below, e.g. `llama-server:spec-type,mtp=draft-mtp,draft=draft-simple,draft-flag=--spec-draft-model,reasoning,budget,kwargs` (build 9749) or `llama-server:draft-flag=--model-draft` (February 2025). */
  readonly id: string;
  /** `--spec-type` exists: speculation is chosen by type (`none` by default). */
  readonly spec_type: boolean;
  /** The `--spec-type` value for MTP (`draft-mtp`; `mtp` in some builds), null: the runner cannot do MTP. */
  readonly mtp_type: string | null;
  /** The `--spec-type` value for a drafter model (`draft-simple`), null: no type needed (older builds) or none listed. */
  readonly draft_type: string | null;
  /** The flag that names the drafter file (`--spec-draft-model`, older `--model-draft`), null: none. */
  readonly draft_flag: string | null;
  /** `--reasoning on|off` exists (enable_thinking maps to it). */
  readonly reasoning_flag: boolean;
  /** `--reasoning-budget N` exists. */
  readonly reasoning_budget: boolean;
  /** `--chat-template-kwargs JSON` exists (reasoning_effort, and enable_thinking without `--reasoning`). */
  readonly template_kwargs: boolean;
  /**
   * `--mmproj FILE` exists (`[tune] vision`; llama-server's server took it from April 2025). Not part of `id`:
   * it changes only the argv of a slot with vision on, which moves that slot's hash by itself.
   */
  readonly mmproj: boolean;
}

/** Everything hal0 learned of one runner: what compile reads. */
export interface RunnerFacts {
  readonly version: RunnerVersion;
  /** The flag table (llama-server runners only; null for others: their flags are not checked). */
  readonly flags: FlagTable | null;
  /** The dialect hal0 writes for it (llama-server runners only). */
  readonly dialect: Dialect | null;
  /** Where the facts came from, for people: `/usr/bin/llama-server (size 1234, mtime …)`, `image sha256:…`. */
  readonly source: string;
}

/**
 * The facts compile takes, by runner key (`runnerKey`): a process runner by
 * the word its profile's `runner` starts with, a docker runner by its image.
 * A runner with no entry was not probed (not installed yet, or the caller
 * passed no facts): hal0 writes the newest known dialect and says so.
 */
export type RunnerFactsIndex = ReadonlyMap<string, RunnerFacts>;

/**
 * What each runner image reference names on the engine now: reference →
 * the local image's digest (its id, `sha256:…`: the digest of its config,
 * which every pull or build of different content moves). Observed by the
 * runner probe, handed to compile as data: a docker slot's spec carries its
 * image's digest as `observed.image_digest`, so a sync that moves a tag
 * re-plans the slots that run it. A reference with no entry is not present
 * (or was not asked): the spec then has no digest.
 */
export type ImageDigests = ReadonlyMap<string, string>;

/**
 * The key of a runner in a `RunnerFactsIndex`. A process runner's word with
 * the PATH a slot's env sets (`path`): it names the binary found on that
 * PATH, which may not be the one hal0's own PATH finds.
 */
export function runnerKey(runtime: "process" | "docker", wordOrImage: string, path?: string): string {
  return runtime === "process" && path !== undefined ? `${runtime}:${wordOrImage} (PATH=${path})` : `${runtime}:${wordOrImage}`;
}
