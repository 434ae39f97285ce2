import { createHash } from "node:crypto";
import { SWARM_API_KEY_FILE, canonicalJson, rehashSpec } from "../../compiler/index.js";
import { CRASH_WINDOW_MS } from "../backoff.js";
import { nodeMatches } from "../nodes.js";
import type { ObservedNode, ObservedSlot, SlotView } from "../observed.js";
import { LABEL, containerName, labelledAs, argvAlike, parseView, slotLabels, type BindMount } from "./docker-container.js";
import { API_KEY_ENV, HF_TOKEN_ENV, runnerArgv, secretValues, type SecretValue } from "./runner-secrets.js";

/**
 * What a slot's Swarm service looks like, as plain data: the create spec the
 * manager gets, and how a listed service, its tasks and the nodes read back
 * into an observed slot. No dockerode here (only swarm.ts imports it); the
 * shapes are the Engine API's own field names.
 *
 * Invariant: a service is this box's slot `<name>` exactly when it is named
 * `hal0-slot-<name>` and carries `hal0.managed=true`, `hal0.box=<box>` and
 * `hal0.slot=<name>` (docker-container.ts's labels) — anything else is never
 * updated, removed or reported.
 */

/** The desired node of a swarm slot (`[placement] node`), as a service label. */
export const NODE_LABEL = "hal0.node";

/** Where the box's API key is mounted in every runner (the `--api-key-file` the compiler writes). */
const API_KEY_FILE = SWARM_API_KEY_FILE;

/**
 * The Swarm secret that holds `box`'s API key, named after the key's digest:
 * secrets are immutable, so a new key (its state file lost or removed) gets a
 * new secret, and the services hal0 starts from then on read the new key.
 * Secret names are at most 64 characters.
 */
export function secretName(box: string, key: string): string {
  return `hal0-api-key-${box.slice(0, 38)}-${createHash("sha256").update(key).digest("hex").slice(0, 12)}`;
}

/** A Swarm node id: 25 lowercase letters and digits. */
const NODE_ID = /^[a-z0-9]{25}$/;

/** `[placement] node` and `labels` as placement constraints, in a stable order. */
export function constraintsOf(view: SlotView): string[] {
  const placement = view.spec.placement;
  if (placement === undefined) return [];
  const out: string[] = [];
  if (placement.node !== undefined) out.push(NODE_ID.test(placement.node) ? `node.id==${placement.node}` : `node.hostname==${placement.node}`);
  for (const key of Object.keys(placement.labels).sort()) out.push(`node.labels.${key}==${placement.labels[key]}`);
  return out;
}

export interface ServiceInputs {
  readonly box: string;
  readonly name: string;
  readonly view: SlotView;
  readonly mounts: readonly BindMount[];
  readonly stopGraceS: number;
  /** The id of the manager's `host` network (a service joins it by id). */
  readonly hostNetwork: string;
  readonly secret: { readonly id: string; readonly name: string };
  /** The box's label key: the `hal0.view` label seals env values with it (slotLabels). */
  readonly labelKey: string;
}

/** The labels of a slot's service: its container's, plus the node its placement names (empty: placed by labels). */
export function serviceLabels(box: string, name: string, view: SlotView, labelKey: string): Record<string, string> {
  return { ...slotLabels(box, name, view, labelKey), [NODE_LABEL]: view.spec.placement?.node ?? "" };
}

/**
 * What a service of `view` runs with: its args and env as the docker runtime
 * creates a container (runnerArgv). A task's runner is a process of its node,
 * its command line (`/proc/<pid>/cmdline`) read by every local user there: the
 * `--api-key` and `--hf-token` of a runner probed as llama-server go in its
 * env (LLAMA_API_KEY, HF_TOKEN), not its args. The spec, its hash and the
 * `hal0.view` label keep the argv as the config wrote it.
 */
export function serviceRun(view: SlotView): { args: string[]; env: Record<string, string> } {
  const run = runnerArgv(view.spec.argv, 0, view, view.spec.env);
  return { args: [...run.argv], env: { ...view.spec.env, ...run.env } };
}

/**
 * `POST /services/create`: one replica on the host network with `Init`, the
 * stop grace as the containers' stop period, the box's API key as a secret
 * file, the placement as constraints, a secret flag's value in the env
 * (serviceRun). Swarm restarts a runner that exits
 * (it runs the containers); an update stops the old task first (two runners
 * cannot share a port) and carries on past a failure rather than pausing.
 */
