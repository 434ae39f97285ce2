import { createHmac } from "node:crypto";
import { realpath, stat } from "node:fs/promises";
import { isAbsolute, relative } from "node:path";
import type { ObservedSlot, SlotView } from "../observed.js";
import { parsedOrUndefined, rehashSpec } from "../../compiler/index.js";
import { SECRET_FLAG } from "../../schema/secret-flag.js";
import { SlotViewSchema, type Device } from "../../schema/index.js";
import { viewChangedPaths } from "../view.js";
import { runnerArgv } from "./runner-secrets.js";

/**
 * What a slot's container looks like, as plain data: its name, its labels,
 * the create options the engine gets, and how a listed container reads back
 * into an observed slot. No dockerode here (only docker.ts imports it); the
 * shapes below are the Engine API's own field names.
 *
 * Invariant: a container is this box's slot `<name>` exactly when it is named
 * `hal0-slot-<name>` and carries `hal0.managed=true`, `hal0.box=<box>` and
 * `hal0.slot=<name>`. Anything else is never stopped, removed or reported,
 * save one thing: a container with this box's labels for slot `<name>` under
 * another name (renamed by hand) is stopped with the slot (not by a create's
 * clearing of the name) and named as what holds the slot's port.
 */

export const LABEL = {
  managed: "hal0.managed",
  box: "hal0.box",
  slot: "hal0.slot",
  specHash: "hal0.spec-hash",
  specVersion: "hal0.spec-version",
  /** The SlotView as JSON, each env value sealed (sealEnv): observe rebuilds the record from it without reading any file. */
  view: "hal0.view",
  /** What the container was created with beyond its spec (its mounts), as JSON: observe checks the container still has it. */
  host: "hal0.host",
} as const;

export function containerName(slot: string): string {
  return `hal0-slot-${slot}`;
}

/** The label filter of the one list call observe makes. */
export function boxFilter(box: string): { label: string[] } {
  return { label: [`${LABEL.managed}=true`, `${LABEL.box}=${box}`] };
}

/**
 * The labels of a slot's container (or service). The view's env values, and
 * the value of each secret flag of its argv (`--api-key`, `--hf-token`), are
 * sealed with `key` (the box's label key, `<state>/label-key`): labels are
 * read far more widely than a container's own spec (`docker ps`, every
 * `docker events` record, a service list), and an env value is often a
 * credential.
 */
export function slotLabels(box: string, name: string, view: SlotView, key: string, host?: HostRecord): Record<string, string> {
  const sealed: SlotView = { ...view, spec: { ...view.spec, env: sealEnv(view.spec.env, key), argv: sealArgv(view.spec.argv, key) } };
  return {
    [LABEL.managed]: "true",
    [LABEL.box]: box,
    [LABEL.slot]: name,
    [LABEL.specHash]: view.spec_hash,
    [LABEL.specVersion]: String(view.spec.spec_version),
    [LABEL.view]: JSON.stringify(sealed),
    ...(host === undefined ? {} : { [LABEL.host]: JSON.stringify(host) }),
  };
}

/** What a container is created with beyond its spec that can differ between two containers of one spec: its bind mounts and devices (the `hal0.host` label). */
export interface HostRecord {
  readonly mounts: readonly BindMount[];
  /** The host paths of its devices (absent in a label of a hal0 that passed none: none). */
  readonly devices?: readonly string[];
}

/**
 * The device nodes (under /dev) a runner in a container needs to reach its
 * slot's device: ROCm's KFD and the DRM render nodes, the DRM nodes for Vulkan,
 * the accel nodes of an NPU (amdxdna). A folder passes every node in it.
 */
export const DEVICE_NODES: Readonly<Record<Device, readonly string[]>> = {
  "gpu-rocm": ["/dev/kfd", "/dev/dri"],
  "gpu-vulkan": ["/dev/dri"],
  npu: ["/dev/accel"],
  cpu: [],
};

/** One entry of HostConfig.Devices: a host node (or folder of nodes) at its /dev path in the container. */
export interface DeviceMapping {
  readonly PathOnHost: string;
  readonly PathInContainer: string;
  readonly CgroupPermissions: "rwm";
}

