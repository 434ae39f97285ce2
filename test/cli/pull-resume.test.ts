import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { startFakeHub, type FakeHub } from "../helpers/fake-hub.js";
import { ggufBytes, modelKvs } from "../server/gguf-writer.js";
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
    const dir = mkdtempSync(join(tmpdir(), "hal0-pull-resume-"));
    dirs.push(dir);
    const config = join(dir, "etc");
    const state = join(dir, "state");
    mkdirSync(config, { recursive: true });
    writeFileSync(join(config, "hal0.toml"), `[models]\nstore = "store"\n`);
    const env = { ...process.env, HF_ENDPOINT: hub.endpoint, HF_TOKEN: "hf_resume_test_token" };
    const first = await startServe(config, state, ["--no-reconcile"], (c) => children.push(c), env);
    const token = readFileSync(join(state, "operator.token"), "utf8").trim();
    const call = (url: string, method: string, path: string, body?: unknown) =>
      fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

    const started = await call(first.url, "POST", "/api/models/big/pull", { hf_repo: "acme/big-GGUF", hf_filename: "big.gguf" });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const partial = join(config, "store/big.gguf.partial");
    for (let i = 0; ; i++) {
      if (existsSync(partial) && statSync(partial).size > 512 * 1024) break;
      if (i > 400) throw new Error("the download never got going");
      await sleep(10);
    }
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