export function serviceSpec(input: ServiceInputs): Record<string, unknown> {
  const { view, name, box } = input;
  const { spec } = view;
  const run = serviceRun(view);
  return {
    Name: containerName(name),
    Labels: serviceLabels(box, name, view, input.labelKey),
    TaskTemplate: {
      ContainerSpec: {
        Image: spec.image,
        Args: run.args,
        Env: envList(run.env),
        Labels: { [LABEL.managed]: "true", [LABEL.box]: box, [LABEL.slot]: name },
        Mounts: input.mounts.map((m) => ({ ...m })),
        Init: true,
        StopGracePeriod: input.stopGraceS * 1e9,
        Secrets: [{ SecretID: input.secret.id, SecretName: input.secret.name, File: { Name: API_KEY_FILE.slice(API_KEY_FILE.lastIndexOf("/") + 1), UID: "0", GID: "0", Mode: 0o400 } }],
      },
      Placement: { Constraints: constraintsOf(view) },
      RestartPolicy: { Condition: "any", Delay: 2e9, MaxAttempts: 0 },
      Networks: [{ Target: input.hostNetwork }],
    },
    Mode: { Replicated: { Replicas: 1 } },
    UpdateConfig: { Parallelism: 1, FailureAction: "continue", Order: "stop-first" },
  };
}

function envList(env: Readonly<Record<string, string>>): string[] {
  return Object.keys(env).sort().map((k) => `${k}=${env[k]}`);
}

/**
 * Whether two env lists (`NAME=value`) hold the same variables, in any order: an envList is in its names' order, which
 * is not its entries' (`SHARD` before `SHARD2`, but `SHARD2=…` before `SHARD=…`), so both are sorted as entries.
 */
function sameEnv(a: readonly string[], b: readonly string[]): boolean {
  return canonicalJson([...a].sort()) === canonicalJson([...b].sort());
}

/** The fields of a service's spec observe reads. */
export interface ListedServiceSpec {
  readonly Name: string;
  readonly Labels?: Readonly<Record<string, string>>;
  readonly TaskTemplate?: {
    readonly ContainerSpec?: { readonly Image?: string; readonly Args?: readonly string[]; readonly Env?: readonly string[] };
    readonly Placement?: { readonly Constraints?: readonly string[] };
  };
  readonly Mode?: { readonly Replicated?: { readonly Replicas?: number } };
}

/** The fields of a `GET /services` row observe reads. */
export interface ListedService {
  readonly ID: string;
  readonly Spec: ListedServiceSpec;
  /** The spec before the last `docker service update`: the manager keeps it; hal0 never updates a service (it replaces one). */
  readonly PreviousSpec?: ListedServiceSpec;
  readonly CreatedAt?: string;
}

/** The fields of a `GET /tasks` row observe reads. */
export interface ListedTask {
  readonly ID: string;
  readonly ServiceID: string;
  readonly NodeID?: string;
  readonly DesiredState: string;
  readonly CreatedAt?: string;
  readonly UpdatedAt?: string;
  readonly Status: { readonly State: string; readonly Err?: string; readonly Message?: string; readonly Timestamp?: string; readonly ContainerStatus?: { readonly ExitCode?: number } };
}

/** The fields of a `GET /nodes` row hal0 reads. */
export interface ListedNode {
  readonly ID: string;
  readonly Spec?: { readonly Role?: string; readonly Availability?: string; readonly Labels?: Readonly<Record<string, string>> };
  readonly Description?: { readonly Hostname?: string; readonly Engine?: { readonly EngineVersion?: string } };
  readonly Status?: { readonly State?: string; readonly Message?: string; readonly Addr?: string };
  readonly ManagerStatus?: { readonly Addr?: string };
}

