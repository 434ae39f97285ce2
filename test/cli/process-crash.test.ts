import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { freePort, PROJECT, RUNNER } from "../reconciler/process-helpers.js";
import { applyKilledAfter, captureIo, healthWithin } from "./helpers.js";

/**
 * `kill -9` of `hal0 apply` at random moments on the process runtime, then a
 * fresh apply: exactly one runner per slot, none left over — including a
 * runner spawned just before its record was written (found by its markers).
 */
const SLOTS = ["pc-0", "pc-1", "pc-2", "pc-3"];

describe("kill -9 of hal0 apply mid-way on the process runtime, then apply again", () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-pcrash-"));
  const config = join(base, "box");
  const state = join(base, "state");
  const ports: number[] = [];

  beforeAll(async () => {
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
    for (const _ of SLOTS) ports.push(await freePort());
    writeSlots(2048);
  });

  afterAll(async () => {
    await main(["down", "--config", config, "--state", state], captureIo());
    for (const name of SLOTS) for (const r of await markedRunners(state, name)) process.kill(r.pid, "SIGKILL");
  });

  function writeSlots(ctx: number): void {
    SLOTS.forEach((name, i) => {
      writeFileSync(join(config, "slots", `${name}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${ports[i]}\n[tune]\nctx_size = ${ctx}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "300" }\n`);
    });
  }

  it("converges with one runner per slot after each of 6 kills", async () => {
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let round = 0; round < 6; round++) {
      if (round % 2 === 1) writeSlots(2048 + 1024 * round);
      const at = Math.floor(150 + random() * 1500);
      await applyKilledAfter(at, config, state);
      const io = captureIo();
      const code = await main(["apply", "--yes", "--config", config, "--state", state], io);
      expect(code, `round ${round} (killed at ${at} ms): ${io.out()}${io.err()}`).toBe(0);
      for (const [i, name] of SLOTS.entries()) {
        const runners = await markedRunners(state, name);
        expect(runners.length, `round ${round}: runners of ${name}`).toBe(1);
        const recorded = JSON.parse(readFileSync(join(state, "slots", name, "runtime.json"), "utf8")).pid;
        expect(runners[0]!.pid, `round ${round}: ${name} runs the recorded pid`).toBe(recorded);
        expect(await healthWithin(ports[i]!, 10_000), `round ${round}: ${name} health`).toBe(200);
      }
    }
  }, 180_000);
});
