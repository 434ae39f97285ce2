import { compile, loadTree, ConfigNotFoundError, type Model } from "../compiler/index.js";
import { ProcessDriver } from "../reconciler/drivers/process.js";
import { StateStore } from "../reconciler/state.js";
import type { HermesCredentials, SlotDriver } from "../reconciler/index.js";
import { stateHermesCredentials } from "../server/identity/hermes-credentials.js";
import { formatDiagnostic, formatSummary } from "./format-diagnostics.js";
import { InvalidConfigError, UsageError, type CliIo } from "./io.js";
import { configDir, stateDir } from "./paths.js";

/** A compiled box with its runtime driver and state folder: what plan, apply, status and down work on. */
export interface Box {
  readonly root: string;
  readonly model: Model;
  readonly driver: SlotDriver;
  readonly state: StateStore;
  /** The agent tokens hal0 hands on to Hermes profiles, in the state folder's token store (pass to observe and executePlan). */
  readonly hermesCredentials: HermesCredentials;
}


/**
 * Loads and compiles the config folder and builds the runtime for it. This is
 * a composition root: the only place the CLI constructs real drivers.
 */
export async function openBox(flags: { config?: string; state?: string }, io: CliIo): Promise<Box> {
  const root = configDir(flags.config, io.env, io.cwd);
  const loaded = await loadTree(root).catch((err: unknown) => {
    if (err instanceof ConfigNotFoundError) throw new UsageError(`config folder not found: ${root}`);
    throw err;
  });
  const { model, diagnostics } = compile(loaded.tree, loaded.diagnostics);
  const text = { root, cwd: io.cwd, color: !io.env.NO_COLOR && io.stderr.isTTY === true, texts: loaded.tree.files };
  const errors = diagnostics.filter((d) => d.severity === "error");
  if (!model) {
    for (const d of errors) io.stderr.write(`${formatDiagnostic(d, text)}\n\n`);
    io.stderr.write(`${formatSummary(errors.length, diagnostics.length - errors.length, root, text)}\n`);
    throw new InvalidConfigError(`${root} has ${errors.length} error(s)`);
  }
  const state = new StateStore(stateDir(flags.state, io.env, io.cwd));
  return { root, model, driver: await driverFor(model, state.dir, io.env), state, hermesCredentials: stateHermesCredentials(state.dir) };
}

const DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock";

/**
 * The runtime `[slots] runtime` names. Docker: the engine at `[slots]
 * docker_host`, else $DOCKER_HOST, else the default socket, which must answer;
 * dockerode is loaded only for a docker box (it takes ~0.3 s to import).
 */
export async function driverFor(model: Model, dir: string, env: CliIo["env"] = process.env): Promise<SlotDriver> {
  const slots = model.settings.slots;
  if (slots.runtime !== "docker") return new ProcessDriver({ stateDir: dir });
  const { DockerDriver, dockerClient } = await import("../reconciler/drivers/docker.js");
  const host = slots.docker_host || env.DOCKER_HOST || DEFAULT_DOCKER_HOST;
  let docker: ReturnType<typeof dockerClient>;
  try {
    docker = dockerClient(host);
    await docker.ping();
  } catch (err) {
    throw new UsageError(`[slots] runtime = "docker": the engine at ${host} does not answer (${(err as Error).message}); start it, or set [slots] docker_host or DOCKER_HOST`);
  }
  // Every container carries the box id (hal0.box); it is stable without a write, so planning stays read-only.
  const box = await new StateStore(dir).boxId();
  return new DockerDriver({ docker, box, stateDir: dir, stopGraceS: slots.stop_grace_s, pull: slots.pull });
}