export function nodeFrom(n: ListedNode): ObservedNode {
  // A manager may report 0.0.0.0 as its Status.Addr; its manager address then says where it is.
  const statusAddr = n.Status?.Addr ?? "";
  const managerAddr = (n.ManagerStatus?.Addr ?? "").replace(/:\d+$/, "");
  const addr = statusAddr !== "" && statusAddr !== "0.0.0.0" ? statusAddr : managerAddr;
  const message = n.Status?.Message;
  return {
    id: n.ID,
    hostname: n.Description?.Hostname ?? n.ID,
    addr,
    role: n.Spec?.Role === "manager" ? "manager" : "worker",
    state: n.Status?.State ?? "unknown",
    availability: n.Spec?.Availability ?? "active",
    labels: { ...(n.Spec?.Labels ?? {}) },
    engine_version: n.Description?.Engine?.EngineVersion ?? "",
    ...(message ? { message } : {}),
  };
}

/** Task states in which a task's container may be up (or about to be). */
const LIVE_STATES = new Set(["new", "pending", "assigned", "accepted", "preparing", "ready", "starting", "running"]);
/** Task states on the way to running: Swarm is starting the task. */
const STARTING_STATES: ReadonlySet<string> = new Set([...LIVE_STATES].filter((s) => s !== "running"));
/** Task states in which a task ended on its own; with the restart condition `any`, Swarm starts another one. */
const ENDED_STATES = new Set(["failed", "rejected", "complete"]);
/**
 * The desired states of a service's current task: `running`, or `ready` while
 * Swarm waits out its restart delay before it runs a task that replaces one
 * whose runner exited.
 */
const WANTED_STATES = new Set(["running", "ready"]);

/** A task's time for ordering: its last status change, else its creation. */
function when(t: ListedTask): string {
  return t.Status.Timestamp ?? t.UpdatedAt ?? t.CreatedAt ?? "";
}

/**
 * A listed service with its tasks as an observed slot (health still to
 * probe); undefined when the service is not one of `box`'s slots. Running
 * means: the current task (desired running) is running on a node that is
 * ready. Everything else is said in `detail`, and what Swarm holds (its node
 * down, no node for it) in `unplaced`.
 */
