import { parseArgs } from "node:util";
import type { Model } from "../compiler/index.js";
import { observe } from "../reconciler/observe.js";
import type { ObservedSlot } from "../reconciler/index.js";
import type { SlotOutcome } from "../reconciler/state.js";
import { openBox } from "./box.js";
import { refreshConditions } from "../reconciler/conditions-store.js";
import type { Condition } from "../reconciler/conditions.js";
import { EXIT_OK, type CliIo } from "./io.js";
import { BOX_OPTIONS } from "./plan-cmd.js";

export const STATUS_HELP = `hal0 status [--config DIR] [--state DIR] [--json]

Each slot's lifecycle state (offline, starting, warming, ready, error), pid, port, spec hash and last error;
then the other resources (settings, hermes.<profile>) with their Ready condition and what is wrong.
--json adds every resource's conditions (Ready, Reconciling, Stalled, Degraded).`;

/** One row of `hal0 status`. */
export interface SlotStatus {
  name: string;
  enabled: boolean;
  state: "offline" | "starting" | "warming" | "ready" | "error";
  pid: number | null;
  port: number | null;
  spec_hash: string | null;
  /** The running spec differs from the desired one: `hal0 plan` shows how. */
  outdated: boolean;
  last_error: string | null;
  /** Ready, Reconciling, Stalled, Degraded (`--json`; the text shows the ones that say something is wrong). */
  conditions?: readonly Condition[];
}

export async function runStatus(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, strict: true, allowPositionals: false, options: { ...BOX_OPTIONS, json: { type: "boolean" } } });
  const box = await openBox(values, io);
  const [{ observed }, outcomes] = await Promise.all([observe(box.model, box.driver, box.state, { hermesCredentials: box.hermesCredentials }), box.state.readOutcomes()]);
  const conditions = await refreshConditions(box.model, observed, box.state, Date.now, false);
  const rows = statusRows(box.model, observed.slots, outcomes).map((row) => ({ ...row, conditions: conditions[`slot.${row.name}`]?.conditions ?? [] }));
  const resources = Object.entries(conditions).filter(([address]) => !address.startsWith("slot.")).map(([address, c]) => ({ address, generation: c.generation, conditions: c.conditions }));
  io.stdout.write(values.json ? `${JSON.stringify({ slots: rows, resources }, null, 2)}\n` : `${formatStatus(rows)}\n\n${formatResources(resources)}\n`);
  return EXIT_OK;
}

export function statusRows(model: Model, observed: Readonly<Record<string, ObservedSlot>>, outcomes: Record<string, SlotOutcome>): SlotStatus[] {
  const names = [...new Set([...Object.keys(model.slots), ...Object.keys(observed)])].sort();
  return names.map((name) => {
    const desired = model.slots[name];
    const seen = observed[name];
    const outcome = outcomes[name];
    return {
      name,
      enabled: desired?.enabled ?? false,
      state: lifecycle(seen, outcome),
      pid: seen?.running ? (seen.record?.pid ?? null) : null,
      port: seen?.record?.view.port ?? desired?.port ?? null,
      spec_hash: seen?.running ? (seen.record?.view.spec_hash ?? null) : null,
      outdated: Boolean(seen?.running && desired && seen.record?.view.spec_hash !== desired.spec_hash),
      last_error: outcome && !outcome.ok ? `${outcome.code}: ${outcome.error}` : (seen?.detail ?? null),
    };
  });
}

function lifecycle(seen: ObservedSlot | undefined, outcome: SlotOutcome | undefined): SlotStatus["state"] {
  if (seen?.running) return seen.health === "ok" ? "ready" : seen.health === "loading" ? "warming" : "starting";
  return outcome && !outcome.ok ? "error" : "offline";
}

/** One line per non-slot resource: its Ready status and, when something is off, the conditions that say so. */
function formatResources(resources: ReadonlyArray<{ address: string; conditions: readonly Condition[] }>): string {
  const table = [["RESOURCE", "READY", "NOTE"]];
  for (const r of resources) {
    const ready = r.conditions.find((c) => c.type === "Ready");
    const notes = r.conditions
      .filter((c) => (c.type === "Ready" ? c.status !== "True" : c.status === "True"))
      .map((c) => `${c.type}: ${c.reason} (${c.message})`);
    table.push([r.address, ready?.status ?? "Unknown", notes.join("; ")]);
  }
  return alignTable(table);
}

function formatStatus(rows: readonly SlotStatus[]): string {
  const table = [["SLOT", "STATE", "PID", "PORT", "SPEC", "NOTE"]];
  for (const r of rows) {
    const alarms = (r.conditions ?? []).filter((c) => (c.type === "Stalled" || c.type === "Degraded") && c.status === "True").map((c) => `${c.type}: ${c.reason}`);
    const note = [r.enabled ? "" : "disabled", r.outdated ? "outdated: see hal0 plan" : "", ...alarms, r.last_error ?? ""].filter(Boolean).join("; ");
    table.push([r.name, r.state, r.pid === null ? "-" : String(r.pid), r.port === null ? "-" : String(r.port), r.spec_hash ? r.spec_hash.slice(7, 19) : "-", note]);
  }
  return alignTable(table);
}

function alignTable(table: string[][]): string {
  const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
  return table.map((row) => row.map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c]!))).join("  ").trimEnd()).join("\n");
}
