import { randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { packageRoot } from "../reconciler/package-root.js";
import { compile, loadTree } from "../compiler/index.js";
import { dockerClient } from "../reconciler/drivers/docker.js";
import { acceptsConnections, httpStatus } from "../reconciler/drivers/proc.js";
import { nodeFrom, type ListedNode, type ListedTask } from "../reconciler/drivers/swarm-service.js";
import { StateStore } from "../reconciler/state.js";
import { median, wall } from "./measure.js";

/**
 * `npm run bench` (swarm part): hal0's swarm runtime beside `docker stack
 * deploy` of an equivalent stack file, on the three-node rig (.ci/swarm-up.sh):
 * 30 slots, 10 pinned to each node. A no-op converge of the 30 running (whole
 * `hal0 apply --yes` processes beside the stack re-deployed unchanged), and
 * creating the 30 from nothing until every runner answers `/health` 200 at its
 * node's address. Medians.
 *
 * The stack side's create is `docker stack deploy` (which returns once the
 * services exist) plus a watcher in this process that does what hal0's own
 * wait does: one task list every 250 ms, and for each running task a
 * `GET /health` at its node's address (the same probe, with the key). The
 * clock stops at the last 200. The watcher costs no process start, so the
 * stack side is, if anything, favoured.
 */
const SLOTS = 30;
const NODES = 3;
const FIRST_PORT = 9100;
const STACK = "bnstack";
const POLL_MS = 250;
const ROUNDS = 3;
const NOOPS = 3;
const ROOT = packageRoot();
const HAL0 = join(ROOT, "bin/hal0.cjs");

/** A slot's name and the node it is pinned to: bn00.. round-robin over hal0-node-1..3, 10 each. */
function slotAt(i: number): { name: string; node: string; port: number } {
  return { name: `bn${String(i).padStart(2, "0")}`, node: `hal0-node-${(i % NODES) + 1}`, port: FIRST_PORT + i };
}

function writeBox(dir: string, managerHost: string): void {
  mkdirSync(join(dir, "slots"), { recursive: true });
  copyFileSync(join(ROOT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(dir, "tiny.gguf"));
  writeFileSync(join(dir, "hal0.toml"), `[slots]\nruntime = "swarm"\ndocker_host = "${managerHost}"\nport_range_start = ${FIRST_PORT}\nport_range_end = ${FIRST_PORT + SLOTS - 1}\nhealth_timeout_s = 60\nstop_grace_s = 2\n[server]\nport = ${FIRST_PORT + 99}\n`);
  writeFileSync(join(dir, "profiles.toml"), `[profile.bench]\nimage = "hal0-runner:local"\nflags = "--parallel 1 --threads 1"\ndevice_class = "cpu"\n`);
  writeFileSync(join(dir, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
  for (let i = 0; i < SLOTS; i++) {
    const s = slotAt(i);
    writeFileSync(join(dir, "slots", `${s.name}.toml`), `profile = "bench"\nmodel = "tiny"\nport = ${s.port}\n[placement]\nnode = "${s.node}"\n`);
  }
}

/** A YAML scalar: JSON's string syntax is YAML's double-quoted one; `$` doubled so the stack loader does not interpolate. */
const q = (s: string) => JSON.stringify(s).replaceAll("$", "$$");

/**
 * The same 30 services as a version 3.8 stack file: hal0's resolved image,
 * argv and env (from the compiled model), its bind mount of the box (read-only,
 * the working dir), its constraints, init, stop grace, restart and update
 * policy, the host network, and an API key file as a stack secret mounted
 * where hal0's Swarm secret is (/run/secrets/hal0-api-key), so the runners'
 * args are identical.
 */
async function writeStack(boxDir: string, stackDir: string, key: string): Promise<void> {
  const { model } = compile((await loadTree(boxDir)).tree);
  const slots = Object.values(model!.slots);
  if (slots.length !== SLOTS) throw new Error(`bench box compiled to ${slots.length} slots, not ${SLOTS}`);
  writeFileSync(join(stackDir, "api-key"), `${key}\n`, { mode: 0o600 });
  const services = slots.map((s) => {
    const node = s.spec.placement?.node;
    if (node === undefined) throw new Error(`bench slot ${s.name} has no placement node`);
    return [
      `  ${s.name}:`,
      `    image: ${q(s.spec.image!)}`,
      `    command: [${s.spec.argv.map(q).join(", ")}]`,
      `    environment: {${Object.entries(s.spec.env).map(([k, v]) => `${q(k)}: ${q(v)}`).join(", ")}}`,
      `    working_dir: ${q(boxDir)}`,
      `    volumes: [{ type: bind, source: ${q(boxDir)}, target: ${q(boxDir)}, read_only: true }]`,
      `    init: true`,
      `    stop_grace_period: 2s`,
      `    networks: [hostnet]`,
      `    secrets: [{ source: hal0-api-key, target: hal0-api-key, uid: "0", gid: "0", mode: 256 }]`,
      `    deploy:`,
      `      replicas: 1`,
      `      placement: { constraints: [${q(`node.hostname==${node}`)}] }`,
      `      restart_policy: { condition: any, delay: 2s }`,
      `      update_config: { parallelism: 1, failure_action: continue, order: stop-first }`,
    ].join("\n");
  });
  writeFileSync(join(stackDir, "stack.yml"), [
    `version: "3.8"`,
    `services:`,
    ...services,
    `networks:`,
    `  hostnet: { external: true, name: host }`,
    `secrets:`,
    `  hal0-api-key: { file: ./api-key }`,
    ``,
  ].join("\n"));
}

type Docker = ReturnType<typeof dockerClient>;

/** The stack's services (by the label `docker stack deploy` puts on them). */
async function stackServices(docker: Docker): Promise<{ ID: string; Spec: { Name: string } }[]> {
  return (await docker.listServices({ filters: { label: [`com.docker.stack.namespace=${STACK}`] } })) as unknown as { ID: string; Spec: { Name: string } }[];
}

/** The nodes' addresses by node id. */
async function nodeAddrs(docker: Docker): Promise<Map<string, string>> {
  const nodes = ((await docker.listNodes()) as ListedNode[]).map(nodeFrom);
  return new Map(nodes.map((n) => [n.id, n.addr]));
}

/**
 * Waits, as hal0's start does, until every one of the stack's services has a
 * running task whose runner answers `GET /health` 200 at its node's address:
 * one task list every 250 ms, one probe per running task not yet seen healthy.
 */
async function waitStackReady(docker: Docker, key: string, timeoutMs: number): Promise<void> {
  const addrs = await nodeAddrs(docker);
  const ready = new Set<string>();
  const deadline = Date.now() + timeoutMs;
  let ids: string[] = [];
  while (Date.now() < deadline) {
    if (ids.length < SLOTS) ids = (await stackServices(docker)).map((s) => s.ID);
    if (ids.length === SLOTS) {
      const tasks = (await docker.listTasks({ filters: { service: ids, "desired-state": ["running"] } })) as ListedTask[];
      await Promise.all(tasks.filter((t) => !ready.has(t.ServiceID) && t.Status.State === "running" && t.NodeID).map(async (t) => {
        const port = portOf(t as TaskArgs);
        const status = await httpStatus(port, "/health", 1000, { host: addrs.get(t.NodeID!) ?? "", headers: { authorization: `Bearer ${key}` } });
        if (status === 200) ready.add(t.ServiceID);
      }));
      if (ready.size === SLOTS) return;
    }
    await sleep(POLL_MS);
  }
  throw new Error(`stack ${STACK}: ${ready.size} of ${SLOTS} services answered /health 200 within ${timeoutMs / 1000} s`);
}

type TaskArgs = { Spec?: { ContainerSpec?: { Args?: string[] } } };

function portOf(task: TaskArgs): number {
  const args = task.Spec?.ContainerSpec?.Args ?? [];
  return Number(args[args.indexOf("--port") + 1]);
}

/** Until every node of the swarm is ready and active (a round starts on a whole rig). */
async function waitNodesReady(docker: Docker, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const nodes = ((await docker.listNodes()) as ListedNode[]).map(nodeFrom);
    const missing = nodes.filter((n) => n.state !== "ready" || n.availability !== "active");
    if (nodes.length >= NODES && missing.length === 0) return;
    if (Date.now() > deadline) throw new Error(`swarm nodes not ready: ${missing.map((n) => `${n.hostname} ${n.state}/${n.availability}`).join(", ") || `${nodes.length} of ${NODES}`}`);
    await sleep(1000);
  }
}

/** How many tasks the stack's services have had (a no-op re-deploy must not add any). */
async function taskCount(docker: Docker): Promise<number> {
  const ids = (await stackServices(docker)).map((s) => s.ID);
  return ids.length === 0 ? 0 : ((await docker.listTasks({ filters: { service: ids } })) as ListedTask[]).length;
}

/** After `docker stack rm`: until the services and the secret are gone and every slot's port is closed on its node. */
async function waitStackGone(docker: Docker, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const addrs = [...new Set((await nodeAddrs(docker)).values())];
  while (Date.now() < deadline) {
    const services = await stackServices(docker);
    const secrets = (await docker.listSecrets({ filters: { label: [`com.docker.stack.namespace=${STACK}`] } })) as unknown[];
    if (services.length === 0 && secrets.length === 0) {
      const open = await Promise.all(addrs.flatMap((host) => Array.from({ length: SLOTS }, (_, i) => acceptsConnections(FIRST_PORT + i, 500, host))));
      if (!open.some(Boolean)) return;
    }
    await sleep(POLL_MS);
  }
  throw new Error(`stack ${STACK} was not gone within ${timeoutMs / 1000} s`);
}

export async function benchSwarm(managerHost: string): Promise<string[]> {
  const base = mkdtempSync(join(tmpdir(), "hal0-bench-swarm-"));
  const box = join(base, "box");
  const stackDir = join(base, "stack");
  const stateDir = join(base, "state");
  mkdirSync(stackDir);
  writeBox(box, managerHost);
  const key = randomBytes(32).toString("hex");
  await writeStack(box, stackDir, key);
  const docker = dockerClient(managerHost);
  const env = { ...process.env, DOCKER_HOST: managerHost, HAL0_CONFIG: box, HAL0_STATE: stateDir };
  const stack = (args: string[]) => wall("docker", ["stack", ...args], env, stackDir);
  const deploy = () => stack(["deploy", "--resolve-image", "never", "--detach", "--quiet", "-c", "stack.yml", STACK]);
  const removeStack = async () => {
    await stack(["rm", STACK]);
    await waitStackGone(docker, 60_000);
  };
  const hal0 = (args: string[]) => wall(process.execPath, [HAL0, ...args], env);
  const r = { hal0Create: [] as number[], stackCreate: [] as number[], hal0Noop: [] as number[], stackNoop: [] as number[] };
  /** One round: the stack created, re-deployed unchanged and removed, then the same for hal0; its times kept only when all of it went through. */
  const round = async () => {
    const t: typeof r = { hal0Create: [], stackCreate: [], hal0Noop: [], stackNoop: [] };
    await waitNodesReady(docker, 120_000);
    const t0 = performance.now();
    await deploy();
    await waitStackReady(docker, key, 120_000);
    t.stackCreate.push(performance.now() - t0);
    const tasks = await taskCount(docker);
    for (let i = 0; i < NOOPS; i++) t.stackNoop.push(await deploy());
    if ((await taskCount(docker)) !== tasks) throw new Error(`re-deploying stack ${STACK} unchanged restarted tasks (${tasks} → ${await taskCount(docker)})`);
    await removeStack();
    await waitNodesReady(docker, 120_000);
    t.hal0Create.push(await hal0(["apply", "--yes"]));
    for (let i = 0; i < NOOPS; i++) t.hal0Noop.push(await hal0(["apply", "--yes"]));
    await hal0(["down"]);
    for (const k of Object.keys(r) as (keyof typeof r)[]) r[k].push(...t[k]);
  };
  try {
    // The rig may be shared: a round that fails (a node restarted under it) is cleaned up and run again, twice at most.
    for (let done = 0, failed = 0; done < ROUNDS; ) {
      try {
        await round();
        done++;
      } catch (err) {
        if (++failed > 2) throw err;
        process.stderr.write(`swarm bench: a round failed, cleaning up and running it again: ${(err as Error).message.split("\n")[0]}\n`);
        await stack(["rm", STACK]).catch(() => undefined);
        await waitStackGone(docker, 60_000).catch(() => undefined);
        await hal0(["down"]).catch(() => undefined);
      }
    }
  } finally {
    await stack(["rm", STACK]).catch(() => undefined);
    await waitStackGone(docker, 60_000).catch(() => undefined);
    await hal0(["down"]).catch(() => undefined);
    // hal0 down leaves the box's key secret (it outlives slots); this bench's box goes, so does its secret.
    const boxId = await new StateStore(stateDir).boxId().catch(() => undefined);
    if (boxId !== undefined) {
      const secrets = await docker.listSecrets({ filters: { label: [`hal0.box=${boxId}`] } }).catch(() => []);
      await Promise.all(secrets.map((s) => docker.getSecret(s.ID).remove().catch(() => undefined)));
    }
    rmSync(base, { recursive: true, force: true });
  }
  // stack's median over hal0's: above 1 hal0 is that many times faster, below it the stack is.
  const verdict = (stackMs: number[], hal0Ms: number[]) => {
    const x = median(stackMs) / median(hal0Ms);
    return x >= 1 ? `hal0 ${x.toFixed(2)}× faster` : `hal0 ${(1 / x).toFixed(2)}× slower`;
  };
  return [
    `no-op converge, 30 running on 3 nodes:  hal0 apply --yes ${median(r.hal0Noop).toFixed(0)} ms   docker stack deploy ${median(r.stackNoop).toFixed(0)} ms   → ${verdict(r.stackNoop, r.hal0Noop)}`,
    `create 30 on 3 nodes:                   hal0 apply --yes ${(median(r.hal0Create) / 1000).toFixed(2)} s   docker stack deploy ${(median(r.stackCreate) / 1000).toFixed(2)} s   → ${verdict(r.stackCreate, r.hal0Create)} (both until every /health answers 200 at its node; hal0 starts [slots] parallel = 4 per node at a time, Swarm all 30)`,
  ];
}
