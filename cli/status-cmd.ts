import type { Model } from "../compiler/index.js";
import { closest } from "../compiler/suggest.js";
import { observe } from "../reconciler/observe.js";
import { labelsText, nodeRows, type NodeStatus } from "../reconciler/nodes.js";
import type { Inventory, ObservedSlot } from "../reconciler/index.js";
import type { SlotOutcome, SlotStep } from "../reconciler/state.js";
import { inventoryBox, openBox } from "./box.js";
import { refreshConditions } from "../reconciler/conditions-store.js";
import type { Condition } from "../reconciler/conditions.js";
import { CliError, EXIT_OK, InvalidConfigError, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { BOX_OPTIONS } from "./plan-cmd.js";
import { redactTyped } from "../server/redact.js";

export const STATUS_HELP = `hal0 status [SLOT] [--config DIR] [--state DIR] [--json]

Each slot's lifecycle state (offline, starting, warming, ready, stopping, error), pid, port, spec hash and,
one line each, what is wrong (a last error: its code and first line); then the other resources
(settings, hermes.<profile>) with their Ready condition and what is wrong.
  SLOT     one slot in full: state, pid, port, spec hash, conditions and the whole last error
  --json   every field in full, with every resource's conditions (Ready, Reconciling, Stalled,
           Degraded); a failure too: {ok: false, exit_code, diagnostics}
A tree with errors does not stop it: status then says how many errors there are and shows
the slots that run (with the runtime of the settings last applied) and the conditions last
recorded; enabled is null, as what the tree wants is unknown (--json: tree_valid false,
and the diagnostics).
Exit status: 0 shown, 1 error (slot.not_found, config.not_found, runtime.unavailable),
64 usage error.`;

/** How much of a last error one NOTE cell shows (and of a condition's message in `status SLOT`). */
const NOTE_WIDTH = 80;

/** One row of `hal0 status`. */
export interface SlotStatus {
  name: string;
  /** null: the tree does not compile, so what it wants is unknown. */
  enabled: boolean | null;
  state: "offline" | "starting" | "warming" | "ready" | "stopping" | "error";
  pid: number | null;
  port: number | null;
  spec_hash: string | null;
  /** The running spec differs from the desired one: `hal0 plan` shows how. */
  outdated: boolean;
  /** The whole text (`code: message`, a stack included); the table shows its first line only. */
  last_error: string | null;
  /** Swarm: the node its task is on (absent on one box). */
  node?: string;
  /** Running, but neither in the config nor in the inventory: hal0 did not start it and leaves it alone (slot.unmanaged). */
  unmanaged?: true;
  /** Ready, Reconciling, Stalled, Degraded (`--json`; the text shows the ones that say something is wrong). */
  conditions?: readonly Condition[];
}

/** `hal0 status SLOT`: one slot's row with its last apply step. */
export interface SlotDetail extends SlotStatus {
  /** The spec hash the config wants now (null: not in the config). */
  desired_spec_hash: string | null;
  /** The last apply step hal0 recorded for the slot (`outcomes.json`). */
  last_outcome: SlotOutcome | null;
  /** The step an apply runs on the slot now, until it ends (`steps.json`); null when none. */
  step: SlotStep | null;
}

export async function runStatus(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({ args, strict: true, allowPositionals: true, options: { ...BOX_OPTIONS, json: { type: "boolean" } } });
  if (positionals.length > 1) throw new UsageError("expected: hal0 status [SLOT]");
  // A tree with errors does not hide what runs: the inventory's slots are shown with the conditions last recorded, and what the tree wants is unknown.
  let invalid: InvalidConfigError | undefined;
  const box = await openBox(values, io).catch(async (err: unknown) => {
    if (!(err instanceof InvalidConfigError)) throw err;
    invalid = err;
    const errors = err.diagnostics.filter((d) => d.severity === "error").length;
    io.stderr.write(`note: ${err.root} has ${errors} error(s) (hal0 validate lists them); status shows what runs, with the conditions last recorded; what the tree wants is unknown\n`);
    return inventoryBox(err.root, values, io);
  });
  const [{ observed, inventory }, outcomes, steps] = await Promise.all([observe(box.model, box.driver, box.state, { hermesCredentials: box.hermesCredentials }), box.state.readOutcomes(), box.state.readSteps()]);
  const desiredKnown = invalid === undefined;
  // Under --json the document says whether the tree compiled, and carries its errors when it did not.
  const tree = { tree_valid: desiredKnown, ...(invalid ? { diagnostics: invalid.diagnostics } : {}) };
  const conditions = desiredKnown ? await refreshConditions(box.model, observed, box.state, Date.now, false) : await box.state.readConditions();
  // A last error or a condition may quote a runner's last lines, which may hold a secret it printed: masked, as slot_state masks it.
  const rows = redactTyped(statusRows(box.model, observed.slots, outcomes, desiredKnown, steps, inventory).map((row) => ({ ...row, conditions: conditions[`slot.${row.name}`]?.conditions ?? [] })));
  const name = positionals[0];
  if (name !== undefined) {
    const row = rows.find((r) => r.name === name);
    if (!row) {
      const known = rows.map((r) => r.name);
      const hit = closest(name, known);
      throw new CliError("slot.not_found", `no slot '${name}'${hit ? `. Did you mean ${hit}?` : ""} (slots: ${known.join(", ") || "none"})`);
    }
    const detail: SlotDetail = { ...row, desired_spec_hash: box.model.slots[name]?.spec_hash ?? null, last_outcome: redactTyped(outcomes[name] ?? null), step: steps[name] ?? null };
    io.stdout.write(values.json ? `${JSON.stringify({ slot: detail, ...tree }, null, 2)}\n` : `${formatSlot(detail)}\n`);
    return EXIT_OK;
  }
  const resources = redactTyped(Object.entries(conditions).filter(([address]) => !address.startsWith("slot.")).map(([address, c]) => ({ address, generation: c.generation, conditions: c.conditions })));
  const nodes = observed.nodes === undefined ? undefined : nodeRows(observed.nodes, observed.slots);
  const nodesText = nodes === undefined ? "" : `\n${formatNodes(nodes)}\n`;
  io.stdout.write(values.json ? `${JSON.stringify({ slots: rows, resources, ...(nodes ? { nodes } : {}), ...tree }, null, 2)}\n` : `${formatStatus(rows)}\n\n${formatResources(resources)}\n${nodesText}`);
  return EXIT_OK;
}

export function statusRows(model: Model, observed: Readonly<Record<string, ObservedSlot>>, outcomes: Record<string, SlotOutcome>, desiredKnown = true, steps: Readonly<Record<string, SlotStep>> = {}, inventory?: Pick<Inventory, "slots">): SlotStatus[] {
  const names = [...new Set([...Object.keys(model.slots), ...Object.keys(observed)])].sort();
  return names.map((name) => {
    const desired = model.slots[name];
    const seen = observed[name];
    const enabled = desiredKnown ? (desired?.enabled ?? false) : null;
    // A slot disabled since its last step failed, and not running: that failure is nothing to fix (offline, as slot_state says).
    const outcome = enabled === false && !seen?.running ? undefined : outcomes[name];
    // Running, and named neither by the config nor by the inventory: the plan leaves it alone (slot.unmanaged).
    const unmanaged = desiredKnown && desired === undefined && seen?.running === true && inventory !== undefined && inventory.slots[name] === undefined;
    return {
      name,
      enabled,
      state: lifecycle(seen, outcome, steps[name]),
      pid: seen?.running ? (seen.record?.pid ?? null) : null,
      port: seen?.record?.view.port ?? desired?.port ?? null,
      spec_hash: seen?.running ? (seen.record?.view.spec_hash ?? null) : null,
      outdated: Boolean(seen?.running && desired && seen.record?.view.spec_hash !== desired.spec_hash),
      last_error: outcome && !outcome.ok ? `${outcome.code}: ${outcome.error}` : (seen?.detail ?? null),
      ...(seen?.node !== undefined ? { node: seen.node.hostname } : {}),
      ...(unmanaged ? { unmanaged: true as const } : {}),
    };
  });
}

function lifecycle(seen: ObservedSlot | undefined, outcome: SlotOutcome | undefined, step: SlotStep | undefined): SlotStatus["state"] {
  // A start under way whose runner is not launched yet: starting, whatever the last outcome said.
  if (step !== undefined && step.phase !== "stopping" && !seen?.running) return "starting";
  // An apply stops its runner (a replace's old one, a delete's).
  if (step?.phase === "stopping" && seen?.running) return "stopping";
  if (seen?.running) {
    if (seen.health === "ok") return "ready";
    if (seen.health === "loading") return "warming";
    // Running and /health does not answer, or cannot be asked (no readable record: its port is unknown): starting only
    // while an apply starts it; else (one an interrupted apply left, one that stopped answering, one whose record is
    // unreadable) it is an error, as slot_state says (server/slot-view.ts lifecycleOf).
    return (seen.health === "down" || seen.record === undefined) && step === undefined ? "error" : "starting";
  }
  // Swarm starts its task (again, after its runner exited): starting; one it keeps restarting is an error (Degraded CrashLoop).
  if (seen?.starting !== undefined) return seen.starting.failed >= 2 ? "error" : "starting";
  return outcome && !outcome.ok ? "error" : "offline";
}

/** One line per non-slot resource: its Ready status and, when something is off, the conditions that say so. */
function formatResources(resources: ReadonlyArray<{ address: string; conditions: readonly Condition[] }>): string {
  const table = [["RESOURCE", "READY", "NOTE"]];
  for (const r of resources) {
    const ready = r.conditions.find((c) => c.type === "Ready");
    const notes = r.conditions
      .filter((c) => (c.type === "Ready" ? c.status !== "True" : c.status === "True"))
      .map((c) => `${c.type}: ${c.reason} (${firstLine(c.message)})`);
    table.push([r.address, ready?.status ?? "Unknown", notes.join("; ")]);
  }
  return alignTable(table);
}

/** The nodes of a swarm box: state, availability, role, labels, engine and the slots on each. */
function formatNodes(nodes: readonly NodeStatus[]): string {
  const table = [["NODE", "STATE", "AVAILABILITY", "ROLE", "ADDRESS", "ENGINE", "LABELS", "SLOTS"]];
  for (const n of nodes) {
    const labels = labelsText(n.labels, ",");
    table.push([n.hostname, n.state, n.availability, n.role, n.addr || "-", n.engine_version || "-", labels || "-", n.slots.join(",") || "-"]);
  }
  return alignTable(table);
}

function formatStatus(rows: readonly SlotStatus[]): string {
  // The NODE column only on a swarm box (a slot with a node).
  const withNode = rows.some((r) => r.node !== undefined);
  const table = [withNode ? ["SLOT", "STATE", "NODE", "PID", "PORT", "SPEC", "NOTE"] : ["SLOT", "STATE", "PID", "PORT", "SPEC", "NOTE"]];
  let cut = false;
  for (const r of rows) {
    const alarms = (r.conditions ?? []).filter((c) => (c.type === "Stalled" || c.type === "Degraded") && c.status === "True").map((c) => `${c.type}: ${c.reason}`);
    // One line per slot: a last error is its code and first line, cut at NOTE_WIDTH ('hal0 status SLOT' has it whole).
    const error = r.last_error === null ? "" : oneLine(r.last_error, NOTE_WIDTH);
    if (r.last_error !== null && error !== r.last_error.trim()) cut = true;
    const note = [r.unmanaged ? "unmanaged: hal0 did not start it and leaves it alone" : r.enabled === false ? "disabled" : "", r.outdated ? "outdated: see hal0 plan" : "", ...alarms, error].filter(Boolean).join("; ");
    const cells = [r.name, r.state, r.pid === null ? "-" : String(r.pid), r.port === null ? "-" : String(r.port), r.spec_hash ? r.spec_hash.slice(7, 19) : "-", note];
    if (withNode) cells.splice(2, 0, r.node ?? "-");
    table.push(cells);
  }
  return cut ? `${alignTable(table)}\n\n(errors cut to one line: 'hal0 status SLOT' shows one in full)` : alignTable(table);
}

/** `hal0 status SLOT`: every field, the conditions one per line, then the whole last error. */
function formatSlot(d: SlotDetail): string {
  const dash = (v: string | number | null) => (v === null ? "-" : String(v));
  const lines = [
    `slot      ${d.name}${d.enabled === false ? " (disabled)" : ""}`,
    `state     ${d.state}`,
    `pid       ${dash(d.pid)}`,
    `port      ${dash(d.port)}`,
    `spec      ${dash(d.spec_hash)}${d.outdated ? " (outdated: see hal0 plan)" : ""}`,
    `desired   ${dash(d.desired_spec_hash)}`,
    `last step ${d.last_outcome ? `${d.last_outcome.action} ${d.last_outcome.ok ? "succeeded" : "failed"} at ${d.last_outcome.at}` : "-"}`,
  ];
  if (d.step !== null) lines.push(`now       ${d.step.action} under way: ${d.step.phase} since ${d.step.since}`);
  const conditions = d.conditions ?? [];
  if (conditions.length > 0) {
    lines.push("", "conditions:");
    const table = conditions.map((c) => [`  ${c.type}`, c.status, c.reason, oneLine(c.message, NOTE_WIDTH)]);
    lines.push(alignTable(table));
  }
  lines.push("", "last error:", d.last_error === null ? "  none" : d.last_error.trimEnd().split("\n").map((l) => `  ${l}`).join("\n"));
  return lines.join("\n");
}

/** A resource's condition message in the table: its first line, with an ellipsis when lines follow. */
function firstLine(text: string): string {
  const lines = text.trim().split(/\r?\n/);
  return lines.length > 1 ? `${lines[0]!.trim()} …` : lines[0]!.trim();
}

/** A text's first non-empty line, cut to `width` characters with an ellipsis; an ellipsis too when lines follow. */
export function oneLine(text: string, width: number): string {
  const lines = text.trim().split(/\r?\n/);
  const first = lines[0]!.trim();
  if (first.length > width) return `${first.slice(0, width - 1).trimEnd()}…`;
  return lines.length > 1 ? `${first} …` : first;
}

function alignTable(table: string[][]): string {
  const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
  return table.map((row) => row.map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c]!))).join("  ").trimEnd()).join("\n");
}
