import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { parse as parseToml, stringify as stringifyToml } from "smol-toml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { compile, sourceTree } from "../compiler/index.js";
import { readTree } from "../compiler/read.js";
import { Reporter } from "../compiler/report.js";
import { acquireLock } from "../reconciler/index.js";
import { acquireCommitLock, acquirePullLock } from "../reconciler/lock.js";
import { formatPlan } from "../reconciler/format.js";
import type { Inventory, Observed } from "../reconciler/observed.js";
import { planChanges } from "../reconciler/plan.js";
import { FILE_KINDS, Settings, type FileKind } from "../schema/index.js";
import { buildCatalog } from "../server/mcp/catalog.js";
import { ROUTES } from "../server/routes/index.js";
import { ROOT as PLAN_ROOT } from "../fixtures/plans/build.js";
import { dockerEngine, exampleBoxTurn } from "./reconciler/docker-helpers.js";
import { freePort } from "./reconciler/process-helpers.js";
import { startFakeHub, type FakeHub } from "./helpers/fake-hub.js";
import { ggufBytes, modelKvs } from "./server/gguf-writer.js";

/**
 * Issue 16: every example in README.md and docs/*.md is run by a test. Each
 * fenced block is collected with its file, line and language, and classified
 * by one rule of KINDS below; a block no rule knows fails the suite, so a new
 * example cannot be added unrun.
 *
 * - ```toml under a file kind's heading of docs/config.md (`### \`slots/<name>.toml\``…):
 *   the compiler's read step (parse + the kind's zod schema) on a one-file
 *   tree reports nothing, and the example box with the example in place of
 *   its file compiles without an error. The `#:schema` line names a schema
 *   that exists. hal0.toml's block holds the defaults.
 * - ```sh: run with bash (`set -eo pipefail`) against one real `hal0 serve`
 *   (the README's own command on a copy of fixtures/box), in document order,
 *   exported variables carried from block to block like one terminal. What a
 *   block prints is checked where the block says what it prints (see
 *   `expectationOf`), every `jq` must get JSON, and a reply that is an error
 *   envelope nobody announced fails. Third-party clients (`claude`) are a
 *   stub that records its arguments; hal0 then serves each URL with each header.
 *   The Docker example runs against a real engine (CI), else its syntax and
 *   its `sed` are checked and the run is skipped with a notice.
 * - ```json / ```toml client configs (Claude Code, Cursor, Codex): the MCP
 *   SDK's client connects with exactly that URL and header.
 * - ```json replies: reproduced on the server and compared (`…` = "more").
 * - ```yaml (a Hermes profile's mcp_servers): compared with the file the
 *   server wrote into a real profile of the served box.
 * - plain blocks: `hal0 validate`'s output is run; the plan text is the
 *   planner's output for golden inputs; the config tree names every file kind
 *   and nothing else; the state folder lists what the served box's state
 *   folder holds.
 *
 * The one block not run is the Quickstart's first (`npm ci`, `npm test`): the
 * server of this suite is its serve command, and `npm test` is checked
 * against package.json.
 */

