import { applyChangeSet, movedFiles } from "../../compiler/changeset.js";
import { slotNameOf, type Change, type Diagnostic, type Plan } from "../../schema/index.js";
import { valueOf } from "../../reconciler/format.js";
import { proposeOnly, type Dispatcher } from "../dispatch.js";
import type { Approval } from "../approvals.js";
import type { ObservePass } from "../box.js";
import { isMcpServerFile, redact, redactText, redactTyped, redactToml, tomlLineRedactor } from "../redact.js";
import { routeId } from "../route.js";
import { clip, diffBlock, esc, jsonBlock, lineDiff, type DiffLine } from "./render.js";

/** What a plan page shows: the plan (null when its change set was invalid), the files before → after, and notes about how they were obtained. */
export interface PlanView {
  readonly title: string;
  readonly plan: Plan | null;
  /** The plan's changes this change set brings (not already pending on the tree); null when unknown (the full plan is shown). */
  readonly delta: readonly Change[] | null;
  readonly diagnostics: readonly unknown[];
  /** Before → after with secret values masked (server/redact.ts); `diff` is the line diff of the real texts, masked line by line, so a changed secret still shows as changed. */
  readonly files: ReadonlyArray<{ readonly file: string; readonly before: string | null; readonly after: string | null; readonly diff?: readonly DiffLine[] }>;
  readonly notes: readonly string[];
}

const SYMBOL: Record<Change["action"], string> = { create: "+", delete: "-", update: "~", replace: "-/+", "no-op": "=" };

/**
 * A pending approval's plan, made again from its stored call against the
 * revision it was based on (approvals keep the plan's id, not the plan): the
 * same `proposeOnly` approving runs, nothing written. Resolves to an error
 * message when it cannot be made any more (a file it edits moved: it would be
 * stale), or null for a call that is not a write. The requests of one
 * render share `pass`: who holds each port is asked once for all of them.
 */
export async function replanApproval(d: Dispatcher, a: Approval, pass?: ObservePass): Promise<{ view: PlanView } | { error: string } | null> {
  const route = d.routes.find((r) => routeId(r) === a.route);
  if (!route || route.kind !== "write") return null;
  // Re-planned from the call as stored (a reader's copy has its secrets masked); everything shown is masked again.
  const stored = d.approvals.unredacted(a.id) ?? a;
  try {
    const { proposal } = await proposeOnly(d, route, {
      params: stored.args.params, query: stored.args.query, body: stored.args.body ?? undefined, caller: stored.caller, requestId: stored.id, base: stored.base_revision ?? undefined, tool: stored.tool,
    }, pass);
    // The same plan as last time (the box keeps it while the tree and what it observes stay as they were): the same view.
    const known = views.get(proposal.plan)?.get(a.id);
    if (known !== undefined) return { view: known };
    const notes = proposal.plan.id === stored.plan_id ? [] : ["The plan differs from the one made when this request was queued: what runs changed since."];
    const view = redactedView({ title: `Plan of ${a.tool} (${a.id})`, plan: proposal.plan, delta: proposal.delta, diagnostics: proposal.warnings, files: proposal.applied.files, notes });
    let byId = views.get(proposal.plan);
    if (byId === undefined) views.set(proposal.plan, (byId = new Map()));
    byId.set(a.id, view);
    return { view };
  } catch (err) {
    return { error: redactText((err as Error).message) };
  }
}

/** Approvals' plan views by the plan they were made from (Box.propose hands out the same one while nothing changed), then by request. */
const views = new WeakMap<Plan, Map<string, PlanView>>();

/** A plan view as every page shows it: the plan, delta, diagnostics, notes and files with secret values masked. */
function redactedView(view: PlanView): PlanView {
  return {
    ...view,
    plan: view.plan === null ? null : redactTyped(view.plan),
    delta: view.delta === null ? null : redactTyped(view.delta),
    diagnostics: redact(view.diagnostics) as unknown[],
    notes: view.notes.map(redactText),
    files: view.files.map((f) => {
      const options = { allEnv: isMcpServerFile(f.file) };
      const mask = (text: string | null) => (text === null ? null : redactToml(text, options));
      return { file: f.file, before: mask(f.before), after: mask(f.after), diff: f.diff ?? redactedDiff(f.file, f.before, f.after) };
    }),
  };
}

/**
 * The line diff of two TOML texts with secret values masked line by line:
 * the removed and kept lines read as the old file (its tables), the added
 * and kept ones as the new file, so `- API_KEY = "[redacted]"` /
 * `+ API_KEY = "[redacted]"` still says the secret changed.
 */