export function observedService(service: ListedService, tasks: readonly ListedTask[], nodes: ReadonlyMap<string, ObservedNode>, box: string): Omit<ObservedSlot, "health"> | undefined {
  const labels = service.Spec.Labels ?? {};
  const name = labels[LABEL.slot];
  if (name === undefined || !labelledAs(labels, box, name) || service.Spec.Name !== containerName(name)) return undefined;
  const labelled = parseView(labels[LABEL.view]);
  const svc = containerName(name);
  if (labelled === undefined) return { name, running: false, detail: `service ${svc} has no readable ${LABEL.view} label` };
  const { view, made } = readBack(labelled, service);
  const own = [...tasks].filter((t) => t.ServiceID === service.ID).sort((a, b) => (when(a) < when(b) ? 1 : when(a) > when(b) ? -1 : 0));
  // The task Swarm keeps running; with more than one replica (scaled by hand: drift), the one that runs on a ready node, so a
  // second replica failing beside it (two runners cannot share a node's port) does not make the slot read as stopped.
  const wanted = own.filter((t) => WANTED_STATES.has(t.DesiredState));
  const current = wanted.find((t) => t.Status.State === "running" && t.NodeID !== undefined && nodes.get(t.NodeID)?.state === "ready") ?? wanted[0] ?? own[0];
  const node = current?.NodeID ? nodes.get(current.NodeID) : undefined;
  const earlier = own.find((t) => t !== current && t.NodeID && t.NodeID !== current?.NodeID);
  const movedFrom = earlier?.NodeID ? nodes.get(earlier.NodeID)?.hostname ?? earlier.NodeID : undefined;
  const where = node ? { node: { id: node.id, hostname: node.hostname, addr: node.addr, ...(movedFrom && current?.Status.State === "running" ? { moved_from: movedFrom } : {}) } } : {};
  const edited = editedFields(service, view, made);
  // Each restart by Swarm is a new task (a new container): a running task's start is its runner's, else the service's creation.
  const record = { view: edited.length === 0 ? view : actualView(service, view, made), started_at: runningSince(current) ?? service.CreatedAt ?? new Date(0).toISOString() };
  const editNote = edited.length === 0 ? "" : `; service ${svc} was changed behind hal0's back (${edited.join(", ")})`;
  if (current === undefined) return { name, running: false, record, detail: `service ${svc} has no task${editNote}` };
  const state = current.Status.State;
  const why = current.Status.Err || current.Status.Message || state;
  if (node !== undefined && node.state !== "ready" && LIVE_STATES.has(state)) {
    const message = `node ${node.hostname} is ${node.state}${node.message ? ` (${node.message})` : ""}; Swarm holds ${svc}'s task there`;
    return { name, running: false, record, ...where, detail: message + editNote, unplaced: { reason: "node_down", message } };
  }
  // A task running where the spec's placement does not allow (a node's labels changed under it): drift, whatever the service says.
  if (node !== undefined && state === "running" && !nodeMatches(record.view, node)) {
    return { name, running: true, record: { ...record, view: { ...record.view, spec_hash: `${record.view.spec_hash}+misplaced` } }, ...where, detail: `task of ${svc} runs on node ${node.hostname}, which its placement does not allow${editNote}` };
  }
  if (state === "running") return { name, running: true, record, ...where, ...(editNote ? { detail: editNote.slice(2) } : {}) };
  if (state === "pending" && /no suitable node/i.test(why)) {
    // Swarm took the task off a node that went down and finds no other: the node being down is the reason.
    const left = earlier?.NodeID ? nodes.get(earlier.NodeID) : undefined;
    if (left !== undefined && left.state !== "ready") {
      const message = `node ${left.hostname} is ${left.state}${left.message ? ` (${left.message})` : ""} and no other node can run ${svc}: ${why}`;
      return { name, running: false, record, detail: message + editNote, unplaced: { reason: "node_down", message } };
    }
    // Which nodes its placement names, and how they are: one drained (or paused, or down) is why, which Swarm's words do not say.
    const matching = [...nodes.values()].filter((n) => nodeMatches(record.view, n)).sort((a, b) => (a.hostname < b.hostname ? -1 : a.hostname > b.hostname ? 1 : 0));
    const states = matching.length === 0 ? "none" : matching.map((n) => `${n.hostname} ${n.state}/${n.availability}`).join(", ");
    const message = `no node can run ${svc}: ${why} (the nodes its placement matches: ${states})`;
    return { name, running: false, record, detail: message + editNote, unplaced: { reason: "unschedulable", message } };
  }
  // Swarm starts the task (again, after its runner exited): the slot is starting, and Swarm's restart is left alone.
  if (WANTED_STATES.has(current.DesiredState) && (STARTING_STATES.has(state) || ENDED_STATES.has(state))) {
    const starting = startingNote(svc, current, own, node?.hostname);
    return { name, running: false, record, ...where, detail: starting.message + editNote, starting };
  }
  return { name, running: false, record, ...where, detail: `task of ${svc} is ${state}${why !== state ? ` (${why})` : ""}${node ? ` on node ${node.hostname}` : ""}${editNote}` };
}

/** When a running task reached running (its runner started), as an ISO time; undefined for any other task. */
function runningSince(task: ListedTask | undefined): string | undefined {
  if (task?.Status.State !== "running" || task.Status.Timestamp === undefined) return undefined;
  const at = Date.parse(task.Status.Timestamp);
  return Number.isNaN(at) ? undefined : new Date(at).toISOString();
}

/**
 * What Swarm is doing with a service whose current task is on its way to
 * running (or just ended, to be replaced): starting it, or starting it again
 * after its runner exited, and how many of its tasks ended (failed, were
 * rejected, or exited 0) in the CRASH_WINDOW_MS before it (Swarm keeps the
 * last few).
 */
function startingNote(svc: string, current: ListedTask, own: readonly ListedTask[], hostname: string | undefined): NonNullable<ObservedSlot["starting"]> {
  const at = Date.parse(when(current));
  const ended = own.filter((t) => ENDED_STATES.has(t.Status.State) && !(at - Date.parse(when(t)) > CRASH_WINDOW_MS));
  const last = ended[0];
  const state = current.Status.State;
  const on = hostname === undefined ? "" : ` on node ${hostname}`;
  const now = ENDED_STATES.has(state) ? "its next task is about to be made" : current.DesiredState === "ready" ? `its next task is ${state}${on}, held for the restart delay` : `its task is ${state}${on}`;
  if (last === undefined) return { message: `Swarm is starting ${svc}: ${now}`, failed: 0 };
  const exit = last.Status.ContainerStatus?.ExitCode;
  const why = [last.Status.Err || last.Status.Message || last.Status.State, exit !== undefined && last.Status.State === "failed" ? `exit code ${exit}` : ""].filter((w) => w !== "").join(", ");
  // A task its node rejected (an image or a bind source missing there) never ran a runner.
  const what = ended.every((t) => t.Status.State === "rejected") ? "its node rejected its task" : "its runner exited";
  const count = ended.length === 1 ? what : `${what} ${ended.length} times in a row`;
  return { message: `Swarm is restarting ${svc} (${count}; the last: ${why}): ${now}; hal0 leaves the restart to Swarm`, failed: ended.length };
}

