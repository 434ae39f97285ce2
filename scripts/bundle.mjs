// Bundles the CLI (cli/main.ts and every module it reaches) into one CommonJS script,
// dist/cli-bundle/hal0.cjs, for bin/hal0.cjs: a command then reads one file instead of
// ~250, and bin/load-bundle.cjs runs it with V8's code cache, which this script writes
// next to it (hal0.cjs.<key>.cache) after running a few commands on the example box, so
// that what they compiled is not compiled again at each start. A command's own modules
// are still evaluated only when it runs (esbuild keeps each behind its dynamic import).
// The tsc output in dist/ stays what the tests and the bench import.
//
// Left outside the bundle, loaded from node_modules as before:
//   - native modules (better-sqlite3; ssh2 and its optional cpu-features);
//   - what dockerode and docker-modem load at import and hal0 never uses (ssh2, and
//     dockerode's BuildKit session with gRPC, which read files beside themselves):
//     behind stand-ins that require them the first time they are used (DOCKER_DEFERRED);
//   - the packages of `hal0 serve` and the other long-running or rare commands
//     (h3, the MCP SDK, pino, prom-client, the Hub client, yaml): they
//     read files beside themselves or start workers from their own folder, and a
//     command that needs them runs for long enough that their loading does not count.
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { withBundleId } from "../bin/load-bundle.cjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "dist/cli-bundle");

/** Packages bundled (with whatever they import, except NEVER). */
const BUNDLED = new Set(["zod", "smol-toml", "@decimalturn/toml-patch", "dockerode"]);
/** Never bundled, wherever imported from. */
const NEVER = new Set(["better-sqlite3", "ssh2", "cpu-features", "@grpc/grpc-js", "@grpc/proto-loader"]);

/**
 * Modules whose loading waits until something is called on them: esbuild keeps
 * a bundled module that is require()d in a wrapper evaluated at the first
 * require, so each stand-in requires the real module the first time it is used.
 *   - toml-patch (~180 KB): the compiler locates a diagnostic's key with it, and
 *     edits write with it; a tree that compiles clean and a plan never call it.
 *   - tar-fs, @balena/dockerignore (with tar-stream, bl, …): dockerode packs a
 *     build context with them; hal0 builds no images.
 *   - docker-modem's http_duplex (with readable-stream): the stream of a container
 *     attached with its stdin open; hal0 attaches to none.
 * Behaviour is the same: every call goes to the real function.
 */
const LAZY = {
  "@decimalturn/toml-patch": {
    stub: (name) => [
      "let real;",
      `const load = () => (real ??= require(${JSON.stringify(name)}));`,
      ...["parse", "parseDocument", "patch", "stringify"].map((f) => `export function ${f}(...args) { return load().${f}(...args); }`),
    ].join("\n"),
  },
  "tar-fs": { from: "/node_modules/dockerode/lib/util.js", stub: (name) => lazyCjs(name) },
  "@balena/dockerignore": { from: "/node_modules/dockerode/lib/util.js", stub: (name) => lazyCjs(name) },
  "./http_duplex": { from: "/node_modules/docker-modem/lib/modem.js", stub: (name) => lazyCjs(name) },
};

/**
 * What dockerode and docker-modem require as soon as they are imported and hal0 never uses
 * (DOCKER_DEFERRED of reconciler/drivers/stand-in.ts, read from tsc's output, which the build
 * writes first): where a bundled file of theirs requires one, the stand-in of stand-in.ts goes
 * in, which requires the real module the first time anything on it is used. (gRPC comes only
 * with dockerode's session module, itself deferred below.) docker-deps.ts, which does the
 * same through the require cache for tsc's output (looking each module up on the file system
 * at start), is left out of the bundle.
 */
const { DOCKER_DEFERRED } = await import(pathToFileURL(join(root, "dist/reconciler/drivers/stand-in.js")).href);
const escaped = (name) => name.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
const DOCKER_DEFERRED_NAMES = new RegExp(`^(${Object.keys(DOCKER_DEFERRED).map(escaped).join("|")})$`);
const DOCKER_PACKAGES = /\/node_modules\/(dockerode|docker-modem)\//;

