import { once } from "node:events";
import { mkdtempSync, readdirSync, statSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { dockerClient } from "../../reconciler/drivers/docker.js";
import { DriverError } from "../../reconciler/drivers/driver.js";
import { SwarmDriver } from "../../reconciler/drivers/swarm.js";
import { SwarmKey } from "../../reconciler/drivers/swarm-key.js";
import { compile, sourceTree, type Model } from "../../compiler/index.js";
import { nodeMatches } from "../../reconciler/nodes.js";
import { logFramesOf, logLinesOf } from "../../reconciler/drivers/docker-container.js";
import { allSlotConditions } from "../../reconciler/conditions.js";
import { slotConditionsNow } from "../../reconciler/conditions-store.js";
import { StateStore } from "../../reconciler/state.js";
import { constraintsOf, nodeFrom, observedService, serviceSpec, type ListedService, type ListedTask } from "../../reconciler/drivers/swarm-service.js";
import { planChanges } from "../../reconciler/plan.js";
import { HealthCache } from "../../reconciler/health-cache.js";
import { slotView, viewChangedPaths } from "../../reconciler/view.js";
import { effectsOf } from "../../compiler/effects.js";
import { formatPlan } from "../../reconciler/format.js";
import type { ObservedNode, SlotView } from "../../reconciler/observed.js";

/**
 * The swarm runtime's plain-data half (reconciler/drivers/swarm-service.ts)
 * and what the compiler and the planner make of swarm slots, without an
 * engine: the create spec, how services, tasks and nodes read back into an
 * observed slot (a node down, no node to fit, a task Swarm moved, a service
 * edited by hand), and the plan and effects of a placement change. The
 * three-node rig runs the same against real engines (test/cli/swarm-apply.test.ts).
 */

const BOX = "box-test";
/** The box's label key (state-key.ts): what the `hal0.view` label seals env values with. */
const LABEL_KEY = "ab".repeat(32);

function swarmModel(slots: Record<string, string>, settings = ""): Model {
  const files: [string, string][] = [
    ["hal0.toml", `[slots]\nruntime = "swarm"\nport_range_start = 1024\nport_range_end = 65535\n${settings}`],
    ["profiles.toml", `[profile.fake]\nimage = "hal0-runner:local"\nflags = "--parallel 1"\ndevice_class = "cpu"\n`],
    ["models.toml", `[model.tiny]\npath = "/models/tiny.gguf"\ntype = "llm"\n`],
    ...Object.entries(slots).map(([name, text]): [string, string] => [`slots/${name}.toml`, `profile = "fake"\nmodel = "tiny"\n${text}`]),
  ];
  const { model, diagnostics } = compile(sourceTree("/box", files));
  expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);
  return model!;
}

const NODES: ObservedNode[] = [
  nodeFrom({ ID: "n1".padEnd(25, "a"), Spec: { Role: "manager", Availability: "active", Labels: {} }, Description: { Hostname: "node-1", Engine: { EngineVersion: "20.10.24" } }, Status: { State: "ready", Addr: "0.0.0.0" }, ManagerStatus: { Addr: "10.0.0.1:2377" } }),
  nodeFrom({ ID: "n2".padEnd(25, "b"), Spec: { Role: "worker", Availability: "active", Labels: { gpu: "rocm" } }, Description: { Hostname: "node-2", Engine: { EngineVersion: "20.10.24" } }, Status: { State: "ready", Addr: "10.0.0.2" } }),
  nodeFrom({ ID: "n3".padEnd(25, "c"), Spec: { Role: "worker", Availability: "active", Labels: {} }, Description: { Hostname: "node-3", Engine: { EngineVersion: "20.10.24" } }, Status: { State: "down", Message: "heartbeat failure", Addr: "10.0.0.3" } }),
];
const byId = new Map(NODES.map((n) => [n.id, n]));

function serviceOf(name: string, view: SlotView, edit: (spec: ReturnType<typeof serviceSpec>) => void = () => {}): ListedService {
  const spec = serviceSpec({ box: BOX, name, view, mounts: [], stopGraceS: 5, hostNetwork: "hostnet", secret: { id: "sec", name: "hal0-api-key-box-test" }, labelKey: LABEL_KEY });
  edit(spec);
  return { ID: `svc-${name}`, Spec: spec as unknown as ListedService["Spec"], CreatedAt: "2026-12-02T10:00:00Z" };
}

function task(service: string, node: string | undefined, state: string, at: string, desired = "running", err?: string): ListedTask {
  return { ID: `t-${service}-${at}`, ServiceID: service, ...(node ? { NodeID: node } : {}), DesiredState: desired, Status: { State: state, Timestamp: at, ...(err ? { Err: err } : {}) } };
}

