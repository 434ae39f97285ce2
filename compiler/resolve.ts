import { BASE_TUNE, TUNE_KEYS, type Device, type FullTune, type Profile, type Settings, type Slot, type Tune, type TuneKey } from "../schema/index.js";
import { normalizeArgv } from "./argv.js";
import { sha256 } from "./hash.js";
import type { CompiledModelFacts, CompiledProfile, ResolvedSlot, SlotRunner, SlotSpec, TuneUnavailable } from "./model.js";
import { Reporter, type Site } from "./report.js";
import { checkArgv, runnerLabel, type SitedEnv, type SitedWord } from "./runner-check.js";
import { runnerKey, type Dialect, type ImageDigests, type RunnerFacts, type RunnerFactsIndex } from "./runner-facts.js";
import { NEWEST_DIALECT } from "./runner-help.js";

/**
 * Bumped whenever the spec's shape or argv rules change, so every slot re-plans.
 * 2: argv follows the runner's dialect (`--spec-type draft-mtp`, `--reasoning`),
 * and `observed` carries the dialect. (`observed.image_digest`, a docker
 * slot's image id, came without a bump: a process slot's spec is unchanged,
 * and a docker slot started before it is replaced once, its plan saying
 * `image digest first observed`.)
 */
export const SPEC_VERSION = 2;

/** Under `runtime = "swarm"` a runner binds every address of the node Swarm puts it on (it must be reachable from hal0's node)… */
export const SWARM_HOST = "0.0.0.0";
/** …and wants the box's API key, which the swarm driver mounts here from a Swarm secret (never in argv). */
export const SWARM_API_KEY_FILE = "/run/secrets/hal0-api-key";

/** A placement's labels in key order (they are hashed). */
function sortedLabels(labels: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.keys(labels).sort().map((k) => [k, labels[k]!]));
}

/** The site of a word whose site is never read (its argv is not checked). */
const UNREAD_SITE: Site = { file: "", path: [] };

/** Slot types whose runner takes llama-server's context and reasoning flags. */
const TUNED_TYPES = new Set(["llm", "embedding", "reranking"]);

/** What resolve reads besides the tree: observed facts, handed in as data (compile stays pure). */
export interface ResolveFacts {
  /** Runner facts by `runnerKey`; a runner without an entry was not probed. */
  readonly runners?: RunnerFactsIndex;
  /** Runner images' digests by reference (docker runtime); a reference without one is not present. */
  readonly images?: ImageDigests;
  /** Where the argv check reports (kept apart from the compile's own diagnostics: a runner's refusal holds one slot back, it does not invalidate the tree). */
  readonly runnerReporter?: Reporter;
}

export interface SlotInput {
  readonly name: string;
  readonly file: string;
  readonly slot: Slot;
  readonly profile: CompiledProfile;
  readonly model?: CompiledModelFacts;
  /** The slot's `[server] extra_args`, split and checked by the linker. */
  readonly extraArgs: readonly string[];
}