/** What a service of a view was made with, as its spec lists them: its args and its env (`NAME=value`, sorted). */
export interface MadeWith {
  readonly args: readonly string[];
  readonly env: readonly string[];
  /** The variables that carry its secret flags' values (LLAMA_API_KEY, HF_TOKEN), when it was made so. */
  readonly carriers?: readonly string[];
}

/**
 * A service's label read back against its spec: the view it runs (its real
 * env and secret flag values, which the label seals, read from the service)
 * and the args and env hal0 made it with (what editedFields compares). A
 * service whose args are its argv with the secret flags taken out was made
 * with their values in its env (serviceRun); any other was made with its
 * argv as its args: a runner that keeps its flags, or a service an earlier
 * hal0 made with an `--api-key` in its args, which is left running as it is
 * (nothing re-plans: its spec and hash are the same) until it is next
 * replaced, and then made anew without it.
 */
function readBack(labelled: SlotView, service: ListedService): { view: SlotView; made: MadeWith } {
  const c = service.Spec.TaskTemplate?.ContainerSpec ?? {};
  const args = c.Args ?? [];
  const env = envOf(c.Env ?? []);
  const carried = carriedView(labelled, args, env);
  if (carried !== undefined) return carried;
  const view = withServiceEnv(labelled, args, env);
  return { view, made: { args: view.spec.argv, env: envList(view.spec.env) } };
}

/**
 * The label's view with the env and args its service runs with, when they
 * are the ones the label sealed: the label keeps no env value nor secret flag
 * value (slotLabels), the service spec does, and the view's spec hash (over
 * the real values) says whether they are the ones hal0 set. Otherwise the
 * sealed values stay, and editedFields names `env` (or `args`) as edited.
 */
function withServiceEnv(view: SlotView, args: readonly string[], env: Readonly<Record<string, string>>): SlotView {
  const sealedArgs = canonicalJson(args) !== canonicalJson(view.spec.argv) && argvAlike(args, view.spec.argv);
  if (Object.keys(view.spec.env).length === 0 && Object.keys(env).length === 0 && !sealedArgs) return view;
  const spec = sealedArgs ? { ...view.spec, env, argv: [...args] } : { ...view.spec, env };
  return rehashSpec(spec).spec_hash === view.spec_hash ? { ...view, spec } : view;
}

/** How many ways of cutting LLAMA_API_KEY's list back into its keys are tried (its keys' own commas make more than one). */
const SPLITS_MAX = 256;

/**
 * A service made with its secret flags' values in its env (serviceRun): its
 * args are the label's argv without them. Its view is the label's with each value
 * read back — LLAMA_API_KEY's list cut into the declared keys and each
 * `--api-key`'s, HF_TOKEN the token flag's — the one whose hash is the
 * label's; values that hash to another are an edit (a service made again by
 * hand with another key), compared with what the label makes. A value the
 * service cannot carry (a declared HF_TOKEN the flag's overrides) or a list
 * too ambiguous to cut leaves the label's view as it is, its values sealed,
 * and the service as made: an edit of it by `docker service update` still
 * counts (editedFields). Undefined for a service not made so.
 */
function carriedView(view: SlotView, args: readonly string[], env: Readonly<Record<string, string>>): { view: SlotView; made: MadeWith } | undefined {
  const run = runnerArgv(view.spec.argv, 0, view, view.spec.env);
  const carriers = Object.keys(run.env);
  if (carriers.length === 0 || canonicalJson(args) !== canonicalJson(run.argv)) return undefined;
  // The variables it was made with: the label's and the carriers. Values are read back from those alone, so a variable
  // added by hand (`docker service update --env-add`) is an edit of the env, not of every secret with it.
  const names = [...new Set([...Object.keys(view.spec.env), ...carriers])];
  const own = Object.fromEntries(names.filter((k) => env[k] !== undefined).map((k) => [k, env[k]!]));
  const read = Object.keys(own).length === names.length ? valuesReadBack(view, own, secretValues(view.spec.argv, 0)) : undefined;
  const made = { args: [...args], carriers };
  if (read === UNKNOWABLE) return { view, made: { ...made, env: envList(own) } };
  if (read !== undefined) return { view: read, made: { ...made, env: envList(own) } };
  return { view, made: { ...made, env: envList(serviceRun(view).env) } };
}