const ROOT = join(import.meta.dirname, "..");
const HAL0 = join(ROOT, "bin/hal0.js");
const DOC_FILES = ["README.md", ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");

// ── Blocks ───────────────────────────────────────────────────────────────────

interface Block {
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly text: string;
  /** The nearest heading above the block (its text, without the #s). */
  readonly heading: string;
}

const at = (b: Block) => `${b.file}:${b.line}`;

function blocksOf(file: string): Block[] {
  const lines = read(file).split("\n");
  const out: Block[] = [];
  let heading = "";
  for (let i = 0; i < lines.length; i++) {
    const h = /^#{1,6} (.*)$/.exec(lines[i]!);
    if (h) heading = h[1]!;
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    while (++i < lines.length && !/^```\s*$/.test(lines[i]!)) body.push(lines[i]!);
    if (i >= lines.length) throw new Error(`${file}:${start + 1}: a code block that is never closed`);
    out.push({ file, line: start + 1, lang: open[1]!, text: body.join("\n"), heading });
  }
  return out;
}

const BLOCKS = DOC_FILES.flatMap(blocksOf);

/** The heading of a file kind in docs/config.md: `hal0.toml`, `slots/<name>.toml`, … */
function kindOfHeading(heading: string): FileKind | undefined {
  const path = /^`([^`]+)`/.exec(heading)?.[1];
  if (path === undefined) return undefined;
  return FILE_KINDS.find((k) => (k.file !== undefined ? k.file === path : new RegExp(`^${k.folder}/<\\w+>\\.toml$`).test(path)));
}

const parsesAs = (text: string, parse: (t: string) => unknown): unknown => {
  try {
    return parse(text);
  } catch {
    return undefined;
  }
};

/** Every kind of block, and how this suite runs it. A block must match exactly one. */
const KINDS = {
  "quickstart": (b: Block) => b.file === "README.md" && b.lang === "sh" && /^npm ci && /.test(b.text),
  "sh": (b: Block) => b.lang === "sh" && !/^npm ci && /.test(b.text),
  "toml file kind": (b: Block) => b.lang === "toml" && b.file === "docs/config.md" && kindOfHeading(b.heading) !== undefined,
  "toml #:schema line": (b: Block) => b.lang === "toml" && /^(#:schema \S+\n?)+$/.test(b.text),
  "toml Codex config": (b: Block) => b.lang === "toml" && (parsesAs(b.text, parseToml) as { mcp_servers?: unknown } | undefined)?.mcp_servers !== undefined,
  "json client config": (b: Block) => b.lang === "json" && (parsesAs(b.text, JSON.parse) as { mcpServers?: unknown } | undefined)?.mcpServers !== undefined,
  "json tool reply": (b: Block) => b.lang === "json" && (parsesAs(b.text, parseSample) as { status?: unknown } | undefined)?.status === "error",
  "yaml Hermes profile": (b: Block) => b.lang === "yaml" && (parsesAs(b.text, parseYaml) as { mcp_servers?: unknown } | undefined)?.mcp_servers !== undefined,
  "text validate output": (b: Block) => b.lang === "" && b.text.startsWith("$ hal0 validate "),
  "text plan": (b: Block) => b.lang === "" && /\nPlan: \d+ to create, .*\.$/.test(b.text),
  "text config tree": (b: Block) => b.lang === "" && b.text.includes("hal0.toml") && b.text.split("\n").every((l) => /^[\w-]+(\/<\w+>)?\.toml\s/.test(l)),
  "text state folder": (b: Block) => b.lang === "" && b.text.split("\n").every((l) => l.startsWith("<state>/")),
} satisfies Record<string, (b: Block) => boolean>;
type Kind = keyof typeof KINDS;

function kindOf(b: Block): Kind[] {
  return (Object.keys(KINDS) as Kind[]).filter((k) => KINDS[k](b));
}
const blocksOfKind = (kind: Kind): Block[] => BLOCKS.filter((b) => kindOf(b).includes(kind));

// ── Samples with `…` ────────────────────────────────────────────────────────

/** `…` as an object's member or an array's item: "and more". `…` as a value: anything. */
const MORE = "\u2026more";
const ANY = "\u2026any";

/**
 * A JSON sample of the docs: JSON in which `…` stands for more of an object's
 * keys (`{"kind": "operator", …}`), more items of an array, any value
 * (`"id": …`) or, inside a string, any text (`"rev_…"`).
 */
function parseSample(text: string): unknown {
  let out = "";
  const stack: string[] = [];
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inString) {
      out += c;
      if (c === "\\") out += text[++i];
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "{" || c === "[") stack.push(c);
    else if (c === "}" || c === "]") stack.pop();
    else if (c === "…") {
      const value = /:\s*$/.test(out);
      out += value ? JSON.stringify(ANY) : stack.at(-1) === "{" ? `${JSON.stringify(MORE)}: true` : JSON.stringify(MORE);
      continue;
    }
    out += c;
  }
  return JSON.parse(out);
}

/** Where `actual` differs from the sample `expected` (see parseSample); empty when it matches. */
function mismatches(actual: unknown, expected: unknown, path = "$"): string[] {
  if (expected === ANY) return [];
  if (typeof expected === "string" && expected.includes("…")) {
    const pattern = new RegExp(`^${expected.split("…").map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("[\\s\\S]*")}$`);
    return typeof actual === "string" && pattern.test(actual) ? [] : [`${path}: ${JSON.stringify(actual)} does not match ${JSON.stringify(expected)}`];
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return [`${path}: expected an array, got ${JSON.stringify(actual)}`];
    const more = expected.includes(MORE);
    const items = expected.filter((x) => x !== MORE);
    if (more ? actual.length < items.length : actual.length !== items.length) return [`${path}: ${actual.length} items, the sample has ${items.length}${more ? " or more" : ""}: ${JSON.stringify(actual)}`];
    return items.flatMap((item, i) => mismatches(actual[i], item, `${path}[${i}]`));
  }
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual)) return [`${path}: expected an object, got ${JSON.stringify(actual)}`];
    const want = Object.entries(expected).filter(([k]) => k !== MORE);
    const extra = MORE in expected ? [] : Object.keys(actual).filter((k) => !(k in expected));
    return [
      ...extra.map((k) => `${path}.${k}: ${JSON.stringify((actual as Record<string, unknown>)[k])} is not in the sample (add it, or end the sample's object with …)`),
      ...want.flatMap(([k, v]) => (k in actual ? mismatches((actual as Record<string, unknown>)[k], v, `${path}.${k}`) : [`${path}.${k}: missing`])),
    ];
  }
  return isDeepStrictEqual(actual, expected) ? [] : [`${path}: ${JSON.stringify(actual)}, the sample says ${JSON.stringify(expected)}`];
}

// ── Static examples (no server) ─────────────────────────────────────────────

/** The box's file a config.md example stands in for, when the whole box is compiled with it. */
function boxPathFor(kind: FileKind, parsed: Record<string, unknown>): string {
  if (kind.file !== undefined) return kind.file;
  const agentName = (parsed.agent as { name?: string } | undefined)?.name;
  const stem = { slot: "chat", stack: "forge", "mcp-server": "sqlite", agent: agentName ?? "coder" }[kind.id as string] ?? "example";
  return `${kind.folder}/${stem}.toml`;
}

function treeFiles(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (at: string): void => {
    for (const name of readdirSync(at).sort()) {
      const path = join(at, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".toml")) files.set(relative(dir, path).split("\\").join("/"), readFileSync(path, "utf8"));
    }
  };
  walk(dir);
  return files;
}

/** Leaf key paths of a parsed TOML document (arrays are leaves). */
function leaves(doc: Record<string, unknown>, prefix: string[] = []): Array<[string[], unknown]> {
  return Object.entries(doc).flatMap(([k, v]) =>
    v !== null && typeof v === "object" && !Array.isArray(v) ? leaves(v as Record<string, unknown>, [...prefix, k]) : [[[...prefix, k], v] as [string[], unknown]]);
}