/** Resolves one linked slot: effective tune, runner argv, spec and spec hash. */
export function resolveSlot(input: SlotInput, settings: Settings, reporter: Reporter, facts: ResolveFacts = {}): ResolvedSlot {
  const { slot, profile, model } = input;
  const runtime = settings.slots.runtime;
  const device = slot.placement.device ?? defaultDevice(profile);
  // Docker and swarm run an image (probed on the engine hal0 talks to); the process runtime a runner word.
  const imaged = runtime !== "process";
  const env = sortedEnv(profile.env, slot.server.env);
  // A process runner is the binary its word names on the PATH it is spawned with: the slot's env's, when it sets one.
  const key = runnerKey(imaged ? "docker" : "process", imaged ? (profile.image ?? "") : (profile.runner[0] ?? ""), imaged ? undefined : env.PATH);
  const known = facts.runners?.get(key);
  // The dialect hal0 writes: the probed runner's; the newest known one when it was not probed (or is not llama-server).
  const dialect = known?.dialect ?? NEWEST_DIALECT;
  const { effective, unavailable } = effectiveTune(input, dialect, known, reporter);
  // Each word's site is kept only when a flag table will check the argv (a probed llama-server runner).
  const words = new ArgvWords(imaged ? [] : profile.runner, known !== undefined && known.flags !== null);
  words.pushEach(profileKeySite(input, "flags"), `profile \`${profile.name}\`'s flags`, profile.flags_argv);
  pushModelArgs(words, input, effective, dialect, runtime);
  words.pushEach({ file: input.file, path: ["server", "extra_args"], target: "value" }, `slot \`${input.name}\`'s extra_args`, input.extraArgs);
  // The runner's own words are a command prefix, passed as written (a wrapper's `-c` is not llama-server's).
  const argv = normalizeArgv(words.argv, imaged ? 0 : profile.runner.length);
  const runner = slotRunner(input, key, known, dialect, words.sited ?? [], facts.runnerReporter);
  const spec = slotSpec({
    argv,
    device, env, gpu_index: slot.placement.gpu_index, health_path: "/health", host: runtime === "swarm" ? SWARM_HOST : "127.0.0.1",
    image: imaged ? (profile.image ?? "") : undefined,
    // The bytes the model path holds, when a pull recorded them: an update in place replaces the slot (a split model's
    // other parts too: any of them may change alone).
    model_sha256: modelSha256(model),
    // The observed facts the slot runs with: in the hash, so a runner whose dialect changes, or an image a sync moved, re-plans the slot.
    observed: observedFacts(slot.type === "llm" ? dialect.id : undefined, imaged && profile.image ? facts.images?.get(profile.image) : undefined),
    port: slot.port, runtime, spec_version: SPEC_VERSION,
    ...(runtime === "swarm" ? { placement: { ...(slot.placement.node !== undefined ? { node: slot.placement.node } : {}), labels: sortedLabels(slot.placement.labels) } } : {}),
  });
  return {
    name: input.name, file: input.file, profile: profile.name, model: model?.id, port: slot.port, type: slot.type,
    enabled: slot.enabled, priority: slot.priority, pinned: slot.pinned, drift: slot.drift ?? settings.reconcile.drift,
    device, gpu_index: slot.placement.gpu_index, tune: slot.tune, tune_effective: effective, tune_unavailable: unavailable,
    spec, spec_hash: specHash(spec), runner,
  };
}

/** The spec's `observed` map: the runner's dialect (llm slots) and the image's digest (docker, when present); undefined when neither. */
function observedFacts(dialect: string | undefined, imageDigest: string | undefined): Record<string, string> | undefined {
  if (dialect === undefined && imageDigest === undefined) return undefined;
  return { ...(imageDigest !== undefined ? { image_digest: imageDigest } : {}), ...(dialect !== undefined ? { runner_dialect: dialect } : {}) };
}

/**
 * What the slot's argv was checked against, and what the check found (the
 * runner's flag table is known only for a probed llama-server runner).
 */
function slotRunner(input: SlotInput, key: string, known: RunnerFacts | undefined, dialect: Dialect, words: readonly SitedWord[], reporter: Reporter | undefined): SlotRunner {
  const version = known?.version.line ?? null;
  const source = known?.source ?? null;
  if (known === undefined) return { key, dialect: dialect.id, version, source, status: "unprobed", diagnostics: [] };
  if (known.flags === null) return { key, dialect: dialect.id, version, source, status: "not_checked", diagnostics: [] };
  const target = reporter ?? new Reporter(new Map());
  const before = target.diagnostics.length;
  checkArgv(words, slotEnv(input), known, known.flags, target);
  return { key, dialect: dialect.id, version, source, status: "checked", diagnostics: target.diagnostics.slice(before) };
}

/** The slot's env as the runner gets it (the profile's, the slot's over it), each variable with the key that set it. */
function slotEnv(input: SlotInput): SitedEnv[] {
  const { profile, slot, file, name } = input;
  const out = new Map<string, SitedEnv>();
  for (const [k, value] of Object.entries(profile.env)) {
    const site: Site = profile.origin === "file" ? { file: "profiles.toml", path: ["profile", profile.name, "env", k], target: "key" } : { file, path: ["profile"], target: "value" };
    out.set(k, { name: k, value, site, by: `profile \`${profile.name}\`'s env` });
  }
  for (const [k, value] of Object.entries(slot.server.env)) out.set(k, { name: k, value, site: { file, path: ["server", "env", k], target: "key" }, by: `slot \`${name}\`'s [server] env` });
  return [...out.values()];
}

