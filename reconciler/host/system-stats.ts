import { join } from "node:path";
import { probeHardware } from "./hardware.js";
import { envReport, gpuTargetVersion, list, modelStoreProbe, npuStatus, text, type Absent } from "./probes.js";

/**
 * The box's running figures, read from /proc and /sys through the same one
 * `root` as the host probes (tests write those trees): CPU use, memory, load,
 * uptime, the model store's disk, and the power the kernel's hwmon devices
 * report. What the kernel does not have is `{available: false, reason}`,
 * never an error and never a guess.
 */

/** Cumulative CPU time from /proc/stat's `cpu` line (USER_HZ ticks), and when it was read. */
export interface CpuTimes {
  readonly at: number;
  readonly total: number;
  readonly idle: number;
}

/** /proc/stat's aggregate line: busy is everything but idle and iowait; guest time is already inside user. */
export async function readCpuTimes(root: string, now: number): Promise<CpuTimes | undefined> {
  const stat = await text(join(root, "proc/stat"));
  const line = stat?.split("\n").find((l) => /^cpu\s/.test(l));
  if (!line) return undefined;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  if (f.length < 4 || f.slice(0, 4).some((n) => !Number.isFinite(n))) return undefined;
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f.map((n) => (Number.isFinite(n) ? n : 0));
  return { at: now, total: user + nice + system + idle + iowait + irq + softirq + steal, idle: idle + iowait };
}

const ratio = (part: number, whole: number): number | null => (whole > 0 ? round(part / whole, 4) : null);
const round = (n: number, digits: number): number => Math.round(n * 10 ** digits) / 10 ** digits;

/**
 * `system_stats`: CPU use since boot and over the window since `previous`
 * (the reading the caller kept; null the first time), memory, load, uptime,
 * and the disk of the model store (`storePath`). Returns the new CPU reading
 * for the caller to keep.
 */
export async function systemStats(root: string, storePath: string | null, previous: CpuTimes | undefined, now: number): Promise<{ stats: SystemStats; cpu: CpuTimes | undefined }> {
  const [hw, cpu, uptime, store] = await Promise.all([
    probeHardware(root, now), readCpuTimes(root, now), text(join(root, "proc/uptime")),
    storePath === null ? Promise.resolve<Absent>({ available: false, reason: "no model store is set ([models] store, or the first of [models] roots)" }) : modelStoreProbe(storePath, root),
  ]);
  const recent = cpu && previous && cpu.total > previous.total ? { usage: ratio((cpu.total - cpu.idle) - (previous.total - previous.idle), cpu.total - previous.total), window_s: round((cpu.at - previous.at) / 1000, 3) } : null;
  const m = hw.memory;
  const hostUptime = Number(uptime?.split(/\s+/)[0]);
  const stats: SystemStats = {
    at: new Date(now).toISOString(),
    cpu: cpu === undefined ? { available: false, reason: "no readable cpu line in /proc/stat" } : {
      available: true, logical: hw.cpu.logical || null, model: hw.cpu.model,
      usage_since_boot: ratio(cpu.total - cpu.idle, cpu.total),
      usage_recent: recent?.usage ?? null, window_s: recent?.window_s ?? null,
    },
    memory: !m.present || m.total_bytes === null ? { available: false, reason: "no MemTotal in /proc/meminfo" } : {
      available: true, total_bytes: m.total_bytes, available_bytes: m.available_bytes,
      used_bytes: m.available_bytes === null ? null : m.total_bytes - m.available_bytes,
      used_ratio: m.available_bytes === null ? null : ratio(m.total_bytes - m.available_bytes, m.total_bytes),
      swap_total_bytes: m.swap_total_bytes, swap_used_bytes: m.swap_total_bytes === null || m.swap_free_bytes === null ? null : m.swap_total_bytes - m.swap_free_bytes,
    },
    load: !hw.load.present ? { available: false, reason: "no /proc/loadavg" } : { available: true, one: hw.load.one, five: hw.load.five, fifteen: hw.load.fifteen, runnable: hw.load.runnable, tasks: hw.load.tasks },
    uptime: { host_s: Number.isFinite(hostUptime) ? hostUptime : null, hal0_s: round(process.uptime(), 1) },
    store: !store.available ? store : { available: true, path: store.path, exists: store.exists, fstype: store.fstype, mount: store.mount, free_bytes: store.free_bytes, total_bytes: store.total_bytes, used_ratio: ratio(store.total_bytes - store.free_bytes, store.total_bytes), writable: store.writable },
  };
  return { stats, cpu };
}

