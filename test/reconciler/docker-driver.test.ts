import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Dockerode from "dockerode";
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { DockerDriver, dockerClient, InspectCache } from "../../reconciler/drivers/docker.js";
import { DriverError, StateStore, type StartPhase } from "../../reconciler/index.js";
import { executePlan } from "../../reconciler/execute.js";
import { converge, previewPlan } from "../../reconciler/converge.js";
import { compile, sourceTree } from "../../compiler/index.js";
import { viewChangedPaths } from "../../reconciler/view.js";
import type { Change } from "../../schema/index.js";
import { countListCalls, DOCKER_HOST, dockerEngine, dockerViewFor, ensureRunnerImage, MODEL_FILE, removeContainers, RUNNER_IMAGE, slotName, testBoxId } from "./docker-helpers.js";
import { freePort } from "./process-helpers.js";

/**
 * DockerDriver against a real engine: containers of the runner image
 * (hal0-runner:local, `npm run runner-image`) on the host network, probed on
 * loopback. Every container a test makes is removed after it, pass or fail.
 */
const SUITE = "DockerDriver (real Docker engine)";
const docker = await dockerEngine(SUITE);

describe.skipIf(docker === undefined)(SUITE, () => {
  // The body of a skipped suite still runs at collection: what needs the engine is set up in beforeAll.
  const engine = docker as Dockerode;
  const box = testBoxId();
  let root: string;
  let stateDir: string;
  let lists: ReturnType<typeof countListCalls>;
  let driver: DockerDriver;
  /** Containers made behind the driver's back (no labels of this box): removed by id. */
  const foreign: string[] = [];

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), "hal0-docker-box-"));
    stateDir = mkdtempSync(join(tmpdir(), "hal0-docker-state-"));
    lists = countListCalls(engine);
    driver = new DockerDriver({ docker: engine, box, stateDir, stopGraceS: 3 });
    await ensureRunnerImage(engine);
    runnerId = (await engine.getImage(RUNNER_IMAGE).inspect()).Id;
  }, 120_000);
  afterEach(() => removeContainers(engine, box));
  afterAll(async () => {
    await removeContainers(engine, box, foreign);
  });

  /** A slot's view as a plan makes it with the runner image on the engine: with that image's id (observed.image_digest). */
  let runnerId: string | undefined;
  const plannedView = (o: Parameters<typeof dockerViewFor>[0]) => dockerViewFor({ ...((o.image ?? RUNNER_IMAGE) === RUNNER_IMAGE && runnerId !== undefined ? { images: new Map([[RUNNER_IMAGE, runnerId]]) } : {}), ...o });
  const inspect = (name: string) => engine.getContainer(`hal0-slot-${name}`).inspect();
  const gone = (name: string) => inspect(name).then(() => false, (err: { statusCode?: number }) => err.statusCode === 404);
  const get = async (port: number, path: string) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const startError = (name: string, view: ReturnType<typeof dockerViewFor>, healthTimeoutS = 20) =>
    driver.start(name, view, { healthTimeoutS, cwd: root }).then(() => undefined, (err: unknown) => err as DriverError);

  /** A running container of the runner image that hal0 must never touch. */
  async function foreignContainer(name: string, labels: Record<string, string>): Promise<string> {
    const port = await freePort();
    const c = await engine.createContainer({
      name, Image: RUNNER_IMAGE, Cmd: ["--host", "127.0.0.1", "--port", String(port)], Labels: labels,
      HostConfig: { NetworkMode: "host", Init: true },
    });
    foreign.push(c.id);
    await c.start();
    return c.id;
  }

  it("starts a labelled container on the host network with Init; /health 200 and /props shows the spec's argv", async () => {
    const name = slotName("chat");
    const view = plannedView({ port: await freePort(), root, env: { HAL0_FAKE_LOAD_MS: "300", EXTRA: "1" } });
    const phases: StartPhase[] = [];
    process.env.HAL0_TEST_SECRET = "hal0-secret"; // hal0's own environment never reaches a container
    try {
      await driver.start(name, view, { healthTimeoutS: 20, cwd: root, onPhase: (p) => phases.push(p) });
    } finally {
      delete process.env.HAL0_TEST_SECRET;
    }
    expect(phases[0]).toBe("starting");
    expect(phases.at(-1)).toBe("ready");
    const info = await inspect(name);
    expect(info.Config.Labels).toMatchObject({ // the image's own labels come along
      "hal0.managed": "true", "hal0.box": box, "hal0.slot": name, "hal0.spec-hash": view.spec_hash,
      "hal0.spec-version": String(view.spec.spec_version),
    });
    // The view, its env values sealed (each a keyed digest, never the value).
    expect(JSON.parse(info.Config.Labels["hal0.view"]!)).toEqual({ ...view, spec: { ...view.spec, env: { EXTRA: expect.stringMatching(/^hmac-sha256:[0-9a-f]{32}$/), HAL0_FAKE_LOAD_MS: expect.stringMatching(/^hmac-sha256:/) } } });
    expect(info.HostConfig).toMatchObject({ NetworkMode: "host", Init: true, RestartPolicy: { Name: "no" } });
    expect(info.Config.Image).toBe(RUNNER_IMAGE);
    expect(info.Config.Cmd).toEqual(view.spec.argv);
    // The slot's env over the image's own, and nothing else.
    const imageEnv = (await engine.getImage(RUNNER_IMAGE).inspect()).Config.Env ?? [];
    expect(info.Config.Env?.filter((e) => !imageEnv.includes(e)).sort()).toEqual(["EXTRA=1", "HAL0_FAKE_LOAD_MS=300"]);
    expect((info.Config as { StopTimeout?: number }).StopTimeout).toBe(3);
    // The engine logs to json-file, which never rotates by itself: [slots] log_max_mb (default 16) bounds it.
    expect(info.HostConfig.LogConfig).toEqual({ Type: "json-file", Config: { "max-size": "16m", "max-file": "2" } });
    expect((await get(view.port, "/health")).status).toBe(200);
    const props = await get(view.port, "/props");
    expect(props.body.argv).toEqual(view.spec.argv);
    expect(props.body.host).toBe("127.0.0.1");
  });

  it("a model file in the config folder through a symbolic link that leads out of it (the file linked, or its folder) is mounted at its path, so the runner loads it", async () => {
    const outside = mkdtempSync(join(tmpdir(), "hal0-docker-models-"));
    copyFileSync(MODEL_FILE, join(outside, "m.gguf"));
    mkdirSync(join(root, "models"), { recursive: true });
    symlinkSync(join(outside, "m.gguf"), join(root, "models", "linked.gguf"));
    symlinkSync(outside, join(root, "store"));
    try {
      for (const modelPath of [join(root, "models", "linked.gguf"), join(root, "store", "m.gguf")]) {
        const name = slotName("linked");
        const view = plannedView({ port: await freePort(), root, modelPath });
        expect(await startError(name, view)).toBeUndefined();
        expect((await inspect(name)).HostConfig.Mounts).toEqual([
          { Type: "bind", Source: root, Target: root, ReadOnly: true },
          { Type: "bind", Source: modelPath, Target: modelPath, ReadOnly: true },
        ]);
        await driver.stop(name, 1);
      }
    } finally {
      rmSync(join(root, "models"), { recursive: true, force: true });
      rmSync(join(root, "store"), { force: true });
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it("keeps no env value in the hal0.view label (docker ps, docker events): observe reads each back against the config's env, a changed one as changed without its old value", async () => {
    const name = slotName("sealed");
    const secret = `hf_${"s3cr3t".repeat(5)}`;
    const view = plannedView({ port: await freePort(), root, env: { HF_TOKEN: secret, OMP_NUM_THREADS: "4" } });
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    const labels = (await inspect(name)).Config.Labels;
    expect(JSON.stringify(labels)).not.toContain(secret);
    const listed = await engine.listContainers({ all: true, filters: { label: [`hal0.slot=${name}`] } });
    expect(JSON.stringify(listed)).not.toContain(secret);
    // The key is the state folder's, 0600.
    expect(statSync(join(stateDir, "label-key")).mode & 0o777).toBe(0o600);
    const seen = async (desired: Record<string, string> | undefined) => (await driver.observe({ health: false, desiredEnv: (slot) => (slot === name ? desired : undefined) }))[0]!.record!.view;
    expect(await seen(view.spec.env)).toEqual(view);
    // Another driver of the same state folder (the next command) reads the same key.
    expect((await new DockerDriver({ docker: engine, box, stateDir }).observe({ health: false, desiredEnv: () => view.spec.env }))[0]!.record!.view).toEqual(view);
    const changed = await seen({ HF_TOKEN: "hf_another", OMP_NUM_THREADS: "4" });
    expect(changed.spec.env.OMP_NUM_THREADS).toBe("4");
    expect(changed.spec.env.HF_TOKEN).toMatch(/^hmac-sha256:/);
    expect(viewChangedPaths(changed, plannedView({ port: view.port, root, env: { HF_TOKEN: "hf_another", OMP_NUM_THREADS: "4" } }))).toEqual(["env.HF_TOKEN"]);
  });

  it("keeps no secret flag value (--api-key) in the hal0.view label: observe reads it back against the config's argv, and a container made again by hand with another key is drifted", async () => {
    const name = slotName("keyed");
    const secret = `sk-${"k3y".repeat(8)}`;
    // The image probed as llama-server (the view says so): the key goes to its env, and the label holds neither.
    const view = { ...plannedView({ port: await freePort(), root, extraArgs: `--api-key ${secret}` }), secrets_in_env: true };
    expect(view.spec.argv).toContain(secret);
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    const info = await inspect(name);
    expect(JSON.stringify(info.Config.Labels)).not.toContain(secret);
    const listed = await engine.listContainers({ all: true, filters: { label: [`hal0.slot=${name}`] } });
    expect(JSON.stringify(listed.map((c) => c.Labels))).not.toContain(secret);
    const seen = async (argv?: readonly string[]) => (await driver.observe({ health: false, desiredArgv: () => argv }))[0]!.record!.view;
    expect(await seen(view.spec.argv)).toEqual(view);
    // Without the config's argv (or with another key) the value stays sealed, but the container still runs what its label records.
    const sealed = await seen(undefined);
    expect(sealed.spec_hash).toBe(view.spec_hash);
    expect(JSON.stringify(sealed)).not.toContain(secret);
    expect(viewChangedPaths(await seen(plannedView({ port: view.port, root, extraArgs: "--api-key sk-another" }).spec.argv), view)).toEqual(["argv.--api-key"]);
    // Another flag added before it: the key is still read back, only that flag changed.
    const more = plannedView({ port: view.port, root, extraArgs: `--threads-http 3 --api-key ${secret}` });
    expect(viewChangedPaths(await seen(more.spec.argv), more)).toEqual(["argv.--threads-http"]);
    // Made again by hand, the labels copied, with another key (in its env, or in its command): drifted.
    await engine.getContainer(`hal0-slot-${name}`).remove({ force: true });
    const byHand = await engine.createContainer({ name: `hal0-slot-${name}`, Image: RUNNER_IMAGE, Cmd: info.Config.Cmd, Env: [...info.Config.Env.filter((e) => !e.startsWith("LLAMA_API_KEY=")), "LLAMA_API_KEY=sk-chosen-by-hand"], Labels: info.Config.Labels, WorkingDir: info.Config.WorkingDir, HostConfig: { NetworkMode: "host", Init: true, Mounts: info.HostConfig.Mounts } });
    const drifted = (await driver.observe({ health: false, desiredArgv: () => view.spec.argv, desiredEnv: () => view.spec.env }))[0]!;
    expect(drifted.record!.view.spec_hash).toBe(`${view.spec_hash}+changed`);
    expect(drifted.detail).toContain("env.LLAMA_API_KEY");
    expect(JSON.stringify(drifted)).not.toContain("sk-chosen-by-hand");
    await byHand.remove({ force: true });
    const argv = view.spec.argv.map((w) => (w === secret ? "sk-chosen-by-hand" : w));
    const again = await engine.createContainer({ name: `hal0-slot-${name}`, Image: RUNNER_IMAGE, Cmd: argv, Labels: info.Config.Labels, HostConfig: { NetworkMode: "host", Init: true } });
    await again.start();
    expect((await seen(view.spec.argv)).spec_hash).toBe(`${view.spec_hash}+changed`);
  });

  it("keeps --api-key and --hf-token out of the container's command, which every local user reads in the host's /proc/<pid>/cmdline: their values are in its env (LLAMA_API_KEY, HF_TOKEN), the runner still wants the key, and nothing re-plans", async () => {
    const name = slotName("hidden");
    // The image probed as llama-server (the view says so): it reads the variables.
    const view = { ...plannedView({ port: await freePort(), root, env: { HAL0_FAKE_LOAD_MS: "0" }, extraArgs: "--api-key ctr-key-one,ctr-key-two --hf-token hf_ctrtoken" }), secrets_in_env: true };
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    const info = await inspect(name);
    expect(JSON.stringify([info.Config.Cmd, info.Path, info.Args])).not.toMatch(/ctr-key|hf_ctrtoken|api-key|hf-token/);
    expect(info.Config.Env).toEqual(expect.arrayContaining(["LLAMA_API_KEY=ctr-key-one,ctr-key-two", "HF_TOKEN=hf_ctrtoken"]));
    // The runner is a process of the host: its command line there holds no key either (when this engine's processes are in our pid namespace).
    const cmdline = existsSync(`/proc/${info.State.Pid}/cmdline`) ? readFileSync(`/proc/${info.State.Pid}/cmdline`, "utf8") : "";
    expect(cmdline).not.toMatch(/ctr-key|hf_ctrtoken/);
    const props = (key?: string) => fetch(`http://127.0.0.1:${view.port}/props`, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
    // (The stand-in in the image reads LLAMA_API_KEY as llama-server does: an image built before it did wants `npm run runner-image` again.)
    expect([await props(), await props("ctr-key-one"), await props("ctr-key-two")]).toEqual([401, 200, 200]);
    // The label keeps the spec as planned (its values sealed), and observe reads the container as exactly that spec: no drift, no re-plan.
    expect(JSON.stringify(info.Config.Labels)).not.toMatch(/ctr-key|hf_ctrtoken/);
    const seen = (await driver.observe({ health: false, desiredArgv: () => view.spec.argv, desiredEnv: () => view.spec.env }))[0]!;
    expect(seen.detail).toBeUndefined();
    expect(seen.record!.view).toEqual(view);
    // Made again by hand without the key's variable (a runner that wants no key): drifted.
    await engine.getContainer(`hal0-slot-${name}`).remove({ force: true });
    await engine.createContainer({ name: `hal0-slot-${name}`, Image: RUNNER_IMAGE, Cmd: info.Config.Cmd, Env: info.Config.Env.filter((e) => !e.startsWith("LLAMA_API_KEY=")), Labels: info.Config.Labels, WorkingDir: info.Config.WorkingDir, HostConfig: { NetworkMode: "host", Init: true, Mounts: info.HostConfig.Mounts } });
    const open = (await driver.observe({ health: false, desiredArgv: () => view.spec.argv, desiredEnv: () => view.spec.env }))[0]!;
    expect(open.record!.view.spec_hash).toBe(`${view.spec_hash}+changed`);
    expect(open.detail).toContain("env.LLAMA_API_KEY");
    // A container an earlier hal0 made, with the keys in its command: as planned too (an upgrade replaces nothing).
    await engine.getContainer(`hal0-slot-${name}`).remove({ force: true });
    await engine.createContainer({ name: `hal0-slot-${name}`, Image: RUNNER_IMAGE, Cmd: [...view.spec.argv], Env: Object.entries(view.spec.env).map(([k, v]) => `${k}=${v}`), Labels: info.Config.Labels, WorkingDir: info.Config.WorkingDir, HostConfig: { NetworkMode: "host", Init: true, Mounts: info.HostConfig.Mounts } });
    const earlier = (await driver.observe({ health: false, desiredArgv: () => view.spec.argv, desiredEnv: () => view.spec.env }))[0]!;
    expect(earlier.record!.view).toEqual(view);
  });

  it("a container made again by hand under the slot's name with the labels copied but other mounts, network, published ports or command is drifted, naming what changed; one as hal0 made it is not", async () => {
    const name = slotName("remade");
    const view = plannedView({ port: await freePort(), root, env: { FOO: "1" } });
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    const made = await inspect(name);
    const observed = async () => (await driver.observe({ health: false, desiredEnv: () => view.spec.env, desiredArgv: () => view.spec.argv }))[0]!;
    expect(await observed()).toMatchObject({ record: { view }, running: true });
    expect((await observed()).detail).toBeUndefined();
    /** docker rm -f, then docker create with what hal0 gave it, `changes` applied over it. */
    const remake = async (changes: { Cmd?: string[]; Env?: string[]; HostConfig?: Dockerode.HostConfig }) => {
      await engine.getContainer(`hal0-slot-${name}`).remove({ force: true });
      await engine.createContainer({
        name: `hal0-slot-${name}`, Image: made.Config.Image, Cmd: changes.Cmd ?? made.Config.Cmd, Env: changes.Env ?? made.Config.Env,
        Labels: made.Config.Labels, WorkingDir: made.Config.WorkingDir,
        HostConfig: { NetworkMode: "host", Init: true, Mounts: made.HostConfig.Mounts, ...changes.HostConfig },
      });
      const seen = await observed();
      return { paths: viewChangedPaths(seen.record!.view, view), detail: seen.detail, hash: seen.record!.view.spec_hash };
    };
    expect(await remake({})).toEqual({ paths: [], detail: `container hal0-slot-${name} is created (Created)`, hash: view.spec_hash });
    const writable = made.HostConfig.Mounts!.map((m) => (m.Target === root ? { ...m, ReadOnly: false } : m));
    expect(await remake({ HostConfig: { Mounts: writable } })).toEqual({
      paths: ["spec_hash"], hash: `${view.spec_hash}+changed`,
      detail: `container hal0-slot-${name} is created (Created); container hal0-slot-${name} was changed behind hal0's back (mounts ${root}:${root} in place of ${root}:${root}:ro)`,
    });
    expect((await remake({ HostConfig: { Binds: [`${root}:/data`] } })).detail).toContain(`(binds ${root}:/data)`);
    expect((await remake({ HostConfig: { NetworkMode: "none" } })).detail).toContain(`(network "none", not "host")`);
    expect((await remake({ HostConfig: { PortBindings: { [`${view.port}/tcp`]: [{ HostPort: String(view.port) }] } } })).detail).toContain(`(published ports ${view.port}/tcp)`);
    expect((await remake({ HostConfig: { Init: false } })).detail).toContain("(Init off)");
    // The command and env are read back into the spec, so a plan names the flag and the variable.
    const threads = made.Config.Cmd!.map((w, i, all) => (all[i - 1] === "--threads" ? "7" : w));
    expect((await remake({ Cmd: threads, Env: made.Config.Env.filter((e) => !e.startsWith("FOO=")) })).paths).toEqual(["argv.--threads", "env.FOO"]);
  });

  it("passes a GPU slot's device nodes to its container (ROCm: /dev/kfd and /dev/dri), leaves out those the host has not got, and reads a container made again without them as drifted", async () => {
    // The host's /dev has no GPU here: a folder of nodes of our own stands in for it (mknod needs root, as the engine does).
    const dev = mkdtempSync(join(tmpdir(), "hal0-dev-"));
    mkdirSync(join(dev, "dri"));
    try {
      execFileSync("mknod", [join(dev, "kfd"), "c", "1", "3"]);
      execFileSync("mknod", [join(dev, "dri", "renderD128"), "c", "1", "5"]);
    } catch (err) {
      if (process.env.CI) throw err;
      console.warn(`[hal0 tests] SKIPPED the device test: mknod failed (${(err as Error).message.split("\n")[0]}); it needs root`);
      return;
    }
    onTestFinished(() => rmSync(dev, { recursive: true, force: true }));
    const own = new DockerDriver({ docker: engine, box, stateDir, stopGraceS: 3, devRoot: dev });
    const name = slotName("gpu");
    const view = plannedView({ port: await freePort(), root, deviceClass: "gpu" });
    expect(view.spec.device).toBe("gpu-rocm");
    await own.start(name, view, { healthTimeoutS: 20, cwd: root });
    const info = await inspect(name);
    expect(info.HostConfig.Devices).toEqual([
      { PathOnHost: join(dev, "kfd"), PathInContainer: "/dev/kfd", CgroupPermissions: "rwm" },
      { PathOnHost: join(dev, "dri"), PathInContainer: "/dev/dri", CgroupPermissions: "rwm" },
    ]);
    // As created, it is not drifted; made again by hand without its devices, it is.
    const seen = async () => (await own.observe({ health: false, desiredEnv: () => view.spec.env }))[0]!;
    expect((await seen()).record!.view).toEqual(view);
    await engine.getContainer(info.Id).remove({ force: true });
    await engine.createContainer({ name: `hal0-slot-${name}`, Image: info.Config.Image, Cmd: info.Config.Cmd, Env: info.Config.Env, Labels: info.Config.Labels, WorkingDir: info.Config.WorkingDir, HostConfig: { NetworkMode: "host", Init: true, Mounts: info.HostConfig.Mounts } });
    expect((await seen()).detail).toContain(`changed behind hal0's back (devices (none), not ${join(dev, "dri")}, ${join(dev, "kfd")})`);
    // An NPU slot on a host without /dev/accel: created without it (the engine would refuse the create), as a process runner would find none.
    const npu = slotName("npu");
    await own.start(npu, plannedView({ port: await freePort(), root, deviceClass: "npu" }), { healthTimeoutS: 20, cwd: root });
    expect((await inspect(npu)).HostConfig.Devices ?? []).toEqual([]);
    // A CPU slot gets none.
    const cpu = slotName("cpu");
    await own.start(cpu, plannedView({ port: await freePort(), root }), { healthTimeoutS: 20, cwd: root });
    expect((await inspect(cpu)).HostConfig.Devices ?? []).toEqual([]);
  });

  it("an engine that goes away once an apply's steps ran: the apply still returns what it did (the slot created, its outcome recorded), saying the box could not be observed after", async () => {
    // A socket of our own in front of the engine, closed once the slot is ready: the engine goes away mid-apply.
    const dir = mkdtempSync(join(tmpdir(), "hal0-proxy-"));
    const sock = join(dir, "engine.sock");
    const upstream = (engine.modem as { socketPath?: string }).socketPath;
    if (upstream === undefined) return; // a tcp:// engine: nothing to put in front of it here
    const open = new Set<import("node:net").Socket>();
    const proxy = createServer((c) => {
      const u = connect(upstream);
      for (const s of [c, u]) {
        open.add(s);
        s.on("error", () => undefined).on("close", () => (c.destroy(), u.destroy()));
      }
      c.pipe(u).pipe(c);
    }).listen(sock);
    await once(proxy, "listening");
    const goAway = () => {
      proxy.close();
      for (const s of open) s.destroy();
    };
    onTestFinished(goAway);
    const name = slotName("gone");
    const files: Array<[string, string]> = [
      ["hal0.toml", `[slots]\nruntime = "docker"\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 20\nstop_grace_s = 2\n`],
      ["profiles.toml", `[profile.fake]\nimage = ${JSON.stringify(RUNNER_IMAGE)}\ndevice_class = "cpu"\n`],
      ["models.toml", `[model.tiny]\npath = ${JSON.stringify(MODEL_FILE)}\n`],
      [`slots/${name}.toml`, `profile = "fake"\nmodel = "tiny"\nport = ${await freePort()}\n`],
    ];
    const { model } = compile(sourceTree(root, files));
    const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-proxy-state-")));
    const proxied = new DockerDriver({ docker: dockerClient(`unix://${sock}`), address: `unix://${sock}`, box, stateDir: state.dir, stopGraceS: 3, answerMs: 2000 });
    const done = await converge({ model: model!, driver: proxied, state }, { holder: "test", onEvent: (e) => e.phase === "ready" && goAway() });
    expect(done.outcome).toBe("converged");
    expect(done.results.map((r) => `${r.address} ${r.action} ${r.ok}`)).toContain(`slot.${name} create true`);
    expect(done.results.every((r) => r.ok)).toBe(true);
    expect(done.unobserved).toMatchObject({ code: "runtime.unavailable", message: expect.stringContaining(`the engine at unix://${sock} does not answer`) });
    expect((await inspect(name)).State.Running).toBe(true);
    expect((await state.readInventory()).slots[name]).toBeDefined();
  });

  it("a slot's container paused by hand (docker pause) is not running, and the plan names it as what holds the slot's port, its create stopping it first, not as a process hal0 did not start", async () => {
    const name = slotName("paused");
    const port = await freePort();
    const files: Array<[string, string]> = [
      ["hal0.toml", `[slots]\nruntime = "docker"\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 20\nstop_grace_s = 2\n`],
      ["profiles.toml", `[profile.fake]\nimage = ${JSON.stringify(RUNNER_IMAGE)}\ndevice_class = "cpu"\n`],
      ["models.toml", `[model.tiny]\npath = ${JSON.stringify(MODEL_FILE)}\n`],
      [`slots/${name}.toml`, `profile = "fake"\nmodel = "tiny"\nport = ${port}\n`],
    ];
    const { model } = compile(sourceTree(root, files));
    const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-paused-state-")));
    const target = { model: model!, driver, state };
    expect((await converge(target, { holder: "test" })).outcome).toBe("converged");
    const id = (await inspect(name)).Id;
    await engine.getContainer(id).pause();
    expect(await driver.portHolder(port)).toMatchObject({ container: { name: `hal0-slot-${name}`, slot: name, state: "paused" } });
    const { plan } = await previewPlan(target);
    expect(plan.changes.find((c) => c.address === `slot.${name}`)).toMatchObject({ action: "create", reason: "not_running" });
    const held = plan.warnings.find((w) => w.code === "slot.port_in_use");
    expect(held?.message).toBe(`port ${port} is held by container hal0-slot-${name}, slot \`${name}\`'s own, which is paused (not running, yet holding the port); the create stops it first`);
    expect(held?.message).not.toContain("hal0 did not start");
    const done = await converge(target, { holder: "test" });
    expect(done.results.every((r) => r.ok)).toBe(true);
    expect((await inspect(name)).Id).not.toBe(id);
    expect((await inspect(name)).State.Running).toBe(true);
  });

  it("drivers sharing an InspectCache (a long-lived process's) reuse a container's inspect while the engine lists it unchanged, up to its reuse time; without one every observe inspects", async () => {
    const name = slotName("kept");
    const view = plannedView({ port: await freePort(), root });
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    let inspects = 0;
    const counted = dockerClient(DOCKER_HOST);
    const getContainer = counted.getContainer.bind(counted);
    counted.getContainer = ((id: string) => {
      const c = getContainer(id);
      const original = c.inspect.bind(c);
      c.inspect = ((options?: object) => (inspects++, original(options))) as typeof c.inspect;
      return c;
    }) as Dockerode["getContainer"];
    let now = 1_000_000;
    const cache = new InspectCache(60_000, () => now);
    // As hal0 serve makes them: a new driver for each sweep, one cache for the process.
    const observe = async (inspections?: InspectCache) => {
      inspects = 0;
      const seen = (await new DockerDriver({ docker: counted, box, stateDir, ...(inspections ? { inspections } : {}) }).observe({ health: false }))[0]!;
      return { inspects, detail: seen.detail, hash: seen.record?.view.spec_hash };
    };
    expect(await observe(cache)).toEqual({ inspects: 1, detail: undefined, hash: view.spec_hash });
    expect(await observe(cache)).toEqual({ inspects: 0, detail: undefined, hash: view.spec_hash });
    expect(await observe()).toMatchObject({ inspects: 1 });
    // docker update in place changes nothing the list shows: a one-shot observe sees it at once, the process within the reuse time.
    const id = (await inspect(name)).Id;
    await engine.getContainer(id).update({ RestartPolicy: { Name: "always" } });
    const changed = `container hal0-slot-${name} was changed behind hal0's back (restart policy "always", not "no")`;
    expect(await observe()).toEqual({ inspects: 1, detail: changed, hash: `${view.spec_hash}+changed` });
    now += 59_000;
    expect(await observe(cache)).toEqual({ inspects: 0, detail: undefined, hash: view.spec_hash });
    now += 1_000;
    expect(await observe(cache)).toEqual({ inspects: 1, detail: changed, hash: `${view.spec_hash}+changed` });
    // Another state in the list (stopped by hand) is inspected again at once: the policy put back is seen.
    await engine.getContainer(id).update({ RestartPolicy: { Name: "no" } });
    await engine.getContainer(id).stop({ t: 1 });
    expect(await observe(cache)).toEqual({ inspects: 1, detail: expect.stringMatching(/^container hal0-slot-\S+ is exited \(Exited \(0\)[^;]*$/), hash: view.spec_hash });
    expect(await observe(cache)).toMatchObject({ inspects: 0 });
    // Removed: its inspect is forgotten.
    await engine.getContainer(id).remove({ force: true });
    expect((await new DockerDriver({ docker: counted, box, stateDir, inspections: cache }).observe({ health: false }))).toEqual([]);
    expect(cache.containers.size).toBe(0);
  });

  it("[slots] log_max_mb = 0 leaves a container's log to the engine's own settings", async () => {
    const name = slotName("nolog");
    const own = new DockerDriver({ docker: engine, box, stateDir, stopGraceS: 3, logMaxMb: 0 });
    await own.start(name, plannedView({ port: await freePort(), root }), { healthTimeoutS: 20, cwd: root });
    expect((await inspect(name)).HostConfig.LogConfig).toEqual({ Type: "json-file", Config: {} });
  });

  it("logs of a container whose log driver the engine cannot read back (none) is slot.log_unreadable quoting the engine, not a bare engine error", async () => {
    const name = slotName("nolog");
    const c = await engine.createContainer({
      name: `hal0-slot-${name}`, Image: RUNNER_IMAGE, Cmd: ["--host", "127.0.0.1", "--port", String(await freePort())],
      Labels: { "hal0.managed": "true", "hal0.box": box, "hal0.slot": name },
      HostConfig: { NetworkMode: "host", Init: true, LogConfig: { Type: "none", Config: {} } },
    });
    await c.start();
    const err = await driver.logs(name, 10).then(() => undefined, (e: unknown) => e as DriverError);
    expect(err).toBeInstanceOf(DriverError);
    expect(err).toMatchObject({ code: "slot.log_unreadable", message: expect.stringContaining("does not support reading") });
  });

  it("observes with exactly one list call: running, healthy, the record rebuilt from the labels", async () => {
    const name = slotName("obs");
    const view = plannedView({ port: await freePort(), root });
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    lists.reset();
    const slots = await driver.observe();
    expect(lists.count()).toBe(1);
    expect(slots.map((s) => s.name)).toEqual([name]);
    const [slot] = slots;
    expect(slot).toMatchObject({ name, running: true, health: "ok" });
    expect(slot!.record!.view).toEqual(view);
    expect(Date.parse(slot!.record!.started_at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it("sees a container stopped behind its back as not running, and one removed behind its back as gone", async () => {
    const name = slotName("drift");
    const view = plannedView({ port: await freePort(), root });
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    await engine.getContainer(`hal0-slot-${name}`).kill();
    const [stopped] = await driver.observe();
    expect(stopped).toMatchObject({ name, running: false, health: "unknown" });
    expect(stopped!.detail).toMatch(/is exited/);
    expect(stopped!.record!.view).toEqual(view);
    await engine.getContainer(`hal0-slot-${name}`).remove({ force: true }); // docker rm -f
    expect(await driver.observe()).toEqual([]);
    // A start after that creates the container anew.
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    expect((await driver.observe())[0]).toMatchObject({ running: true, health: "ok" });
  });

  it("stop removes the container; stopping a missing one succeeds", async () => {
    const name = slotName("stop");
    const view = plannedView({ port: await freePort(), root });
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    await driver.stop(name, 3);
    expect(await gone(name)).toBe(true);
    await driver.stop(name, 3);
    expect(await driver.observe()).toEqual([]);
  });

  it("never touches an unlabelled container or another box's, even under a slot's container name", async () => {
    const plain = slotName("plain");
    const other = slotName("other");
    await foreignContainer(`hal0-slot-${plain}`, {});
    await foreignContainer(`hal0-slot-${other}`, { "hal0.managed": "true", "hal0.box": testBoxId(), "hal0.slot": other });
    expect(await driver.observe()).toEqual([]);
    await driver.stop(plain, 1);
    await driver.stop(other, 1);
    expect((await inspect(plain)).State.Running).toBe(true);
    expect((await inspect(other)).State.Running).toBe(true);
    const err = await startError(plain, plannedView({ port: await freePort(), root }));
    expect(err).toBeInstanceOf(DriverError);
    expect(err!.code).toBe("slot.spawn_failed");
    expect(err!.message).toMatch(/not this box's slot \(it carries no hal0 labels\)/);
    expect((await inspect(plain)).State.Running).toBe(true);
    const err2 = await startError(other, plannedView({ port: await freePort(), root }));
    expect(err2!.message).toMatch(/it belongs to box test-/);
  });

  it("decides nothing about its own container left under the name: start refuses it; the executor's create stops it first, then starts", async () => {
    const name = slotName("left");
    const view = plannedView({ port: await freePort(), root });
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    const first = (await inspect(name)).Id;
    await engine.getContainer(first).stop({ t: 1 });
    const err = await startError(name, view);
    expect(err?.code).toBe("slot.spawn_failed");
    expect(err!.message).toMatch(/is still there; hal0 stops a slot before it starts it again/);
    expect((await inspect(name)).Id).toBe(first); // left as it was
    // What the plan says for it: a create over the observed record (not running).
    const [seen] = await driver.observe({ health: false });
    expect(seen).toMatchObject({ name, running: false });
    const create: Change = { address: `slot.${name}`, kind: "slot", action: "create", reason: "not_running", changed_paths: [], before: seen!.record!.view, after: view, apply_class: "immediate", destructive: false, downtime: false };
    const [result] = await executePlan({ changes: [create] }, { driver, state: new StateStore(stateDir), healthTimeoutS: 20, stopGraceS: 1, cwd: root });
    expect(result).toMatchObject({ ok: true });
    const now = await inspect(name);
    expect(now.Id).not.toBe(first);
    expect(now.State.Running).toBe(true);
  });

  it("creates through the executor with at most `parallel` creates in flight, the image checked once for all, every slot healthy", async () => {
    // A client of its own (same engine), its calls counted: the suite's engine stays as it is.
    const counted = new (engine.constructor as typeof Dockerode)({ socketPath: (engine.modem as { socketPath?: string }).socketPath });
    let creating = 0;
    let createPeak = 0;
    let imageChecks = 0;
    const create = counted.createContainer.bind(counted);
    counted.createContainer = (async (options: Dockerode.ContainerCreateOptions) => {
      createPeak = Math.max(createPeak, ++creating);
      try {
        return await create(options);
      } finally {
        creating--;
      }
    }) as Dockerode["createContainer"];
    const getImage = counted.getImage.bind(counted);
    counted.getImage = ((name: string) => (imageChecks++, getImage(name))) as Dockerode["getImage"];
    const fresh = new DockerDriver({ docker: counted, box, stateDir, stopGraceS: 3 });
    const names = ["w1", "w2", "w3", "w4"].map(slotName);
    const changes: Change[] = [];
    const ports: number[] = [];
    for (const name of names) {
      const after = plannedView({ port: await freePort(), root, env: { HAL0_FAKE_LOAD_MS: "500" } });
      ports.push(after.spec.port);
      changes.push({ address: `slot.${name}`, kind: "slot", action: "create", reason: "new", changed_paths: [], before: null, after, apply_class: "immediate", destructive: false, downtime: false });
    }
    const results = await executePlan({ changes }, { driver: fresh, state: new StateStore(stateDir), healthTimeoutS: 30, stopGraceS: 1, cwd: root, parallel: 2 });
    expect(results.map((r) => r.ok)).toEqual([true, true, true, true]);
    expect(createPeak).toBeLessThanOrEqual(2);
    expect(imageChecks).toBe(1);
    for (const [i, name] of names.entries()) {
      expect((await inspect(name)).State.Running).toBe(true);
      expect((await get(ports[i]!, "/health")).status).toBe(200);
    }
  }, 60_000);

  it("refuses an image that is not present: slot.image_missing, naming it, and creates nothing", async () => {
    const name = slotName("noimg");
    const err = await startError(name, plannedView({ port: await freePort(), root, image: "hal0-runner:does-not-exist" }));
    expect(err?.code).toBe("slot.image_missing");
    expect(err!.message).toBe("image hal0-runner:does-not-exist is not present; build it (npm run runner-image) or set [slots] pull = true");
    expect(await gone(name)).toBe(true);
  });

  it("starts the image the plan was made with when its tag names another one by then (a pull or docker tag while apply waits for its 'yes'); that image gone, slot.image_missing saying to plan again", async () => {
    const repo = `hal0-test-planned-${randomBytes(3).toString("hex")}`;
    const made: string[] = [];
    onTestFinished(async () => {
      for (const ref of made.reverse()) await engine.getImage(ref).remove().catch(() => undefined);
    });
    const build = (tag: string): string => {
      execFileSync("docker", ["build", "--quiet", "--tag", `${repo}:${tag}`, "-"], { env: { ...process.env, DOCKER_HOST, DOCKER_BUILDKIT: "0" }, input: `FROM ${RUNNER_IMAGE}\nLABEL hal0.test=${repo}-${tag}\n`, stdio: ["pipe", "pipe", "pipe"] });
      made.push(`${repo}:${tag}`);
      return execFileSync("docker", ["image", "inspect", "--format", "{{.Id}}", `${repo}:${tag}`], { env: { ...process.env, DOCKER_HOST }, encoding: "utf8" }).trim();
    };
    const planned = build("a");
    const moved = build("b");
    const ref = `${repo}:run`;
    await engine.getImage(planned).tag({ repo, tag: "run" });
    made.push(ref);
    const name = slotName("planned");
    const view = dockerViewFor({ port: await freePort(), root, image: ref, images: new Map([[ref, planned]]) });
    expect(view.spec.observed?.image_digest).toBe(planned);

    // Planned with `a`; the tag moves to `b` before the start.
    await engine.getImage(moved).tag({ repo, tag: "run" });
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    expect((await inspect(name)).Image).toBe(planned);
    const seen = (await driver.observe()).find((s) => s.name === name)!;
    expect(seen).toMatchObject({ running: true, record: { view: { spec_hash: view.spec_hash } } });
    expect(seen.detail).toBeUndefined(); // not "changed behind hal0's back"
    await driver.stop(name, 1);

    // `a` removed from the engine since the plan: nothing of it can start, and the message says what to do.
    await engine.getImage(`${repo}:a`).remove();
    const err = await startError(name, view);
    expect(err?.code).toBe("slot.image_missing");
    expect(err!.message).toBe(`slot ${name}: image ${ref} names ${moved} on the engine now, and ${planned}, the image the plan was made with, is no longer there; run hal0 plan again to start the image it names now`);
    expect(await gone(name)).toBe(true);
  }, 60_000);

  it("a container started from a view without its image's id (the start pulled the image) is observed with the id of the image it runs filled in, as a plan made with the image present has it: no replace for learning it", async () => {
    const name = slotName("learnt");
    const port = await freePort();
    const view = dockerViewFor({ port, root });
    expect(view.spec.observed?.image_digest).toBeUndefined();
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    const id = (await engine.getImage(RUNNER_IMAGE).inspect()).Id;
    const planned = dockerViewFor({ port, root, images: new Map([[RUNNER_IMAGE, id]]) });
    const seen = (await driver.observe()).find((s) => s.name === name)!;
    expect(seen.record?.view.spec.observed?.image_digest).toBe(id);
    expect(seen.record?.view.spec_hash).toBe(planned.spec_hash);
    expect(seen.detail).toBeUndefined();
  }, 60_000);

  it("with [slots] pull = true tries to pull a missing image and says why it failed", async () => {
    const pulling = new DockerDriver({ docker: engine, box, stateDir, pull: true });
    const name = slotName("pull");
    const view = plannedView({ port: await freePort(), root, image: "127.0.0.1:1/hal0/nothing:here" });
    const err = await pulling.start(name, view, { healthTimeoutS: 5, cwd: root }).then(() => undefined, (e: unknown) => e as DriverError);
    expect(err?.code).toBe("slot.image_missing");
    expect(err!.message).toMatch(/^image 127\.0\.0\.1:1\/hal0\/nothing:here is not present and pulling it failed: /);
    expect(await gone(name)).toBe(true);
  });

  it("with [slots] pull = true gives up a pull the engine reports nothing of (a registry that never answers): slot.image_missing saying so, not a start that waits for ever", async () => {
    // Answers the engine's /v2/ check, then holds the manifest request open.
    const held: Socket[] = [];
    const registry = createServer((socket) => {
      held.push(socket);
      socket.on("data", (chunk) => {
        if (chunk.toString("latin1").startsWith("GET /v2/ ")) socket.write("HTTP/1.1 200 OK\r\ndocker-distribution-api-version: registry/2.0\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}");
      });
    }).listen(0, "127.0.0.1");
    await once(registry, "listening");
    try {
      const image = `127.0.0.1:${(registry.address() as { port: number }).port}/hal0/hang:1`;
      const pulling = new DockerDriver({ docker: engine, box, stateDir, pull: true, pullStallMs: 2000 });
      const name = slotName("hang");
      const err = await pulling.start(name, plannedView({ port: await freePort(), root, image }), { healthTimeoutS: 5, cwd: root }).then(() => undefined, (e: unknown) => e as DriverError);
      expect(err?.code).toBe("slot.image_missing");
      expect(err!.message).toBe(`image ${image} is not present and pulling it failed: the engine reported nothing for 2 s (a registry that takes the connection and does not answer); the pull was given up (HAL0_IMAGE_STALL_S)`);
      expect(await gone(name)).toBe(true);
    } finally {
      for (const socket of held) socket.destroy();
      registry.close();
    }
  }, 30_000);

  it("an apply interrupted while a start pulls its image (Ctrl-C of hal0 apply) ends the pull and the start at once: apply.interrupted, no container made; another start of the image pulls afresh", async () => {
    // Answers the engine's /v2/ check, then holds each manifest request open: the pull goes on until someone ends it.
    const held: Socket[] = [];
    let manifests = 0;
    const registry = createServer((socket) => {
      held.push(socket);
      socket.on("data", (chunk) => {
        const line = chunk.toString("latin1");
        if (chunk[0] === 0x16) socket.destroy(); // the engine tries TLS first: refused at once, it asks over plain HTTP
        else if (line.startsWith("GET /v2/ ")) socket.write("HTTP/1.1 200 OK\r\ndocker-distribution-api-version: registry/2.0\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}");
        else if (/^(GET|HEAD) \/v2\/.*\/manifests\//.test(line)) manifests++;
      });
    }).listen(0, "127.0.0.1");
    await once(registry, "listening");
    try {
      const image = `127.0.0.1:${(registry.address() as { port: number }).port}/hal0/slow-${randomBytes(3).toString("hex")}:1`;
      const pulling = new DockerDriver({ docker: engine, box, stateDir, pull: true, pullStallMs: 10 * 60_000 });
      const name = slotName("ctrlc");
      const view = plannedView({ port: await freePort(), root, image });
      const interrupt = new AbortController();
      const started = pulling.start(name, view, { healthTimeoutS: 5, cwd: root, signal: interrupt.signal }).then(() => undefined, (e: unknown) => e as DriverError);
      for (let i = 0; i < 200 && manifests === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(manifests).toBe(1);
      interrupt.abort();
      const err = await started;
      expect(err?.code).toBe("apply.interrupted");
      expect(err!.message).toBe(`slot ${name}: the apply was interrupted while image ${image} was being pulled; the pull was stopped (the engine keeps the layers it finished for the next pull) and nothing was started`);
      expect(await gone(name)).toBe(true);
      // The driver forgets the ended pull: a start that is not interrupted asks the registry again.
      const again = new AbortController();
      const second = pulling.start(name, view, { healthTimeoutS: 5, cwd: root, signal: again.signal }).then(() => undefined, (e: unknown) => e as DriverError);
      for (let i = 0; i < 200 && manifests < 2; i++) await new Promise((r) => setTimeout(r, 50));
      expect(manifests).toBe(2);
      again.abort();
      expect((await second)?.code).toBe("apply.interrupted");
    } finally {
      for (const socket of held) socket.destroy();
      registry.close();
    }
  }, 60_000);

  it("refuses a port held by a process it did not start: slot.port_in_use, naming the holder", async () => {
    const server = createServer().listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const port = (server.address() as { port: number }).port;
      const name = slotName("busy");
      const err = await startError(name, plannedView({ port, root }));
      expect(err?.code).toBe("slot.port_in_use");
      expect(err!.message).toContain(`port ${port} is already in use by pid ${process.pid}`);
      expect(await gone(name)).toBe(true);
    } finally {
      server.close();
    }
  });

  it("a slot's container renamed by hand: named as what holds the port (not a process hal0 did not start), left alone by a create's clearing of the name, stopped with the slot", async () => {
    const name = slotName("renamed");
    const port = await freePort();
    const view = plannedView({ port, root });
    await driver.start(name, view, { healthTimeoutS: 20, cwd: root });
    const renamed = `${name}-renamed`;
    await engine.getContainer(`hal0-slot-${name}`).rename({ name: renamed });
    expect(await driver.observe({ health: false })).toEqual([]); // not the slot any more: name + labels
    expect(await driver.portHolder(port)).toMatchObject({ container: { name: renamed, slot: name } });
    const err = await startError(name, view);
    expect(err?.code).toBe("slot.port_in_use");
    expect(err!.message).toBe(`port ${port} is already in use by container ${renamed}, which hal0 started as slot \`${name}\` (it carries this box's hal0.slot=${name} labels) but which is no longer named hal0-slot-${name}, so hal0 does not take it for the slot; rename it back, or hal0 down stops it`);
    await driver.stop(name, 3, { renamed: false });
    expect((await engine.getContainer(renamed).inspect()).State.Running).toBe(true);
    await driver.stop(name, 3);
    expect(await engine.getContainer(renamed).inspect().then(() => false, (e: { statusCode?: number }) => e.statusCode === 404)).toBe(true);
  });

  it("reports a runner that exits before it is healthy with its last log lines, and leaves no container", async () => {
    const name = slotName("crash");
    const err = await startError(name, plannedView({ port: await freePort(), root, modelPath: "/nonexistent/model.gguf" }));
    expect(err?.code).toBe("slot.spawn_failed");
    expect(err!.message).toMatch(/exited with code 1 before it was healthy; last lines of its log:\n.*failed to load model '\/nonexistent\/model\.gguf'/);
    expect(await gone(name)).toBe(true);
  });

  it("stops and removes a container that is not healthy in time: slot.health_failed", async () => {
    const name = slotName("slow");
    const err = await startError(name, plannedView({ port: await freePort(), root, env: { HAL0_FAKE_LOAD_MS: "60000" } }), 1);
    expect(err?.code).toBe("slot.health_failed");
    expect(err!.message).toMatch(/did not return 200 within 1 s \(last answer 503\); stopped and removed hal0-slot-/);
    expect(await gone(name)).toBe(true);
  });

  it("an interrupted apply ends the wait for /health at once and leaves the container running: apply.interrupted", async () => {
    const name = slotName("interrupted");
    const controller = new AbortController();
    const phases: string[] = [];
    const waiting = driver.start(name, plannedView({ port: await freePort(), root, env: { HAL0_FAKE_LOAD_MS: "60000" } }), {
      healthTimeoutS: 60, cwd: root, signal: controller.signal,
      onPhase: (p) => {
        phases.push(p);
        if (p === "warming") controller.abort();
      },
    }).then(() => undefined, (e: unknown) => e as DriverError);
    const err = await waiting;
    expect(phases).toEqual(["starting", "warming"]);
    expect(err?.code).toBe("apply.interrupted");
    expect(err!.message).toMatch(/interrupted while it waited for GET \/health on port \d+; container hal0-slot-\S+ is left running/);
    expect((await inspect(name)).State.Running).toBe(true);
  });
});

describe("DockerDriver when its engine goes away or stops answering", () => {
  // No engine needed: a socket that is not there, and one that takes the connection and never answers.
  const dir = mkdtempSync(join(tmpdir(), "hal0-engine-gone-"));
  const driverAt = (sock: string, answerMs?: number) =>
    new DockerDriver({ docker: dockerClient(`unix://${sock}`), address: `unix://${sock}`, box: testBoxId(), stateDir: dir, ...(answerMs ? { answerMs } : {}) });
  const refusal = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => err as DriverError);

  it("the engine's socket gone: observe is runtime.unavailable naming the address, not a bare transport error", async () => {
    const sock = join(dir, "gone.sock");
    const err = await refusal(driverAt(sock).observe());
    expect(err).toBeInstanceOf(DriverError);
    expect(err?.code).toBe("runtime.unavailable");
    expect(err!.message).toContain(`the engine at unix://${sock} does not answer (connect ENOENT`);
  });

  it("an engine that takes the connection and never answers: observe gives up after its bound, runtime.unavailable", async () => {
    const sock = join(dir, "silent.sock");
    const held: import("node:net").Socket[] = [];
    const silent = createServer((c) => void held.push(c)).listen(sock);
    await once(silent, "listening");
    try {
      const began = Date.now();
      const err = await refusal(driverAt(sock, 300).observe());
      expect(Date.now() - began).toBeLessThan(5000);
      expect(err?.code).toBe("runtime.unavailable");
      expect(err!.message).toContain(`the engine at unix://${sock} does not answer (no answer within 0.3 s)`);
      // An apply's steps too: a stop and a start on that engine give up, rather than hold the apply (or the sweep loop) for ever.
      const driver = driverAt(sock, 300);
      const stopped = await refusal(driver.stop("chat", 1));
      expect(stopped?.code).toBe("runtime.unavailable");
      const started = await refusal(driver.start("chat", dockerViewFor({ port: await freePort(), root: dir }), { healthTimeoutS: 5, cwd: dir }));
      expect(started?.code).toBe("runtime.unavailable");
      expect(Date.now() - began).toBeLessThan(10_000);
    } finally {
      for (const c of held) c.destroy();
      silent.close();
    }
  });
});