describe("swarm services as plain data", () => {
  const model = swarmModel({
    pinned: `port = 9001\n[placement]\nnode = "node-2"\n`,
    labelled: `port = 9002\n[placement]\nlabels = { gpu = "rocm" }\n`,
    far: `port = 9003\n[placement]\nnode = "node-3"\n`,
  });
  const far = slotView(model.slots.far!);
  const pinned = slotView(model.slots.pinned!);
  const labelled = slotView(model.slots.labelled!);

  it("compiles a swarm slot to argv that binds its node and reads the key from a file, never the key itself", () => {
    const { argv, host, placement } = pinned.spec;
    expect(host).toBe("0.0.0.0");
    expect(argv.join(" ")).toContain("--host 0.0.0.0 --port 9001 --api-key-file /run/secrets/hal0-api-key");
    expect(argv).not.toContain("--api-key");
    expect(placement).toEqual({ labels: {}, node: "node-2" });
    expect(labelled.spec.placement).toEqual({ labels: { gpu: "rocm" } });
  });

  it("renders placement as constraints and checks nodes against it", () => {
    expect(constraintsOf(pinned)).toEqual(["node.hostname==node-2"]);
    expect(constraintsOf(labelled)).toEqual(["node.labels.gpu==rocm"]);
    expect(nodeMatches(pinned, NODES[1]!)).toBe(true);
    expect(nodeMatches(pinned, NODES[0]!)).toBe(false);
    expect(nodeMatches(labelled, NODES[1]!)).toBe(true);
    expect(nodeMatches(labelled, NODES[2]!)).toBe(false);
  });

  it("creates one replica on the host network with init, the key as a 0400 secret file, labels and an update that stops first", () => {
    const spec = serviceSpec({ box: BOX, name: "pinned", view: pinned, mounts: [], stopGraceS: 7, hostNetwork: "hostnet", secret: { id: "sec", name: "hal0-api-key-box-test" }, labelKey: LABEL_KEY }) as any;
    expect(spec.Name).toBe("hal0-slot-pinned");
    expect(spec.Mode).toEqual({ Replicated: { Replicas: 1 } });
    expect(spec.TaskTemplate.Networks).toEqual([{ Target: "hostnet" }]);
    expect(spec.TaskTemplate.ContainerSpec.Init).toBe(true);
    expect(spec.TaskTemplate.ContainerSpec.StopGracePeriod).toBe(7e9);
    expect(spec.TaskTemplate.ContainerSpec.Secrets).toEqual([{ SecretID: "sec", SecretName: "hal0-api-key-box-test", File: { Name: "hal0-api-key", UID: "0", GID: "0", Mode: 0o400 } }]);
    expect(spec.TaskTemplate.Placement.Constraints).toEqual(["node.hostname==node-2"]);
    expect(spec.UpdateConfig).toMatchObject({ Order: "stop-first", FailureAction: "continue" });
    expect(spec.Labels).toMatchObject({ "hal0.managed": "true", "hal0.box": BOX, "hal0.slot": "pinned", "hal0.node": "node-2", "hal0.spec-hash": pinned.spec_hash });
  });

  it("takes a manager's address from its manager status when its node address is 0.0.0.0", () => {
    expect(NODES[0]!.addr).toBe("10.0.0.1");
    expect(NODES[0]!.role).toBe("manager");
  });

  it("reads a running task on a ready node as running, at that node's address", () => {
    const svc = serviceOf("pinned", pinned);
    const seen = observedService(svc, [task(svc.ID, NODES[1]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(seen).toMatchObject({ name: "pinned", running: true, node: { hostname: "node-2", addr: "10.0.0.2" } });
    expect(seen.record!.view.spec_hash).toBe(pinned.spec_hash);
    expect(seen.unplaced).toBeUndefined();
  });

  it("a service scaled to two replicas by hand reads as running and edited, whichever of its tasks is newest (the second failing to bind beside the first)", () => {
    const svc = serviceOf("pinned", pinned, (s: any) => (s.Mode.Replicated.Replicas = 2));
    const first = task(svc.ID, NODES[1]!.id, "running", "2026-12-02T10:00:01Z");
    const second = { ...task(svc.ID, NODES[1]!.id, "starting", "2026-12-02T10:00:09Z"), ID: "t-second" };
    const seen = observedService(svc, [first, second], byId, BOX)!;
    expect(seen).toMatchObject({ running: true, node: { hostname: "node-2" } });
    expect(seen.detail).toContain("changed behind hal0's back (replicas)");
    expect(seen.record!.view.spec_hash).toBe(`${pinned.spec_hash}+edited`);
  });

  it("leaves another box's service and an unlabelled one out", () => {
    expect(observedService(serviceOf("pinned", pinned), [], byId, "other-box")).toBeUndefined();
    const renamed = serviceOf("pinned", pinned, (s: any) => (s.Name = "someone-else"));
    expect(observedService(renamed, [], byId, BOX)).toBeUndefined();
  });

  it("says a task on a node that is down is held there (node_down), not running", () => {
    const svc = serviceOf("far", far);
    const seen = observedService(svc, [task(svc.ID, NODES[2]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(seen.running).toBe(false);
    expect(seen.unplaced).toEqual({ reason: "node_down", message: expect.stringContaining("node node-3 is down (heartbeat failure)") });
  });

  it("says a pending task that no node fits is unschedulable, and names the node it left when that node is down", () => {
    const svc = serviceOf("labelled", labelled);
    const pending = task(svc.ID, undefined, "pending", "2026-12-02T10:00:05Z", "running", "no suitable node (scheduling constraints not satisfied on 3 nodes)");
    expect(observedService(svc, [pending], byId, BOX)!.unplaced?.reason).toBe("unschedulable");
    // Swarm's words do not say why; the nodes its placement matches, with their state and availability, do (one drained).
    const drained = new Map(NODES.map((n) => [n.id, n.hostname === "node-2" ? { ...n, availability: "drain" } : n]));
    expect(observedService(svc, [pending], drained, BOX)!.unplaced!.message).toBe("no node can run hal0-slot-labelled: no suitable node (scheduling constraints not satisfied on 3 nodes) (the nodes its placement matches: node-2 ready/drain)");
    const nowhere = serviceOf("cuda", slotView(swarmModel({ cuda: `port = 9009\n[placement]\nlabels = { gpu = "cuda" }\n` }).slots.cuda!));
    expect(observedService(nowhere, [{ ...pending, ServiceID: nowhere.ID }], byId, BOX)!.unplaced!.message).toContain("(the nodes its placement matches: none)");
    const left = task(svc.ID, NODES[2]!.id, "running", "2026-12-02T10:00:01Z", "shutdown");
    const seen = observedService(svc, [pending, left], byId, BOX)!;
    expect(seen.unplaced).toEqual({ reason: "node_down", message: expect.stringMatching(/^node node-3 is down .* and no other node can run hal0-slot-labelled/) });
  });

  it("reads a service whose task Swarm is starting again after its runner exited as starting, not stopped: through the restart delay, pending, preparing and starting", () => {
    const svc = serviceOf("pinned", pinned);
    const n2 = NODES[1]!.id;
    const exited = { ...task(svc.ID, n2, "failed", "2026-12-02T10:00:10Z", "shutdown", "task: non-zero exit (137)"), Status: { State: "failed", Timestamp: "2026-12-02T10:00:10Z", Err: "task: non-zero exit (137)", ContainerStatus: { ExitCode: 137 } } };
    // What the manager lists, step by step, from the runner's exit to its next task running (read on the rig).
    const steps: [string, ListedTask[]][] = [
      ["exited, its next task not made yet", [{ ...exited, DesiredState: "running" }]],
      ["the restart delay: pending", [task(svc.ID, undefined, "pending", "2026-12-02T10:00:11Z", "ready"), exited]],
      ["the restart delay: assigned", [task(svc.ID, n2, "assigned", "2026-12-02T10:00:11Z", "ready"), exited]],
      ["the restart delay: ready", [task(svc.ID, n2, "ready", "2026-12-02T10:00:11Z", "ready"), exited]],
      ["after the delay: ready", [task(svc.ID, n2, "ready", "2026-12-02T10:00:13Z"), exited]],
      ["after the delay: starting", [task(svc.ID, n2, "starting", "2026-12-02T10:00:13Z"), exited]],
    ];
    for (const [when, tasks] of steps) {
      const seen = observedService(svc, tasks, byId, BOX)!;
      expect([when, seen.running, seen.unplaced, seen.starting?.failed]).toEqual([when, false, undefined, 1]);
      expect(seen.record!.view.spec_hash, when).toBe(pinned.spec_hash);
      expect(seen.detail, when).toMatch(/^Swarm is restarting hal0-slot-pinned \(its runner exited; the last: task: non-zero exit \(137\), exit code 137\): .*; hal0 leaves the restart to Swarm$/);
    }
    expect(observedService(svc, steps[3]![1], byId, BOX)!.detail).toContain("its next task is ready on node node-2, held for the restart delay");
    const up = observedService(svc, [task(svc.ID, n2, "running", "2026-12-02T10:00:14Z"), exited], byId, BOX)!;
    expect([up.running, up.starting]).toEqual([true, undefined]);
    // A first task on its way is starting too, with nothing failed; one that keeps exiting counts its exits (within 10 min).
    expect(observedService(svc, [task(svc.ID, n2, "preparing", "2026-12-02T10:00:01Z")], byId, BOX)!.starting).toEqual({ message: "Swarm is starting hal0-slot-pinned: its task is preparing on node node-2", failed: 0 });
    const old = { ...exited, ID: "t-old", Status: { ...exited.Status, Timestamp: "2026-12-02T09:00:00Z" } };
    const again = { ...exited, ID: "t-again", Status: { ...exited.Status, Timestamp: "2026-12-02T10:00:05Z" } };
    const looping = observedService(svc, [task(svc.ID, n2, "ready", "2026-12-02T10:00:11Z", "ready"), exited, again, old], byId, BOX)!;
    expect(looping.starting?.failed).toBe(2);
    expect(looping.detail).toContain("its runner exited 2 times in a row");
    // A node that refuses the task (its image gone from there) has Swarm retry it too: no runner ran.
    const refused = (at: string) => ({ ...exited, ID: `t-r-${at}`, Status: { State: "rejected", Timestamp: at, Err: "No such image: hal0-runner:local" } });
    const rejecting = observedService(svc, [task(svc.ID, n2, "ready", "2026-12-02T10:00:11Z", "ready"), refused("2026-12-02T10:00:10Z"), refused("2026-12-02T10:00:07Z"), refused("2026-12-02T10:00:04Z")], byId, BOX)!;
    expect(rejecting.starting).toEqual({ message: expect.stringContaining("(its node rejected its task 3 times in a row; the last: No such image: hal0-runner:local)"), failed: 3 });
  });

  it("a runner Swarm restarted is a new runner: its start is its running task's, not the service's creation, so uptime and the sweep's health answers follow it", () => {
    const svc = serviceOf("pinned", pinned);
    const n2 = NODES[1]!.id;
    const first = task(svc.ID, n2, "running", "2026-12-02T10:00:01.123456789Z");
    const before = observedService(svc, [first], byId, BOX)!;
    expect(before.record!.started_at).toBe("2026-12-02T10:00:01.123Z");
    const exited = { ...first, DesiredState: "shutdown", Status: { State: "failed", Timestamp: "2026-12-02T10:05:00Z", Err: "task: non-zero exit (137)" } };
    const after = observedService(svc, [task(svc.ID, n2, "running", "2026-12-02T10:05:02.5Z"), exited], byId, BOX)!;
    expect(after.record!.started_at).toBe("2026-12-02T10:05:02.500Z");
    // The sweep's cached 200 was the first runner's: the restarted one is probed, not taken as Ready on the old answer.
    const cache = new HealthCache(60_000);
    cache.begin(0).finish([{ ...before, health: "ok" }]);
    const { options } = cache.begin(1000);
    expect(options.probe!(before)).toBe(false);
    expect(options.probe!(after)).toBe(true);
    // A task that does not run yet has no start of its own: the service's creation stands.
    expect(observedService(svc, [task(svc.ID, n2, "starting", "2026-12-02T10:05:02Z")], byId, BOX)!.record!.started_at).toBe("2026-12-02T10:00:00Z");
  });

  it("says a task running on a node its placement does not allow drifted", () => {
    const svc = serviceOf("labelled", labelled);
    const seen = observedService(svc, [task(svc.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(seen.running).toBe(true);
    expect(seen.record!.view.spec_hash).toBe(`${labelled.spec_hash}+misplaced`);
    expect(seen.detail).toContain("runs on node node-1, which its placement does not allow");
  });

  it("notes the node Swarm moved a running slot from", () => {
    const svc = serviceOf("labelled", labelled);
    const now = task(svc.ID, NODES[1]!.id, "running", "2026-12-02T10:00:09Z");
    const before = task(svc.ID, NODES[2]!.id, "shutdown", "2026-12-02T10:00:01Z", "shutdown");
    expect(observedService(svc, [before, now], byId, BOX)!.node).toMatchObject({ hostname: "node-2", moved_from: "node-3" });
  });

  it("reads a service edited by hand back into its view, so the plan names what changed and the hash drifts", () => {
    const svc = serviceOf("pinned", pinned, (s: any) => {
      s.TaskTemplate.ContainerSpec.Env = [...s.TaskTemplate.ContainerSpec.Env, "FOO=bar"];
      s.TaskTemplate.Placement.Constraints = ["node.hostname==node-1"];
    });
    const seen = observedService(svc, [task(svc.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(seen.record!.view.spec.env.FOO).toBe("bar");
    expect(seen.record!.view.spec.placement).toEqual({ labels: {}, node: "node-1" });
    expect(seen.record!.view.spec_hash).not.toBe(pinned.spec_hash);
    expect(seen.record!.view.spec_hash).toMatch(/^sha256:[0-9a-f]{64}$/); // read back whole: not marked misplaced (it runs where the edit says)
    expect(seen.detail).toContain("changed behind hal0's back (env, constraints)");
  });

  it("keeps no env value in the hal0.view label, reads the service's env back as its own, and an env value changed by hand as edited", () => {
    const secret = "hf_labelsecret0123456789abcdef";
    const withEnv = slotView(swarmModel({ envy: `port = 9004\n[server]\nenv = { HF_TOKEN = "${secret}", OMP_NUM_THREADS = "8" }\n` }).slots.envy!);
    const svc = serviceOf("envy", withEnv);
    expect(svc.Spec.Labels!["hal0.view"]).not.toContain(secret);
    expect(svc.Spec.Labels!["hal0.view"]).not.toContain('"8"');
    expect(JSON.parse(svc.Spec.Labels!["hal0.view"]!).spec.env).toEqual({ HF_TOKEN: expect.stringMatching(/^hmac-sha256:[0-9a-f]{32}$/), OMP_NUM_THREADS: expect.stringMatching(/^hmac-sha256:/) });
    const seen = observedService(svc, [task(svc.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(seen.record!.view).toEqual(withEnv);
    expect(seen.detail).toBeUndefined();
    const edited = serviceOf("envy", withEnv, (s: any) => (s.TaskTemplate.ContainerSpec.Env = ["HF_TOKEN=hf_another", "OMP_NUM_THREADS=8"]));
    const drifted = observedService(edited, [task(edited.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(drifted.detail).toContain("changed behind hal0's back (env)");
    expect(drifted.record!.view.spec.env).toEqual({ HF_TOKEN: "hf_another", OMP_NUM_THREADS: "8" });
    expect(drifted.record!.view.spec_hash).not.toBe(withEnv.spec_hash);
  });

  it("reads a service's env as made whatever order its names sort in (SHARD before SHARD2, but SHARD2=… before SHARD=…): no drift right after a start", () => {
    const sharded = slotView(swarmModel({ sharded: `port = 9010\n[server]\nenv = { SHARD = "a", SHARD2 = "b", SHARD_X = "c" }\n` }).slots.sharded!);
    const svc = serviceOf("sharded", sharded);
    const seen = observedService(svc, [task(svc.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(seen.detail).toBeUndefined();
    expect(seen.record!.view).toEqual(sharded);
    // The manager keeps the list as it was given; one it lists in another order is the same env.
    const reordered = serviceOf("sharded", sharded, (s: any) => s.TaskTemplate.ContainerSpec.Env.reverse());
    expect(observedService(reordered, [task(reordered.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!.detail).toBeUndefined();
  });

  it("keeps no secret flag value (--api-key in extra_args) in the hal0.view label, reads the service's args back as its own, and a key changed by hand as edited", () => {
    const secret = "sk-labelsecret0123456789abcdef";
    const keyed = slotView(swarmModel({ keyed: `port = 9005\n[server]\nextra_args = "--api-key ${secret}"\n` }).slots.keyed!);
    expect(keyed.spec.argv).toContain(secret);
    const svc = serviceOf("keyed", keyed);
    expect(svc.Spec.Labels!["hal0.view"]).not.toContain(secret);
    expect((svc.Spec as any).TaskTemplate.ContainerSpec.Args).toContain(secret);
    const seen = observedService(svc, [task(svc.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(seen.record!.view).toEqual(keyed);
    expect(seen.detail).toBeUndefined();
    const edited = serviceOf("keyed", keyed, (s: any) => (s.TaskTemplate.ContainerSpec.Args = s.TaskTemplate.ContainerSpec.Args.map((w: string) => (w === secret ? "sk-by-hand" : w))));
    const drifted = observedService(edited, [task(edited.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(drifted.record!.view.spec_hash).not.toBe(keyed.spec_hash);
    expect(drifted.record!.view.spec.argv).toContain("sk-by-hand");
    expect(drifted.detail).toContain("changed behind hal0's back (args)");
  });

  it("gives a runner probed as llama-server its --api-key and --hf-token in the service's env, not its args (every user of the node reads a task's command line), and reads them back as its own", () => {
    const secret = "sk-argvsecret0123456789abcdef";
    const model = swarmModel({ keyed: `port = 9006\n[server]\nextra_args = "--api-key ${secret} --hf-token hf_argvtoken"\nenv = { OMP_NUM_THREADS = "8" }\n` });
    const keyed = { ...slotView(model.slots.keyed!), secrets_in_env: true };
    const svc = serviceOf("keyed", keyed);
    const c = (svc.Spec as any).TaskTemplate.ContainerSpec;
    expect(c.Args.join(" ")).not.toContain(secret);
    expect(c.Args.join(" ")).not.toContain("hf_argvtoken");
    expect(c.Args).not.toContain("--api-key");
    expect(c.Args).toContain("--api-key-file"); // the box's key, from the Swarm secret, stays
    expect(c.Env).toEqual(["HF_TOKEN=hf_argvtoken", `LLAMA_API_KEY=${secret}`, "OMP_NUM_THREADS=8"]);
    expect(svc.Spec.Labels!["hal0.view"]).not.toContain(secret);
    // The spec and its hash keep the argv as the config wrote it: nothing re-plans, nothing is drift.
    expect(svc.Spec.Labels!["hal0.spec-hash"]).toBe(keyed.spec_hash);
    const running = (s: ListedService) => [task(s.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")];
    const seen = observedService(svc, running(svc), byId, BOX)!;
    expect(seen.record!.view).toEqual(keyed);
    expect(seen.detail).toBeUndefined();
    // A key changed by hand (a service made again with the labels copied) is an edit of its env.
    const edited = serviceOf("keyed", keyed, (s: any) => (s.TaskTemplate.ContainerSpec.Env = s.TaskTemplate.ContainerSpec.Env.map((e: string) => e.replace(secret, "sk-by-hand"))));
    const drifted = observedService(edited, running(edited), byId, BOX)!;
    expect(drifted.detail).toContain("changed behind hal0's back (env)");
    expect(drifted.record!.view.spec_hash).not.toBe(keyed.spec_hash);
    // Its variable removed: the runner would want no key.
    const dropped = serviceOf("keyed", keyed, (s: any) => (s.TaskTemplate.ContainerSpec.Env = s.TaskTemplate.ContainerSpec.Env.filter((e: string) => !e.startsWith("LLAMA_API_KEY="))));
    expect(observedService(dropped, running(dropped), byId, BOX)!.detail).toContain("changed behind hal0's back");
    // A variable added by `docker service update --env-add`: that is the edit, and the plan names it alone, not the keys.
    const added = serviceOf("keyed", keyed, (s: any) => s.TaskTemplate.ContainerSpec.Env.push("FOO=1"));
    const addedSeen = observedService({ ...added, PreviousSpec: svc.Spec }, running(added), byId, BOX)!;
    expect(addedSeen.detail).toBe("service hal0-slot-keyed was changed behind hal0's back (env)");
    expect(viewChangedPaths(keyed, addedSeen.record!.view)).toEqual(["env.FOO"]);
    // A runner not probed as llama-server keeps its flags in its args (it may not read the variables).
    const kept = serviceOf("keyed", slotView(model.slots.keyed!));
    expect((kept.Spec as any).TaskTemplate.ContainerSpec.Args).toEqual(expect.arrayContaining(["--api-key", secret]));
    expect((kept.Spec as any).TaskTemplate.ContainerSpec.Env).toEqual(["OMP_NUM_THREADS=8"]);
  });

  it("joins a declared LLAMA_API_KEY and the --api-key into the one variable, reads each back whatever commas the list has, and leaves alone what it cannot read back", () => {
    const model = swarmModel({
      many: `port = 9007\n[server]\nextra_args = "--api-key=k-one,k-two"\nenv = { LLAMA_API_KEY = "k-dec,lared" }\n`,
      tokens: `port = 9008\n[server]\nextra_args = "--hf-token hf_flag"\nenv = { HF_TOKEN = "hf_declared" }\n`,
    });
    const many = { ...slotView(model.slots.many!), secrets_in_env: true };
    const svc = serviceOf("many", many);
    expect((svc.Spec as any).TaskTemplate.ContainerSpec.Env).toEqual(["LLAMA_API_KEY=k-dec,lared,k-one,k-two"]);
    expect((svc.Spec as any).TaskTemplate.ContainerSpec.Args.join(" ")).not.toContain("k-");
    const seen = observedService(svc, [task(svc.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(seen.record!.view).toEqual(many);
    expect(seen.detail).toBeUndefined();
    // The flag's token overrides the declared HF_TOKEN, which the service does not carry: the label's view, as made, no drift.
    const tokens = { ...slotView(model.slots.tokens!), secrets_in_env: true };
    const tsvc = serviceOf("tokens", tokens);
    expect((tsvc.Spec as any).TaskTemplate.ContainerSpec.Env).toEqual(["HF_TOKEN=hf_flag"]);
    const tseen = observedService(tsvc, [task(tsvc.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(tseen.detail).toBeUndefined();
    expect(tseen.record!.view.spec_hash).toBe(tokens.spec_hash);
    expect(JSON.stringify(tseen.record!.view)).not.toContain("hf_declared");
    // Updated by hand all the same: drift.
    const updated = observedService({ ...tsvc, PreviousSpec: tsvc.Spec }, [task(tsvc.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(updated.detail).toContain("changed behind hal0's back (update)");
  });

  it("leaves a service an earlier hal0 made with --api-key in its args running as it is (no re-plan, no restart), and reads an edit of its placement without the key moving", () => {
    const secret = "sk-oldservice0123456789abcdef";
    const model = swarmModel({ old: `port = 9009\n[server]\nextra_args = "--api-key ${secret}"\n[placement]\nnode = "node-1"\n` });
    const old = { ...slotView(model.slots.old!), secrets_in_env: true };
    const earlier = serviceOf("old", old, (s: any) => {
      s.TaskTemplate.ContainerSpec.Args = [...old.spec.argv];
      s.TaskTemplate.ContainerSpec.Env = [];
    });
    const seen = observedService(earlier, [task(earlier.ID, NODES[0]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(seen.record!.view).toEqual(old);
    expect(seen.detail).toBeUndefined();
    // A service made now, its constraint edited by hand: the plan names the placement, not the key.
    const moved = serviceOf("old", old, (s: any) => (s.TaskTemplate.Placement.Constraints = ["node.hostname==node-2"]));
    const drifted = observedService(moved, [task(moved.ID, NODES[1]!.id, "running", "2026-12-02T10:00:01Z")], byId, BOX)!;
    expect(drifted.detail).toContain("changed behind hal0's back (constraints)");
    expect(drifted.record!.view.spec.argv).toEqual(old.spec.argv);
    expect(drifted.record!.view.spec.env).toEqual({});
    expect(drifted.record!.view.spec.placement).toEqual({ labels: {}, node: "node-2" });
  });

  it("counts any update by hand as drift, naming what it changed, even one the spec cannot express (a mount, the user, a limit)", () => {
    const created = serviceOf("pinned", pinned);
    const svc: ListedService = { ...serviceOf("pinned", pinned, (s: any) => {
      s.TaskTemplate.ContainerSpec.Mounts = [{ Type: "bind", Source: "/etc", Target: "/host-etc", ReadOnly: true }];
      s.TaskTemplate.ContainerSpec.User = "0:0";
      s.TaskTemplate.Resources = { Limits: { MemoryBytes: 64 << 20 } };
    }), PreviousSpec: created.Spec };
    const running = [task(svc.ID, NODES[1]!.id, "running", "2026-12-02T10:00:01Z")];
    const seen = observedService(svc, running, byId, BOX)!;
    expect(seen.running).toBe(true);
    expect(seen.record!.view.spec_hash).toBe(`${pinned.spec_hash}+edited`);
    expect(seen.detail).toBe("service hal0-slot-pinned was changed behind hal0's back (Resources, ContainerSpec.Mounts, ContainerSpec.User)");
    // A forced update or a rollback changes none of them: still an update hal0 did not make.
    expect(observedService({ ...created, PreviousSpec: created.Spec }, running, byId, BOX)!.detail).toContain("changed behind hal0's back (update)");
    // What hal0 created, never updated since, is not drift.
    expect(observedService(created, running, byId, BOX)!.record!.view.spec_hash).toBe(pinned.spec_hash);
  });
});

describe("the planner on swarm observations", () => {
  const model = swarmModel({ a: `port = 9001\n[placement]\nnode = "node-2"\n`, b: `port = 9001\n[placement]\nnode = "node-3"\n` });
  const inventory = { version: 1 as const, box: BOX, slots: { a: { created_at: "x", runtime: "swarm" as const, spec_hash: model.slots.a!.spec_hash }, b: { created_at: "x", runtime: "swarm" as const, spec_hash: model.slots.b!.spec_hash } } };
  const a = slotView(model.slots.a!);
  const b = slotView(model.slots.b!);

  it("plans a slot whose node is down as unplaced (a no-op with a warning), and leaves the others", () => {
    const observed = {
      slots: {
        a: { name: "a", running: true, health: "ok" as const, record: { view: a, started_at: "x" }, node: { id: NODES[1]!.id, hostname: "node-2", addr: "10.0.0.2" } },
        b: { name: "b", running: false, health: "unknown" as const, record: { view: b, started_at: "x" }, unplaced: { reason: "node_down" as const, message: "node node-3 is down" } },
      },
      foreign_ports: {},
      nodes: NODES,
    };
    const plan = planChanges(model, observed, inventory);
    expect(plan.changes.filter((c) => c.kind === "slot").map((c) => [c.address, c.action, c.reason])).toEqual([["slot.a", "no-op", "unchanged"], ["slot.b", "no-op", "unplaced"]]);
    expect(plan.warnings).toEqual([{ address: "slot.b", code: "slot.unplaced", message: "slot `b`: node node-3 is down" }]);
  });

  it("leaves a slot Swarm is starting again to Swarm: a no-op (reason starting) under enforce and warn, no drift warning, starting in its conditions; a changed spec still replaces it", async () => {
    const starting = { message: "Swarm is restarting hal0-slot-a (its runner exited; the last: task: non-zero exit (137)): its next task is ready on node node-2, held for the restart delay; hal0 leaves the restart to Swarm", failed: 1 };
    const observed = (view: SlotView, failed = 1) => ({
      slots: { a: { name: "a", running: false, health: "unknown" as const, record: { view, started_at: "x" }, detail: starting.message, starting: { ...starting, failed } } },
      foreign_ports: {},
      nodes: NODES,
    });
    const single = swarmModel({ a: `port = 9001\n[placement]\nnode = "node-2"\n` });
    const warned = swarmModel({ a: `port = 9001\n[placement]\nnode = "node-2"\n` }, `[reconcile]\ndrift = "warn"\n`);
    const inv = { ...inventory, slots: { a: inventory.slots.a } };
    for (const m of [single, warned]) {
      const plan = planChanges(m, { ...observed(a), applied_settings: m.settings }, inv);
      expect(plan.changes.filter((c) => c.kind === "slot").map((c) => [c.address, c.action, c.reason])).toEqual([["slot.a", "no-op", "starting"]]);
      expect(plan.has_changes).toBe(false);
      expect(plan.warnings.filter((w) => w.address === "slot.a")).toEqual([]);
    }
    const { next } = allSlotConditions(single.slots, observed(a).slots, {}, {}, "T1", [], {}, NODES);
    const verdicts = Object.fromEntries(next["slot.a"]!.conditions.map((c) => [c.type, `${c.status} ${c.reason}`]));
    expect(verdicts).toEqual({ Ready: "False Starting", Reconciling: "True Starting", Stalled: "False Progressing", Degraded: "False AsExpected" });
    // Swarm restarting it again and again: Degraded CrashLoop, and still left to Swarm.
    const looping = allSlotConditions(single.slots, observed(a, 3).slots, {}, {}, "T1", [], {}, NODES).next["slot.a"]!.conditions.find((c) => c.type === "Degraded")!;
    expect([looping.status, looping.reason]).toEqual(["True", "CrashLoop"]);
    expect(planChanges(single, { ...observed(a, 3), applied_settings: single.settings }, inv).has_changes).toBe(false);
    // What it runs is not what the config says now: replaced, as a running one would be.
    const moved = swarmModel({ a: `port = 9011\n[placement]\nnode = "node-2"\n` });
    expect(planChanges(moved, observed(a), inv).changes.filter((c) => c.kind === "slot").map((c) => [c.action, c.reason])).toEqual([["replace", "spec_changed"]]);
    // A restart asked for is still carried out (the service is made again).
    expect(planChanges(single, observed(a), inv, { replace: ["slot.a"] }).changes.find((c) => c.address === "slot.a")!.action).toBe("create");
  });

  it("holds a new slot no ready node can take (a label no node carries, its node down): unplaced at plan time, not a Pending service", () => {
    const wanting = swarmModel({ cuda: `port = 9005\n[placement]\nlabels = { gpu = "cuda" }\n`, far: `port = 9006\n[placement]\nnode = "node-3"\n`, any: `port = 9007\n` });
    const plan = planChanges(wanting, { slots: {}, foreign_ports: {}, nodes: NODES }, { version: 1, box: BOX, slots: {} });
    expect(plan.changes.filter((c) => c.kind === "slot").map((c) => [c.address, c.action, c.reason])).toEqual([
      ["slot.any", "create", "new"], ["slot.cuda", "no-op", "unplaced"], ["slot.far", "no-op", "unplaced"],
    ]);
    const warning = plan.warnings.find((w) => w.address === "slot.cuda")!;
    expect(warning.code).toBe("slot.unplaced");
    expect(warning.message).toContain("no ready, active node of the swarm matches its placement (labels gpu=cuda)");
    expect(warning.message).toContain("node-3 down/active");
    // Without a node list (one box, or no observation of nodes) nothing is held.
    expect(planChanges(wanting, { slots: {}, foreign_ports: {} }, { version: 1, box: BOX, slots: {} }).summary.create).toBe(3);
  });

  it("a slot the planner holds is not pending: Reconciling False Unplaced, Degraded with the reason, in the sweep's conditions and in one slot's", async () => {
    const wanting = swarmModel({ cuda: `port = 9005\n[placement]\nlabels = { gpu = "cuda" }\n`, far: `port = 9006\n[placement]\nnode = "node-3"\n`, any: `port = 9007\n` });
    const observed = { far: { name: "far", running: false, health: "unknown" as const, record: { view: slotView(wanting.slots.far!), started_at: "x" }, unplaced: { reason: "node_down" as const, message: "node node-3 is down" } } };
    const { next } = allSlotConditions(wanting.slots, observed, {}, {}, "T1", [], {}, NODES);
    const verdicts = (address: string) => Object.fromEntries(next[address]!.conditions.map((c) => [c.type, `${c.status} ${c.reason}`]));
    expect(verdicts("slot.cuda")).toEqual({ Ready: "False NotRunning", Reconciling: "False Unplaced", Stalled: "False Progressing", Degraded: "True Unschedulable" });
    expect(next["slot.cuda"]!.conditions.find((c) => c.type === "Degraded")!.message).toContain("no ready, active node of the swarm matches its placement (labels gpu=cuda)");
    expect(verdicts("slot.far")).toMatchObject({ Reconciling: "False Unplaced", Degraded: "True NodeDown" });
    // One any node takes is pending until it is started.
    expect(verdicts("slot.any")).toMatchObject({ Reconciling: "True ChangePending", Degraded: "False AsExpected" });
    // slot_state's conditions, from the same facts.
    const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-swarm-held-")));
    const one = await slotConditionsNow(wanting, "cuda", undefined, state, Date.now, NODES);
    expect(one.conditions.conditions.find((c) => c.type === "Reconciling")).toMatchObject({ status: "False", reason: "Unplaced" });
  });

  it("plans a node change as a replace naming placement.node, and shows where each slot goes", () => {
    const moved = swarmModel({ a: `port = 9001\n[placement]\nnode = "node-1"\n`, b: `port = 9001\n[placement]\nnode = "node-3"\n` });
    const observed = {
      slots: {
        a: { name: "a", running: true, health: "ok" as const, record: { view: a, started_at: "x" } },
        b: { name: "b", running: true, health: "ok" as const, record: { view: b, started_at: "x" } },
      },
      foreign_ports: {},
    };
    const plan = planChanges(moved, observed, inventory);
    const change = plan.changes.find((c) => c.address === "slot.a")!;
    expect([change.action, change.reason]).toEqual(["replace", "spec_changed"]);
    expect(change.changed_paths).toEqual(["placement.node"]);
    expect(formatPlan(plan)).toContain('-/+ slot.a (spec_changed) [destructive] [downtime]\n    placement.node: "node-2" → "node-1"');
    expect(plan.changes.find((c) => c.address === "slot.b")!.action).toBe("no-op");
  });
});

describe("placement edits are privileged", () => {
  it("classes a node or a label change as privileged (a person decides which machine runs a slot)", () => {
    const before = swarmModel({ a: `port = 9001\n[placement]\nnode = "node-2"\n` });
    const after = swarmModel({ a: `port = 9001\n[placement]\nnode = "node-3"\nlabels = { gpu = "rocm" }\n` });
    const effects = effectsOf({
      before, after,
      files: [{ file: "slots/a.toml", before: `profile = "fake"\nmodel = "tiny"\nport = 9001\n[placement]\nnode = "node-2"\n`, after: `profile = "fake"\nmodel = "tiny"\nport = 9001\n[placement]\nnode = "node-3"\nlabels = { gpu = "rocm" }\n` }],
    });
    const placement = effects.filter((e) => e.path[0] === "placement");
    expect(placement.length).toBeGreaterThanOrEqual(2);
    expect(placement.every((e) => e.class === "privileged")).toBe(true);
  });
});

describe("a service's log as the manager sends it", () => {
  /** One frame of the Engine API's multiplexed stream: type (1 stdout, 2 stderr, 3 the engine's own error), three zero bytes, the length. */
  const frame = (type: number, text: string) => {
    const body = Buffer.from(text);
    const head = Buffer.alloc(8);
    head[0] = type;
    head.writeUInt32BE(body.length, 4);
    return Buffer.concat([head, body]);
  };
  it("keeps the runner's stdout and stderr lines and sets the manager's own system-error frames apart", () => {
    const raw = Buffer.concat([frame(1, "loading model\n"), frame(2, "listening on 0.0.0.0:9001\n"), frame(3, "Error grabbing logs: node abc is not available\n")]);
    expect(logFramesOf(raw)).toEqual({ lines: ["loading model", "listening on 0.0.0.0:9001"], errors: ["Error grabbing logs: node abc is not available"] });
    expect(logLinesOf(raw)).toEqual(["loading model", "listening on 0.0.0.0:9001"]);
  });
});

describe("the box's API key (swarm-key.ts)", () => {
  it("is made once, 0600, however many starts ask for it at once, and read back by a new process's store", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-swarm-key-"));
    const store = new SwarmKey(dir);
    expect(await store.read()).toBeUndefined();
    const keys = await Promise.all(Array.from({ length: 5 }, () => store.ensure()));
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
    expect(await new SwarmKey(dir).read()).toBe(keys[0]);
    expect(readdirSync(dir)).toEqual(["swarm-api-key"]); // no temp file left
  });
});

describe("SwarmDriver when its manager goes away or stops answering", () => {
  // No engine needed: a socket that takes the connection and never answers, as a hung manager does, and one that is not there.
  it("observe, stop and start each give up after the bound with runtime.unavailable, naming the manager", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-swarm-silent-"));
    const sock = join(dir, "silent.sock");
    const held: Socket[] = [];
    const silent = createServer((c) => void held.push(c)).listen(sock);
    await once(silent, "listening");
    const driver = new SwarmDriver({ docker: dockerClient(`unix://${sock}`), address: `unix://${sock}`, answerMs: 300, box: BOX, stateDir: dir, key: new SwarmKey(dir) });
    const refusal = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => err as DriverError);
    const view = slotView(swarmModel({ a: `port = 9001\n[placement]\nnode = "node-2"\n` }).slots.a!);
    try {
      const began = Date.now();
      for (const call of [driver.observe(), driver.nodes(), driver.stop("a", 1), driver.start("a", view, { healthTimeoutS: 60, cwd: dir })]) {
        const err = await refusal(call);
        expect(err).toBeInstanceOf(DriverError);
        expect(err?.code).toBe("runtime.unavailable");
        expect(err!.message).toContain(`[slots] runtime = "swarm": the engine at unix://${sock} does not answer (no answer within 0.3 s)`);
      }
      expect(Date.now() - began).toBeLessThan(10_000);
    } finally {
      for (const c of held) c.destroy();
      silent.close();
    }
  });

  it("a manager whose socket is gone: observe is runtime.unavailable naming it, not a bare transport error (a 500 through the API)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-swarm-gone-"));
    const sock = join(dir, "gone.sock");
    const driver = new SwarmDriver({ docker: dockerClient(`unix://${sock}`), address: `unix://${sock}`, box: BOX, stateDir: dir, key: new SwarmKey(dir) });
    const err = await driver.observe().then(() => undefined, (e: unknown) => e as DriverError);
    expect(err).toBeInstanceOf(DriverError);
    expect(err?.code).toBe("runtime.unavailable");
    expect(err!.message).toContain(`the engine at unix://${sock} does not answer (connect ENOENT`);
  });
});
