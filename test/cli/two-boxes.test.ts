import { randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Dockerode from "dockerode";
import { afterAll, describe, expect, it } from "vitest";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { DOCKER_HOST, dockerEngine, ensureRunnerImage, removeContainers } from "../reconciler/docker-helpers.js";
import { alive } from "../reconciler/process-helpers.js";
import { boxCommand, emptyServeBox, startServe, writeFakeBox } from "./helpers.js";

/**
 * Two hal0 boxes on one host, on the process runtime: each its own config
 * and state folder. One box's commands never touch the other's runners, also
 * when one box is a copy of the other (`cp -a`, its runtime records with it).
 */
const base = mkdtempSync(join(tmpdir(), "hal0-two-boxes-"));
const states: string[] = [];

afterAll(async () => {
  for (const state of states) for (const r of await markedRunners(state, "tb")) process.kill(r.pid, "SIGKILL");
  rmSync(base, { recursive: true, force: true });
});

const recordedPid = (state: string): number => JSON.parse(readFileSync(join(state, "slots", "tb", "runtime.json"), "utf8")).pid;

describe("two boxes on one host (process runtime)", () => {
  it("a box copied with cp -a, state and all, does not take the original's runners: its status shows them not running, its down stops none", async () => {
    const original = { config: join(base, "a", "box"), state: join(base, "a", "state") };
    states.push(original.state);
    await writeFakeBox(original.config, ["tb"]);
    const a = boxCommand(original.config, original.state);
    expect((await a("apply", "--yes")).code).toBe(0);
    const pid = recordedPid(original.state);

    cpSync(join(base, "a"), join(base, "c"), { recursive: true, preserveTimestamps: true });
    const copy = { config: join(base, "c", "box"), state: join(base, "c", "state") };
    states.push(copy.state);
    expect(recordedPid(copy.state)).toBe(pid); // the copy's record names the original's runner
    const c = boxCommand(copy.config, copy.state);

    const status = await c("status", "tb");
    expect(status.out).toContain(`pid ${pid} is the runner of the state folder ${original.state}, not of this one`);
    expect(status.out).not.toMatch(/\bready\b/);

    const down = await c("down");
    expect(down.code, down.out + down.err).toBe(0);
    expect(await alive(pid)).toBe(true);
    const still = await a("status");
    expect(still.out).toMatch(new RegExp(`tb\\s+ready\\s+${pid}\\b`));

    expect((await a("down")).code).toBe(0);
    expect(await alive(pid)).toBe(false);
  });

  it("two boxes with the same slot on the same port: the second's plan and apply name the first box's runner, never a process hal0 did not start", async () => {
    const first = { config: join(base, "p1", "box"), state: join(base, "p1", "state") };
    const second = { config: join(base, "p2", "box"), state: join(base, "p2", "state") };
    states.push(first.state, second.state);
    const [port] = await writeFakeBox(first.config, ["tb"]);
    await writeFakeBox(second.config, ["tb"]);
    writeFileSync(join(second.config, "slots", "tb.toml"), readFileSync(join(first.config, "slots", "tb.toml"), "utf8"));
    const one = boxCommand(first.config, first.state);
    const two = boxCommand(second.config, second.state);
    expect((await one("apply", "--yes")).code).toBe(0);
    const pid = recordedPid(first.state);
    const words = `slot \`tb\`'s runner of another hal0 box on this host (its state folder ${first.state}), which this box leaves alone`;

    const plan = await two("plan");
    expect(plan.out).toContain(`! slot.tb: slot.port_in_use: port ${port} is held by pid ${pid} (`);
    expect(plan.out).toContain(words);
    expect(plan.out).not.toContain("which hal0 did not start");
    const apply = await two("apply", "--yes");
    expect(apply.code).toBe(1);
    expect(apply.out).toContain(`slot.port_in_use: port ${port} is already in use by pid ${pid} (`);
    expect(apply.out).toContain(words);
    expect((await two("down")).code).toBe(0);
    expect(await alive(pid)).toBe(true);
    expect((await one("down")).code).toBe(0);
  });

  it("a box copied with cp -a while its hal0 serve runs: the copy's serve starts (the copied serve.lock and reconcile.lock are the original's), the original's keeps its lock", async () => {
    const original = emptyServeBox("hal0-two-serve-");
    const first = await startServe(original.config, original.state);
    const lock = readFileSync(join(original.state, "serve.lock"), "utf8");
    const copy = { config: join(base, "served-copy", "box"), state: join(base, "served-copy", "state") };
    cpSync(original.config, copy.config, { recursive: true });
    cpSync(original.state, copy.state, { recursive: true });
    expect(JSON.parse(readFileSync(join(copy.state, "serve.lock"), "utf8")).pid).toBe(first.child.pid);
    const second = await startServe(copy.config, copy.state);
    expect(JSON.parse(readFileSync(join(copy.state, "serve.lock"), "utf8")).pid).toBe(second.child.pid);
    expect(JSON.parse(readFileSync(join(copy.state, "reconcile.lock"), "utf8")).pid).toBe(second.child.pid);
    expect(readFileSync(join(original.state, "serve.lock"), "utf8")).toBe(lock);
    expect(first.child.exitCode).toBe(null);
    for (const { child } of [first, second]) {
      const exited = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      await exited;
    }
  }, 60_000);

  it("plan and apply with another box's state folder (a --state pointed at the wrong box) say which config folder it was last applied from", async () => {
    const first = { config: join(base, "w1", "box"), state: join(base, "w1", "state") };
    const second = { config: join(base, "w2", "box"), state: join(base, "w2", "state") };
    states.push(first.state);
    await writeFakeBox(first.config, ["tb"]);
    await writeFakeBox(second.config, ["other"]);
    expect((await boxCommand(first.config, first.state)("apply", "--yes")).code).toBe(0);
    expect((await boxCommand(first.config, first.state)("plan")).err).not.toContain("was last applied from");

    const wrong = boxCommand(second.config, first.state);
    const plan = await wrong("plan");
    expect(plan.err).toContain(`note: the state folder ${first.state} was last applied from the config folder ${first.config}, not ${second.config}: this plan converges its box to ${second.config}, stopping the slots only ${first.config} names; if that is another box, give this one its own --state`);
    expect(plan.out).toMatch(/^- slot\.tb \(/m);
    const apply = await wrong("apply");
    expect(apply.err).toContain(`was last applied from the config folder ${first.config}, not ${second.config}`);
    expect(apply.code).toBe(64); // no --yes and no terminal to ask: nothing is applied
    expect((await boxCommand(first.config, first.state)("down")).code).toBe(0);
  });

  it("an inventory from a hal0 before it named its folder gets the name at the next apply, even one with nothing to do", async () => {
    const config = join(base, "old", "box");
    const state = join(base, "old", "state");
    states.push(state);
    await writeFakeBox(config, ["tb"]);
    const run = boxCommand(config, state);
    expect((await run("apply", "--yes")).code).toBe(0);
    const file = join(state, "inventory.json");
    const { state: _folder, config: _config, ...older } = JSON.parse(readFileSync(file, "utf8"));
    writeFileSync(file, JSON.stringify(older));
    const again = await run("apply", "--yes");
    expect(again.out).toContain("No changes");
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ ...older, state, config });
    expect((await run("down")).code).toBe(0);
  });
});

