import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { MODEL_CATALOGUE } from "../../schema/data/model-catalogue.js";
import { ModelFacts, ResourceId } from "../../schema/index.js";
import { ROUTES } from "../../server/routes/index.js";
import { modelExtraRoutes } from "../../server/routes/models-extra.js";
import { ggufBytes, kv, modelKvs, type Kv } from "./gguf-writer.js";
import { setModelsTable, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/**
 * The extra model routes (server/routes/models-extra.ts) for real, over a
 * served copy of fixtures/box: small GGUF files under a temp folder that the
 * copy's hal0.toml names as its one `[models] roots` entry.
 */

// Until server/routes/index.ts lists them, the routes are served on top of the table (never twice).
const routes = [...ROUTES, ...modelExtraRoutes.filter((r) => !ROUTES.includes(r))];

let s: TestServer & { dir: string };
let root: string;
const outside = mkdtempSync(join(tmpdir(), "hal0-extra-outside-"));
afterAll(() => rmSync(outside, { recursive: true, force: true }));

beforeEach(async () => {
  s = await startTestServer({ extra: { routes } });
  root = join(s.dir, "store");
  mkdirSync(root);
  setModelsTable(s.config, `roots = [${JSON.stringify(root)}]`);
});
afterEach(async () => s.close());

const modelsToml = () => readFileSync(join(s.config, "models.toml"), "utf8");
const sha = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");

/** modelKvs with some keys replaced (same key) or dropped (value undefined). */
function kvsWith(opts: Parameters<typeof modelKvs>[0], replace: Record<string, Kv | undefined> = {}): Kv[] {
  return modelKvs(opts).flatMap((k) => (k.key in replace ? (replace[k.key] ? [replace[k.key]!] : []) : [k]));
}
/** A small GGUF model file of about `floats * 4` bytes of tensor data. */
function gguf(path: string, opts: Parameters<typeof modelKvs>[0] = {}, floats = 1024, replace: Record<string, Kv | undefined> = {}): Buffer {
  const bytes = ggufBytes({ kvs: kvsWith(opts, replace), tensors: [{ name: "w", dims: [floats] }] });
  writeFileSync(path, bytes);
  return bytes;
}

describe("GET /api/models/catalogue (model_catalogue)", () => {
  it("ships about a dozen valid, distinct rows", () => {
    expect(MODEL_CATALOGUE.length).toBeGreaterThanOrEqual(10);
    expect(new Set(MODEL_CATALOGUE.map((c) => c.id)).size).toBe(MODEL_CATALOGUE.length);
    expect(new Set(MODEL_CATALOGUE.map((c) => `${c.hf_repo}/${c.hf_filename}`)).size).toBe(MODEL_CATALOGUE.length);
    for (const c of MODEL_CATALOGUE) {
      expect(ResourceId.safeParse(c.id).success, c.id).toBe(true);
      // A row is a models.toml entry's Hub facts: it would register as is.
      const r = ModelFacts.safeParse({ name: c.name, hf_repo: c.hf_repo, hf_filename: c.hf_filename, type: c.type, quant: c.quant, size_bytes: c.size_bytes, context_length: c.context_length, capabilities: c.capabilities });
      expect(r.success, `${c.id}: ${JSON.stringify(r.error?.issues)}`).toBe(true);
      expect(c.hf_filename.toLowerCase().endsWith(".gguf")).toBe(true);
      expect(c.description.length).toBeGreaterThan(10);
      expect(c.description).not.toContain("\n");
    }
    expect(new Set(MODEL_CATALOGUE.map((c) => c.type))).toEqual(new Set(["llm", "embedding", "reranking"]));
  });

  it("marks what models.toml registers by the same hf_repo + hf_filename, installed only when its file is here", async () => {
    const r = await s.call("GET", "/api/models/catalogue");
    expect(r.status).toBe(200);
    expect(r.body.count).toBe(MODEL_CATALOGUE.length);
    const byId = Object.fromEntries(r.body.models.map((m: any) => [m.id, m]));
    expect(byId["qwen3-30b-a3b"]).toMatchObject({ hf_repo: "Qwen/Qwen3-30B-A3B-GGUF", installed: true, registered_as: "qwen3-30b-a3b", type: "llm", quant: "Q4_K_M" });
    expect(byId["bge-reranker-v2-m3"]).toMatchObject({ installed: true, registered_as: "bge-reranker-v2-m3" });
    expect(byId["gpt-oss-20b"]).toMatchObject({ installed: false, registered_as: null });
    expect(byId["qwen3-8b"].description).toEqual(expect.any(String));

    // Registered, but its file is gone: not installed, still named.
    unlinkSync(join(s.config, "models/Qwen3-4B-Q4_K_M.gguf"));
    const after = await s.call("GET", "/api/models/catalogue");
    expect(after.body.models.find((m: any) => m.id === "qwen3-4b")).toMatchObject({ installed: false, registered_as: "qwen3-4b" });

    const rerank = await s.call("GET", "/api/models/catalogue?type=reranking&installed=true");
    expect(rerank.body.models.map((m: any) => m.id)).toEqual(["bge-reranker-v2-m3"]);
    expect((await s.call("GET", "/api/models/catalogue?type=nope")).status).toBe(422);
  });

  it("is an MCP tool with its list key", async () => {
    const c = await adminClient(s.url, "hermes__coder");
    try {
      const res = await callTool(c, "model_catalogue", {});
      expect(res.isError, JSON.stringify(res.body)).toBe(false);
      expect(res.body.models).toHaveLength(MODEL_CATALOGUE.length);
    } finally {
      await c.close();
    }
  });
});

describe("GET /api/models/health (model_health_check)", () => {
  /** Registers `good`, `gone`, `short`, `tampered` and `broken` under the root, each with the problem its name says. */
  async function setup(): Promise<{ tamperedSha: string }> {
    const good = gguf(join(root, "good.gguf"), { name: "Good" });
    const tampered = gguf(join(root, "tampered.gguf"), { name: "Tampered" });
    gguf(join(root, "gone.gguf"), { name: "Gone" });
    gguf(join(root, "short.gguf"), { name: "Short" });
    writeFileSync(join(root, "broken.gguf"), "not a gguf at all, just text\n");
    for (const id of ["good", "tampered", "gone", "short"]) {
      const r = await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, `${id}.gguf`), id } });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
    }
    expect((await s.call("POST", "/api/models", { body: { id: "broken", path: join(root, "broken.gguf"), type: "llm" } })).status).toBe(201);
    expect((await s.call("PUT", "/api/models/good", { body: { sha256: sha(good) } })).status).toBe(200);
    expect((await s.call("PUT", "/api/models/tampered", { body: { sha256: sha(tampered) } })).status).toBe(200);
    expect((await s.call("PUT", "/api/models/short", { body: { size_bytes: 12345 } })).status).toBe(200);
    unlinkSync(join(root, "gone.gguf"));
    // Same size, one byte different: only a hash sees it.
    const flipped = Buffer.from(tampered);
    flipped[flipped.length - 1] = 1;
    writeFileSync(join(root, "tampered.gguf"), flipped);
    return { tamperedSha: sha(tampered) };
  }

  it("reports missing files, unreadable headers and size mismatches; sha256 only with verify=true", async () => {
    const { tamperedSha } = await setup();
    const r = await s.call("GET", "/api/models/health");
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const byId = Object.fromEntries(r.body.models.map((m: any) => [m.id, m]));
    const codes = (id: string) => byId[id].problems.map((p: any) => p.code);
    expect(byId.good).toMatchObject({ ok: true, problems: [], path_abs: join(root, "good.gguf"), checked: { header: true, size: true, sha256: false } });
    expect(byId.tampered).toMatchObject({ ok: true, checked: { sha256: false } });
    expect(byId.gone).toMatchObject({ ok: false, size_on_disk: null });
    expect(codes("gone")).toEqual(["model.path_missing"]);
    expect(codes("short")).toEqual(["model.size_mismatch"]);
    expect(byId.short.problems[0]).toMatchObject({ expected: 12345, actual: readFileSync(join(root, "short.gguf")).length });
    expect(codes("broken")).toEqual(["model.unsupported_format"]);
    // The fixture: a model without a local path is listed apart; a non-GGUF file is only checked for presence.
    expect(r.body.not_local).toEqual(["glm-4.5-air"]);
    expect(byId["kokoro-82m"]).toMatchObject({ ok: true, checked: { header: false, size: false, sha256: false } });
    // Its weights and its drafter are 8-byte placeholders: both reported.
    expect(byId["qwen2.5-coder-32b"].problems.map((p: any) => [p.code, p.file])).toEqual([["model.unsupported_format", "path"], ["model.unsupported_format", "draft"]]);
    expect(r.body.ok_count + r.body.problem_count).toBe(r.body.models.length);
    expect(r.body.ok_count).toBe(r.body.models.filter((m: any) => m.ok).length);
    expect(r.body.verify).toBe(false);

    const v = await s.call("GET", "/api/models/health?verify=true");
    const vById = Object.fromEntries(v.body.models.map((m: any) => [m.id, m]));
    expect(vById.good).toMatchObject({ ok: true, checked: { sha256: true } });
    expect(vById.tampered.problems).toEqual([expect.objectContaining({ code: "model.checksum_mismatch", file: "path", expected: tamperedSha, actual: sha(readFileSync(join(root, "tampered.gguf"))) })]);
    expect(v.body.problem_count).toBe(r.body.problem_count + 1);
  });

  it("checks one model with model_id; an unknown one is 404", async () => {
    await setup();
    const one = await s.call("GET", "/api/models/health?model_id=tampered&verify=1");
    expect(one.body.models.map((m: any) => [m.id, m.ok])).toEqual([["tampered", false]]);
    expect(one.body).toMatchObject({ ok_count: 0, problem_count: 1, not_local: [] });
    const nope = await s.call("GET", "/api/models/health?model_id=nope");
    expect(nope.status).toBe(404);
    expect(nope.body.error.code).toBe("model.not_found");
  });
});

