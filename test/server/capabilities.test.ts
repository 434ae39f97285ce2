import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());

const file = () => readFileSync(join(s.config, "capabilities.toml"), "utf8");
const VISION_NOTE = "# A chat client that sends a screenshot is answered by Gemma (the vision slot).";

describe("GET /api/capabilities", () => {
  it("lists backends, catalogs and selections (slot, then child, in sorted order)", async () => {
    const r = await s.call("GET", "/api/capabilities");
    expect(r.status).toBe(200);
    expect(r.body.backends.map((b: any) => b.id)).toEqual(["llama.cpp", "fastflowlm", "comfyui"]);
    expect(r.body.backends[0]).toMatchObject({ kind: "llama-server", devices: ["gpu-rocm", "gpu-vulkan", "cpu"], enabled: true });
    expect(r.body.catalogs).toEqual([
      { id: "hf", url: "https://huggingface.co", enabled: true },
      { id: "ollama", url: "https://registry.ollama.ai", enabled: false },
    ]);
    expect(r.body.selections.map((x: any) => `${x.slot}.${x.child}`)).toEqual(["chat.embed", "chat.rerank", "chat.stt", "chat.tts", "chat.vision", "image.refiner"]);
    expect(r.body.selections[0]).toEqual({ slot: "chat", child: "embed", model: "qwen3-embedding-0.6b", backend: "llama.cpp", device: "gpu-vulkan", enabled: true });
  });

  it("narrows to one section; an unknown section is 400 capability.unknown_section naming the known ones", async () => {
    const r = await s.call("GET", "/api/capabilities?section=catalogs");
    expect(Object.keys(r.body)).toEqual(["catalogs"]);
    const bad = await s.call("GET", "/api/capabilities?section=models");
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: "capability.unknown_section", details: { section: "models", known: ["backends", "catalogs", "selections"] } });
  });

  it("counts only with summary=true, for every section or one", async () => {
    expect((await s.call("GET", "/api/capabilities?summary=true")).body).toEqual({
      summary: { backends: { total: 3, enabled: 3 }, catalogs: { total: 2, enabled: 1 }, selections: { total: 6, enabled: 5, slots: 2 } },
    });
    expect((await s.call("GET", "/api/capabilities?section=selections&summary=1")).body).toEqual({ summary: { selections: { total: 6, enabled: 5, slots: 2 } } });
    expect((await s.call("GET", "/api/capabilities?summary=maybe")).body.error.code).toBe("validation.invalid");
  });

  it("answers a box without capabilities.toml with empty sections; a refused set creates no file", async () => {
    await s.close();
    s = await startTestServer({ box: join(import.meta.dirname, "../../fixtures/invalid/capability-unknown-slot/slots") });
    expect((await s.call("GET", "/api/capabilities?summary=true")).body.summary.selections).toEqual({ total: 0, enabled: 0, slots: 0 });
    const r = await s.call("POST", "/api/capabilities/speech/vocoder", { body: { model: "kokoro" } }); // this box has no slots/
    expect(r.body.error.details.diagnostics.map((d: any) => d.code)).toEqual(["capability.unknown_slot"]);
    expect(existsSync(join(s.config, "capabilities.toml"))).toBe(false);
  });
});

