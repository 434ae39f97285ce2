import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { DOCKER_HOST, dockerEngine, ensureRunnerImage, removeContainers } from "../reconciler/docker-helpers.js";
import { freePort, PROJECT, RUNNER } from "../reconciler/process-helpers.js";
import { applyKilledAfter, captureIo, healthWithin } from "./helpers.js";

/**
 * `kill -9` of `hal0 apply` at random moments (creating, replacing), then a
 * fresh apply: the box converges with exactly one container per slot, no
 * duplicate and no orphan, ten times over. A seeded PRNG picks the moments,
 * so a failure can be replayed.
 */
const SUITE = "kill -9 of hal0 apply mid-way, then apply again (real Docker engine)";
const docker = await dockerEngine(SUITE);
const SLOTS = ["crash-0", "crash-1", "crash-2", "crash-3"];

describe.skipIf(docker === undefined)(SUITE, () => {
  const engine = docker as Dockerode;
  const base = mkdtempSync(join(tmpdir(), "hal0-crash-"));
  const config = join(base, "box");
  const state = join(base, "state");
  const ports: number[] = [];

  beforeAll(async () => {
    await ensureRunnerImage(engine);
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    writeFileSync(join(config, "hal0.toml"), `[slots]\nruntime = "docker"\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
    for (const _ of SLOTS) ports.push(await freePort());
    writeSlots(2048);
  }, 120_000);

  afterAll(async () => {
    await main(["down", "--config", config, "--state", state], captureIo({ DOCKER_HOST }));
    await removeContainers(engine, boxId());
  });

  function writeSlots(ctx: number): void {
    SLOTS.forEach((name, i) => {
      writeFileSync(join(config, "slots", `${name}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${ports[i]}\n[tune]\nctx_size = ${ctx}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "300" }\n`);
    });
  }

  function boxId(): string {
    try {
      return JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).box;
    } catch {
      return "none";
    }
  }

  it("converges with one container per slot after each of 10 kills", async () => {
    let seed = 20261130;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let round = 0; round < 10; round++) {
      // Odd rounds change every slot's spec first, so the kill can land in the replace waves too.
      if (round % 2 === 1) writeSlots(2048 + 1024 * round);
      const at = Math.floor(200 + random() * 2300);
      await applyKilledAfter(at, config, state, { ...process.env, DOCKER_HOST });
      const io = captureIo({ DOCKER_HOST });
      const code = await main(["apply", "--yes", "--config", config, "--state", state], io);
      expect(code, `round ${round} (killed at ${at} ms): ${io.out()}${io.err()}`).toBe(0);
      const listed = await engine.listContainers({ all: true, filters: { label: ["hal0.managed=true"] } });
      const ours = listed.filter((c) => SLOTS.some((s) => c.Names[0] === `/hal0-slot-${s}`));
      expect(ours.map((c) => c.Names[0]).sort(), `round ${round}`).toEqual(SLOTS.map((s) => `/hal0-slot-${s}`));
      expect(ours.every((c) => c.State === "running" && c.Labels["hal0.box"] === boxId()), `round ${round}`).toBe(true);
      // A container the killed apply had already asked the engine to start may still be warming: no-op, healthy soon.
      for (const port of ports) expect(await healthWithin(port, 10_000), `round ${round} port ${port}`).toBe(200);
      expect(Object.keys(JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).slots).sort()).toEqual(SLOTS);
    }
  }, 300_000);
});
