import type { Model } from "../compiler/index.js";
import { ProcessDriver } from "../reconciler/drivers/process.js";
import { StateStore } from "../reconciler/state.js";
import type { HermesCredentials, SlotDriver } from "../reconciler/index.js";
import { stateHermesCredentials } from "../server/identity/hermes-credentials.js";
import { CliError, type CliIo } from "./io.js";
import { compileOrThrow, stateDir } from "./paths.js";

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
  const { root, model } = await compileOrThrow(flags, io);
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
    throw new CliError("runtime.unavailable", `[slots] runtime = "docker": the engine at ${host} does not answer (${(err as Error).message}); start it, or set [slots] docker_host or DOCKER_HOST`);
  }
  // Every container carries the box id (hal0.box); it is stable without a write, so planning stays read-only.
  const box = await new StateStore(dir).boxId();
  return new DockerDriver({ docker, box, stateDir: dir, stopGraceS: slots.stop_grace_s, pull: slots.pull });
}
