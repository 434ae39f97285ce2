import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { ggufBytes, kv, modelKvs } from "./gguf-writer.js";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());
const outside = mkdtempSync(join(tmpdir(), "hal0-models-"));
afterAll(() => rmSync(outside, { recursive: true, force: true }));

const modelsToml = () => readFileSync(join(s.config, "models.toml"), "utf8");
const TEMPLATE = "{%- if tools %}{{ tools }}{% endif %}{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}<think>";
const writeModel = (path: string, opts: Parameters<typeof modelKvs>[0] = {}, extra: number[] = [4096]) =>
  writeFileSync(path, ggufBytes({ kvs: modelKvs({ template: TEMPLATE, ...opts }), tensors: [{ name: "output.weight", dims: extra }] }));

function isSubsequence(lines: string[], of: string[]): boolean {
  let i = 0;
  for (const l of of) if (i < lines.length && l === lines[i]) i++;
  return i === lines.length;
}

describe("GET /api/models", () => {
  it("lists every model bare, with installed (file here) and default", async () => {
    const r = await s.call("GET", "/api/models");
    expect(r.status).toBe(200);
    expect(r.body.total).toBe(12);
    expect(r.body.models).toHaveLength(12);
    const byId = Object.fromEntries(r.body.models.map((m: any) => [m.id, m]));
    expect(byId["qwen3-30b-a3b"]).toMatchObject({ installed: true, default: true, quant: "Q4_K_M", context_length: 40960 });
    expect(byId["glm-4.5-air"]).toMatchObject({ installed: false, path: null, default: false });
  });

  it("filters by installed, type, capability (all of), device (any of) and q; projects fields; pages with total", async () => {
    const ids = async (query: string) => (await s.call("GET", `/api/models?${query}`)).body.models.map((m: any) => m.id);
    expect(await ids("installed=false")).toEqual(["glm-4.5-air"]);
    expect(await ids("type=embedding,reranking")).toEqual(["bge-reranker-v2-m3", "qwen3-embedding-0.6b"]);
    expect(await ids("capability=chat,reasoning")).toEqual(["glm-4.5-air", "qwen3-1.7b-npu", "qwen3-30b-a3b"]);
    expect(await ids("capability=chat&capability=vision")).toEqual(["gemma-3-12b-it"]);
    expect(await ids("device=npu")).toEqual(["llama3.2-1b-npu", "qwen3-1.7b-npu"]);
    expect(await ids("device=npu,cpu&type=llm")).toEqual(["llama3.2-1b-npu", "qwen3-1.7b-npu", "qwen3-4b"]);
    expect(await ids("q=UNSLOTH")).toEqual(["gemma-3-12b-it", "glm-4.5-air"]);
    expect(await ids("q=Whisper large")).toEqual(["whisper-large-v3-turbo"]);
    const page = await s.call("GET", "/api/models?type=llm&fields=name,installed&limit=2&offset=1");
    expect(page.body).toEqual({ total: 7, models: [{ id: "glm-4.5-air", name: "GLM 4.5 Air", installed: false }, { id: "llama3.2-1b-npu", name: "Llama 3.2 1B (NPU)", installed: true }] });
  });

  it("refuses bad list parameters with validation.invalid naming the field", async () => {
    for (const [query, field] of [["limit=0", "limit"], ["limit=501", "limit"], ["fields=nope", "fields"], ["device=gpu-cuda", "device"], ["installed=maybe", "installed"], ["sort=id", ""]]) {
      const r = await s.call("GET", `/api/models?${query}`);
      expect(r.status, query).toBe(422);
      expect(r.body.error.code).toBe("validation.invalid");
      expect(r.body.error.details.fields[0].loc.join(".")).toContain(`query${field ? `.${field}` : ""}`);
    }
  });
});