/**
 * The devices a slot's container is created with, read from `devRoot` (the
 * host's /dev; another folder in tests); `missing` lists the nodes the host
 * has not got (left out: the engine refuses to create a container with them).
 */
export async function deviceMappings(device: Device, devRoot = "/dev"): Promise<{ devices: DeviceMapping[]; missing: string[] }> {
  const devices: DeviceMapping[] = [];
  const missing: string[] = [];
  for (const node of DEVICE_NODES[device]) {
    const onHost = `${devRoot}${node.slice("/dev".length)}`;
    if ((await stat(onHost).catch(() => undefined)) === undefined) missing.push(onHost);
    else devices.push({ PathOnHost: onHost, PathInContainer: node, CgroupPermissions: "rwm" });
  }
  return { devices, missing };
}

/** The settings hal0 gives every slot container (create, in docker.ts): host network, Init, no restart policy, nothing published, not privileged. */
export const FIXED_HOST = { NetworkMode: "host", Init: true, RestartPolicy: { Name: "no" } } as const;

/** The fields of `GET /containers/{id}/json` that say what a container runs and how (observe compares them with what hal0 created). */
export interface InspectedContainer {
  readonly Config: {
    readonly Env?: readonly string[] | null;
    readonly Cmd?: readonly string[] | null;
    readonly Entrypoint?: readonly string[] | string | null;
  };
  readonly HostConfig: {
    readonly NetworkMode?: string;
    readonly Init?: boolean | null;
    readonly RestartPolicy?: { readonly Name?: string; readonly MaximumRetryCount?: number };
    readonly Privileged?: boolean;
    readonly Binds?: readonly string[] | null;
    readonly Mounts?: readonly { readonly Type?: string; readonly Source?: string; readonly Target?: string; readonly ReadOnly?: boolean }[] | null;
    readonly PortBindings?: Readonly<Record<string, unknown>> | null;
    readonly Devices?: readonly { readonly PathOnHost?: string; readonly PathInContainer?: string }[] | null;
  };
}

/** What of its image a container inherits unless it is set: its env and entrypoint (`GET /images/{id}/json`'s Config). */
export interface ImageDefaults {
  readonly Env?: readonly string[] | null;
  readonly Entrypoint?: readonly string[] | string | null;
}

function envOf(list: readonly string[] | null | undefined): Map<string, string> {
  return new Map((list ?? []).map((e) => (e.includes("=") ? [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)] : [e, ""])));
}

function words(value: readonly string[] | string | null | undefined): string[] {
  return value === null || value === undefined ? [] : typeof value === "string" ? [value] : [...value];
}

/**
 * The env a container runs with that is hal0's to set: every variable the label's
 * view has, and every other one the image does not give it with that value (one
 * added by hand). A value that is not the label's is sealed (never shown), as
 * unsealEnv leaves a changed one; undefined without the key (nothing to seal with).
 */
function containerEnv(c: InspectedContainer, image: ImageDefaults | undefined, labelled: Readonly<Record<string, string>>, key: string | undefined, made: MadeWith): Record<string, string> | undefined {
  if (key === undefined) return undefined;
  const defaults = envOf(image?.Env);
  const env: Record<string, string> = {};
  for (const [k, v] of envOf(c.Config.Env)) {
    const mine = labelled[k];
    // What carries a secret flag's value (LLAMA_API_KEY, HF_TOKEN) is hal0's when it is the value the label's argv gives
    // (unknown while the label still seals it: the config changed it, and the plan replaces the slot for that).
    const carried = made.env[k];
    if (carried !== undefined && (!made.known || carried === v)) {
      if (mine !== undefined) env[k] = mine;
      continue;
    }
    // The image's own; without the image (removed under the container) any variable the label does not have is taken for one.
    if (mine === undefined && (image === undefined || defaults.get(k) === v)) continue;
    env[k] = mine === v || mine === seal(k, v, key) ? mine : seal(k, v, key);
  }
  // Run with its secret flags taken out of its command but without the variable that carries them (a runner that wants
  // no key, made so by hand): that variable reads as changed.
  const actual = envOf(c.Config.Env);
  if (made.known && show(c.Config.Cmd ?? []) === show(made.argv)) for (const k of Object.keys(made.env)) if (!actual.has(k)) env[k] = seal(k, "", key);
  return Object.fromEntries(Object.keys(env).sort().map((k) => [k, env[k]!]));
}

