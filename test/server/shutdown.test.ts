import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/index.js";
import { serve, serveLogger } from "../../server/serve.js";
import { PROJECT } from "../reconciler/process-helpers.js";
import { emptyServeBox, startServe } from "../cli/helpers.js";

/**
 * Issue 16: SIGTERM waited forever while a client held an event stream open
 * (hal0-admin's standalone GET stream, the approvals and MCP activity
 * streams). Shutdown now ends every stream properly (the chunked reply's
 * end: clients see the stream end, not a reset) once nothing else is in
 * flight, or after the grace (3 s) at the latest, and exits 0.
 */

const GRACE_MS = 3000;

const emptyBox = () => emptyServeBox("hal0-shutdown-");

/** Every `hal0 serve` a test started: none outlives the file, even when a test fails before it stops it. */
const children = new Set<ChildProcess>();
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});


/** An open event stream: its status, and `ended` resolves with the text it got once the server ends it ("error: …" when it was cut instead). */
interface Stream {
  readonly status: number;
  readonly type: string | null;
  readonly ended: Promise<string>;
  /** Resolves once `text` has arrived. */
  saw(text: string): Promise<void>;
}

async function openStream(url: string, headers: Record<string, string>): Promise<Stream> {
  const res = await fetch(url, { headers: { accept: "text/event-stream", ...headers } });
  let text = "";
  const waiters: Array<() => void> = [];
  const ended = (async () => {
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        text += Buffer.from(chunk).toString();
        for (const w of waiters.splice(0)) w();
      }
      return text;
    } catch (err) {
      return `error: ${(err as Error).message} ${(err as { cause?: Error }).cause?.message ?? ""}`;
    }
  })();
  return {
    status: res.status, type: res.headers.get("content-type"), ended,
    saw: async (want) => {
      while (!text.includes(want)) await new Promise<void>((r) => waiters.push(r));
    },
  };
}

/** hal0-admin's standalone GET stream, opened as a client does: initialize, initialized, then GET with the session's headers. */
async function mcpGetStream(url: string, token: string): Promise<Stream> {
  const base = { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" };
  const init = await fetch(`${url}/mcp/admin`, {
    method: "POST", headers: base,
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "shutdown-test", version: "1" } } }),
  });
  expect(init.status).toBe(200);
  await init.text();
  const session = { "mcp-session-id": init.headers.get("mcp-session-id")!, "mcp-protocol-version": "2025-06-18" };
  const initialized = await fetch(`${url}/mcp/admin`, { method: "POST", headers: { ...base, ...session }, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
  expect(initialized.status).toBe(202);
  return openStream(`${url}/mcp/admin`, { authorization: base.authorization, ...session });
}

const exitOf = (child: ChildProcess) => new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

describe("hal0 serve shutdown with open event streams (a real process)", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`${signal}: ends the MCP GET stream and the SSE streams properly, and exits 0 within the grace`, async () => {
      const { config, state } = emptyBox();
      const { child, url, lines } = await startServe(config, state, [], (c) => children.add(c));
      const token = readFileSync(join(state, "operator.token"), "utf8").trim();
      const auth = { authorization: `Bearer ${token}` };
      const streams = {
        mcp: await mcpGetStream(url, token),
        approvals: await openStream(`${url}/api/agent/approvals/events`, auth),
        activity: await openStream(`${url}/api/mcp/stream`, auth),
      };
      for (const s of Object.values(streams)) {
        expect(s.status).toBe(200);
        expect(s.type).toMatch(/^text\/event-stream/);
      }
      await streams.approvals.saw("event: snapshot");
      const started = Date.now();
      const exited = exitOf(child);
      child.kill(signal);
      const killer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      const code = await exited;
      clearTimeout(killer);
      const ms = Date.now() - started;
      expect(code).toBe(0);
      expect(ms).toBeLessThan(GRACE_MS + 2000);
      // Each stream ended as a stream ends (its last chunk), not with a reset.
      for (const [name, s] of Object.entries(streams)) expect(`${name}: ${(await s.ended).slice(0, 7)}`).not.toContain("error:");
      expect(await streams.approvals.ended).toMatch(/: hal0 serve is shutting down\n\n$/);
      const log = lines();
      expect(log.find((l) => l.msg === "ended open event streams")).toMatchObject({ streams: 3 });
      expect(log.at(-1).msg).toBe("hal0 serve stopped");
    }, 40_000);
  }
});

