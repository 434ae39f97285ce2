import { z } from "zod";
import { ProfileName, ResourceId, EnvName } from "./names.js";
import { Tune } from "./tune.js";
import { DRIFT_POLICIES } from "./settings.js";

/** `slots/<name>.toml`: one slot per file; the file stem is the slot's name. */

export const SLOT_TYPES = ["llm", "embedding", "reranking", "transcription", "tts", "image"] as const;
export type SlotType = (typeof SLOT_TYPES)[number];
export const DEVICES = ["gpu-rocm", "gpu-vulkan", "cpu", "npu"] as const;
export type Device = (typeof DEVICES)[number];

/** A Swarm node's hostname or id: letters, digits, dots, dashes and underscores. */
const NodeName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/, "a node's hostname or id (letters, digits, . _ -)");
/** A node label's key, as `docker node update --label-add` takes it. */
const NodeLabelKey = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._\/-]{0,127}$/, "a node label key (letters, digits, . _ / -)");
/** A label value a constraint can compare: no spaces, quotes, = or !. */
const NodeLabelValue = z.string().regex(/^[A-Za-z0-9._\/:+-]{1,128}$/, "a node label value (letters, digits, . _ / : + -)");

export const Placement = z.strictObject({
  /** Absent: derived from the profile's device_class and backend. */
  device: z.enum(DEVICES).optional(),
  gpu_index: z.int().min(0).max(63).default(0),
  /** `runtime = "swarm"`: the node the slot runs on, by hostname or node id (a `node.hostname==` / `node.id==` constraint). */
  node: NodeName.optional(),
  /** `runtime = "swarm"`: node labels the slot's node must carry (`{ gpu = "rocm" }` → `node.labels.gpu==rocm`). */
  labels: z.record(NodeLabelKey, NodeLabelValue).default({}),
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
