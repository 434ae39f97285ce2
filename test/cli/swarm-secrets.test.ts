import { randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dockerClient } from "../../reconciler/drivers/docker.js";
import { PROJECT } from "../reconciler/process-helpers.js";
import { SWARM_DIR, SWARM_MANAGER, removeBoxLeftovers, rigNode, swarmManager } from "../reconciler/swarm-helpers.js";
import { boxCommand } from "./helpers.js";

/**
 * A swarm slot's `--api-key` and `--hf-token` against the three-node rig
 * (.ci/swarm-up.sh): its runner is a process of the node, whose command line
 * every local user there reads, so a runner probed as llama-server gets them
 * in its service's env, as the docker runtime's containers do. Read from the
 * node's own processes (/proc), with the runner's answers to each key.
 */
const SUITE = "a swarm runner's secret flags, out of its command line (three-node rig)";
const manager = await swarmManager(SUITE);

const SLOT = `k${randomBytes(2).toString("hex")}`;
const PORT = 21060;

describe.skipIf(manager === undefined)(SUITE, () => {
  const engine = manager as Dockerode;
  const node2 = dockerClient(`unix://${SWARM_DIR}/n2/docker.sock`);
  const base = mkdtempSync(join(tmpdir(), "hal0-swarm-secrets-"));
  const config = join(base, "box");
  const state = join(base, "state");
  const run = boxCommand(config, state, { DOCKER_HOST: "unix:///nonexistent.sock", HAL0_SWARM_DIR: SWARM_DIR });
  const boxId = (): string => JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).box;
  const boxKey = (): string => readFileSync(join(state, "swarm-api-key"), "utf8").trim();
  const svcName = `hal0-slot-${SLOT}`;
  const slotFile = (extra: string) =>
    writeFileSync(join(config, "slots", `${SLOT}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${PORT}\n[server]\nextra_args = ${JSON.stringify(extra)}\nenv = { HAL0_FAKE_LOAD_MS = "100" }\n[placement]\nnode = "hal0-node-2"\n`);
  const props = (token?: string) =>
    fetch(`http://${rigNode(2).addr}:${PORT}/props`, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(3000) }).then((r) => r.status, () => 0);
  /** The command line and environment of the slot's runner on node 2: its container's init and the runner under it, as /proc shows them to the host. */
  const runnerProcs = async (): Promise<{ cmdline: string; environ: string }[]> => {
    const [c] = await node2.listContainers({ filters: { label: [`com.docker.swarm.service.name=${svcName}`] } });
    expect(c, "a running task on node 2").toBeDefined();
    const pid = (await node2.getContainer(c!.Id).inspect()).State.Pid;
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
    return [String(pid), ...children].map((p) => ({ cmdline: readFileSync(`/proc/${p}/cmdline`, "utf8").replace(/\0/g, " "), environ: readFileSync(`/proc/${p}/environ`, "utf8") }));
  };

  beforeAll(() => {
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    writeFileSync(join(config, "hal0.toml"), `[slots]\nruntime = "swarm"\ndocker_host = ${JSON.stringify(SWARM_MANAGER)}\nport_range_start = 21000\nport_range_end = 21199\nhealth_timeout_s = 60\nstop_grace_s = 2\n\n[reconcile]\ndrift = "enforce"\n`);
    // hal0-runner:local is the stand-in llama-server: the probe reads its --help as llama-server's.
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nflags = "--parallel 1 --threads 1"\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\ntype = "llm"\n`);
  });

  afterAll(async () => {
    await run("down");
    try {
      await removeBoxLeftovers(engine, boxId());
    } catch {
      // no box made
    }
    rmSync(base, { recursive: true, force: true });
  }, 120_000);

  it("passes --api-key (a comma list) and --hf-token in the service's env, never its args; the runner wants each key, and nothing re-plans", async () => {
    slotFile("--api-key sk-first-one,sk-first-two --hf-token hf_swarmtoken");
    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    const spec = (await engine.getService(svcName).inspect()).Spec;
    expect(spec.TaskTemplate.ContainerSpec.Args.join(" ")).not.toMatch(/sk-first|hf_swarmtoken|--api-key |--hf-token/);
    expect(spec.TaskTemplate.ContainerSpec.Env).toEqual(expect.arrayContaining(["LLAMA_API_KEY=sk-first-one,sk-first-two", "HF_TOKEN=hf_swarmtoken"]));
    expect(spec.Labels["hal0.view"]).not.toMatch(/sk-first|hf_swarmtoken/);
    const procs = await runnerProcs();
    expect(procs.length).toBeGreaterThanOrEqual(2);
    for (const p of procs) expect(p.cmdline).not.toMatch(/sk-first|hf_swarmtoken/);
    expect(procs.at(-1)!.cmdline).toContain("--api-key-file /run/secrets/hal0-api-key");
    expect(procs.at(-1)!.environ.split("\0")).toContain("LLAMA_API_KEY=sk-first-one,sk-first-two");
    expect([await props(), await props("sk-first-one"), await props("sk-first-two"), await props(boxKey())]).toEqual([401, 200, 200, 200]);
    const plan = await run("plan", "--detailed-exitcode");
    expect(plan.code, plan.out).toBe(0);
    expect(plan.out).toContain("No changes.");
  }, 180_000);

  it("leaves a service an earlier hal0 made with the key in its args running (no re-plan, no restart); a key changed alone replaces it, and the runner wants the new key alone", async () => {
    // As an earlier hal0 made it: the config's argv as its args, the slot's own env alone.
    const made = await engine.getService(svcName).inspect();
    const label = JSON.parse(made.Spec.Labels["hal0.view"]);
    const args = label.spec.argv.map((w: string) => (w.startsWith("hmac-sha256:") ? "" : w));
    args[args.indexOf("--api-key") + 1] = "sk-first-one,sk-first-two";
    args[args.indexOf("--hf-token") + 1] = "hf_swarmtoken";
    const earlier = { ...made.Spec, TaskTemplate: { ...made.Spec.TaskTemplate, ContainerSpec: { ...made.Spec.TaskTemplate.ContainerSpec, Args: args, Env: ["HAL0_FAKE_LOAD_MS=100"] } } };
    await engine.getService(made.ID).remove();
    for (let i = 0; i < 40 && (await props()) !== 0; i++) await new Promise((r) => setTimeout(r, 250));
    await engine.createService(earlier);
    for (let i = 0; i < 80 && (await props("sk-first-one")) !== 200; i++) await new Promise((r) => setTimeout(r, 250));
    expect((await runnerProcs()).at(-1)!.cmdline).toContain("--api-key sk-first-one,sk-first-two");
    const id = (await engine.getService(svcName).inspect()).ID;
    const plan = await run("plan", "--detailed-exitcode");
    expect(plan.code, plan.out).toBe(0);
    const status = JSON.parse((await run("status", "--json")).out);
    expect(status.slots.map((s: any) => [s.name, s.state, s.outdated, s.last_error])).toEqual([[SLOT, "ready", false, null]]);
    expect((await engine.getService(svcName).inspect()).ID).toBe(id);

    slotFile("--api-key sk-second --hf-token hf_swarmtoken");
    const again = await run("plan");
    expect(again.out).toContain("argv.--api-key");
    expect(again.out).not.toMatch(/sk-first|sk-second/);
    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    expect(applied.out + applied.err).not.toMatch(/sk-first|sk-second/);
    expect((await engine.getService(svcName).inspect()).ID).not.toBe(id);
    for (const p of await runnerProcs()) expect(p.cmdline).not.toMatch(/sk-first|sk-second|hf_swarmtoken/);
    expect([await props("sk-first-one"), await props("sk-second"), await props(boxKey())]).toEqual([401, 200, 200]);
    expect((await run("plan", "--detailed-exitcode")).code).toBe(0);
  }, 180_000);
});
