import { basename } from "node:path";
import type { CompiledProfile, Model } from "../../compiler/index.js";
import { defaultDevice } from "../../compiler/resolve.js";
import { BACKEND_KINDS, DEVICES, type Backend, type BackendKind, type Device, type SlotType } from "../../schema/index.js";
import { probeHardware } from "./hardware.js";
import { gpuTargetVersion, npuStatus } from "./probes.js";

/**
 * The backends of capabilities.toml (`[[backend]]`) as the operator reads
 * them: what each one is, the runner images of the profiles that run it, and
 * whether this host has the hardware of its devices — read from /proc and
 * /sys through one `root`, so tests run it on written trees.
 */

/** Whether this host has one device's hardware, and what it found (or why not). */
export interface DeviceHardware {
  readonly device: Device;
  readonly available: boolean;
  /** What was found (`gfx1151`, `accel0 (amdxdna)`) when available, else why not. */
  readonly detail: string;
}

/** Each device kind hal0 places slots on, as this host has it. */
export async function deviceHardware(root = "/"): Promise<Record<Device, DeviceHardware>> {
  const [hw, gfx, npu] = await Promise.all([probeHardware(root), gpuTargetVersion(root), npuStatus(root)]);
  const cards = hw.gpus.devices.filter((g) => g.driver !== null);
  const bound = npu.available ? npu.devices.filter((d) => d.bound) : [];
  return {
    "gpu-rocm": gfx.available
      ? { device: "gpu-rocm", available: true, detail: `ROCm GPU ${gfx.gpus.map((g) => g.target).join(", ")} (KFD topology)` }
      : { device: "gpu-rocm", available: false, detail: gfx.reason },
    "gpu-vulkan": cards.length > 0
      ? { device: "gpu-vulkan", available: true, detail: cards.map((g) => `${g.card} ${g.vendor ?? g.vendor_id ?? "?"} (${g.driver})`).join(", ") }
      : { device: "gpu-vulkan", available: false, detail: hw.gpus.devices.length > 0 ? `no GPU under /sys/class/drm has a driver bound (${hw.gpus.devices.map((g) => g.card).join(", ")})` : "no GPU under /sys/class/drm" },
    cpu: hw.cpu.present && hw.cpu.logical > 0
      ? { device: "cpu", available: true, detail: `${hw.cpu.model ?? "CPU"}, ${hw.cpu.logical} logical CPUs` }
      : { device: "cpu", available: false, detail: "no /proc/cpuinfo" },
    npu: bound.length > 0
      ? { device: "npu", available: true, detail: bound.map((d) => `${d.name} (${d.driver})`).join(", ") }
      : { device: "npu", available: false, detail: npu.available ? `no accel device has a driver bound (${npu.devices.map((d) => d.name).join(", ")})` : npu.reason },
  };
}

/** One backend as backend_list and backend_detail show it. */
export interface BackendRow {
  readonly id: string;
  readonly kind: BackendKind;
  readonly enabled: boolean;
  readonly description: string | null;
  /** The model types its kind serves. */
  readonly serves: readonly SlotType[];
  /** The devices it runs on (every device when capabilities.toml names none). */
  readonly devices: readonly Device[];
  /** The profiles that run its kind on one of its devices, each with its runner and image. */
  readonly profiles: ReadonlyArray<{ readonly name: string; readonly runner: string; readonly image: string | null; readonly device: Device }>;
  /** The distinct images of those profiles. */
  readonly runner_images: readonly string[];
  /** The enabled slots whose profile is one of those. */
  readonly slots: readonly string[];
  /** Whether this host has the hardware of at least one of its devices, per device. */
  readonly hardware: { readonly available: boolean; readonly devices: readonly DeviceHardware[] };
}

/** The words in a runner or an image name that say which backend kind it is. */
const KIND_WORDS: Readonly<Record<BackendKind, readonly string[]>> = {
  "llama-server": ["llama-server", "llama.cpp", "llama-cpp"],
  flm: ["flm", "fastflowlm"],
  "whisper-server": ["whisper"],
  kokoro: ["kokoro"],
  comfyui: ["comfyui"],
};

/**
 * Whether a profile runs a backend kind: its runner's file name or its
 * image's repository names the kind (`llama-server`, `hal0-fake-llama-server`,
 * `ghcr.io/hal0ai/kokoro-server`). A runner named after none (a generic
 * stand-in) runs none.
 */
export function profileRunsKind(profile: CompiledProfile, kind: BackendKind): boolean {
  const runner = basename(profile.runner[0] ?? "").toLowerCase();
  const repo = (profile.image ?? "").toLowerCase().replace(/[:@][^/]*$/, "").split("/").pop() ?? "";
  return KIND_WORDS[kind].some((w) => runner.includes(w) || repo.includes(w));
}

/** Every `[[backend]]` of the model, in file order, with its profiles, images, slots and hardware. */
export function backendRows(model: Model, hardware: Readonly<Record<Device, DeviceHardware>>): BackendRow[] {
  return model.capabilities.backends.map((b) => backendRow(model, b, hardware));
}

function backendRow(model: Model, backend: Backend, hardware: Readonly<Record<Device, DeviceHardware>>): BackendRow {
  const devices = backend.devices.length > 0 ? [...backend.devices] : [...DEVICES];
  const profiles = Object.values(model.profiles)
    .filter((p) => profileRunsKind(p, backend.kind) && devices.includes(defaultDevice(p)))
    .map((p) => ({ name: p.name, runner: p.runner.join(" "), image: p.image ?? null, device: defaultDevice(p) }));
  const names = new Set(profiles.map((p) => p.name));
  const slots = Object.values(model.slots).filter((s) => s.enabled && names.has(s.profile) && devices.includes(s.device)).map((s) => s.name).sort();
  const perDevice = devices.map((d) => hardware[d]);
  return {
    id: backend.id, kind: backend.kind, enabled: backend.enabled, description: backend.description ?? null,
    serves: [...BACKEND_KINDS[backend.kind]], devices, profiles,
    runner_images: [...new Set(profiles.flatMap((p) => (p.image === null ? [] : [p.image])))].sort(),
    slots, hardware: { available: perDevice.some((h) => h.available), devices: perDevice },
  };
}
