import { once } from "node:events";
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/index.js";
import { CODES } from "../../schema/index.js";
import { serve, serveLogger, type Serving } from "../../server/serve.js";
import { PROJECT } from "../reconciler/process-helpers.js";

/**
 * What node's HTTP server refuses before any handler runs (a request it
 * cannot parse, headers over its limit, an HTTP/1.1 request without Host,
 * CONNECT) was a bare status line, or no answer at all: `hal0 serve`
 * answers each with the registry's envelope and closes the connection.
 */
let serving: Serving;
beforeAll(async () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-http-edge-"));
  const config = join(base, "box");
  mkdirSync(join(config, "slots"), { recursive: true });
  copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
  writeFileSync(join(config, "hal0.toml"), `[reconcile]\ninterval_s = 3600\n`);
  writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
  const state = join(base, "state");
  serving = await serve({ root: config, stateDir: state, port: 0, reconcile: false, logger: serveLogger("silent"), driverFor: async () => new ProcessDriver({ stateDir: state }) });
});
afterAll(async () => serving?.close());

/** Writes `raw` on a new connection and resolves with everything that came back once the server closed it. */
async function exchange(raw: string): Promise<{ status: number; headers: string; body: any }> {
  const socket = connect({ host: "127.0.0.1", port: serving.port });
  await once(socket, "connect");
  let got = "";
  socket.on("data", (c: Buffer) => (got += c.toString()));
  socket.on("error", () => undefined);
  const closed = once(socket, "close");
  socket.write(raw);
  await closed;
  const [head = "", body = ""] = got.split("\r\n\r\n");
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1] ?? 0), headers: head, body: body === "" ? undefined : JSON.parse(body) };
}

function expectEnvelope(res: { status: number; headers: string; body: any }, code: keyof typeof CODES): void {
  expect(res.body?.error, res.headers).toMatchObject({ code, message: expect.any(String), details: expect.any(Object) });
  expect(res.status).toBe(CODES[code].http);
  expect(res.headers).toMatch(/\r\ncontent-type: application\/json\r\n/i);
  expect(res.headers).toMatch(/\r\nconnection: close(\r\n|$)/i);
}

describe("requests node refuses before any route", () => {
  it("a request line and headers over 16 KiB (a very long URL or query string): 431 request.header_too_large", async () => {
    const res = await exchange(`GET /api/slots?${"a".repeat(100_000)}=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    expectEnvelope(res, "request.header_too_large");
    expect(res.body.error.details).toEqual({ max_header_kb: 16 });
  });

  it("what no HTTP/1.1 parser reads: 400 request.malformed naming why", async () => {
    const cases = {
      HPE_INVALID_METHOD: "GARBAGE / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
      HPE_INVALID_TRANSFER_ENCODING: "POST /api/plans HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      HPE_INVALID_HEADER_TOKEN: "GET /api/auth/whoami HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Note: a\x01b\r\n\r\n",
    };
    for (const [reason, raw] of Object.entries(cases)) {
      const res = await exchange(raw);
      expectEnvelope(res, "request.malformed");
      expect(res.body.error.details).toEqual({ reason });
    }
  });

  it("an HTTP/1.1 request without Host: 400 request.malformed (node's own reply had no body)", async () => {
    const res = await exchange("GET /api/auth/whoami HTTP/1.1\r\n\r\n");
    expectEnvelope(res, "request.malformed");
    expect(res.body.error.details).toEqual({ reason: "missing_host" });
  });

  it("CONNECT: 405 route.method_not_allowed (node dropped the connection unanswered)", async () => {
    const res = await exchange("CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    expectEnvelope(res, "route.method_not_allowed");
  });

  it("an Expect other than 100-continue: 417 request.expectation_failed (node's own reply had no body and kept the connection)", async () => {
    const res = await exchange("POST /api/settings/reload HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 200-ok\r\nContent-Length: 0\r\n\r\n");
    expectEnvelope(res, "request.expectation_failed");
    expect(res.body.error.details).toEqual({ expect: "200-ok" });
  });

  it("still serves a well-formed request on the same server", async () => {
    const res = await exchange("GET /api/auth/whoami HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ kind: "anonymous" });
  });
});
