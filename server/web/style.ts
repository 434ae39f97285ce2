/**
 * The operator pages' one stylesheet, served same-origin at
 * `/assets/style.css`: system fonts only, fluid to phone width (a long
 * unbroken value, a reason or a path, wraps rather than widen the page), visible focus
 * rings, destructive changes and diff lines colour-coded with a text marker
 * too (never colour alone).
 */
export const STYLE_CSS = `:root { color-scheme: light dark; --fg: #1b1f23; --bg: #fafafa; --card: #fff; --muted: #5b636b; --line: #d0d7de; --accent: #0b5cad; --bad: #b42318; --good: #1a7f37; --warn: #9a6700; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --card: #161b22; --muted: #9198a1; --line: #30363d; --accent: #58a6ff; --bad: #ff7b72; --good: #3fb950; --warn: #d29922; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -999px; top: 0; background: var(--card); padding: .5rem 1rem; z-index: 10; }
.skip:focus { left: .5rem; }
.top { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; padding: .75rem 1rem; border-bottom: 1px solid var(--line); background: var(--card); }
.brand { font-weight: 700; }
.top nav { display: flex; gap: 1rem; flex-wrap: wrap; }
.top nav a[aria-current="page"] { font-weight: 700; text-decoration: none; }
.top .who { margin: 0 0 0 auto; display: flex; gap: .5rem; align-items: center; min-width: 0; overflow-wrap: anywhere; }
main { max-width: 64rem; margin: 0 auto; padding: 1rem; overflow-wrap: break-word; }
main:focus { outline: none; }
h1 { font-size: 1.5rem; margin: .5rem 0 1rem; }
h2 { font-size: 1.2rem; margin: 1.5rem 0 .5rem; }
h3 { font-size: 1.05rem; margin: 0 0 .5rem; overflow-wrap: anywhere; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 1rem; margin: 0 0 1rem; }
.card.decided { opacity: .9; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0 0 .75rem; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
pre { background: var(--bg); border: 1px solid var(--line); border-radius: 6px; padding: .5rem; overflow-x: auto; font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; margin: .25rem 0 .75rem; }
pre.diff .add { color: var(--good); }
pre.diff .del { color: var(--bad); }
pre.diff .ctx { color: var(--muted); }
.badge { display: inline-block; border: 1px solid currentColor; border-radius: 999px; padding: 0 .5rem; font-size: .8rem; margin-left: .25rem; }
.state-pending { color: var(--warn); }
.state-executed, .state-approved, .state-ok, .state-ready, .state-running { color: var(--good); }
.state-failed, .state-denied, .state-stale, .state-expired, .state-fail, .state-error { color: var(--bad); }
.state-warn, .state-starting, .state-warming { color: var(--warn); }
ul.changes { list-style: none; padding: 0; margin: 0 0 .75rem; }
ul.changes > li { border-left: 4px solid var(--line); padding: .25rem .75rem; margin: .5rem 0; }
ul.changes > li.destructive { border-left-color: var(--bad); }
.change-head { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-weight: 600; overflow-wrap: anywhere; }
.destructive-mark { color: var(--bad); font-weight: 700; }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; }
.actions form { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; margin: 0; }
button { font: inherit; padding: .4rem 1rem; border-radius: 6px; border: 1px solid var(--line); background: var(--card); color: var(--fg); cursor: pointer; min-height: 2.5rem; }
button.approve { border-color: var(--good); color: var(--good); }
button.deny { border-color: var(--bad); color: var(--bad); }
input[type="text"], input[type="password"] { font: inherit; padding: .35rem .5rem; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); min-height: 2.5rem; }
table { border-collapse: collapse; width: 100%; }
.table-wrap { overflow-x: auto; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
.muted { color: var(--muted); }
.status { border: 1px solid var(--accent); border-radius: 6px; padding: .5rem .75rem; margin: 0 0 1rem; overflow-wrap: anywhere; }
.status:empty { display: none; }
form.login { display: flex; flex-direction: column; gap: .5rem; max-width: 32rem; }
form.login input { width: 100%; }
details > summary { cursor: pointer; }
svg.spark { display: block; margin: .25rem 0; color: var(--accent); fill: none; stroke: currentColor; stroke-width: 1.5; stroke-linejoin: round; overflow: visible; }
svg.spark circle { fill: currentColor; stroke: none; }
svg.spark .base { stroke: var(--line); stroke-width: 1; }
@media (max-width: 40rem) { dl.facts { grid-template-columns: 1fr; } dl.facts dd { margin-bottom: .25rem; } main { padding: .75rem; } }
`;

/** The pages' icon at `/assets/icon.svg` (so browsers do not ask for a missing /favicon.ico): a dot in the accent colour. */
export const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="#0b5cad"/></svg>
`;
