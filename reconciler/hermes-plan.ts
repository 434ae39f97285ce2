import { fingerprint, hashOf, type Model } from "../compiler/index.js";
import { hermesAddress, type HermesAddress, type HermesChange, type HermesReason, type PlanWarning } from "../schema/index.js";
import { BEARER_PLACEHOLDER, currentHal0Keys, desiredHal0Keys, HAL0_SERVER_IDS, HermesYamlError, redactHal0Keys, sameKeys, type JoinableServer } from "./hermes-wire.js";
import type { HermesManagedProfile, HermesView, Observed } from "./observed.js";

/**
 * The planner's second kind of resource: one `hermes.<p>` change per named
 * Hermes profile. Pure (the YAML is parsed in memory). A change is an
 * `update` when hal0's keys in the file differ from the desired ones; its
 * reason says why: `new` (none of hal0's keys there yet), `drifted` (hal0's
 * keys were edited by hand, or removed: they differ from what hal0 last wrote), `changed`
 * (the config moved: server address, exposure, the profile's own opt-ins; or
 * hal0 has no record of writing the file, e.g. a lost state folder),
 * `opted_out` (hal0: {wire_mcp: false}: hal0's keys are removed).
 *
 * hal0's two servers authenticate as the profile's identity with its agent
 * token. The planner never sees that token: plans show the header as
 * `Bearer [redacted]` on both sides, and a bearer in the file that is not the
 * token hal0 hands on now (by fingerprint: rotated, revoked, never minted,
 * typed by hand) is a change naming `mcp_servers.<id>.headers.Authorization`.
 */

/** The base URL of this box's MCP servers, from `[server]` (a wildcard bind address is reached on loopback). */
export function mcpBaseUrl(model: Model): string {
  const { host, port } = model.settings.server;
  const reach = host === "0.0.0.0" ? "127.0.0.1" : host === "::" || host === "[::]" ? "::1" : host;
  return `http://${reach.includes(":") && !reach.startsWith("[") ? `[${reach}]` : reach}:${port}`;
}

/** The installed MCP servers, as the join reads them. */
export function joinableServers(model: Model): JoinableServer[] {
  return Object.values(model.mcpServers).map((s) => ({ id: s.id, transport: s.transport, url: s.url, enabled: s.enabled, exposure: s.exposure, tools: s.tools }));
}

/** The agent identity of a profile, whose token its bearer is: `hermes__<p>`; the default profile is `hermes`. */
export function hermesIdentity(profile: string | null): string {
  return profile === null ? "hermes" : `hermes__${profile}`;
}

/** `[hermes] home`, a relative one taken against the config folder. */
export function hermesHome(model: Model): string {
  return resolveHermesHome(model.settings.hermes.home, model.root);
}

/** `[hermes] home` as set (`home`), a relative one taken against the config folder `root`: the wiring's and the bridge's one reading of it. */
export function resolveHermesHome(home: string, root: string): string {
  return home.startsWith("/") ? home : `${root.replace(/\/+$/, "")}/${home}`;
}

export function profileFile(home: string, profile: string | null): string {
  const root = home.replace(/\/+$/, "");
  return profile === null ? `${root}/config.yaml` : `${root}/profiles/${profile}/config.yaml`;
}

export function planHermes(model: Model, observed: Observed): { changes: HermesChange[]; warnings: PlanWarning[] } {
  const profiles = observed.hermes_profiles ?? {};
  const changes: HermesChange[] = [];
  const warnings: PlanWarning[] = [];
  for (const name of Object.keys(profiles).sort()) {
    const tokens = observed.hermes_tokens;
    const result = planHermesProfile(model, name, profiles[name]!.text, observed.hermes_managed?.profiles[name], { token: tokens === undefined ? undefined : tokens[hermesIdentity(name)] ?? null, unreadable: profiles[name]!.unreadable });
    changes.push(result.change);
    warnings.push(...result.warnings);
  }
  const removed = planRemovedProfiles(model, observed);
  return { changes: [...changes, ...removed.changes], warnings: [...warnings, ...removed.warnings] };
}

