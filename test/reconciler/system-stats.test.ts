import { describe, expect, it } from "vitest";
import { hardwareSnapshot, powerStats, readCpuTimes, systemStats } from "../../reconciler/host/system-stats.js";
import { sysroots } from "../helpers/sysroot.js";

/** The host figures on written /proc and /sys trees where the kernel has nothing to say: `{available: false, reason}`, never an error. */

const tree = sysroots("hal0-sysroot-");

const NOW = Date.parse("2026-12-02T12:00:00.000Z");

describe("host figures with the hardware absent", () => {
  it("system_stats on an empty tree: CPU, memory and load absent with reasons; no store set is absent too", async () => {
    const { stats, cpu } = await systemStats(tree({}), null, undefined, NOW);
    expect(cpu).toBeUndefined();
    expect(stats).toMatchObject({
      at: "2026-12-02T12:00:00.000Z",
      cpu: { available: false, reason: "no readable cpu line in /proc/stat" },
      memory: { available: false, reason: "no MemTotal in /proc/meminfo" },
      load: { available: false, reason: "no /proc/loadavg" },
      uptime: { host_s: null },
      store: { available: false, reason: expect.stringContaining("no model store is set") },
    });
    expect((await systemStats(tree({}), "models/relative", undefined, NOW)).stats.store).toEqual({ available: false, reason: "not an absolute path: models/relative" });
  });

  it("power_stats: no hwmon at all, and hwmon devices that report no power, each say so", async () => {
    expect(await powerStats(tree({}))).toEqual({ available: false, reason: "no /sys/class/hwmon device: the kernel exposes no hardware monitors here" });
    const tempsOnly = tree({ "sys/class/hwmon/hwmon0/name": "k10temp\n", "sys/class/hwmon/hwmon0/temp1_input": "50000\n", "sys/class/hwmon/hwmon1/name": "nvme\n", "sys/class/hwmon/hwmon1/power1_average": "not a number\n" });
    expect(await powerStats(tempsOnly)).toEqual({ available: false, reason: "no hwmon device reports power (power*_average or power*_input); devices: k10temp, nvme" });
    const snapshot = await hardwareSnapshot(tempsOnly, { PATH: "" }, NOW);
    expect(snapshot).toMatchObject({
      power: { available: false, reason: expect.stringContaining("devices: k10temp, nvme") },
      gpus: { devices: [], targets: { available: false } }, npu: { available: false }, kernel: null,
      temperatures: [{ chip: "k10temp", sensor: "temp1", celsius: 50 }],
    });
  });

  it("reads /proc/stat's cpu line: busy is all but idle and iowait, guest time is not counted twice", async () => {
    const root = tree({ "proc/stat": "cpu  100 5 50 800 40 3 2 0 20 0\n" });
    expect(await readCpuTimes(root, NOW)).toEqual({ at: NOW, total: 1000, idle: 840 });
    expect(await readCpuTimes(tree({ "proc/stat": "intr 1 2 3\n" }), NOW)).toBeUndefined();
  });
});
