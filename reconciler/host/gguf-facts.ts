import { stat } from "node:fs/promises";
import { readGgufHeader, type GgufHeader, type GgufValue } from "./gguf.js";

/** llama.cpp's `llama_ftype` (general.file_type) by number: what a quant is called in file names. */
export const FILE_TYPE_NAMES: Readonly<Record<number, string>> = {
  0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "Q4_1_SOME_F16", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
  10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
  18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
  26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
  33: "Q4_0_4_4", 34: "Q4_0_4_8", 35: "Q4_0_8_8", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
};

/** `<arch>.pooling_type`: 4 (rank) is a reranker; 1–3 pool an embedding. */
const POOLING = ["none", "mean", "cls", "last", "rank"] as const;
const IMAGE_ARCHS = new Set(["flux", "sd1", "sd3", "sdxl", "aura", "hidream", "ltxv", "hyvid", "wan", "lumina2", "qwen_image"]);
const EMBEDDING_ARCHS = new Set(["bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "t5encoder", "modern-bert", "neo-bert"]);

/** What hal0 reads from a GGUF header: the facts a models.toml entry is made of, and a few for people. */
export interface GgufFacts {
  readonly format: "gguf";
  readonly version: number;
  readonly endian: "little" | "big";
  readonly tensor_count: number;
  readonly kv_count: number;
  readonly header_bytes: number;
  /** general.type: `model`, `mmproj` (a vision projector), `adapter`…; `clip` files count as `mmproj`. */
  readonly kind: string;
  readonly architecture?: string;
  readonly name?: string;
  readonly basename?: string;
  readonly size_label?: string;
  /** `<arch>.context_length`: the native window. */
  readonly context_length?: number;
  readonly embedding_length?: number;
  readonly block_count?: number;
  readonly expert_count?: number;
  readonly pooling?: string;
  /** general.file_type and its llama.cpp name (`Q4_K_M`). */
  readonly file_type?: number;
  readonly quant?: string;
  /** tokenizer.chat_template is present; `chat_template_tools` / `_thinking` when it mentions tools / thinking. */
  readonly chat_template: boolean;
  readonly chat_template_tools: boolean;
  readonly chat_template_thinking: boolean;
  readonly tokenizer?: string;
  readonly vocab_size?: number;
  /** `<arch>.nextn_predict_layers` > 0: the model carries multi-token-prediction heads. */
  readonly mtp_layers?: number;
  /** A split model: this file's shard number (1-based) and the shard count. */
  readonly split?: { readonly no: number; readonly count: number };
}

/** Reads `path`'s header and returns its facts plus the file size. Throws GgufError (and fs errors) as readGgufHeader does. */
export async function inspectGguf(path: string): Promise<GgufFacts & { readonly size_bytes: number }> {
  const header = await readGgufHeader(path);
  return { ...ggufFacts(header), size_bytes: (await stat(path)).size };
}

export function ggufFacts(h: GgufHeader): GgufFacts {
  const m = h.metadata;
  const arch = str(m["general.architecture"]);
  const a = (key: string) => (arch === undefined ? undefined : m[`${arch}.${key}`]);
  const template = str(m["tokenizer.chat_template"]) ?? "";
  const fileType = num(m["general.file_type"]);
  const pooling = num(a("pooling_type"));
  const splitCount = num(m["split.count"]);
  const tokens = m["tokenizer.ggml.tokens"];
  return dropUndefined({
    format: "gguf" as const,
    version: h.version,
    endian: h.endian,
    tensor_count: h.tensor_count,
    kv_count: h.kv_count,
    header_bytes: h.header_bytes,
    kind: str(m["general.type"]) ?? (arch === "clip" ? "mmproj" : "model"),
    architecture: arch,
    name: str(m["general.name"]),
    basename: str(m["general.basename"]),
    size_label: str(m["general.size_label"]),
    context_length: num(a("context_length")),
    embedding_length: num(a("embedding_length")),
    block_count: num(a("block_count")),
    expert_count: num(a("expert_count")),
    pooling: pooling === undefined ? undefined : (POOLING[pooling] ?? `type_${pooling}`),
    file_type: fileType,
    quant: fileType === undefined ? undefined : (FILE_TYPE_NAMES[fileType] ?? `ftype_${fileType}`),
    chat_template: template.length > 0,
    chat_template_tools: /\btools\b/.test(template),
    chat_template_thinking: /<think>|enable_thinking|reasoning_content/.test(template),
    tokenizer: str(m["tokenizer.ggml.model"]),
    vocab_size: typeof tokens === "object" ? tokens.length : undefined,
    mtp_layers: num(a("nextn_predict_layers")),
    split: splitCount !== undefined && splitCount > 1 ? { no: (num(m["split.no"]) ?? 0) + 1, count: splitCount } : undefined,
  });
}

/** The slot type a GGUF is for, from its architecture and pooling. */
export function ggufSlotType(f: GgufFacts): "llm" | "embedding" | "reranking" | "image" {
  if (f.pooling === "rank") return "reranking";
  if (f.architecture !== undefined && IMAGE_ARCHS.has(f.architecture)) return "image";
  if (f.pooling === "mean" || f.pooling === "cls" || f.pooling === "last") return "embedding";
  if (f.architecture !== undefined && EMBEDDING_ARCHS.has(f.architecture)) return "embedding";
  return "llm";
}

function str(v: GgufValue | undefined): string | undefined {
  return typeof v === "string" ? v : undefined;
}

function num(v: GgufValue | undefined): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? v : undefined;
}

function dropUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
