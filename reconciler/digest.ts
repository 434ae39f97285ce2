import { hashOf } from "../compiler/index.js";
import { hermesAddress, parseAddress, slotAddress, type Plan, type SlotView } from "../schema/index.js";
import { hermesIdentity } from "./hermes-plan.js";
import type { Observed, ObservedSlot } from "./observed.js";

/**
 * Digests of what a plan was made from, one per observed resource, so that
 * applying a saved plan can re-observe and name each resource that moved.
 * A digest covers only what changes the plan's decisions: for a slot whether
 * it runs, its pid and the spec hash its record holds; for settings the
 * applied settings; for a Hermes profile (`hermes.<p>`) its file's text and, when observed, the fingerprint of the token hal0 hands
 * on to it (a rotation makes a saved plan stale). Health is left out: warming → ready must not make a plan stale.
 */
export function observedDigests(observed: Observed): Record<string, string> {
  const entries: Array<[string, string]> = Object.keys(observed.slots).map((name) => [
    slotAddress(name),
    slotDigest(observed.slots[name]!),
  ]);
  entries.push(["settings", hashOf(observed.applied_settings ?? null)]);
  for (const [name, profile] of Object.entries(observed.hermes_profiles ?? {})) entries.push([hermesAddress(name), hermesDigest(observed, name, profile.text)]);
  if (observed.hermes_default !== undefined) entries.push([hermesAddress(null), hermesDigest(observed, null, observed.hermes_default.text)]);
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries);
}

function hermesDigest(observed: Observed, name: string | null, text: string): string {
  if (observed.hermes_tokens === undefined) return hashOf(text);
  return hashOf({ text, token: observed.hermes_tokens[hermesIdentity(name)] ?? null });
}

function slotDigest(slot: ObservedSlot): string {
  return hashOf({ running: slot.running, pid: slot.record?.pid ?? null, spec_hash: slot.record?.view.spec_hash ?? null });
}

/**
 * The resources whose digest differs between a saved plan's base and a fresh
 * one (appeared, vanished or changed), sorted; `config` when the tree's
 * digest moved. Empty: the saved plan still holds.
 */
export function movedResources(saved: Plan["base"], current: Plan["base"]): string[] {
  const moved = new Set<string>();
  if (saved.config_digest !== current.config_digest) moved.add("config");
  for (const address of new Set([...Object.keys(saved.observed), ...Object.keys(current.observed)])) {
    if (saved.observed[address] !== current.observed[address]) moved.add(address);
  }
  return [...moved].sort();
}

/**
 * `movedResources`, each with how it moved: what the saved plan saw (its
 * change for that address) and what is observed now. For `plan.stale`.
 */
export function describeMoves(saved: Plan, observed: Observed, configDigest: string): string[] {
  const current = { config_digest: configDigest, observed: observedDigests(observed) };
  return movedResources(saved.base, current).map((address) => {
    if (address === "config") return `config: the config changed since the plan was made (${short(saved.base.config_digest)} → ${short(configDigest)})`;
    if (address === "settings") return "settings: the applied settings changed since the plan was made";
    const parsed = parseAddress(address);
    if (parsed?.kind === "hermes") {
      const there = parsed.profile === null ? observed.hermes_default : observed.hermes_profiles?.[parsed.profile];
      return `${address}: its config.yaml ${there ? "was edited, or its token rotated," : "was removed or added"} since the plan was made`;
    }
    const change = saved.changes.find((c) => c.address === address);
    const was = change === undefined ? "not seen" : change.reason === "new" || change.reason === "not_running" ? "not running" : `running${specOf(change.kind === "slot" ? change.before : null)}`;
    const slot = parsed?.kind === "slot" ? observed.slots[parsed.name] : undefined;
    const now = !slot ? "gone" : slot.running ? `running (pid ${slot.record?.pid ?? "?"})${specOf(slot.record?.view)}` : `not running${slot.detail ? ` (${slot.detail})` : ""}`;
    return `${address}: ${was} when planned; now ${now}`;
  });
}

/**
 * The slots whose image a saved plan was made with is not the one its reference
 * names now (a pull or `docker tag` since: the same config, another
 * `observed.image_digest`), as `plan.stale` names them. `plan` is the plan
 * made afresh; a slot whose image reference itself changed is a config move.
 */
export function imageMoves(saved: Plan, plan: Plan): string[] {
  const out: string[] = [];
  for (const change of saved.changes) {
    if (change.kind !== "slot") continue;
    const now = plan.changes.find((c) => c.address === change.address);
    const was = change.after?.spec;
    const is = now?.kind === "slot" ? now.after?.spec : undefined;
    if (was?.image === undefined || is?.image !== was.image) continue;
    const [before, after] = [was.observed?.image_digest, is.observed?.image_digest];
    if (before === after) continue;
    out.push(`${change.address}: image ${was.image} was ${before ?? "not on the engine"} when planned; now ${after ?? "not on the engine"} (${after === undefined ? "removed or untagged" : "pulled or tagged"} since)`);
  }
  return out;
}

function specOf(view: SlotView | null | undefined): string {
  const hash = view?.spec_hash;
  return hash ? `, spec ${short(hash)}` : "";
}

function short(digest: string): string {
  return `${digest.slice(0, 19)}…`;
}
