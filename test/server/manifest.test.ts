import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { McpServer } from "../../schema/index.js";
import { ApiError } from "../../server/errors.js";
import { resolveManifest, validateManifest, type ResolvedManifest } from "../../server/mcp-servers/manifest.js";

async function refusal(p: Promise<unknown>): Promise<ApiError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (!(err instanceof ApiError)) throw new Error(`expected an ApiError, got ${String(err)}`);
  return err;
}

/** What the install route writes: the resolved fields an `mcp-servers/<id>.toml` holds must pass its schema. */
function asInstalledRecord(m: ResolvedManifest): unknown {
  const { id: _id, tools, resources: _r, prompts: _p, env_required: _e, source_kind: _k, ...record } = m;
  return McpServer.parse({ ...record, tools_count: tools.length });
}

/** Package specs never touch the network: this resolver fails every name. */
const noDns = async (host: string) => {
  throw new Error(`unexpected lookup of ${host}`);
};

describe("package specs", () => {
  it.each<[string, Partial<ResolvedManifest>]>([
    ["npm:@modelcontextprotocol/server-sqlite", { id: "server-sqlite", name: "@modelcontextprotocol/server-sqlite", command: "npx", args: ["-y", "@modelcontextprotocol/server-sqlite"], source_kind: "npm", source_url: "https://www.npmjs.com/package/@modelcontextprotocol/server-sqlite" }],
    ["npx:mcp-server.fetch@1.2.0", { id: "mcp-server-fetch", name: "mcp-server.fetch", command: "npx", args: ["-y", "mcp-server.fetch@1.2.0"], source_kind: "npm", source_url: "https://www.npmjs.com/package/mcp-server.fetch" }],
    ["npm:@scope/tool@^2.1", { id: "tool", args: ["-y", "@scope/tool@^2.1"], source_url: "https://www.npmjs.com/package/@scope/tool" }],
    ["uvx:mcp-server-time", { id: "mcp-server-time", command: "uvx", args: ["mcp-server-time"], source_kind: "pypi", source_url: "https://pypi.org/project/mcp-server-time/" }],
    ["uv:MCP_Server.Git@0.6.2", { id: "mcp_server-git", name: "MCP_Server.Git", command: "uvx", args: ["MCP_Server.Git@0.6.2"], source_kind: "pypi", source_url: "https://pypi.org/project/MCP_Server.Git/" }],
    ["oci://ghcr.io/github/github-mcp-server:latest", { id: "github-mcp-server", command: "docker", args: ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server:latest"], source_kind: "oci" }],
    ["oci://mcp/fetch", { id: "fetch", args: ["run", "-i", "--rm", "mcp/fetch"], source_url: "https://hub.docker.com/r/mcp/fetch" }],
    ["oci://docker.io/alpine:3.20", { id: "alpine", source_url: "https://hub.docker.com/_/alpine" }],
    ["oci://localhost:5000/team/srv@sha256:" + "a".repeat(64), { id: "srv", args: ["run", "-i", "--rm", "localhost:5000/team/srv@sha256:" + "a".repeat(64)] }],
    ["git+https://github.com/owner/My.Repo.git#v1.2", { id: "my-repo", name: "My.Repo", command: "npx", args: ["-y", "git+https://github.com/owner/My.Repo.git#v1.2"], source_kind: "git", source_url: "https://github.com/owner/My.Repo" }],
    ["git+https://gitlab.example/group/sub/srv", { id: "srv", source_kind: "git", source_url: "https://gitlab.example/group/sub/srv" }],
  ])("%s", async (spec, expected) => {
    const m = await resolveManifest(spec, { lookup: noDns });
    expect(m).toMatchObject({ spec, transport: "stdio", description: "", tools: [], resources: [], prompts: [], env_required: [], author: "", verified: false, ...expected });
    if (!("source_url" in expected)) expect(m).not.toHaveProperty("source_url");
    expect(asInstalledRecord(m)).toMatchObject({ spec, transport: "stdio", command: m.command, args: m.args });
  });

  it("caps a long package name's id at 64 characters", async () => {
    const m = await resolveManifest(`npm:${"a".repeat(100)}`, { lookup: noDns });
    expect(m.id).toBe("a".repeat(64));
  });

  it.each([
    "npm:--registry=http://evil.example",
    "npx:-y",
    "npm:Upper-Case",
    "npm:../../etc",
    "npm:@scope/",
    "uvx:--with=evil",
    "uv:-pkg",
    "oci://--privileged",
    "oci://Upper/Case",
    "git+https://user:token@github.com/o/r",
    "git+https://github.com/only-owner",
    "git+https://github.com/o/r?x=1",
    "ftp://example.com/manifest.json",
    "pip:requests",
    "docker://mcp/fetch",
    "http://example.com/manifest.json",
  ])("%s → mcp.spec_unsupported", async (spec) => {
    const err = await refusal(resolveManifest(spec, { lookup: noDns }));
    expect(err.code).toBe("mcp.spec_unsupported");
    expect(err.details).toEqual({ spec });
  });

  it("refuses an empty spec, one over 2048 characters and one holding whitespace with mcp.url_invalid", async () => {
    for (const spec of ["", `https://example.com/${"m".repeat(2029)}`, "oci://img:bad tag"]) {
      const err = await refusal(resolveManifest(spec, { lookup: noDns }));
      expect(err.code).toBe("mcp.url_invalid");
      expect(err.details).toEqual({ length: spec.length });
    }
  });

  it("refuses a name that yields no valid id with mcp.id_invalid", async () => {
    const git = await refusal(resolveManifest("git+https://github.com/o/___.git", { lookup: noDns }));
    expect(git.code).toBe("mcp.id_invalid");
    expect(git.details).toEqual({ id: "" });
  });
});

describe("manifest URLs", () => {
  let server: Server;
  let port = 0;
  let other: Server;
  let otherPort = 0;
  const documents: Record<string, string> = {};

  const listen = (srv: Server) => new Promise<number>((resolve) => srv.listen(0, "127.0.0.1", () => resolve((srv.address() as AddressInfo).port)));
  beforeAll(async () => {
    server = createServer((req, res) => {
      const body = documents[req.url ?? ""];
      if (req.url === "/moved") return void res.writeHead(301, { location: "/good.json" }).end();
      if (body === undefined) return void res.writeHead(404).end();
      res.writeHead(200, { "content-type": "application/json" }).end(body);
    });
    other = createServer((_req, res) => res.end(documents["/good.json"]));
    [port, otherPort] = await Promise.all([listen(server), listen(other)]);
  });
  afterAll(async () => {
    for (const srv of [server, other]) await new Promise((resolve) => srv.close(resolve));
  });

  const good = {
    $schema: "https://example.com/mcp-manifest.schema.json",
    id: "sqlite",
    name: "SQLite",
    description: "Query a SQLite file",
    transport: "streamable-http",
    url: "http://127.0.0.1:9300/mcp",
    tools: [{ name: "read_query", description: "SELECT" }, "write_query"],
    resources: [{ name: "schema" }],
    env_required: ["DB_PATH"],
    author: "Example Corp",
    verified: true,
  };
  documents["/good.json"] = JSON.stringify(good);
  documents["/stdio.json"] = JSON.stringify({ id: "files", name: "Files", transport: "stdio", command: "npx", args: ["-y", "@x/files"] });
  documents["/not-json.json"] = "{ id: sqlite";
  documents["/secret.txt"] = "s3cr3t-token-of-an-internal-host";
  documents["/bad-shape.json"] = JSON.stringify({ id: "x", transport: "carrier-pigeon", tools: [{ description: "no name" }], env_required: ["1BAD"] });
  documents["/no-url.json"] = JSON.stringify({ id: "x", name: "X", transport: "sse" });
  documents["/no-id.json"] = JSON.stringify({ name: "X", transport: "stdio", command: "x" });
  documents["/bad-id.json"] = JSON.stringify({ id: "Bad ID!", name: "X", transport: "stdio", command: "x" });

  const opts = () => ({ allow: [`127.0.0.1:${port}`], allowInsecureHttp: true, lookup: noDns });
  const at = (path: string) => `http://127.0.0.1:${port}${path}`;

  it("resolves a manifest served by an allowed loopback server, after a redirect", async () => {
    const m = await resolveManifest(at("/moved"), opts());
    expect(m).toEqual({
      id: "sqlite",
      name: "SQLite",
      description: "Query a SQLite file",
      spec: at("/moved"),
      transport: "streamable-http",
      args: [],
      url: "http://127.0.0.1:9300/mcp",
      tools: [{ name: "read_query", description: "SELECT" }, { name: "write_query" }],
      resources: [{ name: "schema" }],
      prompts: [],
      env_required: ["DB_PATH"],
      source_kind: "manifest",
      source_url: at("/good.json"),
      author: "Example Corp",
      verified: false,
    });
    expect(Object.keys(m)).toEqual(["id", "name", "description", "spec", "transport", "args", "url", "tools", "resources", "prompts", "env_required", "source_kind", "source_url", "author", "verified"]);
  });

  it("resolves a stdio manifest to its command and args", async () => {
    const m = await resolveManifest(at("/stdio.json"), opts());
    expect(m).toMatchObject({ id: "files", transport: "stdio", command: "npx", args: ["-y", "@x/files"], author: "", description: "" });
    expect(m).not.toHaveProperty("url");
  });

  it("does not fetch from a loopback server that is not allowed (mcp.ssrf_blocked)", async () => {
    const err = await refusal(resolveManifest(`http://127.0.0.1:${otherPort}/good.json`, opts()));
    expect(err.code).toBe("mcp.ssrf_blocked");
    const https = await refusal(resolveManifest(`https://localhost:${port}/good.json`, opts()));
    expect(https.details).toMatchObject({ range: "localhost" });
  });

  it("refuses a body that is not JSON with mcp.manifest_invalid", async () => {
    const err = await refusal(resolveManifest(at("/not-json.json"), opts()));
    expect(err.code).toBe("mcp.manifest_invalid");
    expect(err.status).toBe(422);
    expect(err.details).toMatchObject({ fields: [{ loc: ["manifest"], type: "json" }] });
    // What the body holds is never quoted back: the fetch may reach a host only hal0 reaches, for an agent.
    expect(err.message).toBe(`${at("/not-json.json")} is not JSON: Expected property name or '}' in JSON at position 2`);
    const secret = await refusal(resolveManifest(at("/secret.txt"), opts()));
    expect(secret.message).toBe(`${at("/secret.txt")} is not JSON: Unexpected token 's'`);
    expect(JSON.stringify([secret.message, secret.details])).not.toContain("s3cr3t");
  });

  it("lists every schema problem in details.fields", async () => {
    const err = await refusal(resolveManifest(at("/bad-shape.json"), opts()));
    expect(err.code).toBe("mcp.manifest_invalid");
    const locs = (err.details.fields as Array<{ loc: string[] }>).map((f) => f.loc.join("."));
    expect(locs).toEqual(["manifest.name", "manifest.transport", "manifest.tools.0", "manifest.env_required.0"]);
    const noUrl = await refusal(resolveManifest(at("/no-url.json"), opts()));
    expect(noUrl.details).toEqual({ fields: [{ loc: ["manifest", "url"], msg: "a sse server needs url", type: "custom" }] });
    const noId = await refusal(resolveManifest(at("/no-id.json"), opts()));
    expect((noId.details.fields as Array<{ loc: string[] }>).map((f) => f.loc.join("."))).toEqual(["manifest.id"]);
  });

  it("refuses an id outside ^[a-z0-9][a-z0-9_-]{0,63}$ with mcp.id_invalid", async () => {
    const err = await refusal(resolveManifest(at("/bad-id.json"), opts()));
    expect(err.code).toBe("mcp.id_invalid");
    expect(err.details).toEqual({ id: "Bad ID!" });
  });

  it("fails a missing manifest with mcp.manifest_fetch_failed", async () => {
    const err = await refusal(resolveManifest(at("/gone.json"), opts()));
    expect(err.code).toBe("mcp.manifest_fetch_failed");
    expect(err.details).toMatchObject({ status: 404 });
  });
});

describe("validateManifest", () => {
  it("validates a posted manifest without fetching, ids at the 64-character edge", () => {
    const base = { name: "X", transport: "stdio", command: "x" };
    expect(validateManifest({ ...base, id: "a".repeat(64) }, "npm:x")).toMatchObject({ id: "a".repeat(64), source_kind: "manifest", command: "x" });
    expect(() => validateManifest({ ...base, id: "a".repeat(65) }, "npm:x")).toThrow(expect.objectContaining({ code: "mcp.id_invalid" }));
    expect(() => validateManifest({ ...base, id: "-x" }, "npm:x")).toThrow(expect.objectContaining({ code: "mcp.id_invalid" }));
    expect(() => validateManifest([], "npm:x")).toThrow(expect.objectContaining({ code: "mcp.manifest_invalid" }));
  });
});
