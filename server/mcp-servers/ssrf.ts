import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from "node:dns";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { ApiError } from "../errors.js";

/**
 * The SSRF guard for fetches hal0 makes on a caller's behalf (today: manifest
 * URLs behind `GET /api/mcp/resolve`). A URL is fetched only when its scheme is
 * https (http with `allowInsecureHttp`), its host is no local name, and every
 * address its name resolves to is public; the connection then goes to exactly
 * the address that was checked, and every redirect hop is checked again.
 *
 * What it does not guard: urls of installed servers (the operator chose them;
 * a LAN or loopback server is legitimate) and what `npx`/`uvx`/`docker` fetch.
 */

/** The classifier's verdict on one address; `range` names the reason (`loopback`, `private`, `public`…). */
export interface AddressVerdict {
  readonly blocked: boolean;
  readonly range: string;
}

/** One address a name resolves to; `family` is 4 or 6. */
export interface ResolvedAddress {
  readonly address: string;
  readonly family: number;
}

/** Resolves a host name (never an IP literal) to every address it has, in resolver order. */
export type LookupFn = (host: string) => Promise<ResolvedAddress[]>;

/** How strict {@link checkUrlTarget} is; the defaults are the safe ones. */
export interface SsrfOptions {
  /** Name resolution; default `dns.promises.lookup(host, {all: true, verbatim: true})`. Tests inject one. */
  readonly lookup?: LookupFn;
  /**
   * `host:port` targets the operator trusts (an internal registry, a LAN box): a URL whose
   * host and port (the scheme's default when absent) equal an entry exactly skips the
   * local-name and address checks. The ONLY way to make hal0 fetch from an internal host.
   * IPv6 hosts are written bracketed: `[fd00::5]:443`.
   */
  readonly allow?: readonly string[];
  /** Also fetch `http://` URLs (default false: https only). Plain http is refused with mcp.url_invalid, not as SSRF. */
  readonly allowInsecureHttp?: boolean;
}

/** A URL that passed {@link checkUrlTarget}: what to connect to. */
export interface CheckedTarget {
  readonly url: URL;
  /** The host without IPv6 brackets or a trailing dot, lowercase. */
  readonly host: string;
  readonly port: number;
  /** The addresses the connection may use, in resolver order; each passed the classifier unless `trusted`. */
  readonly addresses: readonly ResolvedAddress[];
  /** `host:port` is on the allow list, so the addresses were not classified. */
  readonly trusted: boolean;
}

/** {@link guardedFetch}'s limits on top of the guard's. */
export interface GuardedFetchOptions extends SsrfOptions {
  /** Deadline for the whole fetch, every hop included; default 10 000 ms. */
  readonly timeoutMs?: number;
}

/** A 2xx reply that {@link guardedFetch} read in full. */
export interface FetchedDocument {
  /** The URL that answered (after redirects). */
  readonly url: string;
  readonly status: number;
  /** Lowercase names, sorted; repeated headers joined with `, `. */
  readonly headers: Readonly<Record<string, string>>;
  /** The body decoded as UTF-8. */
  readonly body: string;
}

/** Longest URL hal0 will check or fetch. */
export const MAX_URL_LENGTH = 2048;
/** Redirects followed before a fetch fails. */
export const MAX_REDIRECTS = 5;
/** Largest body a fetch reads: 1 MiB. */
export const MAX_BODY_BYTES = 1024 * 1024;
const DEFAULT_TIMEOUT_MS = 10_000;

// ── classifier ──────────────────────────────────────────────────────────

/** IPv4 ranges hal0 never fetches from, most specific first. */
const V4_BLOCKED: ReadonlyArray<readonly [string, number, string]> = [
  ["255.255.255.255", 32, "broadcast"],
  ["0.0.0.0", 8, "unspecified"],
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "cgnat"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local"],
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "ietf-protocol"],
  ["192.0.2.0", 24, "documentation"],
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "benchmarking"],
  ["198.51.100.0", 24, "documentation"],
  ["203.0.113.0", 24, "documentation"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved"],
];

