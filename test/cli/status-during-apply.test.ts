import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { freePort, RUNNER } from "../reconciler/process-helpers.js";
import { startTestServer } from "../server/harness.js";
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
  readonly degraded: string;
}

/** The values without repeats in a row. */
function compress(values: readonly string[]): string[] {
  return values.filter((v, i) => i === 0 || values[i - 1] !== v);
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

  function writeSlot(ctx: number, { enabled = true, loadMs = 1500 } = {}): void {
    writeFileSync(join(config, "slots", "a.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\nenabled = ${enabled}\n[tune]\nctx_size = ${ctx}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "${loadMs}" }\n`);
  }

  async function sample(): Promise<Sample> {
    const io = captureIo();
    expect(await main(["status", "a", "--json", "--config", config, "--state", state], io), io.err()).toBe(0);
    const slot = JSON.parse(io.out()).slot;
    const of = (type: string) => {
      const c = slot.conditions.find((x: { type: string }) => x.type === type);
      return `${c.status}/${c.reason}`;
    };
    return { state: slot.state, outcome: slot.last_outcome ? `${slot.last_outcome.action}:${slot.last_outcome.ok}` : "-", ready: of("Ready"), reconciling: of("Reconciling"), degraded: of("Degraded") };
  }

  /** Runs `hal0 apply --yes` and samples status until it ends; returns the distinct samples in the order seen (the last taken after the apply). */
  async function applySampled(exit = 0): Promise<Sample[]> {
    const io = captureIo();
    let done = false;
    const apply = main(["apply", "--yes", "--config", config, "--state", state], io).finally(() => (done = true));
    const seen: Sample[] = [];
    const keep = (s: Sample) => {
      const last = seen.at(-1);
      if (last === undefined || JSON.stringify(last) !== JSON.stringify(s)) seen.push(s);
    };
    while (!done) keep(await sample());
    expect(await apply, io.out() + io.err()).toBe(exit);
    keep(await sample());
    return seen;
  }

  it("never reports a step that has not ended", async () => {
    mkdirSync(join(config, "slots"), { recursive: true });
    port = await freePort();
    writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 4\nstop_grace_s = 2\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(MODEL)}\n`);
    writeSlot(2048);
    const create = await applySampled();
    expect(create.at(-1)).toEqual({ state: "ready", outcome: "create:true", ready: "True/Healthy", reconciling: "False/Converged", degraded: "False/AsExpected" });
    // Launched, then loading: Reconciling says Starting until the apply has seen /health 200 and recorded the create.
    expect(compress(create.map((s) => s.reconciling)), JSON.stringify(create)).toEqual(["True/ChangePending", "True/Starting", "False/Converged"].slice(create[0]!.reconciling === "True/Starting" ? 1 : 0));
    expect(create.some((s) => s.state === "warming" && s.ready === "False/Warming"), JSON.stringify(create)).toBe(true);
    expect(create.every((s) => s.state !== "error" && s.ready !== "Unknown/NoHealthAnswer"), JSON.stringify(create)).toBe(true);

    // A replace: the new runner loads for 1.5 s; until it is healthy the last step is still the create.
    writeSlot(4096);
    const replace = await applySampled();
    expect(replace.at(-1)).toEqual({ state: "ready", outcome: "replace:true", ready: "True/Healthy", reconciling: "False/Converged", degraded: "False/AsExpected" });
    expect(replace.some((s) => s.state === "warming"), JSON.stringify(replace)).toBe(true);
    const firstReplaced = replace.findIndex((s) => s.outcome === "replace:true");
    expect(replace.slice(0, firstReplaced).every((s) => s.outcome === "create:true"), JSON.stringify(replace)).toBe(true);
    expect(replace.slice(firstReplaced).every((s) => s.state === "ready"), JSON.stringify(replace)).toBe(true);
    // Stopping the old runner, then starting the new one; Converged only once the replace is recorded.
    const replacing = compress(replace.map((s) => s.reconciling)).filter((r) => r !== "True/ChangePending");
    expect(replacing, JSON.stringify(replace)).toEqual(["True/Stopping", "True/Starting", "False/Converged"].slice(replacing[0] === "True/Starting" ? 1 : 0));
    expect(replace.slice(0, replace.findIndex((s) => s.reconciling === "False/Converged")).every((s) => s.outcome === "create:true" || s.reconciling === "True/Starting"), JSON.stringify(replace)).toBe(true);

    // A start that fails: starting and warming under Starting, then the failure, never Converged or ready on the way.
    writeSlot(8192, { loadMs: 60_000 });
    const failed = await applySampled(1);
    expect(failed.at(-1)).toMatchObject({ state: "error", outcome: "replace:false", ready: "False/NotRunning", reconciling: "True/ChangePending" });
    expect(failed.some((s) => s.reconciling === "True/Starting" && s.state === "warming"), JSON.stringify(failed)).toBe(true);
    // (The old runner is ready until it is stopped.)
    const failing = failed.slice(failed.findIndex((s) => s.reconciling === "True/Starting"));
    expect(failing.every((s) => s.reconciling !== "False/Converged" && s.state !== "ready"), JSON.stringify(failed)).toBe(true);
    expect(compress(failed.map((s) => s.outcome)), JSON.stringify(failed)).toEqual(["replace:true", "replace:false"]);

    // Started again, then stopped (disabled): Stopping while its runner runs, then offline with the delete recorded.
    writeSlot(8192);
    expect((await applySampled()).at(-1)).toMatchObject({ state: "ready", outcome: "create:true", reconciling: "False/Converged", degraded: "False/AsExpected" });
    writeSlot(8192, { enabled: false });
    const stop = await applySampled();
    expect(stop.at(-1)).toEqual({ state: "offline", outcome: "delete:true", ready: "False/Disabled", reconciling: "False/Converged", degraded: "False/AsExpected" });
    // A runner an apply launches or stops is not unhealthy.
    for (const s of [...create, ...replace, ...stop]) expect(s.degraded, JSON.stringify(s)).toBe("False/AsExpected");
    expect(stop.slice(0, -1).every((s) => s.outcome === "create:true" && s.reconciling !== "False/Converged" || s.outcome === "delete:true"), JSON.stringify(stop)).toBe(true);
  }, 60_000);

  it("slot_state tells the same while a replace waits for /health", async () => {
    const server = await startTestServer({ box: config });
    try {
      const apply = async (ctx: number) => {
        writeThere(ctx);
        const io = captureIo();
        let done = false;
        const run = main(["apply", "--yes", "--config", server.config, "--state", server.state], io).finally(() => (done = true));
        const seen: string[] = [];
        while (!done) {
          const { body } = await server.call("GET", "/api/slots/a/state");
          const of = (type: string) => body.conditions.find((c: { type: string }) => c.type === type)?.reason;
          seen.push(`${body.state} ${body.last_outcome ? `${body.last_outcome.action}:${body.last_outcome.ok}` : "-"} ${body.step ? `${body.step.action}/${body.step.phase}` : "-"} ${of("Ready")} ${of("Reconciling")}`);
        }
        expect(await run, io.out() + io.err()).toBe(0);
        return compress(seen);
      };
      const writeThere = (ctx: number) => writeFileSync(join(server.config, "slots", "a.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n[tune]\nctx_size = ${ctx}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "1500" }\n`);
      await apply(2048);
      const replace = await apply(16384);
      expect(replace.some((l) => l === "warming create:true replace/warming Warming Starting"), replace.join("\n")).toBe(true);
      const converged = replace.findIndex((l) => l.endsWith(" Converged"));
      // Nothing says the replace is done, nor converged, until it has seen /health 200 and recorded it.
      expect(replace.slice(0, converged === -1 ? undefined : converged).every((l) => !l.includes("replace:true") || l.includes("replace/")), replace.join("\n")).toBe(true);
    } finally {
      await main(["down", "--config", server.config, "--state", server.state], captureIo());
      for (const r of await markedRunners(server.state, "a")) process.kill(r.pid, "SIGKILL");
      await server.close();
    }
  }, 60_000);
});

