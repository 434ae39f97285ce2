import type { Document, Node, Pair, YAMLMap } from "yaml";
import { yaml } from "./yaml-lazy.js";

/**
 * The keys hal0 owns in a Hermes profile's `config.yaml`, and the text edit
 * that converges them. Pure: text in, text out. hal0 owns whole entries under
 * `mcp_servers`: its two servers (`hal0-admin`, `hal0-memory`) and the
 * installed servers it joined earlier (`ownedIds`, from the state folder).
 * Every other byte of the file — foreign keys, comments, order, quoting,
 * indentation — is kept: the Document API finds where hal0's entries are, and
 * only those spans of text are replaced, removed or appended.
 */

export const HAL0_SERVER_IDS = ["hal0-admin", "hal0-memory"] as const;

/** One `mcp_servers.<id>` entry as hal0 writes it. */
export interface WiredServer {
  readonly type: "http";
  readonly transport?: "sse";
  readonly url: string;
  readonly timeout: number;
  readonly headers?: Readonly<Record<string, string>>;
  /** Hermes' own per-server filter: the server's [tools] allow list as `include`, its blocked list as `exclude`. */
  readonly tools?: { readonly include?: readonly string[]; readonly exclude?: readonly string[] };
}

/** The Hermes profile that is hal0's brain: installed servers reach it by `exposure.brain`, every other profile by `exposure.hermes`. */
export const BRAIN_PROFILE = "hal0-brain";

/** An installed MCP server, as far as the join reads it. */
export interface JoinableServer {
  readonly id: string;
  readonly transport: string;
  readonly url?: string;
  readonly enabled: boolean;
  readonly exposure: { readonly hermes: boolean; readonly brain: boolean };
  readonly tools: { readonly allow: readonly string[]; readonly gated: readonly string[]; readonly blocked: readonly string[] };
}

/**
 * Whether Hermes can be trusted with a server: it can hide tools (its
 * `tools.include` / `tools.exclude`) but cannot hold a call for a person, so a
 * server with gated tools is never exposed.
 */
export function enforceableInHermes(s: Pick<JoinableServer, "tools">): boolean {
  return s.tools.gated.length === 0;
}

/**
 * What plans, diffs and anything stored show for the bearer hal0 hands on to
 * a profile (and for any bearer read from a file). Only the executor, as it
 * writes the file, puts the real token in its place (`fillBearer`).
 */
export const BEARER_PLACEHOLDER = "Bearer [redacted]";
/** A header that is a credential but not a bearer hal0 could have written. */
const REDACTED = "[redacted]";

/** The person's own switches, read from the profile's `hal0:` table. */
export interface Hal0Options {
  /** `hal0: {wire_mcp: false}` opts the profile out: hal0 keeps none of its keys there. */
  readonly wire_mcp: boolean;
  /** `hal0: {memory_private: true}`: the header `X-hal0-Private: "1"` on hal0's servers. */
  readonly memory_private: boolean;
}

/** The file is not YAML hal0 can edit (a parse error, or a root or `mcp_servers` that is not a block mapping). */
export class HermesYamlError extends Error {}

const TIMEOUT_S = 60;

export function readOptions(text: string): Hal0Options {
  const doc = parse(text);
  return { wire_mcp: switchOf(doc, "wire_mcp") !== false, memory_private: switchOf(doc, "memory_private") === true };
}

/** The YAML 1.1 booleans Hermes (PyYAML) reads from a plain scalar, which YAML 1.2 reads as strings. */
const YAML11_BOOLEANS: Readonly<Record<string, boolean>> = Object.fromEntries(
  ["yes", "Yes", "YES", "on", "On", "ON"].map((w) => [w, true]).concat(["no", "No", "NO", "off", "Off", "OFF"].map((w) => [w, false])),
);

/**
 * One switch of the profile's `hal0:` table as Hermes reads the file: a
 * boolean, also when written `yes`/`no`/`on`/`off` (YAML 1.1, which Hermes
 * speaks); undefined when absent or anything else (a quoted "no" is a string).
 */
function switchOf(doc: Document.Parsed, key: string): boolean | undefined {
  const js = doc.toJS({ maxAliasCount: MAX_ALIASES }) as unknown;
  const hal0 = isRecord(js) && isRecord(js.hal0) ? js.hal0 : {};
  const value = hal0[key];
  if (typeof value === "boolean") return value;
  if (typeof value !== "string" || !Object.hasOwn(YAML11_BOOLEANS, value)) return undefined;
  const node = doc.getIn(["hal0", key], true);
  return yaml().isScalar(node) && node.type === "PLAIN" ? YAML11_BOOLEANS[value] : undefined;
}

