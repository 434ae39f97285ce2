import { describe, expect, it } from "vitest";
import { compile, sourceTree, type Model } from "../../compiler/index.js";

const ROOT = "/box";

const MODELS = `
[model.qwen3]
path = "models/qwen3.gguf"
type = "llm"
context_length = 40960
jinja = true
mtp = false
draft = "models/qwen3-draft.gguf"
mmproj = "models/mmproj.gguf"

[model.bge]
path = "/abs/bge.gguf"
type = "embedding"
context_length = 8192
`;

function build(files: Record<string, string>): Model {
  const result = compile(sourceTree(ROOT, Object.entries({ "models.toml": MODELS, ...files })));
  const errors = result.diagnostics.filter((d) => d.severity === "error");
  expect(errors, JSON.stringify(errors, null, 2)).toEqual([]);
  return result.model!;
}

describe("effective tune", () => {
  it("overlays the slot's sparse tune on the profile's base tune", () => {
    const model = build({ "slots/chat.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n[tune]\nctx_size = 16384\nreasoning_effort = "high"\n` });
    expect(model.slots.chat!.tune_effective).toEqual({
      ctx_size: 16384, enable_thinking: true, reasoning_effort: "high", reasoning_budget: 4096, vision: false, speculation: "off",
    });
    expect(model.slots.chat!.tune).toEqual({ ctx_size: 16384, reasoning_effort: "high" });
  });

  it("limits what the model can't honour and says why, as warnings", () => {
    const result = compile(sourceTree(ROOT, Object.entries({
      "models.toml": MODELS,
      "slots/chat.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n[tune]\nctx_size = 131072\nspeculation = "mtp"\n`,
    })));
    const slot = result.model!.slots.chat!;
    expect(slot.tune_effective.ctx_size).toBe(40960);
    expect(slot.tune_effective.speculation).toBe("off");
    expect(slot.tune_unavailable.ctx_size).toMatchObject({ requested: 131072, effective: 40960 });
    expect(slot.tune_unavailable.speculation?.reason).toContain("no MTP heads");
    expect(result.diagnostics.map((d) => `${d.line}:${d.column} ${d.severity} ${d.code}`)).toEqual([
      "5:12 warning slot.tune_unavailable",
      "6:15 warning slot.tune_unavailable",
    ]);
  });

  it("passes the runner's argv prefix word for word: a wrapper's own flags are not llama-server's (toolbox run -c)", () => {
    const model = build({
      "profiles.toml": `[profile.boxed]\nrunner = ["toolbox", "run", "-c", "llama-rocm", "--", "llama-server"]\nflags = "-fa on"\ndevice_class = "cpu"\n`,
      "slots/chat.toml": `profile = "boxed"\nmodel = "qwen3"\nport = 8081\n[tune]\nctx_size = 16384\n`,
    });
    const argv = model.slots.chat!.spec.argv;
    expect(argv.slice(0, 6)).toEqual(["toolbox", "run", "-c", "llama-rocm", "--", "llama-server"]);
    expect(argv.join(" ")).toContain("--ctx-size 16384");
  });

  it("honours draft and vision when the model has a drafter and a projector", () => {
    const model = build({ "slots/chat.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n[tune]\nspeculation = "draft"\nvision = true\n` });
    const argv = model.slots.chat!.spec.argv;
    expect(argv.join(" ")).toContain("--spec-type draft-simple --spec-draft-model /box/models/qwen3-draft.gguf");
    expect(argv.join(" ")).toContain("--mmproj /box/models/mmproj.gguf");
    expect(model.slots.chat!.tune_unavailable).toEqual({});
  });
});

describe("runner argv and spec", () => {
  it("orders runner, profile flags, model, network, tune, then extra_args, later flags winning", () => {
    const model = build({ "slots/chat.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8090\n[server]\nextra_args = "-b 2048 --lora a.gguf --lora b.gguf"\nenv = { B = "2", A = "1" }\n` });
    const spec = model.slots.chat!.spec;
    expect(spec.runtime).toBe("process");
    expect(spec.argv).toEqual([
      "llama-server",
      "-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0", "-ub", "512", "--parallel", "1", "--load-mode", "none",
      "--model", "/box/models/qwen3.gguf", "--alias", "qwen3", "--host", "127.0.0.1", "--port", "8090",
      "--metrics", "--ctx-size", "32768", "--reasoning", "on", "--reasoning-budget", "4096",
      "--chat-template-kwargs", '{"reasoning_effort":"medium"}', "--jinja",
      "-b", "2048", "--lora", "a.gguf", "--lora", "b.gguf",
    ]);
    expect(Object.keys(spec.env)).toEqual(["A", "B"]);
    expect(spec).toMatchObject({ host: "127.0.0.1", port: 8090, health_path: "/health", device: "gpu-rocm", gpu_index: 0 });
  });

  it("gives embedding slots --embedding and no reasoning flags", () => {
    const model = build({ "slots/embed.toml": `profile = "vulkan"\nmodel = "bge"\nport = 8082\ntype = "embedding"\n` });
    const argv = model.slots.embed!.spec.argv;
    expect(argv).toContain("--embedding");
    expect(argv).not.toContain("--reasoning-budget");
    expect(argv).toContain("--metrics");
    expect(argv.join(" ")).toContain("--model /abs/bge.gguf");
    expect(model.slots.embed!.device).toBe("gpu-vulkan");
  });

  it("gives llama-server slots --metrics (hal0 scrapes it) and other runners none", () => {
    const model = build({
      "slots/chat.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n[server]\nextra_args = "--metrics"\n`,
      "slots/speech.toml": `profile = "tts"\nport = 8083\ntype = "tts"\n`,
    });
    expect(model.slots.chat!.spec.argv.filter((w) => w === "--metrics")).toHaveLength(1);
    expect(model.slots.speech!.spec.argv).not.toContain("--metrics");
  });

  it("keeps the swarm runtime's --api-key-file beside a key file of the slot's own (llama-server reads the keys of both)", () => {
    const model = build({ "hal0.toml": `[slots]\nruntime = "swarm"\n`, "slots/chat.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n[server]\nextra_args = "--api-key-file /run/secrets/team-keys"\n` });
    const argv = model.slots.chat!.spec.argv.join(" ");
    expect(argv).toContain("--api-key-file /run/secrets/hal0-api-key");
    expect(argv).toContain("--api-key-file /run/secrets/team-keys");
  });

  it("builds a docker spec (image + args, no runner prefix) under the docker runtime", () => {
    const model = build({ "hal0.toml": `[slots]\nruntime = "docker"\n`, "slots/chat.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n` });
    const spec = model.slots.chat!.spec;
    expect(spec.runtime).toBe("docker");
    expect(spec.image).toMatch(/^ghcr\.io\/hal0ai\//);
    expect(spec.argv[0]).toBe("-fa");
  });
});

describe("spec hash", () => {
  const slot = `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n[tune]\nctx_size = 8192\n`;
  const hashOf = (files: Record<string, string>) => build(files).slots.chat!.spec_hash;

  it("is stable across compiles and untouched by comments, layout and unrelated files", () => {
    const base = hashOf({ "slots/chat.toml": slot });
    expect(base).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(hashOf({ "slots/chat.toml": slot })).toBe(base);
    expect(hashOf({ "slots/chat.toml": `# the chat slot\n${slot.replace("port = 8081", "port   =   8081 # fixed")}` })).toBe(base);
    expect(hashOf({ "slots/chat.toml": slot, "slots/other.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8082\n` })).toBe(base);
    expect(hashOf({ "slots/chat.toml": slot, "slots/other.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8082\npriority = 10\n` })).toBe(base);
  });

  it("changes when the spec changes: tune, profile flags, extra args, env", () => {
    const base = hashOf({ "slots/chat.toml": slot });
    expect(hashOf({ "slots/chat.toml": slot.replace("8192", "8193") })).not.toBe(base);
    expect(hashOf({ "slots/chat.toml": `${slot}[server]\nextra_args = "--threads 4"\n` })).not.toBe(base);
    expect(hashOf({ "slots/chat.toml": `${slot}[server]\nenv = { X = "1" }\n` })).not.toBe(base);
    expect(hashOf({ "slots/chat.toml": slot, "profiles.toml": `[profile.rocm]\nflags = "-fa off"\n` })).not.toBe(base);
  });
});

describe("canonicalJson", () => {
  it("sorts keys at every depth, keeps array order, drops undefined members", async () => {
    const { canonicalJson } = await import("../../compiler/index.js");
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: undefined }, e: null })).toBe('{"a":{"d":[3,{"y":2,"z":1}]},"b":1,"e":null}');
    expect(canonicalJson(["b", "a"])).toBe('["b","a"]');
    expect(canonicalJson("x")).toBe('"x"');
    expect(canonicalJson({ env: { Z: "1", A: "2" }, argv: ["--b", "--a"] })).toBe('{"argv":["--b","--a"],"env":{"A":"2","Z":"1"}}');
  });

  it("leaves the value untouched, writes dates, drops what JSON drops, and keeps a __proto__ key", async () => {
    const { canonicalJson } = await import("../../compiler/index.js");
    const value = { b: [{ y: 1, x: 2 }], a: 1 };
    expect(canonicalJson(value)).toBe('{"a":1,"b":[{"x":2,"y":1}]}');
    expect(Object.keys(value)).toEqual(["b", "a"]);
    expect(Object.keys(value.b[0]!)).toEqual(["y", "x"]);
    expect(canonicalJson({ t: new Date(0), f: () => 1, u: undefined, s: Symbol("s"), list: [undefined, () => 1] })).toBe('{"list":[null,null],"t":"1970-01-01T00:00:00.000Z"}');
    expect(canonicalJson(JSON.parse('{"z":1,"__proto__":{"b":1,"a":2}}'))).toBe('{"__proto__":{"a":2,"b":1},"z":1}');
    expect(canonicalJson(undefined)).toBe("null");
  });

  it("agrees with sorting every object's keys on thousands of random values", async () => {
    const { canonicalJson } = await import("../../compiler/index.js");
    // The reference: a deep copy with sorted keys, then JSON.stringify.
    const sortedCopy = (v: unknown): unknown => (v === null || typeof v !== "object" ? v : Array.isArray(v) ? v.map(sortedCopy)
      : Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortedCopy((v as Record<string, unknown>)[k])])));
    let seed = 11;
    const next = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
    const keys = ["a", "b", "c", "spec", "argv", "env", "Z", "10", "9", "é", ""];
    const random = (depth: number): unknown => {
      const pick = next(depth > 3 ? 4 : 7);
      if (pick === 0) return next(100) - 50;
      if (pick === 1) return ["x", "\"q\"", "\n", "ü"][next(4)];
      if (pick === 2) return [true, null, undefined][next(3)];
      if (pick === 3) return next(2) === 0 ? "s" : 1.5;
      if (pick === 4) return Array.from({ length: next(4) }, () => random(depth + 1));
      const out: Record<string, unknown> = {};
      for (let i = next(5); i > 0; i--) out[keys[next(keys.length)]!] = random(depth + 1);
      return out;
    };
    for (let n = 0; n < 3000; n++) {
      const value = random(0);
      expect(canonicalJson(value)).toBe(JSON.stringify(sortedCopy(value)) ?? "null");
    }
  });
});

describe("spec hash is the hash of canonical JSON", () => {
  it("holds for both runtimes (the spec is built with sorted keys)", async () => {
    const { canonicalJson, hashOf } = await import("../../compiler/index.js");
    for (const runtime of ["process", "docker"]) {
      const model = build({
        "hal0.toml": `[slots]\nruntime = "${runtime}"\n`,
        "slots/chat.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n[server]\nenv = { Z = "1", A = "2", M = "3" }\n`,
      });
      const { spec, spec_hash } = model.slots.chat!;
      expect(JSON.stringify(spec)).toBe(canonicalJson(spec));
      expect(spec_hash).toBe(hashOf(spec));
    }
  });
});