export function redactedDiff(file: string, before: string | null, after: string | null): DiffLine[] {
  const options = { allEnv: isMcpServerFile(file) };
  const old = tomlLineRedactor(options);
  const now = tomlLineRedactor(options);
  return lineDiff(before, after).map((l) => {
    if (l.op === "-") return { ...l, text: old(l.text) };
    if (l.op === "+") return { ...l, text: now(l.text) };
    const text = old(l.text);
    now(l.text);
    return { ...l, text };
  });
}

/**
 * The plan page's data for `id`: a saved plan (`pln_…`, the plans table) with
 * its change set applied to the current tree for the diff, or else the plan
 * of a pending approval whose plan id is `id`. Undefined when neither exists.
 */
export async function planView(d: Dispatcher, id: string): Promise<PlanView | { error: string; title: string } | undefined> {
  const record = d.plans.get(id);
  if (record) {
    const snapshot = await d.box.snapshot();
    const notes: string[] = [`Saved plan by ${record.actor}, ${record.state}${record.stale_reason ? ` (${record.stale_reason})` : ""}.`];
    const moved = movedFiles(record.base_files, snapshot.files, Object.keys(record.base_files));
    if (record.state === "applied") notes.push("Already applied: the diff shows its change set against the current files.");
    else if (moved.length > 0) notes.push(`These files changed since it was made, so the diff is against their current text: ${moved.join(", ")}.`);
    let files: PlanView["files"] = [];
    try {
      files = applyChangeSet(snapshot.tree, record.changes).files;
    } catch (err) {
      notes.push(`Its change set no longer applies: ${(err as Error).message}`);
    }
    const delta = record.valid && record.state !== "applied" ? await d.box.propose(record.changes).then((p) => p.delta, () => null) : null;
    return redactedView({ title: `Plan ${record.id}`, plan: record.plan, delta, diagnostics: record.diagnostics, files, notes: record.summary ? [`“${record.summary}”`, ...notes] : notes });
  }
  const approval = d.approvals.list("pending").find((a) => a.plan_id === id);
  if (!approval) return undefined;
  const made = await replanApproval(d, approval);
  if (!made) return undefined;
  return "error" in made ? { title: `Plan ${id}`, error: made.error } : made.view;
}

/**
 * How much of a plan an inbox card shows: its first `shown` changes of each
 * list, warnings, diagnostics and changed paths, the first `viewChars` of each
 * before → after, then a line linking `rest` (the plan page, which shows
 * everything). A card on a box of a thousand slots would
 * otherwise carry the whole plan, and an inbox of fifty cards hundreds of MB.
 */
export interface PlanExcerpt {
  readonly shown: number;
  /** How much of a change's before → after JSON it shows, in characters. */
  readonly viewChars: number;
  readonly rest: string;
}

/**
 * A plan's changes as a list: with a delta, the changes this change set
 * brings first and the whole plan (what the next apply does, including what
 * was already pending on the tree) folded below; without one, the whole plan.
 * With `excerpt`, each list is cut to its first `excerpt.shown` items.
 */
export function planHtml(rawPlan: Plan | null, rawDelta: readonly Change[] | null, rawDiagnostics: readonly unknown[], excerpt?: PlanExcerpt): string {
  // Masked here too (idempotent): whoever hands a plan in, the page never shows a secret value.
  const plan = rawPlan === null ? null : redactTyped(rawPlan);
  const delta = rawDelta === null ? null : redactTyped(rawDelta);
  const diagnostics = redact(rawDiagnostics) as unknown[];
  if (!plan) return `<p class="muted">The change set is invalid; no plan was made.</p>${diagnosticsHtml(diagnostics, excerpt)}`;
  const counts = `${plan.summary.create} to create, ${plan.summary.update} to update, ${plan.summary.replace} to replace, ${plan.summary.delete} to delete`;
  const list = (changes: readonly Change[]) => changes.length === 0 ? `<p class="muted">No change to what runs.</p>` : `<ul class="changes">${cut(changes, excerpt).map((c) => changeHtml(c, excerpt)).join("")}${moreHtml(changes.length, excerpt, "changes")}</ul>`;
  const whole = list(plan.changes.filter((c) => c.action !== "no-op"));
  const body = delta === null
    ? `<p class="plan-counts">Plan: ${esc(counts)}.</p>${whole}`
    : `<p><strong>What this change brings (${delta.length})</strong></p>${list(delta)}<details><summary>The whole plan of the next apply: ${esc(counts)} (includes what was already pending)</summary>${whole}</details>`;
  const warnings = plan.warnings.length === 0 ? "" : `<p><strong>Warnings (${plan.warnings.length})</strong></p><ul>${cut(plan.warnings, excerpt).map((w) => `<li>${esc(w.address)}: ${esc(w.message)} <span class="muted">(${esc(w.code)})</span></li>`).join("")}${moreHtml(plan.warnings.length, excerpt, "warnings")}</ul>`;
  return `${body}${warnings}${diagnosticsHtml(diagnostics, excerpt)}`;
}