/**
 * What hal0 creates a container of `view` with (runnerArgv): its Cmd, the argv with the secret flags taken out, and the
 * env that carries their values; `known` is false while a carried value is still sealed in the label (not read back).
 */
interface MadeWith {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly known: boolean;
}

function madeWith(view: SlotView): MadeWith {
  const run = runnerArgv(view.spec.argv, 0, view, view.spec.env);
  return { ...run, known: !Object.values(run.env).some((v) => v.includes(SEALED)) };
}

/**
 * The argv a container runs: the label's when its Cmd is that argv with the secret flags taken out (their values are in
 * its env, checked there); else its Cmd, each secret flag's value sealed unless it is the config's (as the label's view reads).
 */
function containerArgv(c: InspectedContainer, view: SlotView, made: MadeWith, desired: readonly string[] | undefined, key: string | undefined): readonly string[] | undefined {
  if (key === undefined || c.Config.Cmd === null || c.Config.Cmd === undefined) return undefined;
  if (Object.keys(made.env).length > 0 && show(c.Config.Cmd) === show(made.argv)) return view.spec.argv;
  return unsealArgv(sealArgv(c.Config.Cmd, key), desired, key);
}

const show = (value: unknown) => JSON.stringify(value);

/**
 * What of a slot's container differs from what hal0 created it with (a
 * container made again by hand under the same name with the labels copied,
 * or changed in place with `docker update`): its spec rebuilt with the env
 * and command it runs (so a plan names `env.FOO`, `argv.--threads`), and the
 * host settings that differ, in words (its restart policy, network, published
 * ports, mounts, devices, Init, privileged, entrypoint). Empty when it is as created.
 */
export function containerEdits(c: InspectedContainer, image: ImageDefaults | undefined, view: SlotView, host: HostRecord | undefined, key: string | undefined, desired: ReturnType<Unsealing["desired"]>): { view: SlotView; edits: string[] } {
  const made = madeWith(view);
  const env = containerEnv(c, image, view.spec.env, key, made) ?? view.spec.env;
  const argv = containerArgv(c, view, made, desired?.argv, key) ?? view.spec.argv;
  const actual: SlotView = { ...view, spec: { ...view.spec, env, argv } };
  const edits = viewChangedPaths(view, actual).filter((p) => p !== "spec_hash");
  const h = c.HostConfig;
  if ((h.NetworkMode ?? "") !== FIXED_HOST.NetworkMode) edits.push(`network ${show(h.NetworkMode ?? "default")}, not "host"`);
  const restart = h.RestartPolicy?.Name || "no";
  if (restart !== FIXED_HOST.RestartPolicy.Name) edits.push(`restart policy ${show(restart)}, not "no"`);
  const published = Object.keys(h.PortBindings ?? {});
  if (published.length > 0) edits.push(`published ports ${published.sort().join(", ")}`);
  if (h.Init !== true) edits.push("Init off");
  if (h.Privileged === true) edits.push("privileged");
  if ((h.Binds ?? []).length > 0) edits.push(`binds ${(h.Binds ?? []).join(", ")}`);
  const mounts = (h.Mounts ?? []).map((m) => `${m.Source}:${m.Target}${m.ReadOnly ? ":ro" : ""}`).sort();
  const recorded = host?.mounts.map((m) => `${m.Source}:${m.Target}:ro`).sort();
  if (recorded !== undefined) {
    const added = mounts.filter((m) => !recorded.includes(m)).join(", ");
    const missing = recorded.filter((m) => !mounts.includes(m)).join(", ");
    if (added !== "" || missing !== "") edits.push(added === "" ? `mounts ${missing} missing` : missing === "" ? `mounts ${added} added` : `mounts ${added} in place of ${missing}`);
  }
  const devices = (h.Devices ?? []).map((d) => d.PathOnHost ?? "").sort();
  const passed = [...(host?.devices ?? [])].sort();
  if (show(devices) !== show(passed)) edits.push(`devices ${devices.join(", ") || "(none)"}, not ${passed.join(", ") || "(none)"}`);
  const entrypoint = words(c.Config.Entrypoint);
  if (image !== undefined && show(entrypoint) !== show(words(image.Entrypoint))) edits.push(`entrypoint ${show(entrypoint)}`);
  return { view: edits.length === 0 ? view : { ...actual, spec_hash: `${view.spec_hash}+changed` }, edits };
}

