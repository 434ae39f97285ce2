import { z } from "zod";
import { CHILD_NAME_PATTERN, ChildName, ResourceId, SlotName } from "./names.js";
import { DEVICES, type SlotType } from "./slot.js";
import { HttpUrl } from "./url.js";

/**
 * `capabilities.toml`: the runtime backends hal0 can use (`[[backend]]`), the
 * model catalogs it may fetch from (`[[catalog]]`), and per slot the models
 * its child capabilities use (`[selection.<slot>.<child>]`).
 */

/** What a backend kind can serve, by model type. */
export const BACKEND_KINDS = {
  "llama-server": ["llm", "embedding", "reranking"],
  flm: ["llm", "embedding", "transcription"],
  "whisper-server": ["transcription"],
  kokoro: ["tts"],
  comfyui: ["image"],
} as const satisfies Record<string, readonly SlotType[]>;
export type BackendKind = keyof typeof BACKEND_KINDS;

/**
 * The child capabilities a slot of each type may select, and the model type
 * each child needs. A child of an llm slot is a model that slot's clients
 * reach beside it (its drafter, its vision model, the embedder for its RAG…).
 */
export const SLOT_CHILDREN = {
  llm: { draft: "llm", vision: "llm", embed: "embedding", rerank: "reranking", stt: "transcription", tts: "tts", img: "image" },
  embedding: { rerank: "reranking" },
  reranking: {},
  transcription: { vad: "transcription", diarize: "transcription" },
  tts: { vocoder: "tts" },
  image: { upscaler: "image", refiner: "image", vae: "image", controlnet: "image", lora: "image" },
} as const satisfies Record<SlotType, Readonly<Record<string, SlotType>>>;

export { CHILD_NAME_PATTERN };

export const Backend = z.strictObject({
  id: ResourceId,
  kind: z.enum(Object.keys(BACKEND_KINDS) as [BackendKind, ...BackendKind[]]),
  /** Devices it runs on; empty = any. */
  devices: z.array(z.enum(DEVICES)).default([]),
  enabled: z.boolean().default(true),
  description: z.string().optional(),
});
export type Backend = z.infer<typeof Backend>;

export const CatalogSource = z.strictObject({
  id: ResourceId,
  url: HttpUrl,
  enabled: z.boolean().default(true),
  description: z.string().optional(),
});
export type CatalogSource = z.infer<typeof CatalogSource>;

export const Selection = z.strictObject({
  model: ResourceId,
  /** A `[[backend]]` id; absent = the slot's own runner. */
  backend: ResourceId.optional(),
  device: z.enum(DEVICES).optional(),
  enabled: z.boolean().default(true),
});
export type Selection = z.infer<typeof Selection>;

export const CapabilitiesFile = z.strictObject({
  schema_version: z.literal(2).default(2),
  backend: z.array(Backend).default([]),
  catalog: z.array(CatalogSource).default([]),
  selection: z.record(SlotName, z.record(ChildName, Selection)).prefault({}),
});
export type CapabilitiesFile = z.infer<typeof CapabilitiesFile>;