/**
 * What hal0's keys should be in this file: its two servers, authenticated as
 * the profile's identity (`Authorization: Bearer [redacted]`, the placeholder
 * of that identity's agent token, when `bearer`; `X-hal0-Private: "1"` when
 * the profile opts into private memory), plus every installed server exposed
 * to this profile (`exposure.brain` for hal0-brain, `exposure.hermes` for the
 * others), enabled, reachable at a url and without gated tools, with its
 * [tools] policy as Hermes' filter. None when the profile opted out.
 * `X-hal0-Agent` is not written: the server trusts only the token.
 */
export function desiredHal0Keys(text: string, identity: string, baseUrl: string, servers: readonly JoinableServer[], options: { readonly bearer?: boolean } = {}): Record<string, WiredServer> {
  const brain = identity === `hermes__${BRAIN_PROFILE}`;
  const opts = readOptions(text);
  if (!opts.wire_mcp) return {};
  const headers: Record<string, string> = {};
  if (options.bearer) headers.Authorization = BEARER_PLACEHOLDER;
  if (opts.memory_private) headers["X-hal0-Private"] = "1";
  const withHeaders = Object.keys(headers).length > 0 ? { headers } : {};
  const base = baseUrl.replace(/\/+$/, "");
  const out: Record<string, WiredServer> = {
    "hal0-admin": { type: "http", url: `${base}/mcp/admin`, timeout: TIMEOUT_S, ...structuredClone(withHeaders) },
    "hal0-memory": { type: "http", url: `${base}/mcp/memory`, timeout: TIMEOUT_S, ...structuredClone(withHeaders) },
  };
  for (const s of [...servers].sort((a, b) => compare(a.id, b.id))) {
    const exposed = brain ? s.exposure.brain : s.exposure.hermes;
    if (!s.enabled || !exposed || s.url === undefined || s.transport === "stdio" || !enforceableInHermes(s)) continue;
    if ((HAL0_SERVER_IDS as readonly string[]).includes(s.id)) continue;
    const filter = { ...(s.tools.allow.length > 0 ? { include: [...s.tools.allow].sort() } : {}), ...(s.tools.blocked.length > 0 ? { exclude: [...s.tools.blocked].sort() } : {}) };
    out[s.id] = {
      type: "http", ...(s.transport === "sse" ? { transport: "sse" as const } : {}), url: s.url, timeout: TIMEOUT_S,
      ...(Object.keys(filter).length > 0 ? { tools: filter } : {}),
    };
  }
  return out;
}

/** hal0's entries as the file has them now: its two servers and `ownedIds`, where present. */
export function currentHal0Keys(text: string, ownedIds: readonly string[]): Record<string, unknown> {
  const doc = parse(text);
  const servers = mcpServers(doc);
  const out: Record<string, unknown> = {};
  if (!servers) return out;
  const js = serversJs(doc);
  const ids = candidateIds(ownedIds);
  refuseSharedAnchors(doc, servers, ids);
  for (const id of ids) if (findPair(servers, id)) out[id] = js[id] ?? null;
  return out;
}

/**
 * hal0's entries as plans may show them: every `Authorization` header (any
 * case) of an entry redacted — `Bearer <x>` becomes `Bearer [redacted]`,
 * anything else `[redacted]` — and, per entry, the bearer it held (so the
 * planner can fingerprint it). Pure; `current` is not changed.
 */
export function redactHal0Keys(current: Readonly<Record<string, unknown>>): { view: Record<string, unknown>; bearers: Record<string, string> } {
  const view: Record<string, unknown> = {};
  const bearers: Record<string, string> = {};
  for (const [id, entry] of Object.entries(current)) {
    const headers = isRecord(entry) ? entry.headers : undefined;
    if (!isRecord(entry) || !isRecord(headers) || !Object.keys(headers).some(isAuthorization)) {
      view[id] = entry;
      continue;
    }
    const redacted: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (!isAuthorization(name)) redacted[name] = value;
      else {
        redacted[name] = redactHeader(name, value);
        const m = redacted[name] === BEARER_PLACEHOLDER ? /^Bearer (\S+)$/.exec(value as string) : null;
        if (m) bearers[id] = m[1]!;
      }
    }
    view[id] = { ...entry, headers: redacted };
  }
  return { view, bearers };
}

/**
 * `entries` with each `Authorization: Bearer [redacted]` placeholder of
 * hal0's two servers replaced by `Bearer <token()>` (token read once, only
 * if some entry needs it), or, with no `token`, removed (a `headers` left
 * empty goes too): the placeholder itself is never written to a file.
 */
