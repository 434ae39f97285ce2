import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type Dockerode from "dockerode";
import { compile, loadTree } from "../compiler/index.js";
import { dockerClient } from "../reconciler/drivers/docker.js";
import { httpStatus } from "../reconciler/drivers/proc.js";

/**
 * The engine's own floor for creating a box's slots: a bare dockerode loop,
 * no hal0 in it. For each slot of the compiled box it creates and starts a
 * container with the slot's image, argv, env, read-only mount of the box
 * (its working dir) and host network, `p` containers' create+start in flight
 * at once; each started container's `GET /health` is polled every 100 ms (as
 * hal0 polls) outside that bound, and the clock stops at the last 200. What
 * it made is removed after each run. `p` = 1, 4, 8, 16, 32 are each run a few
 * times; the fastest is the floor, then measured more at that `p`.
 */

export const FLOOR_PARALLELISMS = [1, 4, 8, 16, 32] as const;

export interface FloorSlot {
  readonly image: string;
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly port: number;
  readonly healthPath: string;
}

/** The compiled box's slots as the floor creates them. */
export async function floorSlots(box: string): Promise<FloorSlot[]> {
  const { model } = compile((await loadTree(box)).tree);
  return Object.values(model!.slots).map((s) => ({ image: s.spec.image!, argv: s.spec.argv, env: s.spec.env, port: s.spec.port, healthPath: s.spec.health_path }));
}

export class Floor {
  private readonly docker: Dockerode;
  private readonly tag = `floor-${randomBytes(4).toString("hex")}`;

  constructor(host: string, private readonly box: string, private readonly slots: readonly FloorSlot[]) {
    this.docker = dockerClient(host);
  }

  /** Milliseconds from the first create until every container's `/health` answered 200, `parallel` create+starts at once. */
  async run(parallel: number): Promise<number> {
    const t0 = performance.now();
    const healthy: Array<Promise<void>> = [];
    const failed = { now: false };
    let next = 0;
    const worker = async () => {
      while (next < this.slots.length) {
        const i = next++;
        const slot = this.slots[i]!;
        const container = await this.docker.createContainer({
          name: `hal0-${this.tag}-${i}`,
          Image: slot.image,
          Cmd: [...slot.argv],
          Env: Object.entries(slot.env).map(([k, v]) => `${k}=${v}`),
          Labels: { "hal0.bench": this.tag },
          WorkingDir: this.box,
          HostConfig: { NetworkMode: "host", Init: true, RestartPolicy: { Name: "no" }, Mounts: [{ Type: "bind", Source: this.box, Target: this.box, ReadOnly: true }] },
        });
        await container.start();
        healthy.push(untilHealthy(slot, failed));
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(parallel, this.slots.length) }, worker));
    } catch (err) {
      failed.now = true; // the polls already running stop at their next turn
      await Promise.allSettled(healthy);
      throw err;
    }
    await Promise.all(healthy);
    return performance.now() - t0;
  }

  /** Removes every container the floor made, and waits until their ports are closed. */
  async clean(): Promise<void> {
    const mine = await this.docker.listContainers({ all: true, filters: { label: [`hal0.bench=${this.tag}`] } });
    // A few at a time, as docker-compose down does, rather than 50 forced removes at once.
    for (let i = 0; i < mine.length; i += 8) {
      await Promise.all(mine.slice(i, i + 8).map((c) => this.docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    }
    for (const slot of this.slots) while ((await httpStatus(slot.port, slot.healthPath, 200)) !== undefined) await sleep(50);
  }
}

async function untilHealthy(slot: FloorSlot, failed: { readonly now: boolean }): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!failed.now && (await httpStatus(slot.port, slot.healthPath, 1000)) !== 200) {
    if (Date.now() > deadline) throw new Error(`floor: port ${slot.port} never answered 200`);
    await sleep(100);
  }
}
