import type { Action, Change, Plan, PlanWarning, SettingsBuckets, SlotPlacement } from "../schema/index.js";
import { labelsText } from "./nodes.js";
import { slotValueAt } from "./view.js";

/** What a masked secret shows (server/redact.ts MASK). */
const MASK = "[redacted]";

/**
 * The plan's canonical text: what golden tests compare and what `hal0 plan`
 * prints (the CLI adds colour). Deterministic: it follows the plan's order.
 * One block per change, a header `<symbol> <address> (<reason>)` with
 * `[destructive]` / `[downtime]` markers, then indented lines: `path: before
 * → after` for every changed path, and the key facts of a slot that is
 * created or deleted. Then warnings (`! address: code: message`), the
 * settings buckets, and a one-line summary.
 */

/** As terraform's, plus `=` for an unchanged resource (shown only when verbose). */
const SYMBOLS: Readonly<Record<Action, string>> = { create: "+", update: "~", replace: "-/+", delete: "-", "no-op": "=" };
/** Shown for a slot that is created or deleted, so the reader knows which one. */
const SLOT_FACTS = ["model", "port", "profile"] as const;
const INDENT = "    ";

export interface FormatOptions {
  /** Show unchanged resources too (`= slot.x (unchanged)`). */
  readonly verbose?: boolean;
  /** `down`: a plan with nothing to do says there is nothing to stop, not that the box matches the configuration (it is down). */
  readonly command?: "down";
}

export function formatPlan(plan: Plan, options: FormatOptions = {}): string {
  const lines: string[] = [];
  for (const change of plan.changes) {
    if (change.action === "no-op" && !options.verbose) continue;
    lines.push(...formatChange(change));
  }
  if (plan.warnings.length > 0) lines.push("", ...plan.warnings.map(formatWarning));
  const buckets = formatBuckets(plan.settings);
  if (buckets.length > 0) lines.push("", "Settings to apply:", ...buckets);
  if (lines.length > 0) lines.push("");
  lines.push(formatSummary(plan, options.command));
  return lines.join("\n");
}

/** The plan as JSON, 2-space indent (what `hal0 plan --json` prints and `--out` saves). Neither form ends in a newline: the caller adds one. */
export function planJson(plan: Plan): string {
  return JSON.stringify(plan, null, 2);
}

function formatChange(change: Change): string[] {
  const markers = [change.destructive ? " [destructive]" : "", change.downtime ? " [downtime]" : ""].join("");
  const header = `${SYMBOLS[change.action]} ${change.address} (${reasonText(change)})${markers}`;
  if (change.action === "no-op") return [header];
  const lines = [header, ...facts(change)];
  for (const path of change.changed_paths) {
    const before = show(valueOf(change, "before", path));
    const after = show(valueOf(change, "after", path));
    // A secret is redacted on both sides: equal views there mean another value (a Hermes bearer: the file holds another token than the one hal0 hands on).
    if (before === after && before.includes(MASK)) lines.push(`${INDENT}${path}: ${before} → ${after} (${change.kind === "hermes" && path.endsWith(".headers.Authorization") ? "another token" : "another value"})`);
    else lines.push(before === after ? `${INDENT}${path}: reordered` : `${INDENT}${path}: ${before} → ${after}`);
  }
  return lines;
}

/** The observed facts a slot's spec carries, in words (`observed.<key>`). */
const OBSERVED_WORDS: Readonly<Record<string, string>> = { image_digest: "image digest", runner_dialect: "runner dialect" };

/**
 * The reason, and for a slot replaced because an observed fact moved, which
 * one in words: `observed_changed: image digest changed` (a sync moved the
 * image's tag), `… runner dialect changed`; `first observed` when the running
 * slot's record has none (it was started before hal0 knew it), `no longer
 * observed` when the fact is gone now (the image is not on the engine).
 */
function reasonText(change: Change): string {
  if (change.kind !== "slot" || change.reason !== "observed_changed") return change.reason;
  const moved = change.changed_paths.filter((p) => p.startsWith("observed.")).map((path) => {
    const key = path.slice("observed.".length);
    const words = OBSERVED_WORDS[key] ?? key.replace(/_/g, " ");
    if (change.before?.spec.observed?.[key] === undefined) return `${words} first observed`;
    return change.after?.spec.observed?.[key] === undefined ? `${words} no longer observed` : `${words} changed`;
  });
  return moved.length === 0 ? change.reason : `${change.reason}: ${moved.join(", ")}`;
}

