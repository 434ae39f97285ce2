import { BASE_TUNE, TUNE_KEYS, type Device, type FullTune, type Profile, type Settings, type Slot, type Tune, type TuneKey } from "../schema/index.js";
import { normalizeArgv } from "./argv.js";
import { sha256 } from "./hash.js";
import type { CompiledModelFacts, CompiledProfile, ResolvedSlot, SlotSpec, TuneUnavailable } from "./model.js";
import type { Reporter } from "./report.js";

/** Bumped whenever the spec's shape or argv rules change, so every slot re-plans. */
export const SPEC_VERSION = 1;

/** Flags for `speculation = "mtp"`; the profile's own flags may refine them (a later flag wins). */
const MTP_FLAGS = ["--spec-type", "mtp"];
/** Slot types whose runner takes llama-server's context and reasoning flags. */
const TUNED_TYPES = new Set(["llm", "embedding", "reranking"]);

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
export function resolveSlot(input: SlotInput, settings: Settings, reporter: Reporter): ResolvedSlot {
  const { slot, profile, model } = input;
  const device = slot.placement.device ?? defaultDevice(profile);
  const { effective, unavailable } = effectiveTune(input, reporter);
  const raw = settings.slots.runtime === "docker" ? [...profile.flags_argv] : [...profile.runner, ...profile.flags_argv];
  pushModelArgs(raw, input, effective);
  for (const word of input.extraArgs) raw.push(word);
  const argv = normalizeArgv(raw);
  const env = sortedEnv(profile.env, slot.server.env);
  const spec = slotSpec({
    argv,
    device, env, gpu_index: slot.placement.gpu_index, health_path: "/health", host: "127.0.0.1",
    image: settings.slots.runtime === "docker" ? (profile.image ?? "") : undefined,
    port: slot.port, runtime: settings.slots.runtime, spec_version: SPEC_VERSION,
  });
  return {
    name: input.name, file: input.file, profile: profile.name, model: model?.id, port: slot.port, type: slot.type,
    enabled: slot.enabled, priority: slot.priority, pinned: slot.pinned, drift: slot.drift ?? settings.reconcile.drift,
    device, gpu_index: slot.placement.gpu_index, tune: slot.tune, tune_effective: effective, tune_unavailable: unavailable,
    spec, spec_hash: specHash(spec),
  };
}

/**
 * The spec with its keys in sorted order at every depth (env is sorted by
 * `sortedEnv`), so its plain JSON is its canonical JSON and hashing it needs
 * no key sorting. `test/compiler/resolve.test.ts` holds this against
 * `canonicalJson` for both runtimes.
 */
function slotSpec(s: SlotSpec): SlotSpec {
  const { argv, device, env, gpu_index, health_path, host, image, port, runtime, spec_version } = s;
  return image === undefined
    ? { argv, device, env, gpu_index, health_path, host, port, runtime, spec_version }
    : { argv, device, env, gpu_index, health_path, host, image, port, runtime, spec_version };
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

/** Appends the model, network, tune and type flags, in the order DESIGN.md gives. */
function pushModelArgs(args: string[], { slot, model }: SlotInput, tune: FullTune): void {
  if (model) {
    if (model.path_abs) args.push("--model", model.path_abs);
    else args.push("--hf-repo", model.hf_repo!, "--hf-file", model.hf_filename!);
    args.push("--alias", model.id);
  }
  args.push("--host", "127.0.0.1", "--port", String(slot.port));
  if (!TUNED_TYPES.has(slot.type)) return;
  args.push("--ctx-size", String(tune.ctx_size));
  if (slot.type === "llm") {
    const budget = tune.enable_thinking ? (tune.reasoning_budget > 0 ? tune.reasoning_budget : -1) : 0;
    args.push("--reasoning-budget", String(budget));
    args.push("--chat-template-kwargs", JSON.stringify({ enable_thinking: tune.enable_thinking, reasoning_effort: tune.reasoning_effort }));
    if (model?.jinja) args.push("--jinja");
    if (model && model.chat_template !== "auto") {
      args.push(...(model.chat_template_file_abs ? ["--chat-template-file", model.chat_template_file_abs] : ["--chat-template", model.chat_template]));
    }
    if (tune.speculation === "draft" && model?.draft_abs) args.push("--model-draft", model.draft_abs);
    if (tune.speculation === "mtp") args.push(...MTP_FLAGS);
    if (tune.vision && model?.mmproj_abs) args.push("--mmproj", model.mmproj_abs);
  }
  if (slot.type === "embedding") args.push("--embedding");
  if (slot.type === "reranking") args.push("--reranking");
}

/** Profile tune overlaid by the slot's; values the model can't honour fall back, with a warning. */
function effectiveTune(input: SlotInput, reporter: Reporter): { effective: FullTune; unavailable: Partial<Record<TuneKey, TuneUnavailable>> } {
  const { slot, profile, model } = input;
  const effective = overlay(overlay(BASE_TUNE, profile.tune), slot.tune);
  const unavailable: Partial<Record<TuneKey, TuneUnavailable>> = {};
  if (!model || !TUNED_TYPES.has(slot.type)) return { effective, unavailable };
  const limit = (key: TuneKey, fallback: FullTune[TuneKey], reason: string): void => {
    unavailable[key] = { requested: effective[key], effective: fallback, reason };
    (effective as Record<TuneKey, unknown>)[key] = fallback;
    reporter.report("slot.tune_unavailable", tuneSite(input, key), `${key} = ${JSON.stringify(unavailable[key]!.requested)} is unavailable for model \`${model.id}\``,
      `${reason}; slot \`${input.name}\` runs with ${key} = ${JSON.stringify(fallback)}.`);
  };
  if (model.context_length !== undefined && effective.ctx_size > model.context_length) {
    limit("ctx_size", model.context_length, `model \`${model.id}\` has a native context of ${model.context_length} tokens`);
  }
  if (effective.speculation === "mtp" && !model.mtp) limit("speculation", "off", `model \`${model.id}\` has no MTP heads (mtp = false)`);
  if (effective.speculation === "draft" && !model.draft) limit("speculation", "off", `model \`${model.id}\` has no drafter (no \`draft\` file)`);
  if (effective.vision && !model.mmproj) limit("vision", false, `model \`${model.id}\` has no vision projector (no \`mmproj\` file)`);
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
