import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Model, ResolvedSlot } from "../../compiler/index.js";
import type { Upstream } from "../../schema/index.js";
import type { BoxService, Liveness } from "../box.js";
import type { Dispatcher } from "../dispatch.js";
import { ApiError } from "../errors.js";
import { reachBase, slotReach } from "../slot-reach.js";
import { checkUrlTarget, MAX_REDIRECTS, normalizeAllowEntry, pinnedLookup, type CheckedTarget } from "../mcp-servers/ssrf.js";
import { CredentialStore, HEADER_VALUE_PATTERN, type CredentialSource } from "./credentials.js";

/**
 * What hal0 needs to reach a provider: the credential store, the server's
 * environment (an upstream's `auth_value_env` is read from it) and the hosts
 * the operator trusts beyond the public internet (`HAL0_UPSTREAM_ALLOW`,
 * `host:port` comma-separated: a LAN box, a loopback proxy).
 */
export interface ProviderServices {
  readonly credentials: CredentialStore;
  readonly env: NodeJS.ProcessEnv;
  readonly allow: readonly string[];
  /** `HAL0_UPSTREAM_ALLOW` entries that are not `host:port`: left out of `allow` (hal0-server.ts warns of them at start). */
  readonly allowIgnored: readonly string[];
}

/**
 * The services for `env` (hal0-server.ts builds them once; a dispatcher made without them gets these of process.env).
 * An allow entry that is not `host:port` (`192.168.1.20`, a port missing) trusts nothing and is left out: kept, the
 * guard would refuse it on every probe, so every provider, public ones and slots too, would read as blocked.
 */
export function providerServices(stateDir: string, env: NodeJS.ProcessEnv): ProviderServices {
  const entries = (env.HAL0_UPSTREAM_ALLOW ?? "").split(",").map((s) => s.trim()).filter(Boolean);
  const valid = (entry: string) => {
    try {
      normalizeAllowEntry(entry);
      return true;
    } catch {
      return false;
    }
  };
  return { credentials: new CredentialStore(stateDir, env), env, allow: entries.filter(valid), allowIgnored: entries.filter((e) => !valid(e)) };
}

export function providersOf(d: Dispatcher): ProviderServices {
  return d.providers ?? providerServices(d.box.options.stateDir, process.env);
}

/** Where a slot answers on this box (a wildcard host is reached on loopback; slotReach is the one rule). */
export function slotBaseUrl(slot: Pick<ResolvedSlot, "spec">): string {
  return `${reachBase(slotReach(slot.spec))}/v1`;
}

/** Where an upstream answers: its url, or its slot's address. */
export function upstreamBaseUrl(up: Upstream, model: Model): string {
  if (up.kind === "remote") return up.url!;
  const slot = model.slots[up.slot_name!]!;
  return slotBaseUrl(slot);
}

/** How an upstream authenticates, without the value: what a list may show. */
export interface AuthView {
  readonly style: Upstream["auth_style"];
  /** `credential`: a stored credential by name; `env`: an environment variable by name. */
  readonly from: "credential" | "env" | null;
  readonly name: string | null;
  /** Whether a value is there to send. */
  readonly present: boolean;
  /** Where a stored credential was found (systemd wins over the state folder). */
  readonly source: CredentialSource | null;
}

export async function authView(up: Upstream, p: ProviderServices): Promise<AuthView> {
  if (up.auth_style === "none") return { style: "none", from: null, name: null, present: false, source: null };
  if (up.auth_credential !== undefined) {
    const found = await p.credentials.read(up.auth_credential);
    return { style: up.auth_style, from: "credential", name: up.auth_credential, present: found?.value !== undefined, source: found?.source ?? null };
  }
  const env = up.auth_value_env!;
  return { style: up.auth_style, from: "env", name: env, present: Boolean(p.env[env]), source: null };
}

