import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { standIn } from "../../reconciler/drivers/stand-in.js";

const require = createRequire(import.meta.url);

describe("the docker driver's deferred dependencies", () => {
  it("imports dockerode without loading gRPC or ssh2, and loads them when used", async () => {
    await import("../../reconciler/drivers/docker.js");
    // The stand-ins sit at each package's main file; the real code lives in the files beside it.
    const loaded = () => Object.keys(require.cache).filter((k) => /node_modules\/(ssh2\/lib\/client\.js|@grpc\/grpc-js\/build\/src\/channel\.js)$/.test(k));
    expect(loaded(), "loaded at import").toEqual([]);
    const fromModem = createRequire(require.resolve("docker-modem"));
    const { Client } = fromModem("ssh2") as { Client: new () => { connect: unknown; end: () => void } };
    const client = new Client();
    expect(typeof client.connect).toBe("function");
    client.end();
    const grpc = createRequire(require.resolve("dockerode"))("@grpc/grpc-js") as { credentials: unknown };
    expect(grpc.credentials).toBeDefined();
    expect(loaded().length).toBeGreaterThan(0);
  });

  it("leaves node's https (and tls) and zlib unloaded until something uses them; an object built on the https stand-in keeps its own properties", () => {
    // A fresh process (this worker may have loaded them for itself): the built driver, as the CLI runs it.
    const driver = join(import.meta.dirname, "../../dist/reconciler/drivers/docker.js");
    const script = `
      const { createRequire } = require("node:module");
      import(${JSON.stringify(driver)}).then(() => {
        const has = (m) => process.moduleLoadList.includes("NativeModule " + m);
        const before = ["https", "tls", "zlib"].filter(has);
        const https = createRequire(require.resolve("docker-modem"))("https");
        const child = Object.create(https);
        child.request = "own";
        const own = Object.hasOwn(child, "request") && child.request === "own";
        const stillDeferred = !has("https");
        const agent = typeof https.Agent === "function" && https.request === require("node:https").request;
        console.log(JSON.stringify({ before, own, stillDeferred, agent, after: has("https") }));
      });`;
    const out = JSON.parse(execFileSync(process.execPath, ["-e", script], { cwd: join(import.meta.dirname, "../.."), encoding: "utf8" }));
    expect(out).toEqual({ before: [], own: true, stillDeferred: true, agent: true, after: true });
  });

  it("a stand-in (what docker-deps.ts and the bundle put in place) loads its module once, at the first use, and behaves as it", () => {
    class Client {
      constructor(readonly host: string) {}
    }
    const real: Record<string | symbol, unknown> = { Client, version: "1.0", request: () => "real" };
    let loads = 0;
    const stand = standIn(() => (loads++, real), ["Client"]) as Record<string, unknown> & { Client: typeof Client };
    // A class read at import time is a deferred constructor: still nothing loaded.
    const Deferred = stand.Client;
    expect(loads).toBe(0);
    const made = new Deferred("h");
    expect(made).toBeInstanceOf(Client);
    expect(made.host).toBe("h");
    expect(loads).toBe(1);
    // Reads, `in` and key listings answer from the real module; it is loaded only once.
    expect(stand.version).toBe("1.0");
    expect("request" in stand).toBe(true);
    expect(Object.keys(stand)).toEqual(["Client", "version", "request"]);
    expect(stand.Client).toBe(Client);
    // A property set on the stand-in goes to the module; one set on an object built on it stays on that object.
    stand.version = "2.0";
    expect(real.version).toBe("2.0");
    const child = Object.create(stand) as Record<string, unknown>;
    child.request = "own";
    expect(Object.hasOwn(child, "request")).toBe(true);
    expect((real.request as () => string)()).toBe("real");
    expect(loads).toBe(1);
  });
});

describe("the engine client", () => {
  it("sends Host: 127.0.0.1 on a unix socket (no host name there to test against node's IPv6 pattern), and host:port over TCP", async () => {
    const { createServer } = await import("node:http");
    const { mkdtempSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { dockerClient } = await import("../../reconciler/drivers/docker.js");
    const hosts: Array<string | undefined> = [];
    const server = createServer((req, res) => {
      hosts.push(req.headers.host);
      res.writeHead(200, { "Content-Type": "text/plain" }).end("OK");
    });
    const socket = join(mkdtempSync(join(tmpdir(), "hal0-engine-")), "docker.sock");
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    try {
      await dockerClient(`unix://${socket}`).ping();
      await dockerClient(socket).listContainers({ all: true });
      expect(hosts).toEqual(["127.0.0.1", "127.0.0.1"]);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    const tcp = createServer((req, res) => {
      hosts.push(req.headers.host);
      res.writeHead(200, { "Content-Type": "text/plain" }).end("OK");
    });
    await new Promise<void>((resolve) => tcp.listen(0, "127.0.0.1", resolve));
    const { port } = tcp.address() as { port: number };
    try {
      await dockerClient(`tcp://127.0.0.1:${port}`).ping();
      expect(hosts.at(-1)).toBe(`127.0.0.1:${port}`);
    } finally {
      tcp.closeAllConnections();
      await new Promise((resolve) => tcp.close(resolve));
    }
  });

  it("refuses unix:// with no socket path, or a relative one (the client fell back to TCP on 127.0.0.1:80), as it refuses an engine on another machine", async () => {
    const { dockerClient } = await import("../../reconciler/drivers/docker.js");
    for (const address of ["unix://", "unix://docker.sock", "unix://./run/docker.sock", "ssh://box"]) {
      expect(() => dockerClient(address), address).toThrow(`docker engine address ${JSON.stringify(address)} is not unix:///PATH or tcp://127.0.0.1:PORT`);
    }
  });
});