export interface SystemStats {
  readonly at: string;
  readonly cpu: Absent | { available: true; logical: number | null; model: string | null; usage_since_boot: number | null; usage_recent: number | null; window_s: number | null };
  readonly memory: Absent | { available: true; total_bytes: number; available_bytes: number | null; used_bytes: number | null; used_ratio: number | null; swap_total_bytes: number | null; swap_used_bytes: number | null };
  readonly load: Absent | { available: true; one: number | null; five: number | null; fifteen: number | null; runnable: number | null; tasks: number | null };
  readonly uptime: { host_s: number | null; hal0_s: number };
  readonly store: Absent | { available: true; path: string; exists: boolean; fstype: string | null; mount: string | null; free_bytes: number; total_bytes: number; used_ratio: number | null; writable: boolean };
}

export interface PowerSensor {
  /** `power1`, … */
  readonly sensor: string;
  readonly label: string | null;
  readonly watts: number;
  /** Which file it came from: `average` (powerN_average) or `input` (powerN_input, what newer amdgpu kernels have instead). */
  readonly source: "average" | "input";
}

export type PowerStats = Absent | { available: true; devices: Array<{ hwmon: string; name: string; sensors: PowerSensor[]; watts: number }>; total_watts: number };

/**
 * `power_stats`: each hwmon device's power sensors in watts (the kernel's
 * files hold microwatts): `powerN_average`, else `powerN_input`. A device
 * with neither is left out; none at all is `{available: false, reason}`.
 */
export async function powerStats(root: string): Promise<PowerStats> {
  const dir = join(root, "sys/class/hwmon");
  const mons = (await list(dir)).filter((n) => /^hwmon\d+$/.test(n));
  if (mons.length === 0) return { available: false, reason: "no /sys/class/hwmon device: the kernel exposes no hardware monitors here" };
  const devices = [];
  const names: string[] = [];
  for (const hwmon of mons) {
    const name = (await text(join(dir, hwmon, "name"))) ?? hwmon;
    names.push(name);
    const files = await list(join(dir, hwmon));
    const sensors: PowerSensor[] = [];
    for (const sensor of [...new Set(files.map((f) => /^(power\d+)_(average|input)$/.exec(f)?.[1]).filter((s) => s !== undefined))]) {
      for (const source of ["average", "input"] as const) {
        const micro = Number(await text(join(dir, hwmon, `${sensor}_${source}`)));
        if (!files.includes(`${sensor}_${source}`) || !Number.isFinite(micro)) continue;
        sensors.push({ sensor, label: (await text(join(dir, hwmon, `${sensor}_label`))) ?? null, watts: micro / 1e6, source });
        break;
      }
    }
    if (sensors.length > 0) devices.push({ hwmon, name, sensors, watts: round(sensors.reduce((w, s) => w + s.watts, 0), 6) });
  }
  if (devices.length === 0) return { available: false, reason: `no hwmon device reports power (power*_average or power*_input); devices: ${names.join(", ")}` };
  return { available: true, devices, total_watts: round(devices.reduce((w, d) => w + d.watts, 0), 6) };
}

/**
 * `hardware_snapshot`: what the box is — kernel and container, CPU, RAM,
 * GPUs with their gfx targets, the NPU, temperatures, and whether power can
 * be read — from the same probes `env_report` and `gpu_target_version` use.
 */
export async function hardwareSnapshot(root: string, env: Readonly<Record<string, string | undefined>>, now: number) {
  const [report, hw, targets, npu, power] = await Promise.all([envReport(root, env), probeHardware(root, now), gpuTargetVersion(root), npuStatus(root), powerStats(root)]);
  return {
    probed_at: hw.probed_at,
    kernel: report.kernel,
    container: report.container,
    cpu: hw.cpu,
    memory: hw.memory,
    gpus: { devices: hw.gpus.devices, targets },
    npu,
    power: power.available ? { available: true, sensors: power.devices.flatMap((d) => d.sensors.map((s) => `${d.name}/${s.sensor}`)) } : power,
    temperatures: hw.temperatures.sensors,
    runtimes: report.runtimes,
  };
}
