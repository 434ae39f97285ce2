import type { Condition } from "../../reconciler/conditions.js";
import type { NodeStatus } from "../../reconciler/nodes.js";
import type { Approval } from "../approvals.js";
import { observePass, type ObservePass } from "../box.js";
import { invoke, type Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import { redactText } from "../redact.js";
import { routeId, type Caller, type Route } from "../route.js";
import { asReadBy } from "../routes/approvals.js";
import { filesHtml, planHtml, planView, replanApproval, type PlanView } from "./plan-view.js";
import { clip, csrfField, esc, jsonBlock, page, time, type Viewer } from "./render.js";

/** How many decided requests the inbox lists under the pending ones. */
const RECENT_DECIDED = 20;
/** How many items of each list of its plan (changes it brings, the whole plan's, warnings, diagnostics) a card shows; the plan page shows them all. */
const CARD_ITEMS = 20;
/** How much of each change's before → after JSON a card shows (a slot's view is about 1500 characters; a Hermes profile's with a hundred MCP servers, tens of thousands). */
const CARD_VIEW_CHARS = 4000;
/** How many pending requests the inbox re-plans at once. */
const REPLANS_AT_ONCE = 8;
/** How many audit rows the status page lists. */
const AUDIT_ROWS = 20;

/** The inbox's script (server/web/client/inbox.ts), served by index.ts. */
const INBOX_SCRIPT = "/assets/inbox.js";

/**
 * The inbox (`/`): pending approval requests newest first, each with its
 * caller, tool, arguments, summary, times and plan, and Approve / Deny forms
 * (`data-approval` / `data-decision` mark them for the script); then the last
 * decided ones, the last decided first, marked with their state and never with a control. Both lists
 * sit in `#inbox-live`, which the script swaps for a fresh copy of this page's;
 * `#inbox-status` (outside it) is where the script reports outcomes. Without
 * script the page reads the same and the forms post plainly (form-encoded, to
 * the page routes `/approvals/{id}/approve|deny`, with the session's `csrf`).
 */
export async function inboxPage(d: Dispatcher, viewer?: Viewer): Promise<string> {
  const pending = newestFirst(d.approvals.list("pending"));
  // By when each was decided: a request decided just now is on the page its decision lands on (`/#<id>`), however old it is.
  // Those rows only, not the queue's whole history (which grows for as long as the box runs).
  const decided = d.approvals.recentlyDecided(RECENT_DECIDED).map((a) => readBy(a, viewer));
  // A few at a time: re-planning a request waits on the box (runtime records, state files, a probe of each port) more than it computes.
  // One pass for the render: each port is probed once for every card, not once per card (a box of a thousand slots, fifty requests).
  const pass = observePass();
  const cards = await mapLimited(pending, REPLANS_AT_ONCE, (a) => approvalCard(d, a, viewer, pass));
  const body = `<div id="inbox-status" class="status" role="status" aria-live="polite" tabindex="-1"></div>
<div id="inbox-live"><section aria-labelledby="pending-h"><h2 id="pending-h">Waiting for you (${pending.length})</h2>
${cards.length === 0 ? `<p class="muted">Nothing is waiting for a decision.</p>` : cards.join("\n")}</section>
<section aria-labelledby="decided-h"><h2 id="decided-h">Recently decided</h2>
${decided.length === 0 ? `<p class="muted">No decided requests yet.</p>` : decided.map(decidedCard).join("\n")}</section></div>`;
  return page("Approval inbox", "/", body, { script: INBOX_SCRIPT, viewer });
}

/** `work` of each item, at most `limit` at once; the results in the items' order. */
async function mapLimited<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** How much of an audit row's target the status page shows (the activity log has the rest). */
const TARGET_SHOWN = 80;

function newestFirst(list: readonly Approval[]): Approval[] {
  return [...list].sort((x, y) => (x.created_at === y.created_at ? (x.id < y.id ? 1 : -1) : x.created_at < y.created_at ? 1 : -1));
}

function facts(a: Approval): string {
  return `<dl class="facts">
<dt>Asked by</dt><dd>${esc(a.caller.agent)} <span class="muted">via ${esc(a.caller.via)}</span></dd>
<dt>Tool</dt><dd><code>${esc(a.tool)}</code> <span class="muted">(${esc(a.route)})</span></dd>
${a.effects.length > 0 ? `<dt>What it does</dt><dd><ul class="effects">${a.effects.map((line) => `<li>${esc(line)}</li>`).join("")}</ul></dd>` : ""}
<dt>Summary</dt><dd>${esc(a.summary)}</dd>
<dt>Created</dt><dd>${time(a.created_at)}</dd>
<dt>${a.state === "pending" ? "Expires" : "Decided"}</dt><dd>${a.state === "pending" ? time(a.expires_at) : `${time(a.decided_at)}${a.decided_by ? ` by ${esc(a.decided_by)}` : ""}`}</dd>
</dl>`;
}

/** A request as the viewing operator reads it: masked as the REST queue masks it when the operator's token does not reach what it acts on. */
function readBy(a: Approval, viewer: Viewer | undefined): Approval {
  return viewer === undefined ? a : asReadBy(a, { kind: "operator", agent: viewer.name, ...(viewer.scopes !== undefined ? { scopes: viewer.scopes } : {}) });
}

async function approvalCard(d: Dispatcher, request: Approval, viewer: Viewer | undefined, pass: ObservePass): Promise<string> {
  const made = request.plan_id ? await replanApproval(d, request, pass) : null;
  const a = readBy(request, viewer);
  const plan = !made ? "" : "error" in made
    ? `<p><strong>The plan cannot be made again:</strong> ${esc(made.error)} <span class="muted">(approving it would fail or be refused as stale)</span></p>`
    : `${made.view.notes.map((n) => `<p class="muted">${esc(n)}</p>`).join("")}${cardPlanHtml(made.view, `/plans/${encodeURIComponent(a.plan_id!)}`)}
<p><a href="/plans/${esc(encodeURIComponent(a.plan_id!))}">Plan and file diff</a></p>`;
  const action = `/approvals/${encodeURIComponent(a.id)}`;
  return `<article class="card pending" id="${esc(a.id)}" data-approval="${esc(a.id)}" aria-labelledby="${esc(a.id)}-h">
<h3 id="${esc(a.id)}-h">${esc(a.tool)} <span class="badge state-pending">pending</span> <span class="muted">${esc(a.id)}</span></h3>
${facts(a)}
<p><strong>Arguments</strong></p>
${jsonBlock(a.args, "arguments")}
${plan}
<div class="actions">
<form method="post" action="${esc(`${action}/approve`)}" data-approval="${esc(a.id)}" data-decision="approve">${csrfField(viewer)}<button type="submit" class="approve">Approve</button></form>
<form method="post" action="${esc(`${action}/deny`)}" data-approval="${esc(a.id)}" data-decision="deny">${csrfField(viewer)}<label>Reason (optional) <input type="text" name="reason" maxlength="500"></label><button type="submit" class="deny">Deny</button></form>
</div>
</article>`;
}

/**
 * A card's plan list, written once per view (replanApproval hands out the same view while its plan is the same):
 * its first CARD_ITEMS items of each list and CARD_VIEW_CHARS of each before → after, the rest on the plan page (`planPage`).
 */
const planHtmlOf = new WeakMap<PlanView, string>();
function cardPlanHtml(view: PlanView, planPageHref: string): string {
  let html = planHtmlOf.get(view);
  if (html === undefined) planHtmlOf.set(view, (html = planHtml(view.plan, view.delta, view.diagnostics, { shown: CARD_ITEMS, viewChars: CARD_VIEW_CHARS, rest: planPageHref })));
  return html;
}

function decidedCard(a: Approval): string {
  const outcome = a.reason ? `<p>${esc(a.reason)}</p>` : a.error ? jsonBlock(a.error, "error") : "";
  return `<article class="card decided" id="${esc(a.id)}" aria-labelledby="${esc(a.id)}-h">
<h3 id="${esc(a.id)}-h">${esc(a.tool)} <span class="badge state-${esc(a.state)}">${esc(a.state)}</span> <span class="muted">${esc(a.id)}</span></h3>
${facts(a)}
<details><summary>Arguments</summary>${jsonBlock(a.args, "arguments")}</details>
${outcome}
</article>`;
}

/** `/plans/{id}`: the plan and the TOML diff of its change set; undefined when no plan has that id (the caller answers 404). */
export async function planPage(d: Dispatcher, id: string, viewer?: Viewer): Promise<string | undefined> {
  const view = await planView(d, id);
  if (!view) return undefined;
  if ("error" in view) return page(view.title, "", `<p><strong>The plan cannot be made again:</strong> ${esc(view.error)}</p>`, { viewer });
  const notes = view.notes.map((n) => `<p class="muted">${esc(n)}</p>`).join("");
  return page(view.title, "", `${notes}<section aria-labelledby="changes-h"><h2 id="changes-h">Changes</h2>${planHtml(view.plan, view.delta, view.diagnostics)}</section>
<section aria-labelledby="files-h"><h2 id="files-h">Files</h2>${filesHtml(view.files)}</section>`, { viewer });
}

/**
 * `/status`: each slot's throughput, the slots with lifecycle state,
 * conditions and drift, on a swarm box its nodes, the doctor's rows and the last audit entries —
 * read through the same read routes REST serves (`GET /api/slots`, `…/{name}/state`, `…/{name}`,
 * `/api/stats/slots`, `/api/stats/throughput/history`, `/api/status`, `/api/doctor`). A slot read
 * refused (the engine down: runtime.unavailable) is said in its place; the rest still renders.
 */
export async function statusPage(d: Dispatcher, viewer?: Viewer): Promise<string> {
  const read = readRoute(d);
  // The slots need the runtime: an engine that does not answer (runtime.unavailable) says so in their section,
  // and the rest of the page (the doctor, which says why, and the audit) still renders.
  const roster = await refusedAs(read("GET /api/slots", {}) as Promise<{ slots: Array<{ name: string; profile: string; model: string | null; port: number; status: string }> }>);
  const slots = "refused" in roster ? [] : roster.slots;
  const throughput = "refused" in roster ? "" : await throughputSection(read, slots.map((s) => s.name));
  // One row per slot, probed in parallel (each probe waits at most 1 s), in the roster's order.
  const rows = await Promise.all(slots.map(async (s) => {
    const both = await refusedAs(Promise.all([read("GET /api/slots/{name}/state", { name: s.name }), read("GET /api/slots/{name}", { name: s.name })]));
    if ("refused" in both) return `<tr><th scope="row">${esc(s.name)}</th><td colspan="4"><span class="muted">cannot be read: ${esc(both.refused)}</span></td></tr>`;
    const [state, detail] = both as unknown as [
      { state: string; health: string; conditions: readonly Condition[] },
      { drift: string; runtime: { up_to_date: boolean | null } },
    ];
    const drift = detail.runtime.up_to_date === false ? "drifted (runs a spec hal0 did not apply)" : detail.runtime.up_to_date ? "in sync" : "not running";
    const conditions = state.conditions.length === 0 ? `<span class="muted">none recorded</span>`
      : `<ul>${state.conditions.map((c) => `<li><code>${esc(c.type)}</code> ${esc(c.status)}${c.reason ? ` · ${esc(c.reason)}` : ""}${c.message ? ` · ${esc(c.message)}` : ""}</li>`).join("")}</ul>`;
    return `<tr><th scope="row">${esc(s.name)}</th><td><span class="badge state-${esc(state.state)}">${esc(state.state)}</span><br><span class="muted">${esc(s.status)}, health ${esc(state.health)}</span></td>
<td>${esc(s.profile)}<br><span class="muted">${esc(s.model ?? "—")} · port ${esc(s.port)}</span></td><td>${esc(drift)}<br><span class="muted">policy ${esc(detail.drift)}</span></td><td>${conditions}</td></tr>`;
  }));
  const doctor = (await read("GET /api/doctor", {})) as { ok: boolean; rows: Array<Record<string, unknown>> };
  const { nodes } = (await read("GET /api/status", {})) as { nodes?: readonly NodeStatus[] };
  const audit = d.audit.query({ limit: AUDIT_ROWS, offset: 0 }).items;
  const slotsSection = "refused" in roster
    ? `<section aria-labelledby="slots-h"><h2 id="slots-h">Slots</h2><p role="alert"><strong>The slots cannot be read:</strong> ${esc(roster.refused)}</p></section>`
    : `<section aria-labelledby="slots-h"><h2 id="slots-h">Slots (${slots.length})</h2><div class="table-wrap"><table>
<thead><tr><th scope="col">Slot</th><th scope="col">State</th><th scope="col">Profile / model</th><th scope="col">Drift</th><th scope="col">Conditions</th></tr></thead>
<tbody>${rows.join("\n")}</tbody></table></div></section>`;
  const body = `${throughput}
${slotsSection}
${nodes === undefined ? "" : nodesSection(nodes)}
<section aria-labelledby="doctor-h"><h2 id="doctor-h">Doctor <span class="badge state-${doctor.ok ? "ok" : "fail"}">${doctor.ok ? "ok" : "failing"}</span></h2><div class="table-wrap"><table>
<thead><tr><th scope="col">Check</th><th scope="col">Status</th><th scope="col">Detail</th></tr></thead>
<tbody>${doctor.rows.map((r) => `<tr><th scope="row">${esc(r.check)}</th><td><span class="badge state-${esc(r.status)}">${esc(r.status)}</span></td><td>${esc(r.message)}${r.hint ? `<br><span class="muted">${esc(r.hint)}</span>` : ""}</td></tr>`).join("\n")}</tbody></table></div></section>
<section aria-labelledby="audit-h"><h2 id="audit-h">Last audit entries</h2><div class="table-wrap"><table>
<thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th><th scope="col">Outcome</th></tr></thead>
<tbody>${audit.map((r) => `<tr><td>${time(r.ts)}</td><td>${esc(r.actor)}</td><td><code>${esc(r.tool ?? r.route ?? r.kind)}</code>${r.target ? ` ${esc(clip(redactText(r.target), TARGET_SHOWN))}` : ""}</td><td><span class="badge state-${esc(r.outcome === "ok" ? "ok" : r.outcome === "pending_approval" ? "pending" : "fail")}">${esc(r.outcome)}</span>${r.error_code ? ` <code>${esc(r.error_code)}</code>` : ""}</td></tr>`).join("\n")}</tbody></table></div></section>`;
  return page("Box status", "/status", body, { viewer });
}

type SlotStatsLine = { name: string; available: boolean; reason?: string; scraped_at?: string; window_s?: number | null; prompt?: { tokens_per_s: number | null }; generation?: { tokens_per_s: number | null } };
type HistoryPoint = { t: string; generated_tokens_per_s: number | null };

/**
 * The throughput table: per slot, generated and prompt tokens/s over the
 * last scrape window and a sparkline of generated tokens/s per minute over
 * the last hour. A slot not scraped says why; stats that cannot be read say
 * so, and the page still renders.
 */
async function throughputSection(read: ReturnType<typeof readRoute>, names: readonly string[]): Promise<string> {
  const head = `<section aria-labelledby="throughput-h"><h2 id="throughput-h">Throughput</h2>`;
  let stats: SlotStatsLine[];
  let history: Map<string, HistoryPoint[]>;
  try {
    const [lines, hist] = (await Promise.all([read("GET /api/stats/slots", {}), read("GET /api/stats/throughput/history", {}, { since: "3600", step: "60" })])) as [
      { slots: SlotStatsLine[] }, { slots: Array<{ slot: string; points: HistoryPoint[] }> },
    ];
    stats = lines.slots;
    history = new Map(hist.slots.map((h) => [h.slot, h.points]));
  } catch (err) {
    return `${head}<p class="muted">The slot stats cannot be read: ${esc((err as Error).message)}</p></section>`;
  }
  const rate = (n: number | null | undefined) => (n === null || n === undefined ? "—" : n >= 100 ? n.toFixed(0) : n.toFixed(1));
  const rows = names.map((name) => {
    const line = stats.find((l) => l.name === name);
    const spark = sparkline(history.get(name) ?? []) || `<span class="muted">no samples this hour</span>`;
    const figures = !line || !line.available
      ? `<td colspan="2"><span class="muted">${esc(line?.reason ?? "no stats")}</span></td>`
      : `<td><strong>${esc(rate(line.generation?.tokens_per_s))}</strong> tok/s</td><td>${esc(rate(line.prompt?.tokens_per_s))} tok/s${line.window_s ? `<br><span class="muted">over ${esc(Math.round(line.window_s))} s</span>` : ""}</td>`;
    return `<tr><th scope="row">${esc(name)}</th>${figures}<td>${spark}</td><td>${line?.available ? time(line.scraped_at) : "—"}</td></tr>`;
  });
  return `${head}<p class="muted">Tokens per second over each slot's last scrape window (llama-server's counters); the line is generated tokens/s per minute over the last hour.</p>
<div class="table-wrap"><table>
<thead><tr><th scope="col">Slot</th><th scope="col">Generated</th><th scope="col">Prompt</th><th scope="col">Last hour</th><th scope="col">Scraped</th></tr></thead>
<tbody>${rows.join("\n")}</tbody></table></div></section>`;
}

const SPARK_W = 160;
const SPARK_H = 32;
/** At least this many minutes wide, so a fresh slot's few points are not stretched over the whole line. */
const SPARK_MIN_POINTS = 10;

/**
 * Generated tokens/s per minute as an inline SVG line (no script, no
 * library): from the first measured minute of the hour (at least the last
 * ten), scaled to the hour's peak; a minute with no sample breaks the line.
 * Empty when nothing was measured. Its label says what the peak was.
 */
export function sparkline(points: readonly HistoryPoint[]): string {
  const first = points.findIndex((p) => p.generated_tokens_per_s !== null);
  if (first < 0) return "";
  const shown = points.slice(Math.min(first, Math.max(0, points.length - SPARK_MIN_POINTS)));
  const values = shown.map((p) => p.generated_tokens_per_s);
  const peak = Math.max(...values.map((v) => v ?? 0));
  const x = (i: number) => (shown.length === 1 ? SPARK_W : (i / (shown.length - 1)) * SPARK_W);
  const y = (v: number) => (peak > 0 ? SPARK_H - 2 - (v / peak) * (SPARK_H - 4) : SPARK_H - 2);
  const runs: string[][] = [[]];
  values.forEach((v, i) => {
    if (v === null) runs.push([]);
    else runs.at(-1)!.push(`${x(i).toFixed(1)},${y(v).toFixed(1)}`);
  });
  const lines = runs.filter((r) => r.length > 0).map((r) => (r.length === 1 ? `<circle cx="${r[0]!.split(",")[0]}" cy="${r[0]!.split(",")[1]}" r="1.5"/>` : `<polyline points="${r.join(" ")}"/>`));
  const label = `generated tokens/s per minute since ${shown[0]!.t}: peak ${peak >= 100 ? peak.toFixed(0) : peak.toFixed(1)}`;
  return `<svg class="spark" role="img" aria-label="${esc(label)}" viewBox="0 0 ${SPARK_W} ${SPARK_H}" width="${SPARK_W}" height="${SPARK_H}"><title>${esc(label)}</title><line class="base" x1="0" y1="${SPARK_H - 1}" x2="${SPARK_W}" y2="${SPARK_H - 1}"/>${lines.join("")}</svg>`;
}

/** A read's result, or the message of the ApiError it was refused with (anything else still fails the page). */
async function refusedAs<T>(read: Promise<T>): Promise<T | { refused: string }> {
  try {
    return await read;
  } catch (err) {
    if (err instanceof ApiError) return { refused: err.message };
    throw err;
  }
}

const PAGE_CALLER: Caller = { kind: "operator", agent: "web", private: false, via: "rest" };

/** Calls a read route of the table by its id, as a REST read would (validated, not audited). */
function readRoute(d: Dispatcher): (id: string, params: Record<string, unknown>, query?: Record<string, unknown>) => Promise<unknown> {
  return (id, params, query = {}) => {
    const route: Route | undefined = d.routes.find((r) => routeId(r) === id);
    if (!route || route.kind !== "read") throw new Error(`the status page needs the read route ${id}`);
    return invoke(d, route, { params, query, body: undefined, caller: PAGE_CALLER, requestId: "web" });
  };
}

/** A page for an error: its status line and message, escaped. */
export function errorPage(status: number, message: string, viewer?: Viewer): string {
  return page(status === 404 ? "Not found" : `Error ${status}`, "", `<p>${esc(message)}</p><p><a href="/">Back to the inbox</a></p>`, { viewer });
}

/**
 * The login page (no script): how to get a one-time link (`hal0 web` on the
 * box) and a form that posts a pasted operator token to `/login`. `message`
 * says why the last attempt failed; `loggedInAs`, that the browser's session
 * still holds (a login link opened a second time), with a link to the inbox.
 */
export function loginPage(message?: string, loggedInAs?: string): string {
  const still = loggedInAs === undefined ? "" : `<p data-logged-in>This browser is still logged in as ${esc(loggedInAs)}: <a href="/">open the inbox</a>.</p>`;
  return page("Log in", "", `${message ? `<p class="status" role="alert">${esc(message)}</p>` : ""}${still}<p>These pages are for the box's operators.</p>
<p>On the box, run <code>hal0 web</code>: it prints a one-time link, valid for 5 minutes, that logs this browser in.</p>
<form class="login" method="post" action="/login"><label for="login-token">Or paste an operator token (<code>hal0_op_…</code>)</label>
<input type="password" id="login-token" name="token" autocomplete="off" spellcheck="false" required>
<button type="submit">Log in</button></form>`, { nav: false });
}

/** A swarm box's nodes: state, availability and role, address and engine, labels, and the slots on each. */
function nodesSection(nodes: readonly NodeStatus[]): string {
  const rows = nodes.map((n) => {
    const labels = Object.keys(n.labels).sort().map((k) => `<code>${esc(k)}=${esc(n.labels[k])}</code>`).join(" ");
    const state = n.state === "ready" && n.availability === "active" ? "ok" : n.state === "ready" ? "pending" : "fail";
    return `<tr><th scope="row">${esc(n.hostname)}</th><td><span class="badge state-${state}">${esc(n.state)}</span><br><span class="muted">${esc(n.availability)}, ${esc(n.role)}${n.message ? ` · ${esc(n.message)}` : ""}</span></td>
<td>${esc(n.addr || "—")}<br><span class="muted">docker ${esc(n.engine_version || "?")}</span></td><td>${labels || `<span class="muted">none</span>`}</td><td>${n.slots.length === 0 ? `<span class="muted">none</span>` : n.slots.map((s) => esc(s)).join(", ")}</td></tr>`;
  });
  return `<section aria-labelledby="nodes-h"><h2 id="nodes-h">Nodes (${nodes.length})</h2><div class="table-wrap"><table>
<thead><tr><th scope="col">Node</th><th scope="col">State</th><th scope="col">Address</th><th scope="col">Labels</th><th scope="col">Slots</th></tr></thead>
<tbody>${rows.join("\n")}</tbody></table></div></section>`;
}
