/**
 * What of hal0's own environment a runner gets. hal0's environment holds its
 * secrets (`HAL0_TOKEN`, a provider's API key variable, `HF_TOKEN`, whatever a
 * unit's `EnvironmentFile=` gives it); a runner is another program, often one
 * a profile names, so it never inherits that environment whole. It gets this
 * small base — what a program needs to run at all, and what the GPU and NPU
 * runtimes read from the host — and then what its profile and slot declare in
 * `env` (which wins over the base). docs/runners.md lists the same names.
 */

/** The variables passed, by exact name (no prefixes): a variable not listed here never passes. */
export const RUNNER_BASE_ENV: readonly string[] = [
  // The system: where programs and libraries are, who runs them, the locale and time zone, the temp folder.
  "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH",
  "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES",
  "LC_PAPER", "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
  // Which GPUs a runner sees (CUDA, ROCm/HIP, llama.cpp's Vulkan backend).
  "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "GGML_VK_VISIBLE_DEVICES",
  // Where the GPU and NPU runtimes are, and how they take this host's devices.
  "ROCM_PATH", "HSA_OVERRIDE_GFX_VERSION", "VK_ICD_FILENAMES", "VK_DRIVER_FILES", "XILINX_XRT",
];

/** The base a runner starts from: the variables of `parent` (hal0's environment) named above, and no other. */
export function runnerBaseEnv(parent: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {};
  // Read by name: process.env is slow to enumerate.
  for (const key of RUNNER_BASE_ENV) {
    const value = parent[key];
    if (value !== undefined) env[key] = value;
  }
  return env;
}
