import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type Dockerode from "dockerode";
import { describe, expect, it } from "vitest";
import { compile, sourceTree, type ImageDigests } from "../../compiler/index.js";
import { dockerClient } from "../../reconciler/drivers/docker.js";
import type { SlotView } from "../../reconciler/index.js";
import { PROJECT } from "./process-helpers.js";

/**
 * Helpers for the suites that run against a real Docker engine ($DOCKER_HOST,
 * else the default socket). `.ci/run` starts one (`.ci/docker-up.sh`). In CI a
 * missing engine fails the run; elsewhere those suites skip, saying why.
 */

export const DOCKER_HOST = process.env.DOCKER_HOST || "unix:///var/run/docker.sock";
/** HAL0_TEST_RUNNER_IMAGE: another tag of the same build (a stand-in changed in a clone, built without retagging the shared one). */
export const RUNNER_IMAGE = process.env.HAL0_TEST_RUNNER_IMAGE ?? "hal0-runner:local";
/** The model file a slot of dockerViewFor loads by default (outside any test's config folder). */
export const MODEL_FILE = join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");

/**
 * The engine, when one answers. Call at a suite file's top level: without an
 * engine it registers a failing test under CI, or prints a notice elsewhere;
 * gate the suite with `describe.skipIf(docker === undefined)`.
 */
export async function dockerEngine(suite: string): Promise<Dockerode | undefined> {
  let why: string;
  try {
    const docker = dockerClient(DOCKER_HOST);
    await Promise.race([docker.ping(), new Promise((_, reject) => setTimeout(() => reject(new Error("no answer in 5 s")), 5000).unref())]);
    return docker;
  } catch (err) {
    why = (err as Error).message;
  }
  if (process.env.CI) {
    describe(suite, () => {
      it("needs a Docker engine: a required service is missing", () => {
        throw new Error(`no Docker engine answers at ${DOCKER_HOST} (${why}); .ci/run starts one with .ci/docker-up.sh`);
      });
    });
  } else {
    console.warn(`[hal0 tests] SKIPPED ${suite}: no Docker engine answers at ${DOCKER_HOST} (${why}). Start one with \`bash .ci/docker-up.sh\` and export the DOCKER_HOST it prints, then rerun.`);
  }
  return undefined;
}

/** Builds hal0-runner:local with `npm run runner-image`'s script when the engine does not have it yet. */
export async function ensureRunnerImage(docker: Dockerode): Promise<void> {
  const present = await docker.getImage(RUNNER_IMAGE).inspect().then(() => true, () => false);
  if (!present) execFileSync("bash", [join(PROJECT, "scripts/runner-image.sh")], { env: { ...process.env, DOCKER_HOST }, stdio: "inherit" });
}

/** A box id of its own per suite, so suites that run side by side never see each other's containers. */
export function testBoxId(): string {
  return `test-${randomBytes(5).toString("hex")}`;
}

/** Slot names unique to this run: container names are global to the engine. */
export function slotName(stem: string): string {
  return `t${randomBytes(3).toString("hex")}-${stem}`;
}

/**
 * The example box's containers are named after its slots (`hal0-slot-chat`, …), and a
 * container name is the engine's, not a box's: the suites that apply fixtures/box itself on
 * docker (test/cli/docker-apply.test.ts, docs-examples.test.ts's Docker example) take turns
 * through this lock, one per engine. A holder that died is taken over. Returns the release.
 */
export async function exampleBoxTurn(timeoutMs = 600_000): Promise<() => void> {
  // In the host's temporary folder, not the run's: two runs on one engine take turns too.
  const dir = join(process.env.HAL0_TEST_HOST_TMP ?? tmpdir(), `hal0-example-box-on-${createHash("sha256").update(DOCKER_HOST).digest("hex").slice(0, 12)}.lock`);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, "pid"), `${process.pid}\n`);
      return () => rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    let holder = 0; // 0: released meanwhile, or its pid not written yet
    try {
      holder = Number(readFileSync(join(dir, "pid"), "utf8").trim());
    } catch {
      // try again
    }
    if (holder > 0 && !pidAlive(holder)) rmSync(dir, { recursive: true, force: true });
    else if (Date.now() > deadline) throw new Error(`the example box's containers are still another suite's (pid ${holder || "?"}, ${dir}) after ${timeoutMs / 1000} s`);
    else await sleep(250);
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Force-removes every container carrying `hal0.box=<box>`, and `extra` ids; for afterEach/afterAll. */
export async function removeContainers(docker: Dockerode, box: string, extra: readonly string[] = []): Promise<void> {
  const mine = await docker.listContainers({ all: true, filters: { label: [`hal0.box=${box}`] } });
  const ids = [...mine.map((c) => c.Id), ...extra];
  await Promise.all(ids.map((id) => docker.getContainer(id).remove({ force: true }).catch(() => undefined)));
}

export interface DockerViewOptions {
  readonly port: number;
  readonly root: string;
  readonly image?: string;
  readonly env?: Record<string, string>;
  readonly modelPath?: string;
  /** The slot's `[server] extra_args`. */
  readonly extraArgs?: string;
  /** The profile's device_class (default cpu). */
  readonly deviceClass?: "cpu" | "gpu" | "npu";
  /** The image ids the runner probe read (the spec's `observed.image_digest`, as a plan has it). */
  readonly images?: ImageDigests;
}

/** Compiles a one-slot docker tree in memory and takes the slot's view, as the executor would. */
export function dockerViewFor({ port, root, image = RUNNER_IMAGE, env = {}, modelPath = MODEL_FILE, extraArgs, deviceClass = "cpu", images }: DockerViewOptions): SlotView {
  const envToml = `{ ${Object.entries(env).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")} }`;
  const { model, diagnostics } = compile(sourceTree(root, [
    ["hal0.toml", `[slots]\nruntime = "docker"\nport_range_start = 1024\nport_range_end = 65535\n`],
    ["profiles.toml", `[profile.fake]\nimage = ${JSON.stringify(image)}\nflags = "--parallel 1 --threads 2"\ndevice_class = "${deviceClass}"\n`],
    ["models.toml", `[model.tiny]\npath = ${JSON.stringify(modelPath)}\ntype = "llm"\n`],
    ["slots/s.toml", `profile = "fake"\nmodel = "tiny"\nport = ${port}\n\n[tune]\nctx_size = 2048\n\n[server]\nenv = ${envToml}\n${extraArgs === undefined ? "" : `extra_args = ${JSON.stringify(extraArgs)}\n`}`],
  ]), [], images === undefined ? {} : { images });
  expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);
  const s = model!.slots.s!;
  return { profile: s.profile, model: s.model ?? null, type: s.type, port: s.port, device: s.device, tune: s.tune_effective, spec: s.spec, spec_hash: s.spec_hash };
}

/** Wraps `docker.listContainers` with a call counter (the same instance keeps working). */
export function countListCalls(docker: Dockerode): { readonly count: () => number; readonly reset: () => void } {
  let calls = 0;
  const original = docker.listContainers.bind(docker);
  docker.listContainers = ((...args: Parameters<Dockerode["listContainers"]>) => {
    calls++;
    return original(...args);
  }) as Dockerode["listContainers"];
  return { count: () => calls, reset: () => (calls = 0) };
}