/** The auth header an upstream sends, or why it has none to send. */
async function authHeader(up: Upstream, p: ProviderServices): Promise<{ header?: [string, string]; missing?: string }> {
  if (up.auth_style === "none") return {};
  let value: string | undefined;
  let missing: string;
  let from: string;
  if (up.auth_credential !== undefined) {
    const found = await p.credentials.read(up.auth_credential);
    value = found?.value;
    from = `credential ${up.auth_credential}${found?.source === "systemd" ? " (from systemd)" : ""}`;
    missing = found?.unreadable !== undefined
      ? `${from} is there but ${found.unreadable}: nothing is sent`
      : `credential ${up.auth_credential} is not stored (provider_credential_write, or systemd's LoadCredential=${up.auth_credential}:…)`;
  } else {
    value = p.env[up.auth_value_env!];
    from = `environment variable ${up.auth_value_env}`;
    missing = `environment variable ${up.auth_value_env} is not set`;
  }
  if (!value) return { missing };
  // No request could carry it (Node refuses it before a byte is sent): say so, rather than "sent" and ERR_INVALID_CHAR.
  if (!HEADER_VALUE_PATTERN.test(value)) {
    return { missing: `${from} holds a value no header can carry (a control character, a line break or a character beyond Latin-1): nothing is sent` };
  }
  if (up.auth_style === "bearer") return { header: ["authorization", `Bearer ${value}`] };
  return { header: [(up.auth_header ?? "x-api-key").toLowerCase(), value] };
}

/** One probe's answer; never carries the credential. */
export interface ProbeResult {
  readonly url: string;
  readonly auth: "none" | "sent" | "missing";
  readonly timeout_ms: number;
  readonly reachable: boolean;
  readonly ok: boolean;
  readonly status: number | null;
  readonly latency_ms: number | null;
  readonly model_count: number | null;
  /** Redirects followed; the credential went only to hops on the upstream's own origin. */
  readonly redirects?: number;
  readonly error?: string;
}

/**
 * `GET <base>/models` of an upstream, with its credential, behind the SSRF
 * guard (server/mcp-servers/ssrf.ts): a remote upstream is reached only on a
 * public address or a `HAL0_UPSTREAM_ALLOW` host, a slot upstream only at its
 * slot's own address; every redirect hop is checked again, and the
 * credential is sent only while the hop is on the upstream's own origin
 * (scheme, host and port), so a redirect elsewhere never carries it. A hop
 * the guard refuses throws its `mcp.ssrf_blocked` / `mcp.url_invalid`.
 */
export async function probeUpstream(up: Upstream, model: Model, p: ProviderServices, timeoutMs: number, slotRuns: (name: string) => Promise<boolean>): Promise<ProbeResult> {
  const base = upstreamBaseUrl(up, model);
  const own = up.kind === "slot" ? [hostPort(base)] : [];
  const auth = await authHeader(up, p);
  // A slot's port is hal0's only while its runner runs: stopped, any process on the box may listen there. Its credential
  // goes to the runner hal0 started, never to whatever holds the port (the same rule as every read passed on to a runner).
  if (up.kind === "slot" && auth.header && !(await slotRuns(up.slot_name!))) {
    return {
      url: modelsUrl(base), auth: "none", timeout_ms: timeoutMs, reachable: false, ok: false, status: null, latency_ms: null, model_count: null,
      error: `slot ${up.slot_name} is not running: its credential goes only to the runner hal0 started there, not to whatever holds port ${new URL(base).port} now`,
    };
  }
  return probeModels(base, { allow: [...p.allow, ...own], auth, timeoutMs });
}

/** Whether a slot runs (hal0's own runner, as observed once, lazily); a runtime that does not answer runs none. */
export function slotRunning(box: BoxService, model: Model): (name: string) => Promise<boolean> {
  let seen: Promise<Liveness | undefined> | undefined;
  return async (name) => {
    seen ??= box.liveness(model).catch(() => undefined);
    return (await seen)?.get(name)?.running === true;
  };
}

/** `GET <base>/models` of a slot at its own address (no credential). */
export function probeSlot(slot: Pick<ResolvedSlot, "spec">, p: ProviderServices, timeoutMs: number): Promise<ProbeResult> {
  const base = slotBaseUrl(slot);
  return probeModels(base, { allow: [...p.allow, hostPort(base)], auth: {}, timeoutMs });
}

interface ProbeOptions {
  readonly allow: readonly string[];
  readonly auth: { header?: [string, string]; missing?: string };
  readonly timeoutMs: number;
}

