import type { z } from "zod";
import type { Profile } from "../profile.js";

/**
 * The built-in seed profiles, in the input shape of `profiles.toml`
 * (`[profile.<name>]`). Served when `profiles.toml` is absent; a profile of
 * the same name in the file overrides a seed. Data only: the compiler parses
 * these through the same `Profile` schema as a person's file.
 */
export const SEED_PROFILES: Readonly<Record<string, z.input<typeof Profile>>> = {
  rocm: {
    image: "ghcr.io/hal0ai/amd-strix-halo-toolboxes:rocm-7.2.4-rocmfp4-server",
    runner: ["llama-server"],
    flags: "-fa on -ctk q8_0 -ctv q8_0 -b 512 -ub 512 --parallel 1 --load-mode none",
    device_class: "gpu",
    backend: "rocm",
    intent: "General chat and agents on the ROCm GPU",
    quant: "Q4_K_M",
    tune: { ctx_size: 32768, enable_thinking: true, reasoning_effort: "medium", reasoning_budget: 4096, vision: false, speculation: "off" },
  },
  "rocm-dnse": {
    image: "ghcr.io/hal0ai/amd-strix-halo-toolboxes:rocm-7.2.4-rocmfp4-server",
    runner: ["llama-server"],
    flags: "-fa on -ctk q8_0 -ctv q8_0 -b 2048 -ub 512 --parallel 1 --load-mode none",
    device_class: "gpu",
    backend: "rocm",
    intent: "Dense models",
    quant: "Q8_0",
    tune: { ctx_size: 32768, enable_thinking: true, reasoning_effort: "medium", reasoning_budget: 4096, vision: false, speculation: "off" },
  },
  "rocm-moe": {
    image: "ghcr.io/hal0ai/amd-strix-halo-toolboxes:rocm-7.2.4-rocmfp4-server",
    runner: ["llama-server"],
    flags: "-fa on -ctk q8_0 -ctv q8_0 -b 512 -ub 512 --parallel 1 --load-mode none",
    device_class: "gpu",
    backend: "rocm",
    intent: "MoE agents",
    quant: "FP4",
    tune: { ctx_size: 65536, enable_thinking: true, reasoning_effort: "medium", reasoning_budget: 4096, vision: false, speculation: "off" },
  },
  vulkan: {
    image: "ghcr.io/hal0ai/amd-strix-halo-toolboxes:vulkan-radv-server",
    runner: ["llama-server"],
    flags: "-fa on -b 512 -ub 512 --parallel 1 --load-mode none",
    device_class: "gpu",
    backend: "vulkan",
    intent: "Embeddings, reranking and small utility models",
    quant: "Q4_K_M",
    tune: { ctx_size: 8192, enable_thinking: false, reasoning_effort: "low", reasoning_budget: 0, vision: false, speculation: "off" },
  },
  flm: {
    image: "ghcr.io/hal0ai/flm-server:latest",
    runner: ["flm", "serve"],
    flags: "",
    device_class: "npu",
    intent: "Small models on the NPU",
    tune: { ctx_size: 4096, enable_thinking: false, reasoning_effort: "low", reasoning_budget: 0, vision: false, speculation: "off" },
  },
  tts: {
    image: "ghcr.io/hal0ai/kokoro-server:latest",
    runner: ["kokoro-server"],
    flags: "",
    device_class: "cpu",
    intent: "Speech synthesis and transcription on the CPU",
    tune: { ctx_size: 2048, enable_thinking: false, reasoning_effort: "low", reasoning_budget: 0, vision: false, speculation: "off" },
  },
  comfyui: {
    image: "ghcr.io/hal0ai/comfyui-server:latest",
    runner: ["comfyui-server"],
    flags: "",
    device_class: "img",
    intent: "Image generation",
    tune: { ctx_size: 2048, enable_thinking: false, reasoning_effort: "low", reasoning_budget: 0, vision: false, speculation: "off" },
  },
};
