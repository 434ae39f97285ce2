import { access, constants, readdir, readFile, readlink, stat, statfs } from "node:fs/promises";
import { basename, delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { probeHardware } from "./hardware.js";

/**
 * The host probes seed 001 runs in process (no REST hop): the GPU's gfx
 * target, the NPU and its driver, an environment report, and what a model
 * store path sits on. Each reads /proc and /sys through one `root` (tests
 * write those trees), and answers `{available: false, reason}` where the
 * hardware or file is absent — never an error.
 */

export type Absent = { readonly available: false; readonly reason: string };

/** A file's trimmed text, or undefined when it cannot be read (absent hardware reads as absent). */
export async function text(path: string): Promise<string | undefined> {
  return readFile(path, "utf8").then((t) => t.trim(), () => undefined);
}

/** A folder's entries, sorted; empty when it cannot be read. */
export async function list(path: string): Promise<string[]> {
  return readdir(path).then((n) => n.sort(), () => []);
}

/** KFD's `gfx_target_version` (major·10000 + minor·100 + stepping) as the target name: 110501 → gfx1151, 90010 → gfx90a. */
export function gfxTarget(version: number): string {
  const major = Math.floor(version / 10000);
  const minor = Math.floor(version / 100) % 100;
  const step = version % 100;
  return `gfx${major}${minor.toString(16)}${step.toString(16)}`;
}

/** `gpu_target_version`: each KFD topology node with a GPU (gfx_target_version ≠ 0). */
export async function gpuTargetVersion(root = "/"): Promise<Absent | { available: true; gpus: Array<{ node: string; gfx_target_version: number; target: string; simd_count: number | null }> }> {
  const dir = join(root, "sys/class/kfd/kfd/topology/nodes");
  const nodes = await list(dir);
  if (nodes.length === 0) return { available: false, reason: "no KFD topology (/sys/class/kfd/kfd/topology/nodes): no AMD GPU driver (amdgpu) here" };
  const gpus = [];
  for (const node of nodes) {
    const props = (await text(join(dir, node, "properties"))) ?? "";
    const field = (k: string) => Number(new RegExp(`^${k}\\s+(\\d+)$`, "m").exec(props)?.[1] ?? NaN);
    const version = field("gfx_target_version");
    if (!Number.isFinite(version) || version === 0) continue; // a CPU node
    const simd = field("simd_count");
    gpus.push({ node, gfx_target_version: version, target: gfxTarget(version), simd_count: Number.isFinite(simd) ? simd : null });
  }
  return gpus.length === 0 ? { available: false, reason: "the KFD topology lists no GPU node (gfx_target_version 0 everywhere)" } : { available: true, gpus };
}

/** `npu_status`: the accel devices and the driver bound to each (amdxdna for AMD's XDNA NPUs). */
export async function npuStatus(root = "/"): Promise<Absent | { available: true; devices: Array<{ name: string; driver: string | null; vendor_id: string | null; device_id: string | null; bound: boolean }> }> {
  const dir = join(root, "sys/class/accel");
  const names = (await list(dir)).filter((n) => /^accel\d+$/.test(n));
  if (names.length === 0) return { available: false, reason: "no /sys/class/accel device: no NPU, or its driver (amdxdna) is not loaded" };
  const devices = [];
  for (const name of names) {
    const device = join(dir, name, "device");
    const link = await readlink(join(device, "driver")).catch(() => undefined);
    const uevent = (await text(join(device, "uevent"))) ?? "";
    const driver = link ? basename(link) : (/^DRIVER=(.*)$/m.exec(uevent)?.[1] ?? null);
    devices.push({ name, driver, vendor_id: (await text(join(device, "vendor"))) ?? null, device_id: (await text(join(device, "device"))) ?? null, bound: driver !== null });
  }
  return { available: true, devices };
}

/** The filesystem a path is on, from /proc/mounts (the longest mount point that holds it). */
async function mountOf(root: string, path: string): Promise<{ mount: string; fstype: string; source: string } | undefined> {
  const mounts = (await text(join(root, "proc/mounts"))) ?? "";
  let best: { mount: string; fstype: string; source: string } | undefined;
  for (const line of mounts.split("\n")) {
    const [source, mount, fstype] = line.split(" ");
    if (!source || !mount || !fstype) continue;
    const m = mount.replace(/\\040/g, " ");
    if ((path === m || path.startsWith(m.endsWith("/") ? m : `${m}/`)) && (best === undefined || m.length > best.mount.length)) best = { mount: m, fstype, source };
  }
  return best;
}

/** `model_store_probe {path}`: its filesystem, free and total bytes, whether hal0 may write there, and whether it is memory-backed. */
export async function modelStoreProbe(path: string, root = "/"): Promise<Absent | { available: true; path: string; exists: boolean; mount: string | null; fstype: string | null; free_bytes: number; total_bytes: number; writable: boolean; memory_backed: boolean }> {
  if (!isAbsolute(path)) return { available: false, reason: `not an absolute path: ${path}` };
  const abs = resolve(path);
  // A store not made yet is judged by the nearest folder that exists, where it would be made.
  const space = await spaceAt(abs).catch(() => undefined);
  if (space === undefined) return { available: false, reason: `cannot statfs ${abs} nor a folder above it` };
  const at = space.path;
  const mount = await mountOf(root, at);
  const writable = await access(at, constants.W_OK).then(() => true, () => false);
  return {
    available: true, path: abs, exists: at === abs, mount: mount?.mount ?? null, fstype: mount?.fstype ?? null,
    free_bytes: space.free_bytes, total_bytes: space.total_bytes, writable,
    memory_backed: mount !== undefined && ["tmpfs", "ramfs"].includes(mount.fstype),
  };
}

/** The nearest existing folder at or above `path` (what statfs can measure for a store not yet created). */
async function nearestExisting(path: string): Promise<string> {
  let p = path;
  for (;;) {
    if (await stat(p).then((s) => s.isDirectory(), () => false)) return p;
    const up = dirname(p);
    if (up === p) return p;
    p = up;
  }
}

/** Free and total bytes of the filesystem holding `path` (or its nearest existing parent). */
export async function spaceAt(path: string): Promise<{ path: string; free_bytes: number; total_bytes: number }> {
  const at = await nearestExisting(path);
  const s = await statfs(at);
  return { path: at, free_bytes: s.bavail * s.bsize, total_bytes: s.blocks * s.bsize };
}

/** `env_report`: container or not, CPU, RAM, GPUs, NPU, kernel, and the runtimes found on PATH. */
export async function envReport(root = "/", env: Readonly<Record<string, string | undefined>> = process.env) {
  const [hw, gpu, npu, kernel, cgroup, dockerenv, containerenv] = await Promise.all([
    probeHardware(root), gpuTargetVersion(root), npuStatus(root), text(join(root, "proc/sys/kernel/osrelease")), text(join(root, "proc/1/cgroup")),
    access(join(root, ".dockerenv")).then(() => true, () => false), access(join(root, "run/.containerenv")).then(() => true, () => false),
  ]);
  const container = dockerenv ? "docker" : containerenv ? "podman" : /docker|containerd|kubepods|libpod/.exec(cgroup ?? "")?.[0] ?? null;
  const runtimes: Record<string, string | null> = {};
  for (const bin of ["docker", "podman", "llama-server", "hermes"]) runtimes[bin] = await onPath(bin, env.PATH ?? "");
  return {
    container: { inside: container !== null, kind: container },
    kernel: kernel ?? null,
    cpu: { model: hw.cpu.model, logical: hw.cpu.logical, cores: hw.cpu.cores, flags: hw.cpu.flags },
    memory: { total_bytes: hw.memory.total_bytes, available_bytes: hw.memory.available_bytes },
    gpus: hw.gpus.devices.map((g) => ({ card: g.card, vendor: g.vendor, driver: g.driver, vram_total_bytes: g.vram_total_bytes })),
    gpu_targets: gpu.available ? gpu.gpus.map((g) => g.target) : [],
    npu: npu.available ? npu.devices.map((d) => ({ name: d.name, driver: d.driver })) : [],
    runtimes: { node: process.version, ...runtimes },
  };
}

async function onPath(bin: string, path: string): Promise<string | null> {
  for (const dir of path.split(delimiter).filter(Boolean)) {
    const file = join(dir, bin);
    if (await access(file, constants.X_OK).then(() => true, () => false)) return file;
  }
  return null;
}