/**
 * A profile hal0 wired (in hermes-managed.json) whose folder is gone from a
 * home that is there: a `delete` (reason `removed`) that revokes its agent
 * token and forgets it, so a removed agent cannot act. A home that cannot be
 * observed (missing, empty, unreadable: an unmounted disk) removes nothing:
 * one warning says why, per profile hal0 wired there.
 */
function planRemovedProfiles(model: Model, observed: Observed): { changes: HermesChange[]; warnings: PlanWarning[] } {
  const home = observed.hermes_home;
  const profiles = observed.hermes_profiles ?? {};
  const gone = Object.keys(observed.hermes_managed?.profiles ?? {}).filter((name) => !Object.hasOwn(profiles, name) && !(home?.folders ?? []).includes(name)).sort();
  if (home === undefined || gone.length === 0) return { changes: [], warnings: [] };
  const root = hermesHome(model);
  if (home.folders === undefined) {
    return {
      changes: [],
      warnings: gone.map((name) => ({ address: hermesAddress(name), code: "hermes.home_unobservable", message: `[hermes] home ${root} ${home.unobservable ?? "cannot be observed"}; hal0 cannot tell whether profile ${name} was removed, so its token stays live until the home can be read again` })),
    };
  }
  const changes = gone.map((name): HermesChange => {
    const view: HermesView = { profile: name, identity: hermesIdentity(name), file: profileFile(root, name), mcp_servers: {}, managed_ids: [...observed.hermes_managed!.profiles[name]!.ids].sort() };
    return { address: hermesAddress(name), kind: "hermes", action: "delete", reason: "removed", changed_paths: [], before: view, after: { ...view, managed_ids: [] }, apply_class: "immediate", destructive: false, downtime: false };
  });
  return { changes, warnings: [] };
}

export interface HermesPlanOptions {
  /** Undo a hand edit even under drift = "warn" (an on-demand repair). */
  readonly enforce?: boolean;
  /**
   * The fingerprint of the token hal0 hands on to this profile's identity
   * (`observed.hermes_tokens`); null: none is live yet (one is minted when
   * the file is written). Undefined: no credentials were observed, and hal0's
   * servers get no Authorization header.
   */
  readonly token?: string | null;
  /** The file cannot be read (observed `unreadable`: why): it is left alone like one that does not parse. */
  readonly unreadable?: string;
}

