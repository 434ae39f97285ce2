import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Dockerode from "dockerode";
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { runnerKey } from "../../compiler/runner-facts.js";
import { FLAG_TABLE_VERSION, parseLlamaHelp } from "../../compiler/runner-help.js";
import { dockerClient } from "../../reconciler/drivers/docker.js";
import { HAL0_BIN } from "../../reconciler/drivers/runner.js";
import { FAILED_PROBE_MEMORY_MS, STALE_PROBE_CONTAINER_S, RunnerProbe, RUNNERS_FILE, type ProbeTarget } from "../../reconciler/runner-probe.js";
import { dockerEngine, ensureRunnerImage, RUNNER_IMAGE } from "./docker-helpers.js";
import { alive, PROJECT, until } from "./process-helpers.js";

/**
 * The runner probe against real processes: hal0's stand-in llama-server
 * (bin/hal0-fake-llama-server) and small shell scripts written per test; and,
 * with a Docker engine, the runner image (hal0-runner:local).
 */

const FACTS = join(PROJECT, "fixtures/llama-server");
const FAKE = "hal0-fake-llama-server";
const ENV = { PATH: process.env.PATH };
const dirs: string[] = [];

function tempDir(stem: string): string {
  const dir = mkdtempSync(join(tmpdir(), `hal0-probe-${stem}-`));
  dirs.push(dir);
  return dir;
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** An executable shell script at `dir/name`. */
function script(dir: string, name: string, body: string, mode = 0o755): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, mode);
  return path;
}

/** A llama-server-like script: `--version` on stderr, `--help` from a recorded help file. */
function llamaScript(dir: string, name: string, version: string, helpFile: string): string {
  return script(dir, name, [
    'case "$1" in',
    `  --version) printf '%s\\n' ${JSON.stringify(version)} 'built with cc (Debian 12.2.0-14+deb12u1) 12.2.0 for x86_64-linux-gnu' >&2 ;;`,
    `  --help) cat ${JSON.stringify(join(FACTS, helpFile))} ;;`,
    "  *) exit 2 ;;",
    "esac",
  ].join("\n"));
}

const proc = (word: string): ProbeTarget => ({ runtime: "process", word });