/** IPv6 ranges, most specific first; `embedded` ones carry an IPv4 address (at that bit offset) that is classified instead. */
const V6_SPECIAL: ReadonlyArray<{ readonly net: string; readonly bits: number; readonly range: string; readonly embedded?: number }> = [
  { net: "::", bits: 128, range: "unspecified" },
  { net: "::1", bits: 128, range: "loopback" },
  { net: "::ffff:0:0", bits: 96, range: "ipv4-mapped", embedded: 0 },
  { net: "::", bits: 96, range: "ipv4-compatible" },
  { net: "64:ff9b::", bits: 96, range: "nat64", embedded: 0 },
  { net: "64:ff9b:1::", bits: 48, range: "nat64-local" },
  { net: "100::", bits: 64, range: "discard" },
  { net: "2001:db8::", bits: 32, range: "documentation" },
  { net: "2002::", bits: 16, range: "6to4", embedded: 80 },
  { net: "fc00::", bits: 7, range: "unique-local" },
  { net: "fe80::", bits: 10, range: "link-local" },
  { net: "fec0::", bits: 10, range: "site-local" },
  { net: "ff00::", bits: 8, range: "multicast" },
];
const V6_RANGES = V6_SPECIAL.map((r) => ({ ...r, prefix: parseV6(r.net) }));

/**
 * Whether hal0 may connect to an IP address, and which range decides it. Pure.
 * IPv4: the special-purpose ranges (RFC 6890) are blocked, the rest is `public`.
 * IPv6: only global unicast (2000::/3) outside the special ranges is `public`;
 * an IPv4-mapped (`::ffff:a.b.c.d`, either notation), NAT64 (`64:ff9b::/96`) or
 * 6to4 (`2002::/16`) address is judged by the IPv4 address inside it, its range
 * prefixed (`ipv4-mapped:loopback`); deprecated IPv4-compatible `::a.b.c.d` is
 * always blocked. A zone (`%eth0`) is ignored; anything not an IP is blocked as `invalid`.
 */
export function classifyAddress(ip: string): AddressVerdict {
  const bare = ip.includes("%") ? ip.slice(0, ip.indexOf("%")) : ip;
  const family = isIP(bare);
  if (family === 4) return classifyV4(parseV4(bare));
  if (family !== 6) return { blocked: true, range: "invalid" };
  const value = parseV6(bare);
  for (const r of V6_RANGES) {
    const shift = BigInt(128 - r.bits);
    if (value >> shift !== r.prefix >> shift) continue;
    if (r.embedded === undefined) return { blocked: true, range: r.range };
    const inner = classifyV4(Number((value >> BigInt(r.embedded)) & 0xffffffffn));
    return { blocked: inner.blocked, range: `${r.range}:${inner.range}` };
  }
  return value >> 125n === 1n ? { blocked: false, range: "public" } : { blocked: true, range: "reserved" };
}

function classifyV4(value: number): AddressVerdict {
  for (const [net, bits, range] of V4_BLOCKED) {
    const shift = 32 - bits;
    if (Math.floor(value / 2 ** shift) === Math.floor(parseV4(net) / 2 ** shift)) return { blocked: true, range };
  }
  return { blocked: false, range: "public" };
}

/** A dotted-quad (already validated by `isIP`) as an unsigned 32-bit number. */
function parseV4(ip: string): number {
  return ip.split(".").reduce((acc, part) => acc * 256 + Number(part), 0);
}

