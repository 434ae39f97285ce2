import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { splitSet, startFakeHub, type FakeHub } from "../helpers/fake-hub.js";
import { ggufBytes, modelKvs } from "../server/gguf-writer.js";
import { PROJECT } from "../reconciler/process-helpers.js";
import { startServe } from "./helpers.js";

/**
 * `kill -9` of a real `hal0 serve` in the middle of a pull, then a restart:
 * the job resumes with a Range request from where the bytes on disk end and
 * finishes with the Hub's sha256 (the bytes from before the kill are hashed
 * from disk, the rest as they arrive).
 */
const SIZE = 3 * 1024 * 1024;
const data = ggufBytes({ kvs: modelKvs({ arch: "llama", ctx: 4096 }), tensors: [{ name: "w", dims: [SIZE / 4] }] });
const sha = createHash("sha256").update(data).digest("hex");

/** A config folder whose models go to `store/`, and a state folder beside it (removed after the file's tests). */
function storeBox(prefix: string): { config: string; state: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  const config = join(dir, "etc");
  mkdirSync(config, { recursive: true });
  writeFileSync(join(config, "hal0.toml"), `[models]\nstore = "store"\n`);
  return { config, state: join(dir, "state") };
}

/** Resolves once a download has put more than 512 KiB into `partial`. */
async function downloadUnderWay(partial: string): Promise<void> {
  for (let i = 0; ; i++) {
    if (existsSync(partial) && statSync(partial).size > 512 * 1024) return;
    if (i > 400) throw new Error("the download never got going");
    await sleep(10);
  }
}

const children: ChildProcess[] = [];
const dirs: string[] = [];
let hub: FakeHub | undefined;
afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  await hub?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe("a pull survives kill -9 of hal0 serve (real processes)", () => {
  it("resumes with Range from the partial file's end and registers the verified file", async () => {
    hub = await startFakeHub({ repos: { "acme/big-GGUF": { files: { "big.gguf": data } } }, bytesPerSecond: 1024 * 1024 });
    const { config, state } = storeBox("hal0-pull-resume-");
    const env = { ...process.env, HF_ENDPOINT: hub.endpoint, HF_TOKEN: "hf_resume_test_token" };
    const first = await startServe(config, state, ["--no-reconcile"], (c) => children.push(c), env);
    const token = readFileSync(join(state, "operator.token"), "utf8").trim();
    const call = (url: string, method: string, path: string, body?: unknown) =>
      fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

    const started = await call(first.url, "POST", "/api/models/big/pull", { hf_repo: "acme/big-GGUF", hf_filename: "big.gguf" });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const partial = join(config, "store/big.gguf.partial");
    await downloadUnderWay(partial);
    first.child.kill("SIGKILL");
    await new Promise((r) => first.child.once("exit", r));
    const kept = statSync(partial).size;
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(data.length);

    hub.setRate(null);
    const second = await startServe(config, state, ["--no-reconcile"], (c) => children.push(c), env);
    let pull: any;
    for (let i = 0; ; i++) {
      pull = (await call(second.url, "GET", "/api/models/big/pull/status")).body.pull;
      if (pull?.state === "done" || pull?.state === "failed") break;
      if (i > 500) throw new Error(`not done: ${JSON.stringify(pull)}`);
      await sleep(20);
    }
    expect(pull).toMatchObject({ state: "done", sha256: sha, bytes: data.length });
    // The second serve asked only for the rest: a Range from at least what was on disk at the kill.
    const ranges = hub.requests.filter((r) => r.server === "cdn" && r.range !== undefined).map((r) => Number(/^bytes=(\d+)-$/.exec(r.range!)?.[1]));
    expect(ranges.length).toBeGreaterThan(0);
    expect(Math.min(...ranges)).toBeGreaterThanOrEqual(kept);
    expect(createHash("sha256").update(readFileSync(join(config, "store/big.gguf"))).digest("hex")).toBe(sha);
    expect(existsSync(partial)).toBe(false);
    expect(readFileSync(join(config, "models.toml"), "utf8")).toContain(`sha256 = "${sha}"`);
    second.child.kill("SIGTERM");
  }, 60_000);
});

/** `hal0 model pull` as a process of its own; resolves with its exit code and output. */
function pullCommand(args: string[], env: NodeJS.ProcessEnv, onSpawn?: (c: ChildProcess) => void): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string; err: string }> {
  const child = spawn(process.execPath, [join(PROJECT, "bin/hal0.cjs"), "model", "pull", ...args, "--json"], { env, stdio: ["ignore", "pipe", "pipe"] });
  children.push(child);
  onSpawn?.(child);
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  return new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal, out, err })));
}

