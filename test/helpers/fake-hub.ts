import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A fake Hugging Face Hub for tests: two real HTTP servers on 127.0.0.1, the
 * Hub (model info, tree, search, `resolve`) and its CDN on another port, so
 * another origin, as on huggingface.co. `resolve` of an LFS file answers 302
 * to the CDN with the commit, sha256 and size in headers; a non-LFS file is
 * served by the Hub itself, as the real one does. The CDN honours
 * `Range: bytes=N-` and can be throttled, so a test can stop a client
 * mid-file. Every request is recorded with its Authorization header, so a
 * test can check where the token went.
 */

export type FakeFileSpec = Buffer | { data: Buffer; lfs?: boolean };
export interface FakeRepoSpec {
  sha?: string;
  files: Record<string, FakeFileSpec>;
  downloads?: number;
  likes?: number;
}

/**
 * The files of a split model as the Hub holds them (`stem-00001-of-0000N.gguf`,
 * …), from its parts' bytes in order: a FakeRepoSpec's `files`, or some of
 * them (`only`: the part numbers the Hub has, for a set with a part missing).
 */
export function splitSet(stem: string, parts: readonly Buffer[], only?: readonly number[]): Record<string, Buffer> {
  const n = String(parts.length).padStart(5, "0");
  return Object.fromEntries(parts.map((data, i) => [`${stem}-${String(i + 1).padStart(5, "0")}-of-${n}.gguf`, data] as const).filter((_, i) => only === undefined || only.includes(i + 1)));
}

export interface FakeHubRequest {
  server: "hub" | "cdn";
  method: string;
  path: string;
  authorization?: string;
  range?: string;
}

export interface FakeHub {
  readonly endpoint: string;
  /** The CDN's origin. */
  readonly cdn: string;
  readonly requests: FakeHubRequest[];
  /** Throttles what both servers send, live (null: full speed). */
  setRate(bytesPerSecond: number | null): void;
  /** A new version of a file: new bytes, new sha256, a new commit. */
  replace(repo: string, file: string, data: Buffer): void;
  /** Flips the served byte at `at` while the Hub keeps advertising the old sha256. */
  corrupt(repo: string, file: string, at: number): void;
  /**
   * Makes a file's replies misbehave: `extraBytes` more bytes are streamed
   * (chunked, no content-length) than the size the Hub advertises; `noEtag`
   * drops the sha256 headers (x-linked-etag, etag) from the download replies;
   * `dropAfter` closes the connection once the file's bytes up to that
   * offset are sent (the full length advertised), as a server that goes away
   * mid-file does (null: never).
   */
  misbehave(repo: string, file: string, o: { extraBytes?: number; noEtag?: boolean; dropAfter?: number | null; refuse?: FakeRefusal | null }): void;
  /**
   * Gates a repo as the Hub does (null: opens it again): its metadata stays
   * public, its files answer 401 GatedRepo without a token and 403 GatedRepo
   * with one other than `token` (an account not granted access).
   */
  gate(repo: string, token: string | null): void;
  close(): Promise<void>;
}

interface FakeFile {
  readonly data: Buffer;
  readonly lfs: boolean;
  readonly sha256: string;
  /** The git blob id: of the LFS pointer for an LFS file, of the bytes otherwise. */
  readonly oid: string;
  corruptAt?: number;
  extraBytes?: number;
  noEtag?: boolean;
  dropAfter?: number | null;
  refuse?: FakeRefusal | null;
}

/** What `resolve` of a file answers instead of the file (`refuse` of misbehave): a status and headers, e.g. 429 with Retry-After, 503. */
export interface FakeRefusal {
  status: number;
  headers?: Record<string, string>;
}

interface FakeRepo {
  sha: string;
  gated?: string | null;
  readonly files: Map<string, FakeFile>;
  readonly downloads: number;
  readonly likes: number;
  lastModified: string;
}

const sha = (algo: "sha1" | "sha256", ...parts: Array<string | Buffer>): string => {
  const h = createHash(algo);
  for (const p of parts) h.update(p);
  return h.digest("hex");
};
const pointerOf = (f: { sha256: string; size: number }): string => `version https://git-lfs.github.com/spec/v1\noid sha256:${f.sha256}\nsize ${f.size}\n`;
const gitBlob = (b: Buffer): string => sha("sha1", `blob ${b.length}\0`, b);