describe("GET /api/models/{model_id}", () => {
  it("shows a model with its users and what its file's header says", async () => {
    const r = await s.call("GET", "/api/models/qwen3-30b-a3b");
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: "qwen3-30b-a3b", installed: true, used_by: { slots: ["chat"], stacks: [], selections: [] } });
    // The fixture's .gguf files are 8-byte placeholders (magic + version): the header is reported, not trusted.
    expect(r.body.gguf_error).toMatchObject({ code: "model.unsupported_format", reason: "truncated" });
    expect((await s.call("GET", "/api/models/glm-4.5-air")).body.used_by).toEqual({ slots: [], stacks: ["forge"], selections: [] });
    expect((await s.call("GET", "/api/models/gemma-3-12b-it")).body.used_by.selections).toEqual(["chat.vision"]);
  });

  it("answers an unknown id with 404 model.not_found", async () => {
    const r = await s.call("GET", "/api/models/nope");
    expect(r.status).toBe(404);
    expect(r.body.error.code).toBe("model.not_found");
  });
});

describe("POST /api/models/inspect", () => {
  it("returns a local file's GGUF facts, the entry it would register as, and drafter candidates beside it", async () => {
    const dir = join(outside, "inspect");
    mkdirSync(dir, { recursive: true });
    writeModel(join(dir, "Big-Q4_K_M.gguf"), { name: "Big", ctx: 131072 }, [64, 1024]);
    writeModel(join(dir, "Small-Q8_0.gguf"), { name: "Small", fileType: 7 }, [8]);
    writeFileSync(join(dir, "other-vocab.gguf"), ggufBytes({ kvs: modelKvs({ name: "Other", extra: [kv.str("tokenizer.ggml.pre", "x")] }).filter((k) => k.key !== "tokenizer.ggml.model") }));
    const r = await s.call("POST", "/api/models/inspect", { body: { path: join(dir, "Big-Q4_K_M.gguf") } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ format: "gguf", version: 3, architecture: "qwen3", name: "Big", context_length: 131072, quant: "Q4_K_M", size_label: "4B", chat_template: true, registered_as: null });
    expect(r.body.proposed).toMatchObject({ id: "big-q4_k_m", entry: { type: "llm", capabilities: ["chat", "tools", "reasoning"], jinja: true, context_length: 131072 } });
    expect(r.body.drafts.map((d: any) => d.name)).toEqual(["Small"]);
  });

  it("404 model.path_missing for no file, 422 model.unsupported_format for a file that is not GGUF", async () => {
    const missing = await s.call("POST", "/api/models/inspect", { body: { path: "/nonexistent/x.gguf" } });
    expect([missing.status, missing.body.error.code]).toEqual([404, "model.path_missing"]);
    const text = await s.call("POST", "/api/models/inspect", { body: { path: "models.toml" } });
    expect([text.status, text.body.error.code, text.body.error.details.reason]).toEqual([422, "model.unsupported_format", "not_gguf"]);
    const placeholder = await s.call("POST", "/api/models/inspect", { body: { path: "models/Qwen3-4B-Q4_K_M.gguf" } });
    expect([placeholder.status, placeholder.body.error.details.reason]).toEqual([422, "truncated"]);
    expect((await s.call("POST", "/api/models/inspect", { body: {} })).body.error.code).toBe("validation.invalid");
  });
});

