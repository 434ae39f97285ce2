/**
 * The approval inbox's only script (browser code, served at
 * `/assets/inbox.js`; self-contained, no imports). It makes the
 * server-rendered inbox live and its Approve / Deny forms work in place:
 *
 * - Listens to `/api/agent/approvals/events`; on every event it fetches `/`
 *   again and swaps in the server's fresh `#inbox-live` region (the rendering
 *   stays the server's; this script never builds approval markup).
 * - Intercepts submit on `form[data-decision]`: posts JSON to the REST route
 *   `/api/agent/approvals/{id}/approve|deny` (`{}` to approve, `{reason}` to
 *   deny when one is typed — what the deny route's strict body accepts) with
 *   the session's CSRF token in `X-CSRF-Token` (read from the page's
 *   `<meta name="csrf-token">`, and again from each re-render's: a login in
 *   another tab replaces the session; the session cookie goes along,
 *   same-origin only), disables that card's buttons while in flight, reports the
 *   outcome in `#inbox-status` (`aria-live="polite"`) and re-renders.
 *   (Without this script the forms post form-encoded to the page routes.)
 * - `body[data-inbox-live="connected"]` once the stream's snapshot arrived
 *   (every later change then reaches the page), `"reconnecting"` after an
 *   error, `"stopped"` when the stream was refused (the session ended; the
 *   browser will not retry), said in `#inbox-status` too, since the page no
 *   longer follows the queue; `data-inbox-renders` counts finished re-renders.
 *
 * Invariants: one re-render at a time (events arriving meanwhile fold into a
 * single follow-up); typed deny reasons, the cards' opened `<details>` and
 * in-flight disabling survive a re-render; focus inside the swapped region moves to the same element when
 * it still exists (a decision form's control, or a card's link or summary),
 * the caret of a text field where it was, else to the status region, which
 * says why.
 */

const LIVE_ID = "inbox-live";
const STATUS_ID = "inbox-status";
/**
 * The session's CSRF token (none when the page was read with a bearer
 * token): the page's, then each re-render's, since logging in again in
 * another tab replaces the session the page was rendered for.
 */
let csrf = document.querySelector<HTMLMetaElement>('meta[name="csrf-token"]')?.content ?? "";

/**
 * Takes the fresh page's CSRF token, when it is another session's: the
 * script's and every form's outside the live region (Log out), so that no
 * control keeps a token the server no longer takes.
 */
function adoptCsrf(fresh: Document): void {
  const token = fresh.querySelector<HTMLMetaElement>('meta[name="csrf-token"]')?.content ?? "";
  if (token === "" || token === csrf) return;
  csrf = token;
  document.querySelector<HTMLMetaElement>('meta[name="csrf-token"]')?.setAttribute("content", token);
  for (const input of document.querySelectorAll<HTMLInputElement>('input[type="hidden"][name="csrf"]')) input.value = token;
}
const EVENTS = ["snapshot", "enqueued", "approved", "denied", "executed", "failed", "expired", "stale"] as const;

/** Approval ids whose decision is being posted. */
const inFlight = new Set<string>();
let rendering = false;
let again = false;

function status(text: string, focus: boolean): void {
  const region = document.getElementById(STATUS_ID);
  if (!region) return;
  region.textContent = text;
  if (focus) region.focus();
}

/**
 * A key naming a focused element across re-renders: a decision form's control
 * by its form's approval and decision and its name or tag; anything else in a
 * card (a plan's link, a `<summary>`) by the card's id, its tag and its place
 * among the card's elements of that tag.
 */
function focusKey(el: Element | null): string | null {
  const form = el?.closest("form[data-decision]");
  if (el && form instanceof HTMLFormElement) return `form:${form.dataset.approval ?? ""}/${form.dataset.decision ?? ""}/${el.getAttribute("name") ?? el.tagName}`;
  const card = el?.closest("article[id]");
  if (!el || !card) return null;
  return `card:${card.id}/${cardState(card)}/${el.tagName}/${[...card.getElementsByTagName(el.tagName)].indexOf(el)}`;
}

function findFocus(root: Element, key: string): HTMLElement | null {
  if (key.startsWith("form:")) {
    for (const el of root.querySelectorAll<HTMLElement>("form[data-decision] input, form[data-decision] button")) {
      if (focusKey(el) === key) return el;
    }
    return null;
  }
  const [, id, state, tag, index] = /^card:(.*)\/(pending|decided)\/([A-Z0-9]+)\/(\d+)$/.exec(key) ?? [];
  // A card decided since is another card: the focus does not move into it unannounced.
  const card = [...root.querySelectorAll("article[id]")].find((a) => a.id === id && cardState(a) === state);
  const el = card?.getElementsByTagName(tag ?? "")[Number(index)];
  return el instanceof HTMLElement ? el : null;
}

function cardState(card: Element): "pending" | "decided" {
  return card.classList.contains("pending") ? "pending" : "decided";
}

/** A `<details>` of a card by the card's id and state and its place among the card's details. */
function detailsKey(details: HTMLDetailsElement): string {
  const card = details.closest("article[id]")!;
  return `${card.id}/${cardState(card)}/${[...card.querySelectorAll("details")].indexOf(details)}`;
}