export function fillBearer(entries: Readonly<Record<string, unknown>>, token: (() => string) | undefined): Record<string, unknown> {
  let secret: string | undefined;
  const out: Record<string, unknown> = {};
  for (const [id, entry] of Object.entries(entries)) {
    const headers = isRecord(entry) ? entry.headers : undefined;
    if (!(HAL0_SERVER_IDS as readonly string[]).includes(id) || !isRecord(entry) || !isRecord(headers) || headers.Authorization !== BEARER_PLACEHOLDER) {
      out[id] = entry;
      continue;
    }
    const { Authorization: _placeholder, ...rest } = headers;
    if (token) {
      secret ??= token();
      out[id] = { ...entry, headers: { Authorization: `Bearer ${secret}`, ...rest } };
    } else {
      const { headers: _headers, ...bare } = entry;
      out[id] = Object.keys(rest).length > 0 ? { ...bare, headers: rest } : bare;
    }
  }
  return out;
}

function redactHeader(name: string, value: unknown): string {
  return name === "Authorization" && typeof value === "string" && /^Bearer \S+$/.test(value) ? BEARER_PLACEHOLDER : REDACTED;
}

/**
 * `entries` with each redacted credential header (`Bearer [redacted]`,
 * `[redacted]`) that the file `text` holds under the same entry and name,
 * redacting to the same, given back its value from the file: an entry kept
 * as a person edited it (drift = "warn") keeps their credential. One the
 * file does not hold is left out: a placeholder is never written. Run after
 * `fillBearer`, which gives hal0's two servers the live token.
 */
export function keepFileCredentials(text: string, entries: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const file = serversJs(parse(text));
  const out: Record<string, unknown> = {};
  for (const [id, entry] of Object.entries(entries)) {
    const headers = isRecord(entry) ? entry.headers : undefined;
    if (!isRecord(entry) || !isRecord(headers) || !Object.entries(headers).some(([name, value]) => isAuthorization(name) && (value === BEARER_PLACEHOLDER || value === REDACTED))) {
      out[id] = entry;
      continue;
    }
    const inFile = isRecord(file[id]) && isRecord((file[id] as Record<string, unknown>).headers) ? ((file[id] as Record<string, unknown>).headers as Record<string, unknown>) : {};
    const kept: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(headers)) {
      if (!isAuthorization(name) || (value !== BEARER_PLACEHOLDER && value !== REDACTED)) kept[name] = value;
      else if (Object.hasOwn(inFile, name) && redactHeader(name, inFile[name]) === value) kept[name] = inFile[name];
    }
    const { headers: _headers, ...bare } = entry;
    out[id] = Object.keys(kept).length > 0 ? { ...bare, headers: kept } : bare;
  }
  return out;
}

function isAuthorization(header: string): boolean {
  return header.toLowerCase() === "authorization";
}

/**
 * The file with hal0's keys set to `desired`: each of hal0's two servers and
 * `ownedIds` not in `desired` is removed, each entry of `desired` that differs
 * is replaced in place (or appended to `mcp_servers`). Nothing else changes;
 * applying the result again changes nothing.
 */
export function applyHal0Keys(text: string, desired: Readonly<Record<string, unknown>>, ownedIds: readonly string[]): string {
  const doc = parse(text);
  const root = doc.contents;
  const ids = candidateIds([...ownedIds, ...Object.keys(desired)]);
  const servers = mcpServers(doc);
  const wanted = ids.filter((id) => Object.hasOwn(desired, id));
  // A file written with CRLF line ends gets CRLF in hal0's lines too.
  const eol = text.includes("\r\n") ? "\r\n" : "\n";
  if (!servers) {
    if (wanted.length === 0) return text;
    const rootPair = yaml().isMap(root) ? findPair(root, "mcp_servers") : undefined;
    const block = `mcp_servers:${eol}${wanted.map((id) => renderEntry(id, desired[id], 2, eol)).join("")}`;
    if (!rootPair) {
      // Inside the document: before its end marker (`...`), after which the block would be a second document.
      const at = documentEnd(text, doc);
      const head = text.slice(0, at);
      return `${head}${head === "" || head.endsWith("\n") ? "" : eol}${block}${text.slice(at)}`;
    }
    // `mcp_servers:` with no value (or `{}`): its line becomes the block.
    const start = lineStart(text, (rootPair.key as Node).range![0]);
    const end = lineEnd(text, ((rootPair.value as Node | null)?.range ?? (rootPair.key as Node).range!)[1]);
    return splice(text, [{ start, end, text: indentBlock(block, column(text, (rootPair.key as Node).range![0]), eol) }]);
  }
  refuseSharedAnchors(doc, servers, ids);
  const indent = servers.items.length > 0 ? column(text, (servers.items[0]!.key as Node).range![0]) : 2;
  const js = serversJs(doc);
  const edits: Edit[] = [];
  let appendAt = servers.items.length > 0 ? pairSpan(text, servers.items[servers.items.length - 1]!).end : lineEnd(text, servers.range![1]);
  let appended = "";
  const rewritten = withAliasesOf(servers, ids, new Set(ids.filter((id) => findPair(servers, id) && (!Object.hasOwn(desired, id) || !same(js[id] ?? null, desired[id])))));
  for (const id of ids) {
    const pair = findPair(servers, id);
    const want = Object.hasOwn(desired, id);
    if (pair && !want) edits.push({ ...pairSpan(text, pair), text: "" });
    else if (pair && want && rewritten.has(id)) edits.push({ ...pairSpan(text, pair), text: renderEntry(id, desired[id], indent, eol) });
    else if (!pair && want) appended += renderEntry(id, desired[id], indent, eol);
  }
  if (appended !== "") {
    if (appendAt === text.length && !text.endsWith("\n")) appended = `${eol}${appended}`;
    edits.push({ start: appendAt, end: appendAt, text: appended });
  }
  return splice(text, edits);
}