describe("GET/PUT /api/config/models (model_config_read, model_config_write)", () => {
  it("reads models.toml's text as on disk with its sha256", async () => {
    const r = await s.call("GET", "/api/config/models");
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ file: "models.toml", exists: true, text: modelsToml(), sha256: sha(modelsToml()) });
    expect(r.body.revision).toMatch(/^rev_/);
  });

  it("a models.toml hal0 cannot read is no absent file: its read is 422 config.invalid naming why, not exists: false, and a write refused", async () => {
    await s.hal0.box.model();
    writeFileSync(join(s.config, "models.toml"), Buffer.concat([Buffer.from(modelsToml()), Buffer.from([0xff, 0x0a])])); // not UTF-8: config.read_error
    const r = await s.call("GET", "/api/config/models");
    expect([r.status, r.body.error?.code], JSON.stringify(r.body)).toEqual([422, "config.invalid"]);
    expect(r.body.error.details.diagnostics).toContainEqual(expect.objectContaining({ code: "config.read_error", file: "models.toml" }));
    const w = await s.call("PUT", "/api/config/models", { body: { text: "" } });
    expect([w.status, w.body.error?.code]).toEqual([422, "config.invalid"]);
    expect(readFileSync(join(s.config, "models.toml")).at(-2)).toBe(0xff);
  });

  it("replaces the whole text through the pipeline, comments and all, when base_sha256 is current", async () => {
    const read = (await s.call("GET", "/api/config/models")).body;
    const text = `${read.text}\n# Added by hand through the API.\n[model."tiny-hub"]\nname = "Tiny from the Hub"   # a comment survives\nhf_repo = "acme/tiny-GGUF"\nhf_filename = "tiny.gguf"\n`;
    const w = await s.call("PUT", "/api/config/models", { body: { text, base_sha256: read.sha256 } });
    expect(w.status, JSON.stringify(w.body)).toBe(200);
    expect(w.body).toMatchObject({ file: "models.toml", sha256: sha(text), committed: true, files: ["models.toml"], dry_run: false });
    expect(modelsToml()).toBe(text);
    expect((await s.call("GET", "/api/models/tiny-hub")).body).toMatchObject({ id: "tiny-hub", hf_repo: "acme/tiny-GGUF", installed: false });
    expect((await s.call("GET", "/api/config/models")).body.sha256).toBe(sha(text));
    // No base: written as well.
    const again = await s.call("PUT", "/api/config/models", { body: { text: read.text } });
    expect(again.status).toBe(200);
    expect(modelsToml()).toBe(read.text);
  });

  it("dry_run plans without writing", async () => {
    const before = modelsToml();
    const r = await s.call("PUT", "/api/config/models?dry_run=true", { body: { text: `${before}\n[model.extra]\npath = "models/Qwen3-4B-Q4_K_M.gguf"\n` } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ committed: false, dry_run: true, sha256: sha(before) });
    expect(modelsToml()).toBe(before);
  });

  it("refuses a stale base with config.stale and leaves the file as it is", async () => {
    const read = (await s.call("GET", "/api/config/models")).body;
    // Someone edits the file in between.
    const moved = `${read.text}\n# edited by hand\n`;
    writeFileSync(join(s.config, "models.toml"), moved);
    const r = await s.call("PUT", "/api/config/models", { body: { text: "# mine\n", base_sha256: read.sha256 } });
    expect(r.status).toBe(409);
    expect(r.body.error).toMatchObject({ code: "config.stale", details: { files: ["models.toml"], base_sha256: read.sha256, current_sha256: sha(moved) } });
    expect(modelsToml()).toBe(moved);
  });

  it("refuses invalid TOML and an invalid tree with config.invalid and its diagnostics; nothing is written", async () => {
    const before = modelsToml();
    const bad = await s.call("PUT", "/api/config/models", { body: { text: `${before}\n[model.broken\nname = "x"\n`, base_sha256: sha(before) } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe("config.invalid");
    expect(bad.body.error.details.diagnostics.map((d: any) => d.code)).toContain("config.parse_error");
    expect(modelsToml()).toBe(before);

    // Valid TOML, but the slots name models it drops.
    const empty = await s.call("PUT", "/api/config/models", { body: { text: "# nothing\n" } });
    expect(empty.status).toBe(422);
    expect(empty.body.error.code).toBe("config.invalid");
    expect(empty.body.error.details.diagnostics.map((d: any) => d.code)).toContain("slot.unknown_model");
    expect(modelsToml()).toBe(before);

    const shape = await s.call("PUT", "/api/config/models", { body: { text: 42 } });
    expect(shape.status).toBe(422);
    expect(shape.body.error.code).toBe("validation.invalid");
    const badBase = await s.call("PUT", "/api/config/models", { body: { text: before, base_sha256: "abc" } });
    expect(badBase.body.error.code).toBe("validation.invalid");
  });
});

