import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { DOCKER_HOST, dockerEngine, ensureRunnerImage, removeContainers } from "../reconciler/docker-helpers.js";
import { alive, freePort, PROJECT, RUNNER } from "../reconciler/process-helpers.js";
import { captureIo, healthWithin } from "./helpers.js";

/**
 * `[slots] runtime` changed under running slots: the slots hal0 started on
 * the former runtime (the inventory says which) are replaced — stopped where
 * they run, started on the new one — and `hal0 down` stops them where they
 * run, rather than leaving them running and forgotten.
 */
const SUITE = "docker slots moved under hal0: [slots] runtime changed, a container made again by hand (real Docker engine)";
const docker = await dockerEngine(SUITE);
const TAG = Math.random().toString(36).slice(2, 8);
const SLOTS = [`rs-a-${TAG}`, `rs-b-${TAG}`];

describe.skipIf(docker === undefined)(SUITE, () => {
  const engine = docker as Dockerode;
  const base = mkdtempSync(join(tmpdir(), "hal0-runtime-switch-"));
  const config = join(base, "box");
  const state = join(base, "state");
  const ports: number[] = [];

  const run = async (...args: string[]) => {
    const io = captureIo({ DOCKER_HOST });
    const code = await main([...args, "--config", config, "--state", state], io);
    return { code, out: io.out(), err: io.err() };
  };
  const runtime = (name: "process" | "docker") =>
    writeFileSync(join(config, "hal0.toml"), `[slots]\nruntime = "${name}"\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
  const boxId = (): string => JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).box;
  const running = async () => (await engine.listContainers({ filters: { label: [`hal0.box=${boxId()}`] } })).map((c) => c.Names[0]).sort();
  const inventoryRuntimes = () => Object.values(JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).slots as Record<string, { runtime: string }>).map((s) => s.runtime);

  beforeAll(async () => {
    await ensureRunnerImage(engine);
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    runtime("docker");
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
    for (const name of SLOTS) {
      const port = await freePort();
      ports.push(port);
      writeFileSync(join(config, "slots", `${name}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n`);
    }
  }, 120_000);

  afterAll(async () => {
    for (const name of SLOTS) for (const r of await markedRunners(state, name)) process.kill(r.pid, "SIGKILL");
    await removeContainers(engine, boxId());
  });

  it("docker → process: the plan replaces each slot (no port held by a stranger), apply moves them, no container is left", async () => {
    expect((await run("apply", "--yes")).code).toBe(0);
    expect(await running()).toEqual(SLOTS.map((n) => `/hal0-slot-${n}`).sort());
    runtime("process");
    const plan = await run("plan", "--json");
    expect(plan.code, plan.err).toBe(0);
    const doc = JSON.parse(plan.out);
    for (const name of SLOTS) expect(doc.changes.find((c: any) => c.address === `slot.${name}`)).toMatchObject({ action: "replace", reason: "spec_changed" });
    expect(doc.warnings.filter((w: any) => w.code === "slot.port_in_use")).toEqual([]);
    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    expect(await running()).toEqual([]);
    for (const port of ports) expect(await healthWithin(port, 10_000)).toBe(200);
    expect(inventoryRuntimes()).toEqual(["process", "process"]);
    expect((await run("plan", "--detailed-exitcode")).code).toBe(0);
  });

  it("process → docker, then down before any apply: down stops the runners where they run", async () => {
    expect(inventoryRuntimes()).toEqual(["process", "process"]);
    const pids = SLOTS.map((name) => JSON.parse(readFileSync(join(state, "slots", name, "runtime.json"), "utf8")).pid as number);
    runtime("docker");
    const down = await run("down");
    expect(down.code, down.out + down.err).toBe(0);
    expect(down.out).toMatch(/Down complete: 2 stopped, 0 failed\./);
    for (const pid of pids) expect(await alive(pid)).toBe(false);
    expect(await running()).toEqual([]);
    expect(JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).slots).toEqual({});
  });

  /**
   * The box applied on docker, then slot `name`'s container removed and made
   * again by hand from what it was (`change` edits the create options: another
   * command, label or image) and started. Returns what it was.
   */
  async function remadeByHand(name: string, change: (info: any) => Record<string, unknown>, before?: (original: ReturnType<typeof engine.getContainer>) => Promise<void>) {
    runtime("docker");
    expect((await run("apply", "--yes")).code).toBe(0);
    const original = engine.getContainer(`hal0-slot-${name}`);
    const info = await original.inspect();
    await before?.(original);
    await original.remove({ force: true });
    const handmade = await engine.createContainer({ name: `hal0-slot-${name}`, Image: info.Config.Image, Cmd: info.Config.Cmd, Env: info.Config.Env, Labels: info.Config.Labels, WorkingDir: info.Config.WorkingDir, HostConfig: info.HostConfig, ...change(info) });
    await handmade.start();
    return { info, handmade };
  }

  /** Slot `name` reads as drifted (plan: replace; drift: exit 2), and apply replaces it. */
  async function driftedAndReplaced(name: string): Promise<void> {
    const plan = await run("plan", "--json");
    expect(plan.code, plan.err).toBe(0);
    expect(JSON.parse(plan.out).changes.find((c: any) => c.address === `slot.${name}`)).toMatchObject({ action: "replace", reason: "drifted" });
    const drift = await run("drift");
    expect(drift.code).toBe(2);
    expect(drift.out).toContain(`slot.${name} runs a spec hal0 did not apply`);
    expect((await run("apply", "--yes")).code).toBe(0);
  }

  it("a container made again by hand with hal0's labels copied but another command reads as drifted: plan replaces it (drift = enforce)", async () => {
    const name = SLOTS[0]!;
    // The same labels, image and mounts; one argv word changed.
    const { info } = await remadeByHand(name, (was) => {
      const cmd = was.Config.Cmd.map((w: string) => (w === name ? "HANDMADE" : w));
      const alias = was.Config.Cmd.indexOf("--alias");
      if (alias >= 0) cmd[alias + 1] = "HANDMADE";
      return { Cmd: cmd };
    });
    await driftedAndReplaced(name);
    const again = await engine.getContainer(`hal0-slot-${name}`).inspect();
    expect(again.Config.Cmd).toEqual(info.Config.Cmd);
    expect((await run("down")).code).toBe(0);
  });

  it("a container made again by hand without a readable hal0.view label is drift: reported under warn, replaced under enforce (not held as a stranger on its own port)", async () => {
    const name = SLOTS[0]!;
    const { info } = await remadeByHand(name, (was) => ({ Labels: { ...was.Config.Labels, "hal0.view": "{not json" } }));
    expect(await healthWithin(ports[0]!, 10_000)).toBe(200);
    const settings = readFileSync(join(config, "hal0.toml"), "utf8");
    writeFileSync(join(config, "hal0.toml"), `${settings}[reconcile]\ndrift = "warn"\n`);
    const warned = JSON.parse((await run("plan", "--json")).out);
    expect(warned.changes.find((c: any) => c.address === `slot.${name}`)).toMatchObject({ action: "no-op", reason: "drifted" });
    expect(warned.warnings.filter((w: any) => w.code === "slot.port_in_use")).toEqual([]);
    const drift = await run("drift");
    expect(drift.code).toBe(2);
    expect(drift.out).toContain(`slot.${name} runs a spec hal0 did not apply; drift = "warn": reported only`);
    writeFileSync(join(config, "hal0.toml"), settings);
    const plan = JSON.parse((await run("plan", "--json")).out);
    expect(plan.changes.find((c: any) => c.address === `slot.${name}`)).toMatchObject({ action: "replace", reason: "drifted" });
    expect((await run("apply", "--yes")).code).toBe(0);
    expect((await engine.getContainer(`hal0-slot-${name}`).inspect()).Config.Labels["hal0.view"]).toBe(info.Config.Labels["hal0.view"]);
    expect((await run("drift")).code).toBe(0);
    expect((await run("down")).code).toBe(0);
  });

  it("a container made again by hand with hal0's labels and command copied but another image reads as drifted: plan replaces it (drift = enforce)", async () => {
    const name = SLOTS[1]!;
    // Another image (another id) with the same entrypoint: the original container committed.
    const other = `hal0-test-other-${TAG}:1`;
    try {
      const { info, handmade } = await remadeByHand(name, () => ({ Image: other }), async (original) => void (await original.commit({ repo: `hal0-test-other-${TAG}`, tag: "1" })));
      expect((await handmade.inspect()).Image).not.toBe(info.Image);
      await driftedAndReplaced(name);
      expect((await engine.getContainer(`hal0-slot-${name}`).inspect()).Image).toBe(info.Image);
      expect((await run("drift")).code).toBe(0);
      expect((await run("down")).code).toBe(0);
    } finally {
      await engine.getImage(other).remove({ force: true }).catch(() => undefined);
    }
  });
});

