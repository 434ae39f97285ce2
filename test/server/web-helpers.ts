import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { httpCall, type TestServer } from "./harness.js";

/** A logged-in browser's credentials: the `Cookie` header to send and the session's CSRF token the pages render. */
export interface WebSession {
  readonly cookie: string;
  readonly csrf: string;
}

/** The `name=value` of a `Set-Cookie` header (its first pair). */
export function cookiePair(setCookie: string | null): string {
  expect(setCookie, "Set-Cookie").toBeTruthy();
  return setCookie!.split(";")[0]!.trim();
}

/** The `<meta name="csrf-token">` of a page. */
export function csrfMeta(html: string): string {
  const m = /<meta name="csrf-token" content="([^"]+)">/.exec(html);
  expect(m, "the page's csrf-token meta").not.toBeNull();
  return m![1]!;
}

/** Follows a login link (`/login?code=…`, or a full URL) and returns the session it opens, checked against the inbox. */
export async function openLink(s: TestServer, link: string): Promise<WebSession> {
  const path = link.startsWith("http") ? `${new URL(link).pathname}${new URL(link).search}` : link;
  const res = await httpCall(s.url, "GET", path);
  expect(res.status, typeof res.body === "string" ? res.body : JSON.stringify(res.body)).toBe(303);
  expect(res.headers.get("location")).toBe("/");
  const cookie = cookiePair(res.headers.get("set-cookie"));
  const inbox = await httpCall(s.url, "GET", "/", { headers: { cookie } });
  expect(inbox.status).toBe(200);
  return { cookie, csrf: csrfMeta(String(inbox.body)) };
}

/** Logs in as the owner (`<state>/operator.token`) through a one-time code, as `hal0 web` would. */
export async function webLogin(s: TestServer, tokenSecret = s.operator): Promise<WebSession> {
  const token = s.hal0.tokens.verify(tokenSecret);
  expect(token?.kind).toBe("operator");
  return openLink(s, `/login?code=${s.hal0.tokens.loginCode(token!.id, 300)}`);
}

/** A form-encoded POST (what a browser sends with script off). */
export function formPost(s: TestServer, path: string, fields: Record<string, string>, headers: Record<string, string> = {}): ReturnType<typeof httpCall> {
  return httpCall(s.url, "POST", path, { body: new URLSearchParams(fields).toString(), headers: { "content-type": "application/x-www-form-urlencoded", ...headers } });
}

/**
 * Debian's Chromium (`apt-get install chromium`; `.ci/run` installs it), or
 * $HAL0_CHROMIUM, for a browser suite: where it is and whether it is there.
 * Missing, the suite is one failing test in CI (a required service is
 * missing) and a loud notice when run by hand, never a silent skip.
 */
export function chromiumFor(suite: string): { readonly path: string; readonly available: boolean } {
  const path = process.env.HAL0_CHROMIUM ?? "/usr/bin/chromium";
  const available = existsSync(path);
  if (!available) {
    if (process.env.CI) {
      describe(suite, () => {
        it("needs Chromium: a required service is missing", () => {
          throw new Error(`no Chromium at ${path}; .ci/run installs Debian's chromium package`);
        });
      });
    } else {
      console.warn(`[hal0 tests] SKIPPED ${suite}: no Chromium at ${path}. Install it with \`apt-get install chromium\` (or set HAL0_CHROMIUM), then rerun.`);
    }
  }
  return { path, available };
}