function fakeFile(data: Buffer, lfs: boolean): FakeFile {
  const sha256 = sha("sha256", data);
  return { data, lfs, sha256, oid: gitBlob(Buffer.from(lfs ? pointerOf({ sha256, size: data.length }) : data)) };
}

export async function startFakeHub(o: { repos: Record<string, FakeRepoSpec>; bytesPerSecond?: number }): Promise<FakeHub> {
  const repos = new Map<string, FakeRepo>();
  /** CDN blobs by sha256; old versions stay servable, as content-addressed storage does. */
  const blobs = new Map<string, FakeFile>();
  for (const [id, spec] of Object.entries(o.repos)) {
    const files = new Map<string, FakeFile>();
    for (const [path, f] of Object.entries(spec.files)) {
      const file = Buffer.isBuffer(f) ? fakeFile(f, true) : fakeFile(f.data, f.lfs ?? true);
      files.set(path, file);
      if (file.lfs) blobs.set(file.sha256, file);
    }
    const commit = spec.sha ?? sha("sha1", id, ...[...files].sort(([a], [b]) => a.localeCompare(b)).map(([p, f]) => `${p}:${f.sha256}`));
    repos.set(id, { sha: commit, files, downloads: spec.downloads ?? 0, likes: spec.likes ?? 0, lastModified: "2025-01-01T00:00:00.000Z" });
  }
  let rate: number | null = o.bytesPerSecond ?? null;
  const requests: FakeHubRequest[] = [];
  let cdnOrigin = "";

  const record = (server: "hub" | "cdn", req: IncomingMessage): void => {
    const r: FakeHubRequest = { server, method: req.method ?? "GET", path: req.url ?? "/" };
    if (req.headers.authorization !== undefined) r.authorization = req.headers.authorization;
    if (req.headers.range !== undefined) r.range = req.headers.range;
    requests.push(r);
  };
  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text), ...headers }).end(text);
  };
  const notFound = (res: ServerResponse, error: string, code: string): void => json(res, 404, { error }, { "x-error-code": code });
  /** The repo at a revision the fake knows ("main" or the repo's commit), or the 404 already sent. */
  const lookup = (res: ServerResponse, id: string, revision: string): FakeRepo | undefined => {
    const repo = repos.get(id);
    if (!repo) return void notFound(res, "Repository not found", "RepoNotFound");
    if (revision !== "main" && revision !== repo.sha) return void notFound(res, `Invalid rev id: ${revision}`, "RevisionNotFound");
    return repo;
  };

  /** The bytes (from a `bytes=N-` or `bytes=N-M` Range), throttled when a rate is set. */
  const serveBytes = (req: IncomingMessage, res: ServerResponse, file: FakeFile, headers: Record<string, string>): void => {
    let data = file.data;
    if (file.corruptAt !== undefined && file.corruptAt < data.length) {
      data = Buffer.from(data);
      data[file.corruptAt] = data[file.corruptAt]! ^ 0xff;
    }
    const size = data.length;
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
    let start = 0;
    let end = size - 1;
    const h: Record<string, string | number> = { ...headers, "accept-ranges": "bytes", "content-type": "application/octet-stream" };
    if (m) {
      start = Number(m[1]);
      if (m[2]) end = Math.min(end, Number(m[2]));
      if (start >= size || start > end) {
        res.writeHead(416, { ...h, "content-range": `bytes */${size}`, "content-length": 0 }).end();
        return;
      }
      h["content-range"] = `bytes ${start}-${end}/${size}`;
    }
    if (file.noEtag) delete h.etag;
    let body = data.subarray(start, end + 1);
    if (file.extraBytes) {
      // More bytes than advertised: chunked, so nothing but the advertised size says where the file ends.
      body = Buffer.concat([body, Buffer.alloc(file.extraBytes, 0x5a)]);
    } else {
      h["content-length"] = end - start + 1;
    }
    res.writeHead(m ? 206 : 200, h);
    if (req.method === "HEAD") return void res.end();
    if (file.dropAfter != null && file.dropAfter < start + body.length) {
      // The bytes up to dropAfter, then the connection is cut: the client sees fewer bytes than the content-length it was given.
      res.write(body.subarray(0, Math.max(0, file.dropAfter - start)), () => res.socket?.destroy());
      return;
    }
    if (rate === null) return void res.end(body);
    // Throttled: a chunk every TICK ms, the rate read anew each time (setRate acts mid-file).
    const TICK = 50;
    let at = 0;
    const timer = setInterval(() => {
      if (rate === null) {
        clearInterval(timer);
        return void res.end(body.subarray(at));
      }
      const n = Math.max(1, Math.floor((rate * TICK) / 1000));
      res.write(body.subarray(at, at + n));
      at += n;
      if (at >= body.length) {
        clearInterval(timer);
        res.end();
      }
    }, TICK);
    res.on("close", () => clearInterval(timer));
  };

  const hubHandler = (req: IncomingMessage, res: ServerResponse): void => {
    record("hub", req);
    const url = new URL(req.url ?? "/", "http://hub");
    let segs: string[];
    try {
      segs = url.pathname.split("/").slice(1).map(decodeURIComponent);
    } catch {
      return json(res, 400, { error: "Bad path" });
    }
    if (req.method !== "GET" && req.method !== "HEAD") return json(res, 405, { error: "Method not allowed" });
    // GET /api/models?search=&filter=gguf&limit=&sort=downloads&direction=-1
    if (segs[0] === "api" && segs[1] === "models" && segs.length === 2) {
      const q = url.searchParams;
      const search = (q.get("search") ?? "").toLowerCase();
      const filters = q.getAll("filter");
      const limit = Number(q.get("limit") ?? 1000);
      const sort = q.get("sort");
      const found = [...repos].filter(([id, r]) => id.toLowerCase().includes(search) && filters.every((f) => tagsOf(r).includes(f)));
      if (sort === "downloads" || sort === "likes") found.sort(([, a], [, b]) => (q.get("direction") === "1" ? a[sort] - b[sort] : b[sort] - a[sort]));
      return json(res, 200, found.slice(0, limit).map(([id, r]) => ({ _id: sha("sha1", id).slice(0, 24), id, downloads: r.downloads, likes: r.likes, lastModified: r.lastModified, private: false, gated: false, tags: tagsOf(r) })));
    }
    // GET /api/models/{org}/{name}/revision/{rev}[?blobs=true]
    if (segs[0] === "api" && segs[1] === "models" && segs[4] === "revision" && segs.length === 6) {
      const id = `${segs[2]}/${segs[3]}`;
      const repo = lookup(res, id, segs[5]!);
      if (!repo) return;
      const blobsToo = url.searchParams.get("blobs") === "true";
      const siblings = [...repo.files].map(([rfilename, f]) => (blobsToo ? { rfilename, size: f.data.length, blobId: f.oid, ...(f.lfs ? { lfs: { sha256: f.sha256, size: f.data.length, pointerSize: pointerOf({ sha256: f.sha256, size: f.data.length }).length } } : {}) } : { rfilename }));
      return json(res, 200, { _id: sha("sha1", id).slice(0, 24), id, modelId: id, author: segs[2], sha: repo.sha, lastModified: repo.lastModified, private: false, disabled: false, gated: false, downloads: repo.downloads, likes: repo.likes, tags: tagsOf(repo), library_name: tagsOf(repo).includes("gguf") ? "gguf" : undefined, siblings });
    }
    // GET /api/models/{org}/{name}/tree/{rev}[/{path}]?recursive=true
    if (segs[0] === "api" && segs[1] === "models" && segs[4] === "tree" && segs.length >= 6) {
      const repo = lookup(res, `${segs[2]}/${segs[3]}`, segs[5]!);
      if (!repo) return;
      const under = segs.slice(6).filter(Boolean).join("/");
      const recursive = url.searchParams.get("recursive") === "true";
      return json(res, 200, treeOf(repo, under, recursive));
    }
    // GET|HEAD /{org}/{name}/resolve/{rev}/{file...}
    if (segs[2] === "resolve" && segs.length >= 5) {
      const repo = lookup(res, `${segs[0]}/${segs[1]}`, segs[3]!);
      if (!repo) return;
      const file = repo.files.get(segs.slice(4).join("/"));
      if (!file) return notFound(res, "Entry not found", "EntryNotFound");
      const id = `${segs[0]}/${segs[1]}`;
      if (repo.gated != null && req.headers.authorization !== `Bearer ${repo.gated}`) {
        const message = req.headers.authorization === undefined
          ? `Access to model ${id} is restricted. You must have access to it and be authenticated to access it. Please log in.`
          : `Access to model ${id} is restricted and you are not in the authorized list. Visit https://huggingface.co/${id} to ask for access.`;
        return json(res, req.headers.authorization === undefined ? 401 : 403, { error: message }, { "x-error-code": "GatedRepo", "x-error-message": message });
      }
      if (file.refuse) return json(res, file.refuse.status, { error: `refused with ${file.refuse.status}` }, file.refuse.headers ?? {});
      const headers = { "x-repo-commit": repo.sha };
      if (!file.lfs) return serveBytes(req, res, file, { ...headers, etag: `"${file.oid}"` });
      res.writeHead(302, { ...headers, ...(file.noEtag ? {} : { "x-linked-etag": `"${file.sha256}"`, etag: `"${file.sha256}"` }), "x-linked-size": String(file.data.length), location: `${cdnOrigin}/blobs/${file.sha256}?X-Fake-Signature=${sha("sha1", file.sha256).slice(0, 16)}`, "content-length": 0 }).end();
      return;
    }
    return notFound(res, "Not found", "NotFound");
  };

  const cdnHandler = (req: IncomingMessage, res: ServerResponse): void => {
    record("cdn", req);
    const m = /^\/blobs\/([0-9a-f]{64})(\?|$)/.exec(req.url ?? "");
    const file = m ? blobs.get(m[1]!) : undefined;
    if (!file) return void res.writeHead(404, { "content-type": "text/plain" }).end("NoSuchKey");
    serveBytes(req, res, file, { etag: `"${file.sha256}"` });
  };

  const hub = await listen(createServer(hubHandler));
  const cdn = await listen(createServer(cdnHandler));
  cdnOrigin = `http://127.0.0.1:${(cdn.address() as AddressInfo).port}`;
  const repoOf = (id: string): FakeRepo => {
    const repo = repos.get(id);
    if (!repo) throw new Error(`fake hub: no repo ${id}`);
    return repo;
  };

  return {
    endpoint: `http://127.0.0.1:${(hub.address() as AddressInfo).port}`,
    cdn: cdnOrigin,
    requests,
    setRate(bytesPerSecond) {
      rate = bytesPerSecond;
    },
    replace(id, path, data) {
      const repo = repoOf(id);
      const file = fakeFile(data, repo.files.get(path)?.lfs ?? true);
      repo.files.set(path, file);
      if (file.lfs) blobs.set(file.sha256, file);
      repo.sha = sha("sha1", repo.sha, path, file.sha256);
      repo.lastModified = new Date().toISOString();
    },
    corrupt(id, path, at) {
      const file = repoOf(id).files.get(path);
      if (!file) throw new Error(`fake hub: no file ${path} in ${id}`);
      file.corruptAt = at;
    },
    misbehave(id, path, o) {
      const file = repoOf(id).files.get(path);
      if (!file) throw new Error(`fake hub: no file ${path} in ${id}`);
      if (o.extraBytes !== undefined) file.extraBytes = o.extraBytes;
      if (o.noEtag !== undefined) file.noEtag = o.noEtag;
      if (o.dropAfter !== undefined) file.dropAfter = o.dropAfter;
      if (o.refuse !== undefined) file.refuse = o.refuse;
    },
    gate(id, token) {
      repoOf(id).gated = token;
    },
    async close() {
      await Promise.all([hub, cdn].map((s) => new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      })));
    },
  };
}