export function parseHost(text: string | undefined): HostRecord | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed = JSON.parse(text) as { mounts?: unknown };
    return Array.isArray(parsed.mounts) && parsed.mounts.every((m) => typeof m?.Source === "string" && typeof m?.Target === "string") ? (parsed as HostRecord) : undefined;
  } catch {
    return undefined;
  }
}

/** What a sealed env value starts with. */
const SEALED = "hmac-sha256:";

/** An env value as a label keeps it: a digest keyed with the box's label key (of the name and the value), never the value. */
function seal(name: string, value: string, key: string): string {
  return `${SEALED}${createHmac("sha256", key).update(`${name}=${value}`).digest("hex").slice(0, 32)}`;
}

export function sealEnv(env: Readonly<Record<string, string>>, key: string): Record<string, string> {
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, seal(k, v, key)]));
}

/** The secret flag a word of `argv` is the value of (the word before it, or its own `--flag=`), if any. */
function secretFlagOf(argv: readonly string[], i: number): { flag: string; prefix: string; value: string } | undefined {
  const word = argv[i]!;
  const eq = word.startsWith("-") ? word.indexOf("=") : -1;
  if (eq > 0 && SECRET_FLAG.test(word.slice(0, eq))) return { flag: word.slice(0, eq), prefix: word.slice(0, eq + 1), value: word.slice(eq + 1) };
  const prev = argv[i - 1];
  return prev !== undefined && SECRET_FLAG.test(prev) ? { flag: prev, prefix: "", value: word } : undefined;
}

/** An argv as a label keeps it: the value of each secret flag sealed as an env value is. */
export function sealArgv(argv: readonly string[], key: string): string[] {
  return argv.map((word, i) => {
    const secret = secretFlagOf(argv, i);
    return secret === undefined ? word : `${secret.prefix}${seal(secret.flag, secret.value, key)}`;
  });
}

/**
 * A label's sealed argv read back against the argv the config wants now, as
 * unsealEnv reads env: each sealed value is matched with the value the config
 * gives the same flag (its first, second … use), wherever it now stands, so
 * a flag added elsewhere does not read as a changed secret.
 */
export function unsealArgv(argv: readonly string[], desired: readonly string[] | undefined, key: string | undefined): readonly string[] {
  if (key === undefined || desired === undefined) return argv;
  const wanted = new Map<string, string[]>();
  desired.forEach((_, i) => {
    const secret = secretFlagOf(desired, i);
    if (secret !== undefined) wanted.set(secret.prefix + secret.flag, [...(wanted.get(secret.prefix + secret.flag) ?? []), secret.value]);
  });
  const used = new Map<string, number>();
  let out: string[] | undefined;
  argv.forEach((word, i) => {
    const secret = secretFlagOf(argv, i);
    if (secret === undefined) return;
    const which = secret.prefix + secret.flag;
    const n = used.get(which) ?? 0;
    used.set(which, n + 1);
    const value = wanted.get(which)?.[n];
    if (value !== undefined && value !== secret.value && seal(secret.flag, value, key) === secret.value) (out ??= [...argv])[i] = `${secret.prefix}${value}`;
  });
  return out ?? argv;
}

/**
 * Whether a container's command (its entrypoint and Cmd, joined by spaces, as
 * the engine lists it) ends with `argv`, a label's argv whose secret values
 * may still be sealed: each is then matched by the word that seals to it
 * (any word, without the key to check it with).
 */
