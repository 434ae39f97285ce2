import { z } from "zod";

/** Whether an http(s) URL names a user or password before its host (`user:password@host`). */
export function carriesCredentials(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.username !== "" || parsed.password !== "";
  } catch {
    return /^https?:\/\/[^/]*@/.test(url);
  }
}

/**
 * An http(s) URL in the tree: a host, no spaces, and no `user:password@`. The tree is
 * read by agents and shown in replies, so a credential never rides in a URL; the file
 * names where it comes from instead (`auth_credential`, `auth_value_env`, `secrets`).
 * The refusal does not quote the URL, so the password it carries is not repeated; editors
 * see the same rule as the JSON Schema's `not` pattern.
 */
export const HttpUrl = z
  .string()
  .regex(/^https?:\/\/[^\s/]+(\/\S*)?$/, "an http:// or https:// URL with a host and no spaces")
  .refine((url) => !carriesCredentials(url), {
    message: "the url carries a user name or password (user:password@host)",
    params: { code: "config.invalid_value", target: "value", detail: "A URL in the tree is read by agents and shown in replies: drop `user:password@` and name where the credential comes from (an upstream's `auth_credential` or `auth_value_env`, an MCP server's `secrets`, an agent server's `auth`)." },
    when: (payload) => payload.issues.length === 0,
  })
  // Editors (Taplo reads the JSON Schema) refuse the same: a `@` before the path.
  .meta({ not: { pattern: "^https?://[^/]*@" } });