describe("POST /api/models/add-from-path (model_add)", () => {
  it("registers a file under a root from its header, the id made from the file name", async () => {
    const bytes = gguf(join(root, "Tiny-Qwen-Q4_K_M.gguf"), { name: "Tiny Qwen", ctx: 32768, template: "{% if tools %}{{ tools }}{% endif %}<think>" });
    const r = await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, "Tiny-Qwen-Q4_K_M.gguf") } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.model).toEqual({
      id: "tiny-qwen-q4_k_m", name: "Tiny Qwen", path: join(root, "Tiny-Qwen-Q4_K_M.gguf"), type: "llm", capabilities: ["chat", "tools", "reasoning"],
      context_length: 32768, architecture: "qwen3", size_bytes: bytes.length, quant: "Q4_K_M", jinja: true,
    });
    expect(r.body).toMatchObject({ committed: true, files: ["models.toml"], path_abs: join(root, "Tiny-Qwen-Q4_K_M.gguf"), gguf: { architecture: "qwen3", vocab_size: 300 } });
    expect(modelsToml()).toContain("[model.tiny-qwen-q4_k_m]");
    expect((await s.call("GET", "/api/models/tiny-qwen-q4_k_m")).body).toMatchObject({ installed: true, size_bytes: bytes.length });

    // The same file again, under another id: it is already registered.
    const rel = await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, "Tiny-Qwen-Q4_K_M.gguf"), id: "again" } });
    expect(rel.status).toBe(409);
    expect(rel.body.error).toMatchObject({ code: "model.already_exists", details: { model_id: "tiny-qwen-q4_k_m" } });
  });

  it("takes an id, refuses one already registered, and records a path under the config folder relatively", async () => {
    writeFileSync(join(s.config, "hal0.toml"), readFileSync(join(s.config, "hal0.toml"), "utf8").replace(/roots = \[.*\]/, `roots = ["mine", ${JSON.stringify(root)}]`));
    mkdirSync(join(s.config, "mine"));
    gguf(join(s.config, "mine", "small.gguf"), { name: "Small" });
    const taken = await s.call("POST", "/api/models/add-from-path", { body: { path: "mine/small.gguf", id: "qwen3-4b" } });
    expect(taken.status).toBe(409);
    expect(taken.body.error.code).toBe("model.already_exists");
    const r = await s.call("POST", "/api/models/add-from-path", { body: { path: "mine/small.gguf", id: "small-one" } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.model).toMatchObject({ id: "small-one", path: "mine/small.gguf" });
    expect(modelsToml()).toContain('path = "mine/small.gguf"');
  });

  it("refuses a file outside every root, by symlink or .., without telling whether it exists", async () => {
    const before = modelsToml();
    gguf(join(outside, "elsewhere.gguf"));
    symlinkSync(join(outside, "elsewhere.gguf"), join(root, "link.gguf"));
    for (const path of [join(outside, "elsewhere.gguf"), join(root, "link.gguf"), `${root}/../../${outside.split("/").pop()}/elsewhere.gguf`, join(outside, "absent.gguf"), "models/Qwen3-4B-Q4_K_M.gguf"]) {
      const r = await s.call("POST", "/api/models/add-from-path", { body: { path } });
      expect(r.status, path).toBe(403);
      expect(r.body.error.code).toBe("model.path_outside_roots");
      expect(r.body.error.details.roots).toEqual([root]);
    }
    expect((await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, "link.gguf") } })).body.error.details.resolved).toBe(join(outside, "elsewhere.gguf"));
    // Inside a root but absent: 404.
    const missing = await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, "absent.gguf") } });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("model.path_missing");
    expect(modelsToml()).toBe(before);
  });

  it("follows a symlink that stays inside a root, recording the real file", async () => {
    mkdirSync(join(root, "real"));
    gguf(join(root, "real", "m.gguf"));
    symlinkSync(join(root, "real", "m.gguf"), join(root, "alias.gguf"));
    const r = await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, "alias.gguf") } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.model).toMatchObject({ id: "alias", path: join(root, "real", "m.gguf") });
  });

  it("refuses what is not a model file: not a GGUF, a projector, a later shard", async () => {
    const before = modelsToml();
    writeFileSync(join(root, "junk.gguf"), "plain text");
    const junk = await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, "junk.gguf") } });
    expect(junk.status).toBe(422);
    expect(junk.body.error.code).toBe("model.unsupported_format");
    gguf(join(root, "mmproj.gguf"), {}, 64, { "general.type": kv.str("general.type", "mmproj") });
    const proj = await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, "mmproj.gguf") } });
    expect(proj.status).toBe(422);
    expect(proj.body.error).toMatchObject({ code: "validation.invalid", details: { fields: [{ loc: ["body", "path"] }] } });
    gguf(join(root, "big-00002-of-00002.gguf"), { extra: [kv.u32("split.no", 1), kv.u32("split.count", 2)] });
    const shard = await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, "big-00002-of-00002.gguf") } });
    expect(shard.status).toBe(422);
    expect(shard.body.error.message).toContain("shard 2 of 2");
    expect(modelsToml()).toBe(before);
  });
});