describe("hal0 serve: a signal as soon as it listens (a real process)", () => {
  it("SIGTERM right at the listening line still drains and exits 0 (the handlers are set before the server starts)", async () => {
    const { config, state } = emptyBox();
    for (let trial = 0; trial < 5; trial++) {
      const { child } = await startServe(config, state, [], (c) => children.add(c));
      const exited = exitOf(child);
      child.kill("SIGTERM");
      expect(await exited).toBe(0); // it was null: killed by the signal, between the listening line and the handlers
    }
  }, 60_000);
});

/** A raw HTTP/1.1 connection: what it writes, and everything it got back. */
async function rawConnection(port: number): Promise<{ socket: Socket; received: () => string; closed: Promise<unknown> }> {
  const socket = connect({ host: "127.0.0.1", port });
  await once(socket, "connect");
  let got = "";
  socket.on("data", (c: Buffer) => (got += c.toString()));
  socket.on("error", () => undefined);
  return { socket, received: () => got, closed: once(socket, "close") };
}

describe("serve().close(): the drain (in process)", () => {
  it("finishes requests in flight, refuses new ones (503 server.shutting_down), and ends streams at the grace while a request is in flight", async () => {
    const { config, state } = emptyBox();
    const grace = 800;
    // The driver's observe waits while `held` is pending: a GET /api/slots is in flight for as long as the test wants.
    let release = (): void => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding = false;
    const serving = await serve({
      root: config, stateDir: state, port: 0, reconcile: false, shutdownGraceMs: grace, logger: serveLogger("silent"),
      driverFor: async () => {
        const driver = new ProcessDriver({ stateDir: state });
        return {
          runtime: driver.runtime,
          observe: async (o) => (holding ? held.then(() => driver.observe(o)) : driver.observe(o)),
          portHolder: (port) => driver.portHolder(port),
          start: (name, view, o) => driver.start(name, view, o),
          stop: (name, graceS) => driver.stop(name, graceS),
        };
      },
    });
    const token = readFileSync(join(state, "operator.token"), "utf8").trim();
    const stream = await openStream(`${serving.url}/api/agent/approvals/events`, { authorization: `Bearer ${token}` });
    await stream.saw("event: snapshot");
    let streamEndedAt = 0;
    void stream.ended.then(() => (streamEndedAt = Date.now()));
    // In flight: a request whose route is still at work.
    holding = true;
    const inFlight = await rawConnection(serving.port);
    inFlight.socket.write(`GET /api/slots HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n\r\n`);
    // Arriving: a request whose headers are not complete yet when the shutdown starts.
    const late = await rawConnection(serving.port);
    late.socket.write(`GET /api/plans HTTP/1.1\r\nHost: 127.0.0.1\r\n`);
    await sleep(100);
    const started = Date.now();
    let closed = false;
    const closing = serving.close().then(() => (closed = true));
    await sleep(grace / 2);
    expect(streamEndedAt).toBe(0); // a request is in flight: the stream may still carry what it brings
    late.socket.write(`Authorization: Bearer ${token}\r\n\r\n`);
    await late.closed;
    expect(late.received()).toMatch(/^HTTP\/1\.1 503 /);
    expect(late.received()).toMatch(/\r\nconnection: close\r\n/i);
    expect(late.received()).toContain(`"code":"server.shutting_down"`);
    expect(await stream.ended).not.toContain("error:");
    expect(streamEndedAt - started).toBeGreaterThanOrEqual(grace - 50);
    await sleep(grace);
    expect(closed).toBe(false); // the request in flight is waited for, past the grace
    release();
    await inFlight.closed;
    expect(inFlight.received()).toMatch(/^HTTP\/1\.1 200 /); // answered by its route
    expect(inFlight.received()).toContain(`"slots":[]`);
    expect(inFlight.received()).toMatch(/\r\nconnection: close\r\n/i);
    await closing;
  }, 30_000);

  it("refuses a request whose body never arrives at the grace (503, nothing done), instead of waiting for it forever", async () => {
    const { config, state } = emptyBox();
    const grace = 600;
    const serving = await serve({
      root: config, stateDir: state, port: 0, reconcile: false, shutdownGraceMs: grace, logger: serveLogger("silent"),
      driverFor: async () => new ProcessDriver({ stateDir: state }),
    });
    const token = readFileSync(join(state, "operator.token"), "utf8").trim();
    const before = readFileSync(join(config, "hal0.toml"), "utf8");
    // Headers, then a part of the body, and never the rest (node's own request timeout stops with the listener).
    const stalled = await rawConnection(serving.port);
    const body = JSON.stringify({ reconcile: { interval_s: 60 } });
    stalled.socket.write(`PUT /api/settings HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 8)}`);
    await sleep(100);
    const started = Date.now();
    const closed = await Promise.race([serving.close().then(() => true), sleep(grace + 4000, false)]);
    expect(closed).toBe(true);
    expect(Date.now() - started).toBeLessThan(grace + 2500);
    expect(Date.now() - started).toBeGreaterThanOrEqual(grace - 50); // it had the grace to send the rest
    await stalled.closed;
    expect(stalled.received()).toMatch(/^HTTP\/1\.1 503 /);
    expect(stalled.received()).toContain(`"code":"server.shutting_down"`);
    expect(stalled.received()).toMatch(/\r\nconnection: close\r\n/i);
    expect(readFileSync(join(config, "hal0.toml"), "utf8")).toBe(before);
  }, 30_000);

  it("with only streams open, ends them at once instead of waiting out the grace", async () => {
    const { config, state } = emptyBox();
    const serving = await serve({
      root: config, stateDir: state, port: 0, reconcile: false, shutdownGraceMs: 10_000, logger: serveLogger("silent"),
      driverFor: async () => new ProcessDriver({ stateDir: state }),
    });
    const token = readFileSync(join(state, "operator.token"), "utf8").trim();
    const stream = await openStream(`${serving.url}/api/mcp/stream`, { authorization: `Bearer ${token}` });
    await sleep(50);
    const started = Date.now();
    await serving.close();
    expect(Date.now() - started).toBeLessThan(1000);
    expect(await stream.ended).not.toContain("error:");
  }, 30_000);
});