/** The items an excerpt shows (all of them without one). */
function cut<T>(items: readonly T[], excerpt: PlanExcerpt | undefined): readonly T[] {
  return excerpt === undefined || items.length <= excerpt.shown ? items : items.slice(0, excerpt.shown);
}

/** The line after an excerpt's cut list: how many more, and where they all are. */
function moreHtml(count: number, excerpt: PlanExcerpt | undefined, what: string): string {
  if (excerpt === undefined || count <= excerpt.shown) return "";
  return `<li class="more muted">and ${count - excerpt.shown} more ${esc(what)}: <a href="${esc(excerpt.rest)}">the plan page</a> lists all ${count}</li>`;
}

/** One change: `+ slot.x` style head, reason, apply class, changed paths with before → after (with `excerpt`, the first `excerpt.shown`), destructive and downtime marks. */
export function changeHtml(c: Change, excerpt?: PlanExcerpt): string {
  const marks = [
    c.destructive ? `<span class="destructive-mark">destructive</span>` : "",
    c.downtime ? `<span class="badge state-warn">downtime</span>` : "",
  ].filter(Boolean).join(" ");
  const paths = c.changed_paths.length === 0 ? "" : `<ul class="paths">${cut(c.changed_paths, excerpt).map((p) => `<li><code>${esc(p)}</code>${beforeAfter(valueOf(c, "before", p), valueOf(c, "after", p))}</li>`).join("")}${moreHtml(c.changed_paths.length, excerpt, "paths")}</ul>`;
  return `<li class="change${c.destructive ? " destructive" : ""}" data-action="${esc(c.action)}">
<div class="change-head">${esc(`${SYMBOL[c.action]} ${c.address}`)} ${marks}</div>
<div>${esc(c.action)} · reason <code>${esc(c.reason)}</code> · applies ${esc(c.apply_class)}</div>
${c.downtime ? `<div>${esc(downtimeText(c))}</div>` : ""}
${paths}
<details><summary>Before → after</summary>${viewBlock(c.before, "before", excerpt)}${viewBlock(c.after, "after", excerpt)}</details>
</li>`;
}

/** A change's before or after as JSON; with `excerpt`, its first `excerpt.viewChars` characters and a pointer to the plan page. */
function viewBlock(value: unknown, label: string, excerpt: PlanExcerpt | undefined): string {
  if (excerpt === undefined) return jsonBlock(value, label);
  const text = JSON.stringify(value ?? null, null, 2);
  if (text.length <= excerpt.viewChars) return jsonBlock(value, label);
  return `<pre class="json" aria-label="${esc(label)}">${esc(clip(text, excerpt.viewChars))}</pre><p class="muted">(cut: <a href="${esc(excerpt.rest)}">the plan page</a> shows it whole)</p>`;
}

function downtimeText(c: Change): string {
  const what = c.kind === "slot" ? `the slot ${slotNameOf(c.address)}` : c.address;
  if (c.action === "delete") return `Downtime: ${what} stops serving and stays down.`;
  if (c.action === "replace") return `Downtime: ${what} is unavailable while it restarts with the new spec (until it is ready again).`;
  return `Downtime: ${what} is unavailable for a while during apply.`;
}

function beforeAfter(before: unknown, after: unknown): string {
  if (before === undefined && after === undefined) return "";
  const show = (v: unknown) => (v === undefined ? "—" : JSON.stringify(v));
  return `: <code>${esc(show(before))}</code> → <code>${esc(show(after))}</code>`;
}

function diagnosticsHtml(diagnostics: readonly unknown[], excerpt?: PlanExcerpt): string {
  if (diagnostics.length === 0) return "";
  const row = (d: Partial<Diagnostic>) => `<li><span class="badge state-${esc(d.severity)}">${esc(d.severity)}</span> ${esc(d.file ?? "")}${d.line ? `:${esc(d.line)}` : ""} ${esc(d.summary ?? JSON.stringify(d))} <span class="muted">${esc(d.code ?? "")}</span></li>`;
  return `<p><strong>Diagnostics</strong></p><ul>${cut(diagnostics as Array<Partial<Diagnostic>>, excerpt).map(row).join("")}${moreHtml(diagnostics.length, excerpt, "diagnostics")}</ul>`;
}

/** The files a change set touches as line diffs, one `<pre>` each (a created file all `+`, a deleted one all `-`). */
export function filesHtml(files: PlanView["files"]): string {
  if (files.length === 0) return `<p class="muted">No file changes.</p>`;
  return files.map((f) => {
    const what = f.before === null ? " (new file)" : f.after === null ? " (deleted)" : "";
    return `<h3><code>${esc(f.file)}</code>${esc(what)}</h3>${diffBlock(f.file, f.diff ?? redactedDiff(f.file, f.before, f.after))}`;
  }).join("");
}
