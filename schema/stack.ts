import { z } from "zod";
import { ProfileName, ResourceId, SlotName } from "./names.js";
import { Tune } from "./tune.js";

/** `stacks/<slug>.toml`: a named set of slot entries applied together. */

export const STACK_MODES = ["replace", "merge"] as const;

export const StackSlot = z.strictObject({
  slot: SlotName,
  model: ResourceId.optional(),
  profile: ProfileName.optional(),
  enabled: z.boolean().optional(),
  tune: Tune.optional(),
});

export const Stack = z.strictObject({
  name: z.string().min(1).max(128),
  description: z.string().default(""),
  author: z.string().optional(),
  icon: z.string().optional(),
  tags: z.array(z.string()).default([]),
  /** replace: slots the stack doesn't name are disabled on apply; merge: left alone. */
  mode: z.enum(STACK_MODES).default("merge"),
  slot: z.array(StackSlot).default([]),
});
export type Stack = z.infer<typeof Stack>;
