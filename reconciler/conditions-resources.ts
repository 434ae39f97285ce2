import { hashOf } from "../compiler/index.js";
import type { HermesChange, SettingsBuckets, SettingsChange } from "../schema/index.js";
import { withHistory, type ConditionType, type ResourceConditions, type Verdict } from "./conditions.js";
import type { SlotOutcome } from "./state.js";

/**
 * Conditions of the resources that are not slots, from their planned change
 * (the planner already decided what is pending) and the outcome of the last
 * step that wrote them. Pure, like conditions.ts.
 *
 * - `hermes.<p>`: Ready when hal0's keys in the profile are as desired (or it
 *   opted out and they are gone); Reconciling while an update is pending;
 *   Degraded on drift left alone (`drift = "warn"`) or a failed last write;
 *   Stalled while its config.yaml cannot be read or does not parse (hal0 will not touch it
 *   until a person fixes it).
 * - `settings`: Ready when the applied settings are the desired ones;
 *   Reconciling while keys are pending (the reason names the strongest
 *   apply class); Degraded when the last write of them failed.
 */

const NO_FAILURE: Verdict = { status: "False", reason: "AsExpected", message: "no failure" };
const NOT_STALLED: Verdict = { status: "False", reason: "Progressing", message: "no terminal failure" };
const CONVERGED: Verdict = { status: "False", reason: "Converged", message: "nothing to do" };

export function hermesConditions(change: HermesChange, outcome: SlotOutcome | undefined, previous: ResourceConditions | undefined, now: string): ResourceConditions {
  const file = change.after.file;
  const pending = change.action !== "no-op";
  const verdicts: Record<ConditionType, Verdict> = {
    Ready: hermesReady(change, file),
    Reconciling: pending ? { status: "True", reason: change.reason, message: `the next apply or sweep writes hal0's keys in ${file} (${change.changed_paths.join(", ")})` } : CONVERGED,
    Stalled: change.reason === "invalid_yaml"
      ? { status: "True", reason: "InvalidYaml", message: `${file} cannot be read or does not parse as YAML; hal0 leaves it alone until it is fixed` }
      : NOT_STALLED,
    Degraded: failed(outcome) ?? (change.reason === "drifted" && !pending
      ? { status: "True", reason: "DriftWarned", message: `hal0's keys in ${file} were edited by hand (${change.changed_paths.join(", ")}); drift = "warn": left as they are` }
      : NO_FAILURE),
  };
  return withHistory(verdicts, hashOf(change.after), previous, now);
}

function hermesReady(change: HermesChange, file: string): Verdict {
  if (change.reason === "invalid_yaml") return { status: "False", reason: "InvalidYaml", message: `${file} cannot be read or does not parse as YAML` };
  if (change.action !== "no-op") return { status: "False", reason: "ChangePending", message: `hal0's keys in ${file} are not as desired (${change.reason})` };
  if (change.reason === "drifted") return { status: "False", reason: "Drifted", message: `hal0's keys in ${file} were edited by hand` };
  if (change.reason === "opted_out") return { status: "True", reason: "OptedOut", message: `${file} opts out (hal0: {wire_mcp: false}); none of hal0's keys are there` };
  return { status: "True", reason: "Wired", message: `${file} holds hal0's MCP servers as desired` };
}

export function settingsConditions(change: SettingsChange, buckets: SettingsBuckets, outcome: SlotOutcome | undefined, previous: ResourceConditions | undefined, now: string): ResourceConditions {
  const keys = change.changed_paths;
  const verdicts: Record<ConditionType, Verdict> = {
    Ready: keys.length === 0
      ? { status: "True", reason: "Applied", message: "the applied settings are the desired ones" }
      : { status: "False", reason: "ChangesPending", message: `${keys.length} key(s) differ from the applied settings: ${keys.join(", ")}` },
    Reconciling: keys.length === 0 ? CONVERGED : { status: "True", reason: pendingReason(change.apply_class), message: pendingMessage(buckets) },
    Stalled: NOT_STALLED,
    Degraded: failed(outcome) ?? NO_FAILURE,
  };
  return withHistory(verdicts, hashOf(change.after), previous, now);
}

function pendingReason(applyClass: SettingsChange["apply_class"]): string {
  return applyClass === "manual-restart" ? "ManualRestartPending" : applyClass === "service-restart" ? "ServiceRestartPending" : "ChangePending";
}

/** Which keys wait for what: the next apply, a service restart, a manual restart of hal0. */
function pendingMessage(b: SettingsBuckets): string {
  const parts: string[] = [];
  if (b.immediate.length > 0) parts.push(`applied by the next apply or sweep: ${b.immediate.join(", ")}`);
  for (const [service, keys] of Object.entries(b.service_restart)) parts.push(`restart ${service}: ${keys.join(", ")}`);
  if (b.manual_restart.length > 0) parts.push(`take effect after a manual restart of hal0: ${b.manual_restart.join(", ")}`);
  if (b.unknown.length > 0) parts.push(`unclassified (treated as manual restart): ${b.unknown.join(", ")}`);
  return parts.join("; ");
}

function failed(outcome: SlotOutcome | undefined): Verdict | undefined {
  return outcome && !outcome.ok ? { status: "True", reason: outcome.code ?? "ApplyFailed", message: outcome.error ?? "the last write failed" } : undefined;
}
