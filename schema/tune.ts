import { z } from "zod";

/** The six tune keys (DESIGN.md §3). Profiles give the base, slots sparse overrides. */
export const TUNE_KEYS = [
  "ctx_size",
  "enable_thinking",
  "reasoning_effort",
  "reasoning_budget",
  "vision",
  "speculation",
] as const;
export type TuneKey = (typeof TUNE_KEYS)[number];

export const REASONING_EFFORTS = ["low", "medium", "high"] as const;
export const SPECULATION_MODES = ["off", "mtp", "draft"] as const;

/** Every key optional: the same shape serves a profile's base tune and a slot's overrides. */
export const Tune = z.strictObject({
  ctx_size: z.int().min(128).max(4_194_304).optional(),
  enable_thinking: z.boolean().optional(),
  reasoning_effort: z.enum(REASONING_EFFORTS).optional(),
  reasoning_budget: z.int().min(0).max(1_048_576).optional(),
  vision: z.boolean().optional(),
  speculation: z.enum(SPECULATION_MODES).optional(),
});
export type Tune = z.infer<typeof Tune>;
export type FullTune = Required<Tune>;

/** What a tune key falls back to when neither the profile nor the slot sets it. */
export const BASE_TUNE: FullTune = {
  ctx_size: 8192,
  enable_thinking: false,
  reasoning_effort: "medium",
  reasoning_budget: 0,
  vision: false,
  speculation: "off",
};

/** Root-level slot keys from the flat and nested legacy shapes: `slot.tuning_key_denied`. */
export const SLOT_LEGACY_ROOT_KEYS = [
  ...TUNE_KEYS,
  "context_size",
  "mtp",
  "chat_template",
  "n_gpu_layers",
  "rope_freq_base",
] as const;

/** Tuning keys that models no longer carry: `model.tune_key_removed`. */
export const MODEL_LEGACY_TUNE_KEYS = [...TUNE_KEYS, "context_size"] as const;
