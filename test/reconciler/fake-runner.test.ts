import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PROJECT, RUNNER, freePort } from "./process-helpers.js";

/**
 * The stand-in runner (fixtures/runner/fake-llama-server.mjs) as real
 * processes, held to the recorded facts of the real llama-server build 9749
 * (fixtures/llama-server/): how it refuses a command line, what it prints for
 * --help and --version, and the shapes of its replies.
 */

const FACTS = join(PROJECT, "fixtures/llama-server");
const fact = (name: string): string => readFileSync(join(FACTS, name), "utf8");
const factJson = (name: string): any => JSON.parse(fact(name));

let tmp: string;
let model: string;
const children = new Set<ChildProcess>();

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "hal0-fake-runner-"));
  model = join(tmp, "tiny.gguf");
  writeFileSync(model, Buffer.alloc(4096));
});
afterEach(() => {
  for (const child of children) child.kill("SIGKILL");
  children.clear();
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

interface Exit {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the runner to its exit (a refusal, --help, --version). */
async function run(args: readonly string[], script = RUNNER): Promise<Exit> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  const [code] = (await once(child, "close")) as [number | null];
  return { code, stdout, stderr };
}

interface Served {
  readonly base: string;
  readonly stderr: () => string;
}

/** Starts the runner on a free port with the temp model, once it listens (still loading for loadMs). */
async function serve(args: readonly string[] = [], loadMs = 0): Promise<Served> {
  const port = await freePort();
  const child = spawn(process.execPath, [RUNNER, "-m", model, "--port", String(port), ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, HAL0_FAKE_LOAD_MS: String(loadMs) },
  });
  children.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  const deadline = Date.now() + 5000;
  while (!stdout.includes("listening on")) {
    if (child.exitCode !== null) throw new Error(`the runner exited ${child.exitCode}: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`the runner did not listen: ${stdout}${stderr}`);
    await sleep(10);
  }
  return { base: `http://127.0.0.1:${port}`, stderr: () => stderr };
}

async function get(base: string, path: string): Promise<{ status: number; text: string; json: () => any }> {
  const res = await fetch(`${base}${path}`);
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) };
}

async function untilHealthy(base: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while ((await get(base, "/health")).status !== 200) {
    if (Date.now() > deadline) throw new Error("not healthy in time");
    await sleep(20);
  }
}

const keys = (o: object): string[] => Object.keys(o).sort();

/** The usage block the real one prints after an error about `flag`: its help.txt entry, as printed. */
function usageOf(flag: string): string {
  const lines = fact("help.txt").split("\n");
  const start = lines.findIndex((l) => l.startsWith("-") && l.split(/,\s+|\s+/).includes(flag));
  let end = start + 1;
  while (lines[end]!.startsWith(" ".repeat(40))) end++;
  return `usage:\n${lines.slice(start, end).join("\n")}\n\n\nto show complete usage, run with -h\n`;
}

describe("the command line, refused as the real llama-server refuses it", () => {
  it("a removed flag: exit 1, stderr byte-for-byte removed-flag.txt", async () => {
    const r = await run(["-m", model, "--draft-max", "4"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(fact("removed-flag.txt"));
    expect(r.stdout).toBe("");
  });

  it("an unknown flag: exit 1, stderr byte-for-byte unknown-flag.txt", async () => {
    const r = await run(["-m", model, "--no-such-flag"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(fact("unknown-flag.txt"));
  });

  it("a stray word and the --flag=value form are unknown arguments too", async () => {
    expect(await run(["-m", model, "stray"])).toMatchObject({ code: 1, stderr: "error: invalid argument: stray\n" });
    expect(await run(["-m", model, "--port=8080"])).toMatchObject({ code: 1, stderr: "error: invalid argument: --port=8080\n" });
  });

  it("--spec-type mtp: exit 1, unknown speculative type, then --spec-type's usage block", async () => {
    const r = await run(["-m", model, "--spec-type", "mtp"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`error while handling argument "--spec-type": unknown speculative type: mtp\n\n${usageOf("--spec-type")}`);
    expect((await run(["-m", model, "--spec-type", "ngram-mod,mtp"])).stderr).toContain("unknown speculative type: mtp\n");
  });

  it("a value outside the listed set: exit 1 with the flag's error and usage block", async () => {
    const fa = await run(["-m", model, "-fa", "maybe"]);
    expect(fa.code).toBe(1);
    expect(fa.stderr).toBe(`error while handling argument "-fa": error: unknown value for --flash-attn: 'maybe'\n\n${usageOf("-fa")}`);
    const ctk = await run(["-m", model, "-ctk", "q9"]);
    expect(ctk.code).toBe(1);
    expect(ctk.stderr).toBe(`error while handling argument "-ctk": Unsupported cache type: q9\n\n${usageOf("-ctk")}`);
    for (const args of [["--rope-scaling", "cubic"], ["--cpu-strict", "2"], ["--reasoning", "maybe"], ["-sm", "column"]]) {
      const r = await run(["-m", model, ...args]);
      expect(r.code, args.join(" ")).toBe(1);
      expect(r.stderr, args.join(" ")).toMatch(new RegExp(`^error while handling argument "${args[0]}": .+\\n\\nusage:\\n`));
    }
  });

  it("a numeric flag's value its std::stoi / std::stof cannot read: exit 1 naming the reader, then the usage block", async () => {
    const parallel = await run(["-m", model, "--parallel", "abc"]);
    expect(parallel.code).toBe(1);
    expect(parallel.stderr).toBe(`error while handling argument "--parallel": stoi\n\n${usageOf("--parallel")}`);
    for (const [args, reader] of [[["--temp", "warm"], "stof"], [["-ngl", "most"], "stoi"], [["--cache-reuse", "99999999999"], "stoi"], [["--seed", "x"], "stoul"]] as const) {
      const r = await run(["-m", model, ...args]);
      expect([r.code, r.stderr.split("\n")[0]], args.join(" ")).toEqual([1, `error while handling argument "${args[0]}": ${reader}`]);
    }
    // What they read a number from runs: stoi keeps the whole part (`1.5` is 1), stof reads `.5`; `-ngl` takes its words.
    for (const args of [["--threads", "1.5"], ["--rope-scale", ".5"], ["-ngl", "auto"], ["--seed", "-1"]]) expect((await run(["-m", model, ...args, "--help"])).code, args.join(" ")).toBe(0);
  });

  it("a flag without its value: exit 1, expected value for argument", async () => {
    const r = await run(["-m", model, "-c"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`error while handling argument "-c": expected value for argument\n\n${usageOf("-c")}`);
  });

  it("a model file that does not exist: exit 1", async () => {
    const r = await run(["-m", join(tmp, "nope.gguf")]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("nope.gguf");
  });

  it("a projector, drafter or chat template file that does not exist: exit 1 naming it, as the real one fails to load it", async () => {
    for (const [flag, build] of [["--mmproj", ""], ["--spec-draft-model", ""], ["-md", ""], ["--chat-template-file", ""], ["--model-draft", "older"]] as const) {
      const missing = join(tmp, `missing${flag}.gguf`);
      const child = spawn(process.execPath, [RUNNER, "-m", model, "--port", "0", flag, missing], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, HAL0_FAKE_BUILD: build } });
      children.add(child);
      let stderr = "";
      child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
      // It exits, or it listens (which it must not): whichever comes first.
      const listening = new Promise<"listening">((resolve) => child.stdout.setEncoding("utf8").on("data", (s: string) => s.includes("listening on") && resolve("listening")));
      const outcome = await Promise.race([once(child, "close").then(([code]) => code as number | null), listening]);
      expect([outcome, stderr.includes(missing)], flag).toEqual([1, true]);
    }
    // Present, they are taken.
    const present = await serve(["--mmproj", model, "--spec-draft-model", model, "--chat-template-file", model]);
    await untilHealthy(present.base);
  });

  it("a port that is taken: exit 1", async () => {
    const taken = createServer().listen(0, "127.0.0.1");
    await once(taken, "listening");
    const { port } = taken.address() as { port: number };
    const r = await run(["-m", model, "--port", String(port)]);
    taken.close();
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("address already in use");
  });
});

describe("the command line, accepted", () => {
  it("runs with current flags: --spec-type draft-mtp, -fa on, --load-mode none, --reasoning on, a comma list, `_` spellings", async () => {
    const s = await serve(["--spec-type", "draft-mtp", "-fa", "on", "--load-mode", "none", "--reasoning", "on", "--ctx_size", "2048", "--seed", "-1"]);
    await untilHealthy(s.base);
    const props = (await get(s.base, "/props")).json();
    expect(props.flags).toMatchObject({ "--spec-type": "draft-mtp", "--flash-attn": "on", "--load-mode": "none", "--reasoning": "on", "--ctx-size": "2048", "--seed": "-1" });
    expect(s.stderr()).toBe("");
    const list = await serve(["--spec-type", "ngram-mod,draft-simple", "-ctk", "q8_0", "--cpu-strict", "1"]);
    await untilHealthy(list.base);
  });

  it("takes the keys of every --api-key-file given, as the real one does (each file adds its keys)", async () => {
    const [box, team] = [join(tmp, "box-key"), join(tmp, "team-keys")];
    writeFileSync(box, "box-secret\n");
    writeFileSync(team, "# the team's\nteam-secret\n");
    const s = await serve(["--metrics", "--api-key-file", box, "--api-key-file", team]);
    await untilHealthy(s.base);
    const metrics = (key?: string) => fetch(`${s.base}/metrics`, { headers: key ? { authorization: `Bearer ${key}` } : {} }).then((r) => r.status);
    expect([await metrics(), await metrics("box-secret"), await metrics("team-secret"), await metrics("# the team's")]).toEqual([401, 200, 200, 401]);
  });

  it("a deprecated flag prints a DEPRECATED line on stderr and runs", async () => {
    const s = await serve(["--no-mmap", "--mlock"]);
    await untilHealthy(s.base);
    expect(s.stderr()).toBe("DEPRECATED: --no-mmap is deprecated in favor of --load-mode\nDEPRECATED: --mlock is deprecated in favor of --load-mode\n");
    expect((await get(s.base, "/props")).json().flags).toMatchObject({ "--mmap": false, "--mlock": true });
  });

  it("--help, -h and --usage print help.txt on stdout, exit 0", async () => {
    for (const flag of ["--help", "-h", "--usage"]) {
      const r = await run([flag]);
      expect(r.code, flag).toBe(0);
      expect(r.stdout, flag).toBe(fact("help.txt"));
    }
  });

  it("--version prints version.txt on stderr, exit 0", async () => {
    const r = await run(["--version"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(fact("version.txt"));
    expect(r.stdout).toBe("");
  });

  it("finds its facts at ../llama-server/ from itself, as in the image (/runner/, /llama-server/), and exits 1 without them", async () => {
    const root = join(tmp, "image");
    mkdirSync(join(root, "runner"), { recursive: true });
    mkdirSync(join(root, "llama-server"), { recursive: true });
    copyFileSync(RUNNER, join(root, "runner/fake-llama-server.mjs"));
    const alone = await run(["--version"], join(root, "runner/fake-llama-server.mjs"));
    expect(alone.code).toBe(1);
    expect(alone.stderr).toContain("llama-server/help.txt");
    for (const name of ["help.txt", "version.txt"]) copyFileSync(join(FACTS, name), join(root, "llama-server", name));
    expect(await run(["--version"], join(root, "runner/fake-llama-server.mjs"))).toMatchObject({ code: 0, stderr: fact("version.txt") });
    const script = readFileSync(join(PROJECT, "scripts/runner-image.sh"), "utf8");
    expect(script).toContain("put fixtures/runner/fake-llama-server.mjs /runner/fake-llama-server.mjs");
    expect(script).toContain("put fixtures/llama-server/help.txt /llama-server/help.txt");
    expect(script).toContain("put fixtures/llama-server/version.txt /llama-server/version.txt");
  });
});

describe("the replies, shaped like the recorded ones", () => {
  it("/health: 503 Loading model while it loads, then 200 health.json", async () => {
    const s = await serve([], 1500);
    const loading = await get(s.base, "/health");
    expect(loading.status).toBe(503);
    expect(loading.text).toBe('{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}');
    expect((await get(s.base, "/props")).status).toBe(503);
    expect((await get(s.base, "/v1/models")).status).toBe(200); // the real one answers it while loading
    await untilHealthy(s.base);
    expect((await get(s.base, "/health")).text).toBe(fact("health.json"));
  });

  it("/props: props.json's keys (and hal0's test fields), filled with what it was started with", async () => {
    const s = await serve(["--alias", "tiny", "-c", "2048"]);
    await untilHealthy(s.base);
    const props = (await get(s.base, "/props")).json();
    const recorded = factJson("props.json");
    const hal0Fields = ["argv", "flags", "model", "alias", "ctx_size", "host", "port", "pid", "cwd"];
    expect(keys(props)).toEqual([...keys(recorded), ...hal0Fields].sort());
    expect(keys(props.default_generation_settings)).toEqual(keys(recorded.default_generation_settings));
    expect(keys(props.default_generation_settings.params)).toEqual(keys(recorded.default_generation_settings.params));
    expect(keys(props.modalities)).toEqual(keys(recorded.modalities));
    expect(keys(props.chat_template_caps)).toEqual(keys(recorded.chat_template_caps));
    expect(props).toMatchObject({
      model_path: model, model_alias: "tiny", total_slots: recorded.total_slots, build_info: "b9749-d32676d77", endpoint_metrics: false,
      default_generation_settings: { n_ctx: 2048 }, alias: "tiny", ctx_size: 2048,
    });
  });

  it("/v1/models: v1-models.json's keys, the alias as id", async () => {
    const s = await serve(["--alias", "tiny,small"]);
    await untilHealthy(s.base);
    const models = (await get(s.base, "/v1/models")).json();
    const recorded = factJson("v1-models.json");
    expect(keys(models)).toEqual(keys(recorded));
    expect(keys(models.models[0])).toEqual(keys(recorded.models[0]));
    expect(keys(models.models[0].details)).toEqual(keys(recorded.models[0].details));
    expect(keys(models.data[0])).toEqual(keys(recorded.data[0]));
    expect(keys(models.data[0].meta)).toEqual(keys(recorded.data[0].meta));
    expect(models.data).toHaveLength(1);
    expect(models.data[0]).toMatchObject({ id: "tiny", aliases: ["tiny", "small"], object: "model", owned_by: "llamacpp" });
    expect(models.models[0]).toMatchObject({ name: "tiny", model: "tiny" });
  });

  it("/slots: one entry per --parallel slot (auto: as many as recorded, sharing the context), with slots.json's keys", async () => {
    const recorded = factJson("slots.json");
    const auto = await serve(["-c", "4096"]);
    await untilHealthy(auto.base);
    const slots = (await get(auto.base, "/slots")).json();
    expect(slots).toHaveLength(recorded.length);
    expect(keys(slots[0])).toEqual(keys(recorded[0]));
    expect(slots.map((s: { id: number; n_ctx: number }) => [s.id, s.n_ctx])).toEqual(recorded.map((s: { id: number }) => [s.id, 4096]));
    const one = await serve(["-c", "4096", "--parallel", "1"]);
    await untilHealthy(one.base);
    expect((await get(one.base, "/slots")).json()).toEqual([{ id: 0, n_ctx: 4096, speculative: false, is_processing: false }]);
    expect((await get(one.base, "/props")).json()).toMatchObject({ total_slots: 1, default_generation_settings: { n_ctx: 4096 } });
    const four = await serve(["-c", "4096", "--parallel", "4", "--kv-unified"]);
    await untilHealthy(four.base);
    expect((await get(four.base, "/slots")).json().map((s: { id: number; n_ctx: number }) => [s.id, s.n_ctx])).toEqual([[0, 4096], [1, 4096], [2, 4096], [3, 4096]]);
  });

  it("/metrics: 501 without --metrics; with it, metrics.txt's names, counting the tokens it served", async () => {
    const off = await serve();
    await untilHealthy(off.base);
    const refused = await get(off.base, "/metrics");
    expect(refused.status).toBe(501);
    expect(refused.text).toBe('{"error":{"code":501,"message":"This server does not support metrics endpoint. Start it with `--metrics`","type":"not_supported_error"}}');

    const on = await serve(["--metrics"]);
    await untilHealthy(on.base);
    const names = (text: string) => text.split("\n").filter(Boolean).map((l) => l.replace(/^# (HELP|TYPE) /, "").split(" ")[0]);
    const before = await get(on.base, "/metrics");
    expect(before.status).toBe(200);
    expect(names(before.text)).toEqual(names(fact("metrics.txt")));
    expect(before.text.split("\n").filter((l) => l.startsWith("# "))).toEqual(fact("metrics.txt").split("\n").filter((l) => l.startsWith("# ")));
    const res = await fetch(`${on.base}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ messages: [{ role: "user", content: "one two three" }] }) });
    const { usage } = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const value = (text: string, name: string) => Number(new RegExp(`^llamacpp:${name} (\\S+)$`, "m").exec(text)![1]);
    const after = (await get(on.base, "/metrics")).text;
    expect(value(after, "prompt_tokens_total")).toBe(usage.prompt_tokens);
    expect(value(after, "tokens_predicted_total")).toBe(usage.completion_tokens);
    expect(usage.completion_tokens).toBe(4); // "echo:", " one", " two", " three"
  });

  it("POST /v1/chat/completions: the echo, with the build's system_fingerprint", async () => {
    const s = await serve(["--alias", "tiny"]);
    await untilHealthy(s.base);
    const res = await fetch(`${s.base}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ messages: [{ role: "user", content: "hello there" }] }) });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({
      object: "chat.completion", model: "tiny", system_fingerprint: "b9749-d32676d77",
      choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "echo: hello there" } }],
    });
  });

  it('"stream": true: chat-stream.txt\'s events (role, content, finish with timings, [DONE])', async () => {
    const s = await serve(["--alias", "tiny"]);
    await untilHealthy(s.base);
    const res = await fetch(`${s.base}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ stream: true, max_tokens: 2, messages: [{ role: "user", content: "a b c" }] }) });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await res.text();

    /** Each event's kind and its keys (and its choice's and delta's). */
    const shape = (sse: string) => {
      expect(sse.endsWith("\n\n")).toBe(true);
      return sse.slice(0, -2).split("\n\n").map((event) => {
        expect(event.startsWith("data: ")).toBe(true);
        const data = event.slice("data: ".length);
        if (data === "[DONE]") return { kind: "done" };
        const chunk = JSON.parse(data);
        const choice = chunk.choices[0];
        const kind = choice.finish_reason !== null ? "finish" : "role" in choice.delta ? "role" : "content";
        return { kind, keys: keys(chunk), choice: keys(choice), delta: keys(choice.delta), timings: chunk.timings ? keys(chunk.timings) : null, fingerprint: chunk.system_fingerprint };
      });
    };
    const mine = shape(text);
    const recorded = shape(fact("chat-stream.txt"));
    const collapse = (events: Array<{ kind: string }>) => events.map((e) => e.kind).filter((k, i, all) => k !== "content" || all[i - 1] !== "content");
    expect(collapse(mine)).toEqual(["role", "content", "finish", "done"]);
    expect(collapse(recorded)).toEqual(collapse(mine));
    for (const kind of ["role", "content", "finish"]) expect(mine.find((e) => e.kind === kind)).toEqual(recorded.find((e) => e.kind === kind));

    const chunks = text.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
    expect(chunks.map((c) => c.choices[0].delta.content ?? null).join("")).toBe("echo: a");
    expect(chunks.at(-1).choices[0].finish_reason).toBe("length");
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });
});