/** A key of the slot's profile: in profiles.toml when the file defines the profile, else (a seed) the slot's `profile` key. */
function profileKeySite({ profile, file }: SlotInput, key: string): Site {
  return profile.origin === "file" ? { file: "profiles.toml", path: ["profile", profile.name, key], target: "value" } : { file, path: ["profile"], target: "value" };
}

/**
 * The spec with its keys in sorted order at every depth (env is sorted by
 * `sortedEnv`), so its plain JSON is its canonical JSON and hashing it needs
 * no key sorting. `test/compiler/resolve.test.ts` holds this against
 * `canonicalJson` for both runtimes.
 */
/** The recorded sha256 of a model's file; of a split model whose parts record theirs, every part's in order, joined by `,`. Undefined when not recorded. */
function modelSha256(model: CompiledModelFacts | undefined): string | undefined {
  if (model?.sha256 === undefined) return undefined;
  const parts = (model.parts ?? []).flatMap((p) => (p.sha256 === undefined ? [] : [p.sha256]));
  return [model.sha256, ...parts].join(",");
}

function slotSpec(s: SlotSpec): SlotSpec {
  const { argv, device, env, gpu_index, health_path, host, image, model_sha256, observed, placement, port, runtime, spec_version } = s;
  const out: Record<string, unknown> = { argv, device, env, gpu_index, health_path, host };
  if (image !== undefined) out.image = image;
  if (model_sha256 !== undefined) out.model_sha256 = model_sha256;
  if (observed !== undefined) out.observed = sortedEnv(observed, {});
  if (placement !== undefined) out.placement = placement.node === undefined ? { labels: placement.labels } : { labels: placement.labels, node: placement.node };
  Object.assign(out, { port, runtime, spec_version });
  return out as unknown as SlotSpec;
}

/** The spec hash of a spec read back from a runtime (keys in any order; env sorted here). */
export function rehashSpec(spec: SlotSpec): { spec: SlotSpec; spec_hash: string } {
  const normal = slotSpec({ ...spec, env: sortedEnv(spec.env, {}) });
  return { spec: normal, spec_hash: specHash(normal) };
}

/** `sha256:` of the spec's canonical JSON (its plain JSON, see `slotSpec`). */
export function specHash(spec: SlotSpec): string {
  return `sha256:${sha256(JSON.stringify(spec))}`;
}

export function defaultDevice(profile: Profile): Device {
  if (profile.device_class === "cpu") return "cpu";
  if (profile.device_class === "npu") return "npu";
  return profile.backend === "vulkan" ? "gpu-vulkan" : "gpu-rocm";
}

/**
 * Appends the model, network, tune and type flags, in the order DESIGN.md
 * gives, written in the runner's dialect; each word sited at the key it comes
 * from (a `[tune]` key, the slot's `model`, `port` or `type`).
 */
