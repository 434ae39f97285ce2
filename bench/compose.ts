import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { packageRoot } from "../reconciler/package-root.js";
import { compile, loadTree } from "../compiler/index.js";
import { dockerClient, DockerDriver, InspectCache } from "../reconciler/drivers/docker.js";
import { boxFilter } from "../reconciler/drivers/docker-container.js";
import { StateStore } from "../reconciler/state.js";
import { RunnerProbe } from "../reconciler/runner-probe.js";
import { Sweeper } from "../reconciler/sweep.js";
import { freePortRange } from "./apply.js";
import { median, stat, summarize, wall, withoutExtraCaCerts } from "./measure.js";
import { Floor, FLOOR_PARALLELISMS, floorSlots } from "./floor.js";

/**
 * `npm run bench` (docker part): hal0 beside Debian's docker-compose 1.29 on
 * an equivalent 50-service file (same image, same argv, host network), on a
 * real engine ($DOCKER_HOST): creating 50 (beside the engine's floor, a bare
 * dockerode loop: floor.ts), no-op converge of 50 running slots, an idle
 * `hal0 plan`, and an in-process sweep with nothing to do. Whole processes;
 * medians with their spread; create rounds alternate hal0, compose and the
 * floor, and the ratios are the medians of the per-round ratios. The no-op
 * and the plan are timed again with NODE_EXTRA_CA_CERTS unset when the host
 * sets it (measure.ts).
 */
const SLOTS = 50;
/** Create rounds for hal0, compose and the floor at its best parallelism, alternating. */
const ROUNDS = 10;
/** Rounds of the floor at each parallelism before the best is picked. */
const FLOOR_SWEEP_ROUNDS = 3;
const exec = promisify(execFile);
const ROOT = packageRoot();
const HAL0 = join(ROOT, "bin/hal0.cjs");

/** Slot names and the compose project carry this run's tag: container names are global on an engine others may be benching on too. */
const RUN = randomBytes(3).toString("hex");

