import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { packageRoot } from "../cli/package-root.js";

/**
 * `npm run bench` (plan/apply part): whole `hal0` processes on a 50-slot box
 * of fake runners — `hal0 apply --yes` of 50 new slots, then `hal0 plan` with
 * all 50 running and nothing to do. Median wall times.
 */
const SLOTS = 50;
const exec = promisify(execFile);
const HAL0 = join(packageRoot(), "bin/hal0.js");
const RUNNER = join(packageRoot(), "fixtures/runner/fake-llama-server.mjs");

export async function freePortRange(count: number): Promise<number> {
  for (let start = 20000; start < 60000; start += count + 7) {
    const free = await Promise.all(Array.from({ length: count }, (_, i) => isFree(start + i)));
    if (free.every(Boolean)) return start;
  }
  throw new Error("no free port range on loopback");
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer().once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

function writeBox(dir: string, firstPort: number): void {
  mkdirSync(join(dir, "slots"), { recursive: true });
  writeFileSync(join(dir, "hal0.toml"), `[slots]\nport_range_start = ${firstPort}\nport_range_end = ${firstPort + SLOTS - 1}\nhealth_timeout_s = 60\nstop_grace_s = 5\n[server]\nport = ${firstPort - 1}\n`);
  writeFileSync(join(dir, "profiles.toml"), `[profile.fake]\nrunner = ["${process.execPath}", "${RUNNER}"]\nflags = "-fa on -b 512"\ndevice_class = "cpu"\n[profile.fake.tune]\nctx_size = 4096\n`);
  writeFileSync(join(dir, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\ncontext_length = 8192\n`);
  writeFileSync(join(dir, "tiny.gguf"), "GGUF");
  for (let i = 0; i < SLOTS; i++) {
    writeFileSync(join(dir, "slots", `slot-${i}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${firstPort + i}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "100" }\n`);
  }
}

async function wall(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const t0 = performance.now();
  await exec(process.execPath, [HAL0, ...args], { env, maxBuffer: 16 << 20 }).catch((err: { code?: number }) => {
    if (!(args[0] === "plan" && err.code === 2)) throw err;
  });
  return performance.now() - t0;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

export async function benchApply(): Promise<string[]> {
  const base = mkdtempSync(join(tmpdir(), "hal0-bench-"));
  const config = join(base, "box");
  writeBox(config, (await freePortRange(SLOTS + 1)) + 1);
  const env = { ...process.env, HAL0_CONFIG: config, HAL0_STATE: join(base, "state") };
  try {
    const applies: number[] = [];
    const plans: number[] = [];
    for (let round = 0; round < 3; round++) {
      applies.push(await wall(["apply", "--yes"], env));
      for (let i = 0; i < 5; i++) plans.push(await wall(["plan", "--detailed-exitcode"], env));
      await wall(["down"], env);
    }
    return [
      `hal0 apply --yes, ${SLOTS} new slots (fake runners, 100 ms load):  median ${(median(applies) / 1000).toFixed(2)} s  (${applies.length} runs)`,
      `hal0 plan, ${SLOTS} slots running, nothing to do:                 median ${median(plans).toFixed(0)} ms  (${plans.length} runs)`,
    ];
  } finally {
    await exec(process.execPath, [HAL0, "down"], { env }).catch(() => undefined);
  }
}
