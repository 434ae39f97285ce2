import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toNodeListener } from "h3";
import { driverFor } from "../../cli/box.js";
import { ProcessDriver } from "../../reconciler/index.js";
import { createHal0Server, type Hal0Server, type Hal0ServerOptions } from "../../server/hal0-server.js";

const FIXTURE_BOX = join(import.meta.dirname, "../../fixtures/box");

export interface TestServer {
  readonly hal0: Hal0Server;
  readonly config: string;
  readonly state: string;
  readonly url: string;
  /** The bootstrap operator token (`<state>/operator.token`). */
  readonly operator: string;
  /**
   * fetch against the server; JSON body in, {status, body, headers} out.
   * As the operator unless told otherwise: `as: "anonymous"` sends no
   * credential, `as: "agent:<name>"` an agent token for that name (every
   * scope), and a request with its own Authorization header sends that.
   */
  call(method: string, path: string, options?: { body?: unknown; headers?: Record<string, string>; as?: string }): Promise<{ status: number; body: any; headers: Headers }>;
  /** An agent token for `name` (minted once per name and scope set, every scope unless told). */
  agentToken(name: string, scopes?: readonly string[]): string;
  close(): Promise<void>;
}

/** Servers by URL, so the MCP helpers can mint an agent's token for the server they connect to. */
const BY_URL = new Map<string, Hal0Server>();
const MINTED = new WeakMap<Hal0Server, Map<string, string>>();

/** A live agent token for `name` on the server at `url` (a harness server, or one registered with `registerServer`). */
export function agentTokenFor(url: string, name: string, scopes: readonly string[] = ["mcp:admin", "mcp:memory", "rest"]): string {
  const hal0 = BY_URL.get(url);
  if (!hal0) throw new Error(`no test server registered at ${url}`);
  let cache = MINTED.get(hal0);
  if (!cache) MINTED.set(hal0, (cache = new Map()));
  const key = `${name} ${[...scopes].sort().join(",")}`;
  let token = cache.get(key);
  if (!token || !hal0.tokens.verify(token)) {
    token = hal0.tokens.mint("agent", name, scopes).token;
    cache.set(key, token);
  }
  return token;
}

/** Makes `agentTokenFor` (and the MCP helpers) work for a server started some other way (`serve()`). */
export function registerServer(url: string, hal0: Hal0Server): () => void {
  BY_URL.set(url, hal0);
  return () => void BY_URL.delete(url);
}

/** The Authorization header for `as` (see TestServer.call). */
export function credentialFor(url: string, operator: string, as = "operator"): Record<string, string> {
  if (as === "anonymous") return {};
  if (as === "operator") return { authorization: `Bearer ${operator}` };
  if (as.startsWith("agent:")) return { authorization: `Bearer ${agentTokenFor(url, as.slice(6))}` };
  throw new Error(`unknown caller ${as}`);
}

/**
 * A real hal0 server over real HTTP on a loopback port, in this process: a
 * copy of fixtures/box (or `box`) as its config folder, a fresh state folder
 * with its SQLite database, the process runtime.
 */
export async function startTestServer(options: { box?: string; env?: NodeJS.ProcessEnv; extra?: Partial<Hal0ServerOptions>; reuse?: { dir: string }; keep?: boolean } = {}): Promise<TestServer & { dir: string }> {
  const dir = options.reuse?.dir ?? mkdtempSync(join(tmpdir(), "hal0-server-"));
  const config = join(dir, "config");
  const state = join(dir, "state");
  if (!options.reuse) cpSync(options.box ?? FIXTURE_BOX, config, { recursive: true });
  const hal0 = createHal0Server({ root: config, stateDir: state, driverFor: async () => new ProcessDriver({ stateDir: state }), env: options.env ?? {}, ...options.extra });
  await hal0.box.snapshot();
  const server: Server = createServer(toNodeListener(hal0.app));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const unregister = registerServer(url, hal0);
  const operator = readFileSync(join(state, "operator.token"), "utf8").trim();
  return {
    hal0, config, state, url, dir, operator,
    agentToken: (name, scopes) => agentTokenFor(url, name, scopes),
    call: (method, path, opts = {}) => {
      const own = Object.keys(opts.headers ?? {}).some((k) => k.toLowerCase() === "authorization");
      return httpCall(url, method, path, { ...opts, headers: { ...(own ? {} : credentialFor(url, operator, opts.as)), ...opts.headers } });
    },
    async close() {
      unregister();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await hal0.close();
      if (!options.keep) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A test server whose tree says `[slots] runtime = "docker"` at an engine address where nothing
 * listens, past the box's read window: every read of the runtime meets `runtime.unavailable`.
 * `dead` is that address, as the messages name it.
 */
export async function startServerWithDeadEngine(): Promise<{ s: TestServer & { dir: string }; dead: string }> {
  const dead = `unix://${join(mkdtempSync(join(tmpdir(), "hal0-noengine-")), "docker.sock")}`;
  const s = await startTestServer({ extra: { driverFor: (model) => driverFor(model, tmpdir(), {}) } });
  const settings = join(s.config, "hal0.toml");
  writeFileSync(settings, readFileSync(settings, "utf8").replace(/^runtime = "process"$/m, `runtime = "docker"\ndocker_host = "${dead}"`));
  await new Promise((r) => setTimeout(r, 1100)); // past the read window
  return { s, dead };
}

/** One HTTP request with node:http (fetch may not set Host); the reply's JSON parsed when it is JSON. */
export function httpCall(url: string, method: string, path: string, { body, headers = {}, exactHeaders = false }: { body?: unknown; headers?: Record<string, string>; /** send `headers` as given: no Content-Type added */ exactHeaders?: boolean } = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const payload = body === undefined ? undefined : typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers: { ...(payload === undefined || exactHeaders ? {} : { "content-type": "application/json" }), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // not JSON: keep the text
        }
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(", ") : v);
        resolve({ status: res.statusCode ?? 0, body: parsed, headers: h });
      });
    });
    req.on("error", reject);
    req.end(payload);
  });
}

/** Replaces the `[models]` table of a served copy's hal0.toml (the example box sets a store) with `body`'s keys. */
export function setModelsTable(config: string, body: string): void {
  const file = join(config, "hal0.toml");
  const text = readFileSync(file, "utf8").replace(/\n\[models\]\n(?:(?!\[)[^\n]*\n?)*/, "\n");
  writeFileSync(file, `${text.trimEnd()}\n\n[models]\n${body.trimEnd()}\n`);
}

/**
 * Reads a server-sent events route as a client would: `text()` is what has
 * arrived so far, `done` settles when `stopWhen` matches it (or the stream
 * ends), `close()` hangs up.
 */
export async function openEventStream(url: string, path: string, token: string, stopWhen: RegExp): Promise<{ text: () => string; done: Promise<void>; close: () => void; contentType: string | null }> {
  const abort = new AbortController();
  const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` }, signal: abort.signal });
  const reader = res.body!.getReader();
  let text = "";
  const done = (async () => {
    for (;;) {
      const { value, done: ended } = await reader.read().catch(() => ({ value: undefined, done: true }));
      if (ended) return;
      text += Buffer.from(value!).toString("utf8");
      if (stopWhen.test(text)) return;
    }
  })();
  return { text: () => text, done, close: () => abort.abort(), contentType: res.headers.get("content-type") };
}
