import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { appendFile, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { createServer as createHttpServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished, vi } from "vitest";
import { DriverError, type ObservedSlot, type SlotView, type StartPhase } from "../../reconciler/index.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { RUNNER_BASE_ENV } from "../../reconciler/drivers/runner-env.js";
import { RUNNER_LOG_MAX_BYTES } from "../../reconciler/drivers/runtime-record.js";
import { tailLog } from "../../server/slot-logs.js";
import { PROJECT, RUNNER, alive, freePort, procFields, transpileClosure, until, viewFor } from "./process-helpers.js";

/** Real processes (the fake runner), real HTTP on loopback, a temp state folder per test. */

let tmp: string;
let stateDir: string;
let driver: ProcessDriver;
/** Every pid a test started, killed in afterEach whatever happened. */
const pids = new Set<number>();

beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), "hal0-process-driver-"));
  stateDir = join(tmp, "state");
  driver = new ProcessDriver({ stateDir });
});

afterEach(async () => {
  const names = await readdir(join(stateDir, "slots")).catch(() => [] as string[]);
  for (const name of names) {
    const text = await readFile(join(stateDir, "slots", name, "runtime.json"), "utf8").catch(() => "");
    const pid = /"pid":\s*(\d+)/.exec(text)?.[1]; // a corrupt record must not stop the clean-up
    if (pid !== undefined) pids.add(Number(pid));
  }
  await Promise.allSettled(names.map((name) => driver.stop(name, 1)));
  for (const pid of pids) for (const target of [-pid, pid]) try { process.kill(target, "SIGKILL"); } catch { /* gone */ }
  pids.clear();
  await rm(tmp, { recursive: true, force: true });
});

const options = (extra: { healthTimeoutS?: number; onPhase?: (p: StartPhase) => void } = {}) => ({ healthTimeoutS: 10, cwd: tmp, ...extra });

async function start(view: SlotView, extra?: Parameters<typeof options>[0]): Promise<number> {
  const { pid } = await driver.start("s", view, options(extra));
  pids.add(pid!);
  return pid!;
}

async function rejection(promise: Promise<unknown>): Promise<DriverError> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(DriverError);
  return err as DriverError;
}

const recordPath = () => join(stateDir, "slots/s/runtime.json");
const logOf = () => readFile(join(stateDir, "slots/s/runner.log"), "utf8");

