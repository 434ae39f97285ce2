import type { ResolvedSlot } from "../compiler/index.js";
import { slotAddress, type PlanWarning, type SlotAddress, type SlotChange } from "../schema/index.js";
import { heldUnplaced } from "./nodes.js";
import { otherBoxWords, renamedContainerWords, unrecordedRunnerWords, type ForeignPort, type ObservedNode, type ObservedSlot } from "./observed.js";

/**
 * What the planner tells the operator about a slot beside its change: things
 * the plan cannot fix (a foreign process on the port, a slot hal0 did not
 * start) or should explain (why a runner is down, why a tune value differs
 * from the one asked for). Warnings never change an action.
 */

/** Warnings for a desired, enabled slot. */
export function slotWarnings(change: SlotChange, desired: ResolvedSlot, seen: ObservedSlot | undefined, foreign: ForeignPort | undefined, nodes?: readonly ObservedNode[]): PlanWarning[] {
  const address = change.address;
  const warnings: PlanWarning[] = [];
  if (foreign !== undefined) {
    warnings.push({
      address,
      code: "slot.port_in_use",
      message: change.reason === "port_held"
        ? `port ${foreign.port} is held by ${holder(foreign)}; slot \`${desired.name}\` keeps running as it is${seen?.record ? ` on port ${seen.record.view.port}` : ""} until it is freed`
        : (foreign.runner?.slot ?? (foreign.container?.state !== undefined ? foreign.container.slot : undefined)) === desired.name && (change.action === "create" || change.action === "replace")
          ? `port ${foreign.port} is held by ${holder(foreign)}; the ${change.action} stops it first`
          : `port ${foreign.port} is held by ${holder(foreign)}; slot \`${desired.name}\` cannot start until it is freed`,
    });
  }
  if (seen?.unplaced !== undefined) warnings.push({ address, code: "slot.unplaced", message: `slot \`${desired.name}\`: ${seen.unplaced.message}` });
  else if (change.reason === "unplaced") {
    const held = heldUnplaced(desired, seen, nodes);
    if (held !== undefined) warnings.push({ address, code: "slot.unplaced", message: `slot \`${desired.name}\`: ${held.message}` });
  }
  if (seen?.running && seen.node?.moved_from !== undefined) {
    warnings.push({ address, code: "slot.rescheduled", message: `Swarm moved slot \`${desired.name}\` from node ${seen.node.moved_from} to node ${seen.node.hostname}` });
  }
  if (change.reason === "not_running" && seen?.detail) {
    warnings.push({ address, code: "slot.not_running", message: seen.detail });
  }
  // What the runtime found changed in a running slot (a container made again by hand, a service updated), beyond the paths the plan names.
  if (change.reason === "drifted" && seen?.running && seen.detail) {
    warnings.push({ address, code: "slot.changed_by_hand", message: seen.detail });
  }
  if (change.action === "no-op" && (change.reason === "not_running" || change.reason === "drifted")) {
    const what = change.reason === "drifted" ? "was changed behind hal0's back" : "stopped behind hal0's back";
    warnings.push({ address, code: "slot.drifted", message: `slot \`${desired.name}\` ${what}; drift = "warn": reported, not fixed` });
  }
  if (change.action === "create" || change.action === "replace") warnings.push(...tuneWarnings(address, desired), ...runnerNotes(address, desired));
  if (change.reason === "image_unobserved") {
    const image = change.after?.spec.image ?? "";
    warnings.push({ address, code: "slot.image_missing", message: `the digest of image ${image} cannot be read (it is not on the engine, or the engine did not answer); slot \`${desired.name}\` keeps running the image it was started with (${change.before?.spec.observed?.image_digest ?? "?"}) until it can be read: the same image then changes nothing, another one replaces it` });
  }
  if (change.reason === "argv_refused") {
    for (const d of desired.runner.diagnostics) {
      if (d.severity === "error") warnings.push({ address, code: d.code, message: `${d.file}:${d.line}:${d.column}: ${d.summary}; slot \`${desired.name}\` is not started` });
    }
  }
  return warnings;
}

/** A slot that runs but that neither the inventory nor the config claims: left alone. */
export function unmanagedWarning(name: string, seen: ObservedSlot): PlanWarning {
  const pid = seen.record?.pid !== undefined ? ` (pid ${seen.record.pid})` : "";
  return {
    address: slotAddress(name),
    code: "slot.unmanaged",
    message: `slot \`${name}\` is running${pid} but is neither in hal0's inventory nor enabled in the config; hal0 leaves it alone`,
  };
}

/** What the plan says of a runner it could not check: not probed (the newest known dialect is assumed), or not llama-server. */
function runnerNotes(address: SlotAddress, desired: ResolvedSlot): PlanWarning[] {
  const r = desired.runner;
  const word = r.key.slice(r.key.indexOf(":") + 1);
  if (r.status === "unprobed") {
    return [{ address, code: "slot.runner_unchecked", message: `runner \`${word}\` was not probed: argv written for the newest known llama-server dialect, flags not checked` }];
  }
  if (r.status === "not_checked") {
    return [{ address, code: "slot.runner_unchecked", message: `runner \`${word}\` is not llama-server (${r.version || "no version"}): its flags are not checked` }];
  }
  return [];
}

/** The tune values the slot will run with instead of the ones asked for, key by key. */
function tuneWarnings(address: SlotAddress, desired: ResolvedSlot): PlanWarning[] {
  return Object.keys(desired.tune_unavailable)
    .sort()
    .map((key) => {
      const u = desired.tune_unavailable[key as keyof typeof desired.tune_unavailable]!;
      return {
        address,
        code: "slot.tune_unavailable",
        message: `tune.${key} = ${JSON.stringify(u.requested)} is unavailable (${u.reason}); it runs with ${JSON.stringify(u.effective)}`,
      };
    });
}

function holder(foreign: ForeignPort): string {
  if (foreign.container !== undefined) return renamedContainerWords(foreign.container);
  if (foreign.runner !== undefined) return unrecordedRunnerWords(foreign, foreign.runner.slot);
  if (foreign.other_box !== undefined) return otherBoxWords(foreign, foreign.other_box);
  const which = foreign.pid === undefined
    ? foreign.command ? `\`${foreign.command}\`` : "another program"
    : foreign.command ? `pid ${foreign.pid} (${foreign.command})` : `pid ${foreign.pid}`;
  return `${which}, which hal0 did not start`;
}
