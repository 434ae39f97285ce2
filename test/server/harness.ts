import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { toNodeListener } from "h3";
import { ProcessDriver } from "../../reconciler/index.js";
import { createHal0Server, type Hal0Server, type Hal0ServerOptions } from "../../server/hal0-server.js";

const FIXTURE_BOX = join(import.meta.dirname, "../../fixtures/box");

export interface TestServer {
  readonly hal0: Hal0Server;
  readonly config: string;
  readonly state: string;
  readonly url: string;
  /** fetch against the server; JSON body in, {status, body, headers} out. */
  call(method: string, path: string, options?: { body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; body: any; headers: Headers }>;
  close(): Promise<void>;
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
  return {
    hal0, config, state, url, dir,
    call: (method, path, opts) => httpCall(url, method, path, opts),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await hal0.close();
      if (!options.keep) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One HTTP request with node:http (fetch may not set Host); the reply's JSON parsed when it is JSON. */
export function httpCall(url: string, method: string, path: string, { body, headers = {} }: { body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers: { ...(payload === undefined ? {} : { "content-type": "application/json" }), ...headers } }, (res) => {
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
