import { previewPlan } from "../reconciler/converge.js";
import { slotNameOf, type Change, type SlotChange } from "../schema/index.js";
import { openBox } from "./box.js";
import { EXIT_CHANGES, EXIT_OK, parseCommandArgs, type CliIo } from "./io.js";
import { BOX_OPTIONS } from "./plan-cmd.js";


export const DRIFT_HELP = `hal0 drift [--config DIR] [--state DIR] [--json]

Lists what changed behind hal0's back: slots hal0 started that stopped, or that run a spec
hal0 did not apply, and Hermes profiles whose hal0 keys were edited by hand.
  --json   print {drift, count} (a failure too: {ok: false, exit_code, diagnostics})
Exit status: 0 no drift, 2 some drift, 1 error (config.not_found, a tree with errors,
runtime.unavailable), 64 usage error.`;

/** One drifted slot or Hermes profile, with what the next apply or sweep does about it. */
export interface DriftEntry {
  address: string;
  reason: "not_running" | "drifted";
  policy: "enforce" | "warn";
  /** What the plan would do: `create`/`replace` under enforce, `no-op` under warn. */
  action: string;
  details: string[];
}

export async function runDrift(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({ args, strict: true, allowPositionals: false, options: { ...BOX_OPTIONS, json: { type: "boolean" } } });
  const box = await openBox(values, io);
  const { plan, inventory } = await previewPlan(box);
  const drifted = (c: Change): c is SlotChange & { reason: DriftEntry["reason"] } =>
    c.kind === "slot" && (c.reason === "not_running" || c.reason === "drifted") && Object.hasOwn(inventory.slots, slotNameOf(c.address));
  const drift: DriftEntry[] = plan.changes
    .filter(drifted)
    .map((c) => ({
      address: c.address,
      reason: c.reason,
      policy: box.model.slots[slotNameOf(c.address)]?.drift ?? box.model.settings.reconcile.drift,
      action: c.action,
      details: plan.warnings.filter((w) => w.address === c.address && w.code !== "slot.drifted").map((w) => w.message),
    }));
  for (const c of plan.changes.filter((x) => x.kind === "hermes" && x.reason === "drifted")) {
    drift.push({ address: c.address, reason: "drifted", policy: box.model.settings.reconcile.drift, action: c.action, details: c.changed_paths.map((p) => `${p} was edited by hand`) });
  }
  // Under drift = "warn" a hand edit kept while hal0 has changes of its own for the profile (merged three ways, reason
  // `changed`): still drift, its keys named by the plan's warnings.
  for (const c of plan.changes.filter((x) => x.kind === "hermes" && x.reason !== "drifted")) {
    const kept = plan.warnings.filter((w) => w.address === c.address && (w.code === "hermes.drifted" || w.code === "hermes.drift_conflict"));
    if (kept.length > 0) drift.push({ address: c.address, reason: "drifted", policy: box.model.settings.reconcile.drift, action: c.action, details: kept.map((w) => w.message) });
  }
  if (values.json) io.stdout.write(`${JSON.stringify({ drift, count: drift.length }, null, 2)}\n`);
  else io.stdout.write(`${drift.length === 0 ? "No drift." : drift.map(formatEntry).join("\n")}\n`);
  return drift.length === 0 ? EXIT_OK : EXIT_CHANGES;
}

function formatEntry(d: DriftEntry): string {
  const what = d.address.startsWith("hermes.") ? "has hal0 keys edited by hand" : d.reason === "drifted" ? "runs a spec hal0 did not apply" : "is not running";
  const next = d.policy === "warn" ? `drift = "warn": reported only` : `drift = "enforce": the next apply or sweep will ${d.action} it`;
  return [`${d.address} ${what}; ${next}`, ...d.details.map((x) => `    ${x}`)].join("\n");
}
