/**
 * Small HTML helpers for the operator pages (server-rendered; the inbox adds
 * one same-origin module script, and every page reads fine without it).
 * Invariant: every value that reaches the markup goes through `esc`
 * (text and attribute values alike); markup is only ever built from literals.
 */

/**
 * `&`, `<`, `>`, `"` and `'` as entities: safe in text and in quoted attribute values.
 * Invisible characters but tab, line feed and carriage return are shown as
 * `showInvisible` writes them.
 */
export function esc(value: unknown): string {
  return showInvisible(String(value ?? "").replace(/[&<>"']/g, (c) => ENTITIES[c]!), true);
}

/**
 * `text` with each control character (but tab, line feed and carriage return
 * with `keepLayout`) and invisible formatting character (a bidi override or
 * isolate, a zero-width one) written as `\u202e`, so no value an agent chose
 * (a summary, an argument, a file's line) can redraw, reorder or hide what an
 * operator reads: on the pages (`esc`) and in the terminal's approval list.
 */
export function showInvisible(text: string, keepLayout = false): string {
  return text.replace(keepLayout ? /[^\P{Cc}\t\n\r]|\p{Cf}/gu : /[\p{Cc}\p{Cf}]/gu, codePoint);
}

function codePoint(c: string): string {
  return `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`;
}

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/**
 * `text` cut to at most `max` UTF-16 units, the last of them `…` when anything was cut;
 * never between the two halves of a character (an emoji, say), which would show as �.
 */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = /[\uD800-\uDBFF]/.test(text[max - 2] ?? "") ? max - 2 : max - 1;
  return `${text.slice(0, end)}…`;
}

/** A value as indented JSON inside a `<pre>`, escaped. */
export function jsonBlock(value: unknown, label?: string): string {
  return `<pre class="json"${label ? ` aria-label="${esc(label)}"` : ""}>${esc(JSON.stringify(value ?? null, null, 2))}</pre>`;
}

/** A `<time>` element for an ISO timestamp (the text is the timestamp itself, UTC, so the page needs no script). */
export function time(iso: string | null | undefined): string {
  if (!iso) return "—";
  return `<time datetime="${esc(iso)}">${esc(iso.replace("T", " ").replace(/\.\d+Z$/, "Z"))}</time>`;
}

/** The pages' navigation entries: path and label, in display order. */
const NAV: ReadonlyArray<readonly [string, string]> = [["/", "Inbox"], ["/status", "Box status"], ["/agents", "Agents"]];

/**
 * Who is looking at a page: the operator's name and, for a logged-in
 * browser (the session cookie), the session's CSRF token that every form
 * carries and the inbox script sends. A bearer or auth-off caller has none.
 */
export interface Viewer {
  readonly name: string;
  readonly csrf?: string;
  /** The surfaces the operator's token reaches, when it was minted narrower than every one (Caller.scopes). */
  readonly scopes?: readonly string[];
}

/** The hidden `csrf` field every state-changing form carries (nothing without a session). */
export function csrfField(viewer: Viewer | undefined): string {
  return viewer?.csrf ? `<input type="hidden" name="csrf" value="${esc(viewer.csrf)}">` : "";
}

export interface PageOptions {
  /** The path of a same-origin ES module the page loads (the only scripts the CSP allows). */
  readonly script?: string;
  /** Who is logged in: named in the header, with a Log out form for a session; its CSRF token in `<meta name="csrf-token">`. */
  readonly viewer?: Viewer;
  /** false: no navigation (the login page). */
  readonly nav?: boolean;
  /** Reload the page every this many seconds (a running run's output): a meta refresh, no script. */
  readonly refreshS?: number;
}

/**
 * One whole page: doctype, viewport meta, the same-origin stylesheet, a skip
 * link to `#main`, the navigation (the current entry marked with
 * aria-current), who is logged in, and `body` as the main content. `title`
 * is escaped; `body` is markup the caller built with `esc`.
 */
export function page(title: string, current: string, body: string, options: PageOptions = {}): string {
  const { script, viewer } = options;
  const nav = options.nav === false ? "" : `<nav aria-label="Pages">${NAV.map(([href, label]) => `<a href="${href}"${href === current ? ' aria-current="page"' : ""}>${label}</a>`).join("")}</nav>`;
  const who = !viewer ? "" : viewer.csrf
    ? `<form class="who" method="post" action="/logout">${csrfField(viewer)}<span class="muted">${esc(viewer.name)}</span> <button type="submit">Log out</button></form>`
    : `<span class="who muted">${esc(viewer.name)}</span>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${viewer?.csrf ? `<meta name="csrf-token" content="${esc(viewer.csrf)}">\n` : ""}<title>${esc(title)} · hal0</title>
${options.refreshS ? `<meta http-equiv="refresh" content="${Math.round(options.refreshS)}">\n` : ""}<link rel="stylesheet" href="/assets/style.css">
<link rel="icon" href="/assets/icon.svg" type="image/svg+xml">
${script ? `<script type="module" src="${esc(script)}"></script>\n` : ""}</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><span class="brand">hal0</span>${nav}${who}</header>
<main id="main" tabindex="-1">
<h1>${esc(title)}</h1>
${body}
</main>
</body>
</html>
`;
}

/** One line of a diff: kept (` `), removed (`-`) or added (`+`). */
export interface DiffLine {
  readonly op: " " | "-" | "+";
  readonly text: string;
}

/**
 * A line diff of two texts by longest common subsequence (null = the file is
 * absent). Deterministic: on ties removals come before additions. O(n·m) —
 * fine for config files; past 4000×4000 lines it falls back to all removed
 * then all added.
 */
export function lineDiff(before: string | null, after: string | null): DiffLine[] {
  const a = splitLines(before);
  const b = splitLines(after);
  if (a.length * b.length > 16_000_000) return [...a.map((text) => ({ op: "-" as const, text })), ...b.map((text) => ({ op: "+" as const, text }))];
  const lcs: number[][] = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
    }
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) {
      out.push({ op: " ", text: a[i]! });
      i++;
      j++;
    } else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) out.push({ op: "-", text: a[i++]! });
    else out.push({ op: "+", text: b[j++]! });
  }
  while (i < a.length) out.push({ op: "-", text: a[i++]! });
  while (j < b.length) out.push({ op: "+", text: b[j++]! });
  return out;
}

function splitLines(text: string | null): string[] {
  if (text === null || text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/** A diff as a `<pre>`: one escaped line each, prefixed `+`/`-`/` `, added and removed lines in their own classes. */
export function diffBlock(file: string, lines: readonly DiffLine[]): string {
  const cls = { " ": "ctx", "-": "del", "+": "add" } as const;
  const body = lines.map((l) => `<span class="${cls[l.op]}">${esc(`${l.op} ${l.text}`)}</span>`).join("\n");
  return `<pre class="diff" aria-label="${esc(`changes to ${file}`)}">${body}</pre>`;
}
