import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";

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
});