/** An IPv6 address (already validated by `isIP`) as a 128-bit number. */
function parseV6(ip: string): bigint {
  let text = ip;
  const tail = text.slice(text.lastIndexOf(":") + 1);
  if (tail.includes(".")) {
    const v4 = parseV4(tail);
    text = `${text.slice(0, text.length - tail.length)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const [head = "", rest] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = rest === undefined || rest === "" ? [] : rest.split(":");
  const groups = rest === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

// ── URL check ───────────────────────────────────────────────────────────

/**
 * Host names refused before any lookup, whatever they resolve to: `localhost` and
 * `*.localhost` (RFC 6761: always loopback), and names that only mean something on a
 * local network: `*.local` (mDNS), `*.internal`, `*.home.arpa`, and single-label names
 * (`router`, `metadata`), which a resolver completes with the LAN's search domains.
 */
function localNameRange(host: string): string | undefined {
  if (host === "localhost" || host.endsWith(".localhost")) return "localhost";
  if (!host.includes(".") || [".local", ".internal", ".home.arpa"].some((s) => host.endsWith(s))) return "local-name";
  return undefined;
}

const defaultLookup: LookupFn = (host) =>
  new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

/**
 * Checks that hal0 may fetch `url`, resolving its name; throws ApiError, else returns what
 * to connect to. Refusals: empty, longer than 2048, unparseable, user:password in it, a
 * scheme other than https (http needs `allowInsecureHttp`) → `mcp.url_invalid`; a local
 * name, or ANY resolved address blocked by {@link classifyAddress} → `mcp.ssrf_blocked`
 * with `{url, address, range}` (`address` is the host for a name refusal); a name that
 * does not resolve → `mcp.manifest_fetch_failed`. WHATWG parsing turns decimal, octal, hex
 * and short IPv4 hosts (`2130706433`, `0177.0.0.1`, `0x7f.0.0.1`, `127.1`) into dotted
 * form first, so they are classified as the address they are. An `allow` entry matching
 * `host:port` skips the name and address checks (the addresses are still resolved, to pin).
 */
export async function checkUrlTarget(url: string, options: SsrfOptions = {}): Promise<CheckedTarget> {
  const parsed = parseTarget(url, options.allowInsecureHttp ?? false);
  const host = parsed.hostname.replace(/^\[|\]$/g, "").replace(/\.$/, "");
  const port = parsed.port === "" ? (parsed.protocol === "https:" ? 443 : 80) : Number(parsed.port);
  const trusted = (options.allow ?? []).map(normalizeAllowEntry).includes(`${bracket(host)}:${port}`);
  if (!trusted && isIP(host) === 0) {
    const range = localNameRange(host);
    if (range !== undefined) throw blocked(url, host, range);
  }
  const addresses = isIP(host) !== 0 ? [{ address: host, family: isIP(host) }] : await resolveName(url, host, options.lookup ?? defaultLookup);
  if (!trusted) {
    for (const { address } of addresses) {
      const verdict = classifyAddress(address);
      if (verdict.blocked) throw blocked(url, address, verdict.range);
    }
  }
  return { url: parsed, host, port, addresses, trusted };
}

function parseTarget(url: string, allowInsecureHttp: boolean): URL {
  if (url.length === 0 || url.length > MAX_URL_LENGTH) {
    throw new ApiError("mcp.url_invalid", `the url is ${url.length === 0 ? "empty" : `longer than ${MAX_URL_LENGTH} characters`}`, { length: url.length });
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ApiError("mcp.url_invalid", `${url} is not a URL`, { url });
  }
  const schemes = allowInsecureHttp ? ["https:", "http:"] : ["https:"];
  if (!schemes.includes(parsed.protocol)) {
    const hint = parsed.protocol === "http:" ? " (plain http is off: allowInsecureHttp)" : "";
    throw new ApiError("mcp.url_invalid", `hal0 fetches only ${schemes.join(" and ").replaceAll(":", "://")} URLs, not ${url}${hint}`, { url, scheme: parsed.protocol.slice(0, -1) });
  }
  if (parsed.username !== "" || parsed.password !== "") {
    throw new ApiError("mcp.url_invalid", `${parsed.host}: a URL hal0 fetches may not carry a user name or password`, { url: `${parsed.protocol}//${parsed.host}${parsed.pathname}` });
  }
  return parsed;
}

/** `host:port` with the host as the URL parser writes it (lowercase, dotted IPv4, compressed IPv6), no trailing dot. */
export function normalizeAllowEntry(entry: string): string {
  const m = /^(.+):(\d{1,5})$/.exec(entry);
  const host = m ? URL.parse(`http://${m[1]}/`)?.hostname : undefined;
  if (m === null || host === undefined || host === "" || Number(m[2]) > 65535) {
    throw new ApiError("mcp.url_invalid", `the allow entry ${JSON.stringify(entry)} is not host:port`, { allow_entry: entry });
  }
  return `${host.replace(/\.$/, "")}:${Number(m[2])}`;
}

function bracket(host: string): string {
  return isIP(host) === 6 ? `[${host}]` : host;
}

async function resolveName(url: string, host: string, lookup: LookupFn): Promise<ResolvedAddress[]> {
  let found: ResolvedAddress[];
  try {
    found = await lookup(host);
  } catch (err) {
    throw new ApiError("mcp.manifest_fetch_failed", `${host} does not resolve: ${(err as Error).message}`, { url, reason: "dns" });
  }
  if (found.length === 0) throw new ApiError("mcp.manifest_fetch_failed", `${host} resolves to no address`, { url, reason: "dns" });
  return found.map(({ address }) => ({ address, family: isIP(address) }));
}

function blocked(url: string, address: string, range: string): ApiError {
  return new ApiError("mcp.ssrf_blocked", `hal0 does not fetch ${url}: ${address} is ${range}; an operator can trust a host with the allow list`, { url, address, range });
}

