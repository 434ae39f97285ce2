import type { SourceTree } from "../compiler/index.js";
import { sourceTree } from "../compiler/index.js";

const DEVICES = [
  { profile: "rocm", device: "gpu-rocm" },
  { profile: "vulkan", device: "gpu-vulkan" },
] as const;

/**
 * A synthetic but realistic tree of `slots` slots: one custom profile per ten
 * slots, one model per two slots, one stack per ten slots, an upstream per
 * twenty, a policy. Every slot has sparse tune, placement and server tables,
 * so the compiler does its full work (validate, link, resolve, hash).
 */
export function generateTree(slots: number): SourceTree {
  const files = new Map<string, string>();
  const profiles = Math.max(1, Math.floor(slots / 10));
  const models = Math.max(1, Math.floor(slots / 2));
  files.set("hal0.toml", `[slots]\nruntime = "process"\nport_range_start = 10000\nport_range_end = 60000\n\n[reconcile]\ninterval_s = 120\n`);
  files.set("profiles.toml", range(profiles).map(profileText).join("\n"));
  files.set("models.toml", range(models).map(modelText).join("\n"));
  for (const i of range(slots)) files.set(`slots/slot-${i}.toml`, slotText(i, profiles, models));
  for (const i of range(Math.max(1, Math.floor(slots / 10)))) files.set(`stacks/stack-${i}.toml`, stackText(i, slots, models));
  files.set("upstreams.toml", range(Math.max(1, Math.floor(slots / 20))).map((i) => `[[upstream]]\nname = "up-${i}"\nkind = "slot"\nslot_name = "slot-${i}"\n`).join("\n"));
  files.set("policy.toml", `[tiers]\ngated = ["slot_edit", "model_swap"]\nblocked = ["logs_tail"]\n\n[agents.hermes__coder]\nblocked = ["model_delete"]\n`);
  return sourceTree("/bench", files);
}

function profileText(i: number): string {
  const { device } = DEVICES[i % 2]!;
  return `# custom profile ${i}
[profile.custom-${i}]
image = "ghcr.io/hal0ai/runner:${i}"
runner = ["llama-server"]
flags = "-fa on -ctk q8_0 -ctv q8_0 -b 512 -ub 512 --parallel 1 --no-mmap"
device_class = "gpu"
backend = "${device === "gpu-rocm" ? "rocm" : "vulkan"}"
intent = "bench profile ${i}"
[profile.custom-${i}.tune]
ctx_size = 32768
enable_thinking = true
reasoning_effort = "medium"
reasoning_budget = 4096
`;
}

function modelText(i: number): string {
  return `[model."model-${i}.q4_k_m"]
path = "models/model-${i}.gguf"
type = "llm"
capabilities = ["chat", "tools"]
devices = ["gpu-rocm", "gpu-vulkan", "cpu"]
hf_repo = "org/model-${i}-GGUF"
hf_filename = "model-${i}-Q4_K_M.gguf"
context_length = 131072
jinja = true
draft = "models/draft-${i}.gguf"
`;
}

function slotText(i: number, profiles: number, models: number): string {
  const p = i % profiles;
  const { device } = DEVICES[p % 2]!;
  return `#:schema ../../../schema/json/slot.schema.json
# slot ${i}
profile = "custom-${p}"
model = "model-${i % models}.q4_k_m"
port = ${10000 + i}
type = "llm"
enabled = ${i % 7 !== 0}
priority = ${i % 101}

[placement]
device = "${device}"
gpu_index = 0

[tune]
ctx_size = ${8192 * (1 + (i % 4))}
speculation = "${i % 3 === 0 ? "draft" : "off"}"

[server]
extra_args = "--threads ${1 + (i % 8)} -b 1024"
env = { LLAMA_ARG_THREADS = "${1 + (i % 8)}" }
`;
}

function stackText(i: number, slots: number, models: number): string {
  const entries = range(Math.min(5, slots)).map((k) => {
    const s = (i * 5 + k) % slots;
    return `[[slot]]\nslot = "slot-${s}"\nmodel = "model-${s % models}.q4_k_m"\n[slot.tune]\nctx_size = 16384\n`;
  });
  return `name = "Stack ${i}"\ndescription = "bench stack"\nmode = "${i % 2 ? "merge" : "replace"}"\n\n${entries.join("\n")}`;
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}