/** A CommonJS stand-in: every property read, call and `new` goes to the real module, required the first time. */
function lazyCjs(name) {
  return [
    "let real;",
    `const load = () => (real ??= require(${JSON.stringify(name)}));`,
    "module.exports = new Proxy(function () {}, {",
    "  get: (_t, key) => load()[key],",
    "  has: (_t, key) => key in load(),",
    "  apply: (_t, self, args) => Reflect.apply(load(), self, args),",
    "  construct: (_t, args) => Reflect.construct(load(), args),",
    "});",
  ].join("\n");
}

const packageOf = (spec) => (spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]);

/** @type {import("esbuild").Plugin} */
const externals = {
  name: "hal0-externals",
  setup(b) {
    // dockerode's session module, as its stand-in below requires it: from node_modules, never bundled (it reads .proto files beside itself).
    b.onResolve({ filter: /^dockerode\/lib\/session\.js$/ }, (args) => (args.namespace === "hal0-stub" ? { path: args.path, external: true } : undefined));
    // Loaded when first used, not at start (see LAZY): the stand-in, then the real module inside it.
    b.onResolve({ filter: /^(@decimalturn\/toml-patch|tar-fs|@balena\/dockerignore|\.\/http_duplex)$/ }, (args) => {
      if (args.namespace === "hal0-stub") return undefined;
      const lazy = LAZY[args.path];
      if (lazy.from !== undefined && !args.importer.endsWith(lazy.from)) return undefined;
      return { path: `${args.resolveDir}/lazy:${args.path}`, namespace: "hal0-stub", pluginData: { name: args.path, resolveDir: args.resolveDir } };
    });
    b.onLoad({ filter: /\/lazy:/, namespace: "hal0-stub" }, (args) => ({
      contents: LAZY[args.pluginData.name].stub(args.pluginData.name),
      resolveDir: args.pluginData.resolveDir,
    }));
    // dockerode's and docker-modem's eager requires of what hal0 never uses: stand-ins (DOCKER_DEFERRED).
    b.onResolve({ filter: DOCKER_DEFERRED_NAMES }, (args) => {
      if (args.namespace !== "file" || !DOCKER_PACKAGES.test(args.importer)) return undefined;
      return { path: `docker-deferred:${args.path}`, namespace: "hal0-stub", pluginData: { name: args.path } };
    });
    b.onLoad({ filter: /^docker-deferred:/, namespace: "hal0-stub" }, (args) => ({
      contents: [
        `const { standIn } = require(${JSON.stringify(join(root, "reconciler/drivers/stand-in.ts"))});`,
        `module.exports = standIn(() => require(${JSON.stringify(args.pluginData.name)}), ${JSON.stringify(DOCKER_DEFERRED[args.pluginData.name].classes)});`,
      ].join("\n"),
      resolveDir: root,
    }));
    b.onResolve({ filter: /\/docker-deps\.js$/ }, (args) => {
      if (!args.importer.endsWith("/reconciler/drivers/docker.ts") && !args.importer.endsWith("/reconciler/drivers/swarm.ts")) return undefined;
      return { path: "docker-deps-bundled", namespace: "hal0-stub" };
    });
    b.onLoad({ filter: /^docker-deps-bundled$/, namespace: "hal0-stub" }, () => ({ contents: "// the bundle's stand-ins are in place (DOCKER_DEFERRED)", loader: "js" }));
    // docker-modem writes every request's options with util.inspect (showHidden, any depth) for its
    // debug log before it asks whether that log is on: ~2 ms of a docker command's start, and ~0.1 ms
    // of each create after. In the bundle the inspect runs only when the log is on (DEBUG=modem);
    // the build fails if the line is not there as written.
    b.onLoad({ filter: /\/node_modules\/docker-modem\/lib\/modem\.js$/ }, (args) => {
      const text = readFileSync(args.path, "utf8");
      const eager = "debug('Sending: %s', util.inspect(options, {";
      if (text.split(eager).length !== 2) throw new Error(`${args.path}: its request log line is not \`${eager}…\` once; look at it again`);
      return { contents: text.replace(eager, `debug.enabled && ${eager}`), loader: "js" };
    });
    // import() of a package left outside: required instead (from a one-line module of the bundle),
    // since V8 drops a script's dynamic-import callback when the script comes from a code cache.
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.kind !== "dynamic-import" || args.path.startsWith("node:") || args.importer.includes("/node_modules/")) return undefined;
      if (BUNDLED.has(packageOf(args.path))) return undefined;
      return { path: `${args.resolveDir}/required:${args.path}`, namespace: "hal0-stub", pluginData: { name: args.path, resolveDir: args.resolveDir } };
    });
    b.onLoad({ filter: /\/required:/, namespace: "hal0-stub" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.pluginData.name)});`,
      resolveDir: args.pluginData.resolveDir,
    }));
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith("node:")) return { external: true };
      const pkg = packageOf(args.path);
      if (NEVER.has(pkg)) return { external: true };
      const fromPackage = args.importer.includes("/node_modules/");
      if (fromPackage || BUNDLED.has(pkg)) return undefined;
      return { external: true };
    });
    // zod's `locales` namespace (z.locales, z.core.locales): every language's error messages,
    // ~360 KB of the ~800 KB zod brings, which hal0 never selects: its messages are zod's
    // English default, which zod sets itself from locales/en.js (still bundled).
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) => {
      if (!/node_modules\/zod\/v4\/(classic|core)$/.test(args.resolveDir)) return undefined;
      return { path: "zod-locales", namespace: "hal0-stub" };
    });
    b.onLoad({ filter: /^zod-locales$/, namespace: "hal0-stub" }, () => ({
      contents: 'export { default as en } from "zod/v4/locales/en.js";',
      resolveDir: root,
    }));
    // dockerode's BuildKit session and status decoder read .proto files beside themselves: required from their own folder,
    // the session (which requires gRPC) only when a build calls it.
    b.onResolve({ filter: /^\.\/(session|buildkit)$/ }, (args) => {
      if (!/node_modules\/dockerode\/lib$/.test(args.resolveDir)) return undefined;
      const path = `dockerode/lib/${args.path.slice(2)}.js`;
      if (args.path === "./buildkit") return { path, external: true };
      return { path: `docker-deferred-session:${path}`, namespace: "hal0-stub", pluginData: { name: path } };
    });
    b.onLoad({ filter: /^docker-deferred-session:/, namespace: "hal0-stub" }, (args) => ({ contents: lazyCjs(args.pluginData.name), resolveDir: root }));
  },
};

rmSync(out, { recursive: true, force: true });
await build({
  entryPoints: { hal0: join(root, "cli/main.ts") },
  outdir: out,
  outExtension: { ".js": ".cjs" },
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20.19",
  // The modules that find files beside themselves (package-root.ts, …) ask import.meta.url: the bundle's own.
  define: { "import.meta.url": "__hal0_bundle_url" },
  banner: { js: 'var __hal0_bundle_url = require("node:url").pathToFileURL(__filename).href;' },
  plugins: [externals],
  logLevel: "warning",
  legalComments: "none",
  // Less text to parse when no code cache applies; names are kept, so a stack still names its functions.
  minifyWhitespace: true,
  minifySyntax: true,
});

// ASCII only (esbuild escapes strings, not regular expression literals such as /§/): node
// decodes an ASCII file into a one-byte string with no UTF-8 work, and bin/load-bundle.cjs
// reads it as latin1, the same string. A \uXXXX escape means the same code unit in a string,
// a template and a regular expression literal, with or without the u flag.
const file = join(out, "hal0.cjs");
const text = readFileSync(file, "utf8");
const ascii = /[^\x00-\x7f]/.test(text) ? text.replace(/[^\x00-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`) : text;
// Its last line: the sha256 of everything before it, the bundle's id. bin/load-bundle.cjs reads
// a code cache only under a name made with it, so a cache of another build is never taken.
writeFileSync(file, withBundleId(ascii), "latin1");

// The code caches: for `node bin/hal0.cjs` (no flags) and for the bin's own shebang line.
for (const flags of [[], ["--max-semi-space-size=2"]]) {
  execFileSync(process.execPath, [...flags, join(root, "scripts/code-cache.mjs")], { stdio: "inherit" });
}