describe("POST /api/models (register)", () => {
  it("appends the model to models.toml as one set edit, comments intact, facts filled from the GGUF header", async () => {
    writeModel(join(s.config, "models", "Tiny-Q8_0.gguf"), { name: "Tiny", fileType: 7, ctx: 32768 });
    const before = modelsToml();
    const r = await s.call("POST", "/api/models", { body: { id: "tiny", path: "models/Tiny-Q8_0.gguf", devices: ["cpu"] } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ committed: true, files: ["models.toml"], model: { id: "tiny", quant: "Q8_0", context_length: 32768, devices: ["cpu"] } });
    expect(r.body.filled_from_header).toEqual(expect.arrayContaining(["name", "type", "capabilities", "context_length", "quant", "size_bytes"]));
    const after = modelsToml();
    // Every line of the person's file is still there, in order; the new model is the only addition.
    expect(isSubsequence(before.split("\n"), after.split("\n"))).toBe(true);
    expect(after).toContain("# The daily driver: MoE, 3B active, fast enough on the iGPU for agent loops.");
    const shown = await s.call("GET", "/api/models/tiny");
    expect(shown.body).toMatchObject({ installed: true, name: "Tiny", gguf: { quant: "Q8_0", architecture: "qwen3" } });
  });

  it("refuses an existing id (409), a defaults table and tuning keys (422, their own codes), and invalid facts (422 config.invalid)", async () => {
    const before = modelsToml();
    const exists = await s.call("POST", "/api/models", { body: { id: "qwen3-4b", hf_repo: "a/b", hf_filename: "c.gguf" } });
    expect([exists.status, exists.body.error.code]).toEqual([409, "model.already_exists"]);
    const defaults = await s.call("POST", "/api/models", { body: { id: "x1", path: "models/x.gguf", defaults: { ctx_size: 4096 } } });
    expect([defaults.status, defaults.body.error.code]).toEqual([422, "model.defaults_removed"]);
    const tune = await s.call("POST", "/api/models", { body: { id: "x1", path: "models/x.gguf", ctx_size: 4096, enable_thinking: true } });
    expect([tune.status, tune.body.error.code, tune.body.error.details.keys]).toEqual([422, "model.tune_key_removed", ["ctx_size", "enable_thinking"]]);
    const invalid = await s.call("POST", "/api/models", { body: { id: "x1", path: "models/x.gguf", type: "chatbot", contxt_length: 5 } });
    expect([invalid.status, invalid.body.error.code]).toEqual([422, "config.invalid"]);
    expect(invalid.body.error.details.diagnostics.map((d: any) => d.file)).toEqual(["models.toml", "models.toml"]);
    const source = await s.call("POST", "/api/models", { body: { id: "x1" } });
    expect(source.body.error.details.diagnostics[0].code).toBe("model.source_required");
    expect((await s.call("POST", "/api/models", { body: { id: "Bad/Id", path: "x" } })).body.error.code).toBe("validation.invalid");
    expect(modelsToml()).toBe(before);
  });
});

describe("PUT /api/models/{model_id} (edit)", () => {
  it("sets file facts and removes one with null; the file's comments survive", async () => {
    const r = await s.call("PUT", "/api/models/qwen2.5-coder-32b", { body: { context_length: 65536, draft: null, tokenizer_repo: "Qwen/Other" } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: "qwen2.5-coder-32b", changed: ["context_length", "draft", "tokenizer_repo"], committed: true });
    const text = modelsToml();
    expect(text).toContain('chat_template = "chatml"        # the GGUF\'s embedded template mangles tool calls');
    expect(text).toContain("# Dense coder with a tiny same-family drafter for speculative decoding.");
    expect(text).not.toContain('draft = "models/qwen2.5-coder-0.5b-instruct-q8_0.gguf"');
    const shown = (await s.call("GET", "/api/models/qwen2.5-coder-32b")).body;
    expect(shown).toMatchObject({ context_length: 65536, draft: null, tokenizer_repo: "Qwen/Other" });
  });

  it("refuses defaults (model.defaults_removed), tune keys (model.tune_key_removed), unknown ids, empty bodies and bad values", async () => {
    const before = modelsToml();
    const put = (id: string, body: unknown) => s.call("PUT", `/api/models/${id}`, { body });
    const defaults = await put("qwen3-4b", { defaults: { ctx_size: 8192 } });
    expect([defaults.status, defaults.body.error.code]).toEqual([422, "model.defaults_removed"]);
    const tune = await put("qwen3-4b", { context_size: 8192 });
    expect([tune.status, tune.body.error.code]).toEqual([422, "model.tune_key_removed"]);
    expect((await put("nope", { jinja: true })).body.error.code).toBe("model.not_found");
    expect((await put("qwen3-4b", {})).body.error.code).toBe("validation.invalid");
    const bad = await put("qwen3-4b", { context_length: "long" });
    expect([bad.status, bad.body.error.code, bad.body.error.details.diagnostics[0].path]).toEqual([422, "config.invalid", ["model", "qwen3-4b", "context_length"]]);
    // Changing a used model's type breaks the slot that runs it: the pipeline refuses with the slot's diagnostic.
    const broke = await put("qwen3-embedding-0.6b", { type: "llm" });
    expect(broke.body.error.code).toBe("config.invalid");
    expect(modelsToml()).toBe(before);
  });
});