describe("POST /api/models/inspect-draft (model_inspect_draft)", () => {
  it("lists the smaller same-vocabulary models beside a model with what they share, and why the others are not candidates", async () => {
    gguf(join(root, "main.gguf"), { name: "Main" }, 8192);
    gguf(join(root, "draft.gguf"), { name: "Draft" }, 256);
    gguf(join(root, "draft-llama.gguf"), { arch: "llama", name: "Llama draft" }, 512);
    gguf(join(root, "bigger.gguf"), { name: "Bigger" }, 16384);
    gguf(join(root, "other-tok.gguf"), { name: "Other tokenizer" }, 256, { "tokenizer.ggml.model": kv.str("tokenizer.ggml.model", "llama") });
    gguf(join(root, "other-vocab.gguf"), { name: "Other vocab" }, 256, { "tokenizer.ggml.tokens": kv.arr("tokenizer.ggml.tokens", "string", ["a", "b"]) });
    gguf(join(root, "proj.gguf"), {}, 64, { "general.type": kv.str("general.type", "mmproj") });
    writeFileSync(join(root, "junk.gguf"), "text");
    expect((await s.call("POST", "/api/models/add-from-path", { body: { path: join(root, "main.gguf") } })).status).toBe(201);

    const r = await s.call("POST", "/api/models/inspect-draft", { body: { path: join(root, "main.gguf") } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ path: join(root, "main.gguf"), registered_as: "main", current_draft: null, gguf: { architecture: "qwen3", vocab_size: 300 } });
    expect(r.body.candidates.map((c: any) => [c.path, c.shares, c.usable])).toEqual([
      [join(root, "draft-llama.gguf"), { architecture: false, tokenizer: true, vocab_size: true }, true],
      [join(root, "draft.gguf"), { architecture: true, tokenizer: true, vocab_size: true }, true],
    ]);
    expect(r.body.candidates[1]).toMatchObject({ name: "Draft", quant: "Q4_K_M", gguf: { architecture: "qwen3", tokenizer: "gpt2" } });
    const why = Object.fromEntries(r.body.others.map((o: any) => [o.path.split("/").pop(), o.reason]));
    expect(why).toMatchObject({
      "bigger.gguf": "not smaller than the main model",
      "other-tok.gguf": expect.stringContaining("another tokenizer"),
      "other-vocab.gguf": expect.stringContaining("another vocabulary size (2 vs 300)"),
      "proj.gguf": "a mmproj file, not a model",
      "junk.gguf": expect.stringContaining("unreadable header"),
    });
    expect(Object.keys(why)).not.toContain("main.gguf");
  });

  it("names a registered model's current drafter; a missing file is 404", async () => {
    const r = await s.call("POST", "/api/models/inspect-draft", { body: { path: "models/qwen2.5-coder-32b-instruct-q4_k_m.gguf" } });
    // The fixture's files are 8-byte placeholders: no header to compare.
    expect(r.status).toBe(422);
    expect(r.body.error.code).toBe("model.unsupported_format");
    gguf(join(root, "main.gguf"), {}, 4096);
    gguf(join(root, "small.gguf"), {}, 128);
    expect((await s.call("POST", "/api/models", { body: { id: "paired", path: join(root, "main.gguf"), draft: join(root, "small.gguf") } })).status).toBe(201);
    const paired = await s.call("POST", "/api/models/inspect-draft", { body: { path: join(root, "main.gguf") } });
    expect(paired.body).toMatchObject({ registered_as: "paired", current_draft: join(root, "small.gguf"), candidates: [{ path: join(root, "small.gguf") }] });
    const missing = await s.call("POST", "/api/models/inspect-draft", { body: { path: join(root, "absent.gguf") } });
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe("model.path_missing");
  });
});