async function probeModels(base: string, o: ProbeOptions): Promise<ProbeResult> {
  const url = modelsUrl(base);
  const result = { url, auth: o.auth.header ? "sent" : o.auth.missing ? "missing" : "none", timeout_ms: o.timeoutMs } as const;
  if (o.auth.missing !== undefined) return { ...result, reachable: false, ok: false, status: null, latency_ms: null, model_count: null, error: o.auth.missing };
  const origin = new URL(url).origin;
  const signal = AbortSignal.timeout(o.timeoutMs);
  const started = performance.now();
  let current = url;
  let redirectStatus: number | null = null;
  for (let redirects = 0; ; redirects++) {
    let target: CheckedTarget;
    try {
      // Throws the guard's refusal (a remote on loopback without an allow entry, a redirect to a private address…).
      target = await checkUrlTarget(current, { allow: o.allow, allowInsecureHttp: true });
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      const latency_ms = Math.round(performance.now() - started);
      // A redirect to a URL hal0 does not fetch (file:, a user:password@, too long) is the upstream's answer, not a bad request.
      if (redirects > 0 && err.code === "mcp.url_invalid") {
        return { ...result, reachable: true, ok: false, status: redirectStatus, latency_ms, model_count: null, redirects, error: `redirects to a URL hal0 does not follow: ${err.message}` };
      }
      // A name that does not resolve is an unreachable upstream, not a refusal.
      if (err.code !== "mcp.manifest_fetch_failed") throw err;
      return { ...result, reachable: false, ok: false, status: null, latency_ms, model_count: null, redirects, error: err.message };
    }
    const headers: Record<string, string> = { accept: "application/json", "user-agent": "hal0" };
    if (o.auth.header && target.url.origin === origin) headers[o.auth.header[0]] = o.auth.header[1];
    let reply: Reply;
    try {
      reply = await requestOnce(target, headers, signal);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      return { ...result, reachable: false, ok: false, status: null, latency_ms: Math.round(performance.now() - started), model_count: null, redirects,
        error: signal.aborted ? `no answer within ${o.timeoutMs} ms` : (code ?? (err as Error).message) };
    }
    const latency_ms = Math.round(performance.now() - started);
    const next = reply.location === undefined ? null : URL.parse(reply.location, target.url.href);
    if (next === null || redirects === MAX_REDIRECTS) {
      const body = safeJson(reply.body) as { data?: unknown; models?: unknown } | undefined;
      const list = Array.isArray(body?.data) ? body.data : Array.isArray(body?.models) ? body.models : undefined;
      const ok = reply.status >= 200 && reply.status < 300;
      return { ...result, reachable: true, ok, status: reply.status, latency_ms, model_count: ok ? (list?.length ?? null) : null, redirects,
        ...(reply.location !== undefined ? { error: next === null ? `redirects to ${reply.location}, which is not a URL` : `more than ${MAX_REDIRECTS} redirects` } : {}) };
    }
    current = next.href;
    redirectStatus = reply.status;
  }
}

/**
 * `<base>/models`: `/models` goes on the path, and a query the base carries (Azure OpenAI's `?api-version=…`)
 * stays the query; written after it, `/models` would become part of the query's last value.
 */
function modelsUrl(base: string): string {
  const u = new URL(base);
  u.pathname = `${u.pathname.replace(/\/+$/, "")}/models`;
  return u.href;
}

/** `host:port` of a URL as the guard's allow list writes it. */
function hostPort(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port === "" ? (u.protocol === "https:" ? 443 : 80) : u.port}`;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

interface Reply {
  readonly status: number;
  readonly body: string;
  readonly location?: string;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** A model list can be long (OpenRouter's is megabytes): read at most this much. */
const MAX_LIST_BYTES = 16 * 1024 * 1024;

/** One GET to the checked addresses (pinned: no second DNS answer), any status; a body over the limit is cut, not an error. */
function requestOnce(target: CheckedTarget, headers: Record<string, string>, signal: AbortSignal): Promise<Reply> {
  return new Promise<Reply>((resolve, reject) => {
    const send = target.url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(target.url, { method: "GET", agent: false, signal, lookup: pinnedLookup(target.addresses), headers }, (res) => {
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (REDIRECTS.has(status) && location !== undefined) {
        res.resume();
        resolve({ status, body: "", location });
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_LIST_BYTES) chunks.push(chunk);
        else req.destroy();
      });
      const done = () => resolve({ status, body: size <= MAX_LIST_BYTES ? Buffer.concat(chunks).toString("utf8") : "" });
      res.on("end", done);
      res.on("close", done);
      res.on("error", (err) => (size > MAX_LIST_BYTES ? done() : reject(err)));
    });
    req.on("error", (err) => reject(err));
    req.end();
  });
}