function pushModelArgs(out: ArgvWords, input: SlotInput, tune: FullTune, d: Dialect, runtime: Settings["slots"]["runtime"]): void {
  const { slot, model } = input;
  // An argv that is not checked reads no site, so none is built (`site` and `tuneBy` hand back the unread site).
  const at = out.site(input, "model");
  if (model) {
    if (model.path_abs) out.push(at, "the slot's model", "--model", model.path_abs);
    else out.push4(at, "the slot's model", "--hf-repo", model.hf_repo!, "--hf-file", model.hf_filename!);
    out.push(at, "the slot's model", "--alias", model.id);
  }
  const portAt = out.site(input, "port");
  if (runtime === "swarm") {
    // Reachable from the other nodes (Swarm picks the node; its address is not known here), and only with the box's API key, read from a Swarm secret.
    out.push4(portAt, "the slot's port", "--host", SWARM_HOST, "--port", String(slot.port));
    out.push(portAt, "the swarm runtime's API key", "--api-key-file", SWARM_API_KEY_FILE);
  } else out.push4(portAt, "the slot's port", "--host", "127.0.0.1", "--port", String(slot.port));
  if (!TUNED_TYPES.has(slot.type)) return;
  const typeAt = out.site(input, "type");
  // llama-server's Prometheus counters (GET /metrics), which hal0 scrapes for tokens/s (server/stats/).
  out.push(typeAt, "hal0's slot stats", "--metrics");
  out.push(out.tuneSite(input, "ctx_size"), "[tune] ctx_size", "--ctx-size", String(tune.ctx_size));
  if (slot.type === "llm") {
    if (d.reasoning_flag) out.push(out.tuneSite(input, "enable_thinking"), "[tune] enable_thinking", "--reasoning", tune.enable_thinking ? "on" : "off");
    if (d.reasoning_budget && tune.enable_thinking) out.push(out.tuneSite(input, "reasoning_budget"), "[tune] reasoning_budget", "--reasoning-budget", String(tune.reasoning_budget > 0 ? tune.reasoning_budget : -1));
    // Templates read reasoning_effort (no flag sets it); enable_thinking goes there only when the runner has no --reasoning.
    if (d.template_kwargs) {
      const kwargs = d.reasoning_flag ? { reasoning_effort: tune.reasoning_effort } : { enable_thinking: tune.enable_thinking, reasoning_effort: tune.reasoning_effort };
      out.push(out.tuneSite(input, "reasoning_effort"), "[tune] reasoning_effort", "--chat-template-kwargs", JSON.stringify(kwargs));
    }
    if (model?.jinja) out.push(at, "the model's jinja", "--jinja");
    if (model && model.chat_template !== "auto") {
      if (model.chat_template_file_abs) out.push(at, "the model's chat_template", "--chat-template-file", model.chat_template_file_abs);
      else out.push(at, "the model's chat_template", "--chat-template", model.chat_template);
    }
    if (tune.speculation === "draft" && model?.draft_abs && d.draft_flag) {
      const spec = out.tuneSite(input, "speculation");
      if (d.spec_type && d.draft_type) out.push(spec, "[tune] speculation", "--spec-type", d.draft_type);
      out.push(spec, "[tune] speculation", d.draft_flag, model.draft_abs);
    }
    if (tune.speculation === "mtp" && d.mtp_type) out.push(out.tuneSite(input, "speculation"), "[tune] speculation", "--spec-type", d.mtp_type);
    if (tune.vision && model?.mmproj_abs) out.push(out.tuneSite(input, "vision"), "[tune] vision", "--mmproj", model.mmproj_abs);
  }
  if (slot.type === "embedding") out.push(typeAt, "the slot's type", "--embedding");
  if (slot.type === "reranking") out.push(typeAt, "the slot's type", "--reranking");
}

/**
 * A slot's argv as it is built: the words (after the runner prefix, for the
 * process runtime) and, when the argv is to be checked against a flag table,
 * each word with the key that wrote it (`sited`). Unchecked slots, the common
 * case, build no site per word.
 */
class ArgvWords {
  readonly argv: string[];
  readonly sited: SitedWord[] | undefined;

  constructor(prefix: readonly string[], sited: boolean) {
    this.argv = [...prefix];
    this.sited = sited ? [] : undefined;
  }

  /** The site of the slot's own `key` (`model`, `port`, `type`); the unread site when no site is kept. */
  site(input: SlotInput, key: "model" | "port" | "type"): Site {
    return this.sited === undefined ? UNREAD_SITE : { file: input.file, path: [key], target: "value" };
  }

  /** Where a tune value came from (see `tuneSite`); the unread site when no site is kept. */
  tuneSite(input: SlotInput, key: TuneKey): Site {
    return this.sited === undefined ? UNREAD_SITE : tuneSite(input, key);
  }

  /** One or two words (a flag and its value), both written by the key at `site`. */
  push(site: Site, by: string, first: string, second?: string): void {
    this.argv.push(first);
    this.sited?.push({ word: first, site, by });
    if (second === undefined) return;
    this.argv.push(second);
    this.sited?.push({ word: second, site, by });
  }

  /** Two flags with their values (`--hf-repo R --hf-file F`, `--host H --port P`), all written by the key at `site`. */
  push4(site: Site, by: string, a: string, b: string, c: string, d: string): void {
    this.push(site, by, a, b);
    this.push(site, by, c, d);
  }

  /** The words of one string value (`flags`, `extra_args`), each sited at its own index within the value. */
  pushEach(site: Site, by: string, words: readonly string[]): void {
    for (let index = 0; index < words.length; index++) {
      const word = words[index]!;
      this.argv.push(word);
      this.sited?.push({ word, site: { ...site, word: { text: word, index } }, by });
    }
  }
}

