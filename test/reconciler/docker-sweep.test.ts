import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerDriver } from "../../reconciler/drivers/docker.js";
import { containerLogPath } from "../../reconciler/drivers/container-log.js";
import { StateStore } from "../../reconciler/state.js";
import { redactText } from "../../server/redact.js";
import { slotLog } from "../../server/slot-logs.js";
import { until } from "../helpers/until.js";
import { Sweeper } from "../../reconciler/sweep.js";
import { dockerEngine, ensureRunnerImage, removeContainers, slotName, testBoxId } from "./docker-helpers.js";
import { freePort, PROJECT, RUNNER } from "./process-helpers.js";

/**
 * The sweep on the docker runtime against a real engine: idle sweeps make one
 * list call and write nothing; a container removed behind hal0's back is
 * restored (drift = "enforce") or only reported (drift = "warn"); a crashed
 * container's last output outlives the container the next sweep replaces.
 */
const SUITE = "the sweep on the docker runtime (real Docker engine)";
const docker = await dockerEngine(SUITE);

describe.skipIf(docker === undefined)(SUITE, () => {
  const engine = docker as Dockerode;
  const box = testBoxId();
  const root = mkdtempSync(join(tmpdir(), "hal0-dsweep-"));
  const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-dsweep-state-")));
  const names = { kept: slotName("kept"), watched: slotName("watched") };
  const calls = { list: 0 };
  let sweeper: Sweeper;
  let driver: DockerDriver;

  beforeAll(async () => {
    await ensureRunnerImage(engine);
    mkdirSync(join(root, "slots"));
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(root, "tiny.gguf"));
    writeFileSync(join(root, "hal0.toml"), `[slots]\nruntime = "docker"\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
    writeFileSync(join(root, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(root, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
    writeFileSync(join(root, "slots", `${names.kept}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${await freePort()}\n`);
    writeFileSync(join(root, "slots", `${names.watched}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${await freePort()}\ndrift = "warn"\n`);
    // Count the engine's list calls: the one thing an idle sweep may ask of it.
    const list = engine.listContainers.bind(engine);
    const counting = Object.create(engine) as Dockerode;
    counting.listContainers = ((opts: Dockerode.ContainerListOptions) => (calls.list++, list(opts))) as Dockerode["listContainers"];
    driver = new DockerDriver({ docker: counting, box, stateDir: state.dir, stopGraceS: 2, maskLog: redactText });
    sweeper = new Sweeper({ root, state, driverFor: async () => driver });
  }, 120_000);

  afterAll(async () => {
    await removeContainers(engine, box);
  });

  const stamps = () => readdirSync(state.dir).sort().map((f) => `${f} ${statSync(join(state.dir, f)).mtimeMs}`);
  const container = async (name: string) => (await engine.listContainers({ all: true, filters: { label: [`hal0.box=${box}`, `hal0.slot=${name}`] } }))[0];

  it("converges, then an idle sweep makes one list call and writes nothing", async () => {
    expect((await sweeper.sweep()).outcome).toBe("converged");
    expect((await container(names.kept))?.State).toBe("running");
    await sweeper.sweep(); // settles conditions (warming → ready)
    const files = stamps();
    calls.list = 0;
    const idle = await sweeper.sweep();
    expect(idle.outcome).toBe("nothing_to_do");
    expect(calls.list).toBe(1);
    expect(stamps()).toEqual(files);
  });

  it("restores a container removed behind its back (enforce), and only reports one with drift = warn", async () => {
    const kept = await container(names.kept);
    const watched = await container(names.watched);
    await engine.getContainer(kept!.Id).remove({ force: true });
    await engine.getContainer(watched!.Id).remove({ force: true });
    const report = await sweeper.sweep();
    expect(report.results.map((r) => `${r.address} ${r.action} ${r.ok}`)).toEqual([`slot.${names.kept} create true`]);
    expect(report.plan!.warnings.filter((w) => w.code === "slot.drifted").map((w) => w.address)).toEqual([`slot.${names.watched}`]);
    expect((await container(names.kept))?.State).toBe("running");
    expect(await container(names.watched)).toBeUndefined();
  });

  it("keeps a crashed container's last output when the next sweep replaces it: slot_logs shows it before the new container's lines", async () => {
    const crashed = await container(names.kept);
    const cmd = (await engine.getContainer(crashed!.Id).inspect()).Config.Cmd!;
    const port = cmd[cmd.indexOf("--port") + 1];
    // The runner prints a line of its own (a secret in it), then says why it goes and exits.
    await fetch(`http://127.0.0.1:${port}/last-words?key=sk-abcdefghijklmnopqrstuvwx`).catch(() => undefined);
    await engine.getContainer(crashed!.Id).kill({ signal: "SIGTERM" });
    await until(async () => (await container(names.kept))?.State, (state) => state === "exited", 15_000);
    sweeper.retryNow(); // its restart would wait out the crash-loop backoff: it was started a moment ago
    const report = await sweeper.sweep();
    expect(report.results.map((r) => `${r.address} ${r.action} ${r.ok}`)).toEqual([`slot.${names.kept} create true`]);
    const now = await container(names.kept);
    expect(now?.Id).not.toBe(crashed!.Id);
    expect(now?.State).toBe("running");

    const log = await slotLog(driver, state.dir, names.kept, 200);
    const text = log.lines.join("\n");
    expect(text).toMatch(/GET \/last-words\?key=\[redacted\] 404/);
    expect(text).toMatch(/fake-llama-server: SIGTERM, shutting down/);
    expect(text).toMatch(new RegExp(`hal0 removed container hal0-slot-${names.kept} ${crashed!.Id.slice(0, 12)} at \\S+ \\(exited with code 0 at `));
    // …before the new container's own lines.
    const words = log.lines.findIndex((l) => l.includes("last-words"));
    expect(log.lines.findIndex((l, i) => i > words && l.includes("listening on"))).toBeGreaterThan(words);
    expect(log).toMatchObject({ source: `hal0-slot-${names.kept}`, file: containerLogPath(state.dir, names.kept), exists: true });
    // Kept masked, 0600.
    const file = containerLogPath(state.dir, names.kept);
    expect(readFileSync(file, "utf8")).not.toContain("sk-abcdefghijklmnopqrstuvwx");
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it("replaces a container made again by hand with another env (the labels copied), and one whose restart policy was changed in place, naming what changed", async () => {
    // docker rm -f, then docker run with everything copied and one more variable (llama-server reads LLAMA_ARG_*).
    const before = await engine.getContainer((await container(names.kept))!.Id).inspect();
    await engine.getContainer(before.Id).remove({ force: true });
    const again = await engine.createContainer({
      name: before.Name.slice(1), Image: before.Config.Image, Cmd: before.Config.Cmd, Env: [...before.Config.Env, "LLAMA_ARG_CTX_SIZE=4096"],
      Labels: before.Config.Labels, WorkingDir: before.Config.WorkingDir,
      HostConfig: { NetworkMode: "host", Init: true, Mounts: before.HostConfig.Mounts },
    });
    await again.start();
    sweeper.retryNow(); // the last test's crash left a backoff
    const report = await sweeper.sweep();
    expect(report.results.map((r) => `${r.address} ${r.action} ${r.ok}`)).toEqual([`slot.${names.kept} replace true`]);
    const change = report.plan!.changes.find((c) => c.address === `slot.${names.kept}`)!;
    expect(change).toMatchObject({ action: "replace", reason: "drifted", changed_paths: ["env.LLAMA_ARG_CTX_SIZE"] });
    expect(report.plan!.warnings).toContainEqual({ address: `slot.${names.kept}`, code: "slot.changed_by_hand", message: `container hal0-slot-${names.kept} was changed behind hal0's back (env.LLAMA_ARG_CTX_SIZE)` });
    // The value set by hand is never shown (it may be a credential): sealed, as the label keeps env.
    expect(JSON.stringify(report.plan)).not.toContain("4096");
    const now = await engine.getContainer((await container(names.kept))!.Id).inspect();
    expect(now.Id).not.toBe(again.id);
    expect(now.Config.Env).not.toContain("LLAMA_ARG_CTX_SIZE=4096");
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");

    // docker update --restart always: the engine would start it again whatever hal0 decides.
    await engine.getContainer(now.Id).update({ RestartPolicy: { Name: "always" } });
    sweeper.retryNow();
    const updated = await sweeper.sweep();
    expect(updated.results.map((r) => `${r.address} ${r.action} ${r.ok}`)).toEqual([`slot.${names.kept} replace true`]);
    expect(updated.plan!.warnings.find((w) => w.code === "slot.changed_by_hand")?.message).toBe(`container hal0-slot-${names.kept} was changed behind hal0's back (restart policy "always", not "no")`);
    expect((await engine.getContainer((await container(names.kept))!.Id).inspect()).HostConfig.RestartPolicy?.Name).toBe("no");
  });
});
