import { createHash } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { HubClient, HubError } from "../../reconciler/host/hf-hub.js";
import { startFakeHub, type FakeHub } from "../helpers/fake-hub.js";
import { ggufBytes, modelKvs } from "../server/gguf-writer.js";

/** The Hub client against the fake Hub (test/helpers/fake-hub.ts): two local servers, nothing leaves the machine. */

const TOKEN = "hf_testSecretToken123";
const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");
const GGUF = ggufBytes({ kvs: modelKvs(), tensors: [{ name: "w", dims: [64, 64] }] });
const BIG = Buffer.from(Array.from({ length: 64 * 1024 }, (_, i) => (i * 7) % 251));
const README = Buffer.from("# Qwen3 4B GGUF\n");

async function collect(body: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of body) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

async function hubError(p: Promise<unknown>): Promise<HubError> {
  const e = await p.then(() => undefined, (err: unknown) => err);
  expect(e).toBeInstanceOf(HubError);
  return e as HubError;
}

/** A port nothing listens on: opened, read, closed. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

let hub: FakeHub;
let client: HubClient;

beforeAll(async () => {
  hub = await startFakeHub({
    repos: {
      "Qwen/Qwen3-4B-GGUF": { sha: "a".repeat(40), downloads: 900, likes: 40, files: { "Qwen3-4B-Q4_K_M.gguf": GGUF, "big/blob.bin": BIG, "README.md": { data: README, lfs: false } } },
      "unsloth/Qwen3-8B-GGUF": { downloads: 5000, likes: 90, files: { "Qwen3-8B-Q4_K_M.gguf": GGUF } },
      "someone/qwen-tiny-GGUF": { downloads: 10, files: { "tiny.gguf": GGUF } },
      "Qwen/Qwen3-4B": { downloads: 99999, files: { "model.safetensors": BIG } },
    },
  });
  client = new HubClient({ endpoint: hub.endpoint, token: TOKEN });
});
afterAll(() => hub.close());

describe("HubClient: setup", () => {
  it("reads HF_ENDPOINT (trailing slash removed, huggingface.co by default) and HF_TOKEN", () => {
    expect(HubClient.fromEnv({ HF_ENDPOINT: "http://mirror.local:8080/" }).endpoint).toBe("http://mirror.local:8080");
    expect(HubClient.fromEnv({}).endpoint).toBe("https://huggingface.co");
    const c = HubClient.fromEnv({ HF_TOKEN: TOKEN });
    // The token is a private field: neither a log nor JSON of the client shows it.
    expect(JSON.stringify(c)).not.toContain(TOKEN);
    expect(() => new HubClient({ endpoint: "ftp://x" })).toThrow(HubError);
  });

  it("takes HAL0_HUB_TIMEOUT_S and HAL0_HUB_STALL_S beyond a node timer's reach (meant as no limit) as the longest one, not as 1 ms: the calls go through", async () => {
    const far = HubClient.fromEnv({ HF_ENDPOINT: hub.endpoint, HF_TOKEN: TOKEN, HAL0_HUB_TIMEOUT_S: "3000000", HAL0_HUB_STALL_S: "1e12" });
    expect(far.timeoutMs).toBe(2_147_483_647);
    expect(far.stallMs).toBe(2_147_483_647);
    expect((await far.repoInfo("Qwen/Qwen3-4B-GGUF")).sha).toBe("a".repeat(40));
    const d = await far.download({ repo: "Qwen/Qwen3-4B-GGUF", revision: "main", file: "Qwen3-4B-Q4_K_M.gguf" }, { from: 0 });
    expect((await collect(d.body)).equals(GGUF)).toBe(true);
    // A value that is no number above 0 keeps the default.
    expect(HubClient.fromEnv({ HAL0_HUB_TIMEOUT_S: "abc", HAL0_HUB_STALL_S: "-1" })).toMatchObject({ timeoutMs: 30_000, stallMs: 60_000 });
  });

  it("builds resolve URLs with each segment encoded", () => {
    expect(client.resolveUrl("Qwen/Qwen3-4B-GGUF", "refs/pr/1", "sub dir/a#b.gguf")).toBe(`${hub.endpoint}/Qwen/Qwen3-4B-GGUF/resolve/refs%2Fpr%2F1/sub%20dir/a%23b.gguf`);
    expect(() => client.resolveUrl("Qwen/../x", "main", "a.gguf")).toThrow(HubError);
    expect(() => client.resolveUrl("Qwen/x", "main", "../a.gguf")).toThrow(HubError);
  });
});

describe("HubClient: repo info and search", () => {
  it("lists every file with its size and LFS sha256, and the commit", async () => {
    const info = await client.repoInfo("Qwen/Qwen3-4B-GGUF");
    expect(info.id).toBe("Qwen/Qwen3-4B-GGUF");
    expect(info.sha).toBe("a".repeat(40));
    expect([...info.files].sort((a, b) => a.path.localeCompare(b.path))).toEqual([
      { path: "big/blob.bin", size: BIG.length, sha256: sha256(BIG) },
      { path: "Qwen3-4B-Q4_K_M.gguf", size: GGUF.length, sha256: sha256(GGUF) },
      { path: "README.md", size: README.length, sha256: null },
    ].sort((a, b) => a.path.localeCompare(b.path)));
    // The tree is read at the commit the info reported, with the token (the Hub's own origin).
    const tree = hub.requests.filter((r) => r.path.startsWith("/api/models/Qwen/Qwen3-4B-GGUF/tree/"));
    expect(tree.at(-1)).toMatchObject({ server: "hub", path: expect.stringContaining(`/tree/${"a".repeat(40)}?recursive=true`), authorization: `Bearer ${TOKEN}` });
  });

  it("answers model.not_found for an unknown repo or revision", async () => {
    const e = await hubError(client.repoInfo("nobody/nothing"));
    expect(e).toMatchObject({ code: "model.not_found", status: 404 });
    expect(e.message).toContain("nobody/nothing");
    expect(await hubError(client.repoInfo("Qwen/Qwen3-4B-GGUF", "v9"))).toMatchObject({ code: "model.not_found" });
    expect(await hubError(client.listTree("nobody/nothing", "main"))).toMatchObject({ code: "model.not_found" });
    expect(await hubError(client.repoInfo("../etc"))).toMatchObject({ code: "validation.invalid" });
  });

  it("sees a replaced file as a new sha256 at a new commit", async () => {
    const h = await startFakeHub({ repos: { "o/m": { files: { "m.gguf": GGUF } } } });
    try {
      const c = new HubClient({ endpoint: h.endpoint });
      const before = await c.repoInfo("o/m");
      const next = Buffer.concat([GGUF, Buffer.alloc(32)]);
      h.replace("o/m", "m.gguf", next);
      const after = await c.repoInfo("o/m");
      expect(after.sha).not.toBe(before.sha);
      expect(after.files).toEqual([{ path: "m.gguf", size: next.length, sha256: sha256(next) }]);
    } finally {
      await h.close();
    }
  });

  it("searches GGUF repos by a substring of the id, most downloaded first, up to the limit", async () => {
    const hits = await client.search("qwen", { limit: 2 });
    expect(hits.map((h) => h.id)).toEqual(["unsloth/Qwen3-8B-GGUF", "Qwen/Qwen3-4B-GGUF"]);
    expect(hits[0]).toEqual({ id: "unsloth/Qwen3-8B-GGUF", downloads: 5000, likes: 90, updated_at: "2025-01-01T00:00:00.000Z" });
    const all = await client.search("QWEN");
    expect(all.map((h) => h.id)).toEqual(["unsloth/Qwen3-8B-GGUF", "Qwen/Qwen3-4B-GGUF", "someone/qwen-tiny-GGUF"]);
    const q = new URL(hub.requests.filter((r) => r.path.startsWith("/api/models?")).at(-1)!.path, hub.endpoint).searchParams;
    expect([q.get("search"), q.get("filter"), q.get("sort"), q.get("limit")]).toEqual(["QWEN", "gguf", "downloads", "20"]);
    expect(await client.search("no-such-thing")).toEqual([]);
  });
});

describe("HubClient: parseHfUrl", () => {
  it("reads repo pages and resolve, blob and tree links", () => {
    const e = hub.endpoint;
    expect(client.parseHfUrl(`${e}/Qwen/Qwen3-4B-GGUF`)).toEqual({ repo: "Qwen/Qwen3-4B-GGUF", revision: "main", file: null });
    expect(client.parseHfUrl(`${e}/Qwen/Qwen3-4B-GGUF/`)).toEqual({ repo: "Qwen/Qwen3-4B-GGUF", revision: "main", file: null });
    expect(client.parseHfUrl(`${e}/Qwen/Qwen3-4B-GGUF/resolve/main/Qwen3-4B-Q4_K_M.gguf?download=true`)).toEqual({ repo: "Qwen/Qwen3-4B-GGUF", revision: "main", file: "Qwen3-4B-Q4_K_M.gguf" });
    expect(client.parseHfUrl(`${e}/Qwen/Qwen3-4B-GGUF/blob/v1.0/sub/dir/x%20y.gguf`)).toEqual({ repo: "Qwen/Qwen3-4B-GGUF", revision: "v1.0", file: "sub/dir/x y.gguf" });
    expect(client.parseHfUrl(`${e}/Qwen/Qwen3-4B-GGUF/tree/refs%2Fpr%2F3`)).toEqual({ repo: "Qwen/Qwen3-4B-GGUF", revision: "refs/pr/3", file: null });
  });

  it("refuses other origins, `..` segments and what is not a model link", () => {
    const e = hub.endpoint;
    const refused = [
      `https://evil.example/Qwen/Qwen3-4B-GGUF`,
      `${e.replace("127.0.0.1", "localhost")}/Qwen/Qwen3-4B-GGUF`,
      `${e}/Qwen/Qwen3-4B-GGUF/resolve/main/../../../etc/passwd`,
      `${e}/Qwen/Qwen3-4B-GGUF/resolve/main/%2e%2e/x.gguf`,
      `${e}/Qwen/Qwen3-4B-GGUF/resolve/main/a%2F..%2Fb.gguf`,
      `${e}/Qwen/Qwen3-4B-GGUF/resolve/main`,
      `${e}/Qwen/Qwen3-4B-GGUF/tree/main/sub`,
      `${e}/Qwen/Qwen3-4B-GGUF/commits/main`,
      `${e}/datasets/foo`,
      `${e}/Qwen`,
      "not a url",
    ];
    for (const url of refused) {
      let err: unknown;
      try {
        client.parseHfUrl(url);
      } catch (x) {
        err = x;
      }
      expect(err, url).toBeInstanceOf(HubError);
      expect((err as HubError).code, url).toBe("validation.invalid");
    }
  });
});

describe("HubClient: download", () => {
  const target = { repo: "Qwen/Qwen3-4B-GGUF", revision: "main", file: "Qwen3-4B-Q4_K_M.gguf" };

  it("downloads a whole LFS file from the CDN with its commit, sha256 and size", async () => {
    const d = await client.download(target, { from: 0 });
    expect({ status: d.status, total: d.total, commit: d.commit, etag: d.etag }).toEqual({ status: 200, total: GGUF.length, commit: "a".repeat(40), etag: sha256(GGUF) });
    const bytes = await collect(d.body);
    expect(bytes.equals(GGUF)).toBe(true);
    expect(bytes.subarray(0, 4).toString("latin1")).toBe("GGUF");
  });

  it("resumes from an offset with a 206 and the remaining bytes", async () => {
    const d = await client.download({ ...target, file: "big/blob.bin" }, { from: 1000 });
    expect({ status: d.status, total: d.total, etag: d.etag }).toEqual({ status: 206, total: BIG.length, etag: sha256(BIG) });
    expect((await collect(d.body)).equals(BIG.subarray(1000))).toBe(true);
    expect(hub.requests.filter((r) => r.server === "cdn").at(-1)).toMatchObject({ range: "bytes=1000-" });
  });

  it("sends the token to the Hub's resolve and never to the CDN", async () => {
    const from = hub.requests.length;
    await collect((await client.download(target, { from: 0 })).body);
    const seen = hub.requests.slice(from);
    expect(seen.map((r) => r.server)).toEqual(["hub", "cdn"]);
    expect(seen[0]).toMatchObject({ path: "/Qwen/Qwen3-4B-GGUF/resolve/main/Qwen3-4B-Q4_K_M.gguf", authorization: `Bearer ${TOKEN}` });
    expect(hub.requests.filter((r) => r.server === "cdn").every((r) => r.authorization === undefined)).toBe(true);
  });

  it("serves a non-LFS file from the Hub itself", async () => {
    const d = await client.download({ ...target, file: "README.md" }, { from: 0 });
    // Outside LFS: no sha256, its ETag is the git blob id (what the worker checks it by).
    expect(d).toMatchObject({ status: 200, total: README.length, commit: "a".repeat(40), gitBlob: createHash("sha1").update(`blob ${README.length}\0`).update(README).digest("hex") });
    expect((await client.download(target, { from: 0 })).gitBlob).toBeNull();
    expect((await collect(d.body)).equals(README)).toBe(true);
  });

  it("reports a 200 to a Range request as 200, so the caller restarts", async () => {
    const noRange = ((url: string, init?: RequestInit) => {
      const headers = new Headers(init?.headers);
      headers.delete("range");
      return fetch(url, { ...init, headers });
    }) as typeof fetch;
    const c = new HubClient({ endpoint: hub.endpoint, fetch: noRange });
    const d = await c.download({ ...target, file: "big/blob.bin" }, { from: 500 });
    expect(d).toMatchObject({ status: 200, total: BIG.length });
    expect((await collect(d.body)).equals(BIG)).toBe(true);
  });

  it("maps 404 to model.not_found and 416 to hub.error", async () => {
    expect(await hubError(client.download({ ...target, repo: "nobody/nothing" }, { from: 0 }))).toMatchObject({ code: "model.not_found", status: 404 });
    expect(await hubError(client.download({ ...target, file: "missing.gguf" }, { from: 0 }))).toMatchObject({ code: "model.not_found", status: 404 });
    expect(await hubError(client.download(target, { from: GGUF.length }))).toMatchObject({ code: "hub.error", status: 416 });
  });

  it("serves a corrupted byte under the advertised sha256", async () => {
    const h = await startFakeHub({ repos: { "o/m": { files: { "m.gguf": GGUF } } } });
    try {
      h.corrupt("o/m", "m.gguf", 10);
      const d = await new HubClient({ endpoint: h.endpoint }).download({ repo: "o/m", revision: "main", file: "m.gguf" }, { from: 0 });
      const bytes = await collect(d.body);
      expect(d.etag).toBe(sha256(GGUF));
      expect(sha256(bytes)).not.toBe(sha256(GGUF));
      expect(bytes[10]).toBe(GGUF[10]! ^ 0xff);
    } finally {
      await h.close();
    }
  });

  it("stops the stream when the signal aborts", async () => {
    hub.setRate(4000);
    try {
      const ac = new AbortController();
      const d = await client.download({ ...target, file: "big/blob.bin" }, { from: 0, signal: ac.signal });
      const it = d.body[Symbol.asyncIterator]();
      const first = await it.next();
      expect(first.done).toBe(false);
      ac.abort();
      const err = await it.next().then(() => undefined, (e: unknown) => e);
      expect((err as Error).name).toBe("AbortError");
    } finally {
      hub.setRate(null);
    }
  });

  it("gives up a download that goes silent (the connection open, no byte for stallMs): hub.unreachable; a slow consumer is not a stall", async () => {
    // A real server that sends the headers and half the file, then nothing, keeping the connection open.
    const half = Buffer.alloc(64 * 1024, 7);
    const open = new Set<import("node:http").ServerResponse>();
    const silent = createServer((req, res) => {
      open.add(res);
      res.writeHead(200, { "content-length": String(half.length * 2), "x-linked-size": String(half.length * 2), etag: '"abc"' });
      res.write(half);
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    try {
      const c = new HubClient({ endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, stallMs: 300 });
      const d = await c.download(target, { from: 0 });
      const started = Date.now();
      let got = 0;
      const err = await (async () => {
        for await (const chunk of d.body) {
          got += chunk.length;
          // A consumer slower than stallMs with a chunk in hand: not the server's silence.
          await new Promise((resolve) => setTimeout(resolve, 400));
        }
      })().then(() => undefined, (e: unknown) => e);
      expect(got).toBe(half.length);
      expect(err).toBeInstanceOf(HubError);
      expect(err).toMatchObject({ code: "hub.unreachable" });
      expect((err as Error).message).toMatch(/^the download from 127\.0\.0\.1:\d+ stalled: no byte for 300 ms$/);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      for (const res of open) res.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it("a step of the wall clock while a download waits for its next byte is no stall: the watchdog measures elapsed time", async () => {
    const half = Buffer.alloc(64 * 1024, 7);
    let rest: (() => void) | undefined;
    const server = createServer((_req, res) => {
      res.writeHead(200, { "content-length": String(half.length * 2), "x-linked-size": String(half.length * 2), etag: '"abc"' });
      res.write(half);
      rest = () => res.end(half);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }));
    // The watchdog's timer and Date are faked: the timer is fired by hand, Date stepped as NTP steps the clock; the monotonic clock and the sockets stay real.
    vi.useFakeTimers({ toFake: ["Date", "setInterval", "clearInterval"] });
    onTestFinished(() => void vi.useRealTimers());
    const c = new HubClient({ endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, stallMs: 60_000 });
    const d = await c.download(target, { from: 0 });
    const body = d.body[Symbol.asyncIterator]();
    let got = 0;
    while (got < half.length) got += ((await body.next()).value as Uint8Array).length;
    const next = body.next(); // waits for the second half
    vi.setSystemTime(Date.now() + 24 * 3600_000); // a day ahead, though no second passed
    vi.advanceTimersToNextTimer(); // the watchdog looks
    rest!();
    for (let r = await next; !r.done; r = await body.next()) got += r.value.length;
    expect(got).toBe(2 * half.length);
  });

  it("refuses a redirect to a link-local address (a cloud host's metadata service), however it is spelled; other hosts are followed", async () => {
    let to = "";
    const redirector = createServer((_req, res) => void res.writeHead(302, { location: to, "content-length": 0 }).end());
    await new Promise<void>((resolve) => redirector.listen(0, "127.0.0.1", resolve));
    const endpoint = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}`;
    // What the client asks for; a link-local one is never sent, even when the refusal is missing.
    const asked: string[] = [];
    const guard = (async (input: string | URL | Request, init?: RequestInit) => {
      const url = String(input instanceof Request ? input.url : input);
      asked.push(url);
      if (!url.startsWith(endpoint)) throw new TypeError(`not sent in this test: ${url}`);
      return fetch(input, init);
    }) as typeof fetch;
    try {
      const c = new HubClient({ endpoint, fetch: guard });
      for (const target of ["http://169.254.169.254/latest/meta-data/", "http://2852039166/", "http://0xa9fea9fe/", "http://[fe80::1]/x", "http://[febf::1]/", "http://[::ffff:169.254.169.254]/"]) {
        to = target;
        asked.length = 0;
        const e = await hubError(c.download({ repo: "o/m", revision: "main", file: "m.gguf" }, { from: 0 }));
        expect([e.code, e.message], target).toEqual(["hub.error", expect.stringContaining("a link-local address; it is not followed")]);
        expect(asked.length, target).toBe(1);
      }
      // Not link-local: followed (and then not sent, by this test's guard).
      for (const target of ["http://169.255.0.1/", "http://[fec0::1]/", "http://fe80.example/"]) {
        to = target;
        asked.length = 0;
        const e = await hubError(c.download({ repo: "o/m", revision: "main", file: "m.gguf" }, { from: 0 }));
        expect(e.code, target).toBe("hub.unreachable");
        expect(asked.length, target).toBe(2);
      }
    } finally {
      await new Promise((resolve) => redirector.close(resolve));
    }
  });

  it("a gated repo's file is hub.denied (401 without a token, 403 with one not granted), a plain 401 stays model.not_found; never the token in the error", async () => {
    const h = await startFakeHub({ repos: { "o/gated": { files: { "m.gguf": GGUF } } } });
    try {
      h.gate("o/gated", TOKEN);
      const t = { repo: "o/gated", revision: "main", file: "m.gguf" };
      const none = await hubError(new HubClient({ endpoint: h.endpoint }).download(t, { from: 0 }));
      expect(none).toMatchObject({ code: "hub.denied", status: 401 });
      expect(none.message).toContain("set HF_TOKEN");
      const other = await hubError(new HubClient({ endpoint: h.endpoint, token: "hf_notGrantedToken456" }).download(t, { from: 0 }));
      expect(other).toMatchObject({ code: "hub.denied", status: 403 });
      expect(other.message).toContain("has not been granted");
      expect(other.message).not.toContain("hf_notGrantedToken456");
      // Its metadata stays public, as the Hub's does; the granted token downloads it.
      expect((await new HubClient({ endpoint: h.endpoint }).repoInfo("o/gated")).files.map((f) => f.path)).toEqual(["m.gguf"]);
      expect((await collect((await new HubClient({ endpoint: h.endpoint, token: TOKEN }).download(t, { from: 0 })).body)).equals(GGUF)).toBe(true);
      h.gate("o/gated", null);
      h.misbehave("o/gated", "m.gguf", { refuse: { status: 401, headers: { "x-error-code": "RepoNotFound" } } });
      expect(await hubError(new HubClient({ endpoint: h.endpoint }).download(t, { from: 0 }))).toMatchObject({ code: "model.not_found", status: 401 });
      h.misbehave("o/gated", "m.gguf", { refuse: { status: 429, headers: { "retry-after": "30" } } });
      const limited = await hubError(new HubClient({ endpoint: h.endpoint }).download(t, { from: 0 }));
      expect(limited).toMatchObject({ code: "hub.error", status: 429 });
      expect(limited.message).toContain("Retry-After: 30 s");
    } finally {
      await h.close();
    }
  });

  it("a token the Hub does not accept is hub.denied for repo info and search, not model.not_found", async () => {
    const refusing = createServer((_req, res) => {
      const message = "Invalid credentials in Authorization header";
      res.writeHead(401, { "content-type": "application/json", "x-error-message": message }).end(JSON.stringify({ error: message }));
    });
    await new Promise<void>((r) => refusing.listen(0, "127.0.0.1", r));
    try {
      const c = new HubClient({ endpoint: `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`, token: TOKEN });
      for (const call of [() => c.repoInfo("Qwen/Qwen3-4B-GGUF"), () => c.search("qwen"), () => c.download(target, { from: 0 })]) {
        const e = await hubError(call());
        expect(e).toMatchObject({ code: "hub.denied", status: 401 });
        expect(e.message).toContain("invalid credentials");
        expect(JSON.stringify([e.message, e])).not.toContain(TOKEN);
      }
    } finally {
      await new Promise((r) => refusing.close(r));
    }
  });

  it("a token that cannot be sent (a line break or a character outside ASCII in it) is hub.denied before any request, never the token in the error; blanks around one are dropped", async () => {
    const before = hub.requests.length;
    for (const bad of ["hf_firstPartOfIt0123\nsecondPartOfIt4567", "hf_firstPartOfIt0123\u0000secondPartOfIt4567", "hf_firstPartOfIt0123\u2019secondPartOfIt4567"]) {
      const c = new HubClient({ endpoint: hub.endpoint, token: bad });
      for (const call of [() => c.repoInfo("Qwen/Qwen3-4B-GGUF"), () => c.search("qwen"), () => c.download(target, { from: 0 })]) {
        const e = await hubError(call());
        expect(e.code).toBe("hub.denied");
        expect(e.message).toContain("HF_TOKEN cannot be sent");
        expect(JSON.stringify([e.message, e])).not.toMatch(/firstPartOfIt|secondPartOfIt/);
      }
    }
    expect(hub.requests.length).toBe(before);
    await new HubClient({ endpoint: hub.endpoint, token: `${TOKEN}\n` }).download(target, { from: 0 }).then((d) => collect(d.body));
    expect(hub.requests.at(-2)).toMatchObject({ server: "hub", authorization: `Bearer ${TOKEN}` });
  });

  it("answers hub.unreachable for a closed port, naming the host and never the token", async () => {
    const port = await closedPort();
    const c = new HubClient({ endpoint: `http://127.0.0.1:${port}`, token: TOKEN });
    for (const call of [() => c.repoInfo("Qwen/Qwen3-4B-GGUF"), () => c.search("qwen"), () => c.download(target, { from: 0 })]) {
      const e = await hubError(call());
      expect(e.code).toBe("hub.unreachable");
      expect(e.message).toContain(`127.0.0.1:${port}`);
      expect(e.message).not.toContain(TOKEN);
      expect(JSON.stringify(e)).not.toContain(TOKEN);
    }
  });
});
