import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { compile, hashOf, loadTree, tierFor, type Model, type ResolvedSlot } from "../../compiler/index.js";
import { FILE_KINDS, Profile, SEED_PROFILES, classifyPath, type Diagnostic } from "../../schema/index.js";

/** fixtures/box: a realistic, valid box. It must compile with no diagnostics at all. */
const ROOT = fileURLToPath(new URL("../../fixtures/box", import.meta.url));
const PROJECT = fileURLToPath(new URL("../..", import.meta.url));
/** Every profile of the box runs the stand-in runner, relative to the config folder (the runner's cwd). */
const RUNNER = ["hal0-fake-llama-server"];
/** The stand-in for the runners that are not llama-server (FLM, TTS, ComfyUI, whisper): its flags are not checked. */
const GENERIC = ["hal0-fake-runner"];

let model: Model;
let diagnostics: Diagnostic[];
let files: ReadonlyMap<string, string>;

beforeAll(async () => {
  const loaded = await loadTree(ROOT);
  files = loaded.tree.files;
  const result = compile(loaded.tree, loaded.diagnostics);
  diagnostics = result.diagnostics;
  model = result.model!;
});

function slot(name: string): ResolvedSlot {
  const s = model.slots[name];
  if (!s) throw new Error(`no slot ${name}`);
  return s;
}

/** The value following `flag` in argv, asserting the flag occurs exactly once. */
function flagValue(argv: readonly string[], flag: string): string | undefined {
  const at = argv.flatMap((a, i) => (a === flag ? [i] : []));
  expect(at.length, `${flag} occurrences`).toBeLessThanOrEqual(1);
  return at.length === 0 ? undefined : argv[at[0]! + 1];
}

const fixturePath = (rel: string) => join(ROOT, rel);

