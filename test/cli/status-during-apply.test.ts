import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { freePort, RUNNER } from "../reconciler/process-helpers.js";
import { captureIo } from "./helpers.js";

/**
 * What `hal0 status SLOT --json` says at every moment of an apply, sampled
 * in a loop while a real runner (the fake llama-server, slow to load) is
 * created, replaced and stopped. Not timed: the test reads the order of the
 * states it saw.
 */
const MODEL = join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");

interface Sample {
  readonly state: string;
  /** `action:ok` of the last recorded outcome, or `-`. */
  readonly outcome: string;
  readonly ready: string;
  readonly reconciling: string;
}

describe("hal0 status while hal0 apply runs", () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-status-apply-"));
  const config = join(base, "box");
  const state = join(base, "state");
  let port = 0;

  afterAll(async () => {
    await main(["down", "--config", config, "--state", state], captureIo());
    for (const r of await markedRunners(state, "a")) process.kill(r.pid, "SIGKILL");
  });

  function writeSlot(ctx: number, enabled = true): void {
    writeFileSync(join(config, "slots", "a.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\nenabled = ${enabled}\n[tune]\nctx_size = ${ctx}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "1500" }\n`);
  }

  async function sample(): Promise<Sample> {
    const io = captureIo();
    expect(await main(["status", "a", "--json", "--config", config, "--state", state], io), io.err()).toBe(0);
    const slot = JSON.parse(io.out()).slot;
    const of = (type: string) => {
      const c = slot.conditions.find((x: { type: string }) => x.type === type);
      return `${c.status}/${c.reason}`;
    };
    return { state: slot.state, outcome: slot.last_outcome ? `${slot.last_outcome.action}:${slot.last_outcome.ok}` : "-", ready: of("Ready"), reconciling: of("Reconciling") };
  }

  /** Runs `hal0 apply --yes` and samples status until it ends; returns the distinct samples in the order seen (the last taken after the apply). */
  async function applySampled(): Promise<Sample[]> {
    const io = captureIo();
    let done = false;
    const apply = main(["apply", "--yes", "--config", config, "--state", state], io).finally(() => (done = true));
    const seen: Sample[] = [];
    const keep = (s: Sample) => {
      const last = seen.at(-1);
      if (last === undefined || JSON.stringify(last) !== JSON.stringify(s)) seen.push(s);
    };
    while (!done) keep(await sample());
    expect(await apply, io.out() + io.err()).toBe(0);
    keep(await sample());
    return seen;
  }

  it("never reports a step that has not ended", async () => {
    mkdirSync(join(config, "slots"), { recursive: true });
    port = await freePort();
    writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(MODEL)}\n`);
    writeSlot(2048);
    await applySampled();

    // A replace: the new runner loads for 1.5 s; until it is healthy the last step is still the create.
    writeSlot(4096);
    const replace = await applySampled();
    expect(replace.at(-1)).toEqual({ state: "ready", outcome: "replace:true", ready: "True/Healthy", reconciling: "False/Converged" });
    expect(replace.some((s) => s.state === "warming"), JSON.stringify(replace)).toBe(true);
    const firstReplaced = replace.findIndex((s) => s.outcome === "replace:true");
    expect(replace.slice(0, firstReplaced).every((s) => s.outcome === "create:true"), JSON.stringify(replace)).toBe(true);
    expect(replace.slice(firstReplaced).every((s) => s.state === "ready"), JSON.stringify(replace)).toBe(true);
  }, 60_000);
});