describe("hal0 status of a runner no apply is starting that does not answer /health", () => {
  it("is error, with the reason in last_error, as slot_state says (it read starting, as if an apply were at it)", async () => {
    const base = mkdtempSync(join(tmpdir(), "hal0-status-mute-"));
    const config = join(base, "box");
    const state = join(base, "state");
    const port = await freePort();
    mkdirSync(join(config, "slots"), { recursive: true });
    writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 10\nstop_grace_s = 2\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(MODEL)}\n`);
    writeFileSync(join(config, "slots", "b.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n`);
    let pid: number | undefined;
    try {
      expect(await main(["apply", "--yes", "--config", config, "--state", state], captureIo())).toBe(0);
      pid = (await markedRunners(state, "b"))[0]?.pid;
      expect(pid).toBeDefined();
      process.kill(pid!, "SIGSTOP"); // alive, its port accepts connections, and it answers nothing
      const io = captureIo();
      expect(await main(["status", "b", "--json", "--config", config, "--state", state], io), io.err()).toBe(0);
      const slot = JSON.parse(io.out()).slot;
      expect(slot.state).toBe("error");
      expect(slot.last_error).toContain(`GET /health on port ${port} does not answer`);
      expect(slot.conditions).toContainEqual(expect.objectContaining({ type: "Degraded", status: "True", reason: "Unhealthy" }));
    } finally {
      if (pid !== undefined) process.kill(pid, "SIGCONT");
      await main(["down", "--config", config, "--state", state], captureIo());
    }
  }, 60_000);
});
