import { z } from "zod";
import { EnvName } from "../../schema/names.js";
import { MCP_TRANSPORTS } from "../../schema/mcp-server.js";
import { ApiError } from "../errors.js";
import { jsonFault } from "../input.js";
import { guardedFetch, MAX_URL_LENGTH, type GuardedFetchOptions } from "./ssrf.js";

/**
 * The manifest resolver behind `GET /api/mcp/resolve`: a spec (`npm:`, `npx:`, `uvx:`,
 * `uv:`, `oci://`, `git+https://` or a manifest URL) becomes a {@link ResolvedManifest},
 * the preview the dashboard shows and what `POST /api/mcp/install` writes into
 * `mcp-servers/<id>.toml`. Only a manifest URL is fetched (through the SSRF guard);
 * package specs are read from their text alone, so their tools/resources/prompts are [].
 */

/** Installed-server ids: the file stem of `mcp-servers/<id>.toml`. */
export const MCP_SERVER_ID_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** Where a resolved server comes from. */
export type SourceKind = "manifest" | "npm" | "pypi" | "oci" | "git";

/** A tool, resource or prompt a manifest announces. */
export interface ManifestItem {
  readonly name: string;
  readonly description?: string;
}

/**
 * A resolved server (seed 001's ResolvedManifest, plus `command`/`args`/`url`): the
 * fields map one to one onto `mcp-servers/<id>.toml` (schema/mcp-server.ts), `tools`
 * becoming `tools_count`. stdio servers have `command`; streamable-http/sse ones `url`.
 * `verified` is always false: nothing verifies a server yet, and a manifest's own claim
 * does not count. `author` is "" when the spec names none (every package spec).
 */
export interface ResolvedManifest {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly spec: string;
  readonly transport: (typeof MCP_TRANSPORTS)[number];
  readonly command?: string;
  readonly args: readonly string[];
  readonly url?: string;
  readonly tools: readonly ManifestItem[];
  readonly resources: readonly ManifestItem[];
  readonly prompts: readonly ManifestItem[];
  readonly env_required: readonly string[];
  readonly source_kind: SourceKind;
  readonly source_url?: string;
  readonly author: string;
  readonly verified: boolean;
}

/** An item is `{name, description?}` or a bare name. */
const ManifestItemSchema = z.union([
  z.string().min(1).max(128).transform((name) => ({ name })),
  z.object({ name: z.string().min(1).max(128), description: z.string().max(4096).optional() }),
]);

/**
 * A manifest document as served at a manifest URL (or posted as `{manifest}`). Unknown
 * keys (`$schema`, `version`, `homepage`…) are dropped, not refused: the format is not
 * hal0's. `verified` is accepted and ignored. The server's `url` is NOT checked by the
 * SSRF guard: an operator may install a server on the LAN or on loopback.
 */
export const ManifestDocument = z
  .object({
    id: z.string(),
    name: z.string().min(1).max(128),
    description: z.string().max(4096).default(""),
    transport: z.enum(MCP_TRANSPORTS),
    url: z.string().regex(/^https?:\/\/\S+$/, "an http(s) URL").optional(),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    tools: z.array(ManifestItemSchema).default([]),
    resources: z.array(ManifestItemSchema).default([]),
    prompts: z.array(ManifestItemSchema).default([]),
    env_required: z.array(EnvName).default([]),
    author: z.string().max(256).default(""),
    verified: z.boolean().optional(),
  })
  .superRefine((m, ctx) => {
    if (m.transport === "stdio" && m.command === undefined) ctx.addIssue({ code: "custom", path: ["command"], message: "a stdio server needs command" });
    if (m.transport !== "stdio" && m.url === undefined) ctx.addIssue({ code: "custom", path: ["url"], message: `a ${m.transport} server needs url` });
  });

/**
 * Resolves a spec into a server description. `https://…` is fetched with
 * {@link guardedFetch} (`http://` too when `options.allowInsecureHttp`) and validated
 * with {@link validateManifest}; `source_url` is the URL that finally answered. Package
 * specs are not fetched. Throws ApiError: `mcp.url_invalid` (empty, > 2048, whitespace),
 * `mcp.spec_unsupported` (another prefix, or a package/image/repo name that is not one),
 * `mcp.id_invalid`, and for manifests the guard's codes and `mcp.manifest_invalid`.
 */