describe("RunnerProbe: process runners", () => {
  it("asks the stand-in llama-server --version and --help once; a new probe on the same state folder runs nothing", async () => {
    const state = tempDir("state");
    const root = tempDir("root");
    const first = new RunnerProbe({ stateDir: state, root, env: ENV, timeoutMs: 10_000 });
    const cold = await first.probe([proc(FAKE)]);
    const key = runnerKey("process", FAKE);
    expect(cold.failed).toEqual(new Map());
    expect(cold.missing).toEqual(new Map());
    expect(cold.probed).toBe(2);
    expect(first.runs).toBe(2);
    const facts = cold.index.get(key)!;
    expect(facts.version).toMatchObject({ kind: "llama-server", build: 9749, commit: "d32676d77" });
    expect(facts.flags?.byName.get("--spec-type")).toBeDefined();
    expect(facts.dialect?.spec_type).toBe(true);
    expect(facts.source).toMatch(new RegExp(`^${join(HAL0_BIN!, FAKE)} \\(size \\d+ bytes, modified \\d{4}-\\d\\d-\\d\\dT.*Z\\)$`));

    // The cache: raw texts with the binary's path, size and mtime, and the flags parsed from the help text.
    const file = JSON.parse(readFileSync(join(state, RUNNERS_FILE), "utf8"));
    expect(file).toMatchObject({ kind: "hal0-runners", version: 1 });
    const entry = file.binaries[join(HAL0_BIN!, FAKE)];
    expect(entry).toMatchObject({ size: expect.any(Number), mtime_ms: expect.any(Number), version_text: readFileSync(join(FACTS, "version.txt"), "utf8") });
    expect(entry.help_text).toContain("--spec-type");
    expect(entry.flag_table).toEqual({ version: FLAG_TABLE_VERSION, flags: JSON.parse(JSON.stringify(parseLlamaHelp(entry.help_text).flags)) });

    const second = new RunnerProbe({ stateDir: state, root, env: ENV });
    const warm = await second.probe([proc(FAKE)]);
    expect(warm.probed).toBe(0);
    expect(second.runs).toBe(0);
    expect(warm.index.get(key)).toEqual(facts);

    // cached(): synchronous, from the file alone.
    const third = new RunnerProbe({ stateDir: state, root, env: ENV });
    expect(third.cached([proc(FAKE)]).get(key)).toEqual(facts);
    expect(third.runs).toBe(0);
  });

  it("reads the parsed flags back under their FLAG_TABLE_VERSION, parses the help again under another, and asks again when the stored table is malformed", async () => {
    const state = tempDir("state");
    const root = tempDir("root");
    const key = runnerKey("process", FAKE);
    const facts = (await new RunnerProbe({ stateDir: state, root, env: ENV }).probe([proc(FAKE)])).index.get(key)!;
    const path = join(state, RUNNERS_FILE);
    const stored = JSON.parse(readFileSync(path, "utf8"));
    const entry = stored.binaries[join(HAL0_BIN!, FAKE)];
    const withTable = (table: unknown) => writeFileSync(path, JSON.stringify({ ...stored, binaries: { [join(HAL0_BIN!, FAKE)]: { ...entry, flag_table: table } } }));
    // The stored table is what the facts are built from (one flag kept: the facts have one).
    withTable({ version: FLAG_TABLE_VERSION, flags: [entry.flag_table.flags.find((f: { canonical: string }) => f.canonical === "--spec-type")] });
    const one = new RunnerProbe({ stateDir: state, root, env: ENV });
    expect(one.cached([proc(FAKE)]).get(key)?.flags?.flags.map((f) => f.canonical)).toEqual(["--spec-type"]);
    expect(one.runs).toBe(0);
    // A table of another parser version is not read: the help text is parsed again.
    withTable({ version: FLAG_TABLE_VERSION + 1, flags: [] });
    const other = new RunnerProbe({ stateDir: state, root, env: ENV });
    expect(other.cached([proc(FAKE)]).get(key)).toEqual(facts);
    expect(JSON.parse(readFileSync(path, "utf8")).binaries[join(HAL0_BIN!, FAKE)].flag_table.version).toBe(FLAG_TABLE_VERSION + 1);
    // The next probe (not cached(), which writes nothing) stores this parser's table, without asking the runner again.
    // So does it for an entry stored before flag tables were kept.
    for (const table of [{ version: FLAG_TABLE_VERSION + 1, flags: [] }, undefined]) {
      withTable(table);
      const upgrading = new RunnerProbe({ stateDir: state, root, env: ENV });
      const upgraded = await upgrading.probe([proc(FAKE)]);
      expect(upgrading.runs).toBe(0);
      expect(upgraded.index.get(key)).toEqual(facts);
      const after = JSON.parse(readFileSync(path, "utf8")).binaries[join(HAL0_BIN!, FAKE)];
      expect(after).toEqual({ ...entry, flag_table: { version: FLAG_TABLE_VERSION, flags: entry.flag_table.flags } });
    }
    // A malformed table drops the entry: the runner is asked again, and the cache holds a good table after.
    withTable({ version: FLAG_TABLE_VERSION, flags: [{ names: "--spec-type" }] });
    const again = new RunnerProbe({ stateDir: state, root, env: ENV });
    const reprobed = await again.probe([proc(FAKE)]);
    expect(again.runs).toBe(2);
    expect(reprobed.index.get(key)).toEqual(facts);
    expect(JSON.parse(readFileSync(path, "utf8")).binaries[join(HAL0_BIN!, FAKE)].flag_table.version).toBe(FLAG_TABLE_VERSION);
  });

  it("an older llama-server speaks the older dialect; a changed binary is asked again, an unchanged one never", async () => {
    const state = tempDir("state");
    const root = tempDir("root");
    const path = llamaScript(root, "llama-server", "version: 4748 (c392e5094)", "older-help.txt");
    const key = runnerKey("process", "./llama-server");
    const probe = new RunnerProbe({ stateDir: state, root, env: ENV });
    const old = await probe.probe([proc("./llama-server")]);
    expect(old.failed).toEqual(new Map());
    const facts = old.index.get(key)!;
    expect(facts.version).toMatchObject({ kind: "llama-server", build: 4748, commit: "c392e5094" });
    expect(facts.flags?.byName.has("--spec-type")).toBe(false);
    expect(facts.flags?.byName.has("--model-draft")).toBe(true);
    expect(facts.dialect?.spec_type).toBe(false);
    expect(facts.source.startsWith(`${path} (size `)).toBe(true);
    expect(probe.runs).toBe(2);
    expect((await probe.probe([proc("./llama-server")])).probed).toBe(0);

    // Rebuilt: another size and mtime.
    llamaScript(root, "llama-server", "version: 9749 (d32676d77)", "help.txt");
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    expect(new RunnerProbe({ stateDir: state, root, env: ENV }).cached([proc("./llama-server")]).has(key)).toBe(false); // stale: not shown
    const renewed = await probe.probe([proc("./llama-server")]);
    expect(renewed.probed).toBe(2);
    expect(renewed.index.get(key)!.version.build).toBe(9749);
    expect(renewed.index.get(key)!.flags?.byName.has("--spec-type")).toBe(true);
    const later = new RunnerProbe({ stateDir: state, root, env: ENV });
    expect(later.cached([proc("./llama-server")]).get(key)!.version.build).toBe(9749);
    expect((await later.probe([proc("./llama-server")])).probed).toBe(0);
  });

  it("a probe that read the cache earlier takes what another one wrote since, instead of running the runner again", async () => {
    const state = tempDir("state");
    const root = tempDir("root");
    llamaScript(root, "llama-server", "version: 4748 (c392e5094)", "older-help.txt");
    const serve = new RunnerProbe({ stateDir: state, root, env: ENV });
    expect(serve.cached([proc("./llama-server")]).size).toBe(0); // read (nothing there yet)
    const cli = new RunnerProbe({ stateDir: state, root, env: ENV });
    expect((await cli.probe([proc("./llama-server")])).probed).toBe(2);
    const result = await serve.probe([proc("./llama-server")]);
    expect(result.probed).toBe(0);
    expect(result.index.get(runnerKey("process", "./llama-server"))!.version.build).toBe(4748);
  });

  it("a runner that is not llama-server is asked --version only (never --help)", async () => {
    const root = tempDir("root");
    const marker = join(root, "help-was-asked");
    script(root, "kokoro-server", [
      'case "$1" in',
      "  --version) echo 'kokoro-server 1.2.0' ;;",
      `  --help) touch ${JSON.stringify(marker)}; echo usage ;;`,
      "esac",
    ].join("\n"));
    const probe = new RunnerProbe({ stateDir: null, root, env: ENV });
    const result = await probe.probe([proc("./kokoro-server")]);
    const facts = result.index.get(runnerKey("process", "./kokoro-server"))!;
    expect(facts.version).toEqual({ kind: "other", build: null, commit: null, line: "kokoro-server 1.2.0" });
    expect(facts.flags).toBeNull();
    expect(facts.dialect).toBeNull();
    expect(result.probed).toBe(1);
    expect(existsSync(marker)).toBe(false);
  });

  it("asks a runner with the base a runner starts from, never a secret of hal0's environment", async () => {
    const root = tempDir("root");
    const seen = join(root, "env");
    script(root, "tts-server", `env > ${JSON.stringify(seen)}; echo 'tts-server 0.1'`);
    const probe = new RunnerProbe({ stateDir: null, root, env: { ...ENV, HAL0_TOKEN: "hal0-secret", OPENAI_API_KEY: "sk-secret", HIP_VISIBLE_DEVICES: "0" } });
    expect((await probe.probe([proc("./tts-server")])).failed).toEqual(new Map());
    const env = readFileSync(seen, "utf8");
    expect(env).not.toMatch(/hal0-secret|sk-secret/);
    expect(env).toMatch(/^HIP_VISIBLE_DEVICES=0$/m);
  });

  it("a word on no PATH is missing (not_found, the folders searched); a file that may not be run is not_executable", async () => {
    const root = tempDir("root");
    const onPath = tempDir("path");
    script(root, "plain", "echo hi", 0o644);
    const probe = new RunnerProbe({ stateDir: null, root, env: { PATH: onPath }, bin: null });
    const result = await probe.probe([proc("no-such-runner-xyz"), proc("./plain")]);
    expect(result.missing.get(runnerKey("process", "no-such-runner-xyz"))).toEqual({ problem: "not_found", searched: [onPath] });
    expect(result.missing.get(runnerKey("process", "./plain"))).toEqual({ problem: "not_executable", searched: [join(root, "plain")], candidate: join(root, "plain") });
    expect(result.index.size).toBe(0);
    expect(result.probed).toBe(0);
  });

  it("a runner that hangs on --version fails with a timeout, its process group killed; it is not asked again at once", async () => {
    const root = tempDir("root");
    const pids = join(root, "pids");
    script(root, "mute", `sleep 30 &\necho "$$ $!" > ${JSON.stringify(pids)}\nwait`);
    const probe = new RunnerProbe({ stateDir: tempDir("state"), root, env: ENV, timeoutMs: 500 });
    const key = runnerKey("process", "./mute");
    const started = Date.now();
    const result = await probe.probe([proc("./mute")]);
    const took = Date.now() - started;
    expect(result.failed.get(key)).toBe("--version: no answer within 0.5 s; stopped it");
    expect(took).toBeGreaterThanOrEqual(450);
    expect(took).toBeLessThan(2500);
    const [shell, sleeper] = readFileSync(pids, "utf8").trim().split(" ").map(Number);
    expect(await alive(shell!)).toBe(false);
    expect(await alive(sleeper!)).toBe(false); // the runner's child went with its group
    expect(result.index.has(key)).toBe(false);
    // Remembered for a while: the next probe does not start it again.
    const again = await probe.probe([proc("./mute")]);
    expect(again.failed.get(key)).toBe("--version: no answer within 0.5 s; stopped it");
    expect(again.probed).toBe(0);
    expect(probe.runs).toBe(1);
  });

  it("a runner whose --version answers and leaves a background child behind: the child is killed with the probe's group", async () => {
    const root = tempDir("root");
    const pids = join(root, "pids");
    script(root, "spawner", `sleep 30 >/dev/null 2>&1 &\necho $! > ${JSON.stringify(pids)}\necho 'spawner 1.0'`);
    const probe = new RunnerProbe({ stateDir: null, root, env: ENV });
    const result = await probe.probe([proc("./spawner")]);
    expect(result.index.get(runnerKey("process", "./spawner"))!.version.line).toBe("spawner 1.0");
    const sleeper = Number(readFileSync(pids, "utf8"));
    await until(async () => !(await alive(sleeper)), 2000); // SIGKILLed as the probe ended
  });

  it("a runner whose --version exits non-zero fails, saying so, and is not cached", async () => {
    const root = tempDir("root");
    const state = tempDir("state");
    script(root, "broken", "echo 'error: unknown option --version' >&2\nexit 3");
    const probe = new RunnerProbe({ stateDir: state, root, env: ENV });
    const result = await probe.probe([proc("./broken")]);
    expect(result.failed.get(runnerKey("process", "./broken"))).toBe("--version: exited with code 3: error: unknown option --version");
    const file = JSON.parse(readFileSync(join(state, RUNNERS_FILE), "utf8")); // its lookup is kept, no texts
    expect(file.binaries).toEqual({});
  });

  it("a runner that failed is asked again once FAILED_PROBE_MEMORY_MS has passed, however the clock was stepped meanwhile", async () => {
    const root = tempDir("root");
    const state = tempDir("state");
    // Fails until a file it needs is there: the binary itself never changes (a changed one is asked again at once).
    script(root, "flaky", [
      `[ -f ${JSON.stringify(join(root, "fixed"))} ] || exit 3`,
      'case "$1" in',
      "  --version) echo 'version: 9749 (d32676d77)' >&2 ;;",
      `  --help) cat ${JSON.stringify(join(FACTS, "help.txt"))} ;;`,
      "esac",
    ].join("\n"));
    // Date and the monotonic clock are faked: time is moved by hand, and the wall clock stepped back a day as NTP steps it.
    vi.useFakeTimers({ toFake: ["Date", "performance"] });
    onTestFinished(() => void vi.useRealTimers());
    const probe = new RunnerProbe({ stateDir: state, root, env: ENV });
    const key = runnerKey("process", "./flaky");
    expect((await probe.probe([proc("./flaky")])).failed.get(key)).toMatch(/exited with code 3/);
    writeFileSync(join(root, "fixed"), ""); // fixed on the host
    expect((await probe.probe([proc("./flaky")])).failed.has(key)).toBe(true); // within the memory: not asked again yet
    vi.setSystemTime(Date.now() - 24 * 3600_000);
    vi.advanceTimersByTime(FAILED_PROBE_MEMORY_MS + 1000);
    const again = await probe.probe([proc("./flaky")]);
    expect(again.failed.has(key)).toBe(false);
    expect(again.index.get(key)).toBeDefined();
  });

  it("a corrupt or foreign runners.json is ignored (the runner is asked, the file rewritten)", async () => {
    const root = tempDir("root");
    llamaScript(root, "llama-server", "version: 4748 (c392e5094)", "older-help.txt");
    for (const text of ["{not json", JSON.stringify({ kind: "something-else", binaries: 3 }), "[]", JSON.stringify({ kind: "hal0-runners", version: 1, binaries: { "/x": { size: "big" } }, images: null })]) {
      const state = tempDir("state");
      writeFileSync(join(state, RUNNERS_FILE), text);
      const probe = new RunnerProbe({ stateDir: state, root, env: ENV });
      expect(probe.cached([proc("./llama-server")]).size).toBe(0);
      const result = await probe.probe([proc("./llama-server")]);
      expect(result.probed).toBe(2);
      expect(result.index.get(runnerKey("process", "./llama-server"))!.version.build).toBe(4748);
      expect(JSON.parse(readFileSync(join(state, RUNNERS_FILE), "utf8")).kind).toBe("hal0-runners");
    }
  });

  it("one binary asked for at once (two calls, two words for it) runs once; distinct runners run side by side", async () => {
    const root = tempDir("root");
    const path = llamaScript(root, "llama-server", "version: 4748 (c392e5094)", "older-help.txt");
    // Each slow runner notes when it started and ended (ns): side by side, their runs overlap.
    for (const name of ["tts", "stt"]) script(root, name, `date +%s%N > ${name}.start\nsleep 0.5\ndate +%s%N > ${name}.end\necho '${name} 0.1'`);
    const probe = new RunnerProbe({ stateDir: tempDir("state"), root, env: ENV });
    const [a, b, c] = await Promise.all([
      probe.probe([proc("./llama-server"), proc(path)]),
      probe.probe([proc("./llama-server")]),
      probe.probe([proc("./tts"), proc("./stt")]),
    ]);
    expect(probe.runs).toBe(4); // llama-server's --version and --help, tts's and stt's --version
    expect(a.probed + b.probed).toBe(2);
    expect(c.probed).toBe(2);
    expect(a.index.get(runnerKey("process", path))).toEqual(b.index.get(runnerKey("process", "./llama-server")));
    expect(c.index.get(runnerKey("process", "./tts"))!.version.line).toBe("tts 0.1");
    const at = (file: string) => BigInt(readFileSync(join(root, file), "utf8").trim());
    expect(at("tts.start") < at("stt.end") && at("stt.start") < at("tts.end")).toBe(true);
  });

  it("stateDir null keeps the facts in memory only", async () => {
    const root = tempDir("root");
    const probe = new RunnerProbe({ stateDir: null, root, env: ENV, timeoutMs: 10_000 });
    expect((await probe.probe([proc(FAKE)])).probed).toBe(2);
    expect((await probe.probe([proc(FAKE)])).probed).toBe(0);
    expect(probe.cached([proc(FAKE)]).get(runnerKey("process", FAKE))?.version.build).toBe(9749);
  });

  it("a docker target without an engine, or with one that does not answer, fails, running nothing", async () => {
    const root = tempDir("root");
    const key = runnerKey("docker", RUNNER_IMAGE);
    const none = await new RunnerProbe({ stateDir: null, root }).probe([{ runtime: "docker", word: RUNNER_IMAGE }]);
    expect(none.failed.get(key)).toMatch(/^no Docker engine is configured/);
    expect(none.probed).toBe(0);
    const gone = await new RunnerProbe({ stateDir: null, root, docker: () => dockerClient(join(root, "no-engine.sock")) }).probe([{ runtime: "docker", word: RUNNER_IMAGE }]);
    expect(gone.failed.get(key)).toMatch(/^the Docker engine does not answer: .*ENOENT/);
    const bad = await new RunnerProbe({ stateDir: null, root, docker: () => dockerClient("tcp://example.com:2375") }).probe([{ runtime: "docker", word: RUNNER_IMAGE }]);
    expect(bad.failed.get(key)).toMatch(/^no Docker engine: docker engine address/);
  });
});

