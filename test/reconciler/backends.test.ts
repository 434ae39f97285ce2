import { describe, expect, it } from "vitest";
import { compile, sourceTree, type Model } from "../../compiler/index.js";
import { backendRows, deviceHardware, profileRunsKind } from "../../reconciler/host/backends.js";
import { sysroots } from "../helpers/sysroot.js";

/** backend_list's rows on written /proc and /sys trees: a Strix Halo (gfx1151 GPU, amdxdna NPU) and a bare CPU-only host. */

const tree = sysroots("hal0-backends-");

const CPU = { "proc/cpuinfo": "processor\t: 0\nmodel name\t: AMD RYZEN AI MAX+ 395\nflags\t\t: avx2\n\nprocessor\t: 1\nmodel name\t: AMD RYZEN AI MAX+ 395\nflags\t\t: avx2\n\n" };
const halo = () => tree({
  ...CPU,
  "sys/class/kfd/kfd/topology/nodes/1/properties": "simd_count 80\ngfx_target_version 110501\n",
  "sys/class/drm/card1/device/vendor": "0x1002\n",
  "sys/class/drm/card1/device/uevent": "DRIVER=amdgpu\n",
  "sys/class/accel/accel0/device/uevent": "DRIVER=amdxdna\n",
}, { "sys/class/accel/accel0/device/driver": "../../../bus/pci/drivers/amdxdna", "sys/class/drm/card1/device/driver": "../../../bus/pci/drivers/amdgpu" });

function model(): Model {
  const { model, diagnostics } = compile(sourceTree("/box", [
    ["profiles.toml", '[profile.tts]\nimage = "ghcr.io/hal0ai/kokoro-server:latest"\nrunner = ["kokoro-server"]\ndevice_class = "cpu"\n\n[profile.generic]\nrunner = ["hal0-fake-runner"]\ndevice_class = "cpu"\n'],
    ["models.toml", '[model.tiny]\npath = "tiny.gguf"\ntype = "llm"\n'],
    ["slots/chat.toml", 'profile = "rocm"\nmodel = "tiny"\nport = 8081\n'],
    ["slots/speech.toml", 'profile = "tts"\ntype = "tts"\nport = 8082\n'],
    ["capabilities.toml", '[[backend]]\nid = "llama.cpp"\nkind = "llama-server"\ndevices = ["gpu-rocm", "gpu-vulkan", "cpu"]\n\n[[backend]]\nid = "fastflowlm"\nkind = "flm"\ndevices = ["npu"]\n\n[[backend]]\nid = "kokoro"\nkind = "kokoro"\ndevices = ["cpu"]\nenabled = false\n'],
  ]));
  expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);
  return model!;
}

describe("backends", () => {
  it("on a Strix Halo: every device present; each backend with its profiles, images and slots", async () => {
    const hw = await deviceHardware(halo());
    expect(hw["gpu-rocm"]).toEqual({ device: "gpu-rocm", available: true, detail: "ROCm GPU gfx1151 (KFD topology)" });
    expect(hw["gpu-vulkan"]).toMatchObject({ available: true, detail: "card1 AMD (amdgpu)" });
    expect(hw.npu).toEqual({ device: "npu", available: true, detail: "accel0 (amdxdna)" });
    expect(hw.cpu).toMatchObject({ available: true, detail: "AMD RYZEN AI MAX+ 395, 2 logical CPUs" });
    const [llama, flm, kokoro] = backendRows(model(), hw);
    expect(llama).toMatchObject({
      id: "llama.cpp", kind: "llama-server", enabled: true, serves: ["llm", "embedding", "reranking"], devices: ["gpu-rocm", "gpu-vulkan", "cpu"],
      runner_images: ["ghcr.io/hal0ai/amd-strix-halo-toolboxes:rocm-7.2.4-rocmfp4-server", "ghcr.io/hal0ai/amd-strix-halo-toolboxes:vulkan-radv-server"],
      slots: ["chat"], hardware: { available: true },
    });
    expect(llama!.profiles.map((p) => p.name)).toEqual(["rocm", "rocm-dnse", "rocm-moe", "vulkan"]);
    expect(flm).toMatchObject({ id: "fastflowlm", profiles: [{ name: "flm", runner: "flm serve", image: "ghcr.io/hal0ai/flm-server:latest", device: "npu" }], slots: [], hardware: { available: true } });
    expect(kokoro).toMatchObject({ id: "kokoro", enabled: false, runner_images: ["ghcr.io/hal0ai/kokoro-server:latest"], slots: ["speech"] });
  });

  it("on a bare CPU-only host: the GPU and NPU absent, each with its reason; the NPU backend has no hardware", async () => {
    const hw = await deviceHardware(tree(CPU));
    expect(hw["gpu-rocm"]).toMatchObject({ available: false, detail: expect.stringContaining("no KFD topology") });
    expect(hw["gpu-vulkan"]).toEqual({ device: "gpu-vulkan", available: false, detail: "no GPU under /sys/class/drm" });
    expect(hw.npu).toMatchObject({ available: false, detail: expect.stringContaining("no /sys/class/accel device") });
    const [llama, flm] = backendRows(model(), hw);
    expect(llama!.hardware).toMatchObject({ available: true, devices: [{ device: "gpu-rocm", available: false }, { device: "gpu-vulkan", available: false }, { device: "cpu", available: true }] });
    expect(flm!.hardware).toEqual({ available: false, devices: [hw.npu] });
    const unbound = await deviceHardware(tree({ "sys/class/accel/accel0/device/vendor": "0x1022\n" }));
    expect(unbound.npu).toMatchObject({ available: false, detail: expect.stringContaining("accel0") });
  });

  it("a profile runs a kind its runner or image names; a generic runner runs none", () => {
    const m = model();
    expect(profileRunsKind(m.profiles.tts!, "kokoro")).toBe(true);
    expect(profileRunsKind(m.profiles.generic!, "kokoro")).toBe(false);
    expect(profileRunsKind(m.profiles.rocm!, "llama-server")).toBe(true);
    expect(profileRunsKind(m.profiles.comfyui!, "comfyui")).toBe(true);
  });
});