export async function resolveManifest(spec: string, options: GuardedFetchOptions = {}): Promise<ResolvedManifest> {
  if (spec.length === 0 || spec.length > MAX_URL_LENGTH || /\s/.test(spec)) {
    const why = spec.length === 0 ? "is empty" : spec.length > MAX_URL_LENGTH ? `is longer than ${MAX_URL_LENGTH} characters` : "holds whitespace";
    throw new ApiError("mcp.url_invalid", `the spec ${why}`, { length: spec.length });
  }
  const [prefix, rest] = splitPrefix(spec);
  switch (prefix) {
    case "npm:":
    case "npx:":
      return resolveNpm(spec, rest);
    case "uvx:":
    case "uv:":
      return resolvePypi(spec, rest);
    case "oci://":
      return resolveOci(spec, rest);
    case "git+https://":
      return resolveGit(spec);
    case "https://":
      return resolveUrl(spec, options);
    case "http://":
      if (options.allowInsecureHttp === true) return resolveUrl(spec, options);
      throw unsupported(spec, "plain http:// manifests are off; use https://");
    default:
      throw unsupported(spec, "it starts with none of oci://, npm:, npx:, uvx:, uv:, git+https://, https://");
  }
}

/**
 * Validates a parsed manifest document and turns it into a ResolvedManifest for `spec`.
 * A shape problem → `mcp.manifest_invalid` with `details.fields` ([{loc, msg, type}],
 * loc starting at "manifest"); an id outside `^[a-z0-9][a-z0-9_-]{0,63}$` → `mcp.id_invalid`.
 */
export function validateManifest(document: unknown, spec: string, sourceUrl?: string): ResolvedManifest {
  const parsed = ManifestDocument.safeParse(document);
  if (!parsed.success) {
    const fields = parsed.error.issues.map((i) => ({ loc: ["manifest", ...i.path.map(String)], msg: i.message, type: i.code }));
    throw new ApiError("mcp.manifest_invalid", `the manifest does not validate: ${fields.map((f) => `${f.loc.join(".")}: ${f.msg}`).join("; ")}`, { fields });
  }
  const m = parsed.data;
  return {
    id: checkId(m.id),
    name: m.name,
    description: m.description,
    spec,
    transport: m.transport,
    ...(m.command === undefined ? {} : { command: m.command }),
    args: m.args,
    ...(m.url === undefined ? {} : { url: m.url }),
    tools: m.tools,
    resources: m.resources,
    prompts: m.prompts,
    env_required: m.env_required,
    source_kind: "manifest",
    ...(sourceUrl === undefined ? {} : { source_url: sourceUrl }),
    author: m.author,
    verified: false,
  };
}

const PREFIXES = ["git+https://", "https://", "http://", "oci://", "npm:", "npx:", "uvx:", "uv:"] as const;

function splitPrefix(spec: string): [string | undefined, string] {
  const prefix = PREFIXES.find((p) => spec.startsWith(p));
  return [prefix, prefix === undefined ? spec : spec.slice(prefix.length)];
}

async function resolveUrl(spec: string, options: GuardedFetchOptions): Promise<ResolvedManifest> {
  const fetched = await guardedFetch(spec, options);
  let document: unknown;
  try {
    document = JSON.parse(fetched.body);
  } catch (err) {
    // What the body holds is not said: an agent's install may point hal0 at a host only hal0 reaches (HAL0_MCP_FETCH_ALLOW).
    const msg = `not JSON: ${jsonFault(err)}`;
    throw new ApiError("mcp.manifest_invalid", `${fetched.url} is ${msg}`, { fields: [{ loc: ["manifest"], msg, type: "json" }] });
  }
  return validateManifest(document, spec, fetched.url);
}

// ── package specs ───────────────────────────────────────────────────────