const SUITE = "RunnerProbe: docker runners (real Docker engine)";
const docker = await dockerEngine(SUITE);

describe.skipIf(docker === undefined)(SUITE, () => {
  const engine = docker as Dockerode;
  // This suite's own tag of the runner image, so probe containers of other suites running at the same time (hal0 apply on the docker runtime) are not counted.
  const IMAGE = "hal0-runner-probe-test:local";
  const probeContainers = () => engine.listContainers({ all: true, filters: { label: [`hal0.runner-probe=${IMAGE}`] } });
  beforeAll(async () => {
    await ensureRunnerImage(engine);
    await engine.getImage(RUNNER_IMAGE).tag({ repo: "hal0-runner-probe-test", tag: "local" });
  }, 120_000);
  afterAll(async () => {
    await engine.getImage(IMAGE).remove().catch(() => undefined); // the tag only: the image stays
  });
  afterEach(async () => {
    expect(await probeContainers()).toEqual([]); // every probe container is removed
  });

  it("asks the runner image --version and --help in containers, once per image id", async () => {
    const state = tempDir("state");
    const root = tempDir("root");
    const target: ProbeTarget = { runtime: "docker", word: IMAGE };
    const key = runnerKey("docker", IMAGE);
    const id = (await engine.getImage(IMAGE).inspect()).Id;
    const probe = new RunnerProbe({ stateDir: state, root, docker: () => engine, timeoutMs: 20_000 });
    const cold = await probe.probe([target]);
    expect(cold.failed).toEqual(new Map());
    expect(cold.probed).toBe(2);
    const facts = cold.index.get(key)!;
    expect(facts.version).toMatchObject({ kind: "llama-server", build: 9749 });
    expect(facts.flags?.byName.get("--spec-type")).toBeDefined();
    expect(facts.source).toBe(`image ${IMAGE} (${id})`);
    const file = JSON.parse(readFileSync(join(state, RUNNERS_FILE), "utf8"));
    expect(file.image_refs[IMAGE]).toBe(id);
    expect(file.images[id].help_text).toContain("--spec-type");

    const again = new RunnerProbe({ stateDir: state, root, docker: () => engine });
    const warm = await again.probe([target]);
    expect(warm.probed).toBe(0);
    expect(warm.index.get(key)).toEqual(facts);
    expect(new RunnerProbe({ stateDir: state, root }).cached([target]).get(key)).toEqual(facts); // no engine asked
  }, 60_000);

  it("a container that does not answer in time is killed and removed; the image is failed", async () => {
    const probe = new RunnerProbe({ stateDir: null, root: tempDir("root"), docker: () => engine, timeoutMs: 1 });
    const result = await probe.probe([{ runtime: "docker", word: IMAGE }]);
    expect(result.failed.get(runnerKey("docker", IMAGE))).toBe("--version: no answer within 0.001 s; stopped it");
    expect(result.probed).toBe(1);
  }, 30_000);

  it("an image that is not present fails, and is not pulled; the reason says a start pulls it with [slots] pull = true (not that hal0 never pulls)", async () => {
    const ref = "hal0-no-such-image:never";
    const probe = new RunnerProbe({ stateDir: null, root: tempDir("root"), docker: () => engine });
    const result = await probe.probe([{ runtime: "docker", word: ref }]);
    expect(result.failed.get(runnerKey("docker", ref))).toBe(`image ${ref} is not present (the probe pulls nothing; with [slots] pull = true a slot's start pulls it)`);
    expect(result.probed).toBe(0);
    expect(await engine.getImage(ref).inspect().then(() => true, () => false)).toBe(false);
  });

  it("removes the stopped probe containers a hal0 killed mid-probe left behind, when it next runs one; never a recent one", async () => {
    const id = (await engine.getImage(IMAGE).inspect()).Id;
    const leftover = () => engine.createContainer({ Image: id, Cmd: ["--version"], Labels: { "hal0.runner-probe": IMAGE }, HostConfig: { NetworkMode: "none" } });
    const probeNow = () => new RunnerProbe({ stateDir: null, root: tempDir("root"), docker: () => engine, timeoutMs: 20_000 }).probe([{ runtime: "docker", word: IMAGE }]);
    // Created just now: a probe may still be reading it, so it stays.
    const recent = await leftover();
    expect((await probeNow()).failed).toEqual(new Map());
    expect((await probeContainers()).map((c) => c.Id)).toEqual([recent.id]);
    // Seen STALE_PROBE_CONTAINER_S + 1 s later (the probe's clock moved on), it is one a dead hal0 left: removed.
    const realNow = Date.now;
    Date.now = () => realNow() + (STALE_PROBE_CONTAINER_S + 1) * 1000;
    try {
      expect((await probeNow()).failed).toEqual(new Map());
    } finally {
      Date.now = realNow;
    }
    expect(await probeContainers()).toEqual([]);
  }, 60_000);

  it("removes a probe container left running (its runner hangs; the hal0 waiting for it was stopped), once it is stale", async () => {
    const id = (await engine.getImage(IMAGE).inspect()).Id;
    // The stand-in serves when given no --version: a probe run that never ends.
    const hung = await engine.createContainer({ Image: id, Cmd: ["--port", "8080"], Labels: { "hal0.runner-probe": IMAGE }, HostConfig: { NetworkMode: "none" } });
    await hung.start();
    expect((await hung.inspect()).State.Running).toBe(true);
    const realNow = Date.now;
    Date.now = () => realNow() + (STALE_PROBE_CONTAINER_S + 1) * 1000;
    try {
      expect((await new RunnerProbe({ stateDir: null, root: tempDir("root"), docker: () => engine, timeoutMs: 20_000 }).probe([{ runtime: "docker", word: IMAGE }])).failed).toEqual(new Map());
    } finally {
      Date.now = realNow;
    }
    expect(await probeContainers()).toEqual([]);
  }, 60_000);
});
