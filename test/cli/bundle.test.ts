import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { DOCKER_HOST, dockerEngine, ensureRunnerImage, RUNNER_IMAGE } from "../reconciler/docker-helpers.js";
import { freePort, PROJECT } from "../reconciler/process-helpers.js";

/**
 * The CLI as `hal0` runs it: bin/hal0.js loads the esbuild bundle that `npm
 * run build` writes (dist/cli-bundle/hal0.cjs, with the V8 code cache written
 * beside it), and each command says and does there
 * what tsc's modules (dist/cli, what the other suites run) say and do: the
 * same stdout, stderr and exit status, on the process runtime and on a real
 * Docker engine (dockerode is bundled; its deferred parts load from
 * node_modules). Behaviour only; speed is the bench's.
 */
const BUNDLE = join(PROJECT, "dist/cli-bundle/hal0.cjs");
const LOADER = join(PROJECT, "bin/load-bundle.cjs");
const MODULES = join(PROJECT, "dist/cli/main.js");
const BIN = join(PROJECT, "bin/hal0.js");
const BOX = join(PROJECT, "fixtures/box");

interface Ran {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function node(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: PROJECT, env, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** `main(args)` of one build of the CLI, in a process of its own. */
function runWith(entry: string, args: string[], env?: NodeJS.ProcessEnv): Promise<Ran> {
  const load = entry === BUNDLE
    ? `import { loadBundle } from ${JSON.stringify(pathToFileURL(LOADER).href)}; const { main } = loadBundle(${JSON.stringify(BUNDLE)}).exports;`
    : `import { main } from ${JSON.stringify(pathToFileURL(entry).href)};`;
  const code = `${load} process.exitCode = await main(${JSON.stringify(args)});`;
  return node(["--input-type=module", "-e", code], env);
}

/** The bundle and the modules, each run with `args`: what each said and how it exited. */
async function both(args: string[], env?: NodeJS.ProcessEnv): Promise<{ bundle: Ran; modules: Ran }> {
  const [bundle, modules] = await Promise.all([runWith(BUNDLE, args, env), runWith(MODULES, args, env)]);
  return { bundle, modules };
}

describe("the bundled CLI (dist/cli-bundle, what bin/hal0.js runs)", () => {
  it("is built with its code cache, and bin/hal0.js loads it rather than the modules", async () => {
    expect(existsSync(BUNDLE), "npm run build writes dist/cli-bundle/hal0.cjs").toBe(true);
    // ASCII only: the loader reads it as latin1. The build escapes what esbuild leaves, such as a regular expression's `§`.
    const text = readFileSync(BUNDLE, "latin1");
    expect(text.match(/[^\x00-\x7f]/)?.index, "a non-ASCII byte in the bundle").toBeUndefined();
    // dockerode's BuildKit session reads .proto files beside itself: required from node_modules, when first used, never bundled.
    expect(text).not.toContain("auth.proto");
    expect(text).toContain('require("dockerode/lib/session.js")');
    // The cache the build wrote for this node (no flags, and the bin's shebang flag) is the one V8 takes.
    for (const flags of [[], ["--max-semi-space-size=2"]]) {
      const taken = await node([...flags, "--input-type=module", "-e", `import { loadBundle } from ${JSON.stringify(pathToFileURL(LOADER).href)}; process.stdout.write(loadBundle(${JSON.stringify(BUNDLE)}).cache);`]);
      expect(taken.stdout, flags.join(" ")).toBe("taken");
    }
    const dir = mkdtempSync(join(tmpdir(), "hal0-bundle-"));
    // A loader hook that names every module loaded: the bundle's entry, never tsc's.
    writeFileSync(join(dir, "hooks.mjs"), 'export async function load(url, context, next) { process.stderr.write(`loaded ${url}\\n`); return next(url, context); }\n');
    writeFileSync(join(dir, "register.mjs"), `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(join(dir, "hooks.mjs")).href)});\n`);
    const ran = await node(["--import", pathToFileURL(join(dir, "register.mjs")).href, BIN, "validate", "--config", BOX]);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toContain("valid");
    // bin/hal0.js (an ES module) hands over to bin/hal0.cjs, which requires the loader (CommonJS, not seen by the hook) and runs the bundle.
    expect(ran.stderr).toContain(pathToFileURL(join(PROJECT, "bin/hal0.cjs")).href);
    expect(ran.stderr).not.toContain(pathToFileURL(MODULES).href);
    expect(ran.stderr).not.toContain(pathToFileURL(join(PROJECT, "dist/cli/")).href);
  });

  it("takes a code cache only when it is this build's and its bytes are the ones written: a damaged one is set aside with a note, another build's is never found", async () => {
    // A copy of the built CLI (the bin, the loader, the bundle and its caches), so its files can be spoiled.
    const dir = mkdtempSync(join(tmpdir(), "hal0-bundle-cache-"));
    mkdirSync(join(dir, "bin"));
    mkdirSync(join(dir, "dist/cli-bundle"), { recursive: true });
    for (const f of ["hal0.cjs", "load-bundle.cjs"]) copyFileSync(join(PROJECT, "bin", f), join(dir, "bin", f));
    for (const f of readdirSync(join(PROJECT, "dist/cli-bundle"))) copyFileSync(join(PROJECT, "dist/cli-bundle", f), join(dir, "dist/cli-bundle", f));
    symlinkSync(join(PROJECT, "node_modules"), join(dir, "node_modules"));
    copyFileSync(join(PROJECT, "package.json"), join(dir, "package.json"));
    const bundle = join(dir, "dist/cli-bundle/hal0.cjs");
    const caches = readdirSync(join(dir, "dist/cli-bundle")).filter((f) => f.endsWith(".cache")).map((f) => join(dir, "dist/cli-bundle", f));
    expect(caches).toHaveLength(2);
    const intact = new Map(caches.map((f) => [f, readFileSync(f)]));
    const hal0 = (args: string[]) => node([join(dir, "bin/hal0.cjs"), ...args]);
    const cacheOf = async () => (await node(["-e", `process.stdout.write(require(${JSON.stringify(join(dir, "bin/load-bundle.cjs"))}).loadBundle(${JSON.stringify(bundle)}).cache)`])).stdout;
    const validate = ["validate", "--config", BOX];

    const clean = await hal0(validate);
    expect(clean.code, clean.stderr).toBe(0);
    expect(clean.stderr).not.toContain("code cache");
    expect(await cacheOf()).toBe("taken");

    // Bytes flipped inside V8's part (V8 itself would end the process in a fatal error), then a file cut short.
    for (const spoil of [(b: Buffer) => { for (let i = 4096; i < b.length; i += 65536) b[i]! ^= 0xff; return b; }, (b: Buffer) => b.subarray(0, 20)]) {
      for (const [f, bytes] of intact) writeFileSync(f, spoil(Buffer.from(bytes)));
      const ran = await hal0(validate);
      expect(ran.code, ran.stderr).toBe(0);
      expect(ran.stdout).toBe(clean.stdout);
      expect(ran.stderr).toContain("hal0: note: the CLI's code cache");
      expect(ran.stderr).toContain("is damaged");
      expect(ran.stderr.replace(/^hal0: note: .*\n/m, "")).toBe(clean.stderr);
      expect(await cacheOf()).toBe("damaged");
    }

    // Another build of the same length beside this build's caches (V8 checks a cache against a script by its length
    // only, and would run the cached code): the build's id line names other caches, so none is found and the new text runs.
    for (const [f, bytes] of intact) writeFileSync(f, bytes);
    const text = readFileSync(bundle, "latin1");
    const body = text.slice(0, text.lastIndexOf("//# hal0-bundle-sha256=")).replace("usage: hal0 <command>", "usage: HAL9 <command>");
    expect(body).toContain("usage: HAL9 <command>");
    writeFileSync(bundle, (createRequire(import.meta.url)(LOADER) as { withBundleId: (text: string) => string }).withBundleId(body), "latin1");
    expect(readFileSync(bundle).length).toBe(Buffer.byteLength(text, "latin1"));
    const help = await hal0(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("usage: HAL9 <command>");
    expect(help.stderr).toBe("");
    expect(await cacheOf()).toBe("none");
  });

  it("says what the modules say: help, validate (a clean tree, a tree with errors located at their keys), a usage error, an unknown command, a missing config folder", async () => {
    const broken = join(PROJECT, "fixtures/invalid/agent-auth-env-required");
    for (const args of [["--help"], ["--version"], ["plan", "--help"], ["validate", "--config", BOX], ["validate", "--config", BOX, "--json"], ["validate", "--config", broken], ["plan", "--nope"], ["aply"], ["plan", "--config", "/nonexistent-hal0-config"]]) {
      const { bundle, modules } = await both(args);
      expect(bundle, args.join(" ")).toEqual(modules);
    }
  });

  it("plans the example box on the process runtime as the modules do (text and JSON), and writes the same JSON Schemas", async () => {
    const state = mkdtempSync(join(tmpdir(), "hal0-bundle-state-"));
    const text = await both(["plan", "--config", BOX, "--state", state, "--detailed-exitcode"]);
    expect(text.bundle.code).toBe(2);
    expect(text.bundle.stdout).toContain("slot.");
    expect(text.bundle).toEqual(text.modules);
    const json = await both(["plan", "--config", BOX, "--state", state, "--json"]);
    expect(JSON.parse(json.bundle.stdout).format_version).toBe(1);
    expect(json.bundle).toEqual(json.modules);

    const out = mkdtempSync(join(tmpdir(), "hal0-bundle-schema-"));
    const [a, b] = [join(out, "bundle"), join(out, "modules")];
    expect((await runWith(BUNDLE, ["schema", "--out", a])).code).toBe(0);
    expect((await runWith(MODULES, ["schema", "--out", b])).code).toBe(0);
    const files = readdirSync(a).sort();
    expect(files.length).toBeGreaterThan(5);
    expect(readdirSync(b).sort()).toEqual(files);
    for (const f of files) expect(readFileSync(join(a, f), "utf8"), f).toBe(readFileSync(join(b, f), "utf8"));
  });

  it("has written a command's whole output when it exits (which it does as soon as the command is done), even to a reader that waits before it reads", async () => {
    const state = mkdtempSync(join(tmpdir(), "hal0-bundle-exit-"));
    const hal0 = [process.execPath, join(PROJECT, "bin/hal0.cjs"), "plan", "--config", BOX, "--state", state, "--json"].map((w) => `'${w}'`).join(" ");
    // The reader sleeps first: the plan is gone by then, and what it wrote must all be in the pipe.
    const ran = await new Promise<Ran>((resolve) => {
      execFile("sh", ["-c", `(${hal0}; echo "exit $?" >&2) | (sleep 0.5; cat)`], { cwd: PROJECT, maxBuffer: 16 << 20 }, (err, stdout, stderr) => resolve({ code: err ? 1 : 0, stdout, stderr }));
    });
    expect(ran.stderr).toContain("exit 0");
    const plan = JSON.parse(ran.stdout) as { format_version: number; changes: unknown[] };
    expect(plan.format_version).toBe(1);
    expect(plan.changes.length).toBeGreaterThan(5);
  });
});

const DOCKER_SUITE = "the bundled CLI on the docker runtime (real Docker engine)";
const docker = await dockerEngine(DOCKER_SUITE);

describe.skipIf(docker === undefined)(DOCKER_SUITE, () => {
  it("plans a docker box as the modules do, asking the engine (its runner probed in the image)", async () => {
    await ensureRunnerImage(docker!);
    const dir = mkdtempSync(join(tmpdir(), "hal0-bundle-docker-"));
    const config = join(dir, "box");
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(BOX, "models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    const port = await freePort();
    writeFileSync(join(config, "hal0.toml"), `[slots]\nruntime = "docker"\nport_range_start = ${port}\nport_range_end = ${port}\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nimage = "${RUNNER_IMAGE}"\nrunner = ["node", ${JSON.stringify(join(PROJECT, "fixtures/runner/fake-llama-server.mjs"))}]\nflags = "-fa on"\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), '[model.tiny]\npath = "tiny.gguf"\n');
    writeFileSync(join(config, "slots/one.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n`);
    const env = { ...process.env, DOCKER_HOST };
    const args = ["plan", "--config", config, "--state", join(dir, "state"), "--json"];
    // The first plan probes the image and fills the runner cache; the second reads it (compiled once): both as the modules say.
    for (let i = 0; i < 2; i++) {
      const bundle = await runWith(BUNDLE, args, env);
      const modules = await runWith(MODULES, args, env);
      expect(bundle.code, `${bundle.stdout}${bundle.stderr}`).toBe(0);
      expect(JSON.parse(bundle.stdout).changes.map((c: { address: string; action: string }) => `${c.address} ${c.action}`)).toContain("slot.one create");
      expect(bundle).toEqual(modules);
    }
    // What dockerode and docker-modem require at import and a plan never uses stays unloaded: no module looked up
    // in node_modules at all (gRPC, ssh2, dockerode's session), nor node's https, tls and zlib.
    const probe = `import { loadBundle } from ${JSON.stringify(pathToFileURL(LOADER).href)};
      const { main } = loadBundle(${JSON.stringify(BUNDLE)}).exports;
      const quiet = { write: () => true };
      const code = await main(${JSON.stringify(args)}, { stdout: quiet, stderr: quiet, env: process.env, cwd: process.cwd() });
      const { createRequire } = await import("node:module");
      const cache = createRequire(${JSON.stringify(BUNDLE)}).cache;
      const builtins = ["https", "tls", "zlib"].filter((m) => process.moduleLoadList.includes("NativeModule " + m));
      console.log(JSON.stringify({ code, builtins, packages: Object.keys(cache).filter((k) => k.includes("/node_modules/")) }));`;
    const loaded = await node(["--input-type=module", "-e", probe], env);
    expect(JSON.parse(loaded.stdout), loaded.stderr).toEqual({ code: 0, builtins: [], packages: [] });
    // docker-modem's request log, which the bundle writes only when it is on, is still written when it is.
    expect(loaded.stderr).not.toContain("Sending:");
    const logged = await node(["--input-type=module", "-e", probe], { ...env, DEBUG: "modem" });
    expect(logged.stderr).toMatch(/modem Sending: \{[\s\S]*path: '\/_ping'/);
  }, 120_000);
});