/** What valuesReadBack says of a service whose values it cannot all read back. */
const UNKNOWABLE = Symbol("unknowable");

function valuesReadBack(view: SlotView, env: Readonly<Record<string, string>>, at: readonly SecretValue[]): SlotView | typeof UNKNOWABLE | undefined {
  const keysAt = at.filter((v) => v.flag === "--api-key");
  const tokensAt = at.filter((v) => v.flag !== "--api-key");
  // The service carries the last token flag's value alone: a declared HF_TOKEN (or an earlier token) it overrides is not there.
  if (tokensAt.length > 1 || (tokensAt.length > 0 && view.spec.env[HF_TOKEN_ENV] !== undefined)) return UNKNOWABLE;
  const declared = keysAt.length > 0 && view.spec.env[API_KEY_ENV] !== undefined ? 1 : 0;
  const own = Object.fromEntries(Object.entries(env).filter(([k]) => !(k === API_KEY_ENV && keysAt.length > 0) && !(k === HF_TOKEN_ENV && tokensAt.length > 0)));
  let tried = 0;
  for (const parts of cuts(env[API_KEY_ENV] ?? "", keysAt.length + declared)) {
    if (++tried > SPLITS_MAX) return UNKNOWABLE;
    const argv = [...view.spec.argv];
    const fill = (v: SecretValue, value: string) => (argv[v.index] = v.inline ? `${argv[v.index]!.slice(0, argv[v.index]!.indexOf("=") + 1)}${value}` : value);
    keysAt.forEach((v, i) => fill(v, parts[declared + i]!));
    for (const v of tokensAt) fill(v, env[HF_TOKEN_ENV]!);
    const spec = { ...view.spec, argv, env: declared === 1 ? { ...own, [API_KEY_ENV]: parts[0]! } : own };
    if (rehashSpec(spec).spec_hash === view.spec_hash) return { ...view, spec };
  }
  return undefined;
}

/** Each way of cutting `text` at `n - 1` of its commas into `n` parts, in order. */
function* cuts(text: string, n: number): Generator<string[]> {
  if (n <= 1) {
    yield n === 0 ? [] : [text];
    return;
  }
  for (let i = text.indexOf(","); i >= 0; i = text.indexOf(",", i + 1)) {
    for (const rest of cuts(text.slice(i + 1), n - 1)) yield [text.slice(0, i), ...rest];
  }
}

function envOf(list: readonly string[]): Record<string, string> {
  return Object.fromEntries(list.map((e) => [e.slice(0, Math.max(0, e.indexOf("="))) || e, e.includes("=") ? e.slice(e.indexOf("=") + 1) : ""]));
}

/**
 * The view of what a service edited by hand runs: its image, args, env and
 * placement read back into the recorded spec, rehashed. So a plan names what
 * was changed (`env.FOO`, `argv.--threads`, `placement.node`) and the differing
 * hash makes it drift. An edit the spec cannot express (another constraint,
 * replicas) keeps the spec and marks the hash.
 */
function actualView(service: ListedService, view: SlotView, made: MadeWith): SlotView {
  const c = service.Spec.TaskTemplate?.ContainerSpec ?? {};
  // Args or env as hal0 made them (a secret flag's value carried in the env): the view's, not read back word by word.
  const argv = canonicalJson(c.Args ?? []) === canonicalJson(made.args) ? view.spec.argv : [...(c.Args ?? [])];
  const env = sameEnv(c.Env ?? [], made.env) ? view.spec.env : withoutCarriers(envOf(c.Env ?? []), view, made.carriers ?? []);
  const placement = placementOf(service.Spec.TaskTemplate?.Placement?.Constraints ?? []);
  const { spec, spec_hash } = rehashSpec({
    ...view.spec, image: bareImage(c.Image), argv, env,
    ...(placement !== undefined || view.spec.placement !== undefined ? { placement: placement ?? { labels: {} } } : {}),
  });
  return { ...view, spec, spec_hash: spec_hash === view.spec_hash ? `${view.spec_hash}+edited` : spec_hash };
}