/** One profile's change (the default profile: `profile` null, address `hermes`). */
export function planHermesProfile(model: Model, profile: string | null, text: string, managed: HermesManagedProfile | undefined, options: HermesPlanOptions = {}): { change: HermesChange; warnings: PlanWarning[] } {
  const address = hermesAddress(profile);
  const identity = hermesIdentity(profile);
  const file = profileFile(hermesHome(model), profile);
  const owned = [...(managed?.ids ?? [])].sort();
  const warnings: PlanWarning[] = [];
  let desired: Record<string, unknown>;
  let current: Record<string, unknown>;
  let bearers: Record<string, string>;
  try {
    if (options.unreadable !== undefined) throw new HermesYamlError(`cannot read it: ${options.unreadable}`);
    desired = desiredHal0Keys(text, identity, mcpBaseUrl(model), joinableServers(model), { bearer: options.token !== undefined });
    // An entry under an installed server's id that hal0 did not join is the person's own: kept as it is, the server not
    // wired there (unless the entry already is what hal0 would write, which hal0 then keeps as its own).
    const theirs = currentHal0Keys(text, Object.keys(desired).filter((id) => !(HAL0_SERVER_IDS as readonly string[]).includes(id) && !owned.includes(id)));
    const taken = Object.keys(theirs).filter((id) => !(HAL0_SERVER_IDS as readonly string[]).includes(id) && !sameKeys(theirs[id], desired[id])).sort();
    for (const id of taken) delete desired[id];
    if (taken.length > 0) {
      const entries = taken.map((id) => `mcp_servers.${id}`).join(", ");
      warnings.push({ address, code: "hermes.entry_taken", message: `${file}: ${entries} ${taken.length === 1 ? "is an entry" : "are entries"} hal0 did not write; hal0 leaves ${taken.length === 1 ? "it" : "them"} as ${taken.length === 1 ? "it is" : "they are"} and does not wire installed MCP server ${taken.join(", ")} into this profile (rename or remove the entry to have it wired)` });
    }
    // From here on the file's own bearers are only fingerprints: what plans show is redacted.
    ({ view: current, bearers } = redactHal0Keys(currentHal0Keys(text, [...owned, ...Object.keys(desired)])));
  } catch (err) {
    if (!(err instanceof HermesYamlError)) throw err;
    const view: HermesView = { profile, identity, file, mcp_servers: {}, managed_ids: owned };
    return {
      change: hermesChange(address, "no-op", "invalid_yaml", [], view, view),
      warnings: [{ address, code: "hermes.invalid_yaml", message: `${file}: ${err.message}; hal0 leaves the file alone` }],
    };
  }
  const before: HermesView = { profile, identity, file, mcp_servers: current, managed_ids: owned };
  const after: HermesView = { profile, identity, file, mcp_servers: desired, managed_ids: Object.keys(desired).filter((id) => id !== "hal0-admin" && id !== "hal0-memory").sort() };
  const paths = [...new Set([...diffPaths("mcp_servers", current, desired), ...bearerPaths(current, desired, bearers, options.token)])].sort();
  if (paths.length === 0) return { change: hermesChange(address, "no-op", Object.keys(desired).length === 0 ? "opted_out" : "unchanged", [], before, after), warnings };
  const reason = reasonFor(current, desired, managed);
  // `[reconcile] drift = "warn"`: a hand edit of hal0's keys is reported, not undone.
  if (reason === "drifted" && model.settings.reconcile.drift === "warn" && !options.enforce) {
    const base = baseOf(managed, desired);
    // A three-way merge against what hal0 last wrote (`base`): hal0's own changes since then reach the keys the person
    // left alone, the person's edits stay, and a key both changed keeps the person's value and is reported.
    const merge = base === undefined ? { value: current, conflicts: [] as string[] } : merge3("mcp_servers", base, current, desired);
    const merged = isRecord(merge.value) ? merge.value : {};
    const edited = diffPaths("mcp_servers", merged, desired);
    const kept: PlanWarning[] = edited.length === 0 ? [] : [{ address, code: "hermes.drifted", message: `hal0's keys in ${file} were edited by hand (${edited.join(", ")}); drift = "warn": left as they are` }];
    if (merge.conflicts.length > 0) {
      kept.push({ address, code: "hermes.drift_conflict", message: `${file}: ${merge.conflicts.join(", ")} ${merge.conflicts.length === 1 ? "was" : "were"} edited by hand and hal0 now wants ${merge.conflicts.length === 1 ? "it" : "them"} changed too; drift = "warn": the hand edit is kept and hal0's change not made (undo the edit, or run with drift = "enforce", to have it)` });
    }
    // A bearer that is not the live token (rotated, revoked) is not a hand edit, and left as it is it locks the profile
    // out: it is written even so, into the entries as merged (the edit kept, and still reported).
    const changedPaths = [...new Set([...diffPaths("mcp_servers", current, merged), ...bearerPaths(current, merged, bearers, options.token)])].sort();
    if (changedPaths.length === 0) return { change: hermesChange(address, "no-op", "drifted", edited, before, after), warnings: [...warnings, ...kept] };
    // `desired`: what hal0 records as written (the next merge's base), while the file gets the merge. (A record without a
    // base, kept before merges were, gets the token alone, its ids as they were.)
    const ids = [...new Set([...Object.keys(merged), ...after.managed_ids])].filter((id) => !(HAL0_SERVER_IDS as readonly string[]).includes(id)).sort();
    const mergedView: HermesView = base === undefined ? { ...before, mcp_servers: current } : { ...after, mcp_servers: merged, managed_ids: ids, desired };
    return { change: hermesChange(address, "update", "changed", changedPaths, before, mergedView), warnings: [...warnings, ...kept] };
  }
  return { change: hermesChange(address, "update", reason, paths, before, after), warnings };
}

/**
 * Where the file's bearer is not the token hal0 hands on: each of hal0's two
 * servers whose redacted entry equals the desired one there (`Bearer
 * [redacted]` on both sides) but whose bearer's fingerprint is not `token`'s.
 */
