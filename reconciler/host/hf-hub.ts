/**
 * A Hugging Face Hub client: repo info with each file's size and LFS sha256,
 * a GGUF model search, and a resumable download of one file. The metadata
 * calls go through the Hub's own JS client (`@huggingface/hub`, imported on
 * first use so commands that never touch the Hub do not load it); the
 * download is ours, because it needs Range resume and redirects followed by
 * hand. Every request goes through `send`, the one place the token is added:
 * only to URLs of the endpoint's origin, never to the CDN a file redirects to.
 * The token is never logged and never put in an error message.
 */

import { envSecondsMs } from "../env-seconds.js";

export interface HubFile {
  readonly path: string;
  readonly size: number;
  /** The LFS oid (sha256) when the file is in LFS, else null. */
  readonly sha256: string | null;
}

/** `hub.denied`: the Hub refused the token or access (401/403: an invalid token, a gated repository the token's account was not granted). */
export type HubErrorCode = "model.not_found" | "hub.unreachable" | "hub.error" | "hub.denied" | "validation.invalid";

/** What went wrong talking to the Hub; `code` is a registry code, `status` the HTTP status when there was a reply. */
export class HubError extends Error {
  constructor(readonly code: HubErrorCode, message: string, readonly status?: number) {
    super(message);
  }
}

export interface HubSearchHit {
  readonly id: string;
  readonly downloads: number | null;
  readonly likes: number | null;
  readonly updated_at: string | null;
}

export interface HubDownload {
  /** 206 when the reply resumes at `from`; 200 when it is the whole file (the caller restarts from 0). */
  readonly status: 200 | 206;
  /** The whole file's size, whatever part of it the body holds. */
  readonly total: number;
  readonly commit: string | null;
  /** `x-linked-etag` (the sha256 for an LFS file), else the reply's ETag; quotes stripped. */
  readonly etag: string | null;
  /**
   * The git blob id (sha1 of `blob <size>\0` and the bytes) of a file the
   * Hub serves itself, outside LFS: its ETag. Null for an LFS file (the CDN
   * serves it; its sha256 is `etag`).
   */
  readonly gitBlob: string | null;
  readonly body: AsyncIterable<Uint8Array>;
}

export const DEFAULT_HF_ENDPOINT = "https://huggingface.co";
const MAX_REDIRECTS = 5;
const SEARCH_LIMIT = { default: 20, max: 100 };
const NAME = /^[\w][\w.-]*$/;
/** First path segments of the Hub's site that are not a model's namespace. */
const NOT_A_NAMESPACE = new Set(["api", "datasets", "spaces", "models", "docs", "settings", "organizations", "collections", "papers", "buckets", "kernels", "join", "login"]);

type HubLib = typeof import("@huggingface/hub");
let hubLib: Promise<HubLib> | undefined;
/** The Hub's JS client, loaded once on first use. */
const lib = (): Promise<HubLib> => (hubLib ??= import("@huggingface/hub"));

export class HubClient {
  readonly endpoint: string;
  readonly #origin: string;
  readonly #host: string;
  /** Private (`#`), so neither a log of the client nor JSON.stringify shows it. */
  readonly #token: string | undefined;
  readonly #fetch: typeof fetch;
  /** A download that sends no byte for this long is given up (kept partial, to resume): a connection that stays open and silent never ends on its own. */
  readonly stallMs: number;
  /** A metadata call (repo info, listing, search), and a download's wait for its first reply, is given up after this long: a Hub that accepts the connection and never answers would hold it for minutes. */
  readonly timeoutMs: number;
  /** Aborted when the owner stops (hal0 serve's shutdown): calls in flight end at once. */
  readonly #stop: AbortSignal | undefined;

