import type { SkillChanges } from "../bridge/runs/skills-diff.js";
import { tierFor } from "../../compiler/index.js";
import { AGENT_ID_PATTERN } from "../../schema/index.js";
import { isAdmission } from "../bridge/access.js";
import type { ClientConfigs } from "../bridge/clients.js";
import type { Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import type { TokenInfo } from "../identity/tokens.js";
import { introspect } from "../mcp-servers/bundled.js";
import type { Caller } from "../route.js";
import { redactText } from "../redact.js";
import { PROFILE_NAME } from "../../reconciler/hermes-files.js";
import { clip, csrfField, esc, page, time, type Viewer } from "./render.js";

/** The clients the "add to" panel writes config for, as the form names them. */
export const CLIENTS = { claude_code: "Claude Code", codex: "Codex", cursor: "Cursor" } as const;
export type ClientId = keyof typeof CLIENTS;

/** How a tier reads on a badge, and its colour class. */
const BADGE: Record<string, readonly [string, string]> = {
  autonomous_read: ["read", "ok"], autonomous_write: ["write", "warn"], gated: ["gated", "pending"], blocked: ["blocked", "fail"],
};

/** The operator the page introspects as: every tool not blocked for everyone is listed. */
const PAGE_CALLER: Caller = { kind: "operator", agent: "web", private: false, via: "rest" };

/** What the page shows once, right after the operator minted a bridge token (never stored, never in a URL). */
export interface Minted {
  readonly name: string;
  readonly client: ClientId;
  readonly url: string;
  readonly token: string;
  readonly configs: ClientConfigs;
  /** A line for each profile named that `[hermes] home` holds no folder of (a typo reaches nothing), as `hal0 bridge admit` warns. */
  readonly warnings?: readonly string[];
}

/**
 * `/agents`: hal0's MCP servers — hal0-admin, hal0-memory, hal0-agents
 * (while `[bridge] enabled`), each introspected live as a client gets it,
 * with its tool count and each tool's tier badge for the agent named in
 * `?agent=` (the defaults without one) — and the installed servers; the
 * "add to Claude Code / Codex / Cursor" form, which mints an agent token
 * admitted to the bridge (never an operator token) and shows its config
 * once; the bridge admissions with a Revoke form each; the newest Hermes
 * runs, each with a page that follows its output and a Cancel form while it
 * is queued or running. No script: the forms post plainly with the session's
 * CSRF field, and a running run's page reloads itself (a meta refresh).
 */
export async function agentsPage(d: Dispatcher, baseUrl: string, agent: string | undefined, viewer?: Viewer, minted?: Minted): Promise<string> {
  const model = await d.box.model();
  const who = agent !== undefined && AGENT_ID_PATTERN.test(agent) ? agent : undefined;
  const bundled = await Promise.all((d.bundled ?? []).filter((b) => b.enabled?.() ?? true).map((b) => introspect(b, PAGE_CALLER, baseUrl)));
  const servers = bundled.map((srv) => {
    const tools = srv.tools.map((t) => {
      const tier = tierFor(model.policy, t.name, who) ?? "blocked";
      const [label, cls] = BADGE[tier] ?? [tier, "warn"];
      return `<li><code>${esc(t.name)}</code> <span class="badge state-${cls}" data-tier="${esc(tier)}">${esc(label)}</span></li>`;
    });
    return `<section aria-labelledby="srv-${esc(srv.id)}"><h3 id="srv-${esc(srv.id)}">${esc(srv.name)} <span class="muted">${esc(srv.url)}</span></h3>
<p><span data-tool-count="${esc(srv.id)}">${srv.tools_count}</span> tool(s). ${esc(srv.description)}</p>
<details><summary>Tools and their tiers${who ? ` for ${esc(who)}` : ""}</summary><ul class="tools" data-server="${esc(srv.id)}">${tools.join("")}</ul></details></section>`;
  });
  const installed = Object.values(model.mcpServers);
  const installedRows = installed.map((m) => `<tr><th scope="row">${esc(m.id)}</th><td>${esc(m.transport)}</td><td>${esc(m.tools_count ?? 0)}</td><td>${m.enabled === false ? "off" : "on"}</td></tr>`);
  const bridgeOn = model.settings.bridge.enabled;
  const admissions = d.auth?.tokens.list({ all: false }).filter(isAdmission) ?? [];
  const body = `<section aria-labelledby="servers-h"><h2 id="servers-h">hal0's MCP servers</h2>
<form method="get" action="/agents"><label>Tiers for agent <input name="agent" value="${esc(who ?? "")}" pattern="[A-Za-z0-9_\\-]{1,64}" placeholder="(the defaults)"></label> <button type="submit">Show</button></form>
${servers.join("\n")}
${bridgeOn ? "" : `<p class="muted">hal0-agents is off (<code>[bridge] enabled = false</code>): /mcp/agents answers 404.</p>`}
<h3>Installed servers (${installed.length})</h3>${installed.length === 0 ? `<p class="muted">none</p>` : `<div class="table-wrap"><table><thead><tr><th scope="col">Server</th><th scope="col">Transport</th><th scope="col">Tools</th><th scope="col">Enabled</th></tr></thead><tbody>${installedRows.join("")}</tbody></table></div>`}</section>
${minted ? mintedSection(minted) : ""}
<section aria-labelledby="add-h"><h2 id="add-h">Add hal0-agents to Claude Code, Codex or Cursor</h2>
<p>Mints an <strong>agent</strong> token admitted to the bridge (it reaches /mcp/agents and the Hermes profiles named, nothing else) and shows the client's config once.</p>
<form method="post" action="/agents/admit">${csrfField(viewer)}
<label>Agent name <input name="name" required pattern="[A-Za-z0-9_\\-]{1,64}" placeholder="claude-code"></label>
<label>Hermes profiles <input name="profiles" placeholder="coder,writer (empty: every profile)"></label>
<label>Client <select name="client">${Object.entries(CLIENTS).map(([id, label]) => `<option value="${id}">${esc(label)}</option>`).join("")}</select></label>
<button type="submit">Mint and show config</button></form></section>
<section aria-labelledby="adm-h"><h2 id="adm-h">Bridge admissions (${admissions.length})</h2>${admissions.length === 0 ? `<p class="muted">No agent is admitted (hal0 bridge admit NAME, or the form above).</p>` : `<div class="table-wrap"><table>
<thead><tr><th scope="col">Agent</th><th scope="col">Profiles</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col"></th></tr></thead>
<tbody>${admissions.map((t) => admissionRow(t, viewer)).join("\n")}</tbody></table></div>`}</section>
${runsSection(d, viewer)}`;
  return page("Agents", "/agents", body, { viewer });
}

/** At most this many runs on the page, newest first. */
const RUNS_SHOWN = 20;
const LIVE = new Set(["queued", "running"]);

/** The scope a run's prompt, output and Cancel need: they are hal0-agents' (agent_run_list, agent_run_events, agent_run_cancel). */
const RUNS_SCOPE = "mcp:agents";

/** The viewer's token reaches hal0-agents, where runs are read and cancelled (an operator token minted without mcp:agents does not). */
function reachesRuns(viewer: Viewer | undefined): boolean {
  return viewer?.scopes === undefined || viewer.scopes.includes(RUNS_SCOPE);
}

/**
 * 403 `auth.scope_denied` for an operator whose token was minted without
 * mcp:agents: the pages show it no run's prompt or output and cancel none,
 * as it can do neither over /mcp/agents.
 */
export function requireRunsReach(viewer: Viewer | undefined): void {
  if (reachesRuns(viewer)) return;
  throw new ApiError("auth.scope_denied", `the token of operator:${viewer!.name} does not reach ${RUNS_SCOPE}, where Hermes runs are read and cancelled; log in with an operator token that reaches it`, { needed: RUNS_SCOPE, scopes: viewer!.scopes });
}

function runsSection(d: Dispatcher, viewer: Viewer | undefined): string {
  if (!reachesRuns(viewer)) return `<section aria-labelledby="runs-h"><h2 id="runs-h">Runs</h2><p class="muted">Hermes runs are not listed: your operator token does not reach hal0-agents (<code>${RUNS_SCOPE}</code>).</p></section>`;
  const runs = d.runs?.list({ profiles: "all", limit: RUNS_SHOWN }) ?? [];
  const rows = runs.map((r) => `<tr><th scope="row"><a href="/agents/runs/${encodeURIComponent(r.id)}">${esc(r.id)}</a></th><td>${esc(r.profile)}</td><td><span class="badge" data-run-state="${esc(r.state)}">${esc(r.state)}</span></td><td>${esc(r.caller)}</td><td>${time(r.created_at)}</td><td>${esc(clip(redactText(r.prompt), PROMPT_SHOWN))}</td><td data-run-skill-count="${esc(r.id)}">${skillCount(r.skill_changes)}</td>
<td>${LIVE.has(r.state) ? cancelForm(r.id, viewer) : ""}</td></tr>`);
  return `<section aria-labelledby="runs-h"><h2 id="runs-h">Runs (${runs.length})</h2>${runs.length === 0 ? `<p class="muted">No Hermes run yet (agent_run_start over /mcp/agents).</p>` : `<div class="table-wrap"><table>
<thead><tr><th scope="col">Run</th><th scope="col">Profile</th><th scope="col">State</th><th scope="col">Started by</th><th scope="col">Created</th><th scope="col">Prompt</th><th scope="col">Skills changed</th><th scope="col"></th></tr></thead>
<tbody>${rows.join("\n")}</tbody></table></div>`}</section>`;
}

function cancelForm(id: string, viewer: Viewer | undefined): string {
  return `<form method="post" action="/agents/runs/${encodeURIComponent(id)}/cancel">${csrfField(viewer)}<button type="submit">Cancel</button></form>`;
}

/** How much of a run's prompt the runs list shows (its page has the rest). */
const PROMPT_SHOWN = 80;

/**
 * `/agents/runs/{id}`: one run and its newest output (the last 64 KiB, from a
 * line's start, secrets redacted); while it is queued or running the
 * page reloads every 2 s (not with `follow` false: `?follow=off`, which
 * its first link leads to) and offers Cancel. An operator token without
 * mcp:agents is refused (403 `auth.scope_denied`).
 */
export async function runPage(d: Dispatcher, id: string, viewer?: Viewer, follow = true): Promise<string | undefined> {
  requireRunsReach(viewer);
  const run = d.runs?.get(id);
  if (!run) return undefined;
  // Its newest output (the last 64 KiB, from a line's start): a page that reloads to follow a run shows where it is now.
  const tail = d.runs!.tail(id);
  const output = tail.truncated ? tail.text.slice(tail.text.indexOf("\n") + 1) : tail.text;
  const live = LIVE.has(run.state);
  const facts: Array<[string, string]> = [
    ["Profile", esc(run.profile)], ["State", `<span class="badge" data-run-state="${esc(run.state)}">${esc(run.state)}</span>${run.reason ? ` ${esc(run.reason)}` : ""}`],
    ["Started by", esc(run.caller)], ["Created", time(run.created_at)], ["Session", esc(run.session_id ?? "—")],
    ["Exit", esc(run.exit_code ?? run.signal ?? "—")], ["Prompt", esc(redactText(run.prompt))],
    ["Skills changed by the run", skillChangesText(run.skill_changes)],
  ];
  // A reload every 2 s starts the keyboard (and a screen reader) over at the page's top: a link first in the page stops it.
  const href = `/agents/runs/${encodeURIComponent(run.id)}`;
  const following = !live ? "" : follow
    ? `<p data-run-follow="on">This page reloads every 2 s while the run goes on. <a href="${esc(href)}?follow=off">Stop reloading</a></p>\n`
    : `<p data-run-follow="off">This page does not reload. <a href="${esc(href)}">Follow the run</a></p>\n`;
  const body = `${following}<p><a href="/agents">← Agents</a></p>
<dl class="facts">${facts.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join("")}</dl>
${live ? cancelForm(run.id, viewer) : ""}
<h2>Output${tail.truncated ? ` <span class="muted">(its newest 64 KiB; what it printed before is not shown here)</span>` : ""}</h2>
<pre><code data-run-output="${esc(run.id)}">${esc(redactText(output.replace(/\n$/, "")))}</code></pre>`;
  return page(`Run ${run.id}`, "/agents", body, { viewer, refreshS: live && follow ? 2 : undefined });
}

/** How many skills a run added, changed or removed, for the runs list ("—" while not known). */
function skillCount(json: string | null): string {
  if (json === null) return "—";
  const c = JSON.parse(json) as SkillChanges;
  return esc(`${c.changes.length + c.more}${c.complete ? "" : "+"}`);
}

/** What Hermes itself did to the profile's skills/ while the run ran, as the run's record has it. */
function skillChangesText(json: string | null): string {
  if (json === null) return `<span data-run-skills="unknown">not known (the run has not ended, or it did not end under this hal0)</span>`;
  const c = JSON.parse(json) as SkillChanges;
  const note = (c.complete ? "" : " (skills/ was read only in part: bounded)")
    + (c.overlapping && c.overlapping.length > 0 ? ` (runs of the same profile ran meanwhile, and a change may be theirs: ${c.overlapping.join(", ")})` : "");
  if (c.changes.length === 0) return `<span data-run-skills="none">none${esc(note)}</span>`;
  const items = c.changes.map((x) => `<li data-skill-change="${esc(x.change)}">${esc(x.change)} ${esc(x.skill)}</li>`).join("");
  return `<ul data-run-skills="changed">${items}${c.more > 0 ? `<li>and ${c.more} more</li>` : ""}</ul>${esc(note)}`;
}

function admissionRow(t: TokenInfo, viewer: Viewer | undefined): string {
  const profiles = !t.profiles || t.profiles.length === 0 ? "none" : t.profiles.includes("*") ? "all" : t.profiles.join(", ");
  return `<tr><th scope="row">${esc(t.name)}</th><td>${esc(profiles)}</td><td>${time(t.created_at)}</td><td>${t.last_used_at ? time(t.last_used_at) : "never"}</td>
<td><form method="post" action="/agents/revoke/${encodeURIComponent(t.id)}">${csrfField(viewer)}<button type="submit">Revoke</button></form></td></tr>`;
}

function mintedSection(m: Minted): string {
  const config = m.configs[m.client];
  const where = m.client === "claude_code" ? "Run this on the agent's machine:" : m.client === "codex" ? "Add this to ~/.codex/config.toml:" : "Put this in the project's .cursor/mcp.json:";
  return `<section aria-labelledby="minted-h" class="card"><h2 id="minted-h">${esc(CLIENTS[m.client])} config for ${esc(m.name)}</h2>
${(m.warnings ?? []).length === 0 ? "" : `<div role="alert" data-admit-warnings><p><strong>Check the profiles:</strong></p><ul>${m.warnings!.map((w) => `<li>${esc(w)}</li>`).join("")}</ul></div>`}
<p><strong>Shown once.</strong> ${esc(where)}</p><pre><code data-client-config="${esc(m.client)}">${esc(config)}</code></pre></section>`;
}

/** The admit form's fields, checked: the agent's name, its profiles (`*` for every one), the client. */
export function admitForm(form: URLSearchParams): { name: string; profiles: string[]; client: ClientId } {
  const name = (form.get("name") ?? "").trim();
  const list = (form.get("profiles") ?? "").split(",").map((p) => p.trim()).filter(Boolean);
  const client = form.get("client") ?? "claude_code";
  // Checked here, against the field the operator typed in (the token route would name them scopes).
  const bad = list.filter((p) => p !== "*" && !PROFILE_NAME.test(p));
  if (bad.length > 0) {
    throw new ApiError("validation.invalid", `Hermes profiles: ${bad.map((p) => JSON.stringify(p)).join(", ")} ${bad.length === 1 ? "is not a profile name" : "are not profile names"} (letters, digits, - and _, at most 56; names are separated by commas, * for every profile)`, { fields: [{ loc: ["body", "profiles"], msg: "not a profile name", type: "invalid_format" }] });
  }
  if (!Object.hasOwn(CLIENTS, client)) throw new ApiError("validation.invalid", `client is one of ${Object.keys(CLIENTS).join(", ")}`, { fields: [{ loc: ["body", "client"], msg: "unknown client", type: "enum" }] });
  return { name, profiles: list.length === 0 ? ["*"] : list, client: client as ClientId };
}