describe("every example in README.md and docs/", () => {
  it("is a block of a known kind (a new kind of example needs a rule here before it can be added)", () => {
    expect(BLOCKS.length).toBeGreaterThan(30);
    const unknown = BLOCKS.filter((b) => kindOf(b).length !== 1).map((b) => `${at(b)} [${b.lang || "plain"}] ${kindOf(b).join(" + ") || "no rule"}: ${b.text.split("\n")[0]}`);
    expect(unknown).toEqual([]);
    for (const kind of Object.keys(KINDS) as Kind[]) expect(blocksOfKind(kind).length, `no block of kind "${kind}" is left: remove its rule`).toBeGreaterThan(0);
  });

  it.each(blocksOfKind("toml file kind").map((b) => [at(b), b] as const))("%s: a valid file of its kind, and the example box compiles with it in place", (_, b) => {
    const kind = kindOfHeading(b.heading)!;
    const parsed = parseToml(b.text) as Record<string, unknown>;
    const rel = boxPathFor(kind, parsed);
    const text = `${b.text}\n`;
    // The read step alone: parse, the kind's schema, the file name's grammar. Links to other files are not its business.
    const reporter = new Reporter(new Map([[rel, text]]));
    readTree(sourceTree("/box", [[rel, text]]), reporter);
    expect(reporter.diagnostics.map((d) => `${d.file}:${d.line}:${d.column} ${d.code}: ${d.summary}`)).toEqual([]);
    // The whole example box with this file in its place (models.toml: the box's models are kept beside the example's).
    const files = treeFiles(join(ROOT, "fixtures/box"));
    if (kind.id === "models") {
      const box = parseToml(files.get(rel)!) as { model: Record<string, unknown> };
      files.set(rel, stringifyToml({ model: { ...box.model, ...(parsed.model as Record<string, unknown>) } }));
    } else {
      files.set(rel, text);
    }
    const { diagnostics } = compile(sourceTree(join(ROOT, "fixtures/box"), files));
    expect(diagnostics.filter((d) => d.severity === "error").map((d) => `${d.file}:${d.line}:${d.column} ${d.code}: ${d.summary}`)).toEqual([]);
  });

  it("docs/config.md's hal0.toml example shows the defaults (\"these are the defaults\")", () => {
    const block = blocksOfKind("toml file kind").find((b) => kindOfHeading(b.heading)?.id === "settings")!;
    const defaults = Settings.parse({}) as Record<string, unknown>;
    for (const [path, value] of leaves(parseToml(block.text) as Record<string, unknown>)) {
      const real = path.reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], defaults);
      expect(value, path.join(".")).toEqual(real);
    }
  });

  it("the README's serve line for a box of your own is the one `npx hal0 init ~/mybox` prints", () => {
    const readme = read("README.md").replace(/\s+/g, " ");
    const line = /`(npx hal0 serve --config ~\/mybox [^`]*)`/.exec(readme)?.[1];
    expect(line).toBeDefined();
    const home = mkdtempSync(join(tmpdir(), "hal0-readme-init-"));
    try {
      const run = spawnSync(process.execPath, [HAL0, "init", join(home, "mybox")], { cwd: ROOT, env: cleanEnv({ npm_command: "exec" }), encoding: "utf8" });
      expect(run.status, run.stderr).toBe(0);
      const printed = run.stdout.split("\n").map((l) => l.trim().split(/\s{2,}/)[0]!).find((l) => l.startsWith("npx hal0 serve"));
      expect(printed).toBe(line!.replaceAll("~", home));
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("docs/mcp.md names every hal0-admin tool that takes dry_run, and every one annotated openWorldHint", () => {
    const mcp = read("docs/mcp.md").replace(/\s+/g, " ");
    const listed = (from: string) => {
      const text = mcp.slice(mcp.indexOf(from) + from.length);
      return [...text.slice(0, text.indexOf(")")).matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!).sort();
    };
    const catalog = buildCatalog(ROUTES);
    const properties = (t: (typeof catalog)[number]) => (t.argsSchema.properties ?? {}) as Record<string, unknown>;
    expect(listed("A dry run (`dry_run: true`:")).toEqual(catalog.filter((t) => "dry_run" in properties(t)).map((t) => t.name).sort());
    expect(listed("`openWorldHint` on tools that reach outside the box (")).toEqual(catalog.filter((t) => t.annotations.openWorldHint).map((t) => t.name).sort());
  });

  it.each(blocksOfKind("toml #:schema line").map((b) => [at(b), b] as const))("%s: each #:schema line names one of hal0's JSON Schemas", (_, b) => {
    expect(parseToml(b.text)).toEqual({});
    for (const [, path] of b.text.matchAll(/^#:schema (\S+)$/gm)) {
      const name = /schema\/json\/([\w.-]+)$/.exec(path!)?.[1];
      expect(FILE_KINDS.map((k) => k.jsonSchema), path).toContain(name);
      expect(existsSync(join(ROOT, "schema/json", name!)), path).toBe(true);
    }
  });

  it.each(blocksOfKind("text config tree").map((b) => [at(b), b] as const))("%s: the config tree names every file kind, as config.md's headings do, and nothing else", (_, b) => {
    const named = [...b.text.matchAll(/(?<![\w/])[\w-]+(?:\/<\w+>)?\.toml\b/g)].map((m) => m[0]);
    const headings = blocksOfKind("toml file kind").map((x) => /^`([^`]+)`/.exec(x.heading)![1]!);
    expect([...named].sort()).toEqual([...new Set(headings)].sort());
    expect(named.map((n) => kindOfHeading(`\`${n}\``)?.id).sort()).toEqual(FILE_KINDS.map((k) => k.id).sort());
  });

  it.each(blocksOfKind("text validate output").map((b) => [at(b), b] as const))("%s: is what the command prints, run from the repository's root", (_, b) => {
    const [command, ...output] = b.text.split("\n");
    const args = command!.replace(/^\$ hal0 /, "").split(" ");
    const run = spawnSync(process.execPath, [HAL0, ...args], { cwd: ROOT, env: cleanEnv({ NO_COLOR: "1" }), encoding: "utf8" });
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe(`${output.join("\n")}\n`);
    expect(run.status).toBe(1); // invalid
  });

  it.each(blocksOfKind("text plan").map((b) => [at(b), b] as const))("%s: is the planner's text for golden inputs (tune-ctx-size's tree, port-taken-by-hand's world)", (_, b) => {
    // Two golden cases of fixtures/plans with one story: chat's context grows (tune-ctx-size's
    // tree, which is port-taken-by-hand's with that one edit) on a box where a stranger holds
    // embed's port (port-taken-by-hand's observed world and inventory).
    const plans = join(ROOT, "fixtures/plans");
    const { model, diagnostics } = compile(sourceTree(PLAN_ROOT, treeFiles(join(plans, "tune-ctx-size/tree"))));
    expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    const world = (f: string) => JSON.parse(readFileSync(join(plans, "port-taken-by-hand", f), "utf8"));
    const plan = planChanges(model!, world("observed.json") as Observed, world("inventory.json") as Inventory);
    expect(formatPlan(plan)).toBe(b.text);
  });

  it.each(blocksOfKind("quickstart").map((b) => [at(b), b] as const))("%s: its serve command is the one this suite serves, and npm test builds then runs every suite", (_, b) => {
    const [serve, test] = b.text.split("\n").map((l) => l.replace(/\s+#.*$/, ""));
    expect(serve).toBe(`npm ci && ${SERVE_COMMAND}`);
    // "REST API on 127.0.0.1:8080": the example box's [server] (this suite serves its copy on a free port instead).
    const { server } = parseToml(read("fixtures/box/hal0.toml")) as { server: { host: string; port: number } };
    expect(b.text).toContain(`REST API on ${server.host}:${server.port}`);
    expect(test).toBe("npm test");
    const pkg = JSON.parse(read("package.json")) as { scripts: Record<string, string> };
    expect(pkg.scripts.pretest).toBe("npm run build");
    expect(pkg.scripts.test).toBe("vitest run");
  });
});

