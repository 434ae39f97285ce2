import { z } from "zod";
import { ProfileName, ResourceId, EnvName } from "./names.js";
import { Tune } from "./tune.js";
import { DRIFT_POLICIES } from "./settings.js";

/** `slots/<name>.toml`: one slot per file; the file stem is the slot's name. */

export const SLOT_TYPES = ["llm", "embedding", "reranking", "transcription", "tts", "image"] as const;
export type SlotType = (typeof SLOT_TYPES)[number];
export const DEVICES = ["gpu-rocm", "gpu-vulkan", "cpu", "npu"] as const;
export type Device = (typeof DEVICES)[number];

export const Placement = z.strictObject({
  /** Absent: derived from the profile's device_class and backend. */
  device: z.enum(DEVICES).optional(),
  gpu_index: z.int().min(0).max(63).default(0),
});

export const SlotServer = z.strictObject({
  /** Extra runner flags, shell-quoted, appended last (a later flag wins). */
  extra_args: z.string().default(""),
  env: z.record(EnvName, z.string()).default({}),
});

export const Slot = z.strictObject({
  profile: ProfileName,
  /** The model this slot serves; required for llm, embedding and reranking slots. */
  model: ResourceId.optional(),
  port: z.int().min(1).max(65535),
  type: z.enum(SLOT_TYPES).default("llm"),
  enabled: z.boolean().default(true),
  /** 0..100; lower is evicted first. */
  priority: z.int().min(0).max(100).default(50),
  /** A pinned slot is never evicted; deleting or unloading it needs force. */
  pinned: z.boolean().default(false),
  /** Overrides `[reconcile] drift` for this slot. */
  drift: z.enum(DRIFT_POLICIES).optional(),
  description: z.string().optional(),
  placement: Placement.prefault({}),
  /** Sparse overrides of the profile's tune. */
  tune: Tune.prefault({}),
  server: SlotServer.prefault({}),
});
export type Slot = z.infer<typeof Slot>;