function bearerPaths(current: Record<string, unknown>, desired: Record<string, unknown>, bearers: Record<string, string>, token: string | null | undefined): string[] {
  if (token === undefined) return [];
  return HAL0_SERVER_IDS.filter((id) => {
    const now = headersOf(current[id]).Authorization;
    if (now !== BEARER_PLACEHOLDER || headersOf(desired[id]).Authorization !== BEARER_PLACEHOLDER) return false;
    return token === null || bearers[id] === undefined || fingerprint(bearers[id]!) !== token;
  }).map((id) => `mcp_servers.${id}.headers.Authorization`);
}

/**
 * What hal0 last wrote into a profile (redacted), when the record holds it and
 * it matches the record's digest. A record kept before the base was (its
 * digest alone) has one only while hal0 still wants what it wrote then.
 */
function baseOf(managed: HermesManagedProfile | undefined, desired: Record<string, unknown>): Record<string, unknown> | undefined {
  if (managed?.applied === undefined) return undefined;
  const base = managed.base ?? desired;
  return isRecord(base) && hashOf(base) === managed.applied ? base : undefined;
}

/** A key absent on one side. */
const ABSENT = Symbol("absent");

/**
 * The three-way merge of one value: `base` what hal0 last wrote, `mine` the
 * file now (the person's edits), `theirs` what hal0 wants now. A side that
 * did not move from the base yields to the other; two maps merge key by key;
 * anything else changed on both sides differently is a conflict at `path`,
 * which keeps the file's value. ABSENT is a key that is not there.
 */
function merge3(path: string, base: unknown, mine: unknown, theirs: unknown): { value: unknown; conflicts: string[] } {
  if (sameOrAbsent(mine, base)) return { value: theirs, conflicts: [] };
  if (sameOrAbsent(theirs, base) || sameOrAbsent(mine, theirs)) return { value: mine, conflicts: [] };
  if (isRecord(base) && isRecord(mine) && isRecord(theirs)) {
    const value: Record<string, unknown> = {};
    const conflicts: string[] = [];
    // hal0's order of keys first (an entry is written in it), then the person's own.
    for (const k of new Set([...Object.keys(theirs), ...Object.keys(mine), ...Object.keys(base)])) {
      const at = (o: Record<string, unknown>) => (Object.hasOwn(o, k) ? o[k] : ABSENT);
      const one = merge3(`${path}.${k}`, at(base), at(mine), at(theirs));
      if (one.value !== ABSENT) value[k] = one.value;
      conflicts.push(...one.conflicts);
    }
    return { value, conflicts };
  }
  return { value: mine, conflicts: [path] };
}

function sameOrAbsent(a: unknown, b: unknown): boolean {
  return a === ABSENT || b === ABSENT ? a === b : sameKeys(a, b);
}

function headersOf(entry: unknown): Record<string, unknown> {
  return isRecord(entry) && isRecord(entry.headers) ? entry.headers : {};
}

function reasonFor(current: Record<string, unknown>, desired: Record<string, unknown>, managed: HermesManagedProfile | undefined): HermesReason {
  // Drift needs evidence: a record of what hal0 last wrote that the file no longer holds. Entries hal0 wrote that a
  // person removed are such an edit too, not a profile never wired (its record, if any, is of no entries: opted out).
  if (managed?.applied !== undefined && managed.applied !== hashOf(current)) return "drifted";
  if (Object.keys(current).length === 0) return "new";
  return Object.keys(desired).length === 0 ? "opted_out" : "changed";
}

/** A Hermes file edit applies now, stops nothing, and removes only keys hal0 wrote. */
function hermesChange(address: HermesAddress, action: "update" | "no-op", reason: HermesReason, changed_paths: string[], before: HermesView, after: HermesView): HermesChange {
  return { address, kind: "hermes", action, reason, changed_paths, before, after, apply_class: "immediate", destructive: false, downtime: false };
}

/** Dotted leaf paths where `a` and `b` differ (a whole subtree when one side is not an object). */
function diffPaths(prefix: string, a: unknown, b: unknown): string[] {
  if (sameKeys(a, b)) return [];
  if (!isRecord(a) || !isRecord(b)) return [prefix];
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return keys.flatMap((k) => {
    const inA = Object.hasOwn(a, k);
    const inB = Object.hasOwn(b, k);
    if (inA !== inB) return [`${prefix}.${k}`];
    return diffPaths(`${prefix}.${k}`, a[k], b[k]);
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