describe("serve().close() with an agent_run_wait in flight (in process)", () => {
  it("answers the wait at once with the run as it is (done: false) instead of holding the stop for its 300 s, then stops the run", async () => {
    const { config, state } = emptyBox();
    const home = join(config, "..", "hermes");
    mkdirSync(join(home, "profiles", "alpha"), { recursive: true });
    writeFileSync(join(config, "hal0.toml"), `[reconcile]\ninterval_s = 3600\n\n[hermes]\nhome = ${JSON.stringify(home)}\ncommand = ${JSON.stringify(join(PROJECT, "fixtures/hermes/hermes"))}\n`);
    const serving = await serve({
      root: config, stateDir: state, port: 0, reconcile: false, shutdownGraceMs: 10_000, logger: serveLogger("silent"),
      driverFor: async () => new ProcessDriver({ stateDir: state }),
    });
    const token = readFileSync(join(state, "operator.token"), "utf8").trim();
    const client = new Client({ name: "shutdown-test", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${serving.url}/mcp/agents`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    const call = async (name: string, args: Record<string, unknown>) => JSON.parse(((await client.callTool({ name, arguments: args }, undefined, { timeout: 400_000 })) as { content: Array<{ text: string }> }).content[0]!.text);
    const started = await call("agent_run_start", { profile: "alpha", prompt: "for ever [hang]" });
    expect(started.state).toBe("running");
    while ((await call("agent_run_status", { run_id: started.run_id })).run.output_bytes === 0) await sleep(50);
    const pid = serving.server.runs!.get(started.run_id)!.pid!;
    const waiting = call("agent_run_wait", { run_id: started.run_id, timeout_s: 300 });
    await sleep(300);
    const at = Date.now();
    await serving.close();
    expect(Date.now() - at).toBeLessThan(8000);
    expect(await waiting).toMatchObject({ done: false, run: { run_id: started.run_id, state: "running" } });
    expect(() => process.kill(-pid, 0)).toThrow(); // its process group was stopped
    await client.close().catch(() => undefined);
  }, 30_000);
});