export function runsArgv(command: string, argv: readonly string[], key: string | undefined): boolean {
  if (command.endsWith(argv.join(" "))) return true;
  const sealedAt = argv.map((word, i) => secretFlagOf(argv, i)?.value.startsWith(SEALED) === true);
  if (!sealedAt.includes(true)) return false;
  const pattern = argv.map((word, i) => (sealedAt[i] ? `${escapeRegExp(secretFlagOf(argv, i)!.prefix)}(.*)` : escapeRegExp(word))).join(" ");
  const m = new RegExp(`(?:^| )${pattern}$`, "s").exec(command);
  if (m === null) return false;
  let group = 1;
  return argv.every((word, i) => {
    if (!sealedAt[i]) return true;
    const secret = secretFlagOf(argv, i)!;
    return key === undefined || `${secret.prefix}${seal(secret.flag, m[group++]!, key)}` === word;
  });
}

/** Whether a container's command ends with the argv hal0 creates it with when it takes a secret flag's value out of it (into its env). */
function runsMade(command: string, made: MadeWith): boolean {
  return Object.keys(made.env).length > 0 && command.endsWith(made.argv.join(" "));
}

/** A service's args are a label's argv word for word, save the value of a secret flag the label sealed (the label's key is not read here). */
export function argvAlike(args: readonly string[], labelled: readonly string[]): boolean {
  return args.length === labelled.length && labelled.every((word, i) => {
    if (word === args[i]) return true;
    const secret = secretFlagOf(labelled, i);
    return secret !== undefined && secret.value.startsWith(SEALED) && args[i]!.startsWith(secret.prefix);
  });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * A label's sealed env read back against the env the config wants now: each
 * value that seals to what it holds is that value; any other (changed since,
 * or sealed with a key since lost) stays as the label has it, so the plan
 * still names `env.<NAME>` as changed without ever showing the old value.
 * Without a key, or for a value a label of an older hal0 kept in the clear,
 * the env is as the label has it.
 */
export function unsealEnv(env: Readonly<Record<string, string>>, desired: Readonly<Record<string, string>> | undefined, key: string | undefined): Readonly<Record<string, string>> {
  if (key === undefined || desired === undefined) return env;
  let out: Record<string, string> | undefined;
  for (const [k, v] of Object.entries(env)) {
    const want = desired[k];
    if (want !== undefined && v.startsWith(SEALED) && v === seal(k, want, key)) (out ??= { ...env })[k] = want;
  }
  return out ?? env;
}

/** The labels say this container is slot `name` of `box` (its name is checked by the caller). */
export function labelledAs(labels: Readonly<Record<string, string>> | undefined | null, box: string, name: string): boolean {
  return labels?.[LABEL.managed] === "true" && labels[LABEL.box] === box && labels[LABEL.slot] === name;
}

/** The fields of a `GET /containers/json` row that observe reads. */
export interface ListedContainer {
  readonly Names: readonly string[];
  readonly Labels: Readonly<Record<string, string>>;
  readonly State: string;
  readonly Status: string;
  /** What it runs: the image's entrypoint and its Cmd, joined by spaces (the engine's list). */
  readonly Command?: string;
  /** The id of the image it runs (`sha256:…`, the image's config digest). */
  readonly ImageID?: string;
  /** Seconds since the epoch. */
  readonly Created: number;
}

/** What the config wants of a slot now, to read its label's sealed values back against (unsealEnv, unsealArgv). */
export interface Unsealing {
  /** The box's label key; undefined when there is none (a state folder made again). */
  readonly key: string | undefined;
  readonly desired: (name: string) => { readonly env?: Readonly<Record<string, string>>; readonly argv?: readonly string[] } | undefined;
}

/**
 * One listed container as an observed slot (health still to probe); undefined when it is not one of `box`'s slots.
 * `unsealing` reads the label's sealed env and argv values back against what the config wants for the slot.
 */
export function observedFrom(c: ListedContainer, box: string, unsealing: Unsealing = { key: undefined, desired: () => undefined }, inspected?: { readonly container: InspectedContainer; readonly image: ImageDefaults | undefined }): Omit<ObservedSlot, "health"> | undefined {
  const name = slotOf(c, box);
  if (name === undefined) return undefined;
  const running = c.State === "running";
  const labelled = parseView(c.Labels[LABEL.view]);
  const desired = unsealing.desired(name);
  const view = labelled && unsealView(labelled, desired, unsealing.key);
  const stopped = `container ${containerName(name)} is ${c.State} (${c.Status})`;
  const state = running ? {} : { detail: stopped };
  if (view === undefined) return { name, running, detail: `container ${containerName(name)} has no readable ${LABEL.view} label` };
  // Made again by hand with hal0's labels copied but another env, command, restart policy, mounts…, or changed in place (docker update): drifted, naming what.
  if (inspected !== undefined) {
    const { view: actual, edits } = containerEdits(inspected.container, inspected.image, view, parseHost(c.Labels[LABEL.host]), unsealing.key, desired);
    if (edits.length > 0) {
      const what = `container ${containerName(name)} was changed behind hal0's back (${edits.join("; ")})`;
      return { name, running, record: { view: actual, started_at: new Date(c.Created * 1000).toISOString() }, detail: running ? what : `${stopped}; ${what}` };
    }
  }
  // Made again by hand with hal0's labels copied but another command: the label's spec is not what runs, so it reads as drifted.
  if (c.Command !== undefined && !runsArgv(c.Command, view.spec.argv, unsealing.key) && !runsMade(c.Command, madeWith(view))) {
    const drifted: SlotView = { ...view, spec_hash: `${view.spec_hash}+changed` };
    return { name, running, record: { view: drifted, started_at: new Date(c.Created * 1000).toISOString() }, detail: `container ${containerName(name)} runs \`${c.Command.slice(0, 300)}\`, not the command its ${LABEL.view} label records: changed behind hal0's back` };
  }
  // …or the same command in another image: the image id the label records (the image it was started from) is not the one that runs.
  const recorded = view.spec.observed?.image_digest;
  if (recorded !== undefined && c.ImageID !== undefined && c.ImageID !== recorded) {
    const drifted: SlotView = { ...view, spec_hash: `${view.spec_hash}+changed` };
    return { name, running, record: { view: drifted, started_at: new Date(c.Created * 1000).toISOString() }, detail: `container ${containerName(name)} runs image ${c.ImageID}, not ${recorded}, the one its ${LABEL.view} label records: changed behind hal0's back` };
  }
  return { name, running, record: { view: withImageId(view, c.ImageID), started_at: new Date(c.Created * 1000).toISOString() }, ...state };
}

/**
 * A label's view recorded without its image's id (the image was not on the
 * engine when the slot was planned, and its start pulled it; or a hal0 from
 * before image digests started it) with the id of the image the container
 * runs filled in, as the plan of that moment would have had it: the plan then
 * compares what runs with what the tag names now (the same image: nothing to
 * do; another: `image digest changed`) instead of replacing the slot once for
 * learning what it already runs. Only for a view the label holds intact (its
 * spec hashes to its spec hash): one changed since is drifted as it was.
 */
export function withImageId(view: SlotView, imageId: string | undefined): SlotView {
  if (imageId === undefined || view.spec.image === undefined || view.spec.observed?.image_digest !== undefined) return view;
  if (rehashSpec(view.spec).spec_hash !== view.spec_hash) return view;
  const { spec, spec_hash } = rehashSpec({ ...view.spec, observed: { ...view.spec.observed, image_digest: imageId } });
  return { ...view, spec, spec_hash };
}

/** The slot a listed container is, when it is one of `box`'s (its labels and its name agree). */
export function slotOf(c: Pick<ListedContainer, "Labels" | "Names">, box: string): string | undefined {
  const name = c.Labels[LABEL.slot];
  return name === undefined || !labelledAs(c.Labels, box, name) || !c.Names.includes(`/${containerName(name)}`) ? undefined : name;
}

function unsealView(view: SlotView, desired: ReturnType<Unsealing["desired"]>, key: string | undefined): SlotView {
  const env = unsealEnv(view.spec.env, desired?.env, key);
  const argv = unsealArgv(view.spec.argv, desired?.argv, key);
  return env === view.spec.env && argv === view.spec.argv ? view : { ...view, spec: { ...view.spec, env, argv } };
}

export function parseView(text: string | undefined): SlotView | undefined {
  if (text === undefined) return undefined;
  try {
    return parsedOrUndefined(SlotViewSchema, JSON.parse(text));
  } catch {
    return undefined;
  }
}

export interface BindMount {
  readonly Type: "bind";
  readonly Source: string;
  readonly Target: string;
  readonly ReadOnly: true;
}

/**
 * What the runner must see of the host, read-only at the same paths, so argv
 * means in the container what it means on the host: the config folder (also
 * the working folder, as for the process runtime) and every regular file an
 * absolute argv word names outside it (models, drafters, projectors, chat
 * templates: the compiler makes their paths absolute) — or inside it through
 * a symbolic link that leads out of it (`models/x.gguf` linked to a file on
 * another disk), since the container has only the folder, not where the link leads.
 */
export async function hostMounts(argv: readonly string[], cwd: string): Promise<BindMount[]> {
  const mounts: BindMount[] = [];
  const realCwd = (await stat(cwd).catch(() => undefined))?.isDirectory() ? await realpath(cwd).catch(() => undefined) : undefined;
  if (realCwd !== undefined) mounts.push(bind(cwd));
  const words = argv.map((w) => (w.startsWith("--") && w.includes("=") ? w.slice(w.indexOf("=") + 1) : w));
  for (const path of [...new Set(words.filter((w) => isAbsolute(w)))].sort()) {
    if (!(await stat(path).catch(() => undefined))?.isFile()) continue;
    if (realCwd === undefined || !under(path, cwd)) mounts.push(bind(path));
    else if (!under(await realpath(path).catch(() => path), realCwd)) mounts.push(bind(path)); // the engine mounts where the link leads, at the path argv names
  }
  return mounts;
}

/**
 * The swarm runtime's mounts: every regular file an absolute argv word names
 * (models, drafters, projectors, templates), read-only at the same path — and
 * not the config folder, which exists only on the machine hal0 runs on. Each
 * node must hold those files at those paths (Swarm refuses a task whose bind
 * source is missing on its node, and says so).
 */
export async function fileMounts(argv: readonly string[]): Promise<BindMount[]> {
  const words = argv.map((w) => (w.startsWith("--") && w.includes("=") ? w.slice(w.indexOf("=") + 1) : w));
  const files: string[] = [];
  for (const path of [...new Set(words.filter((w) => isAbsolute(w)))].sort()) if ((await stat(path).catch(() => undefined))?.isFile()) files.push(path);
  return files.map(bind);
}

function bind(path: string): BindMount {
  return { Type: "bind", Source: path, Target: path, ReadOnly: true };
}

function under(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/**
 * The last `maxLines` lines of a non-TTY container's log as `GET
 * /containers/{id}/logs` returns it: frames of an 8-byte header (stream,
 * 0, 0, 0, big-endian length) and the payload, stdout and stderr interleaved.
 */
export function logTailOf(raw: Buffer, maxLines = 15): string {
  return logLinesOf(raw).filter((line) => line.trim() !== "").slice(-maxLines).join("\n");
}

/** Every line of such a log, oldest first (the frames' payloads joined, decoded once; no empty last line). */
export function logLinesOf(raw: Buffer): string[] {
  return logFramesOf(raw).lines;
}

/**
 * Such a log split by who wrote it: the runner's lines (stdout and stderr
 * frames, oldest first), and what the engine itself said in the stream (its
 * system-error frames, such as a swarm manager's "node … is not available"
 * for a task whose node is down), which are no line of the runner's.
 */
export function logFramesOf(raw: Buffer): { lines: string[]; errors: string[] } {
  const parts: Buffer[] = [];
  const errors: string[] = [];
  let at = 0;
  while (at + 8 <= raw.length && raw[at + 1] === 0 && raw[at + 2] === 0 && raw[at + 3] === 0) {
    const length = raw.readUInt32BE(at + 4);
    const payload = raw.subarray(at + 8, at + 8 + length);
    if (raw[at] === 3) errors.push(payload.toString("utf8").trim());
    else parts.push(payload);
    at += 8 + length;
  }
  const lines = (at === 0 ? raw : Buffer.concat(parts)).toString("utf8").split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return { lines, errors };
}
