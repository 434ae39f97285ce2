import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { PROJECT, RUNNER, freePort } from "./process-helpers.js";

/**
 * The generic stand-in (fixtures/runner/fake-runner.mjs) as a real process:
 * GET /v1/models in FastFlowLM's OpenAI shape and GET /v1/audio/voices in
 * kokoro-fastapi's, where llama-server's mode keeps its own /v1/models and
 * has no voices.
 */
const GENERIC = join(PROJECT, "fixtures/runner/fake-runner.mjs");
const MODEL = join(PROJECT, "fixtures/box/models/flm/qwen3-1.7b-npu2.q4nx");

const children = new Set<ChildProcess>();
afterEach(() => {
  for (const c of children) c.kill("SIGKILL");
  children.clear();
});

async function serve(script: string, args: readonly string[]): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [script, "--port", String(port), ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, HAL0_FAKE_LOAD_MS: "0" } });
  children.add(child);
  let out = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (out += s));
  const deadline = Date.now() + 5000;
  while (!out.includes("listening on")) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the stand-in did not listen: ${out}`);
    await sleep(10);
  }
  return `http://127.0.0.1:${port}`;
}

const json = async (url: string): Promise<{ status: number; body: any }> => {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
};

describe("the generic stand-in's runner endpoints", () => {
  it("GET /v1/models: FLM's list, one entry per alias, each {id, object, created, owned_by} and nothing else", async () => {
    const base = await serve(GENERIC, ["--model", MODEL, "--alias", "qwen3-1.7b-npu,qwen3:1.7b", "--ctx-size", "4096"]);
    const { status, body } = await json(`${base}/v1/models`);
    expect(status).toBe(200);
    expect(Object.keys(body).sort()).toEqual(["data", "object"]);
    expect(body.object).toBe("list");
    expect(body.data.map((m: any) => m.id)).toEqual(["qwen3-1.7b-npu", "qwen3:1.7b"]);
    for (const m of body.data) {
      expect(Object.keys(m).sort()).toEqual(["created", "id", "object", "owned_by"]);
      expect(m).toMatchObject({ object: "model", owned_by: "FastFlowLM" });
      expect(Math.abs(m.created - Date.now() / 1000)).toBeLessThan(60);
    }
    // Without an alias, the model's own id.
    const bare = await serve(GENERIC, []);
    expect((await json(`${bare}/v1/models`)).body.data.map((m: any) => m.id)).toEqual(["fake-model"]);
  });

  it("GET /v1/audio/voices: kokoro-fastapi's {voices: [...]}, Kokoro-82M's voice names, sorted", async () => {
    const base = await serve(GENERIC, ["--voice", "af_heart"]);
    const { status, body } = await json(`${base}/v1/audio/voices`);
    expect(status).toBe(200);
    expect(Object.keys(body)).toEqual(["voices"]);
    expect(body.voices).toEqual([...body.voices].sort());
    expect(body.voices).toEqual(expect.arrayContaining(["af_heart", "af_bella", "am_adam", "bf_emma", "bm_george", "jf_alpha", "zm_yunyang"]));
    expect(body.voices.every((v: string) => /^[abefhijpz][fm]_[a-z]+$/.test(v))).toBe(true);
    expect(new Set(body.voices).size).toBe(body.voices.length);
  });

  it("llama-server's mode keeps its own /v1/models and has no voices (404, as the real one)", async () => {
    const base = await serve(RUNNER, ["-m", join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf")]);
    expect((await json(`${base}/v1/models`)).body.data[0].owned_by).toBe("llamacpp");
    expect((await fetch(`${base}/v1/audio/voices`)).status).toBe(404);
  });
});
