import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type Dockerode from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { imageFacts, pullImage } from "../../reconciler/images.js";
import { dockerEngine, ensureRunnerImage, RUNNER_IMAGE } from "./docker-helpers.js";

/**
 * pullImage against a real engine and a registry that fails mid-pull: it
 * serves a manifest, then answers every blob (the image's config and layer)
 * with 500. The engine says so only inside its progress stream, then ends the
 * stream as a finished pull would.
 */
const SUITE = "pullImage from a registry that fails mid-pull (real Docker engine)";
const docker = await dockerEngine(SUITE);

describe.skipIf(docker === undefined)(SUITE, () => {
  const engine = docker as Dockerode;
  let registry: Server;
  let host: string;
  let blobs = 0;
  const refs: string[] = [];

  beforeAll(async () => {
    await ensureRunnerImage(engine);
    const digest = () => `sha256:${randomBytes(32).toString("hex")}`;
    const manifest = JSON.stringify({
      schemaVersion: 2, mediaType: "application/vnd.docker.distribution.manifest.v2+json",
      config: { mediaType: "application/vnd.docker.container.image.v1+json", size: 1000, digest: digest() },
      layers: [{ mediaType: "application/vnd.docker.image.rootfs.diff.tar.gzip", size: 1000, digest: digest() }],
    });
    const manifestDigest = `sha256:${createHash("sha256").update(manifest).digest("hex")}`;
    registry = createServer((req, res) => {
      const api = { "docker-distribution-api-version": "registry/2.0" };
      if (req.url === "/v2/") return res.writeHead(200, { ...api, "content-type": "application/json" }).end("{}");
      if (/\/manifests\//.test(req.url ?? "")) {
        res.writeHead(200, { ...api, "content-type": "application/vnd.docker.distribution.manifest.v2+json", "docker-content-digest": manifestDigest, "content-length": Buffer.byteLength(manifest) });
        return res.end(req.method === "HEAD" ? undefined : manifest);
      }
      if (/\/blobs\//.test(req.url ?? "")) blobs++;
      res.writeHead(500, { ...api, "content-type": "application/json" }).end('{"errors":[{"code":"UNKNOWN","message":"storage backend failed"}]}');
    });
    registry.listen(0, "127.0.0.1");
    await once(registry, "listening");
    host = `127.0.0.1:${(registry.address() as { port: number }).port}`;
  }, 120_000);

  afterAll(async () => {
    for (const ref of refs) await engine.getImage(ref).remove().catch(() => undefined);
    registry?.closeAllConnections();
    await new Promise((resolve) => registry?.close(resolve));
  });

  it("an image the engine has not got: rejects with the engine's own words instead of resolving as a finished pull", async () => {
    const ref = `${host}/hal0-test/absent-${randomBytes(3).toString("hex")}:1`;
    const err = await pullImage(engine, ref, () => {}).then(() => undefined, (e: unknown) => e as Error);
    expect(blobs).toBeGreaterThan(0);
    expect(err?.message).toMatch(/500 Internal Server Error/);
    expect(await imageFacts(engine, ref)).toEqual({ present: false });
  }, 60_000);

  it("an update of an image the engine has under that name (a sync of a moved tag) that fails mid-pull rejects too, rather than resolving as if nothing moved", async () => {
    const ref = `${host}/hal0-test/present-${randomBytes(3).toString("hex")}:1`;
    await engine.getImage(RUNNER_IMAGE).tag({ repo: ref.slice(0, ref.lastIndexOf(":")), tag: "1" });
    refs.push(ref);
    const before = blobs;
    const err = await pullImage(engine, ref, () => {}).then(() => undefined, (e: unknown) => e as Error);
    expect(blobs).toBeGreaterThan(before);
    expect(err?.message).toMatch(/500 Internal Server Error/);
  }, 60_000);
});
