import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * What the box's hardware is, read from /proc and /sys (Linux). Every field
 * comes from a file that was there: a source that is missing or unreadable
 * is reported as absent (`present: false`, empty lists, null numbers),
 * never filled with a guess. `root` re-roots every path (default `/`).
 */

export interface GpuDevice {
  readonly card: string;
  readonly vendor_id: string | null;
  readonly vendor: string | null;
  readonly device_id: string | null;
  readonly driver: string | null;
  readonly pci_slot: string | null;
  /** amdgpu only (`mem_info_vram_total`, `mem_info_gtt_total`). */
  readonly vram_total_bytes: number | null;
  readonly gtt_total_bytes: number | null;
}

export interface NpuDevice {
  readonly name: string;
  readonly source: "/sys/class/accel" | "/dev/accel";
  readonly vendor_id: string | null;
  readonly vendor: string | null;
  readonly device_id: string | null;
  readonly driver: string | null;
}

export interface Temperature {
  readonly chip: string;
  readonly sensor: string;
  readonly label: string | null;
  readonly celsius: number;
}

export interface HardwareReport {
  readonly probed_at: string;
  readonly cpu: { present: boolean; model: string | null; vendor: string | null; logical: number; cores: number | null; packages: number | null; threads_per_core: number | null; mhz: number | null; flags: string[] };
  readonly memory: { present: boolean; total_bytes: number | null; available_bytes: number | null; free_bytes: number | null; swap_total_bytes: number | null; swap_free_bytes: number | null };
  readonly load: { present: boolean; one: number | null; five: number | null; fifteen: number | null; runnable: number | null; tasks: number | null };
  readonly gpus: { present: boolean; source: string; devices: GpuDevice[] };
  readonly npus: { present: boolean; devices: NpuDevice[] };
  readonly temperatures: { present: boolean; source: string; sensors: Temperature[] };
}

const VENDORS: Readonly<Record<string, string>> = { "0x1002": "AMD", "0x1022": "AMD", "0x10de": "NVIDIA", "0x8086": "Intel", "0x13b5": "Arm", "0x5143": "Qualcomm", "0x1ed5": "Moore Threads" };
/** CPU flags that decide which runner builds fit. */
const NOTABLE_FLAGS = ["avx", "avx2", "avx512f", "avx512_bf16", "avx_vnni", "amx_tile", "fma", "f16c", "neon", "asimd", "sve"];

export async function probeHardware(root = "/", now = Date.now()): Promise<HardwareReport> {
  const [cpu, memory, load, gpus, npus, temperatures] = await Promise.all([probeCpu(root), probeMemory(root), probeLoad(root), probeGpus(root), probeNpus(root), probeTemps(root)]);
  return { probed_at: new Date(now).toISOString(), cpu, memory, load, gpus, npus, temperatures };
}

async function text(path: string): Promise<string | undefined> {
  return readFile(path, "utf8").then((t) => t.trim(), () => undefined);
}

async function list(path: string): Promise<string[]> {
  return readdir(path).then((n) => n.sort(), () => []);
}

function num(v: string | undefined): number | null {
  const n = v === undefined ? NaN : Number(v);
  return Number.isFinite(n) ? n : null;
}

async function probeCpu(root: string): Promise<HardwareReport["cpu"]> {
  const info = await text(join(root, "proc/cpuinfo"));
  const blocks = (info ?? "").split(/\n\s*\n/).filter((b) => /^processor\s*:/m.test(b));
  const field = (name: string) => blocks[0]?.match(new RegExp(`^${name}\\s*:\\s*(.*)$`, "m"))?.[1]?.trim() ?? null;
  const flags = new Set((field("flags") ?? field("Features") ?? "").split(/\s+/));
  const topo = await cpuTopology(root);
  return {
    present: info !== undefined,
    model: field("model name") ?? field("Model") ?? field("cpu model"),
    vendor: field("vendor_id") ?? field("CPU implementer"),
    logical: blocks.length,
    cores: topo?.cores ?? null,
    packages: topo?.packages ?? null,
    threads_per_core: topo && topo.cores > 0 ? Math.round(topo.threads / topo.cores) : null,
    mhz: num(field("cpu MHz") ?? undefined),
    flags: NOTABLE_FLAGS.filter((f) => flags.has(f)),
  };
}