/** The approval a focus key names (its card or its form's). */
function approvalOfKey(key: string | null): string {
  return key === null ? "" : (/^(?:form|card):([^/]*)\//.exec(key)?.[1] ?? "");
}

function applyInFlight(root: ParentNode): void {
  for (const form of root.querySelectorAll<HTMLFormElement>("form[data-decision]")) {
    const busy = inFlight.has(form.dataset.approval ?? "");
    for (const b of form.querySelectorAll("button")) b.disabled = busy;
  }
}

/** Fetches `/` and swaps in its `#inbox-live`; coalesces calls made while one runs. */
async function rerender(): Promise<void> {
  if (rendering) {
    again = true;
    return;
  }
  rendering = true;
  try {
    do {
      again = false;
      const res = await fetch("/", { headers: { accept: "text/html" }, cache: "no-store", credentials: "same-origin" });
      if (res.status === 401) throw new Error("the session ended (log in again)");
      if (!res.ok) throw new Error(`the inbox answered ${res.status}`);
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const fresh = doc.getElementById(LIVE_ID);
      const live = document.getElementById(LIVE_ID);
      if (!fresh || !live) throw new Error("the inbox page has no live region");
      const active = document.activeElement;
      const hadFocus = active !== null && live.contains(active);
      const key = hadFocus ? focusKey(active) : null;
      // Where the caret was in a text field (a reason being typed), so that typing goes on where it stopped.
      const caret = active instanceof HTMLInputElement ? { start: active.selectionStart, end: active.selectionEnd, direction: active.selectionDirection ?? undefined } : null;
      const reasons = new Map<string, string>();
      for (const input of live.querySelectorAll<HTMLInputElement>('form[data-decision="deny"] input[name="reason"]')) {
        const id = input.closest<HTMLFormElement>("form")?.dataset.approval;
        if (id && input.value !== "") reasons.set(id, input.value);
      }
      // The <details> the operator opened (a plan's before → after, the whole plan) stay open: by card and place.
      const opened = new Set([...live.querySelectorAll<HTMLDetailsElement>("article[id] details[open]")].map(detailsKey));
      const adopted = document.importNode(fresh, true);
      for (const details of adopted.querySelectorAll<HTMLDetailsElement>("article[id] details")) {
        if (opened.has(detailsKey(details))) details.open = true;
      }
      for (const input of adopted.querySelectorAll<HTMLInputElement>('form[data-decision="deny"] input[name="reason"]')) {
        const kept = reasons.get(input.closest<HTMLFormElement>("form")?.dataset.approval ?? "");
        if (kept !== undefined) input.value = kept;
      }
      applyInFlight(adopted);
      live.replaceWith(adopted);
      adoptCsrf(doc);
      if (hadFocus) {
        const same = key ? findFocus(adopted, key) : null;
        if (same) {
          same.focus();
          if (caret && same instanceof HTMLInputElement && caret.start !== null && caret.end !== null) same.setSelectionRange(caret.start, caret.end, caret.direction);
        } else {
          // Its card is gone (decided or expired elsewhere): the status region says so and takes the focus, never the page's top.
          const id = approvalOfKey(key);
          status(id === "" ? "The inbox changed where you were." : `${id} is no longer waiting for a decision: see Recently decided.`, true);
        }
      }
      document.body.dataset.inboxRenders = String(Number(document.body.dataset.inboxRenders ?? "0") + 1);
    } while (again);
  } catch (err) {
    status(`Could not refresh the inbox: ${err instanceof Error ? err.message : String(err)}. Reload the page.`, false);
  } finally {
    rendering = false;
  }
}

/** The outcome of a decision post, in words: the approval's state, or the error envelope's message. */
async function outcome(res: Response, id: string): Promise<string> {
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    return `${id}: the server answered ${res.status} without a JSON body`;
  }
  const b = body as { approval?: { state?: string; error?: { message?: string } | null }; error?: { code?: string; message?: string } };
  if (b.approval?.state) return `${id}: ${b.approval.state}${b.approval.error?.message ? ` — ${b.approval.error.message}` : ""}`;
  if (b.error) return `${id}: refused — ${b.error.message ?? b.error.code ?? `status ${res.status}`}`;
  return `${id}: the server answered ${res.status}`;
}

async function decide(form: HTMLFormElement): Promise<void> {
  const id = form.dataset.approval ?? "";
  const deny = form.dataset.decision === "deny";
  if (inFlight.has(id)) return;
  const reason = deny ? (form.querySelector<HTMLInputElement>('input[name="reason"]')?.value ?? "").trim() : "";
  inFlight.add(id);
  applyInFlight(document);
  status(`${deny ? "Denying" : "Approving"} ${id}…`, false);
  let message: string;
  try {
    const res = await fetch(`/api/agent/approvals/${encodeURIComponent(id)}/${deny ? "deny" : "approve"}`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json", accept: "application/json", ...(csrf === "" ? {} : { "x-csrf-token": csrf }) },
      body: JSON.stringify(deny && reason !== "" ? { reason } : {}),
    });
    message = await outcome(res, id);
  } catch (err) {
    message = `${id}: the request failed — ${err instanceof Error ? err.message : String(err)}`;
  }
  inFlight.delete(id);
  status(message, true);
  await rerender();
  applyInFlight(document);
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.matches("form[data-decision]")) return;
  event.preventDefault();
  void decide(form);
});

const source = new EventSource("/api/agent/approvals/events");
for (const type of EVENTS) {
  source.addEventListener(type, () => {
    if (type === "snapshot") document.body.dataset.inboxLive = "connected";
    void rerender();
  });
}
source.addEventListener("error", () => {
  // A dropped stream reconnects by itself; one refused (the session ended, logged out in another tab) stays closed.
  if (source.readyState === EventSource.CLOSED) {
    document.body.dataset.inboxLive = "stopped";
    status("Live updates stopped: the server refused the inbox's event stream (the session may have ended). Reload the page.", false);
  } else document.body.dataset.inboxLive = "reconnecting";
});