/** The key facts of a slot being created (from `after`) or deleted (from `before`), unless a changed path shows them; the file a Hermes update edits. */
function facts(change: Change): string[] {
  if (change.kind === "hermes") return change.action === "update" ? [`${INDENT}file: ${show(change.after.file)}`] : [];
  if (change.kind !== "slot") return [];
  // Swarm: where the slot runs is shown for every change of it (a move names placement.node among its paths instead).
  const placed = change.after ?? change.before;
  const where = placed?.spec.placement !== undefined && !change.changed_paths.some((p) => p.startsWith("placement.")) ? [`${INDENT}node: ${nodeText(placed.spec.placement)}`] : [];
  if (change.action !== "create" && change.action !== "delete") return where;
  const view = change.action === "create" ? change.after : change.before;
  if (view === null) return [];
  return [...SLOT_FACTS.filter((key) => !change.changed_paths.includes(key)).map((key) => `${INDENT}${key}: ${show(slotValueAt(view, key))}`), ...where];
}

/** A swarm slot's placement in words: its node, else the labels its node must carry, else any node. */
function nodeText(placement: SlotPlacement): string {
  const labels = labelsText(placement.labels);
  if (placement.node !== undefined) return labels === "" ? show(placement.node) : `${show(placement.node)} (labels ${labels})`;
  return labels === "" ? "any (Swarm chooses)" : `any with labels ${labels} (Swarm chooses)`;
}

/** A changed path's value on one side of a change: a slot view's (`tune.x`, `argv.--flag`), else a dotted key of the settings or a Hermes view. The web page's plan view reads the same. */
export function valueOf(change: Change, side: "before" | "after", path: string): unknown {
  if (change.kind === "slot") {
    const view = change[side];
    return view === null ? undefined : slotValueAt(view, path);
  }
  return dottedValue(change[side], path);
}

/**
 * A dotted key's value in a Settings object or a Hermes view
 * (`mcp_servers.hal0-admin.url`), walking objects key by key; a key may itself
 * hold dots (an MCP server id `my.server`): the longest matching key wins.
 */
function dottedValue(value: unknown, path: string): unknown {
  if (value === null || typeof value !== "object") return undefined;
  const obj = value as Record<string, unknown>;
  if (Object.hasOwn(obj, path)) return obj[path];
  const parts = path.split(".");
  for (let n = parts.length - 1; n >= 1; n--) {
    const head = parts.slice(0, n).join(".");
    if (Object.hasOwn(obj, head)) return dottedValue(obj[head], parts.slice(n).join("."));
  }
  return undefined;
}

/** JSON for values (strings quoted, so `"32768"` in argv is told from the number 32768); `(none)` when absent. */
function show(value: unknown): string {
  return value === undefined ? "(none)" : JSON.stringify(value);
}

function formatWarning(w: PlanWarning): string {
  return `! ${w.address}: ${w.code}: ${w.message}`;
}

function formatBuckets(b: SettingsBuckets): string[] {
  const rows: Array<[string, readonly string[]]> = [
    ["immediate", b.immediate],
    ...Object.keys(b.service_restart).sort().map((svc): [string, readonly string[]] => [`restart ${svc}`, b.service_restart[svc]!]),
    ["manual restart", b.manual_restart],
    ["unknown", b.unknown],
  ];
  return rows.filter(([, keys]) => keys.length > 0).map(([label, keys]) => `${INDENT}${label}: ${keys.join(", ")}`);
}

function formatSummary(plan: Plan, command?: "down"): string {
  if (!plan.has_changes && command === "down") return plan.warnings.length > 0 ? "Nothing to stop; the warnings above need a person." : "Nothing to stop: no slot hal0 started runs.";
  if (!plan.has_changes) return plan.warnings.length > 0 ? "No changes to apply; the warnings above need a person." : "No changes. The box matches the configuration.";
  const s = plan.summary;
  return `Plan: ${s.create} to create, ${s.update} to update, ${s.replace} to replace, ${s.delete} to delete, ${s.no_op} unchanged.`;
}