describe("ProcessDriver.start", () => {
  it("starts the runner with the spec's argv, env and cwd, reports its phases and records it", async () => {
    const view = viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "400" } });
    const phases: StartPhase[] = [];
    let whileLoading: Promise<ObservedSlot[]> | undefined;
    const pid = await start(view, {
      onPhase: (phase) => {
        phases.push(phase);
        if (phase === "warming") whileLoading = driver.observe();
      },
    });
    expect(phases).toEqual(["starting", "warming", "ready"]);
    expect((await whileLoading!)[0]).toMatchObject({ name: "s", running: true, health: "loading" });

    const base = `http://127.0.0.1:${view.port}`;
    expect((await fetch(`${base}/health`)).status).toBe(200);
    const props = (await (await fetch(`${base}/props`)).json()) as { argv: string[]; pid: number; alias: string; ctx_size: number; cwd: string };
    expect(props.argv).toEqual(view.spec.argv.slice(2));
    expect(props).toMatchObject({ pid, alias: "tiny", ctx_size: 2048, cwd: realpathSync(tmp) });

    const record = JSON.parse(await readFile(recordPath(), "utf8"));
    expect((await procFields(pid)).pgid).toBe(pid); // detached: it leads its own process group
    expect(record).toEqual({ pid, pid_start: (await procFields(pid)).start, boot_id: readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim(), view, started_at: expect.any(String), log: join(stateDir, "slots/s/runner.log") });
    expect(await logOf()).toMatch(/hal0 starts: node .*fake-llama-server\.mjs[^]*listening on http:\/\/127\.0\.0\.1:\d+[^]*GET \/health 200/);
  });

  it("starts the runner with the documented base of hal0's environment and the slot's env, never hal0's secrets", async () => {
    const parent = { HAL0_TOKEN: "hal0-secret", HF_TOKEN: "hf-secret", OPENAI_API_KEY: "sk-secret", HIP_VISIBLE_DEVICES: "1", LC_TIME: "C" };
    const saved = Object.fromEntries(Object.keys(parent).map((k) => [k, process.env[k]]));
    Object.assign(process.env, parent);
    let pid: number;
    try {
      pid = await start(viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0", DECLARED: "yes", HF_TOKEN: "the slot's own" } }));
    } finally {
      for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v;
    }
    const env = Object.fromEntries(readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
    expect(JSON.stringify(env)).not.toMatch(/hal0-secret|hf-secret|sk-secret/);
    expect(Object.keys(env).filter((k) => !RUNNER_BASE_ENV.includes(k)).sort()).toEqual(["DECLARED", "HAL0_FAKE_LOAD_MS", "HAL0_RUNNER_SLOT", "HAL0_RUNNER_STATE", "HF_TOKEN"]);
    expect(env).toMatchObject({ HF_TOKEN: "the slot's own", DECLARED: "yes", HIP_VISIBLE_DEVICES: "1", LC_TIME: "C", PATH: expect.stringContaining(join(PROJECT, "bin")) });
    // docs/operations.md lists exactly these.
    const documented = /\*\*A runner's environment\.\*\*([^]*?)\nthen the profile's/.exec(readFileSync(join(PROJECT, "docs/operations.md"), "utf8"))![1]!;
    expect([...documented.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!).filter((n) => !/TOKEN|API_KEY/.test(n)).sort()).toEqual([...RUNNER_BASE_ENV].sort());
  });

  it("keeps --api-key and --hf-token out of the runner's command line, which every local user reads: their values in LLAMA_API_KEY and HF_TOKEN, which /proc shows its owner alone", async () => {
    const view = viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0" } });
    // A runner probed as llama-server (the view says so): it reads the variables.
    const keyed = { ...view, secrets_in_env: true, spec: { ...view.spec, argv: [...view.spec.argv, "--api-key", "argvkey-one,argvkey-two", "--hf-token", "hf_argvtoken"] } };
    // A key file an earlier hal0 wrote for the slot is not left on disk.
    await mkdir(join(stateDir, "slots/s"), { recursive: true });
    await writeFile(join(stateDir, "slots/s/api-key"), "argvkey-old\n", { mode: 0o600 });
    const pid = await start(keyed);
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    expect(cmdline.join(" ")).not.toMatch(/argvkey|hf_argvtoken|api-key/);
    expect(existsSync(join(stateDir, "slots/s/api-key"))).toBe(false);
    expect(readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")).toEqual(expect.arrayContaining(["HF_TOKEN=hf_argvtoken", "LLAMA_API_KEY=argvkey-one,argvkey-two"]));
    // The runner still wants each key: llama-server reads its list from the environment.
    const props = (key?: string) => fetch(`http://127.0.0.1:${view.port}/props`, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
    expect([await props(), await props("argvkey-one"), await props("argvkey-two")]).toEqual([401, 200, 200]);
    // The record keeps the argv as the config wrote it (what the plan compares), and the log holds no key.
    expect(JSON.parse(await readFile(recordPath(), "utf8")).view.spec.argv).toEqual(keyed.spec.argv);
    expect(await logOf()).not.toMatch(/argvkey|hf_argvtoken/);
  });

  it("leaves --api-key in the command line of a runner not known to read LLAMA_API_KEY (not probed as llama-server: FastFlowLM, a wrapper), so it never runs with no key", async () => {
    const view = viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0" } });
    expect(view.secrets_in_env).toBeUndefined();
    const pid = await start({ ...view, spec: { ...view.spec, argv: [...view.spec.argv, "--api-key", "plain-key"] } });
    expect(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")).toEqual(expect.arrayContaining(["--api-key", "plain-key"]));
    expect(readFileSync(`/proc/${pid}/environ`, "utf8")).not.toContain("LLAMA_API_KEY");
    const props = (key?: string) => fetch(`http://127.0.0.1:${view.port}/props`, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
    expect([await props(), await props("plain-key")]).toEqual([401, 200]);
  });

  it("hands each --api-key to the runner as the runner itself reads it: a key starting with # is a key (not a key file's comment), and an older build's a,b is one key", async () => {
    const props = (port: number, key?: string) => fetch(`http://127.0.0.1:${port}/props`, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
    const view = viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0" } });
    await start({ ...view, secrets_in_env: true, spec: { ...view.spec, argv: [...view.spec.argv, "--api-key", "#hashkey"] } });
    // Its only key: the runner must not run open to all.
    expect([await props(view.port), await props(view.port, "#hashkey")]).toEqual([401, 200]);
    await driver.stop("s", 1);
    const older = viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0", HAL0_FAKE_BUILD: "older" } });
    // The older build's words only: the runner and where it listens.
    await start({ ...older, secrets_in_env: true, spec: { ...older.spec, argv: [...older.spec.argv.slice(0, 2), "--host", "127.0.0.1", "--port", String(older.port), "--api-key", "part-a,part-b"] } });
    expect([await props(older.port, "part-a"), await props(older.port, "part-b"), await props(older.port, "part-a,part-b")]).toEqual([401, 401, 200]);
  });

  it("refuses a port held by a foreign server at once, naming the port and its holder", async () => {
    const server: Server = createHttpServer((_, res) => res.end("not a slot")).listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const port = (server.address() as AddressInfo).port;
      const began = Date.now();
      const err = await rejection(driver.start("s", viewFor({ root: tmp, port }), options()));
      expect(Date.now() - began).toBeLessThan(2000);
      expect(err.code).toBe("slot.port_in_use");
      expect(err.message).toContain(`port ${port} is already in use by pid ${process.pid} (`);
      expect(await driver.portHolder(port)).toEqual({ pid: process.pid, command: expect.stringContaining("node") });
      expect(await driver.observe()).toEqual([]);
    } finally {
      server.close();
    }
    expect(await driver.portHolder(await freePort())).toBeUndefined();
  });

  it("fails with the exit code and the log's last lines when the runner exits before it is healthy", async () => {
    const script = join(tmp, "exits.mjs");
    await writeFile(script, 'console.error("fatal: no GPU found"); process.exit(3);\n');
    const began = Date.now();
    const err = await rejection(driver.start("s", viewFor({ root: tmp, port: await freePort(), runner: ["node", script] }), options()));
    expect(Date.now() - began).toBeLessThan(2000);
    expect(err.code).toBe("slot.spawn_failed");
    expect(err.message).toMatch(/exited with code 3 before it was healthy[^]*\n {2}fatal: no GPU found/);
    expect(existsSync(recordPath())).toBe(false);

    const missing = await rejection(driver.start("s", viewFor({ root: tmp, port: await freePort(), modelPath: join(tmp, "nope.gguf") }), options()));
    expect(missing.code).toBe("slot.spawn_failed");
    expect(missing.message).toMatch(/exited with code 1[^]*failed to load model/);
  });

  it.each([["in its group", ""], ["in a session of its own (setsid)", "setsid "]])("a runner that exits before it is healthy leaves nothing behind: a server it put in the background %s", async (_, setsid) => {
    const script = join(tmp, "forks.sh");
    const childPid = join(tmp, "child.pid");
    await writeFile(script, `#!/bin/sh\nHAL0_FAKE_LOAD_MS=60000 ${setsid}node ${JSON.stringify(RUNNER)} "$@" &\necho $! > ${JSON.stringify(childPid)}\nsleep 0.3\nexit 0\n`, { mode: 0o755 });
    const port = await freePort();
    const err = await rejection(driver.start("s", viewFor({ root: tmp, port, runner: [script] }), options()));
    const child = Number(readFileSync(childPid, "utf8"));
    pids.add(child);
    expect(err.code).toBe("slot.spawn_failed");
    expect(err.message).toContain("exited with code 0 before it was healthy");
    expect(await alive(child)).toBe(false);
    expect(await driver.portHolder(port)).toBeUndefined();
  });

  it("fails with slot.spawn_failed when the runner can't be executed", async () => {
    const err = await rejection(driver.start("s", viewFor({ root: tmp, port: await freePort(), runner: ["hal0-no-such-runner"] }), options()));
    expect(err.code).toBe("slot.spawn_failed");
    expect(err.message).toContain("cannot run `hal0-no-such-runner`");
    expect(err.message).toContain("ENOENT");
    expect(await driver.observe()).toEqual([]);
  });

  it("a runner that is there but whose interpreter is not (a #! line naming a moved venv, an ELF binary's loader for another libc) says which program is missing, not a bare ENOENT", async () => {
    const script = join(tmp, "moved-venv-runner");
    await writeFile(script, "#!/opt/hal0-no-such-venv/bin/python3 -u\nprint('never')\n", { mode: 0o755 });
    const err = await rejection(driver.start("s", viewFor({ root: tmp, port: await freePort(), runner: [script] }), options()));
    expect(err.code).toBe("slot.spawn_failed");
    expect(err.message).toContain(`cannot run \`${script}\``);
    expect(err.message).toContain("the interpreter its #! line names, /opt/hal0-no-such-venv/bin/python3, is not on this system (ENOENT)");
    // An ELF binary naming a loader this system lacks: this system's own `true`, its loader's path changed (same length).
    const own = readFileSync("/bin/true");
    const loader = /\/lib[a-z0-9_]*\/ld-[ -~]+?\.so(\.\d+)?\0/.exec(own.toString("latin1"))?.[0];
    if (loader !== undefined) {
      const elf = join(tmp, "other-libc-runner");
      const gone = `/nx${loader.slice(3, -1)}`;
      await writeFile(elf, Buffer.from(own.toString("latin1").replace(loader, `${gone}\0`), "latin1"), { mode: 0o755 });
      const elfErr = await rejection(driver.start("s", viewFor({ root: tmp, port: await freePort(), runner: [elf] }), options()));
      expect(elfErr.message).toContain(`the dynamic loader (ELF interpreter) it names, ${gone}, is not on this system (ENOENT)`);
    }
    expect(await driver.observe()).toEqual([]);
  });

  it("stops a runner that is not healthy in time and fails with slot.health_failed", async () => {
    const view = viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "60000" } });
    let pid: number | undefined;
    const onPhase = (phase: StartPhase) => {
      if (phase === "starting") pid = JSON.parse(readFileSync(recordPath(), "utf8")).pid;
    };
    const err = await rejection(driver.start("s", view, options({ healthTimeoutS: 1, onPhase })));
    pids.add(pid!);
    expect(err.code).toBe("slot.health_failed");
    expect(err.message).toContain(`did not return 200 within 1 s (last answer 503); stopped pid ${pid}`);
    expect(await alive(pid!)).toBe(false);
    expect(await driver.observe()).toEqual([]);
  });
});

describe("ProcessDriver.observe and stop", () => {
  it("observes a running slot as running and healthy, with its record", async () => {
    const view = viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0" } });
    const pid = await start(view);
    const [slot, ...rest] = await driver.observe();
    expect(rest).toEqual([]);
    expect(slot).toEqual({ name: "s", running: true, health: "ok", record: { view, pid, started_at: expect.any(String) } });
    expect(slot!.record!.view.spec_hash).toBe(view.spec_hash);
  });

  it("sees a runner killed with SIGKILL as not running, and stop then just drops the record", async () => {
    const pid = await start(viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0" } }));
    process.kill(pid, "SIGKILL");
    await until(async () => !(await alive(pid)));
    const [slot] = await driver.observe();
    expect(slot).toMatchObject({ name: "s", running: false, health: "unknown", record: { pid } });
    expect(slot!.detail).toContain("process exited");
    await driver.stop("s", 1);
    expect(await driver.observe()).toEqual([]);
    expect(await logOf()).toContain("listening"); // the log is kept
  });

  it("never takes, nor signals, a live process that reused the recorded pid", async () => {
    const sleeper = spawn("sleep", ["30"], { stdio: "ignore" });
    pids.add(sleeper.pid!);
    const view = viewFor({ root: tmp, port: await freePort() });
    await mkdir(dirname(recordPath()), { recursive: true });
    const record = { pid: sleeper.pid, pid_start: (await procFields(sleeper.pid!)).start - 1, view, started_at: new Date().toISOString(), log: "x" };
    await writeFile(recordPath(), JSON.stringify(record));

    const [slot] = await driver.observe();
    expect(slot).toMatchObject({ name: "s", running: false, health: "unknown", record: { pid: sleeper.pid } });
    expect(slot!.detail).toBe(`pid ${sleeper.pid} is alive but is not the runner hal0 started (pid reused)`);
    await driver.stop("s", 1);
    expect(await alive(sleeper.pid!)).toBe(true);
    expect(existsSync(recordPath())).toBe(false);
    sleeper.kill("SIGKILL");
  });

  it("never takes, nor signals, a process of this boot that a record from an earlier boot names by pid and start time", async () => {
    // After a restart of the host, a record's pid and start time (ticks after boot) may name a process of the new boot.
    const stranger = spawn("sleep", ["30"], { stdio: "ignore" });
    pids.add(stranger.pid!);
    const view = viewFor({ root: tmp, port: await freePort() });
    await mkdir(dirname(recordPath()), { recursive: true });
    const record = { pid: stranger.pid, pid_start: (await procFields(stranger.pid!)).start, boot_id: "00000000-0000-4000-8000-000000000000", view, started_at: new Date().toISOString(), log: "x" };
    await writeFile(recordPath(), JSON.stringify(record));

    const [slot] = await driver.observe();
    expect(slot).toMatchObject({ name: "s", running: false, health: "unknown", record: { pid: stranger.pid } });
    expect(slot!.detail).toBe(`the runner hal0 started (pid ${stranger.pid}) ran before the host restarted: runtime.json is from an earlier boot`);
    await driver.stop("s", 1);
    expect(await alive(stranger.pid!)).toBe(true);
    expect(existsSync(recordPath())).toBe(false);
    stranger.kill("SIGKILL");
  });

  it("kills a runner that ignores SIGTERM once the grace period is over", async () => {
    const pid = await start(viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0", HAL0_FAKE_IGNORE_SIGTERM: "1" } }));
    const began = Date.now();
    await driver.stop("s", 1);
    const took = Date.now() - began;
    expect(took).toBeGreaterThanOrEqual(1000);
    expect(took).toBeLessThan(2500);
    expect(await alive(pid)).toBe(false);
    expect(await logOf()).toContain("ignoring SIGTERM");
    expect(existsSync(recordPath())).toBe(false);
  });

  it("stops what the runner started with it: a wrapper that exits on SIGTERM does not leave its server (which ignores SIGTERM) holding the port", async () => {
    const wrapper = join(tmp, "wrapper.sh");
    const childPid = join(tmp, "child.pid");
    await writeFile(wrapper, `#!/bin/sh\nHAL0_FAKE_IGNORE_SIGTERM=1 node ${JSON.stringify(RUNNER)} "$@" &\necho $! > ${JSON.stringify(childPid)}\nwait\n`, { mode: 0o755 });
    const port = await freePort();
    const pid = await start(viewFor({ root: tmp, port, runner: [wrapper], env: { HAL0_FAKE_LOAD_MS: "0" } }));
    const child = Number(readFileSync(childPid, "utf8"));
    pids.add(child);
    const began = Date.now();
    await driver.stop("s", 1);
    expect(Date.now() - began).toBeGreaterThanOrEqual(1000); // the grace, then SIGKILL to the group
    expect(await alive(pid)).toBe(false);
    expect(await alive(child)).toBe(false);
    // The port is no longer the runner's or its server's (another suite running beside this one may take a freed port at once).
    const holder = await driver.portHolder(port);
    expect(holder === undefined || (holder.pid !== pid && holder.pid !== child), JSON.stringify(holder)).toBe(true);
    expect(existsSync(recordPath())).toBe(false);
  });

  it("stops what the runner started in a session of its own (setsid), outside its process group", async () => {
    const wrapper = join(tmp, "wrapper.sh");
    const childPid = join(tmp, "child.pid");
    await writeFile(wrapper, `#!/bin/sh\nsetsid node ${JSON.stringify(RUNNER)} "$@" &\necho $! > ${JSON.stringify(childPid)}\nwait\n`, { mode: 0o755 });
    const port = await freePort();
    const pid = await start(viewFor({ root: tmp, port, runner: [wrapper], env: { HAL0_FAKE_LOAD_MS: "0" } }));
    const child = Number(readFileSync(childPid, "utf8"));
    pids.add(child);
    expect((await procFields(child)).pgid).toBe(child); // its own group, not the runner's
    await driver.stop("s", 1);
    expect(await alive(pid)).toBe(false);
    expect(await alive(child)).toBe(false);
    expect(existsSync(recordPath())).toBe(false);
  });

  it("stops a runner with SIGTERM, and stopping a stopped slot succeeds", async () => {
    // A runner path relative to the config folder, as fixtures/box writes it: it resolves against `cwd`.
    const runner = ["node", relative(tmp, RUNNER)];
    expect(runner[1]).toMatch(/^\.\.\//);
    const pid = await start(viewFor({ root: tmp, port: await freePort(), runner, env: { HAL0_FAKE_LOAD_MS: "0" } }));
    await driver.stop("s", 5);
    expect(await alive(pid)).toBe(false);
    expect(await logOf()).toContain("SIGTERM, shutting down");
    await driver.stop("s", 5);
    await driver.stop("never-started", 5);
  });

  it("reports a corrupt runtime.json instead of throwing", async () => {
    await mkdir(dirname(recordPath()), { recursive: true });
    await writeFile(recordPath(), "{ not json");
    const [slot] = await driver.observe();
    expect(slot).toMatchObject({ name: "s", running: false, health: "unknown" });
    expect(slot!.detail).toMatch(/^runtime\.json is unreadable: not JSON/);
  });

  it("a corrupt runtime.json beside a runner that still runs is a running slot with no record, never \"not running\" (the plan then replaces it, with its downtime, rather than create it over a live runner)", async () => {
    const pid = await start(viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0" } }));
    const whole = await readFile(recordPath(), "utf8");
    await writeFile(recordPath(), whole.slice(0, whole.length / 2));
    const [slot] = await driver.observe();
    expect(slot).toMatchObject({ name: "s", running: true, health: "unknown" });
    expect(slot!.record).toBeUndefined();
    expect(slot!.detail).toMatch(new RegExp(`^runtime\\.json is unreadable: not JSON .*; its runner \\(pid ${pid}\\) still runs$`));
    await driver.stop("s", 5);
    expect(await alive(pid)).toBe(false);
    expect((await driver.observe())).toEqual([]);
  });
});

describe("a runner's log stays under its cap", () => {
  it("maintain moves a log over its cap ([slots] log_max_mb) to runner.log.1 and the running runner writes on at the start of runner.log; the slot's log tail reads across both", async () => {
    const cap = 64 * 1024;
    driver = new ProcessDriver({ stateDir, logMaxBytes: cap });
    const port = await freePort();
    await start(viewFor({ root: tmp, port }));
    const log = join(stateDir, "slots/s/runner.log");
    // A runner that wrote a great deal (its own descriptor, O_APPEND, is what writes next).
    await appendFile(log, `${"x".repeat(99)}\n`.repeat(cap / 100 + 10));
    await appendFile(log, "the last line before the move\n");
    await driver.maintain();
    expect((await stat(log)).size).toBeLessThan(1024);
    expect((await stat(`${log}.1`)).size).toBeLessThanOrEqual(cap);
    // The runner logs each request: its next line lands in the fresh runner.log, not past a hole.
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    await until(async () => (await logOf()).includes("GET /health 200"), 5000);
    const text = await logOf();
    expect(text.startsWith("\0")).toBe(false);
    expect(text).toMatch(/^\S+ GET \/health 200\n$/);
    const tail = await tailLog(log, 2);
    expect(tail.lines[0]).toBe("the last line before the move");
    expect(tail.lines.at(-1)).toMatch(/GET \/health 200$/);
    // Under the cap, nothing moves; with no cap (0), nothing ever does.
    await driver.maintain();
    expect(await logOf()).toBe(text);
    await appendFile(log, "y".repeat(2 * cap));
    await new ProcessDriver({ stateDir, logMaxBytes: 0 }).maintain();
    expect((await stat(log)).size).toBeGreaterThan(2 * cap);
    // The default is RUNNER_LOG_MAX_BYTES (16 MiB): this log is far below it.
    await new ProcessDriver({ stateDir }).maintain();
    expect((await stat(log)).size).toBeGreaterThan(2 * cap);
    expect(RUNNER_LOG_MAX_BYTES).toBe(16 * 1024 * 1024);
  });
});

describe("a runner's log that grew far past its cap", () => {
  it("keeps only the last log_max_mb of it, from a whole line, in runner.log.1: a chatty runner's log never doubles on the disk", async () => {
    const cap = 64 * 1024;
    const log = join(stateDir, "slots/s/runner.log");
    await mkdir(dirname(log), { recursive: true });
    // Ten times the cap written between two sweeps, numbered lines of 100 bytes.
    const lines = Array.from({ length: (10 * cap) / 100 }, (_, i) => `${String(i).padStart(8, "0")} ${"x".repeat(90)}`);
    await writeFile(log, `${lines.join("\n")}\n`);
    await new ProcessDriver({ stateDir, logMaxBytes: cap }).maintain();
    expect((await stat(log)).size).toBe(0);
    const kept = await readFile(`${log}.1`, "utf8");
    expect(kept.length).toBeLessThanOrEqual(cap);
    expect(kept.length).toBeGreaterThan(cap - 100);
    const keptLines = kept.split("\n").slice(0, -1);
    expect(keptLines[0]).toMatch(/^\d{8} x{90}$/); // a whole line, not the end of one
    expect(keptLines).toEqual(lines.slice(-keptLines.length));
  });
});

describe("a runner outlives the process that started it", () => {
  let bundle: string;
  beforeAll(async () => {
    bundle = await mkdtemp(join(tmpdir(), "hal0-driver-js-"));
    await transpileClosure(join(PROJECT, "reconciler/drivers/process.ts"), bundle);
    await writeFile(join(bundle, "starter.mjs"), [
      'import { ProcessDriver } from "./reconciler/drivers/process.js";',
      "const { stateDir, view, cwd } = JSON.parse(process.env.HAL0_TEST_START);",
      'const { pid } = await new ProcessDriver({ stateDir }).start("s", view, { healthTimeoutS: 10, cwd });',
      "process.stdout.write(JSON.stringify({ pid }));",
      "// no process.exit: the starter must be free to exit on its own",
    ].join("\n"));
  });
  afterAll(() => rm(bundle, { recursive: true, force: true }));

  it("keeps running after a short-lived starter exits on its own", async () => {
    const view = viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0" } });
    const starter: ChildProcess = spawn(process.execPath, [join(bundle, "starter.mjs")], {
      env: { ...process.env, HAL0_TEST_START: JSON.stringify({ stateDir, view, cwd: tmp }) },
      stdio: ["ignore", "pipe", "inherit"],
    });
    pids.add(starter.pid!);
    let out = "";
    starter.stdout!.on("data", (chunk) => (out += chunk));
    const exited = once(starter, "exit").then(([code]) => code as number | null);
    const code = await Promise.race([exited, sleep(5000).then(() => "still running after 5 s")]);
    expect(code).toBe(0);
    const { pid } = JSON.parse(out) as { pid: number };
    expect(await driver.observe()).toEqual([{ name: "s", running: true, health: "ok", record: { view, pid, started_at: expect.any(String) } }]);
    await driver.stop("s", 5);
    expect(await alive(pid)).toBe(false);
  });
});

/**
 * The wall clock stepped while a runner starts or stops (NTP correcting a box
 * that booted with its clock off, a person's `date -s`): only `Date` is faked,
 * and it goes on ticking from where it was set, as a stepped clock does; the
 * timers, the runner and its HTTP stay real.
 */
describe("a wall clock step during a start or a stop", () => {
  const stepClock = (byMs: number) => vi.setSystemTime(Date.now() + byMs);
  const fakeWallClock = () => {
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true });
    onTestFinished(() => void vi.useRealTimers());
  };

  it("a step forward while the model loads does not fail its start (slot.health_failed) and kill it: the health wait is on the monotonic clock", async () => {
    fakeWallClock();
    const view = viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "1500" } });
    const phases: StartPhase[] = [];
    const pid = await start(view, {
      healthTimeoutS: 600,
      onPhase: (phase) => {
        phases.push(phase);
        if (phase === "warming") stepClock(24 * 3600_000); // a day ahead, well past the 600 s it may load for
      },
    });
    expect(phases).toEqual(["starting", "warming", "ready"]);
    expect(await alive(pid)).toBe(true);
  });

  it("a step back while a runner ignores SIGTERM does not stretch its stop grace: it is killed once the grace is over", async () => {
    const pid = await start(viewFor({ root: tmp, port: await freePort(), env: { HAL0_FAKE_LOAD_MS: "0", HAL0_FAKE_IGNORE_SIGTERM: "1" } }));
    fakeWallClock();
    const stopping = driver.stop("s", 1);
    await until(async () => (await logOf()).includes("ignoring SIGTERM"));
    stepClock(-24 * 3600_000); // a day back, mid-grace: a grace measured on it would last a day
    await stopping;
    expect(await alive(pid)).toBe(false);
    expect(existsSync(recordPath())).toBe(false);
  }, 30_000);
});