// ── The served box ───────────────────────────────────────────────────────────

/** The Quickstart's serve command: this suite's server is exactly it, on a copy, on a free port. */
const SERVE_COMMAND = "npx hal0 serve --config fixtures/box --state .hal0/state";

/** Without the caller's hal0 variables, so every command finds its folders by its flags alone. */
/** The stand-in Hub docs/models.md's walkthrough talks to (HF_ENDPOINT of the served box and of each block). */
let docsHub: FakeHub | undefined;

function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...(docsHub ? { HF_ENDPOINT: docsHub.endpoint } : {}), ...extra };
  for (const k of ["HAL0_CONFIG", "HAL0_STATE", "HAL0_HOME", "HAL0_TOKEN", "FORCE_COLOR"]) delete env[k];
  return env;
}

interface Served {
  readonly dir: string;
  /** The copy of fixtures/box it serves. */
  readonly config: string;
  /** Where `.hal0` of the docs lives: `<dotHal0>/state` is the server's state folder. */
  readonly dotHal0: string;
  readonly state: string;
  /** A folder on PATH: `hal0` (this repository's bin) and a `claude` that records its arguments. */
  readonly bin: string;
  readonly calls: string;
  readonly hermesHome: string;
  readonly port: number;
  readonly url: string;
  readonly operator: string;
  readonly child: ChildProcess;
  log: string;
}

let served: Served | undefined;
/** Exported variables carried from one sh block to the next, as in one terminal. */
const session: Record<string, string> = {};
/** A tool each hal0 mount lists, to tell that a client config reached the mount it names. */
const MOUNT_TOOL: Readonly<Record<string, string>> = { admin: "slot_list", memory: "memory_search", agents: "agent_profile_list" };
/** `claude` invocations by the block that made them. */
const claudeCalls: Array<{ block: Block; args: string[] }> = [];

async function serve(): Promise<Served> {
  // docs/models.md pulls Qwen/Qwen3-0.6B-GGUF: a local stand-in Hub serves it (nothing leaves this machine).
  const small = (quant: number) => ggufBytes({ kvs: modelKvs({ arch: "qwen3", ctx: 40960, name: "Qwen3 0.6B", fileType: quant }), tensors: [{ name: "w", dims: [16 * 1024] }] });
  docsHub = await startFakeHub({ repos: { "Qwen/Qwen3-0.6B-GGUF": { files: { "Qwen3-0.6B-Q4_K_M.gguf": small(15), "Qwen3-0.6B-Q8_0.gguf": small(7) }, downloads: 1000 } } });
  const dir = mkdtempSync(join(tmpdir(), "hal0-docs-"));
  const config = join(dir, "config");
  const dotHal0 = join(dir, "dot-hal0");
  const state = join(dotHal0, "state");
  const bin = join(dir, "bin");
  const calls = join(dir, "claude-calls");
  const hermesHome = join(dir, "hermes");
  for (const d of [dotHal0, bin, calls, join(hermesHome, "profiles/coder")]) mkdirSync(d, { recursive: true });
  cpSync(join(ROOT, "fixtures/box"), config, { recursive: true });
  // The copy's slots move to free ports, so this suite never meets the suites that run the
  // box on its own ports (test/cli/apply.test.ts). And its Hermes home is a real one with
  // profile `coder`, which asks for private memory: the YAML example is checked against it.
  const settings = readFileSync(join(config, "hal0.toml"), "utf8")
    .replace(/^port_range_start = \d+$/m, "port_range_start = 1024")
    .replace(/^port_range_end = \d+$/m, "port_range_end = 65535");
  const home = `home = ${JSON.stringify(hermesHome)}`;
  writeFileSync(join(config, "hal0.toml"), /^\[hermes\]$/m.test(settings) ? settings.replace(/^\[hermes\]$/m, `[hermes]\n${home}`) : `${settings}\n[hermes]\n${home}\n`);
  for (const file of readdirSync(join(config, "slots"))) {
    const path = join(config, "slots", file);
    writeFileSync(path, readFileSync(path, "utf8").replace(/^port = \d+$/m, `port = ${await freePort()}`));
  }
  writeFileSync(join(hermesHome, "profiles/coder/config.yaml"), "# coder\nmodel:\n  default: qwen3-coder\nhal0:\n  memory_private: true\n");
  writeFileSync(join(bin, "hal0"), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(HAL0)} "$@"\n`);
  writeFileSync(join(bin, "claude"), `#!/bin/sh\n# A stand-in for Claude Code's CLI: records its arguments, one file per call.\nn=$(ls "${calls}" | wc -l)\nprintf '%s\\0' "$@" > "${calls}/$(printf %04d "$n")"\n`);
  chmodSync(join(bin, "hal0"), 0o755);
  chmodSync(join(bin, "claude"), 0o755);

  const args = SERVE_COMMAND.replace(/^npx hal0 /, "").split(" ").map((a) => (a === "fixtures/box" ? config : a === ".hal0/state" ? state : a));
  const child = spawn(process.execPath, [HAL0, ...args, "--port", "0"], { cwd: ROOT, env: cleanEnv(), stdio: ["ignore", "pipe", "pipe"] });
  const s = { dir, config, dotHal0, state, bin, calls, hermesHome, child, log: "" } as Served & { port: number; url: string; operator: string };
  child.stdout!.on("data", (c: Buffer) => (s.log += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (s.log += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`hal0 serve did not listen: ${s.log}`)), 20_000);
    child.stdout!.on("data", () => {
      const line = s.log.split("\n").find((l) => l.includes('"hal0 serve listening"'));
      if (line) {
        clearTimeout(timer);
        resolve(JSON.parse(line).url.replace(/\/$/, ""));
      }
    });
    child.once("exit", (code) => reject(new Error(`hal0 serve exited ${code}: ${s.log}`)));
  });
  s.url = url;
  s.port = Number(new URL(url).port);
  s.operator = readFileSync(join(state, "operator.token"), "utf8").trim();
  return s;
}

