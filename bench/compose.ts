import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packageRoot } from "../reconciler/package-root.js";
import { compile, loadTree } from "../compiler/index.js";
import { dockerClient, DockerDriver } from "../reconciler/drivers/docker.js";
import { boxFilter } from "../reconciler/drivers/docker-container.js";
import { StateStore } from "../reconciler/state.js";
import { RunnerProbe } from "../reconciler/runner-probe.js";
import { Sweeper } from "../reconciler/sweep.js";
import { freePortRange } from "./apply.js";
import { median, wall } from "./measure.js";

/**
 * `npm run bench` (docker part): hal0 beside Debian's docker-compose 1.29 on
 * an equivalent 50-service file (same image, same argv, host network), on a
 * real engine ($DOCKER_HOST): no-op converge of 50 running slots, creating
 * 50, and an in-process sweep with nothing to do. Whole processes, medians.
 */
const SLOTS = 50;
const ROOT = packageRoot();
const HAL0 = join(ROOT, "bin/hal0.js");

function writeBox(dir: string, first: number): void {
  mkdirSync(join(dir, "slots"), { recursive: true });
  copyFileSync(join(ROOT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(dir, "tiny.gguf"));
  writeFileSync(join(dir, "hal0.toml"), `[slots]\nruntime = "docker"\nport_range_start = ${first}\nport_range_end = ${first + SLOTS - 1}\nhealth_timeout_s = 60\nstop_grace_s = 2\n[server]\nport = ${first - 1}\n`);
  writeFileSync(join(dir, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nrunner = ["node", "${join(ROOT, "fixtures/runner/fake-llama-server.mjs")}"]\nflags = "-fa on -b 512"\ndevice_class = "cpu"\n`);
  writeFileSync(join(dir, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
  for (let i = 0; i < SLOTS; i++) writeFileSync(join(dir, "slots", `bench-${i}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${first + i}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "100" }\n`);
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
  const env = { ...process.env, DOCKER_HOST: dockerHost, HAL0_CONFIG: box, HAL0_STATE: join(base, "state"), COMPOSE_PROJECT_NAME: "hal0bench" };
  const compose = (args: string[]) => wall("docker-compose", args, env, composeDir);
  const hal0 = (args: string[]) => wall(process.execPath, [HAL0, ...args], env);
  const r = { hal0Create: [] as number[], composeCreate: [] as number[], hal0Noop: [] as number[], composeNoop: [] as number[], sweep: [] as number[], list: [] as number[], probed: [] as number[] };
  try {
    for (let round = 0; round < 3; round++) {
      r.composeCreate.push(await compose(["up", "-d"]));
      for (let i = 0; i < 3; i++) r.composeNoop.push(await compose(["up", "-d"]));
      await compose(["down", "-t", "1"]);
      r.hal0Create.push(await hal0(["apply", "--yes"]));
      for (let i = 0; i < 3; i++) r.hal0Noop.push(await hal0(["apply", "--yes"]));
      const idle = await sweepTimes(box, join(base, "state"), dockerHost);
      r.sweep.push(...idle.sweep);
      r.list.push(...idle.list);
      r.probed.push(...idle.probed);
      await hal0(["down"]);
    }
  } finally {
    await compose(["down", "-t", "1"]).catch(() => undefined);
    await hal0(["down"]).catch(() => undefined);
  }
  const ratio = (a: number[], b: number[]) => (median(a) / median(b)).toFixed(2);
  return [
    `no-op converge, 50 running:  hal0 apply --yes ${median(r.hal0Noop).toFixed(0)} ms   docker-compose up -d ${median(r.composeNoop).toFixed(0)} ms   → hal0 ${ratio(r.composeNoop, r.hal0Noop)}× faster (target ≥ 3×)`,
    `create 50:                   hal0 apply --yes ${(median(r.hal0Create) / 1000).toFixed(2)} s   docker-compose up -d ${(median(r.composeCreate) / 1000).toFixed(2)} s   → hal0 ${ratio(r.composeCreate, r.hal0Create)}× faster (target ≥ 2×; hal0 also waits for each /health 200)`,
    `in-process sweep, nothing to do, docker: median ${median(r.sweep).toFixed(1)} ms (target ≤ 10 ms)   its floor, the engine's label-filtered list call alone: median ${median(r.list).toFixed(1)} ms   a sweep that probes all 50 /health (one per 30 s): median ${median(r.probed).toFixed(1)} ms`,
  ];
}

/**
 * In-process sweeps of the running box after a warm-up, each followed by the
 * one list call observe makes, timed alone (the floor no sweep can go under).
 */
async function sweepTimes(box: string, stateDir: string, host: string): Promise<{ sweep: number[]; list: number[]; probed: number[] }> {
  const state = new StateStore(stateDir);
  const docker = dockerClient(host);
  const filters = boxFilter(await state.boxId());
  const driver = new DockerDriver({ docker, box: await state.boxId(), stateDir, stopGraceS: 2 });
  // As hal0 serve sweeps: with the runner probe (each image's id asked once per sweep; its facts cached by id).
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
