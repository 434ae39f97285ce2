import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { packageRoot } from "../reconciler/package-root.js";
import { ProcessDriver } from "../reconciler/drivers/process.js";
import { RunnerProbe } from "../reconciler/runner-probe.js";
import { StateStore } from "../reconciler/state.js";
import { Sweeper } from "../reconciler/sweep.js";
import { median, stat, summarize, wall as wallOf, withoutExtraCaCerts } from "./measure.js";

/**
 * `npm run bench` (plan/apply part): whole `hal0` processes on a 50-slot box
 * of fake runners — `hal0 apply --yes` of 50 new slots, a no-op apply, then
 * `hal0 plan` with all 50 running and nothing to do (beside node's bare start,
 * `node -e 0`, timed alternately with it; again with NODE_EXTRA_CA_CERTS unset
 * when the host sets it: measure.ts). Medians with their spread (stat).
 */
const SLOTS = 50;
const exec = promisify(execFile);
const HAL0 = join(packageRoot(), "bin/hal0.cjs");
/** The stand-in llama-server as one runner word, so the runner probe checks every slot's argv against its --help (as on a real box). */
const RUNNER = join(packageRoot(), "bin/hal0-fake-llama-server");

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

/** A box of 50 fake-runner slots on ports firstPort.. (the serve bench uses it too). */
export function writeBox(dir: string, firstPort: number): void {
  mkdirSync(join(dir, "slots"), { recursive: true });
  writeFileSync(join(dir, "hal0.toml"), `[slots]\nport_range_start = ${firstPort}\nport_range_end = ${firstPort + SLOTS - 1}\nhealth_timeout_s = 60\nstop_grace_s = 5\n[server]\nport = ${firstPort - 1}\n`);
  writeFileSync(join(dir, "profiles.toml"), `[profile.fake]\nrunner = ["${RUNNER}"]\nflags = "-fa on -b 512"\ndevice_class = "cpu"\n[profile.fake.tune]\nctx_size = 4096\n`);
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

/** In-process sweeps of the running box with nothing to do, after a warm-up. */
async function idleSweeps(root: string, stateDir: string): Promise<number[]> {
  const state = new StateStore(stateDir);
  const driver = new ProcessDriver({ stateDir });
  // As hal0 serve sweeps: with the runner probe (its cache answers: a stat of the runner per sweep).
  const sweeper = new Sweeper({ root, state, driverFor: async () => driver, runners: new RunnerProbe({ stateDir, root }) });
  for (let i = 0; i < 2; i++) await sweeper.sweep();
  const times: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    const report = await sweeper.sweep();
    times.push(performance.now() - t0);
    if (report.outcome !== "nothing_to_do") throw new Error(`bench sweep expected nothing to do, got ${report.outcome}`);
  }
  return times;
}

/** Rounds of create → no-op apply → plans → sweeps → down: each row gets at least 10 samples. */
const ROUNDS = 10;

export async function benchApply(): Promise<string[]> {
  const base = mkdtempSync(join(tmpdir(), "hal0-bench-"));
  const config = join(base, "box");
  writeBox(config, (await freePortRange(SLOTS + 1)) + 1);
  const env = { ...process.env, HAL0_CONFIG: config, HAL0_STATE: join(base, "state") };
  const unset = withoutExtraCaCerts(env);
  try {
    const applies: number[] = [];
    const noops: number[] = [];
    const plans: number[] = [];
    const sweeps: number[] = [];
    const bare: number[] = [];
    const plansUnset: number[] = [];
    const bareUnset: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      applies.push(await wall(["apply", "--yes"], env));
      noops.push(await wall(["apply", "--yes"], env));
      for (let i = 0; i < 2; i++) {
        // The anchor beside each plan: node's own start, in the same moment.
        bare.push(await wallOf(process.execPath, ["-e", "0"], env));
        plans.push(await wall(["plan", "--detailed-exitcode"], env));
        if (unset === undefined) continue;
        bareUnset.push(await wallOf(process.execPath, ["-e", "0"], unset));
        plansUnset.push(await wall(["plan", "--detailed-exitcode"], unset));
      }
      sweeps.push(...(await idleSweeps(config, join(base, "state"))));
      await wall(["down"], env);
    }
    summarize({
      measure: `hal0 plan, ${SLOTS} running (process runtime), nothing to do`,
      hal0: stat(plans),
      anchor: `node -e 0: ${stat(bare)}`,
      target: "≤ 120 ms",
      pass: median(plans) <= 120,
    });
    const unsetLines: string[] = [];
    if (unset !== undefined) {
      summarize({
        measure: `hal0 plan, ${SLOTS} running (process runtime), NODE_EXTRA_CA_CERTS unset`,
        hal0: stat(plansUnset),
        anchor: `node -e 0 with it unset: ${stat(bareUnset)}`,
        target: "≤ 120 ms",
        pass: median(plansUnset) <= 120,
      });
      unsetLines.push(`  the same with NODE_EXTRA_CA_CERTS unset (the host sets it):  ${stat(plansUnset)}   node -e 0: ${stat(bareUnset)}`);
    }
    return [
      `hal0 apply --yes, ${SLOTS} new slots (fake runners, 100 ms load):  ${stat(applies, "s")}`,
      `hal0 apply --yes, ${SLOTS} running, nothing to do:                 ${stat(noops)}`,
      `hal0 plan, ${SLOTS} slots running, nothing to do:                 ${stat(plans)}   node -e 0 (node's bare start): ${stat(bare)}`,
      ...unsetLines,
      `in-process sweep, nothing to do, process runtime, ${SLOTS} running: ${stat(sweeps)}  (target ≤ 10 ms)`,
    ];
  } finally {
    await exec(process.execPath, [HAL0, "down"], { env }).catch(() => undefined);
  }
}