describe("POST /api/models/validate", () => {
  it("returns diagnostics and writes nothing", async () => {
    const before = modelsToml();
    const ok = await s.call("POST", "/api/models/validate", { body: { id: "fresh", hf_repo: "Org/Repo-GGUF", hf_filename: "x.gguf", capabilities: ["chat"] } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ valid: true, id: "fresh", exists: false, diagnostics: [] });
    const bad = await s.call("POST", "/api/models/validate", { body: { path: "models/Qwen3-4B-Q4_K_M.gguf", defaults: { ctx_size: 1 }, mtp: "yes" } });
    expect(bad.body.valid).toBe(false);
    expect(bad.body.diagnostics.map((d: any) => d.code).sort()).toEqual(["config.invalid_type", "model.defaults_removed"]);
    expect(bad.body.file).toMatchObject({ gguf_error: { reason: "truncated" } });
    const existing = await s.call("POST", "/api/models/validate", { body: { id: "qwen3-4b", path: "models/Qwen3-4B-Q4_K_M.gguf", type: "embedding" } });
    expect(existing.body).toMatchObject({ valid: false, exists: true });
    expect(modelsToml()).toBe(before);
  });
});

describe("DELETE /api/models/{model_id}", () => {
  it("refuses a model in use with 409 model.in_use naming the slots and stacks", async () => {
    const r = await s.call("DELETE", "/api/models/qwen3-30b-a3b");
    expect(r.status).toBe(409);
    expect(r.body.error).toMatchObject({ code: "model.in_use", details: { slots: ["chat"], stacks: [] } });
    expect(r.body.error.message).toContain("slot chat");
    expect((await s.call("DELETE", "/api/models/glm-4.5-air")).body.error.details).toMatchObject({ slots: [], stacks: ["forge"] });
    expect((await s.call("DELETE", "/api/models/gemma-3-12b-it")).body.error.message).toContain("capability selection chat.vision");
    expect((await s.call("DELETE", "/api/models/nope")).status).toBe(404);
  });

  it("removes an unused model's table and keeps the rest of the file", async () => {
    await s.call("POST", "/api/models", { body: { id: "spare", hf_repo: "a/b", hf_filename: "c.gguf" } });
    const r = await s.call("DELETE", "/api/models/spare");
    expect([r.status, r.body.deleted, r.body.committed]).toEqual([200, "spare", true]);
    expect(modelsToml()).not.toContain("spare");
    expect(modelsToml()).toContain("# ── Retrieval ─");
  });
});

describe("POST /api/models/{model_id}/default", () => {
  it("tags the model default and clears the tag from the other models of its type; default: false clears it", async () => {
    const r = await s.call("POST", "/api/models/qwen3-4b/default", { body: {} });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: "qwen3-4b", type: "llm", default: true, cleared: ["qwen3-30b-a3b"], committed: true });
    const defaults = (await s.call("GET", "/api/models?fields=default&type=llm")).body.models.filter((m: any) => m.default).map((m: any) => m.id);
    expect(defaults).toEqual(["qwen3-4b"]);
    expect(modelsToml()).toContain('tags = ["moe"]');
    expect(modelsToml()).toContain("# The daily driver: MoE, 3B active, fast enough on the iGPU for agent loops.");
    const embed = await s.call("POST", "/api/models/qwen3-embedding-0.6b/default");
    expect(embed.body.cleared).toEqual([]);
    const off = await s.call("POST", "/api/models/qwen3-4b/default", { body: { default: false } });
    expect(off.body).toMatchObject({ default: false, committed: true });
    expect((await s.call("GET", "/api/models/qwen3-4b")).body.tags).toEqual([]);
    expect((await s.call("POST", "/api/models/nope/default")).body.error.code).toBe("model.not_found");
  });
});