// ── fetch ───────────────────────────────────────────────────────────────

/**
 * GETs `url` behind the guard. Each hop is checked with {@link checkUrlTarget} before
 * connecting, and the socket goes to the checked addresses only (a `lookup` that returns
 * them), so a name re-resolving elsewhere between check and connect (DNS rebinding) has
 * no effect. Redirects (301/302/303/307/308) are followed by hand, at most 5; a hop whose
 * Location is refused keeps its `mcp.ssrf_blocked`, one with a bad scheme or URL becomes
 * `mcp.manifest_fetch_failed`. Fails with `mcp.manifest_fetch_failed` on a non-2xx reply
 * (`details.status`), a body over 1 MiB, a connection error or the deadline.
 */
export async function guardedFetch(url: string, options: GuardedFetchOptions = {}): Promise<FetchedDocument> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const signal = AbortSignal.timeout(timeoutMs);
  let current = url;
  for (let redirects = 0; ; redirects++) {
    const target = redirects === 0 ? await checkUrlTarget(current, options) : await checkHop(url, current, options);
    const reply = await requestOnce(target, signal, timeoutMs);
    if (reply.location === undefined) return { url: target.url.href, status: reply.status, headers: flattenHeaders(reply.headers), body: reply.body };
    if (redirects === MAX_REDIRECTS) {
      throw new ApiError("mcp.manifest_fetch_failed", `${url}: more than ${MAX_REDIRECTS} redirects`, { url, redirects: MAX_REDIRECTS });
    }
    const next = URL.parse(reply.location, target.url.href);
    if (next === null) throw new ApiError("mcp.manifest_fetch_failed", `${target.url.href} redirects to ${reply.location}, which is not a URL`, { url, location: reply.location });
    current = next.href;
  }
}

async function checkHop(origin: string, hop: string, options: SsrfOptions): Promise<CheckedTarget> {
  try {
    return await checkUrlTarget(hop, options);
  } catch (err) {
    if (err instanceof ApiError && err.code === "mcp.url_invalid") {
      throw new ApiError("mcp.manifest_fetch_failed", `${origin} redirects to ${hop}, which hal0 does not follow: ${err.message}`, { url: origin, location: hop });
    }
    throw err;
  }
}

interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** Set on a redirect: the raw Location header. */
  readonly location?: string;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

function requestOnce(target: CheckedTarget, signal: AbortSignal, timeoutMs: number): Promise<Reply> {
  const href = target.url.href;
  const failed = (message: string, details: Record<string, unknown>) => new ApiError("mcp.manifest_fetch_failed", `${href}: ${message}`, { url: href, ...details });
  return new Promise<Reply>((resolve, reject) => {
    const send = target.url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(target.url, { method: "GET", agent: false, signal, lookup: pinnedLookup(target.addresses), headers: { accept: "application/json", "user-agent": "hal0" } }, (res) => {
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (REDIRECTS.has(status) && location !== undefined) {
        res.resume();
        resolve({ status, headers: res.headers, body: "", location });
        return;
      }
      if (status < 200 || status > 299) {
        res.resume();
        reject(failed(`the server answered ${status}`, { status }));
        return;
      }
      const tooLarge = () => {
        req.destroy();
        reject(failed(`the body is larger than ${MAX_BODY_BYTES} bytes`, { status, limit: MAX_BODY_BYTES }));
      };
      if (Number(res.headers["content-length"] ?? 0) > MAX_BODY_BYTES) return tooLarge();
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) tooLarge();
        else chunks.push(chunk);
      });
      res.on("end", () => resolve({ status, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", (err) => reject(failed(`the reply broke off: ${err.message}`, { status, reason: "connection" })));
    });
    req.on("error", (err) => {
      reject(signal.aborted ? failed(`no complete reply within ${timeoutMs} ms`, { reason: "timeout" }) : failed(`cannot connect: ${err.message}`, { reason: "connection" }));
    });
    req.end();
  });
}

/** A `lookup` for http(s).request that answers with the checked addresses and never asks DNS. */
export function pinnedLookup(addresses: readonly ResolvedAddress[]) {
  return (_host: string, opts: LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void): void => {
    const first = addresses[0];
    if (opts.all === true) callback(null, addresses.map((a) => ({ address: a.address, family: a.family })));
    else if (first !== undefined) callback(null, first.address, first.family);
  };
}

function flattenHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(headers).sort()) {
    const value = headers[name];
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}
