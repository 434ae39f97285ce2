import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { httpStatus } from "../../reconciler/drivers/proc.js";
import { untilTrue } from "../helpers/until.js";

// A runner's /health as the sweep and a start's wait read it (reconciler/drivers/proc.ts httpStatus),
// against loopback servers that answer at their own pace, written byte by byte on a raw socket.
let servers: Server[] = [];
const timers = new Set<NodeJS.Timeout>();
afterEach(async () => {
  for (const t of timers) clearInterval(t);
  timers.clear();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  servers = [];
});

/** A server that writes `reply` one byte every `everyMs` ms to each connection; `closed` counts the connections the client closed. */
async function trickling(reply: string, everyMs: number): Promise<{ port: number; closed: () => number }> {
  let closed = 0;
  const server = createServer((socket) => {
    socket.on("error", () => {});
    socket.on("close", () => void closed++);
    socket.resume(); // read the request (and so see the client's end)
    let at = 0;
    const t = setInterval(() => {
      if (socket.destroyed) return clearInterval(t);
      if (at < reply.length) socket.write(reply[at++]!);
    }, everyMs);
    timers.add(t);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { port: (server.address() as { port: number }).port, closed: () => closed };
}

describe("httpStatus: the timeout is the whole answer's, not the gap between two bytes", () => {
  it("a runner trickling its status line and headers (a byte every 100 ms) is no answer after the timeout, not after its last byte", async () => {
    const headers = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\nContent-Length: 2\r\n\r\n{}";
    const { port } = await trickling(headers, 100);
    const started = Date.now();
    const status = await httpStatus(port, "/health", 800);
    const took = Date.now() - started;
    expect(status).toBeUndefined();
    // Each byte came well within 800 ms of the last: an idle timeout would have waited for all ~10 s of them.
    expect(took).toBeLessThan(3000);
  });

  it("a runner that answers its headers at once and then trickles its body: the status at once, and the socket is closed without waiting for the body", async () => {
    const { port, closed } = await trickling("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n", 1);
    // The headers come a byte a millisecond (~45 ms), then nothing more is written: a body that never ends.
    expect(await httpStatus(port, "/health", 10_000)).toBe(200);
    // Well before the timeout: an idle timer would have kept the socket for 10 s more.
    await untilTrue(() => closed() === 1, 2000);
  });

  it("a runner that answers in time is read as before: 503 while it loads, no answer when nothing listens", async () => {
    const { port } = await trickling("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", 0);
    expect(await httpStatus(port, "/health", 2000)).toBe(503);
    const free = createServer();
    await new Promise<void>((r) => free.listen(0, "127.0.0.1", r));
    const unused = (free.address() as { port: number }).port;
    await new Promise((r) => free.close(r));
    expect(await httpStatus(unused, "/health", 500)).toBeUndefined();
  });
});

/** Whether this machine can give a child its own network namespace (root, unshare and ip installed). */
function ownNetwork(): boolean {
  return process.getuid?.() === 0 && spawnSync("unshare", ["-n", "true"]).status === 0 && spawnSync("ip", ["-V"]).status === 0;
}

describe("a probe of a slot's port that connects to itself", () => {
  // In a network namespace of its own whose ephemeral range is the one port, a connect to that port
  // with nothing listening is always given it as its own: the self-connection (TCP's simultaneous
  // open) a probe meets now and then when a slot's port lies in the ephemeral range (32768-60999).
  it.runIf(ownNetwork())("is read as nothing listening, and leaves the port free for the runner (no TIME-WAIT)", () => {
    const proc = join(import.meta.dirname, "../../dist/reconciler/drivers/proc.js");
    expect(existsSync(proc), "npm run build first").toBe(true);
    const script = `
      import { createServer } from "node:net";
      const { acceptsConnections, httpStatus } = await import(${JSON.stringify(proc)});
      const port = 40123;
      const probed = { accepts: await acceptsConnections(port, 1000), status: (await httpStatus(port, "/health", 1000)) ?? null };
      const server = createServer();
      const bound = await new Promise((r) => server.once("error", (e) => r(e.code)).listen(port, "127.0.0.1", () => r("listening")));
      server.close();
      console.log(JSON.stringify({ ...probed, bound }));`;
    const r = spawnSync("unshare", ["-n", "sh", "-c", 'ip link set lo up && echo "40123 40123" > /proc/sys/net/ipv4/ip_local_port_range && exec "$0" --input-type=module -e "$1"', process.execPath, script], { encoding: "utf8", timeout: 20_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ accepts: false, status: null, bound: "listening" });
  });
});
