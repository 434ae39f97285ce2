import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { driverFor } from "../../cli/box.js";
import { main } from "../../cli/index.js";
import { compile, loadTree, type Model } from "../../compiler/index.js";
import { DOCKER_HOST, dockerEngine, ensureRunnerImage, exampleBoxTurn, removeContainers } from "../reconciler/docker-helpers.js";
import { freePort } from "../reconciler/process-helpers.js";
import { startTestServer } from "../server/harness.js";
import { captureIo } from "./helpers.js";

/**
 * The example box under `[slots] runtime = "docker"`, end to end through the
 * CLI against a real engine: its profiles' image is hal0-runner:local (or
 * hal0-fake-runner:local for the runners that are not llama-server). The
 * copy's slot ports are moved to free ones, so this suite never meets the
 * process-runtime suites that run the same box on its own ports.
 */
const SUITE = "hal0 apply / down of the example box on the docker runtime (real Docker engine)";
const docker = await dockerEngine(SUITE);
const BOX = join(import.meta.dirname, "../../fixtures/box");

describe.skipIf(docker === undefined)(SUITE, () => {
  const engine = docker as Dockerode;
  let dir: string;
  let config: string;
  let state: string;
  let release: (() => void) | undefined;

  const run = async (...args: string[]) => {
    const io = captureIo({ DOCKER_HOST }, process.cwd());
    const code = await main([...args, "--config", config, "--state", state], io);
    return { code, out: io.out(), err: io.err() };
  };
  const boxId = (): string => JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).box;
  const containers = () => engine.listContainers({ all: true, filters: { label: ["hal0.managed=true", `hal0.box=${boxId()}`] } });

  beforeAll(async () => {
    await ensureRunnerImage(engine);
    // The box's container names (hal0-slot-chat, …) are the engine's: one suite at a time (docs-examples.test.ts too).
    release = await exampleBoxTurn();
    // The layout a test server reuses (<dir>/config, <dir>/state): slot_logs is read through one below.
    dir = mkdtempSync(join(tmpdir(), "hal0-dbox-"));
    config = join(dir, "config");
    cpSync(BOX, config, { recursive: true });
    state = join(dir, "state");
    mkdirSync(state, { mode: 0o700 });
    const hal0 = readFileSync(join(config, "hal0.toml"), "utf8")
      .replace(/^runtime = "process"$/m, 'runtime = "docker"')
      .replace(/^port_range_start = \d+$/m, "port_range_start = 1024")
      .replace(/^port_range_end = \d+$/m, "port_range_end = 65535");
    expect(hal0).toContain('runtime = "docker"');
    writeFileSync(join(config, "hal0.toml"), hal0);
    for (const file of readdirSync(join(config, "slots"))) {
      const path = join(config, "slots", file);
      const port = await freePort();
      writeFileSync(path, readFileSync(path, "utf8").replace(/^port = \d+$/m, `port = ${port}`));
    }
  }, 720_000);

  afterAll(async () => {
    if (state !== undefined) {
      await run("down");
      await removeContainers(engine, boxId());
    }
    release?.();
  });

  async function desired(): Promise<Model> {
    return compile((await loadTree(config)).tree).model!;
  }

  it("apply --yes brings up every enabled slot as a container: healthy, labelled, running its spec's argv", async () => {
    const { code, out, err } = await run("apply", "--yes");
    expect(code, out + err).toBe(0);
    expect(out).toMatch(/Apply complete: 8 created, 0 replaced, 0 deleted, 1 updated, 0 failed\./);
    const model = await desired();
    const enabled = Object.values(model.slots).filter((s) => s.enabled);
    expect(enabled).toHaveLength(8);
    const listed = await containers();
    expect(listed.map((c) => c.Names[0]).sort()).toEqual(enabled.map((s) => `/hal0-slot-${s.name}`).sort());
    for (const c of listed) {
      expect(c.State, c.Names[0]).toBe("running");
      // llama-server's stand-in, or the generic one for the speech and image slots (not llama-server: not checked).
      expect(["hal0-runner:local", "hal0-fake-runner:local"], c.Names[0]).toContain(c.Image);
      expect(c.HostConfig.NetworkMode).toBe("host");
    }
    for (const slot of enabled) {
      expect(slot.spec.image, slot.name).toBe(["speech", "whisper", "image", "npu-assist"].includes(slot.name) ? "hal0-fake-runner:local" : "hal0-runner:local");
      expect(listed.find((c) => c.Names[0] === `/hal0-slot-${slot.name}`)!.Image, slot.name).toBe(slot.spec.image);
      expect((await fetch(`http://127.0.0.1:${slot.port}/health`)).status, slot.name).toBe(200);
      const props = (await (await fetch(`http://127.0.0.1:${slot.port}/props`)).json()) as { argv: string[] };
      expect(props.argv, slot.name).toEqual(slot.spec.argv);
    }
  });

  it("plans nothing right after (the record comes back from the labels)", async () => {
    const { code, out } = await run("plan", "--detailed-exitcode");
    expect(code, out).toBe(0);
  });

  it("slot_logs reads a docker slot's container log back (the last lines, whether more precede them), secrets masked; a slot with no container has none", async () => {
    const chat = (await desired()).slots.chat!;
    const key = `sk-${"k".repeat(40)}`;
    expect((await fetch(`http://127.0.0.1:${chat.port}/health?api_key=${key}`)).status).toBe(200); // the runner logs each request's URL
    const s = await startTestServer({ reuse: { dir }, keep: true, extra: { driverFor: (model) => driverFor(model, state, { DOCKER_HOST }) } });
    try {
      const tail = await s.call("GET", "/api/slots/chat/logs?lines=2");
      expect(tail.status, JSON.stringify(tail.body)).toBe(200);
      expect(tail.body).toMatchObject({ name: "chat", runtime: "docker", source: "hal0-slot-chat", file: null, exists: true, truncated: true, size_bytes: null });
      expect(tail.body.lines).toHaveLength(2);
      expect(tail.body.lines[1]).toMatch(/ GET \/health\?api_key=.* 200$/);
      expect(JSON.stringify(tail.body)).not.toContain(key);
      const whole = await s.call("GET", "/api/slots/chat/logs?lines=2000");
      expect(whole.body.truncated).toBe(false);
      expect(whole.body.lines[0]).toMatch(/^fake-llama-server: pid \d+ listening on http:\/\/127\.0\.0\.1:/);
      // logs_tail's ?slot= reads the same log.
      const beside = await s.call("GET", "/api/logs?slot=chat&lines=2");
      expect(beside.body.slot).toMatchObject({ name: "chat", source: "hal0-slot-chat", file: null, exists: true, lines: tail.body.lines });
      // A disabled slot has no container: nothing to read, said so.
      const none = await s.call("GET", "/api/slots/vision/logs");
      expect(none.status).toBe(200);
      expect(none.body).toMatchObject({ name: "vision", exists: false, lines: [] });
    } finally {
      await s.close();
    }
  });

  it("restores a container removed behind hal0's back on the next apply", async () => {
    const victim = (await containers()).find((c) => c.Names[0] === "/hal0-slot-chat")!;
    await engine.getContainer(victim.Id).remove({ force: true });
    const plan = await run("plan");
    expect(plan.out).toMatch(/^\+ slot\.chat \(not_running\)/m);
    const { code, out } = await run("apply", "--yes");
    expect(code, out).toBe(0);
    expect((await containers()).filter((c) => c.State === "running")).toHaveLength(8);
  });

  it("down leaves no hal0 container of this box", async () => {
    const { code, out } = await run("down");
    expect(code, out).toBe(0);
    expect(await containers()).toEqual([]);
  });
});
