import { z } from "zod";
import { EnvName, SlotName } from "./names.js";
import { HttpUrl } from "./url.js";
import { whenValid } from "./when.js";

/** `upstreams.toml`: `[[upstream]]` remote OpenAI-compatible endpoints, or local slots. */

export const UPSTREAM_KINDS = ["remote", "slot"] as const;
export const AUTH_STYLES = ["bearer", "header", "none"] as const;
export const WARMUP_STRATEGIES = ["none", "lazy", "eager"] as const;
/** An HTTP field name (RFC 9110's token), at most 64 characters. */
export const HEADER_NAME_PATTERN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/;
export const CATALOG_IDS = ["openai", "anthropic", "openrouter", "google_ai_studio", "ollama"] as const;


export const Upstream = z
  .strictObject({
    name: SlotName,
    kind: z.enum(UPSTREAM_KINDS).default("remote"),
    slot_name: SlotName.optional(),
    url: HttpUrl.optional(),
    catalog_id: z.enum(CATALOG_IDS).optional(),
    auth_style: z.enum(AUTH_STYLES).default("none"),
    /** Name of the environment variable holding the credential; never the value. */
    auth_value_env: EnvName.optional(),
    /**
     * Name of a stored credential (`hal0 serve`'s `$CREDENTIALS_DIRECTORY/<name>`, else
     * `<state>/credentials/<name>`, written by provider_credential_write); never the value.
     */
    auth_credential: SlotName.optional(),
    /**
     * The header an `auth_style = "header"` credential is sent in (default `x-api-key`): an HTTP field name, so a
     * space or a line break (which no request can carry) is refused here, not by every request that would send it.
     */
    auth_header: z.string().regex(HEADER_NAME_PATTERN, "an HTTP header name: 1–64 of ASCII letters, digits and !#$%&'*+-.^_`|~ (no spaces, no colon)").optional(),
    timeout_seconds: z.int().min(1).max(3600).default(300),
    warmup_strategy: z.enum(WARMUP_STRATEGIES).default("none"),
    enabled: z.boolean().default(true),
    advertise_models: z.boolean().default(true),
    model_filters: z
      .strictObject({
        models: z.array(z.string()).default([]),
        include: z.array(z.string()).default([]),
        exclude: z.array(z.string()).default([]),
      })
      .prefault({}),
  })
  // Each rule runs when the keys it reads are valid, so an entry with several problems reports them all at once.
  .superRefine((u, ctx) => {
    if (u.kind === "slot" && u.slot_name === undefined) {
      ctx.addIssue({ code: "custom", path: ["kind"], message: "an upstream of kind \"slot\" needs slot_name", params: { code: "upstream.slot_name_required", detail: "An upstream of kind \"slot\" routes to a local slot: add `slot_name = \"<slot>\"`." } });
    }
  }, { when: whenValid("kind", "slot_name") })
  .superRefine((u, ctx) => {
    if (u.kind === "remote" && u.url === undefined) {
      ctx.addIssue({ code: "custom", path: ["kind"], message: "a remote upstream needs url", params: { code: "upstream.url_required", detail: "A remote upstream is reached at its url: add `url = \"https://…\"`." } });
    }
  }, { when: whenValid("kind", "url") })
  .superRefine((u, ctx) => {
    if (u.auth_style !== "none" && u.auth_value_env === undefined && u.auth_credential === undefined) {
      ctx.addIssue({ code: "custom", path: ["auth_style"], message: `auth_style "${u.auth_style}" needs auth_credential or auth_value_env`, params: { code: "upstream.auth_env_required", detail: "Name the stored credential in `auth_credential` (provider_credential_write stores it) or the environment variable that holds it in `auth_value_env`; the value never goes in the tree." } });
    }
  }, { when: whenValid("auth_style", "auth_value_env", "auth_credential") })
  // One place a credential comes from: with both, which one hal0 sends would be a guess.
  .superRefine((u, ctx) => {
    if (u.auth_value_env !== undefined && u.auth_credential !== undefined) {
      ctx.addIssue({ code: "custom", path: ["auth_credential"], message: "auth_credential and auth_value_env are both set", params: { code: "upstream.auth_source_conflict", detail: "A credential comes from one place: keep `auth_credential` (a stored credential) or `auth_value_env` (an environment variable), not both." } });
    }
  }, { when: whenValid("auth_value_env", "auth_credential") })
  // The four rules above, for editors (Taplo reads the JSON Schema); kind defaults to "remote".
  .meta({
    allOf: [
      { if: { properties: { kind: { const: "slot" } }, required: ["kind"] }, then: { required: ["slot_name"] }, else: { required: ["url"] } },
      { if: { properties: { auth_style: { enum: AUTH_STYLES.filter((s) => s !== "none") } }, required: ["auth_style"] }, then: { anyOf: [{ required: ["auth_value_env"] }, { required: ["auth_credential"] }] } },
      { not: { required: ["auth_value_env", "auth_credential"] } },
    ],
  });
export type Upstream = z.infer<typeof Upstream>;

export const UpstreamsFile = z.strictObject({
  upstream: z.array(Upstream).default([]),
});