const SUITE = "two boxes on one host (docker runtime, real Docker engine)";
const docker = await dockerEngine(SUITE);

describe.skipIf(docker === undefined)(SUITE, () => {
  const engine = docker as Dockerode;
  const boxIdOf = (state: string): string => JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).box;
  const ids: string[] = [];
  afterAll(async () => {
    for (const id of ids) await removeContainers(engine, id);
  });

  it("a box copied with cp -a, state and all, gets a box id of its own: its status shows the slot not running, its down removes none of the original's containers", async () => {
    await ensureRunnerImage(engine);
    const slot = `h0bx-${randomBytes(3).toString("hex")}`; // container names are the engine's: one unique to this run
    const original = { config: join(base, "da", "box"), state: join(base, "da", "state") };
    const [port] = await writeFakeBox(original.config, [slot]);
    writeFileSync(join(original.config, "hal0.toml"), `[slots]\nruntime = "docker"\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
    writeFileSync(join(original.config, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nrunner = ["hal0-fake-llama-server"]\ndevice_class = "cpu"\n`);
    const a = boxCommand(original.config, original.state, { DOCKER_HOST });
    const applied = await a("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    const id = boxIdOf(original.state);
    ids.push(id);
    const running = async () => (await engine.listContainers({ filters: { label: [`hal0.box=${id}`], status: ["running"] } })).map((c) => c.Names[0]);
    expect(await running()).toEqual([`/hal0-slot-${slot}`]);

    cpSync(join(base, "da"), join(base, "dc"), { recursive: true, preserveTimestamps: true });
    const copy = { config: join(base, "dc", "box"), state: join(base, "dc", "state") };
    const c = boxCommand(copy.config, copy.state, { DOCKER_HOST });
    const status = await c("status");
    expect(status.out).toMatch(new RegExp(`${slot}\\s+offline\\s+-\\s+${port}\\b`));

    const down = await c("down");
    expect(down.code, down.out + down.err).toBe(0);
    expect(await running()).toEqual([`/hal0-slot-${slot}`]);
    // Its first write gives the copy its own id; the original keeps its own.
    expect(boxIdOf(copy.state)).not.toBe(id);
    ids.push(boxIdOf(copy.state));
    expect(boxIdOf(original.state)).toBe(id);
    expect((await a("status")).out).toMatch(new RegExp(`${slot}\\s+ready\\b`));

    expect((await a("down")).code).toBe(0);
    expect(await running()).toEqual([]);
  }, 120_000);

  it("two boxes with slots on the same port: the second's plan and apply name the first box's container and box id, never a process hal0 did not start", async () => {
    await ensureRunnerImage(engine);
    const slot = `h0bx-${randomBytes(3).toString("hex")}`;
    const other = `${slot}-2`;
    const first = { config: join(base, "d1", "box"), state: join(base, "d1", "state") };
    const second = { config: join(base, "d2", "box"), state: join(base, "d2", "state") };
    const [port] = await writeFakeBox(first.config, [slot]);
    await writeFakeBox(second.config, [other]);
    for (const box of [first, second]) {
      writeFileSync(join(box.config, "hal0.toml"), `[slots]\nruntime = "docker"\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
      writeFileSync(join(box.config, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nrunner = ["hal0-fake-llama-server"]\ndevice_class = "cpu"\n`);
    }
    writeFileSync(join(second.config, "slots", `${other}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n`);
    const one = boxCommand(first.config, first.state, { DOCKER_HOST });
    const two = boxCommand(second.config, second.state, { DOCKER_HOST });
    const applied = await one("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    const id = boxIdOf(first.state);
    ids.push(id);
    const words = `container hal0-slot-${slot}, slot \`${slot}\`'s runner of another hal0 box on this host (its box ${id}), which this box leaves alone`;

    const plan = await two("plan");
    expect(plan.out).toContain(`! slot.${other}: slot.port_in_use: port ${port} is held by ${words}`);
    const apply = await two("apply", "--yes");
    expect(apply.code).toBe(1);
    expect(apply.out).toContain(`slot.port_in_use: port ${port} is already in use by ${words}`);
    ids.push(boxIdOf(second.state));
    expect((await one("down")).code).toBe(0);
  }, 120_000);
});
