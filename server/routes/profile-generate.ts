import { z } from "zod";
import type { Model } from "../../compiler/index.js";
import { BACKENDS, DEVICE_CLASSES, DEVICES, Profile, ResourceId, SEED_PROFILES, SLOT_TYPES, Tune } from "../../schema/index.js";
import { ApiError } from "../errors.js";

export const GenerateBody = z.strictObject({
  device_class: z.enum(DEVICE_CLASSES).optional(),
  backend: z.enum(BACKENDS).optional(),
  /** A slot placement; sets device_class and backend when they are not given. */
  device: z.enum(DEVICES).optional(),
  model: ResourceId.optional(),
  slot_type: z.enum(SLOT_TYPES).optional(),
  /** Tune keys to force over the suggestion (reasoning_budget is integer tokens). */
  tune: Tune.optional(),
});
type GenerateBody = z.infer<typeof GenerateBody>;

const DEVICE_TO_CLASS: Record<string, { device_class: (typeof DEVICE_CLASSES)[number]; backend?: (typeof BACKENDS)[number] }> = {
  "gpu-rocm": { device_class: "gpu", backend: "rocm" },
  "gpu-vulkan": { device_class: "gpu", backend: "vulkan" },
  cpu: { device_class: "cpu" },
  npu: { device_class: "npu" },
};

/**
 * A profile suggestion: the seed that fits the device class and backend,
 * with its base tune fitted to the model's facts (native context, thinking,
 * vision projector, MTP heads or drafter). Pure: nothing is written.
 */
export function generateProfile(model: Model, body: GenerateBody): Record<string, unknown> {
  const facts = body.model === undefined ? undefined : model.models[body.model];
  if (body.model !== undefined && !facts) {
    throw new ApiError("validation.invalid", `unknown model ${body.model}`, { fields: [{ loc: ["body", "model"], msg: `models.toml defines no model ${body.model}`, type: "unknown_model" }] });
  }
  const reasons: string[] = [];
  const type = body.slot_type ?? facts?.type ?? "llm";
  const placed = body.device ? DEVICE_TO_CLASS[body.device] : facts?.devices[0] ? DEVICE_TO_CLASS[facts.devices[0]] : undefined;
  const deviceClass = body.device_class ?? placed?.device_class ?? classForType(type);
  const backend = deviceClass === "gpu" ? (body.backend ?? placed?.backend ?? "rocm") : undefined;
  const moe = facts !== undefined && [...facts.capabilities, ...facts.tags].some((t) => t.toLowerCase() === "moe" || t.toLowerCase() === "mixture-of-experts");
  const basedOn = seedFor(deviceClass, backend, moe);
  reasons.push(`based on seed ${basedOn} (device_class ${deviceClass}${backend ? `, backend ${backend}` : ""}${moe ? ", a mixture-of-experts model" : ""})`);
  const profile = structuredClone(SEED_PROFILES[basedOn]) as Record<string, unknown> & { tune: Record<string, unknown> };
  profile.cloned_from = basedOn;
  if (facts) fitTune(profile.tune, facts, reasons);
  for (const [k, v] of Object.entries(body.tune ?? {})) if (v !== undefined) profile.tune[k] = v;
  const checked = Profile.safeParse(profile);
  if (!checked.success) throw new ApiError("validation.invalid", "the suggested profile does not validate", { fields: checked.error.issues.map((i) => ({ loc: ["body", ...i.path.map(String)], msg: i.message, type: i.code })) });
  const name = suggestName(basedOn, body.model);
  return { name, exists: model.profiles[name] !== undefined, based_on: basedOn, profile, reasons, written: false };
}

function classForType(type: string): (typeof DEVICE_CLASSES)[number] {
  if (type === "image") return "img";
  if (type === "tts" || type === "transcription") return "cpu";
  return "gpu";
}

function seedFor(deviceClass: string, backend: string | undefined, moe: boolean): string {
  if (deviceClass === "npu") return "flm";
  if (deviceClass === "cpu") return "tts";
  if (deviceClass === "img") return "comfyui";
  if (backend === "vulkan") return "vulkan";
  return moe ? "rocm-moe" : "rocm";
}

function fitTune(tune: Record<string, unknown>, facts: Model["models"][string], reasons: string[]): void {
  if (facts.context_length !== undefined && typeof tune.ctx_size === "number" && facts.context_length < tune.ctx_size) {
    tune.ctx_size = facts.context_length;
    reasons.push(`ctx_size ${facts.context_length}: the model's native window`);
  }
  const thinks = facts.capabilities.some((c) => c === "thinking" || c === "reasoning");
  if (!thinks && tune.enable_thinking === true) {
    Object.assign(tune, { enable_thinking: false, reasoning_budget: 0 });
    reasons.push("enable_thinking off: the model lists no thinking/reasoning capability");
  }
  if (facts.mmproj !== undefined) {
    tune.vision = true;
    reasons.push("vision on: the model has a projector (mmproj)");
  }
  if (facts.mtp) {
    tune.speculation = "mtp";
    reasons.push("speculation mtp: the model carries MTP heads");
  } else if (facts.draft !== undefined) {
    tune.speculation = "draft";
    reasons.push("speculation draft: the model names a drafter");
  }
}

function suggestName(basedOn: string, modelId: string | undefined): string {
  if (!modelId) return `${basedOn}-custom`;
  const slug = modelId.replace(/[^a-z0-9_-]+/g, "-").replace(/-+/g, "-").replace(/^-|-$/g, "");
  return `${basedOn}-${slug}`.slice(0, 32).replace(/-+$/, "");
}
