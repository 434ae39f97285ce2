import { randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerClient } from "../../reconciler/drivers/docker.js";
import { PROJECT } from "../reconciler/process-helpers.js";
import { SWARM_DIR, SWARM_MANAGER, swarmManager, removeBoxLeftovers } from "../reconciler/swarm-helpers.js";
import { boxCommand } from "./helpers.js";

/**
 * A slot's service changing under hal0, on the three-node rig
 * (.ci/swarm-up.sh). Swarm's own restart of a runner that exited: Swarm
 * waits its restart delay, then starts the service's next task; meanwhile
 * the slot is starting, not missing, so neither a plan nor a sweep
 * re-creates its service. A service removed by hand while hal0 starts it.
 */
const SUITE = "the swarm runtime while Swarm restarts a runner or a service is removed by hand (real engines in network namespaces)";
const manager = await swarmManager(SUITE);

const SLOT = `r${randomBytes(2).toString("hex")}-crash`;
const SERVICE = `hal0-slot-${SLOT}`;
const PORT = 8640;

describe.skipIf(manager === undefined)(SUITE, () => {
  const engine = manager as Dockerode;
  const node2 = dockerClient(`unix://${SWARM_DIR}/n2/docker.sock`);
  const base = mkdtempSync(join(tmpdir(), "hal0-swarm-restart-"));
  const config = join(base, "box");
  const state = join(base, "state");
  const env = { DOCKER_HOST: "unix:///nonexistent.sock", HAL0_SWARM_DIR: SWARM_DIR };

  const run = boxCommand(config, state, env);
  const tasks = async () => (await engine.listTasks({ filters: { service: [SERVICE] } })) as { ID: string; DesiredState: string; Status: { State: string } }[];
  /** Kills the slot's runner on its node, as a crash would, and waits for the task Swarm holds for its restart delay. */
  const crash = async () => {
    const [container] = await node2.listContainers({ filters: { label: [`com.docker.swarm.service.name=${SERVICE}`] } });
    expect(container, "the slot's container on node 2").toBeDefined();
    await node2.getContainer(container!.Id).kill();
    for (let i = 0; i < 200; i++) {
      if ((await tasks()).some((t) => t.DesiredState === "ready")) return;
      await sleep(25);
    }
    throw new Error(`Swarm made no task for its restart delay: ${JSON.stringify(await tasks())}`);
  };
  const running = async () => {
    for (let i = 0; i < 120; i++) {
      if ((await tasks()).some((t) => t.DesiredState === "running" && t.Status.State === "running")) return;
      await sleep(250);
    }
    throw new Error(`the slot's task never ran again: ${JSON.stringify(await tasks())}`);
  };

  beforeAll(() => {
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    writeFileSync(join(config, "hal0.toml"), `[slots]\nruntime = "swarm"\ndocker_host = ${JSON.stringify(SWARM_MANAGER)}\nport_range_start = 8600\nport_range_end = 8699\nhealth_timeout_s = 60\nstop_grace_s = 2\n\n[reconcile]\ndrift = "enforce"\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nflags = "--parallel 1 --threads 1"\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\ntype = "llm"\n`);
    writeFileSync(join(config, "slots", `${SLOT}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${PORT}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "200" }\n[placement]\nnode = "hal0-node-2"\n`);
  });

  afterAll(async () => {
    await run("down");
    let box = "";
    try {
      box = JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).box;
    } catch {
      return;
    }
    await removeBoxLeftovers(engine, box);
  }, 120_000);

  it("a runner that exits: through Swarm's restart delay the plan leaves the slot to Swarm (starting) and a sweep keeps its service; Swarm runs it again", async () => {
    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    const { ID: id } = await engine.getService(SERVICE).inspect();

    // Twice: each plan and sweep reads the slot while Swarm holds its next task for the restart delay.
    for (let round = 0; round < 2; round++) {
      await crash();
      const [plan, sweep] = await Promise.all([run("plan", "--json"), run("reconcile", "--once", "--json")]);
      const change = JSON.parse(plan.out).changes.find((c: any) => c.address === `slot.${SLOT}`);
      expect([round, change.action, change.reason], plan.out).toEqual([round, "no-op", "starting"]);
      expect(sweep.code, sweep.out + sweep.err).toBe(0);
      expect([round, JSON.parse(sweep.out).outcome], sweep.out).toEqual([round, "nothing_to_do"]);
      expect((await engine.getService(SERVICE).inspect()).ID, `round ${round}: the service Swarm restarts is the one hal0 made`).toBe(id);
      await running();
    }
    // Every task Swarm made is the one service's: two exited, one runs.
    const all = await tasks();
    expect(all.filter((t) => t.Status.State === "failed")).toHaveLength(2);
    expect(all.filter((t) => t.Status.State === "running")).toHaveLength(1);
    for (let i = 0; i < 40; i++) {
      const status = JSON.parse((await run("status", "--json")).out);
      if (status.slots[0]?.state === "ready") break;
      await sleep(500);
    }
    const status = JSON.parse((await run("status", "--json")).out);
    expect(status.slots.map((s: any) => [s.name, s.state, s.node])).toEqual([[SLOT, "ready", "hal0-node-2"]]);
  }, 180_000);

  it("a service removed by hand while an apply waits for its runner: the start fails at once saying so, not after the health timeout, and the inventory does not keep it", async () => {
    const slow = `${SLOT.replace(/-crash$/, "")}-slow`;
    writeFileSync(join(config, "slots", `${slow}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${PORT + 1}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "600000" }\n[placement]\nnode = "hal0-node-2"\n`);
    const applying = run("apply", "--yes");
    // Its runner runs and loads (503): then the service is removed behind hal0's back.
    const svc = `hal0-slot-${slow}`;
    for (let i = 0; i < 200 && !(await engine.listTasks({ filters: { service: [svc], "desired-state": ["running"] } }).then((t: any[]) => t.some((x) => x.Status.State === "running"), () => false)); i++) await sleep(100);
    await engine.getService(svc).remove();
    const applied = await applying;
    expect(applied.code).toBe(1);
    expect(applied.out).toContain(`slot.spawn_failed: slot ${slow}: service ${svc} was removed (docker service rm) while hal0 waited for its runner to answer GET /health; its runner went with it`);
    expect(applied.out).not.toContain("slot.health_failed");
    expect(Object.keys(JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).slots)).toEqual([SLOT]);
    rmSync(join(config, "slots", `${slow}.toml`));
  }, 180_000);
});
