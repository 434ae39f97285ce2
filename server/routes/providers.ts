import { z } from "zod";
import type { Model } from "../../compiler/index.js";
import { SlotName } from "../../schema/index.js";
import { ApiError } from "../errors.js";
import type { BoxService } from "../box.js";
import { authView, probeSlot, probeUpstream, providersOf, slotBaseUrl, slotRunning, upstreamBaseUrl, type AuthView, type ProbeResult, type ProviderServices } from "../providers/probe.js";
import { HEADER_VALUE_PATTERN } from "../providers/credentials.js";
import { defineRoute } from "../route.js";
import { queryInt } from "../query.js";

const Name = z.strictObject({ name: SlotName });
const ListQuery = z.strictObject({
  /** `false`: no request to any provider (health `unprobed`), only what the tree and the credential store say. */
  probe: z.enum(["true", "false"]).default("true").transform((v) => v === "true"),
  timeout_ms: queryInt(50, 10_000, 1500),
});
/**
 * A credential is one header value: printable, no line break (a newline would start another header), and Latin-1 only —
 * a header carries bytes, so a character beyond U+00FF ("ключ") could be stored but never sent.
 */
const CredentialBody = z.strictObject({
  value: z.string().min(1).max(8192)
    .regex(HEADER_VALUE_PATTERN, "a credential is sent as a header value: printable Latin-1 characters only (U+0020 to U+007E, U+00A0 to U+00FF), no control characters or line breaks")
    // A header value's spaces at either end are not part of it (HTTP trims them), so " " or "key " could be stored but never arrive as stored.
    .regex(/^[^ ].*[^ ]$|^[^ ]$/, "a credential has no space at either end: a header value is trimmed on the way, so it would not arrive as stored"),
});

type Health = "ok" | "error" | "unreachable" | "blocked" | "missing_credential" | "disabled" | "unprobed";

/** One OpenAI-compatible provider: never a credential value, only where it comes from and whether it is there. */
interface Provider {
  readonly name: string;
  readonly kind: "remote" | "slot";
  /** `upstream`: a `[[upstream]]` of upstreams.toml; `slot`: a local slot no upstream names. */
  readonly source: "upstream" | "slot";
  readonly base_url: string;
  readonly enabled: boolean;
  readonly slot_name: string | null;
  readonly catalog_id: string | null;
  readonly auth: AuthView | null;
  readonly health: Health;
  readonly status: number | null;
  readonly latency_ms: number | null;
  readonly model_count: number | null;
  readonly error?: string;
  readonly error_code?: string;
}

/**
 * Providers: every upstream of upstreams.toml and every local slot as an
 * OpenAI-compatible endpoint, with health and model count from one
 * `GET <base>/models` each (the same guarded probe as upstream_test); and the
 * store of the credentials upstreams name with `auth_credential`.
 */
export const providerRoutes = [
  defineRoute({
    method: "GET", path: "/api/providers", kind: "read", query: ListQuery, tools: ["provider_list"], listKey: "providers",
    summary: "Remote upstreams and local slots as OpenAI-compatible providers: base URL, auth source (never the value), health and model count",
    handle: async ({ query, box, services }) => {
      const model = await box.model();
      return listProviders(box, model, providersOf(services), query.probe ? query.timeout_ms : undefined);
    },
  }),
  defineRoute({
    method: "POST", path: "/api/providers/{name}/credentials", kind: "action", params: Name, body: CredentialBody, secretBody: true,
    tools: ["provider_credential_write"],
    summary: "Store a credential as <state>/credentials/<name> (0600) for upstreams' auth_credential; the reply has its fingerprint, never the value",
    precheck: ({ params, services }) => providersOf(services).credentials.checkWritable(params.name),
    handle: async ({ params, body, box, services }) => {
      const { fingerprint, path } = await providersOf(services).credentials.write(params.name, body.value);
      const usedBy = (await box.model()).upstreams.filter((u) => u.auth_credential === params.name).map((u) => u.name);
      return { name: params.name, stored: true, source: "state", file: path, fingerprint, used_by: usedBy };
    },
  }),
];

async function listProviders(box: BoxService, model: Model, p: ProviderServices, timeoutMs: number | undefined): Promise<Provider[]> {
  const named = new Set(model.upstreams.filter((u) => u.kind === "slot").map((u) => u.slot_name));
  const slotRuns = slotRunning(box, model);
  const fromUpstreams = model.upstreams.map(async (up): Promise<Provider> => {
    const slot = up.kind === "slot" ? model.slots[up.slot_name!] : undefined;
    const enabled = up.enabled && (slot?.enabled ?? true);
    const row = {
      name: up.name, kind: up.kind, source: "upstream", base_url: upstreamBaseUrl(up, model), enabled,
      slot_name: up.slot_name ?? null, catalog_id: up.catalog_id ?? null, auth: await authView(up, p),
    } as const;
    return { ...row, ...(await healthOf(enabled, timeoutMs, (t) => probeUpstream(up, model, p, t, slotRuns))) };
  });
  const fromSlots = Object.keys(model.slots).sort().filter((name) => !named.has(name)).map(async (name): Promise<Provider> => {
    const slot = model.slots[name]!;
    const row = { name, kind: "slot", source: "slot", base_url: slotBaseUrl(slot), enabled: slot.enabled, slot_name: name, catalog_id: null, auth: null } as const;
    return { ...row, ...(await healthOf(slot.enabled, timeoutMs, (t) => probeSlot(slot, p, t))) };
  });
  return Promise.all([...fromUpstreams, ...fromSlots]);
}

type HealthFields = Pick<Provider, "health" | "status" | "latency_ms" | "model_count" | "error" | "error_code">;

/** A provider's health from its probe; a refusal of the SSRF guard is `blocked` with its code, not a failed list. */
async function healthOf(enabled: boolean, timeoutMs: number | undefined, probe: (timeoutMs: number) => Promise<ProbeResult>): Promise<HealthFields> {
  const none = { status: null, latency_ms: null, model_count: null };
  if (!enabled) return { health: "disabled", ...none };
  if (timeoutMs === undefined) return { health: "unprobed", ...none };
  let r: ProbeResult;
  try {
    r = await probe(timeoutMs);
  } catch (err) {
    if (err instanceof ApiError) return { health: "blocked", ...none, error: err.message, error_code: err.code };
    throw err;
  }
  const health: Health = r.auth === "missing" ? "missing_credential" : !r.reachable ? "unreachable" : r.ok ? "ok" : "error";
  return { health, status: r.status, latency_ms: r.latency_ms, model_count: r.model_count, ...(r.error === undefined ? {} : { error: r.error }) };
}
