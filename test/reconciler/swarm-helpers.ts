import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import type Dockerode from "dockerode";
import { describe, it } from "vitest";
import { dockerClient } from "../../reconciler/drivers/docker.js";
import { PROJECT } from "./process-helpers.js";

/**
 * Helpers for the suites that run against the three-node Swarm rig
 * (`.ci/swarm-up.sh`: one manager and two workers, each a dockerd in its own
 * network namespace at 10.77.0.N). `.ci/run` starts it; in CI a rig that does
 * not answer fails the run, elsewhere those suites skip, saying how to start it.
 */

export const SWARM_DIR = process.env.HAL0_SWARM_DIR || join(process.env.RUNNER_TEMP || "/tmp", "hal0-swarm");
/** The manager's engine (node 1). */
export const SWARM_MANAGER = `unix://${SWARM_DIR}/n1/docker.sock`;
const SCRIPT = join(PROJECT, ".ci/swarm-up.sh");
const exec = promisify(execFile);

/** Node N's hostname and address on the rig. */
export function rigNode(n: 1 | 2 | 3): { hostname: string; addr: string } {
  return { hostname: `hal0-node-${n}`, addr: `10.77.0.${n}` };
}

/**
 * The manager, when the rig answers as a swarm of three ready nodes. Call at a
 * suite file's top level and gate the suite with `describe.skipIf(manager === undefined)`.
 */
export async function swarmManager(suite: string): Promise<Dockerode | undefined> {
  let why: string;
  try {
    const docker = dockerClient(SWARM_MANAGER);
    const info = (await Promise.race([docker.info(), new Promise((_, reject) => setTimeout(() => reject(new Error("no answer in 5 s")), 5000).unref())])) as { Swarm?: { ControlAvailable?: boolean; Nodes?: number } };
    if (info.Swarm?.ControlAvailable !== true) throw new Error("the engine is not a swarm manager");
    const nodes = (await docker.listNodes()) as { Status?: { State?: string } }[];
    if (nodes.filter((n) => n.Status?.State === "ready").length < 3) throw new Error(`${nodes.length} nodes, not three ready ones`);
    return docker;
  } catch (err) {
    why = (err as Error).message;
  }
  if (process.env.CI) {
    describe(suite, () => {
      it("needs the three-node Swarm rig: a required service is missing", () => {
        throw new Error(`the swarm rig does not answer at ${SWARM_MANAGER} (${why}); .ci/run starts it with .ci/swarm-up.sh up`);
      });
    });
  } else {
    console.warn(`[hal0 tests] SKIPPED ${suite}: the swarm rig does not answer at ${SWARM_MANAGER} (${why}). Start it with \`bash .ci/swarm-up.sh up\` (needs root and the Docker engine of .ci/docker-up.sh), then rerun.`);
  }
  return undefined;
}

/** `.ci/swarm-up.sh stop-node N` / `start-node N`: stops or restarts node N's engine (its data kept). */
export async function rigNodeEngine(action: "stop-node" | "start-node", n: 2 | 3): Promise<void> {
  await exec("bash", [SCRIPT, action, String(n)], { env: { ...process.env, HAL0_SWARM_DIR: SWARM_DIR }, maxBuffer: 8 << 20 });
}

/**
 * Removes what a box's suite left on the swarm (its services, then its
 * secrets, each once no service uses it), whatever `hal0 down` did first.
 */
export async function removeBoxLeftovers(engine: Dockerode, box: string): Promise<void> {
  const left = await engine.listServices({ filters: { label: [`hal0.box=${box}`] } });
  await Promise.all(left.map((s) => engine.getService(s.ID).remove().catch(() => undefined)));
  const secrets = await engine.listSecrets({ filters: { label: [`hal0.box=${box}`] } });
  // A secret is removable once no service uses it (the services above are going).
  for (let i = 0; i < 20; i++) {
    const results = await Promise.all(secrets.map((s) => engine.getSecret(s.ID).remove().then(() => true, () => false)));
    if (results.every(Boolean)) break;
    await new Promise((r) => setTimeout(r, 500));
  }
}