describe("which files a model read opens, by caller", () => {
  it("an agent or an anonymous caller inspects only files under [models] roots or named by a model entry; outside, 403 whether the file is there or not; an operator any file", async () => {
    gguf(join(root, "main.gguf"), { name: "Main" }, 1024);
    gguf(join(outside, "elsewhere.gguf"), { name: "Elsewhere" }, 1024);
    for (const route of ["/api/models/inspect", "/api/models/inspect-draft"]) {
      for (const as of ["anonymous", "agent:hermes__ops"]) {
        const inside = await s.call("POST", route, { body: { path: join(root, "main.gguf") }, as });
        expect(inside.status, `${route} ${as} ${JSON.stringify(inside.body)}`).toBe(200);
        for (const path of ["/etc/shadow", "/etc/hostname", join(outside, "elsewhere.gguf"), join(outside, "absent.gguf"), `${root}/../escape.gguf`]) {
          const r = await s.call("POST", route, { body: { path }, as });
          expect(`${route} ${as} ${path}: ${r.status} ${r.body.error?.code}`).toBe(`${route} ${as} ${path}: 403 model.path_outside_roots`);
          expect(JSON.stringify(r.body)).not.toMatch(/bytes|not_gguf|path_missing/);
        }
        // A file a model entry names is the box's own: readable wherever it is (here an 8-byte placeholder, so no header).
        const named = await s.call("POST", route, { body: { path: "models/Qwen3-4B-Q4_K_M.gguf" }, as });
        expect(named.body.error?.code, `${route} ${as}`).toBe("model.unsupported_format");
      }
      const operator = await s.call("POST", route, { body: { path: join(outside, "elsewhere.gguf") } });
      expect(operator.status, `${route} operator`).toBe(200);
    }
  });
});