/** Profile tune overlaid by the slot's; values the model can't honour fall back, with a warning. */
function effectiveTune(input: SlotInput, d: Dialect, known: RunnerFacts | undefined, reporter: Reporter): { effective: FullTune; unavailable: Partial<Record<TuneKey, TuneUnavailable>> } {
  const { slot, profile, model } = input;
  const effective = overlay(overlay(BASE_TUNE, profile.tune), slot.tune);
  const unavailable: Partial<Record<TuneKey, TuneUnavailable>> = {};
  if (!model || !TUNED_TYPES.has(slot.type)) return { effective, unavailable };
  const limit = (key: TuneKey, fallback: FullTune[TuneKey], reason: string, subject = `model \`${model.id}\``): void => {
    unavailable[key] = { requested: effective[key], effective: fallback, reason };
    (effective as Record<TuneKey, unknown>)[key] = fallback;
    reporter.report("slot.tune_unavailable", tuneSite(input, key), `${key} = ${JSON.stringify(unavailable[key]!.requested)} is unavailable for ${subject}`,
      `${reason}; slot \`${input.name}\` runs with ${key} = ${JSON.stringify(fallback)}.`);
  };
  if (model.context_length !== undefined && effective.ctx_size > model.context_length) {
    limit("ctx_size", model.context_length, `model \`${model.id}\` has a native context of ${model.context_length} tokens`);
  }
  if (effective.speculation === "mtp" && !model.mtp) limit("speculation", "off", `model \`${model.id}\` has no MTP heads (mtp = false)`);
  if (effective.speculation === "draft" && !model.draft) limit("speculation", "off", `model \`${model.id}\` has no drafter (no \`draft\` file)`);
  if (effective.vision && !model.mmproj) limit("vision", false, `model \`${model.id}\` has no vision projector (no \`mmproj\` file)`);
  // What the runner's dialect cannot express (an older llama-server): unavailable, never a flag it would refuse.
  if (slot.type === "llm" && known?.dialect) {
    const label = runnerLabel(known);
    const runner = `the runner (${label})`;
    const lim = (key: TuneKey, fallback: FullTune[TuneKey], reason: string) => limit(key, fallback, reason, label);
    if (effective.speculation === "mtp" && !d.mtp_type) lim("speculation", "off", `${runner} has no MTP speculative decoding (no \`--spec-type\` value for it)`);
    if (effective.speculation === "draft" && (!d.draft_flag || (d.spec_type && !d.draft_type))) lim("speculation", "off", `${runner} has no drafter flag`);
    if (effective.enable_thinking && !d.reasoning_flag && !d.template_kwargs) lim("enable_thinking", false, `${runner} has neither \`--reasoning\` nor \`--chat-template-kwargs\``);
    if (effective.enable_thinking && effective.reasoning_budget > 0 && !d.reasoning_budget) lim("reasoning_budget", 0, `${runner} has no \`--reasoning-budget\``);
    if (effective.vision && !d.mmproj) lim("vision", false, `${runner} has no \`--mmproj\` (no vision projector)`);
  }
  return { effective, unavailable };
}

/** Where a tune value came from: the slot's [tune], the profile's [tune], or (a seed) the slot's profile key. */
function tuneSite({ slot, profile, file }: SlotInput, key: TuneKey) {
  if (slot.tune[key] !== undefined) return { file, path: ["tune", key], target: "value" as const };
  if (profile.origin === "file" && profile.tune[key] !== undefined) return { file: "profiles.toml", path: ["profile", profile.name, "tune", key], target: "value" as const };
  return { file, path: ["profile"], target: "value" as const };
}

/** `base` overlaid by the keys `over` sets. */
function overlay(base: FullTune, over: Tune): FullTune {
  const out = { ...base };
  for (const key of TUNE_KEYS) if (over[key] !== undefined) (out as Record<TuneKey, unknown>)[key] = over[key];
  return out;
}

/** The profile's env overlaid by the slot's, keys sorted. */
function sortedEnv(base: Readonly<Record<string, string>>, over: Readonly<Record<string, string>>): Record<string, string> {
  const merged: Record<string, string> = { ...base, ...over };
  const out: Record<string, string> = {};
  for (const key of Object.keys(merged).sort()) out[key] = merged[key]!;
  return out;
}