/** Hub-style tags: `gguf` when a file ends in .gguf (what the search filter matches). */
function tagsOf(repo: FakeRepo): string[] {
  return [...repo.files.keys()].some((p) => p.endsWith(".gguf")) ? ["gguf"] : [];
}

/** Tree entries in the Hub's shape: folders and files under `under`, one level or all. */
function treeOf(repo: FakeRepo, under: string, recursive: boolean): unknown[] {
  const prefix = under ? `${under}/` : "";
  const dirs = new Set<string>();
  const files: unknown[] = [];
  for (const [path, f] of [...repo.files].sort(([a], [b]) => a.localeCompare(b))) {
    if (!path.startsWith(prefix)) continue;
    const parts = path.slice(prefix.length).split("/");
    for (let i = 1; i < parts.length && (recursive || i === 1); i++) dirs.add(prefix + parts.slice(0, i).join("/"));
    if (!recursive && parts.length > 1) continue;
    const size = f.data.length;
    files.push({ type: "file", oid: f.oid, size, path, ...(f.lfs ? { lfs: { oid: f.sha256, size, pointerSize: pointerOf({ sha256: f.sha256, size }).length } } : {}) });
  }
  return [...[...dirs].sort().map((path) => ({ type: "directory", oid: sha("sha1", "tree", path), size: 0, path })), ...files];
}

function listen(server: Server): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}