async function getJson(path: string, token?: string): Promise<any> {
  const res = await fetch(`${served!.url}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return res.json();
}

async function until<T>(what: string, check: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// ── Running sh blocks ────────────────────────────────────────────────────────

interface Chunk {
  /** Commands, as the doc writes them. */
  readonly lines: string[];
  /** The same without the comment that ends them. */
  readonly code: string[];
  /** The comment that ends it: on its last line (inline), or the line after it (a whole line). */
  comment?: { readonly text: string; readonly whole: boolean };
}

/**
 * Splits a block into commands, each ending on a line that closes every quote
 * and has no trailing `\`. A comment ends the command before it.
 */
function chunksOf(text: string): Chunk[] {
  const chunks: Chunk[] = [];
  let current: string[] = [];
  let currentCode: string[] = [];
  let quote: "'" | '"' | undefined;
  for (const line of text.split("\n")) {
    if (quote === undefined && current.length === 0 && /^\s*#/.test(line)) {
      const last = chunks.at(-1);
      if (last && last.comment === undefined) last.comment = { text: line.replace(/^\s*#\s?/, ""), whole: true };
      else if (last) throw new Error(`two comments after one command: ${line}`);
      continue;
    }
    if (quote === undefined && current.length === 0 && line.trim() === "") continue;
    let comment: string | undefined;
    let code = line;
    for (let i = 0; i < line.length; i++) {
      const c = line[i]!;
      if (quote === "'") {
        if (c === "'") quote = undefined;
      } else if (quote === '"') {
        if (c === "\\") i++;
        else if (c === '"') quote = undefined;
      } else if (c === "\\") i++;
      else if (c === "'" || c === '"') quote = c;
      else if (c === "#" && (i === 0 || /\s/.test(line[i - 1]!))) {
        comment = line.slice(i + 1).trim();
        code = line.slice(0, i).trimEnd();
        break;
      }
    }
    current.push(line);
    currentCode.push(code);
    if (quote === undefined && !/\\$/.test(line)) {
      chunks.push({ lines: current, code: currentCode, ...(comment !== undefined ? { comment: { text: comment, whole: false } } : {}) });
      current = [];
      currentCode = [];
    }
  }
  if (current.length > 0) throw new Error(`a command that never ends: ${current.join("\n")}`);
  return chunks;
}

/**
 * What a command's comment says it prints, when it says so: a JSON sample
 * (`{…}`, `[…]`), an HTTP status (`# 401: no credential`, with curl's `-w
 * '%{http_code}'`), a freshly minted token (`# hal0_ag_… (shown once)`: the
 * output, or the variable the command assigns), or, for a comment on its own
 * line after the command, the exact text. Any other inline comment is prose.
 */
function expectationOf(chunk: Chunk): ((output: string) => string[]) | undefined {
  const c = chunk.comment;
  if (c === undefined) return undefined;
  if (/^[[{]/.test(c.text)) {
    const sample = parseSample(c.text);
    return (output) => {
      const actual = parsesAs(output.trim(), JSON.parse);
      return actual === undefined ? [`not one JSON document: ${output}`] : mismatches(actual, sample);
    };
  }
  const status = /^(\d{3})\b/.exec(c.text)?.[1];
  if (status !== undefined) return (output) => (output.trim() === status ? [] : [`printed ${JSON.stringify(output.trim())}, the comment says ${status}`]);
  const token = /^(hal0_(?:ag|op)_)…/.exec(c.text)?.[1];
  if (token !== undefined) return (output) => (new RegExp(`^${token}[A-Za-z0-9_-]{20,}$`).test(output.trim()) ? [] : [`${JSON.stringify(output.trim())} is not a ${token}… token`]);
  if (c.whole) return (output) => (output.trim() === c.text.trim() ? [] : [`printed ${JSON.stringify(output.trim())}, the comment says ${JSON.stringify(c.text)}`]);
  return undefined;
}

const MARK = "@@hal0-docs-example-step@@";

/**
 * The block as this suite runs it: the docs' box, state and port become the
 * served copy's; `npx hal0` is this repository's bin (`hal0` on PATH);
 * placeholders of ids become the newest real one; an event stream is read for
 * two seconds; the serve line of rest-api.md is this suite's server itself.
 */
function rewrite(line: string, s: Served): string {
  const auth = `-H "Authorization: Bearer ${s.operator}"`;
  return line
    .replace(/\b(localhost|127\.0\.0\.1):8080\b/g, `$1:${s.port}`)
    .replace(/--config fixtures\/box\b/g, `--config ${s.config}`)
    .replace(/(?<![\w./-])\.hal0(?=[/\s]|$)/g, s.dotHal0)
    .replace(/\bnpx hal0 /g, "hal0 ")
    .replace(/\bpln_…/g, `$(curl -s localhost:${s.port}/api/plans ${auth} | jq -r '.plans[0].id')`)
    .replace(/\bapr_…/g, `$(curl -s 'localhost:${s.port}/api/agent/approvals?state=pending' ${auth} | jq -r '.approvals[-1].id')`)
    .replace(/^curl -sN (.*)$/, "{ curl -sN --max-time 2 $1 || [ $? -eq 28 ]; }");
}

/** Bash's prelude: every jq must be handed JSON (jq itself refuses anything else, but takes empty input). */
const PRELUDE = `set -eo pipefail
jq() { local input; input=$(cat); if [ -z "$input" ]; then echo "jq: no input" >&2; return 1; fi; printf '%s\\n' "$input" | command jq "$@"; }
`;

interface Ran {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Each chunk's output. */
  readonly outputs: string[];
}

function runBash(script: string, s: Served, envOut: string, timeoutMs: number): Promise<Ran> {
  const env = cleanEnv({ ...session, PATH: `${s.bin}:${process.env.PATH}`, TOKEN: session.TOKEN ?? s.operator, NO_COLOR: "1" });
  return new Promise((resolve) => {
    const child = spawn("bash", ["-c", `${PRELUDE}${script}\nenv -0 > ${JSON.stringify(envOut)}\n`], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), timeoutMs);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, outputs: stdout.split(`\n${MARK}\n`) });
    });
  });
}

/** Exported variables the block set or changed, for the blocks after it. */
function carry(envOut: string, before: NodeJS.ProcessEnv): void {
  if (!existsSync(envOut)) return;
  for (const entry of readFileSync(envOut, "utf8").split("\0")) {
    const eq = entry.indexOf("=");
    if (eq <= 0) continue;
    const [k, v] = [entry.slice(0, eq), entry.slice(eq + 1)];
    if (["_", "SHLVL", "PWD", "OLDPWD"].includes(k) || k.startsWith("BASH")) continue;
    if (before[k] !== v) session[k] = v;
  }
  rmSync(envOut, { force: true });
}