describe("a hal0 model pull that was interrupted (real processes)", () => {
  it("the next pull of the same file resumes it with Range; another file under that id is refused; a second pull at once is model.pull_busy", async () => {
    const slowHub = await startFakeHub({ repos: { "acme/big-GGUF": { files: { "big.gguf": data, "other.gguf": data } } }, bytesPerSecond: 1024 * 1024 });
    try {
      const { config, state } = storeBox("hal0-cli-pull-resume-");
      const env = { ...process.env, HF_ENDPOINT: slowHub.endpoint };
      const flags = ["--id", "big", "--config", config, "--state", state];
      const partial = join(config, "store/big.gguf.partial");
      let first: ChildProcess | undefined;
      const interrupted = pullCommand(["acme/big-GGUF", "big.gguf", ...flags], env, (c) => (first = c));
      await downloadUnderWay(partial);
      // While it runs, a second pull command on the same state folder is refused.
      const busy = await pullCommand(["acme/big-GGUF", "other.gguf", "--id", "other", "--config", config, "--state", state], env);
      expect(busy.code, busy.err).toBe(1);
      expect(busy.out + busy.err).toContain("model.pull_busy");
      first!.kill("SIGINT");
      await interrupted;
      const kept = statSync(partial).size;
      expect(kept).toBeLessThan(data.length);
      // Another file under the same id: refused, naming the pull left under way.
      const other = await pullCommand(["acme/big-GGUF", "other.gguf", ...flags], env);
      expect(other.code).toBe(1);
      expect(other.out + other.err).toMatch(/model\.already_exists.*acme\/big-GGUF big\.gguf.*left under way/s);
      // The same file under another id: refused, the file being another pull's.
      const twice = await pullCommand(["acme/big-GGUF", "big.gguf", "--id", "big2", "--config", config, "--state", state], env);
      expect(twice.code).toBe(1);
      expect(twice.out + twice.err).toMatch(/model\.file_exists.*big\.gguf is being pulled as model big/s);
      expect(statSync(partial).size).toBe(kept);
      // The same file: resumed from the bytes on disk, verified, registered.
      slowHub.setRate(null);
      const resumed = await pullCommand(["acme/big-GGUF", "big.gguf", ...flags], env);
      expect(resumed.code, resumed.out + resumed.err).toBe(0);
      expect(resumed.err).toContain("note: resuming the pull of big");
      const ranges = slowHub.requests.filter((r) => r.server === "cdn" && r.range !== undefined).map((r) => Number(/^bytes=(\d+)-$/.exec(r.range!)?.[1]));
      expect(Math.min(...ranges)).toBeGreaterThanOrEqual(kept);
      expect(createHash("sha256").update(readFileSync(join(config, "store/big.gguf"))).digest("hex")).toBe(sha);
      expect(existsSync(partial)).toBe(false);
      expect(readFileSync(join(config, "models.toml"), "utf8")).toContain(`sha256 = "${sha}"`);
      expect(existsSync(join(state, "pull.lock"))).toBe(false);
      // A pull that fails (the bytes do not hash to the Hub's sha256) says model.pull_failed under --json too.
      slowHub.corrupt("acme/big-GGUF", "other.gguf", 1000);
      const corrupt = await pullCommand(["acme/big-GGUF", "other.gguf", "--id", "other", "--config", config, "--state", state], env);
      expect(corrupt.code).toBe(1);
      const last = JSON.parse(corrupt.out.slice(corrupt.out.lastIndexOf("\n{", corrupt.out.length - 3) + 1));
      expect(last).toMatchObject({ ok: false, exit_code: 1, diagnostics: [{ code: "model.pull_failed" }] });
      expect(last.diagnostics[0].summary).toMatch(/checksum/);
    } finally {
      await slowHub.close();
    }
  }, 60_000);
});

describe("a hal0 model pull of a split model's later part that was interrupted (real processes)", () => {
  it("the same command again resumes it (the pull is recorded by the set's first part)", async () => {
    const half = (n: number) => ggufBytes({ kvs: modelKvs({ arch: "llama", ctx: 4096 }), tensors: [{ name: "w", dims: [n / 4] }] });
    const parts = [half(SIZE), half(1024 * 1024)];
    const slowHub = await startFakeHub({ repos: { "acme/split-GGUF": { files: splitSet("Big-Q8_0", parts) } }, bytesPerSecond: 1024 * 1024 });
    try {
      const { config, state } = storeBox("hal0-cli-pull-split-resume-");
      const env = { ...process.env, HF_ENDPOINT: slowHub.endpoint };
      const args = ["acme/split-GGUF", "Big-Q8_0-00002-of-00002.gguf", "--config", config, "--state", state];
      const partial = join(config, "store/Big-Q8_0-00001-of-00002.gguf.partial");
      let first: ChildProcess | undefined;
      const interrupted = pullCommand(args, env, (c) => (first = c));
      await downloadUnderWay(partial);
      first!.kill("SIGINT");
      await interrupted;
      const kept = statSync(partial).size;
      slowHub.setRate(null);
      const resumed = await pullCommand(args, env);
      expect(resumed.code, resumed.out + resumed.err).toBe(0);
      expect(resumed.err).toContain("note: resuming the pull of big-q8_0");
      const ranges = slowHub.requests.filter((r) => r.server === "cdn" && r.range !== undefined).map((r) => Number(/^bytes=(\d+)-$/.exec(r.range!)?.[1]));
      expect(Math.min(...ranges)).toBeGreaterThanOrEqual(kept);
      expect(readFileSync(join(config, "models.toml"), "utf8")).toContain('hf_filename = "Big-Q8_0-00001-of-00002.gguf"');
    } finally {
      await slowHub.close();
    }
  }, 60_000);
});

