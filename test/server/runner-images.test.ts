import { execFileSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/main.js";
import { DockerDriver } from "../../reconciler/drivers/docker.js";
import { RunnerProbe } from "../../reconciler/runner-probe.js";
import { StateStore } from "../../reconciler/state.js";
import { captureIo, startServe } from "../cli/helpers.js";
import { registryAvailable, startRegistry, type TestRegistry } from "../helpers/registry.js";
import { until as untilWithin } from "../helpers/until.js";
import { DOCKER_HOST, dockerEngine, ensureRunnerImage, removeContainers, slotName } from "../reconciler/docker-helpers.js";
import { freePort, PROJECT } from "../reconciler/process-helpers.js";
import { httpCall, openEventStream, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/**
 * Runner images against a real engine and a real registry (Debian's
 * docker-registry on loopback): a box whose profile names an image of that
 * registry sees it absent, syncs it (an operator over REST; an agent over
 * MCP, approved), watches the pull over server-sent events, and reads its
 * id and digest; a different image pushed under the same tag moves it on
 * the next sync, and `hal0 plan` replaces the slot that runs it, saying
 * `image digest changed`. `[slots] pull = false` refuses every pull.
 */
const SUITE = "runner images (real Docker engine, local registry)";
const docker = await dockerEngine(SUITE);
const registry = registryAvailable(SUITE);
const FAKE = "hal0-fake-runner:local";

function cli(...args: string[]): string {
  return execFileSync("docker", args, { env: { ...process.env, DOCKER_HOST }, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** The helper's wait, with the 30 s an image pull may take here. */
const until = <T>(what: () => Promise<T>, ok: (v: T) => boolean) => untilWithin(what, ok, 30_000);

describe.skipIf(docker === undefined || !registry)(SUITE, () => {
  let reg: TestRegistry;
  let s: TestServer;
  let dir: string;
  let box: string;
  let image: string;
  let built: string | undefined;
  const slot = slotName("voice");
  const fakeId = () => cli("image", "inspect", "--format", "{{.Id}}", FAKE).trim();

  beforeAll(async () => {
    await ensureRunnerImage(docker!);
    reg = await startRegistry();
    image = `${reg.host}/hal0-test/voice-${randomBytes(3).toString("hex")}:1`;
    // The registry holds the stand-in under `image`; the engine then forgets that name, so the box starts without it.
    cli("tag", FAKE, image);
    cli("push", image);
    cli("image", "rm", image);

    dir = mkdtempSync(join(tmpdir(), "hal0-images-"));
    const config = join(dir, "config");
    mkdirSync(join(config, "slots"), { recursive: true });
    writeFileSync(join(config, "hal0.toml"), `[slots]\nruntime = "docker"\ndocker_host = ${JSON.stringify(DOCKER_HOST)}\npull = true\nport_range_start = 1024\nport_range_end = 65535\nstop_grace_s = 1\nhealth_timeout_s = 60\n`);
    // The example box's profiles (every seed on hal0-runner:local / hal0-fake-runner:local, built here), and one on the registry's image.
    writeFileSync(join(config, "profiles.toml"), `${readFileSync(join(PROJECT, "fixtures/box/profiles.toml"), "utf8")}\n[profile.voice]\nimage = ${JSON.stringify(image)}\nrunner = ["hal0-fake-runner"]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, `slots/${slot}.toml`), `profile = "voice"\ntype = "tts"\nport = ${await freePort()}\n`);
    writeFileSync(join(config, "capabilities.toml"), '[[backend]]\nid = "llama.cpp"\nkind = "llama-server"\ndevices = ["gpu-rocm", "gpu-vulkan", "cpu"]\n\n[[backend]]\nid = "fastflowlm"\nkind = "flm"\ndevices = ["npu"]\n\n[[backend]]\nid = "kokoro"\nkind = "kokoro"\n');
    const state = join(dir, "state");
    box = await new StateStore(state).boxId();
    s = await startTestServer({
      reuse: { dir }, keep: true,
      extra: {
        driverFor: async (model) => new DockerDriver({ docker: docker!, box, stateDir: state, stopGraceS: 1, pull: model.settings.slots.pull }),
        runners: new RunnerProbe({ stateDir: state, root: config, docker: () => docker }),
      },
    });
  }, 120_000);

  afterAll(async () => {
    await s?.close();
    if (docker) await removeContainers(docker, box);
    if (docker && image) {
      // Every name this suite gave an image, the registry digests too (`repo@sha256:…`), so the shared engine keeps none of them.
      const repo = image.slice(0, image.lastIndexOf(":"));
      const refs = (await docker.listImages()).flatMap((i) => i.RepoDigests ?? []).filter((d) => d.startsWith(`${repo}@`));
      for (const name of [image, ...refs, built]) if (name) await docker.getImage(name).remove().catch(() => undefined);
    }
    await reg?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const row = async (ref: string) => ((await s.call("GET", "/api/runner-images")).body.images as Array<Record<string, any>>).find((r) => r.image === ref)!;
  const pullOf = async (id: string) => ((await s.call("GET", "/api/runner-images/pulls/list")).body as Array<Record<string, any>>).find((p) => p.id === id)!;
  const ended = (id: string) => until(() => pullOf(id), (p) => p.state !== "pulling");
  const plan = async () => {
    const io = captureIo({ DOCKER_HOST, PATH: process.env.PATH ?? "" });
    const code = await main(["plan", "--config", s.config, "--state", s.state], io);
    expect(code, io.err()).toBe(0);
    return io.out();
  };
  const apply = async () => {
    const io = captureIo({ DOCKER_HOST, PATH: process.env.PATH ?? "" });
    expect(await main(["apply", "--yes", "--config", s.config, "--state", s.state], io), io.err() + io.out()).toBe(0);
    return io.out();
  };

  it("lists the registry image absent; an operator's sync pulls it, progress over SSE; the list then has its id, digest, size and build time", async () => {
    const before = await s.call("GET", "/api/runner-images");
    expect(before.status, JSON.stringify(before.body)).toBe(200);
    expect(before.body).toMatchObject({ runtime: "docker", engine: DOCKER_HOST, pull: true });
    expect(await row(image)).toEqual({ image, profiles: ["voice"], slots: [slot], present: false });
    expect(await row("hal0-runner:local")).toMatchObject({ present: true, digest: null });
    expect((await s.call("GET", "/api/runner-images/downloaded")).body.images.map((r: { image: string }) => r.image)).not.toContain(image);

    const stream = await openEventStream(s.url, "/api/runner-images/pulls/events", s.operator, /event: state\ndata: .*"state":"done"/);
    expect(stream.contentType).toContain("text/event-stream");
    await until(async () => stream.text(), (t) => t.includes("event: snapshot"));

    const sync = await s.call("POST", "/api/runner-images/sync");
    expect(sync.status, JSON.stringify(sync.body)).toBe(202);
    expect(sync.body.pulls.map((p: { image: string }) => p.image)).toEqual([image]);
    expect(sync.body.skipped.map((p: { image: string }) => p.image).sort()).toEqual(["hal0-fake-runner:local", "hal0-runner:local"]);
    const done = await ended(sync.body.pulls[0].id);
    expect(done).toMatchObject({ state: "done", before: null, after: fakeId(), changed: true, requested_by: "operator:owner", error: null });
    await Promise.race([stream.done, sleep(5000)]);
    stream.close();
    const events = [...stream.text().matchAll(/event: (state|progress)\ndata: (.*)/g)].map((m) => ({ type: m[1], pull: JSON.parse(m[2]!).pull }));
    expect(events.filter((e) => e.type === "state").map((e) => e.pull.state)).toEqual(["pulling", "done"]);
    expect(events.some((e) => e.type === "progress" && typeof e.pull.progress.status === "string")).toBe(true);

    const after = await row(image);
    const pushed = cli("image", "inspect", "--format", "{{json .RepoDigests}}", image);
    expect(after).toMatchObject({ present: true, id: fakeId(), size_bytes: expect.any(Number), created: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    expect(after.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(JSON.parse(pushed)).toContain(`${image.slice(0, image.lastIndexOf(":"))}@${after.digest}`);
    expect((await s.call("GET", "/api/runner-images/downloaded")).body.images.map((r: { image: string }) => r.image)).toContain(image);
  }, 120_000);

  it("an agent's runner_image_sync over MCP waits for an operator; approved, it runs (nothing moved); runner_image_pulls wraps as pulls", async () => {
    const c = await adminClient(s.url, "hermes__coder");
    const queued = await callTool(c, "runner_image_sync", {});
    expect(queued.body).toMatchObject({ status: "pending_approval" });
    const approved = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    const started = (await callTool(c, "runner_image_pulls", {})).body;
    expect(started.count).toBe(started.pulls.length);
    const mine = started.pulls.find((p: { requested_by: string }) => p.requested_by === "agent:hermes__coder");
    expect(mine).toMatchObject({ image, approved_by: "operator:owner" });
    expect(await ended(mine.id)).toMatchObject({ state: "done", before: fakeId(), after: fakeId(), changed: false });
    await c.close();
  }, 60_000);

  it("a different image under the same tag: sync moves it, `hal0 plan` says image digest changed for the slot that runs it, and apply replaces it", async () => {
    expect(await apply()).toContain(`slot.${slot}`);
    const running = async () => (await docker!.listContainers({ filters: { label: [`hal0.box=${box}`, `hal0.slot=${slot}`] } }))[0];
    expect((await running())?.ImageID).toBe(fakeId());
    expect(await plan()).toContain("No changes.");

    // Someone pushes another build under the same tag; this engine still has the old one under that name.
    built = `hal0-test-voice-next:${randomBytes(3).toString("hex")}`;
    execFileSync("docker", ["build", "--quiet", "--tag", built, "-"], { env: { ...process.env, DOCKER_HOST, DOCKER_BUILDKIT: "0" }, input: `FROM ${FAKE}\nLABEL hal0.test=${built}\n`, stdio: ["pipe", "pipe", "pipe"] });
    const nextId = cli("image", "inspect", "--format", "{{.Id}}", built).trim();
    expect(nextId).not.toBe(fakeId());
    cli("tag", built, image);
    cli("push", image);
    cli("tag", FAKE, image);
    expect(await plan()).toContain("No changes.");

    const sync = await s.call("POST", "/api/runner-images/sync");
    expect(sync.status, JSON.stringify(sync.body)).toBe(202);
    expect(await ended(sync.body.pulls[0].id)).toMatchObject({ state: "done", before: fakeId(), after: nextId, changed: true });
    expect((await row(image)).id).toBe(nextId);

    const text = await plan();
    expect(text).toContain(`-/+ slot.${slot} (observed_changed: image digest changed) [destructive] [downtime]`);
    expect(text).toContain(`observed.image_digest: "${fakeId()}" → "${nextId}"`);
    expect(await apply()).toContain(`slot.${slot}`);
    expect((await running())?.ImageID).toBe(nextId);
    expect(await plan()).toContain("No changes.");
  }, 180_000);

  it("slot_pull_image pulls one slot's image; slot_pull_status shows it and its newest pull; bad slots are refused", async () => {
    const started = await s.call("POST", `/api/slots/${slot}/pull`);
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    expect(started.body.pull).toMatchObject({ image, state: "pulling" });
    await ended(started.body.pull.id);
    const status = await s.call("GET", `/api/slots/${slot}/pull/status`);
    expect(status.body).toMatchObject({ slot, image, present: true, pull: { id: started.body.pull.id, state: "done", changed: false } });
    const missing = await s.call("POST", "/api/slots/nope/pull");
    expect([missing.status, missing.body.error.code]).toEqual([404, "slot.not_found"]);
  }, 60_000);

  it("a profile naming a tag the registry does not have: its pull fails with image.pull_failed, quoting the engine; the others still run", async () => {
    const ghost = `${reg.host}/hal0-test/ghost-${randomBytes(3).toString("hex")}:1`;
    const file = join(s.config, "profiles.toml");
    writeFileSync(file, `${readFileSync(file, "utf8")}\n[profile.ghost]\nimage = ${JSON.stringify(ghost)}\nrunner = ["hal0-fake-runner"]\ndevice_class = "cpu"\n`);
    const sync = await s.call("POST", "/api/runner-images/sync");
    expect(sync.status, JSON.stringify(sync.body)).toBe(202);
    const byImage = Object.fromEntries(sync.body.pulls.map((p: { image: string; id: string }) => [p.image, p.id]));
    expect(Object.keys(byImage).sort()).toEqual([ghost, image].sort());
    const failed = await ended(byImage[ghost]);
    expect(failed).toMatchObject({ state: "failed", before: null, after: null, error: { code: "image.pull_failed", message: expect.stringContaining(`pulling ${ghost} failed: `) } });
    expect(failed.error.message).toMatch(/not found|unknown/i);
    expect(await ended(byImage[image])).toMatchObject({ state: "done", changed: false });
    expect(await row(ghost)).toEqual({ image: ghost, profiles: ["ghost"], slots: [], present: false });
  }, 60_000);

  it("[slots] pull = false: sync and slot pulls are refused with image.pull_disabled, an agent's before anything is queued", async () => {
    const file = join(s.config, "hal0.toml");
    writeFileSync(file, readFileSync(file, "utf8").replace("pull = true", "pull = false"));
    const before = (await s.call("GET", "/api/runner-images/pulls/list")).body.length;
    for (const path of ["/api/runner-images/sync", `/api/slots/${slot}/pull`]) {
      const res = await s.call("POST", path);
      expect([res.status, res.body.error.code], path).toEqual([409, "image.pull_disabled"]);
    }
    const c = await adminClient(s.url, "hermes__coder");
    const refused = await callTool(c, "runner_image_sync", {});
    expect(refused).toMatchObject({ isError: true, body: { status: "error", error: { code: "image.pull_disabled" } } });
    expect((await s.call("GET", "/api/agent/approvals?state=pending")).body.approvals).toEqual([]);
    expect((await s.call("GET", "/api/runner-images/pulls/list")).body.length).toBe(before);
    await c.close();
  });

  it("backend_list over MCP wraps its rows as backends with a count; backend_detail reads one; an unknown id is 404", async () => {
    const c = await adminClient(s.url, "hermes__coder");
    const list = await callTool(c, "backend_list", {});
    expect(list.isError).toBe(false);
    expect(list.body.count).toBe(3);
    expect(list.body.backends.map((b: { id: string }) => b.id)).toEqual(["llama.cpp", "fastflowlm", "kokoro"]);
    const llama = list.body.backends[0];
    expect(llama).toMatchObject({ kind: "llama-server", serves: ["llm", "embedding", "reranking"], runner_images: ["hal0-runner:local"], slots: [] });
    expect(llama.hardware.devices.find((d: { device: string }) => d.device === "cpu")).toMatchObject({ available: true });
    expect(llama.hardware.available).toBe(true);
    const detail = await callTool(c, "backend_detail", { backend_id: "fastflowlm" });
    expect(detail.body).toMatchObject({ id: "fastflowlm", kind: "flm", devices: ["npu"] });
    const unknown = await s.call("GET", "/api/backends/nope");
    expect([unknown.status, unknown.body.error.code, unknown.body.error.details.known]).toEqual([404, "backend.not_found", ["llama.cpp", "fastflowlm", "kokoro"]]);
    await c.close();
  });
});

/** Refusals that need no engine: none answering, a slot whose profile names no image. */
describe("runner images without an engine", () => {
  let s: TestServer;
  const ADDRESS = "unix:///nonexistent/hal0-test-docker.sock";
  beforeAll(async () => {
    s = await startTestServer();
    const settings = join(s.config, "hal0.toml");
    writeFileSync(settings, readFileSync(settings, "utf8").replace("[slots]\n", `[slots]\ndocker_host = ${JSON.stringify(ADDRESS)}\npull = true\n`));
    writeFileSync(join(s.config, "profiles.toml"), `${readFileSync(join(s.config, "profiles.toml"), "utf8")}\n[profile.plain]\nrunner = ["hal0-fake-runner"]\ndevice_class = "cpu"\n`);
    writeFileSync(join(s.config, "slots/plain.toml"), "profile = \"plain\"\ntype = \"tts\"\nport = 8199\nenabled = false\n");
  });
  afterAll(async () => s.close());

  it("no engine answering: 503 image.engine_unavailable naming the address, for reads and pulls", async () => {
    for (const [method, path] of [["GET", "/api/runner-images"], ["GET", "/api/runner-images/downloaded"], ["POST", "/api/runner-images/sync"], ["POST", "/api/slots/chat/pull"]] as const) {
      const res = await s.call(method, path);
      expect([res.status, res.body.error?.code, res.body.error?.details?.address], path).toEqual([503, "image.engine_unavailable", ADDRESS]);
    }
    expect((await s.call("GET", "/api/runner-images/pulls/list")).body).toEqual([]);
  });

  it("a slot whose profile names no image: 409 image.not_named; an unknown slot 404", async () => {
    const plain = await s.call("POST", "/api/slots/plain/pull");
    expect([plain.status, plain.body.error.code]).toEqual([409, "image.not_named"]);
    expect((await s.call("GET", "/api/slots/plain/pull/status")).body.error.code).toBe("image.not_named");
    expect((await s.call("GET", "/api/slots/nope/pull/status")).status).toBe(404);
  });
});

describe.skipIf(docker === undefined)("runner images from a registry that takes the connection and never answers", () => {
  let s: TestServer;
  let registry: Server;
  const held = new Set<Socket>();
  let image: string;
  beforeAll(async () => {
    // Answers the engine's /v2/ check, then holds every manifest request open: the engine waits on it for ever, saying nothing.
    registry = createServer((req, res) => {
      if (req.url === "/v2/") res.writeHead(200, { "docker-distribution-api-version": "registry/2.0", "content-type": "application/json" }).end("{}");
    });
    registry.on("connection", (socket) => held.add(socket));
    const port = await freePort();
    await new Promise<void>((resolve) => registry.listen(port, "127.0.0.1", resolve));
    image = `127.0.0.1:${port}/hal0-test/hang-${randomBytes(3).toString("hex")}:1`;
    s = await startTestServer({ env: { HAL0_IMAGE_STALL_S: "2" } });
    const settings = join(s.config, "hal0.toml");
    writeFileSync(settings, readFileSync(settings, "utf8").replace("[slots]\n", `[slots]\ndocker_host = ${JSON.stringify(DOCKER_HOST)}\npull = true\n`));
    writeFileSync(join(s.config, "profiles.toml"), `${readFileSync(join(s.config, "profiles.toml"), "utf8")}\n[profile.hang]\nimage = ${JSON.stringify(image)}\nrunner = ["hal0-fake-runner"]\ndevice_class = "cpu"\n`);
    writeFileSync(join(s.config, "slots/hang.toml"), "profile = \"hang\"\ntype = \"tts\"\nport = 8198\nenabled = false\n");
  });
  afterAll(async () => {
    await s?.close();
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => registry?.close(resolve));
  });

  it("a pull the engine reports nothing of for HAL0_IMAGE_STALL_S fails with image.pull_failed saying so, and the next pull starts afresh", async () => {
    const first = await s.call("POST", "/api/slots/hang/pull");
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    const pullOf = async (id: string) => ((await s.call("GET", "/api/runner-images/pulls/list")).body as Array<Record<string, any>>).find((p) => p.id === id)!;
    const failed = await untilWithin(() => pullOf(first.body.pull.id), (p) => p.state !== "pulling", 20_000);
    expect(failed).toMatchObject({ state: "failed", error: { code: "image.pull_failed", message: expect.stringContaining(`pulling ${image} failed: the engine reported nothing for 2 s`) } });
    // Not joined to a pull that hangs for ever: asking again is a new pull.
    const again = await s.call("POST", "/api/slots/hang/pull");
    expect(again.body.pull.id).not.toBe(first.body.pull.id);
    expect((await untilWithin(() => pullOf(again.body.pull.id), (p) => p.state !== "pulling", 20_000)).state).toBe("failed");
  }, 60_000);

  it("hal0 serve stopped while a pull waits on that registry exits at once: the pull's request to the engine ends with the server", async () => {
    const state = mkdtempSync(join(tmpdir(), "hal0-images-serve-"));
    try {
      const { child, url } = await startServe(s.config, state, ["--no-reconcile"], undefined, { ...process.env, HAL0_IMAGE_STALL_S: "60" });
      const token = readFileSync(join(state, "operator.token"), "utf8").trim();
      const pull = await httpCall(url, "POST", "/api/slots/hang/pull", { headers: { authorization: `Bearer ${token}` } });
      expect(pull.status, JSON.stringify(pull.body)).toBe(202);
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      const within = await Promise.race([exited, sleep(10_000).then(() => "still running" as const)]);
      if (within === "still running") child.kill("SIGKILL");
      expect(within).toBe(0);
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  }, 40_000);
});