  constructor(o: { endpoint?: string; token?: string; fetch?: typeof fetch; stallMs?: number; timeoutMs?: number; signal?: AbortSignal } = {}) {
    const endpoint = (o.endpoint ?? DEFAULT_HF_ENDPOINT).replace(/\/+$/, "");
    let url: URL;
    try {
      url = new URL(endpoint);
    } catch {
      throw new HubError("validation.invalid", `the Hub endpoint ${JSON.stringify(endpoint)} is not a URL`);
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new HubError("validation.invalid", `the Hub endpoint ${JSON.stringify(endpoint)} is not an http(s) URL`);
    if (url.search || url.hash || url.username || url.password) throw new HubError("validation.invalid", "the Hub endpoint must be a plain origin (and path), without query or credentials");
    this.endpoint = endpoint;
    this.#origin = url.origin;
    this.#host = url.host;
    // Blanks around it (a line end read with it from a file) are no part of a token; what is left must be sendable in a header.
    this.#token = o.token?.trim() || undefined;
    this.#fetch = o.fetch ?? fetch;
    this.stallMs = o.stallMs ?? DEFAULT_STALL_MS;
    this.timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#stop = o.signal;
  }

  /** `HF_ENDPOINT` (default huggingface.co) and `HF_TOKEN`, as the Hub's own tools read them. */
  static fromEnv(env: Readonly<Record<string, string | undefined>>, signal?: AbortSignal): HubClient {
    return new HubClient({
      endpoint: env.HF_ENDPOINT || DEFAULT_HF_ENDPOINT, token: env.HF_TOKEN || undefined, ...(signal ? { signal } : {}),
      // HAL0_HUB_STALL_S: seconds without a byte before a download is given up (default 60).
      stallMs: envSecondsMs(env.HAL0_HUB_STALL_S, DEFAULT_STALL_MS),
      // HAL0_HUB_TIMEOUT_S: seconds a metadata call, or a download's first reply, may take (default 30).
      timeoutMs: envSecondsMs(env.HAL0_HUB_TIMEOUT_S, DEFAULT_TIMEOUT_MS),
    });
  }

  /**
   * The repo's commit at `revision` and every file with its size and LFS
   * sha256. Two calls: the model info (for the commit), then the tree at that
   * commit, so the files are those of the commit reported even if a push
   * lands in between (the info's `siblings` carry sizes only with
   * `?blobs=true`, which the JS client does not send).
   */
  async repoInfo(repo: string, revision = "main"): Promise<{ id: string; sha: string; files: HubFile[] }> {
    checkRepo(repo);
    checkRevision(revision);
    const { modelInfo } = await lib();
    const info = await this.#api(repo, revision, (fetch) => modelInfo({ name: repo, revision, hubUrl: this.endpoint, fetch, additionalFields: ["sha"] }));
    const sha = typeof info.sha === "string" && info.sha !== "" ? info.sha : undefined;
    if (!sha) throw new HubError("hub.error", `the Hub at ${this.#host} gave no commit for ${repo}@${revision}`);
    return { id: info.name, sha, files: await this.listTree(repo, sha) };
  }

  /** Every file of the repo at `revision` (recursive; the JS client follows the tree's pagination). */
  async listTree(repo: string, revision = "main"): Promise<HubFile[]> {
    checkRepo(repo);
    checkRevision(revision);
    const { listFiles } = await lib();
    return this.#api(repo, revision, async (fetch) => {
      const files: HubFile[] = [];
      // The client puts the revision in the path as given: encode it so `refs/pr/1` stays one segment.
      for await (const e of listFiles({ repo, revision: encodeURIComponent(revision), recursive: true, hubUrl: this.endpoint, fetch })) {
        if (e.type === "file") files.push({ path: e.path, size: e.size, sha256: e.lfs?.oid ?? null });
      }
      return files;
    });
  }

  /** GGUF models whose id contains `query`, most downloaded first. */
  async search(query: string, o: { limit?: number } = {}): Promise<HubSearchHit[]> {
    const limit = Math.max(1, Math.min(SEARCH_LIMIT.max, Math.floor(o.limit ?? SEARCH_LIMIT.default)));
    const { listModels } = await lib();
    return this.#api(undefined, undefined, async (fetch) => {
      const hits: HubSearchHit[] = [];
      for await (const m of listModels({ search: { query, tags: ["gguf"] }, limit, sort: "downloads", hubUrl: this.endpoint, fetch })) {
        const updated = m.updatedAt instanceof Date && !Number.isNaN(m.updatedAt.getTime()) ? m.updatedAt.toISOString() : null;
        hits.push({ id: m.name, downloads: numberOrNull(m.downloads), likes: numberOrNull(m.likes), updated_at: updated });
      }
      return hits;
    });
  }

  /** `{endpoint}/{repo}/resolve/{revision}/{file}`, each segment percent-encoded (a revision like `refs/pr/1` is one segment). */
  resolveUrl(repo: string, revision: string, file: string): string {
    checkRepo(repo);
    checkRevision(revision);
    checkFile(file);
    return `${this.endpoint}/${repo.split("/").map(encodeURIComponent).join("/")}/resolve/${encodeURIComponent(revision)}/${file.split("/").map(encodeURIComponent).join("/")}`;
  }

  /**
   * GET one file from byte `from` on. The Hub answers with a redirect to its
   * CDN and the file's commit, sha256 and size in headers; those are read
   * from the endpoint's replies, the bytes from the last one. A server that
   * ignores the Range answers 200: reported as is, so the caller restarts.
   */
  async download(t: { repo: string; revision: string; file: string }, o: { from: number; signal?: AbortSignal }): Promise<HubDownload> {
    const url = this.resolveUrl(t.repo, t.revision, t.file);
    const from = o.from;
    if (!Number.isSafeInteger(from) || from < 0) throw new HubError("validation.invalid", `download offset ${from} is not a byte offset`);
    const what = `${t.repo}@${t.revision}/${t.file}`;
    // The first reply must come within the timeout; after it, the stall watchdog watches the bytes.
    const first = new AbortController();
    const timer = setTimeout(() => first.abort(), this.timeoutMs);
    const signals = [first.signal, ...(o.signal ? [o.signal] : []), ...(this.#stop ? [this.#stop] : [])];
    let sent: { res: Response; hub: Map<string, string> };
    try {
      sent = await this.#send(url, from > 0 ? { range: `bytes=${from}-` } : {}, AbortSignal.any(signals));
    } catch (e) {
      if (o.signal?.aborted) throw e;
      throw this.#gaveUp(first.signal, `${this.#host} gave no reply for ${what}`) ?? e;
    } finally {
      clearTimeout(timer);
    }
    const { res, hub } = sent;
    const final = new URL(res.url || url).host;
    const denied = res.status === 401 || res.status === 403 ? this.#denial(res.status, res.headers) : undefined;
    if (denied !== undefined) throw await refuse(res, new HubError("hub.denied", `${final} refused ${what} (${res.status}): ${denied}`, res.status));
    if (res.status === 404 || res.status === 401) throw await refuse(res, new HubError("model.not_found", `${what} was not found on ${this.#host}`, res.status));
    if (res.status === 416) throw await refuse(res, new HubError("hub.error", `${final} refused the range from byte ${from} of ${what} (416)`, 416));
    if (res.status !== 200 && res.status !== 206) {
      throw await refuse(res, new HubError("hub.error", `${final} answered ${res.status} for ${what}${retryAfter(res.headers)}`, res.status));
    }
    const header = (name: string): string | null => hub.get(name) ?? res.headers.get(name);
    let total = toSize(hub.get("x-linked-size"));
    if (res.status === 206) {
      const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.headers.get("content-range") ?? "");
      if (!m || Number(m[1]) !== from) throw await refuse(res, new HubError("hub.error", `${final} sent a range of ${what} that does not start at byte ${from}`, 206));
      total ??= m[3] === "*" ? null : Number(m[3]);
    } else {
      total ??= toSize(res.headers.get("content-length"));
    }
    if (total === null) throw await refuse(res, new HubError("hub.error", `${final} gave no size for ${what}`, res.status));
    const etag = header("x-linked-etag") ?? res.headers.get("etag");
    const own = res.headers.get("etag")?.replace(/^W\//, "").replace(/^"|"$/g, "") ?? "";
    const onHub = new URL(res.url || url).origin === this.#origin;
    return {
      status: res.status,
      total,
      commit: header("x-repo-commit"),
      etag: etag === null ? null : etag.replace(/^W\//, "").replace(/^"|"$/g, ""),
      gitBlob: onHub && !hub.has("x-linked-etag") && /^[0-9a-f]{40}$/.test(own) ? own : null,
      body: chunks(res, final, o.signal, this.stallMs),
    };
  }

  /** A Hub URL (a repo page, a `resolve` / `blob` link of a file, a `tree` link of a revision) as repo, revision and file. */
  parseHfUrl(url: string): { repo: string; revision: string; file: string | null } {
    const bad = (why: string): HubError => new HubError("validation.invalid", `${JSON.stringify(url)} is not a model URL of ${this.endpoint}: ${why}`);
    // Checked on the raw text: the URL parser folds `..` (and `%2e%2e`) away before anyone sees it.
    if (/(^|[/\\])(\.|%2e){1,2}([/\\?#]|$)/i.test(url.replace(/^[a-z]+:\/\//i, ""))) throw bad("it has a `.` or `..` segment");
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw bad("not a URL");
    }
    if (u.origin !== this.#origin) throw bad(`its origin is not ${this.#origin}`);
    const prefix = new URL(this.endpoint).pathname.replace(/\/+$/, "");
    if (!u.pathname.startsWith(`${prefix}/`)) throw bad(`its path is not under ${prefix}/`);
    let segs: string[];
    try {
      segs = u.pathname.slice(prefix.length + 1).replace(/\/$/, "").split("/").map(decodeURIComponent);
    } catch {
      throw bad("a path segment is not valid percent-encoding");
    }
    const [org, name, kind, revision, ...rest] = segs;
    if (!org || !name || NOT_A_NAMESPACE.has(org)) throw bad("it does not name a model repo (org/name)");
    const repo = `${org}/${name}`;
    const check = (f: () => void): void => {
      try {
        f();
      } catch (e) {
        throw e instanceof HubError ? bad(e.message) : e;
      }
    };
    check(() => checkRepo(repo));
    if (kind === undefined) return { repo, revision: "main", file: null };
    if (!revision) throw bad(`\`${kind}\` without a revision`);
    check(() => checkRevision(revision));
    if (kind === "tree" && rest.length === 0) return { repo, revision, file: null };
    if ((kind === "resolve" || kind === "blob") && rest.length > 0) {
      const file = rest.join("/");
      check(() => checkFile(file));
      return { repo, revision, file };
    }
    throw bad(kind === "tree" ? "a tree link names a folder, not a file" : `\`${kind}\` is not resolve, blob or tree (or the file is missing)`);
  }

  /** A `fetch` for the JS client: every request goes through `send`, with `signal` (the call's deadline, the stop) besides the client's own; `seen` hears each reply. */
  #apiFetch(signal: AbortSignal, seen: (res: Response) => void): typeof fetch {
    return (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      const headers = Object.fromEntries(new Headers(init?.headers).entries());
      const { res } = await this.#send(url, headers, init?.signal ? AbortSignal.any([init.signal, signal]) : signal);
      seen(res);
      return res;
    }) as typeof fetch;
  }

  /**
   * Why a 401 or 403 is the Hub refusing access, not saying the repo does
   * not exist (its 401 for a private repo one may not see): a gated repo
   * (`x-error-code: GatedRepo`), a token it does not accept, any 403.
   * Undefined for a plain 401. Read from the Hub's headers, never echoing
   * its text.
   */
  #denial(status: number, headers: Headers): string | undefined {
    if (headers.get("x-error-code") === "GatedRepo") {
      return this.#token ? "a gated repository whose access HF_TOKEN's account has not been granted; ask for it on the repository's page" : "a gated repository; set HF_TOKEN to a token of an account granted access";
    }
    if (/invalid credentials/i.test(headers.get("x-error-message") ?? "")) return "it does not accept HF_TOKEN (invalid credentials); set a valid token";
    if (status === 403) return this.#token ? "HF_TOKEN has no access to it" : "it needs a token; set HF_TOKEN";
    return undefined;
  }

  /** The HubError for a call given up on by its deadline or by the stop; undefined when neither fired. */
  #gaveUp(deadline: AbortSignal, what: string): HubError | undefined {
    if (this.#stop?.aborted) return new HubError("hub.unreachable", `${what}: hal0 is stopping, the call was given up`);
    const s = this.timeoutMs >= 1000 ? `${Math.round(this.timeoutMs / 1000)} s` : `${this.timeoutMs} ms`;
    if (deadline.aborted) return new HubError("hub.unreachable", `${what} within ${s} (HAL0_HUB_TIMEOUT_S)`);
    return undefined;
  }

  /**
   * GET `url`, following up to 5 redirects by hand. The token is sent only
   * while the URL is on the endpoint's origin; headers of the endpoint's
   * replies are kept in `hub` (first reply that has a name wins), since the
   * CDN's reply does not carry the commit or the sha256.
   */
  async #send(url: string, headers: Record<string, string>, signal?: AbortSignal): Promise<{ res: Response; hub: Map<string, string> }> {
    const hub = new Map<string, string>();
    let current = new URL(url);
    for (let hop = 0; ; hop++) {
      const onHub = current.origin === this.#origin;
      // A token fetch cannot send (a line break, a space or a character outside ASCII in it) is refused here: fetch's own
      // refusal repeats the whole header, token and all, in its message, which would reach the caller's reply and the logs.
      if (onHub && this.#token !== undefined && !/^[\x21-\x7e]+$/.test(this.#token)) {
        throw new HubError("hub.denied", "HF_TOKEN cannot be sent: it holds a line break, a space or a character outside ASCII, and a token is one run of printable ASCII; set it again");
      }
      const h: Record<string, string> = { ...headers };
      for (const k of Object.keys(h)) if (k.toLowerCase() === "authorization") delete h[k];
      if (onHub && this.#token) h.authorization = `Bearer ${this.#token}`;
      let res: Response;
      try {
        res = await this.#fetch(current.href, { headers: h, redirect: "manual", ...(signal ? { signal } : {}) });
      } catch (e) {
        if (signal?.aborted) throw e;
        throw new HubError("hub.unreachable", `cannot reach ${current.host}: ${causeOf(e)}`);
      }
      if (onHub) res.headers.forEach((v, k) => void (hub.has(k) || hub.set(k, v)));
      const location = res.headers.get("location");
      if (res.status < 300 || res.status >= 400 || res.status === 304 || location === null) return { res, hub };
      await res.body?.cancel().catch(() => undefined);
      if (hop >= MAX_REDIRECTS) throw new HubError("hub.error", `more than ${MAX_REDIRECTS} redirects from ${new URL(url).host}`, res.status);
      const next = new URL(location, current);
      if (next.protocol !== "https:" && next.protocol !== "http:") throw new HubError("hub.error", `${current.host} redirected to a ${next.protocol} URL`, res.status);
      // A link-local address (169.254.0.0/16, fe80::/10) is a cloud host's metadata service, never a Hub's CDN: a redirect there is refused, not followed.
      if (linkLocal(next.hostname)) throw new HubError("hub.error", `${current.host} redirected to ${next.host}, a link-local address; it is not followed`, res.status);
      current = next;
    }
  }

  /** Runs a JS-client call, turning its errors (and a bad reply) into HubErrors. */
  async #api<T>(repo: string | undefined, revision: string | undefined, call: (fetch: typeof globalThis.fetch) => Promise<T>): Promise<T> {
    // The whole call (its pages too, and reading the replies) has one deadline.
    const deadline = AbortSignal.timeout(this.timeoutMs);
    /** The last error reply's status and headers (a 401 / 403's reason, a 429's Retry-After): the JS client's error keeps the status only. */
    let refused: { status: number; headers: Headers } | undefined;
    const seen = (res: Response): void => void (res.status >= 400 ? (refused = { status: res.status, headers: res.headers }) : undefined);
    try {
      return await call(this.#apiFetch(this.#stop ? AbortSignal.any([deadline, this.#stop]) : deadline, seen));
    } catch (e) {
      const gaveUp = this.#gaveUp(deadline, `the Hub at ${this.#host} did not answer${repo ? ` for ${repo}` : ""}`);
      if (gaveUp) throw gaveUp;
      if (e instanceof HubError) throw e;
      const status = (e as { statusCode?: unknown }).statusCode;
      if (typeof status === "number") {
        const denied = refused !== undefined && refused.status === status ? this.#denial(status, refused.headers) : undefined;
        if (denied !== undefined) throw new HubError("hub.denied", `the Hub at ${this.#host} refused ${repo ?? "the call"} (${status}): ${denied}`, status);
        if (repo !== undefined && (status === 404 || status === 401)) throw new HubError("model.not_found", `${repo}@${revision} was not found on ${this.#host}`, status);
        const retry = refused !== undefined && refused.status === status ? retryAfter(refused.headers) : "";
        throw new HubError("hub.error", `the Hub at ${this.#host} answered ${status}${repo ? ` for ${repo}` : ""}${retry}`, status);
      }
      throw new HubError("hub.error", `the Hub at ${this.#host} sent a reply that could not be read${repo ? ` for ${repo}` : ""}: ${causeOf(e)}`);
    }
  }
}

/**
 * A host that is a link-local address. The URL parser has already put every
 * IPv4 spelling (decimal, hex, short) in dotted form and an IPv4-mapped IPv6
 * one in hex (`[::ffff:a9fe:a9fe]`). A name is not resolved here.
 */
function linkLocal(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (/^\d+\.\d+\.\d+\.\d+$/.test(h)) return h.startsWith("169.254.");
  if (!h.includes(":")) return false;
  return /^fe[89ab][0-9a-f]:/.test(h) || /^::ffff:a9fe:/.test(h);
}

/** `org/name`, each part a Hub name (letters, digits, `_`, `-`, `.`; no `..`). */
function checkRepo(repo: string): void {
  const parts = repo.split("/");
  if (parts.length !== 2 || !parts.every((p) => NAME.test(p) && !p.includes("..") && p.length <= 96)) throw new HubError("validation.invalid", `${JSON.stringify(repo)} is not a model repo id (org/name)`);
}

function checkRevision(revision: string): void {
  if (revision === "" || /[\0-\x1f\\]/.test(revision) || revision.split("/").some((s) => s === "" || s === "." || s === "..")) throw new HubError("validation.invalid", `${JSON.stringify(revision)} is not a revision`);
}

function checkFile(file: string): void {
  if (file === "" || /[\0-\x1f\\]/.test(file) || file.split("/").some((s) => s === "" || s === "." || s === "..")) throw new HubError("validation.invalid", `${JSON.stringify(file)} is not a file path in a repo`);
}

/** The body as chunks; a connection lost mid-file is hub.unreachable, an abort stays the caller's abort. */
/** A download with no byte for this long is given up (HAL0_HUB_STALL_S). */
export const DEFAULT_STALL_MS = 60_000;
/** A metadata call, or a download's first reply, that takes longer is given up (HAL0_HUB_TIMEOUT_S). */
export const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * The reply's bytes. A watchdog cancels the read when no byte came for
 * `stallMs` (the time the consumer takes with a chunk does not count): a
 * server that keeps the connection open and sends nothing would otherwise
 * hold the pull for ever.
 */
async function* chunks(res: Response, host: string, signal: AbortSignal | undefined, stallMs: number): AsyncGenerator<Uint8Array> {
  if (!res.body) return;
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  /** When the pending read began; undefined while the consumer has the last chunk. */
  let waitingSince: number | undefined;
  let stalled = false;
  let finished = false;
  const watchdog = setInterval(() => {
    if (waitingSince === undefined || performance.now() - waitingSince < stallMs) return;
    stalled = true;
    void reader.cancel().catch(() => undefined);
  }, Math.max(50, Math.min(5000, stallMs / 4)));
  watchdog.unref();
  try {
    for (;;) {
      // On the monotonic clock: a step of the wall clock during an hours-long pull is no silence of the server.
      waitingSince = performance.now();
      const { done, value } = await reader.read();
      waitingSince = undefined;
      if (stalled) throw new HubError("hub.unreachable", `the download from ${host} stalled: no byte for ${stallMs >= 1000 ? `${Math.round(stallMs / 1000)} s` : `${stallMs} ms`}`);
      if (done) {
        finished = true;
        return;
      }
      yield value;
    }
  } catch (e) {
    if (e instanceof HubError || signal?.aborted) throw e;
    throw new HubError("hub.unreachable", `the download from ${host} broke off: ${causeOf(e)}`);
  } finally {
    clearInterval(watchdog);
    // Left before the end (a caller that stops reading): the connection is let go.
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/** Drops an error reply's body (so the connection is freed) and returns `e` to throw. */
async function refuse(res: Response, e: HubError): Promise<HubError> {
  await res.body?.cancel().catch(() => undefined);
  return e;
}

/**
 * When the Hub says to try again (a 429's or 503's Retry-After, in seconds or
 * as an HTTP date), as ` (Retry-After: N s)` for a message; "" when it says
 * nothing readable.
 */
function retryAfter(headers: Headers): string {
  const v = headers.get("retry-after")?.trim() ?? "";
  if (/^\d{1,6}$/.test(v)) return ` (Retry-After: ${Number(v)} s)`;
  const at = /[a-z]/i.test(v) ? Date.parse(v) : NaN;
  return Number.isNaN(at) ? "" : ` (Retry-After: ${Math.max(0, Math.ceil((at - Date.now()) / 1000))} s)`;
}

function toSize(v: string | null | undefined): number | null {
  return v != null && /^\d+$/.test(v) ? Number(v) : null;
}

function numberOrNull(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** The low-level reason of a failed fetch (`ECONNREFUSED`, …): fetch's own message is only "fetch failed". */
function causeOf(e: unknown): string {
  const cause = (e as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (typeof cause?.code === "string") return cause.code;
  if (typeof cause?.message === "string") return cause.message;
  return e instanceof Error ? e.message : String(e);
}