describe("a hal0 model pull interrupted while hal0 serve runs (real processes)", () => {
  it("the serve goes on with it once no pull command holds the folder: resumed with Range, verified, registered", async () => {
    const slowHub = await startFakeHub({ repos: { "acme/big-GGUF": { files: { "big.gguf": data } } }, bytesPerSecond: 1024 * 1024 });
    try {
      const { config, state } = storeBox("hal0-cli-pull-adopt-");
      const env = { ...process.env, HF_ENDPOINT: slowHub.endpoint };
      const serve = await startServe(config, state, ["--no-reconcile"], (c) => children.push(c), env);
      const token = readFileSync(join(state, "operator.token"), "utf8").trim();
      const status = async () => (await (await fetch(`${serve.url}/api/models/big/pull/status`, { headers: { authorization: `Bearer ${token}` } })).json() as any).pull;
      const partial = join(config, "store/big.gguf.partial");
      let cli: ChildProcess | undefined;
      const interrupted = pullCommand(["acme/big-GGUF", "big.gguf", "--id", "big", "--config", config, "--state", state], env, (c) => (cli = c));
      await downloadUnderWay(partial);
      cli!.kill("SIGKILL");
      await interrupted;
      const kept = statSync(partial).size;
      expect(kept).toBeLessThan(data.length);
      slowHub.setRate(null);
      let pull: any;
      for (let i = 0; ; i++) {
        pull = await status();
        if (pull?.state === "done" || pull?.state === "failed") break;
        if (i > 600) throw new Error(`the serve never went on with it: ${JSON.stringify(pull)}`);
        await sleep(25);
      }
      expect(pull).toMatchObject({ state: "done", sha256: sha, bytes: data.length });
      const ranges = slowHub.requests.filter((r) => r.server === "cdn" && r.range !== undefined).map((r) => Number(/^bytes=(\d+)-$/.exec(r.range!)?.[1]));
      expect(Math.min(...ranges)).toBeGreaterThanOrEqual(kept);
      expect(readFileSync(join(config, "models.toml"), "utf8")).toContain(`sha256 = "${sha}"`);
      serve.child.kill("SIGTERM");
    } finally {
      await slowHub.close();
    }
  }, 60_000);
});

describe("a hal0 model pull that hal0 serve forgets while it downloads (real processes)", () => {
  it("model_pull_delete on the serve stops the command's download as a cancel: it says cancelled, exit 1, no file left, no crash", async () => {
    const slowHub = await startFakeHub({ repos: { "acme/big-GGUF": { files: { "big.gguf": data } } }, bytesPerSecond: 512 * 1024 });
    try {
      const { config, state } = storeBox("hal0-cli-pull-forgotten-");
      const env = { ...process.env, HF_ENDPOINT: slowHub.endpoint };
      const serve = await startServe(config, state, ["--no-reconcile"], (c) => children.push(c), env);
      const token = readFileSync(join(state, "operator.token"), "utf8").trim();
      const partial = join(config, "store/big.gguf.partial");
      const pulled = pullCommand(["acme/big-GGUF", "big.gguf", "--id", "big", "--config", config, "--state", state], env);
      await downloadUnderWay(partial);
      const res = await fetch(`${serve.url}/api/models/pulls/big`, { method: "DELETE", headers: { authorization: `Bearer ${token}` } });
      expect(await res.json()).toEqual({ deleted: "big", was: "downloading" });
      const done = await pulled;
      expect(done.err).not.toMatch(/TypeError|at PullWorker/);
      expect(done.code, done.out + done.err).toBe(1);
      expect(JSON.parse(done.out.trim().split("\n").at(-1)!)).toMatchObject({ ok: false, diagnostics: [{ code: "model.pull_failed", summary: expect.stringMatching(/^cancelled/) }] });
      expect(existsSync(partial)).toBe(false);
      expect(existsSync(join(config, "store/big.gguf"))).toBe(false);
      expect(existsSync(join(state, "pull.lock"))).toBe(false);
      serve.child.kill("SIGTERM");
    } finally {
      await slowHub.close();
    }
  }, 60_000);
});