/** A service's env with the variables that carry its secret flags' values taken out (they stand for the view's argv), a declared one as the view has it. */
function withoutCarriers(env: Readonly<Record<string, string>>, view: SlotView, carriers: readonly string[]): Record<string, string> {
  const out = { ...env };
  for (const k of carriers) {
    if (view.spec.env[k] !== undefined) out[k] = view.spec.env[k];
    else delete out[k];
  }
  return out;
}

/** Constraints hal0 writes, read back (`node.hostname==`, `node.id==`, `node.labels.K==`); undefined when there are none. */
function placementOf(constraints: readonly string[]): SlotView["spec"]["placement"] {
  if (constraints.length === 0) return undefined;
  let node: string | undefined;
  const labels: Record<string, string> = {};
  for (const c of constraints) {
    const m = /^node\.(hostname|id|labels\.([^=!]+))\s*==\s*(.+)$/.exec(c.trim());
    if (m === null) continue;
    if (m[2] !== undefined) labels[m[2]] = m[3]!;
    else node = m[3]!;
  }
  const sorted = Object.fromEntries(Object.keys(labels).sort().map((k) => [k, labels[k]!]));
  return node === undefined ? { labels: sorted } : { labels: sorted, node };
}

/**
 * What of a service differs from what its view says hal0 created: the image,
 * the args or the env it was `made` with, or the constraints (a `docker service update` by hand).
 * An image pinned to a digest by the manager is the same image. hal0 never
 * updates a service, so one the manager has a previous spec of was updated by
 * hand even when none of those changed (a mount, the user, a limit, the
 * entrypoint): named by what that update changed.
 */
export function editedFields(service: ListedService, view: SlotView, made: MadeWith = { args: view.spec.argv, env: envList(view.spec.env) }): string[] {
  const c = service.Spec.TaskTemplate?.ContainerSpec ?? {};
  const out: string[] = [];
  if (bareImage(c.Image) !== (view.spec.image ?? "")) out.push("image");
  if (canonicalJson(c.Args ?? []) !== canonicalJson(made.args)) out.push("args"); // a sealed value still sealed: the args did not hash to the label's
  if (!sameEnv(c.Env ?? [], made.env)) out.push("env");
  if (canonicalJson([...(service.Spec.TaskTemplate?.Placement?.Constraints ?? [])].sort()) !== canonicalJson([...constraintsOf(view)].sort())) out.push("constraints");
  if ((service.Spec.Mode?.Replicated?.Replicas ?? 1) !== 1) out.push("replicas");
  if (out.length === 0 && service.PreviousSpec !== undefined) out.push(...updatedKeys(service.PreviousSpec, service.Spec));
  return out;
}

/** The settings a `docker service update` changed, by their Engine API names (`ContainerSpec.Mounts`, `Resources` …); "update" when it changed none of them (a forced update, a rollback). */
function updatedKeys(before: ListedServiceSpec, after: ListedServiceSpec): string[] {
  const differ = (prefix: string, a: Readonly<Record<string, unknown>> = {}, b: Readonly<Record<string, unknown>> = {}) =>
    [...new Set([...Object.keys(a), ...Object.keys(b)])].sort().filter((k) => canonicalJson(a[k] ?? null) !== canonicalJson(b[k] ?? null)).map((k) => `${prefix}${k}`);
  const without = (o: object | undefined, key: string) => Object.fromEntries(Object.entries(o ?? {}).filter(([k]) => k !== key));
  const keys = [
    ...differ("", without(before, "TaskTemplate"), without(after, "TaskTemplate")),
    ...differ("", without(before.TaskTemplate, "ContainerSpec"), without(after.TaskTemplate, "ContainerSpec")),
    ...differ("ContainerSpec.", before.TaskTemplate?.ContainerSpec, after.TaskTemplate?.ContainerSpec),
  ];
  return keys.length === 0 ? ["update"] : keys;
}

/** A service's image without the digest a manager may pin to it (`ref@sha256:…` is still `ref`). */
function bareImage(image: string | undefined): string {
  return (image ?? "").replace(/@sha256:[0-9a-f]+$/, "");
}