describe("POST /api/capabilities/{slot}/{child}", () => {
  it("adds a selection as its own table; every comment of the file survives", async () => {
    const r = await s.call("POST", "/api/capabilities/image/upscaler", { body: { model: "flux1-schnell", backend: "comfyui", enabled: false } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ selection: { slot: "image", child: "upscaler", model: "flux1-schnell", backend: "comfyui", enabled: false }, committed: true, files: ["capabilities.toml"] });
    const text = file();
    expect(text).toContain(VISION_NOTE);
    expect(text).toContain('kind = "llama-server"       # serves llm, embedding and reranking models');
    expect(text).toMatch(/\[selection\.image\.upscaler\]\nmodel = "flux1-schnell"\nbackend = "comfyui"\nenabled = false\n/);
    const rows = (await s.call("GET", "/api/capabilities?section=selections")).body.selections;
    expect(rows.find((x: any) => x.child === "upscaler")).toMatchObject({ slot: "image", enabled: false });
  });

  it("changes a selection key by key; null removes backend or device", async () => {
    const r = await s.call("POST", "/api/capabilities/chat/embed", { body: { model: "qwen3-embedding-0.6b", backend: null, device: null } });
    expect(r.status).toBe(200);
    const row = (await s.call("GET", "/api/capabilities")).body.selections[0];
    expect(row).toEqual({ slot: "chat", child: "embed", model: "qwen3-embedding-0.6b", backend: null, device: null, enabled: true });
    expect(file()).toContain("# Retrieval for chat: embed on Vulkan so it survives ROCm restarts, then rerank.\n[selection.chat.embed]\nmodel = \"qwen3-embedding-0.6b\"\n\n");
  });

  it.each([
    ["an unknown slot", "/api/capabilities/ghost/vision", { model: "gemma-3-12b-it" }, "capability.unknown_slot"],
    ["a child the slot's type lacks", "/api/capabilities/image/vision", { model: "flux1-schnell" }, "capability.unknown_child"],
    ["an unknown model", "/api/capabilities/chat/vision", { model: "gemma-9" }, "capability.unknown_model"],
    ["a model of the wrong type", "/api/capabilities/chat/tts", { model: "qwen3-4b" }, "capability.invalid_selection"],
    ["an undeclared backend", "/api/capabilities/chat/vision", { model: "gemma-3-12b-it", backend: "vllm" }, "capability.unknown_backend"],
    ["a backend that cannot run the model", "/api/capabilities/image/upscaler", { model: "flux1-schnell", backend: "llama.cpp" }, "capability.illegal_backend_model_pair"],
    ["no device both allow", "/api/capabilities/chat/vision", { model: "gemma-3-12b-it", backend: "fastflowlm" }, "capability.illegal_backend_model_pair"],
    ["a device the model does not list, on the slot's own runner", "/api/capabilities/chat/draft", { model: "qwen3-4b", device: "npu" }, "capability.device_unsupported"],
    ["a device an existing selection's model does not list, once its backend is dropped", "/api/capabilities/chat/embed", { model: "qwen3-embedding-0.6b", backend: null, device: "npu" }, "capability.device_unsupported"],
  ])("refuses %s with 422 config.invalid and the compiler's diagnostic; nothing is written", async (_what, path, body, code) => {
    const before = file();
    const r = await s.call("POST", path, { body });
    expect(r.status).toBe(422);
    expect(r.body.error.code).toBe("config.invalid");
    expect(r.body.error.details.diagnostics.map((d: any) => d.code)).toEqual([code]);
    expect(r.body.error.details.diagnostics[0].file).toBe("capabilities.toml");
    expect(file()).toBe(before);
  });

  it.each([
    ["an inline table", 'selection.coder = { draft = { model = "qwen3-4b" } }  # the coder drafts with the small Qwen\n', /^selection\.coder = \{ draft = \{ model = "qwen3-4b" \}, vision = \{ model = "gemma-3-12b-it" \} \}  # the coder drafts with the small Qwen$/m],
    ["an inline table of [selection]", '\n[selection]\ncoder = { draft = { model = "qwen3-4b" } }  # the coder drafts with the small Qwen\n', /^coder = \{ draft = \{ model = "qwen3-4b" \}, vision = \{ model = "gemma-3-12b-it" \} \}  # the coder drafts with the small Qwen$/m],
  ])("adds a child to a slot whose selections are written as %s into it (a [selection.<slot>.<child>] header may not reopen them)", async (_what, written, expected) => {
    // Put before the first table, where a key of the top level (or a [selection] table of its own) may stand.
    writeFileSync(join(s.config, "capabilities.toml"), file().replace("schema_version = 2\n", `schema_version = 2\n${written}`));
    await s.hal0.box.snapshot();
    const r = await s.call("POST", "/api/capabilities/coder/vision", { body: { model: "gemma-3-12b-it" } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.committed).toBe(true);
    expect(file()).toMatch(expected);
    expect(file()).toContain(VISION_NOTE);
    const rows = (await s.call("GET", "/api/capabilities?section=selections")).body.selections;
    expect(rows.filter((x: any) => x.slot === "coder")).toEqual([
      { slot: "coder", child: "draft", model: "qwen3-4b", backend: null, device: null, enabled: true },
      { slot: "coder", child: "vision", model: "gemma-3-12b-it", backend: null, device: null, enabled: true },
    ]);
  });

  it("commits a selection on a disabled backend with a capability.backend_disabled warning at its backend; one turned off has none", async () => {
    writeFileSync(join(s.config, "capabilities.toml"), file().replace('id = "comfyui"\nkind = "comfyui"\n', 'id = "comfyui"\nkind = "comfyui"\nenabled = false\n'));
    await s.hal0.box.snapshot();
    const on = await s.call("POST", "/api/capabilities/image/upscaler", { body: { model: "flux1-schnell", backend: "comfyui" } });
    expect(on.status).toBe(200);
    expect(on.body.committed).toBe(true);
    expect(on.body.warnings.filter((w: any) => w.code === "capability.backend_disabled")).toMatchObject([
      { file: "capabilities.toml", path: ["selection", "image", "upscaler", "backend"], related: [{ message: "backend `comfyui` is disabled here" }] },
    ]);
    const off = await s.call("POST", "/api/capabilities/image/upscaler", { body: { model: "flux1-schnell", enabled: false } });
    expect(off.status).toBe(200);
    expect(off.body.warnings.map((w: any) => w.code)).not.toContain("capability.backend_disabled");
  });

  it("refuses a bad body or path shape with 422 validation.invalid", async () => {
    const noModel = await s.call("POST", "/api/capabilities/chat/vision", { body: { enabled: true } });
    expect(noModel.status).toBe(422);
    expect(noModel.body.error).toMatchObject({ code: "validation.invalid" });
    expect(noModel.body.error.details.fields[0].loc).toEqual(["body", "model"]);
    const badChild = await s.call("POST", "/api/capabilities/chat/Vision!", { body: { model: "gemma-3-12b-it" } });
    expect(badChild.body.error.code).toBe("validation.invalid");
    expect(badChild.body.error.details.fields[0].msg).toContain("a child name: 1–32 characters, lowercase a–z");
    expect((await s.call("POST", "/api/capabilities/chat/vision", { body: { model: "gemma-3-12b-it", size: 3 } })).body.error.code).toBe("validation.invalid");
  });
});