async function runShBlock(b: Block, s: Served, options: { after?: (line: string) => string | undefined; timeoutMs?: number } = {}): Promise<void> {
  const chunks = chunksOf(b.text);
  const serveLine = `${SERVE_COMMAND} &`;
  let script = "";
  const checks: Array<{ chunk: Chunk; check?: (o: string) => string[]; stream: boolean }> = [];
  for (const chunk of chunks) {
    if (chunk.code.length === 1 && chunk.code[0]!.trim() === serveLine) {
      continue; // this suite's own server (the README's command): already serving
    }
    const text = chunk.code.map((l) => rewrite(l, s)).join("\n");
    const assigned = /^(?:export\s+)?([A-Za-z_]\w*)=/.exec(chunk.lines[0]!)?.[1];
    const check = expectationOf(chunk);
    script += `${text}\n`;
    if (check && assigned) script += `printf '%s' "$${assigned}"\n`;
    const extra = options.after?.(chunk.lines.join("\n"));
    if (extra) script += `${extra}\n`;
    script += `printf '\\n%s\\n' ${JSON.stringify(MARK)}\n`;
    checks.push({ chunk, check, stream: /^curl -sN /.test(chunk.lines[0]!) });
  }
  const envOut = join(s.dir, "env.out");
  const before = cleanEnv({ ...session, PATH: `${s.bin}:${process.env.PATH}` });
  const callsBefore = readdirSync(s.calls).length;
  const ran = await runBash(script, s, envOut, options.timeoutMs ?? 60_000);
  expect(ran.code, `${at(b)} exited ${ran.code}\n--- stdout\n${ran.stdout}\n--- stderr\n${ran.stderr}\n--- script\n${script}`).toBe(0);
  carry(envOut, before);
  for (const [i, { chunk, check, stream }] of checks.entries()) {
    const output = ran.outputs[i] ?? "";
    const command = chunk.lines.join("\n");
    if (check) expect(check(output), `${at(b)}: ${command}\n  # ${chunk.comment!.text}`).toEqual([]);
    else {
      const error = /"error":\s*\{\s*"code":\s*"([\w.]+)"/.exec(output)?.[1];
      expect(error, `${at(b)}: ${command}\nprinted an error reply no comment announces: ${output}`).toBeUndefined();
      // A jq filter naming a field the reply does not have prints null, and exits 0.
      if (/\bjq\b/.test(command)) expect(output, `${at(b)}: ${command}\nprinted a null: a field its jq filter names is not in the reply`).not.toMatch(/(^|: )null,?$/m);
    }
    if (stream) expect(output, `${at(b)}: ${command}`).toMatch(/^(id: .*\n)?event: \w+\ndata: /);
  }
  for (const f of readdirSync(s.calls).sort().slice(callsBefore)) {
    claudeCalls.push({ block: b, args: readFileSync(join(s.calls, f), "utf8").split("\0").slice(0, -1) });
  }
}

/** The MCP SDK's client on `url` with `headers` (a real initialize), its tool names. */
async function mcpTools(url: string, headers: Record<string, string>): Promise<{ client: Client; tools: string[] }> {
  const client = new Client({ name: "hal0-docs-examples", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  return { client, tools: (await client.listTools()).tools.map((t) => t.name) };
}

/** A URL of the docs (`127.0.0.1:8080`) on the served port. */
const servedUrl = (url: string) => url.replace(/\b(localhost|127\.0\.0\.1):8080\b/, `$1:${served!.port}`);

const docker = blocksOfKind("sh").some((b) => /^docker /m.test(b.text)) ? await dockerEngine("docs/operations.md's Docker example") : undefined;

describe("the examples against a real hal0 serve (the Quickstart's command on a copy of fixtures/box)", () => {
  beforeAll(async () => {
    served = await serve();
    // "its 8 slots converged as processes"
    const promised = Number(/its (\d+) slots converged/.exec(blocksOfKind("quickstart")[0]!.text)?.[1]);
    type Row = { name: string; status: string; enabled: boolean; last_error?: { code: string; message: string } };
    let last: Row[] = [];
    const running = await until("the box's slots running", async () => {
      last = ((await getJson("/api/slots")) as { slots: Row[] }).slots;
      const enabled = last.filter((x) => x.enabled);
      return enabled.every((x) => x.status === "running") ? enabled.length : undefined;
    }, 90_000).catch((err: Error) => {
      // Which slot, and why: the roster's last_error, and the server's last lines.
      const rows = last.filter((x) => x.enabled && x.status !== "running").map((x) => `${x.name}: ${x.status}${x.last_error ? ` (${x.last_error.code}: ${x.last_error.message})` : ""}`);
      throw new Error(`${err.message}\n${rows.join("\n")}\n--- hal0 serve, last lines ---\n${served!.log.split("\n").slice(-30).join("\n")}`);
    });
    expect(running).toBe(promised);
  }, 120_000);

  afterAll(async () => {
    const s = served;
    if (!s) return;
    // The serve first: while its first apply still starts slots (a run of one test, cut short) it holds the apply lock,
    // and a down beside it would be refused and leave the runners it goes on starting.
    const exited = new Promise((r) => s.child.once("exit", r));
    s.child.kill("SIGTERM");
    await exited;
    spawnSync(process.execPath, [HAL0, "down", "--config", s.config, "--state", s.state], { env: cleanEnv(), timeout: 60_000 });
    rmSync(s.dir, { recursive: true, force: true });
    await docsHub?.close();
  }, 90_000);

  it("npx hal0 is this repository's bin", () => {
    const run = spawnSync("npx", ["--no", "--", "hal0", "--help"], { cwd: ROOT, env: cleanEnv(), encoding: "utf8", timeout: 60_000 });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe(spawnSync(process.execPath, [HAL0, "--help"], { cwd: ROOT, encoding: "utf8" }).stdout);
  }, 60_000);

  it("docs/rest-api.md's serve line is the Quickstart's command", () => {
    const lines = blocksOfKind("sh").flatMap((b) => b.text.split("\n")).filter((l) => /\bhal0 serve\b/.test(l));
    expect(lines.map((l) => l.replace(/\s+#.*$/, "").replace(/ &$/, ""))).toEqual(lines.map(() => SERVE_COMMAND));
  });

  for (const b of blocksOfKind("sh")) {
    if (/^docker /m.test(b.text)) {
      it(`${at(b)}: the Docker example (a real engine: ${docker ? "yes" : "none, syntax and sed only"})`, async () => {
        const s = served!;
        const dotBox = join(s.dotHal0, "docker-box");
        if (!docker) {
          expect(spawnSync("bash", ["-n", "-c", b.text]).status).toBe(0);
          const sed = /sed -i '([^']+)' \.hal0\/docker-box\/hal0\.toml/.exec(b.text)?.[1];
          const out = spawnSync("sed", [sed!, join(ROOT, "fixtures/box/hal0.toml")], { encoding: "utf8" }).stdout;
          expect(out).toMatch(/^runtime = "docker"$/m);
          return;
        }
        // The one step added: after the copy, its slots move to free ports (the box's own are
        // test/cli/apply.test.ts's, which may run meanwhile).
        const ports = await Promise.all(readdirSync(join(ROOT, "fixtures/box/slots")).map(async (f) => [f, await freePort()] as const));
        const movePorts = [
          `sed -i 's/^port_range_start = .*/port_range_start = 1024/; s/^port_range_end = .*/port_range_end = 65535/' ${dotBox}/hal0.toml`,
          ...ports.map(([f, p]) => `sed -i 's/^port = .*/port = ${p}/' ${dotBox}/slots/${f}`),
        ].join("\n");
        const release = await exampleBoxTurn();
        try {
          await runShBlock(b, s, { after: (cmd) => (cmd.includes("cp -r fixtures/box") ? movePorts : undefined), timeoutMs: 300_000 });
        } finally {
          // The block ends with `hal0 down`; after a failure on the way, that is still owed.
          const dockerState = join(s.dotHal0, "docker-state");
          if (existsSync(dockerState)) spawnSync(process.execPath, [HAL0, "down", "--config", dotBox, "--state", dockerState], { env: cleanEnv(), timeout: 120_000 });
          release();
        }
      }, 920_000);
    } else {
      it(`${at(b)}: runs, and prints what it says`, async () => {
        await runShBlock(b, served!);
      }, 60_000);
    }
  }

  it("claude mcp add: each URL and header is one hal0 serves (the SDK's client connects with them)", async () => {
    expect(claudeCalls.length).toBeGreaterThan(0);
    for (const { block, args } of claudeCalls) {
      const [verb, sub, ...rest] = args;
      expect([verb, sub], at(block)).toEqual(["mcp", "add"]);
      const headers: Record<string, string> = {};
      const positional: string[] = [];
      let transport = "";
      for (let i = 0; i < rest.length; i++) {
        if (rest[i] === "--transport") transport = rest[++i]!;
        else if (rest[i] === "--header") {
          const [k, ...v] = rest[++i]!.split(":");
          headers[k!.trim()] = v.join(":").trim();
        } else positional.push(rest[i]!);
      }
      expect(transport).toBe("http");
      const [name, url] = positional as [string, string];
      expect(new URL(url).pathname, at(block)).toBe(`/mcp/${name.replace(/^hal0-/, "")}`);
      expect(headers.Authorization, at(block)).toMatch(/^Bearer hal0_ag_/);
      const { client, tools } = await mcpTools(servedUrl(url), headers);
      try {
        expect(tools.length, at(block)).toBeGreaterThan(0);
        if (name === "hal0-memory") {
          // X-hal0-Private: 1 with an agent token: the agent's own namespace.
          const res = (await client.callTool({ name: "memory_search", arguments: { query: "anything" } })) as { isError?: boolean; content: Array<{ text?: string }> };
          expect(res.isError ?? false, res.content[0]?.text).toBe(false);
        }
      } finally {
        await client.close();
      }
    }
  });

  it.each(blocksOfKind("json client config").map((b) => [at(b), b] as const))("%s: the client's config reaches its hal0 server with the token the docs exported", async (_, b) => {
    const config = JSON.parse(b.text) as { mcpServers: Record<string, { url: string; headers: Record<string, string>; type?: string }> };
    for (const [name, server] of Object.entries(config.mcpServers)) {
      // Claude Code expands ${VAR}, Cursor ${env:VAR}: the token a block before exported (HAL0_AGENT_TOKEN in docs/mcp.md, HAL0_BRIDGE_TOKEN in docs/agents.md).
      const used: string[] = [];
      const headers = Object.fromEntries(Object.entries(server.headers).map(([k, v]) => [k, v.replace(/\$\{(?:env:)?(\w+)\}/g, (_m, n: string) => (used.push(n), session[n] ?? `\${${n}}`))]));
      expect(used, "the config reads its token from the environment").toHaveLength(1);
      expect(session[used[0]!], `a block before exports ${used[0]}`).toMatch(/^hal0_ag_/);
      expect(headers.Authorization).toBe(`Bearer ${session[used[0]!]}`);
      if (server.type !== undefined) expect(server.type).toBe("http");
      const mount = name.replace(/^hal0-/, "");
      expect(new URL(server.url).pathname).toBe(`/mcp/${mount}`);
      const { client, tools } = await mcpTools(servedUrl(server.url), headers);
      await client.close();
      expect(tools).toContain(MOUNT_TOOL[mount]);
    }
  });

  it.each(blocksOfKind("toml Codex config").map((b) => [at(b), b] as const))("%s: Codex's config reaches its hal0 server with the token the docs exported", async (_, b) => {
    const config = parseToml(b.text) as { mcp_servers: Record<string, { url: string; bearer_token_env_var: string }> };
    for (const [name, server] of Object.entries(config.mcp_servers)) {
      const token = session[server.bearer_token_env_var];
      expect(token, `a block before exports ${server.bearer_token_env_var}`).toMatch(/^hal0_ag_/);
      const mount = name.replace(/^hal0-/, "");
      expect(new URL(server.url).pathname).toBe(`/mcp/${mount}`);
      const { client, tools } = await mcpTools(servedUrl(server.url), { Authorization: `Bearer ${token}` });
      await client.close();
      expect(tools).toContain(MOUNT_TOOL[mount]);
    }
  });

  it("docs/operations.md's Hermes YAML is what hal0 wrote into a profile of the served box", async () => {
    const s = served!;
    const [b] = blocksOfKind("yaml Hermes profile");
    const sample = parseYaml(b!.text) as { mcp_servers: Record<string, Record<string, unknown>> };
    const file = join(s.hermesHome, "profiles/coder/config.yaml");
    const port = (parseToml(readFileSync(join(s.config, "hal0.toml"), "utf8")) as { server: { port: number } }).server.port;
    const written = await until("the profile wired with every sample entry", async () => {
      const servers = (parseYaml(readFileSync(file, "utf8")) as { mcp_servers?: Record<string, unknown> }).mcp_servers ?? {};
      return Object.keys(sample.mcp_servers).every((k) => k in servers) ? servers : undefined;
    });
    // "url: …/mcp/admin   # from [server] host and port": the served config's port (8080 in the docs' box).
    const expected = JSON.parse(JSON.stringify(sample.mcp_servers).replaceAll("127.0.0.1:8080", `127.0.0.1:${port}`)) as Record<string, unknown>;
    for (const [id, entry] of Object.entries(expected)) expect(mismatches(written[id], entry), id).toEqual([]);
    // "# and hal0-memory, at /mcp/memory"
    const admin = expected["hal0-admin"] as { url: string };
    expect(mismatches(written["hal0-memory"], { ...admin, url: admin.url.replace("/mcp/admin", "/mcp/memory") }), "hal0-memory").toEqual([]);
  });

  it.each(blocksOfKind("json tool reply").map((b) => [at(b), b] as const))("%s: is the tool's reply, reproduced", async (_, b) => {
    const s = served!;
    const sample = parseSample(b.text) as { error: { code: string } };
    const token = session.HAL0_AGENT_TOKEN!;
    const call = async (args: Record<string, unknown>) => {
      const { client } = await mcpTools(`${s.url}/mcp/memory`, { Authorization: `Bearer ${token}` });
      try {
        const res = (await client.callTool({ name: "memory_add", arguments: args })) as { isError?: boolean; content: Array<{ text: string }> };
        expect(res.isError).toBe(true);
        return JSON.parse(res.content[0]!.text) as unknown;
      } finally {
        await client.close();
      }
    };
    const settings = async (body: unknown) => {
      const res = await fetch(`${s.url}/api/settings`, { method: "PUT", headers: { authorization: `Bearer ${s.operator}`, "content-type": "application/json" }, body: JSON.stringify(body) });
      expect(res.status, await res.clone().text()).toBe(200);
    };
    switch (sample.error.code) {
      case "mcp.memory_schema":
        expect(mismatches(await call({ text: "remember me", source: "someone-else" }), sample)).toEqual([]);
        return;
      case "memory.engine_unavailable": {
        // The sample's engine URL, on a port nothing listens on.
        const sampleUrl = /http:\/\/127\.0\.0\.1:\d+/.exec(b.text)![0];
        const dead = `http://127.0.0.1:${await freePort()}`;
        await settings({ memory: { engine: "hindsight", url: dead } });
        try {
          const reply = await until("the hindsight engine in use", async () => {
            const r = (await call({ text: "remember me" })) as { error: { code: string } };
            return r.error.code === "memory.engine_unavailable" ? r : undefined;
          }, 10_000);
          expect(mismatches(reply, JSON.parse(JSON.stringify(sample).replaceAll(sampleUrl, dead)))).toEqual([]);
        } finally {
          await settings({ memory: { engine: "embedded", url: null } });
        }
        return;
      }
      default:
        throw new Error(`${at(b)}: no scenario reproduces a reply of ${sample.error.code}; add one`);
    }
  });

  it.each(blocksOfKind("text state folder").map((b) => [at(b), b] as const))("%s: lists every file the served box's state folder holds, and each exists", async (_, b) => {
    const s = served!;
    const files: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (entry.isDirectory()) walk(join(dir, entry.name));
        else files.push(relative(s.state, join(dir, entry.name)));
      }
    };
    walk(s.state);
    const listed = b.text.split("\n").map((l) => /^<state>\/(\S+)/.exec(l)![1]!);
    const pattern = (p: string) => new RegExp(`^${p.replace(/[.]/g, "\\.").replace(/<\w+>/g, "[^/]+")}$`);
    // apply.lock exists only while an apply runs: take the lock in a folder of our own.
    const lockDir = mkdtempSync(join(tmpdir(), "hal0-docs-lock-"));
    const release = await acquireLock(lockDir, "hal0 apply");
    // pull.lock only while a hal0 model pull runs: the same.
    const releasePull = await acquirePullLock(lockDir, "hal0 model pull o/r f.gguf");
    // commit.lock only while a commit writes the config files: the same.
    const releaseCommit = await acquireCommitLock(lockDir, "a commit to the config files");
    expect(readdirSync(lockDir).sort()).toEqual(["apply.lock", "commit.lock", "pull.lock"]);
    for (const lock of ["apply.lock", "commit.lock", "pull.lock"]) expect(Object.keys(JSON.parse(readFileSync(join(lockDir, lock), "utf8"))).sort()).toEqual(["boot_id", "command", "host", "pid", "pid_start", "started_at", "state"]);
    await release();
    await releasePull();
    await releaseCommit();
    rmSync(lockDir, { recursive: true });
    // label-key and container.log are the docker and swarm runtimes' (their first start and first removal make them; test/reconciler/docker-sweep.test.ts
    // reads container.log); the served box runs processes. steps.json is there only while an apply runs (test/cli/status-during-apply.test.ts reads it then).
    const elsewhere = new Set(["apply.lock", "pull.lock", "commit.lock", "label-key", "steps.json", "slots/<name>/container.log"]);
    for (const p of listed.filter((p) => !elsewhere.has(p))) expect(files.some((f) => pattern(p).test(f)), `${p} is not in the state folder: ${files.join(", ")}`).toBe(true);
    // SQLite's own companions (-wal, -shm) and a file being written (atomic writes: a temp file, then a rename) aside,
    // nothing is there that the listing does not name.
    for (const f of files.filter((f) => !/-(wal|shm|journal)$/.test(f) && !/\.hal0\.tmp$/.test(f))) expect(listed.some((p) => pattern(p).test(f)), `${f} is not listed`).toBe(true);
    // "(0600; the folder is made 0700)", "0600 in a 0700 folder"
    expect(statSync(s.state).mode & 0o777).toBe(0o700);
    expect(statSync(join(s.state, "operator.token")).mode & 0o777).toBe(0o600);
    expect(statSync(join(s.state, "tokens")).mode & 0o777).toBe(0o700);
    for (const t of readdirSync(join(s.state, "tokens"))) expect(statSync(join(s.state, "tokens", t)).mode & 0o777, t).toBe(0o600);
  });
});