/** npm names (lowercase, optional scope) with an optional `@version|tag|range`; never starting with `-`, so never an npx flag. */
const NPM_SPEC = /^((?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*)(?:@([\^~]?[A-Za-z0-9][A-Za-z0-9._+-]*))?$/;
/** PyPI names (PEP 508) with an optional `@version`, as uvx takes them. */
const PYPI_SPEC = /^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?:@([A-Za-z0-9][A-Za-z0-9.+!-]*))?$/;
const OCI_PATH = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const OCI_DOMAIN = /^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?$/;
const OCI_TAIL = /^(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$/;

/** `npm:`/`npx:` → `npx -y <pkg>`; the id is the package name without its scope. */
function resolveNpm(spec: string, pkg: string): ResolvedManifest {
  const m = NPM_SPEC.exec(pkg);
  if (m === null || m[1] === undefined || m[1].length > 214) throw unsupported(spec, `${JSON.stringify(pkg)} is not an npm package name`);
  const name = m[1];
  return packageManifest(spec, idFrom(name.slice(name.indexOf("/") + 1)), name, "npx", ["-y", pkg], "npm", `https://www.npmjs.com/package/${name}`);
}

/** `uvx:`/`uv:` → `uvx <pkg>`. */
function resolvePypi(spec: string, pkg: string): ResolvedManifest {
  const m = PYPI_SPEC.exec(pkg);
  if (m === null || m[1] === undefined) throw unsupported(spec, `${JSON.stringify(pkg)} is not a PyPI package name`);
  return packageManifest(spec, idFrom(m[1]), m[1], "uvx", [pkg], "pypi", `https://pypi.org/project/${m[1]}/`);
}

/** `oci://<ref>` → `docker run -i --rm <ref>`; the id is the image's last path component; Docker Hub images link to their page. */
function resolveOci(spec: string, ref: string): ResolvedManifest {
  const image = parseImageRef(ref);
  if (image === undefined) throw unsupported(spec, `${JSON.stringify(ref)} is not an image reference`);
  const { domain, path } = image;
  const base = path.slice(path.lastIndexOf("/") + 1);
  const onHub = domain === undefined || domain === "docker.io";
  const hubUrl = path.includes("/") ? `https://hub.docker.com/r/${path}` : `https://hub.docker.com/_/${path}`;
  return packageManifest(spec, idFrom(base), base, "docker", ["run", "-i", "--rm", ref], "oci", onHub ? hubUrl : undefined);
}

/**
 * `[domain/]path[:tag][@sha256:digest]`, the distribution grammar without IPv6 registries:
 * the first component is a registry domain when it holds `.` or `:` or is `localhost`,
 * else the image is on Docker Hub (`mcp/fetch` is the `mcp` namespace there).
 */
function parseImageRef(ref: string): { domain?: string; path: string } | undefined {
  const slash = ref.indexOf("/");
  const first = ref.slice(0, Math.max(slash, 0));
  const domain = slash > 0 && (/[.:]/.test(first) || first === "localhost") ? first : undefined;
  const rest = domain === undefined ? ref : ref.slice(slash + 1);
  const cut = rest.search(/[:@]/);
  const path = cut < 0 ? rest : rest.slice(0, cut);
  const tail = cut < 0 ? "" : rest.slice(cut);
  if ((domain !== undefined && !OCI_DOMAIN.test(domain)) || !OCI_PATH.test(path) || !OCI_TAIL.test(tail)) return undefined;
  return domain === undefined ? { path } : { domain, path };
}

/**
 * `git+https://host/owner/repo[.git][#ref]` → `npx -y <spec>`: npm installs a git repo
 * that is an npm package with a bin, which is how most git-hosted MCP servers ship. The
 * id is the repo name; credentials, a query and paths under two segments are refused.
 */
function resolveGit(spec: string): ResolvedManifest {
  const url = URL.parse(spec.slice("git+".length));
  const segments = url?.pathname.split("/").filter((s) => s !== "") ?? [];
  const okRef = url === null || url.hash === "" || /^#[A-Za-z0-9._/^~:-]+$/.test(url.hash);
  if (url === null || url.username !== "" || url.password !== "" || url.search !== "" || segments.length < 2 || !okRef || !segments.every((s) => /^[A-Za-z0-9._-]+$/.test(s))) {
    throw unsupported(spec, "expected git+https://host/owner/repo[.git][#ref] without credentials or a query");
  }
  const repo = segments.map((s, i) => (i === segments.length - 1 ? s.replace(/\.git$/, "") : s));
  const name = repo[repo.length - 1] ?? "";
  return packageManifest(spec, idFrom(name), name, "npx", ["-y", spec], "git", `https://${url.host}/${repo.join("/")}`);
}

function packageManifest(spec: string, id: string, name: string, command: string, args: string[], kind: SourceKind, sourceUrl: string | undefined): ResolvedManifest {
  return {
    id,
    name: name.slice(0, 128),
    description: "",
    spec,
    transport: "stdio",
    command,
    args,
    tools: [],
    resources: [],
    prompts: [],
    env_required: [],
    source_kind: kind,
    ...(sourceUrl === undefined ? {} : { source_url: sourceUrl }),
    author: "",
    verified: false,
  };
}

/** A package/image/repo name as an id: lowercase, other characters → `-`, no leading `-`/`_`, at most 64. */
function idFrom(name: string): string {
  return checkId(name.toLowerCase().replace(/[^a-z0-9_-]/g, "-").replace(/^[-_]+/, "").slice(0, 64));
}

function checkId(id: string): string {
  if (!MCP_SERVER_ID_PATTERN.test(id)) {
    throw new ApiError("mcp.id_invalid", `${JSON.stringify(id)} is not a server id: 1–64 lowercase letters, digits, - and _, starting with a letter or digit`, { id });
  }
  return id;
}

function unsupported(spec: string, why: string): ApiError {
  return new ApiError("mcp.spec_unsupported", `cannot resolve ${spec}: ${why}`, { spec });
}
