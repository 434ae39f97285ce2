import { randomBytes } from "node:crypto";
import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROJECT } from "../reconciler/process-helpers.js";
import { SWARM_DIR, SWARM_MANAGER, rigNode, rigNodeEngine, swarmManager, removeBoxLeftovers } from "../reconciler/swarm-helpers.js";
import { applyKilledAfter, boxCommand, startServe } from "./helpers.js";

/**
 * `[slots] runtime = "swarm"` end to end through the CLI against the
 * three-node rig (.ci/swarm-up.sh): slots pinned to each node and one placed
 * by a node label; a placement edit; a service removed behind hal0's back; a
 * worker's engine stopped and started; `kill -9` of an apply. Every check
 * reads the real swarm (services, tasks, nodes) and the runners' answers at
 * their nodes' addresses.
 */
const SUITE = "the swarm runtime on a three-node swarm (real engines in network namespaces)";
const manager = await swarmManager(SUITE);

/** Slot names are the swarm's (service names): unique to this run. */
const P = `w${randomBytes(2).toString("hex")}`;
const S = { one: `${P}-one`, two: `${P}-two`, three: `${P}-three`, gpu: `${P}-gpu` } as const;
const PORT = 8610;

describe.skipIf(manager === undefined)(SUITE, () => {
  const engine = manager as Dockerode;
  const base = mkdtempSync(join(tmpdir(), "hal0-swarm-"));
  const config = join(base, "box");
  const state = join(base, "state");
  const env = { DOCKER_HOST: "unix:///nonexistent.sock", HAL0_SWARM_DIR: SWARM_DIR };

  const run = boxCommand(config, state, env);
  const json = async (...args: string[]) => {
    const r = await run(...args, "--json");
    return JSON.parse(r.out);
  };
  const boxId = (): string => JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).box;
  const key = (): string => readFileSync(join(state, "swarm-api-key"), "utf8").trim();
  const ours = async () => (await engine.listServices({ filters: { label: ["hal0.managed=true", `hal0.box=${boxId()}`] } })).map((s) => s.Spec!.Name!).sort();
  /** Each of our services' running task: its node's hostname and the task id. */
  const placed = async (): Promise<Record<string, { node: string; task: string }>> => {
    const [tasks, nodes] = await Promise.all([engine.listTasks({ filters: { "desired-state": ["running"] } }), engine.listNodes()]);
    const services = new Map((await engine.listServices({ filters: { label: [`hal0.box=${boxId()}`] } })).map((s) => [s.ID, s.Spec!.Name!.replace(/^hal0-slot-/, "")]));
    const hostnames = new Map(nodes.map((n: any) => [n.ID, n.Description.Hostname]));
    const out: Record<string, { node: string; task: string }> = {};
    for (const t of tasks as any[]) if (services.has(t.ServiceID) && t.Status.State === "running") out[services.get(t.ServiceID)!] = { node: hostnames.get(t.NodeID)!, task: t.ID };
    return out;
  };
  const httpAt = (addr: string, port: number, path: string, token?: string) =>
    fetch(`http://${addr}:${port}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(3000) }).then((r) => r.status, () => 0);
  const slotFile = (name: string, port: number, placement: string, ctx = 2048) =>
    writeFileSync(join(config, "slots", `${name}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n[tune]\nctx_size = ${ctx}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "200" }\n[placement]\n${placement}\n`);
  const hal0Toml = (drift: "enforce" | "warn") =>
    writeFileSync(join(config, "hal0.toml"), `[slots]\nruntime = "swarm"\ndocker_host = ${JSON.stringify(SWARM_MANAGER)}\nport_range_start = 8600\nport_range_end = 8699\nhealth_timeout_s = 60\nstop_grace_s = 2\n\n[reconcile]\ndrift = "${drift}"\n`);
  /** `hal0 status --json` once `until` holds of it, or the last one after `ms`. */
  const statusUntil = async (until: (s: any) => boolean, ms: number) => {
    const end = Date.now() + ms;
    for (;;) {
      const s = await json("status");
      if (until(s) || Date.now() > end) return s;
      await sleep(1000);
    }
  };
  const allReady = (s: any) => s.slots.length === 4 && s.slots.every((r: any) => r.state === "ready");

  beforeAll(() => {
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    hal0Toml("enforce");
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nimage = "hal0-runner:local"\nflags = "--parallel 1 --threads 1"\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\ntype = "llm"\n`);
    // Three slots share one port, each on its own node; the labelled one needs a port of its own across the box.
    slotFile(S.one, PORT, `node = "hal0-node-1"`);
    slotFile(S.two, PORT, `node = "hal0-node-2"`);
    slotFile(S.three, PORT, `node = "hal0-node-3"`);
    slotFile(S.gpu, PORT + 1, `labels = { gpu = "rocm" }`);
  });

  afterAll(async () => {
    await rigNodeEngine("start-node", 2).catch(() => undefined);
    await run("down");
    let box = "";
    try {
      box = boxId();
    } catch {
      return;
    }
    await removeBoxLeftovers(engine, box);
  }, 120_000);

  it("applies slots pinned to three nodes and one placed by a label: each runs where its placement says and answers /health at its node, the key required for the rest", async () => {
    const plan = await run("plan");
    expect(plan.code, plan.err).toBe(0);
    expect(plan.out).toContain(`+ slot.${S.two} (new)`);
    expect(plan.out).toContain('node: "hal0-node-2"');
    expect(plan.out).toContain("node: any with labels gpu=rocm (Swarm chooses)");

    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    expect(await ours()).toEqual(Object.values(S).map((s) => `hal0-slot-${s}`).sort());
    const where = await placed();
    expect(Object.fromEntries(Object.entries(where).map(([k, v]) => [k, v.node]))).toEqual({
      [S.one]: "hal0-node-1", [S.two]: "hal0-node-2", [S.three]: "hal0-node-3", [S.gpu]: "hal0-node-2",
    });
    for (const n of [1, 2, 3] as const) {
      expect(await httpAt(rigNode(n).addr, PORT, "/health"), `node ${n}`).toBe(200);
      // Reachable across machines, and only with the box's key: everything but /health and /v1/models wants it.
      expect(await httpAt(rigNode(n).addr, PORT, "/props"), `node ${n} without the key`).toBe(401);
      expect(await httpAt(rigNode(n).addr, PORT, "/props", key()), `node ${n} with the key`).toBe(200);
    }
    expect(await httpAt(rigNode(2).addr, PORT + 1, "/health")).toBe(200);

    // The key is a Swarm secret file, never an argument, a plan or a reply.
    const svc = await engine.getService(`hal0-slot-${S.one}`).inspect();
    const args = svc.Spec.TaskTemplate.ContainerSpec.Args as string[];
    expect(args.join(" ")).toContain("--host 0.0.0.0");
    expect(args.join(" ")).toContain("--api-key-file /run/secrets/hal0-api-key");
    expect(JSON.stringify(svc)).not.toContain(key());
    const planJson = await run("plan", "--json");
    expect(planJson.out).not.toContain(key());
    expect((readFileSync(join(state, "swarm-api-key")).length)).toBe(65);

    const status = await json("status");
    expect(status.slots.map((r: any) => [r.name, r.state, r.node])).toEqual([
      [S.gpu, "ready", "hal0-node-2"], [S.one, "ready", "hal0-node-1"], [S.three, "ready", "hal0-node-3"], [S.two, "ready", "hal0-node-2"],
    ]);
    expect(status.nodes.map((n: any) => [n.hostname, n.state, n.role])).toEqual([["hal0-node-1", "ready", "manager"], ["hal0-node-2", "ready", "worker"], ["hal0-node-3", "ready", "worker"]]);
    expect(status.nodes[1].labels).toEqual({ gpu: "rocm" });
    expect(status.nodes[1].slots).toEqual([S.gpu, S.two]);
    expect(status.nodes[0].engine_version).toMatch(/^\d+\.\d+/);
    expect(status.nodes[0].addr).toBe("10.77.0.1");

    const again = await run("plan");
    expect(again.out).toContain("No changes.");
    const doctor = await run("doctor");
    expect(doctor.out).toMatch(/ok\s+runtime\s+swarm manager \(docker [^)]+\) at unix:\/\/\S+: 3 of 3 nodes ready/);
    // Pointed at a worker's engine, the doctor says so and names the fix that works there (swarm init fails on a worker).
    const worker = `unix://${SWARM_DIR}/n2/docker.sock`;
    const toml = readFileSync(join(config, "hal0.toml"), "utf8");
    writeFileSync(join(config, "hal0.toml"), toml.replace(JSON.stringify(SWARM_MANAGER), JSON.stringify(worker)));
    const atWorker = await run("doctor");
    expect(atWorker.out).toMatch(/fail\s+runtime\s+swarm runtime: the engine \S+ at unix:\/\/\S+n2\/docker\.sock is not a swarm manager \(swarm state active\)/);
    expect(atWorker.out).toContain("it is a worker of a swarm: point [slots] docker_host at a manager's engine");
    expect(atWorker.out).not.toContain("swarm init");
    writeFileSync(join(config, "hal0.toml"), toml);

    // The server says the same: /api/status lists the nodes with the slots on each, and a slot read carries the key.
    const { child, url } = await startServe(config, state, ["--no-reconcile"], undefined, { ...process.env, ...env });
    try {
      const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
      const api = (await (await fetch(`${url}/api/status`, { headers })).json()) as any;
      expect(api.runtime).toBe("swarm");
      expect(api.nodes.map((n: any) => [n.hostname, n.state, n.availability, n.slots])).toEqual([
        ["hal0-node-1", "ready", "active", [S.one]], ["hal0-node-2", "ready", "active", [S.gpu, S.two]], ["hal0-node-3", "ready", "active", [S.three]],
      ]);
      expect(api.nodes[2].labels).toEqual({ npu: "xdna" });
      const slots = await (await fetch(`${url}/api/slots`, { headers })).text();
      expect(slots).not.toContain(key());
      // Every health probe of the server goes to the slot's node with the key, not to loopback.
      for (const name of Object.values(S)) {
        const state = (await (await fetch(`${url}/api/slots/${name}/state`, { headers })).json()) as any;
        expect([name, state.state, state.health]).toEqual([name, "ready", "ok"]);
      }
      const health = (await (await fetch(`${url}/api/services/health`, { headers })).json()) as any;
      expect(health.services.filter((s: any) => Object.values(S).some((n) => s.id.endsWith(n))).map((s: any) => s.health)).toEqual(["ok", "ok", "ok", "ok"]);
      // The status page draws the same nodes.
      const page = await (await fetch(`${url}/status`, { headers })).text();
      const nodes = page.slice(page.indexOf('<h2 id="nodes-h">'), page.indexOf("</section>", page.indexOf('<h2 id="nodes-h">')));
      expect(nodes).toContain("Nodes (3)");
      expect(nodes).toContain(`<th scope="row">hal0-node-2</th><td><span class="badge state-ok">ready</span>`);
      expect(nodes).toContain(`<code>gpu=rocm</code></td><td>${S.gpu}, ${S.two}</td>`);
      expect(page).not.toContain(key());
    } finally {
      child.kill("SIGTERM");
    }
  }, 180_000);

  it("a placement edit moves exactly that slot: one replace naming placement.node, the others' tasks untouched", async () => {
    const before = await placed();
    slotFile(S.three, PORT + 2, `node = "hal0-node-1"`);
    const plan = await json("plan");
    const changed = plan.changes.filter((c: any) => c.action !== "no-op");
    expect(changed.map((c: any) => [c.address, c.action])).toEqual([[`slot.${S.three}`, "replace"]]);
    expect(changed[0].changed_paths).toEqual(expect.arrayContaining(["placement.node", "port"]));
    const text = await run("plan");
    expect(text.out).toContain('placement.node: "hal0-node-3" → "hal0-node-1"');

    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    const after = await placed();
    expect(after[S.three]!.node).toBe("hal0-node-1");
    for (const name of [S.one, S.two, S.gpu]) expect(after[name], name).toEqual(before[name]);
    expect(await httpAt(rigNode(1).addr, PORT + 2, "/health")).toBe(200);
    expect(await httpAt(rigNode(3).addr, PORT, "/health")).toBe(0); // gone from node 3
  }, 180_000);

  it("a service removed behind hal0's back is reported under drift = warn and restored under enforce", async () => {
    await engine.getService(`hal0-slot-${S.two}`).remove();
    hal0Toml("warn");
    const warned = await json("plan");
    const two = warned.changes.find((c: any) => c.address === `slot.${S.two}`);
    expect([two.action, two.reason]).toEqual(["no-op", "not_running"]);
    expect(warned.warnings).toContainEqual(expect.objectContaining({ address: `slot.${S.two}`, code: "slot.drifted" }));

    hal0Toml("enforce");
    const plan = await json("plan");
    expect(plan.changes.filter((c: any) => c.kind === "slot" && c.action !== "no-op").map((c: any) => [c.address, c.action, c.reason])).toEqual([[`slot.${S.two}`, "create", "not_running"]]);
    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    expect((await placed())[S.two]!.node).toBe("hal0-node-2");
    expect(await httpAt(rigNode(2).addr, PORT, "/health")).toBe(200);
  }, 180_000);

  it("a worker's engine stopped: its slots are Degraded with the reason, the plan holds them (unplaced), the rest is untouched; back when it returns", async () => {
    const before = await placed();
    await rigNodeEngine("stop-node", 2);
    // The manager marks the node down after missed heartbeats (seconds).
    const down = await statusUntil((s) => s.nodes?.find((n: any) => n.hostname === "hal0-node-2")?.state === "down"
      && [S.two, S.gpu].every((name) => s.slots.find((r: any) => r.name === name)?.conditions.some((c: any) => c.type === "Degraded" && c.reason === "NodeDown")), 60_000);
    for (const name of [S.two, S.gpu]) {
      const row = down.slots.find((r: any) => r.name === name);
      const degraded = row.conditions.find((c: any) => c.type === "Degraded");
      expect(degraded, name).toMatchObject({ status: "True", reason: "NodeDown" });
      expect(degraded.message).toContain("node hal0-node-2 is down");
    }
    for (const name of [S.one, S.three]) expect(down.slots.find((r: any) => r.name === name).state, name).toBe("ready");

    const plan = await json("plan");
    expect(plan.has_changes).toBe(false);
    const slots = Object.fromEntries(plan.changes.filter((c: any) => c.kind === "slot").map((c: any) => [c.address, c.reason]));
    expect(slots).toEqual({ [`slot.${S.gpu}`]: "unplaced", [`slot.${S.one}`]: "unchanged", [`slot.${S.three}`]: "unchanged", [`slot.${S.two}`]: "unplaced" });
    expect(plan.warnings.filter((w: any) => w.code === "slot.unplaced").map((w: any) => w.address).sort()).toEqual([`slot.${S.gpu}`, `slot.${S.two}`]);
    expect((await run("doctor")).out).toMatch(/warn\s+runtime\s+swarm manager .*: 2 of 3 nodes ready/);
    // Held, so not pending; and a restart through the API is refused before anything is touched: the service Swarm holds for the node stays.
    for (const name of [S.two, S.gpu]) expect(down.slots.find((r: any) => r.name === name).conditions.find((c: any) => c.type === "Reconciling"), name).toMatchObject({ status: "False", reason: "Unplaced" });
    const { child, url } = await startServe(config, state, ["--no-reconcile"], undefined, { ...process.env, ...env });
    try {
      const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
      const restart = await fetch(`${url}/api/slots/${S.two}/restart`, { method: "POST", headers });
      expect(restart.status).toBe(503);
      expect(((await restart.json()) as any).error).toMatchObject({ code: "slot.unplaced", message: expect.stringContaining("node hal0-node-2 is down") });
      const held = (await (await fetch(`${url}/api/slots/${S.two}/state`, { headers })).json()) as any;
      expect(held.conditions.find((c: any) => c.type === "Reconciling")).toMatchObject({ status: "False", reason: "Unplaced" });
      // Its log is on the node that is down: the manager's own words are no log line of the runner's.
      const logs = await fetch(`${url}/api/slots/${S.two}/logs?lines=5`, { headers });
      expect(logs.status).toBe(409);
      expect(((await logs.json()) as any).error).toMatchObject({ code: "slot.log_unreadable", message: expect.stringMatching(/^the swarm manager cannot read back hal0-slot-\S+'s log: .*is not available/) });
    } finally {
      child.kill("SIGTERM");
    }
    expect(await ours()).toContain(`hal0-slot-${S.two}`);
    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    const during = await placed();
    for (const name of [S.one, S.three]) expect(during[name], name).toEqual(before[name]);

    await rigNodeEngine("start-node", 2);
    const back = await statusUntil(allReady, 90_000);
    expect(back.slots.map((r: any) => [r.name, r.state, r.node])).toEqual([
      [S.gpu, "ready", "hal0-node-2"], [S.one, "ready", "hal0-node-1"], [S.three, "ready", "hal0-node-1"], [S.two, "ready", "hal0-node-2"],
    ]);
  }, 240_000);

  it("kill -9 of hal0 apply mid-way, then apply again: the inventory matches the services, no orphan, every slot Ready", async () => {
    let seed = 20261202;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let round = 0; round < 3; round++) {
      // Every slot's spec changes, so the kill lands among stops and starts of services.
      const ctx = 4096 + 1024 * round;
      slotFile(S.one, PORT, `node = "hal0-node-1"`, ctx);
      slotFile(S.two, PORT, `node = "hal0-node-2"`, ctx);
      slotFile(S.three, PORT + 2, `node = "hal0-node-1"`, ctx);
      slotFile(S.gpu, PORT + 1, `labels = { gpu = "rocm" }`, ctx);
      const at = Math.floor(300 + random() * 2500);
      await applyKilledAfter(at, config, state, { ...process.env, ...env });
      const applied = await run("apply", "--yes");
      expect(applied.code, `round ${round} (killed at ${at} ms): ${applied.out}${applied.err}`).toBe(0);
      const inventory = Object.keys(JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).slots).sort();
      expect(inventory, `round ${round}`).toEqual(Object.values(S).sort());
      expect(await ours(), `round ${round}: no orphan, none missing`).toEqual(inventory.map((s) => `hal0-slot-${s}`));
      const status = await statusUntil(allReady, 30_000);
      expect(status.slots.map((r: any) => r.state), `round ${round}`).toEqual(["ready", "ready", "ready", "ready"]);
      const plan = await run("plan");
      expect(plan.out, `round ${round}`).toContain("No changes.");
    }
  }, 300_000);

  it("a port another program holds on a node: a slot pinned there is refused before any service is made; one placed by a label fails after Swarm's three tries, in the runner's own words; nothing is left", async () => {
    // A program of nobody's on node 2 that accepts connections and closes them (no HTTP: its answers cannot pass for a runner's).
    const holder = spawn("nsenter", ["--net=/var/run/netns/hal0-swarm-2", process.execPath, "-e", `require("net").createServer((s) => s.destroy()).listen(${PORT + 5}, "0.0.0.0", () => console.log("listening"))`], { stdio: ["ignore", "pipe", "inherit"] });
    try {
      await new Promise((resolve, reject) => {
        holder.stdout!.once("data", resolve);
        holder.once("exit", (code) => reject(new Error(`the port holder exited ${code}`)));
      });
      const busy = `${P}-busy`;
      slotFile(busy, PORT + 5, `node = "hal0-node-2"`);
      const pinned = await run("apply", "--yes");
      expect(pinned.code).toBe(1);
      expect(pinned.out).toContain(`slot.port_in_use: slot ${busy}: port ${PORT + 5} on node hal0-node-2 (10.77.0.2) is already in use by a program hal0 did not start there`);
      expect(await ours()).not.toContain(`hal0-slot-${busy}`);

      slotFile(busy, PORT + 5, `labels = { gpu = "rocm" }`);
      const labelled = await run("apply", "--yes");
      expect(labelled.code).toBe(1);
      expect(labelled.out).toContain(`slot.spawn_failed: slot ${busy}: a task of hal0-slot-${busy} failed 3 times: task: non-zero exit (1) (exit code 1); last lines of its log:`);
      expect(labelled.out).toContain(`couldn't bind to 0.0.0.0:${PORT + 5}: address already in use`);
      expect(await ours()).not.toContain(`hal0-slot-${busy}`);
      const status = await json("status", busy);
      expect(status.slot.last_error).toMatch(/^slot\.spawn_failed: /);
      // The service went, its tasks' logs with it: what its runners said is kept in the state folder, and slot_logs shows it.
      const kept = join(state, "slots", busy, "container.log");
      expect(statSync(kept).mode & 0o777).toBe(0o600);
      const { child, url } = await startServe(config, state, ["--no-reconcile"], undefined, { ...process.env, ...env });
      try {
        const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
        const log = (await (await fetch(`${url}/api/slots/${busy}/logs?lines=200`, { headers })).json()) as any;
        expect(log, JSON.stringify(log)).toMatchObject({ name: busy, runtime: "swarm", source: kept, file: kept, exists: true });
        expect(log.lines.join("\n")).toContain(`couldn't bind to 0.0.0.0:${PORT + 5}: address already in use`);
        expect(log.lines.at(-1)).toMatch(new RegExp(`^--- hal0 removed service hal0-slot-${busy} [0-9a-z]{12} at \\S+ \\(3 tasks failed; the last on node hal0-node-2: .*exit code 1\\); the lines above are its last output ---$`));
      } finally {
        child.kill("SIGTERM");
      }
      rmSync(join(config, "slots", `${busy}.toml`));
    } finally {
      holder.kill("SIGKILL");
    }
  }, 120_000);

  it("an image a node has not got: the start fails at once with slot.image_missing naming the node, and its service is removed", async () => {
    const missing = `${P}-noimg`;
    writeFileSync(join(config, "profiles.toml"), `${readFileSync(join(config, "profiles.toml"), "utf8")}\n[profile.noimg]\nimage = "hal0-nosuch:local"\nflags = "--parallel 1"\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "slots", `${missing}.toml`), `profile = "noimg"\nmodel = "tiny"\nport = ${PORT + 6}\n[placement]\nnode = "hal0-node-3"\n`);
    try {
      const applied = await run("apply", "--yes");
      expect(applied.code).toBe(1);
      expect(applied.out).toContain(`slot.image_missing: slot ${missing}: image hal0-nosuch:local is not on node hal0-node-3 (No such image: hal0-nosuch:local); hal0 never pulls for Swarm`);
      expect(await ours()).not.toContain(`hal0-slot-${missing}`);
    } finally {
      rmSync(join(config, "slots", `${missing}.toml`));
    }
  }, 120_000);

  it("a node drained while an apply starts a slot pinned to it: the start fails with slot.unplaced naming that node as drained, and its service is removed", async () => {
    const drained = `${P}-drained`;
    writeFileSync(join(config, "slots", `${drained}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${PORT + 7}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "8000" }\n[placement]\nnode = "hal0-node-3"\n`);
    const node3 = (await engine.listNodes() as any[]).find((n) => n.Description.Hostname === "hal0-node-3")!;
    const availability = async (to: "drain" | "active") => {
      const n = await engine.getNode(node3.ID).inspect();
      await engine.getNode(node3.ID).update({ version: n.Version.Index, ...n.Spec, Availability: to });
    };
    try {
      const applying = run("apply", "--yes");
      // Its task placed and its runner loading: then the node is drained under it.
      for (let i = 0; i < 100 && !(await engine.listTasks({ filters: { service: [`hal0-slot-${drained}`], "desired-state": ["running"] } }).then((t: any[]) => t.some((x) => x.Status.State === "running"), () => false)); i++) await sleep(100);
      await availability("drain");
      const applied = await applying;
      expect(applied.code).toBe(1);
      expect(applied.out).toContain(`slot.unplaced: slot ${drained}: no node of the swarm can run hal0-slot-${drained}`);
      expect(applied.out).toContain("its [placement] matches no ready, active node with room (the nodes it matches: hal0-node-3 ready/drain)");
      expect(await ours()).not.toContain(`hal0-slot-${drained}`);
    } finally {
      await availability("active");
      rmSync(join(config, "slots", `${drained}.toml`));
    }
  }, 120_000);

  it("the key's secret removed by hand once no service uses it: the next start of the same server makes it again", async () => {
    const { child, url } = await startServe(config, state, ["--no-reconcile"], undefined, { ...process.env, ...env });
    try {
      const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
      const restart = async () => (await (await fetch(`${url}/api/slots/${S.one}/restart`, { method: "POST", headers })).json()) as any;
      expect((await restart()).result?.ok).toBe(true); // this server's driver has started a slot: it has found the secret
      expect((await run("down")).code).toBe(0);
      const secrets = await engine.listSecrets({ filters: { label: [`hal0.box=${boxId()}`] } });
      expect(secrets).toHaveLength(1);
      await engine.getSecret(secrets[0]!.ID).remove();
      const again = await restart();
      expect(again.result?.ok, JSON.stringify(again)).toBe(true);
      expect(await httpAt(rigNode(1).addr, PORT, "/props", key())).toBe(200);
    } finally {
      child.kill("SIGTERM");
    }
  }, 120_000);

  it("slot_logs reads a swarm slot's service log through the manager (the last lines, whether more precede them), secrets masked", async () => {
    const secret = `sk-${"s".repeat(40)}`;
    expect(await httpAt(rigNode(1).addr, PORT, `/health?api_key=${secret}`)).toBe(200); // the runner logs each request's URL
    const { child, url } = await startServe(config, state, ["--no-reconcile"], undefined, { ...process.env, ...env });
    try {
      const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
      const read = async (lines: number) => (await (await fetch(`${url}/api/slots/${S.one}/logs?lines=${lines}`, { headers })).json()) as any;
      const tail = await read(2);
      expect(tail, JSON.stringify(tail)).toMatchObject({ name: S.one, runtime: "swarm", source: `hal0-slot-${S.one}`, file: null, exists: true, truncated: true });
      expect(tail.lines).toHaveLength(2);
      const whole = await read(2000);
      expect(whole.truncated).toBe(false);
      expect(whole.lines.join("\n")).toMatch(/GET \/health\?api_key=.* 200/);
      expect(JSON.stringify(whole)).not.toContain(secret);
    } finally {
      child.kill("SIGTERM");
    }
  }, 120_000);
});