/** Whether two hal0 key sets are equal (order of keys inside an entry does not matter). */
export function sameKeys(a: unknown, b: unknown): boolean {
  return same(a, b);
}

interface Edit {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

function parse(text: string): Document.Parsed {
  // `merge`: a `<<: *anchor` merge key is resolved, as Hermes (PyYAML, YAML 1.1) resolves it.
  const doc = yaml().parseDocument(text, { keepSourceTokens: false, merge: true });
  if (doc.errors.length > 0) throw new HermesYamlError(doc.errors[0]!.message.split("\n")[0]!);
  const root = doc.contents;
  if (root !== null && !(yaml().isMap(root) && !root.flow) && !(yaml().isScalar(root) && root.value === null)) throw new HermesYamlError("the file's root is not a block mapping");
  // An alias to no anchor, or too many aliases, parses without an error but fails when read (as Hermes would).
  try {
    doc.toJS({ maxAliasCount: MAX_ALIASES });
  } catch (err) {
    throw new HermesYamlError((err as Error).message.split("\n")[0]!);
  }
  return doc;
}

const MAX_ALIASES = 100;

/**
 * hal0 replaces or removes its entries whole, anchors and all: an anchor in
 * one of them that the rest of the file refers to (`*name`, `<<: *name`)
 * would be left dangling and the file broken for Hermes. Such a file is not
 * one hal0 can edit, and is left alone.
 */
function refuseSharedAnchors(doc: Document.Parsed, servers: YAMLMap, ids: readonly string[]): void {
  const owned = ids.map((id) => findPair(servers, id)).filter((p): p is Pair => p !== undefined);
  const anchors = new Map<string, string>();
  for (const pair of owned) {
    for (const node of [pair.key, pair.value]) {
      yaml().visit(node as Node, { Node: (_, n) => void (yaml().isNode(n) && n.anchor ? anchors.set(n.anchor, String((pair.key as { value?: unknown }).value ?? pair.key)) : undefined) });
    }
  }
  if (anchors.size === 0) return;
  yaml().visit(doc, {
    Pair: (_, p) => (owned.includes(p as Pair) ? yaml().visit.SKIP : undefined),
    Alias: (_, a) => {
      const id = anchors.get(a.source);
      if (id !== undefined) throw new HermesYamlError(`mcp_servers.${id} holds the anchor &${a.source}, which the rest of the file uses (*${a.source}); hal0 replaces its entries whole, so move that anchor out of it`);
    },
  });
}

/**
 * `edited` (the ids of hal0's entries about to be replaced or removed), with
 * every other of hal0's entries `ids` that uses an anchor one of them holds
 * (`headers: *h` under hal0-memory, `&h` under hal0-admin): written whole
 * too, or the alias would be left pointing at nothing.
 */
function withAliasesOf(servers: YAMLMap, ids: readonly string[], edited: Set<string>): Set<string> {
  const anchorsOf = (pair: Pair) => {
    const out: string[] = [];
    for (const node of [pair.key, pair.value]) yaml().visit(node as Node, { Node: (_, n) => void (yaml().isNode(n) && n.anchor ? out.push(n.anchor) : undefined) });
    return out;
  };
  const aliasesOf = (pair: Pair) => {
    const out: string[] = [];
    for (const node of [pair.key, pair.value]) yaml().visit(node as Node, { Alias: (_, a) => void out.push(a.source) });
    return out;
  };
  for (let grew = true; grew;) {
    grew = false;
    const gone = new Set([...edited].flatMap((id) => {
      const pair = findPair(servers, id);
      return pair ? anchorsOf(pair) : [];
    }));
    for (const id of ids) {
      const pair = findPair(servers, id);
      if (pair === undefined || edited.has(id) || !aliasesOf(pair).some((a) => gone.has(a))) continue;
      edited.add(id);
      grew = true;
    }
  }
  return edited;
}

/** The block map under `mcp_servers`, or undefined when the key is absent, empty or `{}`. */
function mcpServers(doc: Document.Parsed): YAMLMap | undefined {
  const root = doc.contents;
  if (!yaml().isMap(root)) return undefined;
  const pair = findPair(root, "mcp_servers");
  const value = pair?.value as Node | null | undefined;
  if (value === undefined || value === null || (yaml().isScalar(value) && value.value === null)) return undefined;
  if (yaml().isMap(value) && value.flow && value.items.length === 0) return undefined;
  if (!yaml().isMap(value) || value.flow) throw new HermesYamlError("mcp_servers is not a block mapping");
  return value;
}

function findPair(map: YAMLMap, key: string): Pair | undefined {
  return map.items.find((p) => (yaml().isScalar(p.key) ? p.key.value : p.key) === key) as Pair | undefined;
}

/** hal0's two servers first, then the rest sorted, without duplicates. */
function candidateIds(ids: readonly string[]): string[] {
  const rest = [...new Set(ids)].filter((id) => !(HAL0_SERVER_IDS as readonly string[]).includes(id)).sort(compare);
  return [...HAL0_SERVER_IDS, ...rest];
}

/** A pair's whole lines: from the start of its key's line to the end of its value's last line. */
function pairSpan(text: string, pair: Pair): { start: number; end: number } {
  const key = pair.key as Node;
  const value = pair.value as Node | null;
  return { start: lineStart(text, key.range![0]), end: lineEnd(text, (value?.range ?? key.range!)[1]) };
}

/** `{id: entry}` as block YAML at `indent` spaces; header values that look like numbers stay quoted strings. */
function renderEntry(id: string, entry: unknown, indent: number, eol: string): string {
  const doc = new (yaml().Document)({ [id]: entry });
  const headers = doc.getIn([id, "headers"], true);
  if (yaml().isMap(headers)) for (const p of headers.items) if (yaml().isScalar(p.value) && typeof p.value.value === "string") p.value.type = "QUOTE_DOUBLE";
  return indentBlock(doc.toString({ lineWidth: 0 }), indent, eol);
}

function indentBlock(block: string, indent: number, eol: string): string {
  const pad = " ".repeat(indent);
  return block.split(/\r?\n/).filter((l) => l !== "").map((l) => `${pad}${l}${eol}`).join("");
}

/** `mcp_servers` as plain data (aliases and merge keys resolved), for comparing entries. */
function serversJs(doc: Document.Parsed): Record<string, unknown> {
  const js = doc.toJS({ maxAliasCount: MAX_ALIASES }) as unknown;
  return isRecord(js) && isRecord(js.mcp_servers) ? js.mcp_servers : {};
}

/**
 * Where text may be added at the end of the document: the start of the line
 * of its end marker (`...`, after the contents, with only comments between),
 * or the end of the text when it has none.
 */
function documentEnd(text: string, doc: Document.Parsed): number {
  if (!doc.directives?.docEnd) return text.length;
  const marker = /^\.\.\.(?=[ \t\r\n#]|$)/gm;
  marker.lastIndex = doc.contents?.range?.[1] ?? doc.range[1];
  const m = marker.exec(text);
  return m === null ? text.length : m.index;
}

function splice(text: string, edits: readonly Edit[]): string {
  let out = text;
  for (const e of [...edits].sort((a, b) => b.start - a.start)) out = out.slice(0, e.start) + e.text + out.slice(e.end);
  return out;
}

function lineStart(text: string, offset: number): number {
  return text.lastIndexOf("\n", offset - 1) + 1;
}

/** The offset just past the newline that ends the line holding `offset - 1` (the file's end when there is none). */
function lineEnd(text: string, offset: number): number {
  if (offset > 0 && text[offset - 1] === "\n") return offset;
  const nl = text.indexOf("\n", offset);
  return nl === -1 ? text.length : nl + 1;
}

function column(text: string, offset: number): number {
  return offset - lineStart(text, offset);
}

function same(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (isRecord(value)) return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  return JSON.stringify(value ?? null);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