describe("fixtures/box", () => {
  it("compiles with no diagnostics and yields a model", () => {
    expect(diagnostics).toEqual([]);
    expect(model).toBeDefined();
    expect(model.root).toBe(ROOT);
    expect(model.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("reads every file of the tree, each opening with a #:schema directive that resolves", () => {
    expect([...files.keys()]).toEqual([
      "agents/coder.toml",
      "capabilities.toml",
      "hal0.toml",
      "mcp-servers/github.toml",
      "mcp-servers/sqlite.toml",
      "models.toml",
      "policy.toml",
      "profiles.toml",
      "slots/chat.toml",
      "slots/coder.toml",
      "slots/embed.toml",
      "slots/image.toml",
      "slots/npu-assist.toml",
      "slots/npu-qwen.toml",
      "slots/rerank.toml",
      "slots/speech.toml",
      "slots/utility.toml",
      "slots/vision.toml",
      "slots/whisper.toml",
      "stacks/forge.toml",
      "stacks/voice.toml",
      "upstreams.toml",
    ]);
    for (const [rel, text] of files) {
      const first = text.split("\n", 1)[0]!;
      const match = /^#:schema (\S+)$/.exec(first);
      expect(match, `${rel} first line`).not.toBeNull();
      const target = resolve(dirname(join(ROOT, rel)), match![1]!);
      const kind = classifyPath(rel)!.kind;
      expect(target, rel).toBe(join(PROJECT, "schema", "json", kind.jsonSchema));
      expect(existsSync(target), `${rel} → ${target}`).toBe(true);
    }
    expect(new Set([...files.keys()].map((rel) => classifyPath(rel)!.kind.id))).toEqual(new Set(FILE_KINDS.map((k) => k.id)));
  });

  it("has its settings as written in hal0.toml, defaults elsewhere", () => {
    const s = model.settings;
    expect(s.server).toEqual({ host: "127.0.0.1", port: 8080, allowed_hosts: ["hal0.local"], allowed_origins: ["http://hal0.local"], public_origins: [], auth: "token", max_body_kb: 1024 });
    expect(s.slots).toMatchObject({ runtime: "process", port_range_start: 8081, port_range_end: 8200, max_slots: 8, health_timeout_s: 240 });
    expect(s.reconcile).toEqual({ interval_s: 60, drift: "enforce" });
    expect(s.approvals.ttl_s).toBe(28800);
    expect(s.hermes.home).toBe("/var/lib/hal0/.hermes");
  });

  it("has eleven slots, eight of them enabled, with their declared type, device and profile", () => {
    const table = Object.values(model.slots).map((s) => [s.name, s.type, s.device, s.profile, s.enabled]);
    expect(table).toEqual([
      ["chat", "llm", "gpu-rocm", "rocm-moe", true],
      ["coder", "llm", "gpu-rocm", "rocm-dnse", true],
      ["embed", "embedding", "gpu-vulkan", "vulkan", true],
      ["image", "image", "gpu-rocm", "comfyui", false],
      ["npu-assist", "llm", "npu", "flm", true],
      ["npu-qwen", "llm", "npu", "flm", false],
      ["rerank", "reranking", "gpu-vulkan", "vulkan", true],
      ["speech", "tts", "cpu", "tts", true],
      ["utility", "llm", "cpu", "cpu-small", true],
      ["vision", "llm", "gpu-rocm", "rocm", false],
      ["whisper", "transcription", "cpu", "tts", true],
    ]);
    const enabled = Object.values(model.slots).filter((s) => s.enabled);
    expect(enabled.length).toBeLessThanOrEqual(model.settings.slots.max_slots);
    const ports = enabled.map((s) => s.port);
    expect(new Set(ports).size).toBe(ports.length);
    for (const s of Object.values(model.slots)) {
      expect(s.port).toBeGreaterThanOrEqual(8081);
      expect(s.port).toBeLessThanOrEqual(8200);
      expect(s.spec.port).toBe(s.port);
      expect(s.spec.host).toBe("127.0.0.1");
      expect(s.spec.runtime).toBe("process");
      expect(s.spec_hash).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(s.spec_hash).toBe(hashOf(s.spec));
      expect(s.tune_unavailable).toEqual({});
    }
    expect(new Set(Object.values(model.slots).map((s) => s.spec_hash)).size).toBe(11);
    expect(enabled.filter((s) => s.device === "npu" && s.type === "llm").map((s) => s.name)).toEqual(["npu-assist"]);
  });

  it("carries priority, pinning and drift: the slot's own, else hal0.toml's", () => {
    expect(slot("chat")).toMatchObject({ pinned: true, priority: 90, drift: "enforce" });
    expect(slot("coder")).toMatchObject({ pinned: false, priority: 70, drift: "enforce" });
    expect(slot("vision")).toMatchObject({ pinned: false, priority: 40, drift: "warn" });
    expect(slot("image").priority).toBe(10);
  });

  describe("chat (rocm-moe, pinned)", () => {
    it("overlays its [tune] on rocm-moe's base tune", () => {
      expect(slot("chat").tune).toEqual({ ctx_size: 40960, reasoning_effort: "high" });
      expect(slot("chat").tune_effective).toEqual({
        ctx_size: 40960, // the slot's, below rocm-moe's 65536
        enable_thinking: true,
        reasoning_effort: "high", // the slot's, over rocm-moe's "medium"
        reasoning_budget: 4096,
        vision: false,
        speculation: "off",
      });
    });

    it("runs the runner with the profile's flags, hal0's flags, then extra_args last", () => {
      const { argv, env } = slot("chat").spec;
      expect(argv.slice(0, RUNNER.length)).toEqual(RUNNER);
      expect(argv.slice(RUNNER.length, RUNNER.length + 14)).toEqual(["-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0", "-b", "512", "-ub", "512", "--parallel", "1", "--load-mode", "none"]);
      expect(flagValue(argv, "--model")).toBe(fixturePath("models/Qwen3-30B-A3B-Q4_K_M.gguf"));
      expect(existsSync(flagValue(argv, "--model")!)).toBe(true);
      expect(flagValue(argv, "--alias")).toBe("qwen3-30b-a3b");
      expect(flagValue(argv, "--host")).toBe("127.0.0.1");
      expect(flagValue(argv, "--port")).toBe("8081");
      expect(flagValue(argv, "--ctx-size")).toBe("40960");
      // The newest llama-server dialect (no runner facts given): thinking by --reasoning, the effort for the template.
      expect(flagValue(argv, "--reasoning")).toBe("on");
      expect(flagValue(argv, "--reasoning-budget")).toBe("4096");
      expect(JSON.parse(flagValue(argv, "--chat-template-kwargs")!)).toEqual({ reasoning_effort: "high" });
      expect(argv).toContain("--jinja");
      expect(argv).not.toContain("--spec-draft-model");
      expect(argv).not.toContain("--spec-type");
      expect(argv).not.toContain("--mmproj");
      expect(argv.slice(-3)).toEqual(["--metrics", "--cache-reuse", "256"]);
      expect(env).toEqual({ ROCBLAS_USE_HIPBLASLT: "1" });
    });
  });

  describe("coder (rocm-dnse, draft speculation)", () => {
    it("keeps the profile's context and turns thinking off and the drafter on", () => {
      expect(slot("coder").tune_effective).toEqual({
        ctx_size: 32768,
        enable_thinking: false,
        reasoning_effort: "medium",
        reasoning_budget: 4096,
        vision: false,
        speculation: "draft",
      });
    });

    it("passes the drafter and the model's chat template, and no thinking budget", () => {
      const { argv, env } = slot("coder").spec;
      expect(flagValue(argv, "-b")).toBe("2048"); // rocm-dnse's bigger batch
      expect(flagValue(argv, "--model")).toBe(fixturePath("models/qwen2.5-coder-32b-instruct-q4_k_m.gguf"));
      expect(flagValue(argv, "--spec-type")).toBe("draft-simple");
      expect(flagValue(argv, "--spec-draft-model")).toBe(fixturePath("models/qwen2.5-coder-0.5b-instruct-q8_0.gguf"));
      expect(existsSync(flagValue(argv, "--spec-draft-model")!)).toBe(true);
      expect(flagValue(argv, "--port")).toBe("8082");
      expect(flagValue(argv, "--ctx-size")).toBe("32768");
      expect(flagValue(argv, "--reasoning")).toBe("off");
      expect(argv).not.toContain("--reasoning-budget");
      expect(flagValue(argv, "--chat-template")).toBe("chatml");
      expect(JSON.parse(flagValue(argv, "--chat-template-kwargs")!)).toEqual({ reasoning_effort: "medium" });
      expect(argv.slice(-4)).toEqual(["--spec-draft-n-max", "16", "--spec-draft-n-min", "4"]);
      expect(env).toEqual({});
    });
  });

  describe("embed (vulkan, extra_args override the profile's batch sizes)", () => {
    it("has the vulkan profile's tune unchanged", () => {
      expect(slot("embed").tune).toEqual({});
      expect(slot("embed").tune_effective).toEqual({
        ctx_size: 8192, enable_thinking: false, reasoning_effort: "low", reasoning_budget: 0, vision: false, speculation: "off",
      });
    });

    it("keeps only the last batch flags and no llm-only flags", () => {
      const { argv } = slot("embed").spec;
      expect(argv).not.toContain("-b");
      expect(argv).not.toContain("-ub");
      expect(argv).not.toContain("512");
      expect(argv).not.toContain("--reasoning-budget");
      expect(argv).not.toContain("--chat-template-kwargs");
      expect(argv).toContain("--embedding");
      expect(flagValue(argv, "--ctx-size")).toBe("8192");
      expect(flagValue(argv, "--port")).toBe("8090");
      expect(flagValue(argv, "--model")).toBe(fixturePath("models/Qwen3-Embedding-0.6B-Q8_0.gguf"));
      expect(argv.slice(-6)).toEqual(["--pooling", "last", "--batch-size", "8192", "--ubatch-size", "8192"]);
      expect(slot("embed").spec.device).toBe("gpu-vulkan");
    });
  });

  it("gives the disabled vision slot its projector and the utility slot its CPU profile", () => {
    const vision = slot("vision");
    expect(vision.tune_effective).toMatchObject({ vision: true, enable_thinking: false, ctx_size: 32768 });
    expect(flagValue(vision.spec.argv, "--mmproj")).toBe(fixturePath("models/mmproj-gemma-3-12b-it-F16.gguf"));

    const utility = slot("utility");
    expect(utility.tune_effective).toEqual({
      ctx_size: 8192, enable_thinking: false, reasoning_effort: "low", reasoning_budget: 0, vision: false, speculation: "off",
    });
    expect(utility.spec.argv.slice(0, RUNNER.length + 10)).toEqual([...RUNNER, "--threads", "8", "-b", "256", "-ub", "256", "--parallel", "2", "--load-mode", "mmap+mlock"]);
    expect(flagValue(utility.spec.argv, "--ctx-size")).toBe("8192");
    expect(utility.spec.env).toEqual({ OMP_NUM_THREADS: "8" });
  });

  it("runs the NPU, speech and image slots without llama-server's tuning flags", () => {
    expect(slot("npu-assist").spec.argv.slice(0, GENERIC.length)).toEqual(GENERIC);
    expect(flagValue(slot("npu-assist").spec.argv, "--ctx-size")).toBe("4096");
    expect(flagValue(slot("npu-assist").spec.argv, "--model")).toBe(fixturePath("models/flm/llama3.2-1b-npu2.q4nx"));
    for (const name of ["speech", "whisper", "image"]) {
      const { argv } = slot(name).spec;
      expect(argv, name).not.toContain("--ctx-size");
      expect(argv, name).not.toContain("--reasoning-budget");
    }
    expect(slot("speech").spec.argv).toEqual([
      ...GENERIC, "--model", fixturePath("models/kokoro-v1.0.onnx"), "--alias", "kokoro-82m",
      "--host", "127.0.0.1", "--port", "8120", "--voice", "af_heart",
    ]);
    expect(slot("whisper").spec.env).toEqual({ OMP_NUM_THREADS: "4" });
    expect(slot("image").spec.argv.slice(0, GENERIC.length)).toEqual(GENERIC);
  });

  it("runs every slot with a stand-in runner, a runner word hal0 ships in bin/ (so a copied box finds it): llama-server's for llama-server slots, the generic one for the rest", () => {
    expect(existsSync(join(PROJECT, "bin", RUNNER[0]!))).toBe(true);
    expect(readFileSync(join(PROJECT, "bin", RUNNER[0]!), "utf8")).toContain("../fixtures/runner/fake-llama-server.mjs");
    expect(readFileSync(join(PROJECT, "bin", GENERIC[0]!), "utf8")).toContain("fixtures/runner/fake-runner.mjs");
    const generic = new Set(["flm", "tts", "comfyui"]);
    for (const s of Object.values(model.slots)) expect(s.spec.argv.slice(0, 1), s.name).toEqual(generic.has(s.profile) ? GENERIC : RUNNER);
  });

  it("overrides each seed it uses in profiles.toml only to swap the runner and the image (the docker runtime's hal0-runner:local, or hal0-fake-runner:local for the runners that are not llama-server)", () => {
    expect(Object.keys(model.profiles)).toEqual(["comfyui", "cpu-small", "flm", "rocm", "rocm-dnse", "rocm-moe", "tts", "vulkan"]);
    for (const [name, raw] of Object.entries(SEED_PROFILES)) {
      const seed = Profile.parse(raw);
      const compiled = model.profiles[name]!;
      expect(compiled.origin, name).toBe("file");
      expect(seed.runner, name).not.toEqual(RUNNER);
      expect(compiled.image, name).toBe(["flm", "tts", "comfyui"].includes(name) ? "hal0-fake-runner:local" : "hal0-runner:local");
      expect({ ...compiled, runner: seed.runner, image: seed.image }, name).toEqual({ ...seed, name, origin: "file", flags_argv: compiled.flags_argv });
      expect(compiled.flags_argv.join(" "), name).toBe(seed.flags);
    }
  });

  it("adds its own cpu-small profile", () => {
    const custom = model.profiles["cpu-small"]!;
    expect(custom.origin).toBe("file");
    expect(custom.device_class).toBe("cpu");
    expect(custom.backend).toBeUndefined();
    expect(custom.flags_argv).toEqual(["--threads", "8", "-b", "256", "-ub", "256", "--parallel", "2", "--load-mode", "mmap+mlock"]);
    expect(custom.tune).toEqual({ ctx_size: 16384, enable_thinking: false, reasoning_effort: "low", reasoning_budget: 0, vision: false, speculation: "off" });
  });

  it("resolves every local model file against the config folder", () => {
    expect(Object.keys(model.models)).toHaveLength(12);
    for (const m of Object.values(model.models)) {
      for (const abs of [m.path_abs, m.draft_abs, m.mmproj_abs]) {
        if (abs === undefined) continue;
        expect(abs.startsWith(join(ROOT, "models"))).toBe(true);
        expect(existsSync(abs), abs).toBe(true);
      }
    }
    expect(model.models["glm-4.5-air"]!.path_abs).toBeUndefined();
    expect(model.models["glm-4.5-air"]!.mtp).toBe(true);
  });

  it("links the stacks, upstreams and MCP servers", () => {
    expect(Object.keys(model.stacks)).toEqual(["forge", "voice"]);
    expect(model.stacks.forge!.mode).toBe("replace");
    expect(model.stacks.forge!.slot.map((e) => e.slot)).toEqual(["chat", "coder", "embed", "rerank"]);
    expect(model.stacks.voice!.mode).toBe("merge");
    expect(model.upstreams.map((u) => [u.name, u.kind])).toEqual([["openrouter", "remote"], ["local-coder", "slot"]]);
    expect(model.upstreams[1]!.slot_name).toBe("coder");
    expect(Object.keys(model.mcpServers)).toEqual(["github", "sqlite"]);
    expect(model.mcpServers.sqlite!.url).toBe("http://127.0.0.1:9300/mcp");
    expect(model.mcpServers.github!.transport).toBe("stdio");
  });

  it("compiles the coding agent's MCP policy", () => {
    const coder = model.agents.coder!;
    expect(Object.keys(model.agents)).toEqual(["coder"]);
    expect(coder).toMatchObject({ name: "coder", file: "agents/coder.toml", display: "Coding agent", workspace: "/srv/code/coder" });
    expect(Object.keys(coder.servers)).toEqual(["files", "github", "hal0-admin", "hal0-memory", "search"]);
    expect(coder.servers["hal0-admin"]).toEqual({ builtin: true, enabled: true, auth: { kind: "none" } });
    expect(coder.servers.github!.auth).toEqual({ kind: "bearer-from-env", env: "GITHUB_TOKEN" });
    expect(coder.servers.search!.enabled).toBe(false);
    expect(coder.tools.blocked).toEqual(["model_delete", "stack_apply", "memory_delete", "push_files"]);
  });

  it("applies policy.toml: two tools tightened globally, one agent tightened further", () => {
    const { tiers, agents } = model.policy;
    expect(tiers.slot_edit).toBe("gated"); // autonomous_write by default
    expect(tiers.logs_tail).toBe("blocked"); // gated by default
    expect(tiers.slot_load).toBe("autonomous_write"); // untouched
    expect(tiers.model_delete).toBe("gated");
    expect(Object.keys(agents)).toEqual(["hermes__coder"]);
    expect(agents.hermes__coder).toMatchObject({ model_delete: "blocked", slot_load: "gated", slot_unload: "gated", stack_apply: "blocked" });
    expect(tierFor(model.policy, "slot_load", "hermes__coder")).toBe("gated");
    expect(tierFor(model.policy, "slot_load", "hermes__writer")).toBe("autonomous_write");
    expect(tierFor(model.policy, "logs_tail", "hermes__coder")).toBe("blocked");
  });

  it("binds agents/coder.toml to hermes__coder: for hal0's own tools the file's verdict is a floor, strictest wins", () => {
    const p = model.policy;
    // blocked by the file (memory_delete is autonomous_write by default), not listed (upstream_delete), a server it does not list (hal0-agents): refused.
    expect(tierFor(p, "memory_delete", "hermes__coder")).toBe("blocked");
    expect(tierFor(p, "upstream_delete", "hermes__coder")).toBe("blocked");
    expect(tierFor(p, "agent_profile_list", "hermes__coder")).toBe("blocked");
    expect(p.bound?.hermes__coder).toMatchObject({ file: "agents/coder.toml", verdicts: { memory_delete: "blocked", upstream_delete: "unknown_tool", agent_profile_list: "unknown_server" } });
    // gated by the file: at least gated (memory_add is autonomous_write by default).
    expect(tierFor(p, "memory_add", "hermes__coder")).toBe("gated");
    // allowed: policy.toml's tier stands, stricter ones included.
    expect(tierFor(p, "slot_list", "hermes__coder")).toBe("autonomous_read");
    expect(tierFor(p, "slot_edit", "hermes__coder")).toBe("gated");
    expect(tierFor(p, "logs_tail", "hermes__coder")).toBe("blocked");
    // Only hermes__coder is bound: another identity keeps the tiers.
    expect(tierFor(p, "memory_delete", "hermes__writer")).toBe(p.tiers.memory_delete);
    expect(tierFor(p, "upstream_delete", "hermes__writer")).toBe(p.tiers.upstream_delete);
  });

  it("binds agents/default.toml to hermes, the default profile's identity (not hermes__default)", async () => {
    const { tree } = await loadTree(ROOT);
    const coder = `${tree.files.get("agents/coder.toml")}`;
    const result = compile({ root: tree.root, files: new Map(tree.files).set("agents/default.toml", coder.replace('name = "coder"', 'name = "default"')) });
    expect(result.model, JSON.stringify(result.diagnostics.filter((d) => d.severity === "error"))).toBeDefined();
    const p = result.model!.policy;
    expect(Object.keys(p.bound ?? {}).sort()).toEqual(["hermes", "hermes__coder"]);
    expect(tierFor(p, "memory_delete", "hermes")).toBe("blocked");
    expect(tierFor(p, "memory_delete", "hermes__default")).toBe(p.tiers.memory_delete);
  });

  it("warns where policy.toml moves a tool for hermes__<P> that agents/<P>.toml refuses; the file wins", async () => {
    const { tree } = await loadTree(ROOT);
    const policy = `${tree.files.get("policy.toml")}`.replace('gated = ["slot_load", "slot_unload"]', 'gated = ["slot_load", "slot_unload"]\nautonomous_write = ["memory_delete", "upstream_delete", "slot_list"]');
    const result = compile({ root: tree.root, files: new Map(tree.files).set("policy.toml", policy) });
    expect(result.model).toBeDefined();
    const warned = result.diagnostics.filter((d) => d.code === "policy.agent_file_refuses");
    expect(warned.map((d) => [d.severity, d.file, d.path])).toEqual([
      ["warning", "policy.toml", ["agents", "hermes__coder", "autonomous_write", 0]],
      ["warning", "policy.toml", ["agents", "hermes__coder", "autonomous_write", 1]],
    ]);
    expect(warned[1]!.summary).toMatch(/agents\/coder\.toml refuses `upstream_delete` for hermes__coder/);
    expect(tierFor(result.model!.policy, "memory_delete", "hermes__coder")).toBe("blocked");
    expect(tierFor(result.model!.policy, "upstream_delete", "hermes__coder")).toBe("blocked");
    expect(tierFor(result.model!.policy, "slot_list", "hermes__coder")).toBe("autonomous_write");
    // The example box itself is coherent: no such warning.
    expect(compile(tree).diagnostics.filter((d) => d.code === "policy.agent_file_refuses")).toEqual([]);
  });

  it("compiles deterministically", async () => {
    const again = compile((await loadTree(ROOT)).tree);
    expect(again.model!.digest).toBe(model.digest);
    expect(Object.values(again.model!.slots).map((s) => s.spec_hash)).toEqual(Object.values(model.slots).map((s) => s.spec_hash));
  });

  it("a tree with errors only outside hal0.toml still gives hal0.toml's settings; none when hal0.toml has its own", async () => {
    const { tree } = await loadTree(ROOT);
    const withBrokenSlot = new Map(tree.files).set("slots/chat.toml", `${tree.files.get("slots/chat.toml")}\nport = "x"\n`);
    const broken = compile({ root: tree.root, files: withBrokenSlot });
    expect(broken.model).toBeUndefined();
    expect(broken.settings).toEqual(model.settings);
    const brokenSettings = new Map(withBrokenSlot).set("hal0.toml", `${tree.files.get("hal0.toml")}\n[bridge]\nenabled = "no"\n`);
    expect(compile({ root: tree.root, files: brokenSettings }).settings).toBeUndefined();
    expect(compile(tree).settings).toBeUndefined();
    // hal0.toml not read (the folder unlisted, or the file unreadable): its settings are not known, the defaults are not passed off as them.
    const unread = (file: string) => [{ code: "config.read_error", severity: "error", file, line: 1, column: 1, message: `cannot read ${file}`, path: [] }] as unknown as Diagnostic[];
    const withoutSettings = new Map(withBrokenSlot);
    withoutSettings.delete("hal0.toml");
    expect(compile({ root: tree.root, files: withoutSettings }).settings).toEqual(expect.objectContaining({ server: expect.anything() }));
    expect(compile({ root: tree.root, files: withoutSettings }, unread("hal0.toml")).settings).toBeUndefined();
    expect(compile({ root: tree.root, files: new Map() }, unread(".")).settings).toBeUndefined();
  });
});