describe("model_validate and model_register read a header only where model_inspect may", () => {
  it("an agent over MCP learns nothing of a file outside [models] roots (not its header, not whether it is there); inside the roots and for an operator the header is read", async () => {
    gguf(join(root, "main.gguf"), { name: "Main", ctx: 4096 }, 1024);
    gguf(join(outside, "elsewhere.gguf"), { name: "Elsewhere", ctx: 123456 }, 1024);
    writeFileSync(join(outside, "notes.txt"), "not a model\n");
    const client = await adminClient(s.url, "hermes__ops");
    try {
      const replies: string[] = [];
      for (const path of [join(outside, "elsewhere.gguf"), join(outside, "notes.txt"), join(outside, "absent.gguf"), "/etc/hostname"]) {
        const r = await callTool(client, "model_validate", { path, type: "llm" });
        expect(r.isError, JSON.stringify(r.body)).toBe(false);
        expect(r.body.file, path).toEqual({ path_abs: path, gguf_error: expect.objectContaining({ code: "model.path_outside_roots", reason: "outside_roots" }) });
        replies.push(JSON.stringify({ ...r.body.file, path_abs: "" }));
      }
      // Four files (a GGUF, a text file, nothing, a system file) answer alike.
      expect(new Set(replies.map((t) => t.replaceAll(/"message":"[^"]*"/g, ""))).size).toBe(1);
      const inside = await callTool(client, "model_validate", { path: join(root, "main.gguf"), type: "llm" });
      expect(inside.body.file.gguf).toMatchObject({ context_length: 4096 });
      // Registering it would have the header's facts filled in (and shown on the request's card): not outside the roots.
      const reg = await callTool(client, "model_register", { id: "peek", path: join(outside, "elsewhere.gguf"), type: "llm" });
      expect(reg.body.status, JSON.stringify(reg.body)).toBe("pending_approval");
      expect(JSON.stringify(reg.body)).not.toMatch(/123456|Elsewhere/);
      const regInside = await callTool(client, "model_register", { id: "peek-inside", path: join(root, "main.gguf") });
      expect(regInside.body.status, JSON.stringify(regInside.body)).toBe("pending_approval");
      expect(JSON.stringify(regInside.body)).toContain("4096");
    } finally {
      await client.close();
    }
    const operator = await s.call("POST", "/api/models/validate", { body: { path: join(outside, "elsewhere.gguf") } });
    expect(operator.body.file.gguf).toMatchObject({ context_length: 123456 });
  });
});
