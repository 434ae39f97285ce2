import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { envReport, gfxTarget, gpuTargetVersion, modelStoreProbe, npuStatus } from "../../reconciler/host/probes.js";
import { sysroots } from "../helpers/sysroot.js";

/** The in-process host probes on written /proc and /sys trees: a Strix Halo box (gfx1151, an amdxdna NPU) and a bare one. */

const tree = sysroots("hal0-sysroot-");

const KFD = "sys/class/kfd/kfd/topology/nodes";
const halo = () => tree({
  [`${KFD}/0/properties`]: "cpu_cores_count 32\nsimd_count 0\ngfx_target_version 0\n",
  [`${KFD}/1/properties`]: "cpu_cores_count 0\nsimd_count 80\ngfx_target_version 110501\n",
  "sys/class/accel/accel0/device/vendor": "0x1022\n",
  "sys/class/accel/accel0/device/device": "0x17f0\n",
  "sys/class/accel/accel0/device/uevent": "DRIVER=amdxdna\nPCI_SLOT_NAME=0000:c6:00.1\n",
  "proc/sys/kernel/osrelease": "6.17.0-hal0\n",
  "proc/1/cgroup": "0::/init.scope\n",
  "proc/cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD RYZEN AI MAX+ 395\nflags\t\t: avx avx2 avx512f\n\n",
  "proc/meminfo": "MemTotal:       131072000 kB\nMemAvailable:   120000000 kB\n",
}, { "sys/class/accel/accel0/device/driver": "../../../bus/pci/drivers/amdxdna" });

describe("host probes (written /proc and /sys trees)", () => {
  it("gfx targets: major, minor and stepping (hex) of KFD's gfx_target_version", () => {
    expect([gfxTarget(110501), gfxTarget(110000), gfxTarget(90010), gfxTarget(100300)]).toEqual(["gfx1151", "gfx1100", "gfx90a", "gfx1030"]);
  });

  it("on a Strix Halo: gfx1151, the amdxdna NPU bound, the environment", async () => {
    const root = halo();
    expect(await gpuTargetVersion(root)).toEqual({ available: true, gpus: [{ node: "1", gfx_target_version: 110501, target: "gfx1151", simd_count: 80 }] });
    expect(await npuStatus(root)).toEqual({ available: true, devices: [{ name: "accel0", driver: "amdxdna", vendor_id: "0x1022", device_id: "0x17f0", bound: true }] });
    const env = await envReport(root, { PATH: "" });
    expect(env).toMatchObject({ container: { inside: false, kind: null }, kernel: "6.17.0-hal0", cpu: { model: "AMD RYZEN AI MAX+ 395", flags: ["avx", "avx2", "avx512f"] }, gpu_targets: ["gfx1151"], npu: [{ name: "accel0", driver: "amdxdna" }] });
    expect(env.memory.total_bytes).toBe(131072000 * 1024);
  });

  it("on a bare host: {available: false, reason}, never an error; a container is told from its marks", async () => {
    const root = tree({ "proc/1/cgroup": "0::/system.slice/docker-0123.scope\n", "proc/sys/kernel/osrelease": "6.1.0\n" });
    expect(await gpuTargetVersion(root)).toEqual({ available: false, reason: expect.stringContaining("no KFD topology") });
    expect(await npuStatus(root)).toEqual({ available: false, reason: expect.stringContaining("no /sys/class/accel device") });
    const cpuOnly = tree({ [`${KFD}/0/properties`]: "simd_count 0\ngfx_target_version 0\n" });
    expect(await gpuTargetVersion(cpuOnly)).toMatchObject({ available: false, reason: expect.stringContaining("no GPU node") });
    const unbound = tree({ "sys/class/accel/accel0/device/vendor": "0x1022\n" });
    expect(await npuStatus(unbound)).toMatchObject({ available: true, devices: [{ name: "accel0", driver: null, bound: false }] });
    expect((await envReport(root, { PATH: "" })).container).toEqual({ inside: true, kind: "docker" });
    expect(await envReport(root, { PATH: "" })).toMatchObject({ gpu_targets: [], npu: [] });
  });

  it("model_store_probe: filesystem, free/total, writable, memory-backed; a store not made yet is judged by where it would be", async () => {
    const root = tree({ "proc/mounts": `/dev/vda1 / ext4 rw 0 0\ntmpfs ${tmpdir()} tmpfs rw 0 0\n` });
    const store = tree({}); // a folder on the machine's tmp filesystem
    const probed = await modelStoreProbe(join(store, "not-yet"), root);
    expect(probed).toMatchObject({ available: true, exists: false, mount: tmpdir(), fstype: "tmpfs", writable: true, memory_backed: true });
    if (probed.available) expect(probed.total_bytes).toBeGreaterThan(0);
    expect(await modelStoreProbe("relative/path", root)).toEqual({ available: false, reason: "not an absolute path: relative/path" });
  });
});