function writeBox(dir: string, first: number): void {
  mkdirSync(join(dir, "slots"), { recursive: true });
  copyFileSync(join(ROOT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(dir, "tiny.gguf"));
  writeFileSync(join(dir, "hal0.toml"), `[slots]\nruntime = "docker"\nport_range_start = ${first}\nport_range_end = ${first + SLOTS - 1}\nhealth_timeout_s = 60\nstop_grace_s = 2\n[server]\nport = ${first - 1}\n`);
  writeFileSync(join(dir, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nrunner = ["node", "${join(ROOT, "fixtures/runner/fake-llama-server.mjs")}"]\nflags = "-fa on -b 512"\ndevice_class = "cpu"\n`);
  writeFileSync(join(dir, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
  for (let i = 0; i < SLOTS; i++) writeFileSync(join(dir, "slots", `bench-${RUN}-${i}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${first + i}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "100" }\n`);
}

/** The same 50 services for docker-compose: hal0's resolved image, argv, env and mount, host network. */
async function writeCompose(boxDir: string, composeDir: string): Promise<void> {
  const { model } = compile((await loadTree(boxDir)).tree);
  const services = Object.values(model!.slots).map((s) => [
    `  ${s.name}:`,
    `    image: ${s.spec.image}`,
    `    network_mode: host`,
    `    init: true`,
    `    working_dir: ${boxDir}`,
    `    volumes: ["${boxDir}:${boxDir}:ro"]`,
    `    environment: ${JSON.stringify(s.spec.env)}`,
    `    command: ${JSON.stringify(s.spec.argv)}`,
  ].join("\n"));
  writeFileSync(join(composeDir, "docker-compose.yml"), `version: "2.4"\nservices:\n${services.join("\n")}\n`);
}

export async function benchCompose(dockerHost: string): Promise<string[]> {
  const base = mkdtempSync(join(tmpdir(), "hal0-bench-docker-"));
  const box = join(base, "box");
  const composeDir = join(base, "compose");
  mkdirSync(composeDir);
  writeBox(box, (await freePortRange(SLOTS + 1)) + 1);
  await writeCompose(box, composeDir);
  const env = { ...process.env, DOCKER_HOST: dockerHost, HAL0_CONFIG: box, HAL0_STATE: join(base, "state"), COMPOSE_PROJECT_NAME: `hal0bench${RUN}` };
  const compose = (args: string[]) => wall("docker-compose", args, env, composeDir);
  const hal0 = (args: string[]) => wall(process.execPath, [HAL0, ...args], env);
  const unset = withoutExtraCaCerts(env);
  const floor = new Floor(dockerHost, box, await floorSlots(box));
  const r = { hal0Create: [] as number[], composeCreate: [] as number[], floorCreate: [] as number[], hal0Noop: [] as number[], composeNoop: [] as number[], hal0Plan: [] as number[], hal0NoopUnset: [] as number[], hal0PlanUnset: [] as number[], sweep: [] as number[], list: [] as number[], probed: [] as number[] };
  const sweep = new Map<number, number[]>(FLOOR_PARALLELISMS.map((p) => [p, []]));
  // Paired per round (the same machine load): compose ÷ hal0 and hal0 ÷ floor.
  const speedup: number[] = [];
  const overFloor: number[] = [];
  let best: number = FLOOR_PARALLELISMS[0];
  try {
    // The floor at each parallelism, the parallelisms interleaved round by round.
    for (let round = 0; round < FLOOR_SWEEP_ROUNDS; round++) {
      for (const p of FLOOR_PARALLELISMS) {
        sweep.get(p)!.push(await floor.run(p));
        await floor.clean();
      }
    }
    best = [...sweep].sort((a, b) => median(a[1]) - median(b[1]))[0]![0];
    r.floorCreate.push(...sweep.get(best)!);
    for (let round = 0; round < ROUNDS; round++) {
      const composeCreate = await compose(["up", "-d"]);
      for (let i = 0; i < 2; i++) r.composeNoop.push(await compose(["up", "-d"]));
      await compose(["down", "-t", "1"]);
      const hal0Create = await hal0(["apply", "--yes"]);
      for (let i = 0; i < 2; i++) {
        r.hal0Noop.push(await hal0(["apply", "--yes"]));
        if (unset !== undefined) r.hal0NoopUnset.push(await wall(process.execPath, [HAL0, "apply", "--yes"], unset));
      }
      for (let i = 0; i < 2; i++) {
        r.hal0Plan.push(await wallExit(process.execPath, [HAL0, "plan", "--detailed-exitcode"], env, [0, 2]));
        if (unset !== undefined) r.hal0PlanUnset.push(await wallExit(process.execPath, [HAL0, "plan", "--detailed-exitcode"], unset, [0, 2]));
      }
      if (round < 3) {
        const idle = await sweepTimes(box, join(base, "state"), dockerHost);
        r.sweep.push(...idle.sweep);
        r.list.push(...idle.list);
        r.probed.push(...idle.probed);
      }
      await hal0(["down"]);
      const floorCreate = await floor.run(best);
      await floor.clean();
      r.hal0Create.push(hal0Create);
      r.composeCreate.push(composeCreate);
      r.floorCreate.push(floorCreate);
      speedup.push(composeCreate / hal0Create);
      overFloor.push(hal0Create / floorCreate);
    }
  } finally {
    await compose(["down", "-t", "1"]).catch(() => undefined);
    await hal0(["down"]).catch(() => undefined);
    await floor.clean().catch(() => undefined);
  }
  const x = (v: number) => `${v.toFixed(2)}×`;
  summarize({
    measure: "create 50 slots, docker (until every /health 200)",
    hal0: stat(r.hal0Create, "s"),
    anchor: `compose up -d ${stat(r.composeCreate, "s")}; floor (bare dockerode, ${best} at once) ${stat(r.floorCreate, "s")}`,
    target: `≥ 1.0× compose (${x(median(speedup))}), ≤ 1.2× floor (${x(median(overFloor))})`,
    pass: median(speedup) >= 1 && median(overFloor) <= 1.2,
  });
  // The two whole-CLI rows, as the host's environment has it and (when it sets it) with NODE_EXTRA_CA_CERTS unset.
  const cliRows = (which: { noop: string; plan: string }, noop: number[], plan: number[]): number => {
    const speedup = median(r.composeNoop) / median(noop);
    summarize({
      measure: `no-op converge, 50 running (docker), ${which.noop}`,
      hal0: stat(noop),
      anchor: `compose up -d ${stat(r.composeNoop)}`,
      target: `≥ 5× compose, ≤ 165 ms (${x(speedup)})`,
      pass: speedup >= 5 && median(noop) <= 165,
    });
    summarize({ measure: `hal0 plan, 50 running (docker), ${which.plan}`, hal0: stat(plan), anchor: "—", target: "≤ 120 ms", pass: median(plan) <= 120 });
    return speedup;
  };
  const noopSpeedup = cliRows({ noop: "whole CLI", plan: "nothing to do" }, r.hal0Noop, r.hal0Plan);
  const unsetLines: string[] = [];
  if (unset !== undefined) {
    const noopSpeedupUnset = cliRows({ noop: "NODE_EXTRA_CA_CERTS unset", plan: "NODE_EXTRA_CA_CERTS unset" }, r.hal0NoopUnset, r.hal0PlanUnset);
    unsetLines.push(`  the same with NODE_EXTRA_CA_CERTS unset (the host sets it): no-op ${stat(r.hal0NoopUnset)} (${x(noopSpeedupUnset)} compose), plan ${stat(r.hal0PlanUnset)}`);
  }
  return [
    `create 50, the engine's floor (bare dockerode create+start, p at once; each /health polled until 200): ${[...sweep].map(([p, xs]) => `p=${p} ${stat(xs, "s")}`).join("   ")}   → best p=${best}`,
    `create 50:                   hal0 apply --yes ${stat(r.hal0Create, "s")}   docker-compose up -d ${stat(r.composeCreate, "s")}   floor (p=${best}) ${stat(r.floorCreate, "s")}`,
    `                             per round: hal0 ${x(median(speedup))} compose's speed (target ≥ 1.0×; hal0 also waits for each /health 200), ${x(median(overFloor))} the floor's time (target ≤ 1.2×)`,
    `no-op converge, 50 running:  hal0 apply --yes ${stat(r.hal0Noop)}   docker-compose up -d ${stat(r.composeNoop)}   → hal0 ${x(noopSpeedup)} faster (target ≥ 5×, ≤ 165 ms)`,
    `hal0 plan --detailed-exitcode, 50 running, nothing to do: ${stat(r.hal0Plan)} (target ≤ 120 ms)`,
    ...unsetLines,
    `in-process sweep, nothing to do, docker: ${stat(r.sweep)} (target ≤ 10 ms)   its floor, the engine's label-filtered list call alone: ${stat(r.list)}   a sweep that probes all 50 /health (one per 30 s): ${stat(r.probed)}`,
  ];
}

/** Milliseconds from spawning `cmd args` until it exits with one of `codes` (any other exit throws). */
async function wallExit(cmd: string, args: string[], env: NodeJS.ProcessEnv, codes: readonly number[]): Promise<number> {
  const t0 = performance.now();
  await exec(cmd, args, { env, maxBuffer: 32 << 20 }).catch((err: { code?: unknown }) => {
    if (!codes.includes(err.code as number)) throw err;
  });
  return performance.now() - t0;
}

/**
 * In-process sweeps of the running box after a warm-up, each followed by the
 * one list call observe makes, timed alone (the floor no sweep can go under).
 */
async function sweepTimes(box: string, stateDir: string, host: string): Promise<{ sweep: number[]; list: number[]; probed: number[] }> {
  const state = new StateStore(stateDir);
  const docker = dockerClient(host);
  const filters = boxFilter(await state.boxId());
  // As hal0 serve sweeps: its driver reuses a container's inspect while the engine lists it unchanged (InspectCache, as
  // cli/box.ts gives the long-lived commands), and with the runner probe (each image's id asked once per sweep; its facts cached by id).
  const driver = new DockerDriver({ docker, box: await state.boxId(), stateDir, stopGraceS: 2, inspections: new InspectCache() });
  const runners = new RunnerProbe({ stateDir, root: box, docker: () => docker });
  const sweeper = new Sweeper({ root: box, state, driverFor: async () => driver, runners });
  for (let i = 0; i < 3; i++) await sweeper.sweep();
  const times = { sweep: [] as number[], list: [] as number[], probed: [] as number[] };
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    const report = await sweeper.sweep();
    const t1 = performance.now();
    await docker.listContainers({ all: true, filters });
    times.sweep.push(t1 - t0);
    times.list.push(performance.now() - t1);
    if (report.outcome !== "nothing_to_do") throw new Error(`bench sweep expected nothing to do, got ${report.outcome}`);
  }
  const probing = new Sweeper({ root: box, state, driverFor: async () => driver, fullProbeMs: 0, runners });
  await probing.sweep();
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    await probing.sweep();
    times.probed.push(performance.now() - t0);
  }
  return times;
}