/** Distinct (package, core) pairs from /sys/devices/system/cpu/cpuN/topology. */
async function cpuTopology(root: string): Promise<{ cores: number; packages: number; threads: number } | undefined> {
  const dir = join(root, "sys/devices/system/cpu");
  const cpus = (await list(dir)).filter((n) => /^cpu\d+$/.test(n));
  const cores = new Set<string>();
  const packages = new Set<string>();
  let threads = 0;
  for (const cpu of cpus) {
    const pkg = await text(join(dir, cpu, "topology/physical_package_id"));
    const core = await text(join(dir, cpu, "topology/core_id"));
    if (pkg === undefined || core === undefined) continue;
    threads++;
    packages.add(pkg);
    cores.add(`${pkg}:${core}`);
  }
  return threads === 0 ? undefined : { cores: cores.size, packages: packages.size, threads };
}

async function probeMemory(root: string): Promise<HardwareReport["memory"]> {
  const info = await text(join(root, "proc/meminfo"));
  const kb = (key: string) => {
    const v = info?.match(new RegExp(`^${key}:\\s*(\\d+)\\s*kB`, "m"))?.[1];
    return v === undefined ? null : Number(v) * 1024;
  };
  return { present: info !== undefined, total_bytes: kb("MemTotal"), available_bytes: kb("MemAvailable"), free_bytes: kb("MemFree"), swap_total_bytes: kb("SwapTotal"), swap_free_bytes: kb("SwapFree") };
}

async function probeLoad(root: string): Promise<HardwareReport["load"]> {
  const raw = await text(join(root, "proc/loadavg"));
  const [one, five, fifteen, tasks] = raw?.split(/\s+/) ?? [];
  const [runnable, total] = tasks?.split("/") ?? [];
  return { present: raw !== undefined, one: num(one), five: num(five), fifteen: num(fifteen), runnable: num(runnable), tasks: num(total) };
}

/** `/sys/class/<x>/<name>/device`: PCI ids, driver and slot, from its files and uevent. */
async function pciFacts(device: string): Promise<{ vendor_id: string | null; vendor: string | null; device_id: string | null; driver: string | null; pci_slot: string | null }> {
  const vendor_id = (await text(join(device, "vendor"))) ?? null;
  const uevent = (await text(join(device, "uevent"))) ?? "";
  const ue = (key: string) => uevent.match(new RegExp(`^${key}=(.*)$`, "m"))?.[1] ?? null;
  return { vendor_id, vendor: vendor_id ? (VENDORS[vendor_id.toLowerCase()] ?? null) : null, device_id: (await text(join(device, "device"))) ?? null, driver: ue("DRIVER"), pci_slot: ue("PCI_SLOT_NAME") };
}

async function probeGpus(root: string): Promise<HardwareReport["gpus"]> {
  const dir = join(root, "sys/class/drm");
  const names = await list(dir);
  const devices: GpuDevice[] = [];
  for (const card of names.filter((n) => /^card\d+$/.test(n))) {
    const device = join(dir, card, "device");
    const { pci_slot, ...facts } = await pciFacts(device);
    devices.push({ card, ...facts, pci_slot, vram_total_bytes: num(await text(join(device, "mem_info_vram_total"))), gtt_total_bytes: num(await text(join(device, "mem_info_gtt_total"))) });
  }
  return { present: devices.length > 0, source: "/sys/class/drm", devices };
}

/** NPUs: the kernel's accel class (amdxdna, ivpu, …), else the /dev/accel nodes alone. */
async function probeNpus(root: string): Promise<HardwareReport["npus"]> {
  const cls = join(root, "sys/class/accel");
  const viaClass = (await list(cls)).filter((n) => /^accel\d+$/.test(n));
  const devices: NpuDevice[] = [];
  for (const name of viaClass) {
    const { pci_slot: _slot, ...facts } = await pciFacts(join(cls, name, "device"));
    devices.push({ name, source: "/sys/class/accel", ...facts });
  }
  if (devices.length === 0) {
    for (const name of (await list(join(root, "dev/accel"))).filter((n) => /^accel\d+$/.test(n))) {
      devices.push({ name, source: "/dev/accel", vendor_id: null, vendor: null, device_id: null, driver: null });
    }
  }
  return { present: devices.length > 0, devices };
}

async function probeTemps(root: string): Promise<HardwareReport["temperatures"]> {
  const dir = join(root, "sys/class/hwmon");
  const sensors: Temperature[] = [];
  for (const mon of (await list(dir)).filter((n) => /^hwmon\d+$/.test(n))) {
    const chip = (await text(join(dir, mon, "name"))) ?? mon;
    for (const input of (await list(join(dir, mon))).filter((n) => /^temp\d+_input$/.test(n))) {
      const milli = num(await text(join(dir, mon, input)));
      if (milli === null) continue;
      const sensor = input.replace(/_input$/, "");
      sensors.push({ chip, sensor, label: (await text(join(dir, mon, `${sensor}_label`))) ?? null, celsius: milli / 1000 });
    }
  }
  return { present: sensors.length > 0, source: "/sys/class/hwmon", sensors };
}
