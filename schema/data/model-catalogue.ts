/**
 * A short curated list of well-known GGUF models hal0 suggests (model_catalogue):
 * data only. Each row names the Hub file a pull would fetch (`hf_repo` +
 * `hf_filename`, the same keys as models.toml) and what a person picks by:
 * type, quant, approximate size, native context, capabilities. Sizes are
 * approximate (the Hub's own listing is the truth; a pull verifies sha256).
 */
export interface CatalogueModel {
  /** The id a pull or register would use by default (a ResourceId). */
  readonly id: string;
  readonly name: string;
  readonly hf_repo: string;
  readonly hf_filename: string;
  readonly type: "llm" | "embedding" | "reranking";
  readonly quant: string;
  /** Approximate file size in bytes. */
  readonly size_bytes: number;
  /** The model's native context window in tokens. */
  readonly context_length: number;
  readonly capabilities: readonly string[];
  /** One line for a person choosing. */
  readonly description: string;
}

const GB = 1_000_000_000;
const MB = 1_000_000;

export const MODEL_CATALOGUE: readonly CatalogueModel[] = [
  {
    id: "qwen3-4b", name: "Qwen3 4B", hf_repo: "Qwen/Qwen3-4B-GGUF", hf_filename: "Qwen3-4B-Q4_K_M.gguf",
    type: "llm", quant: "Q4_K_M", size_bytes: Math.round(2.5 * GB), context_length: 40960, capabilities: ["chat", "tools", "reasoning"],
    description: "Small hybrid-thinking generalist; runs on a CPU, good for utility slots and agents on a budget.",
  },
  {
    id: "qwen3-8b", name: "Qwen3 8B", hf_repo: "Qwen/Qwen3-8B-GGUF", hf_filename: "Qwen3-8B-Q4_K_M.gguf",
    type: "llm", quant: "Q4_K_M", size_bytes: Math.round(5.03 * GB), context_length: 40960, capabilities: ["chat", "tools", "reasoning"],
    description: "Dense 8B with thinking and tool calls; a sound default chat model for a single GPU.",
  },
  {
    id: "qwen3-30b-a3b", name: "Qwen3 30B A3B", hf_repo: "Qwen/Qwen3-30B-A3B-GGUF", hf_filename: "Qwen3-30B-A3B-Q4_K_M.gguf",
    type: "llm", quant: "Q4_K_M", size_bytes: Math.round(18.6 * GB), context_length: 40960, capabilities: ["chat", "tools", "reasoning"],
    description: "Mixture of experts with 3B active parameters: big-model quality at small-model speed on unified memory.",
  },
  {
    id: "gpt-oss-20b", name: "gpt-oss 20B", hf_repo: "ggml-org/gpt-oss-20b-GGUF", hf_filename: "gpt-oss-20b-mxfp4.gguf",
    type: "llm", quant: "MXFP4", size_bytes: Math.round(12.1 * GB), context_length: 131072, capabilities: ["chat", "tools", "reasoning"],
    description: "OpenAI's open-weight MoE reasoning model in its native MXFP4 quant, with a long window.",
  },
  {
    id: "gemma-3-12b-it", name: "Gemma 3 12B IT", hf_repo: "unsloth/gemma-3-12b-it-GGUF", hf_filename: "gemma-3-12b-it-Q4_K_M.gguf",
    type: "llm", quant: "Q4_K_M", size_bytes: Math.round(7.3 * GB), context_length: 131072, capabilities: ["chat", "vision"],
    description: "Multilingual chat with image input (needs its mmproj projector file for vision).",
  },
  {
    id: "llama-3.2-3b-instruct", name: "Llama 3.2 3B Instruct", hf_repo: "bartowski/Llama-3.2-3B-Instruct-GGUF", hf_filename: "Llama-3.2-3B-Instruct-Q4_K_M.gguf",
    type: "llm", quant: "Q4_K_M", size_bytes: Math.round(2.02 * GB), context_length: 131072, capabilities: ["chat", "tools"],
    description: "Compact Llama instruct model with a long window; fast on a CPU.",
  },
  {
    id: "qwen2.5-coder-7b-instruct", name: "Qwen2.5 Coder 7B Instruct", hf_repo: "Qwen/Qwen2.5-Coder-7B-Instruct-GGUF", hf_filename: "qwen2.5-coder-7b-instruct-q4_k_m.gguf",
    type: "llm", quant: "Q4_K_M", size_bytes: Math.round(4.68 * GB), context_length: 32768, capabilities: ["chat", "tools", "code"],
    description: "Code completion and editing model; pairs with the 0.5B coder as a speculative drafter.",
  },
  {
    id: "mistral-small-3.2-24b-instruct", name: "Mistral Small 3.2 24B Instruct", hf_repo: "unsloth/Mistral-Small-3.2-24B-Instruct-2506-GGUF", hf_filename: "Mistral-Small-3.2-24B-Instruct-2506-Q4_K_M.gguf",
    type: "llm", quant: "Q4_K_M", size_bytes: Math.round(14.3 * GB), context_length: 131072, capabilities: ["chat", "tools", "vision"],
    description: "Dense 24B with strong instruction following and function calling.",
  },
  {
    id: "qwen3-embedding-0.6b", name: "Qwen3 Embedding 0.6B", hf_repo: "Qwen/Qwen3-Embedding-0.6B-GGUF", hf_filename: "Qwen3-Embedding-0.6B-Q8_0.gguf",
    type: "embedding", quant: "Q8_0", size_bytes: Math.round(639 * MB), context_length: 32768, capabilities: ["embedding"],
    description: "Multilingual text embeddings for retrieval and memory; small enough for a CPU slot.",
  },
  {
    id: "embeddinggemma-300m", name: "EmbeddingGemma 300M", hf_repo: "ggml-org/embeddinggemma-300M-GGUF", hf_filename: "embeddinggemma-300M-Q8_0.gguf",
    type: "embedding", quant: "Q8_0", size_bytes: Math.round(329 * MB), context_length: 2048, capabilities: ["embedding"],
    description: "Tiny on-device embedding model from Google; a light default for search.",
  },
  {
    id: "nomic-embed-text-v1.5", name: "Nomic Embed Text v1.5", hf_repo: "nomic-ai/nomic-embed-text-v1.5-GGUF", hf_filename: "nomic-embed-text-v1.5.Q8_0.gguf",
    type: "embedding", quant: "Q8_0", size_bytes: Math.round(146 * MB), context_length: 2048, capabilities: ["embedding"],
    description: "Widely used English embedding model with Matryoshka dimensions.",
  },
  {
    id: "bge-reranker-v2-m3", name: "BGE Reranker v2 M3", hf_repo: "gpustack/bge-reranker-v2-m3-GGUF", hf_filename: "bge-reranker-v2-m3-Q8_0.gguf",
    type: "reranking", quant: "Q8_0", size_bytes: Math.round(636 * MB), context_length: 8192, capabilities: ["rerank"],
    description: "Multilingual cross-encoder reranker; reorders retrieval hits before they reach the chat model.",
  },
  {
    id: "qwen3-reranker-0.6b", name: "Qwen3 Reranker 0.6B", hf_repo: "ggml-org/Qwen3-Reranker-0.6B-Q8_0-GGUF", hf_filename: "qwen3-reranker-0.6b-q8_0.gguf",
    type: "reranking", quant: "Q8_0", size_bytes: Math.round(639 * MB), context_length: 32768, capabilities: ["rerank"],
    description: "Small multilingual reranker from the Qwen3 embedding family.",
  },
];
