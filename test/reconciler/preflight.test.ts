import { chmodSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { compile, loadTree, type Model } from "../../compiler/index.js";
import { findRunner, HAL0_BIN } from "../../reconciler/drivers/runner.js";
import { preflight, PreflightCache, preflightHeaderReads, type Finding } from "../../reconciler/preflight.js";
import { modelKvs, writeGguf } from "../server/gguf-writer.js";

/** The preflight (reconciler/preflight.ts): the host checks after a pure compile — runners found, model files there. */
const BOX = join(import.meta.dirname, "../../fixtures/box");
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function folder(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "hal0-preflight-"));
  dirs.push(dir);
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(join(dir, rel, ".."), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  return dir;
}

/** A one-slot tree: `runner` for profile fake, model tiny at `path` (plus `modelExtra` keys), the slot's extra lines. */
function tree(o: { runner?: string; path?: string; modelExtra?: string; slotExtra?: string; hal0?: string; files?: Record<string, string> } = {}): string {
  return folder({
    "hal0.toml": o.hal0 ?? "",
    "profiles.toml": `[profile.fake]\nimage = "hal0-runner:local"\nrunner = ${o.runner ?? '["node"]'}\ndevice_class = "cpu"\n`,
    "models.toml": `[model.tiny]\npath = ${JSON.stringify(o.path ?? "tiny.gguf")}\n${o.modelExtra ?? ""}`,
    "slots/chat.toml": `profile = "fake"\nmodel = "tiny"\nport = 8081\n${o.slotExtra ?? ""}`,
    "tiny.gguf": "GGUF",
    ...o.files,
  });
}

async function compiled(root: string): Promise<{ model: Model; texts: ReadonlyMap<string, string> }> {
  const loaded = await loadTree(root);
  const { model, diagnostics } = compile(loaded.tree, loaded.diagnostics);
  if (!model) throw new Error(JSON.stringify(diagnostics));
  return { model, texts: loaded.tree.files };
}

const brief = (f: Finding) => `${f.slot} ${f.subject} ${f.code} ${f.file}:${f.line}:${f.column}`;

describe("preflight", () => {
  it("fixtures/box: every enabled slot's runner and model files are there (no findings)", async () => {
    const { model, texts } = await compiled(BOX);
    expect(await preflight(model, { texts })).toEqual([]);
  });

  it("a runner on no PATH nor bin/ and a model file that does not exist: one finding each, at the key that set it", async () => {
    const { model, texts } = await compiled(tree({ runner: '["no-such-runner-xyz"]', path: "models/nope.gguf" }));
    const found = await preflight(model, { texts });
    expect(found.map(brief)).toEqual([
      "chat runner slot.runner_missing profiles.toml:3:10",
      "chat model slot.model_missing models.toml:2:8",
    ]);
    expect(found[0]).toMatchObject({ problem: "runner_not_found", severity: "warning", summary: "the runner `no-such-runner-xyz` of slot chat is not on PATH nor in hal0's bin/", target: "no-such-runner-xyz", path: ["profile", "fake", "runner"] });
    expect(found[0]!.detail).toContain(HAL0_BIN!);
    expect(found[0]!.related).toEqual([{ file: "slots/chat.toml", line: 1, column: 11, message: "slot chat uses profile `fake`" }]);
    expect(found[1]).toMatchObject({ summary: `the model file of slot chat does not exist: ${join(model.root, "models/nope.gguf")}`, path: ["model", "tiny", "path"] });
    expect(found[1]!.related).toEqual([{ file: "slots/chat.toml", line: 2, column: 9, message: "slot chat serves model `tiny`" }]);
    // Without the texts nothing is placed.
    expect((await preflight(model)).map(brief)).toEqual(["chat runner slot.runner_missing profiles.toml:null:null", "chat model slot.model_missing models.toml:null:null"]);
  });

  it("a seed profile's runner is placed at the slot's profile key", async () => {
    const { model, texts } = await compiled(folder({ "slots/chat.toml": `profile = "rocm"\nport = 8081\ntype = "image"\n` }));
    const found = await preflight(model, { texts, env: { PATH: "" }, bin: null });
    expect(found.map(brief)).toEqual(["chat runner slot.runner_missing slots/chat.toml:1:11"]);
    expect(found[0]!.target).toBe("llama-server");
  });

  it("looks a bare word up on the runner's PATH (the slot's env over hal0's), then in hal0's bin/", async () => {
    const bin = folder({ "my-runner": "#!/bin/sh\n" });
    chmodSync(join(bin, "my-runner"), 0o755);
    const { model } = await compiled(tree({ runner: '["my-runner"]' }));
    expect(await preflight(model, { env: { PATH: "/nonexistent" }, bin: null })).toHaveLength(1);
    expect(await preflight(model, { env: { PATH: `/nonexistent${delimiter}${bin}` }, bin: null })).toEqual([]);
    expect(await preflight(model, { env: { PATH: "/nonexistent" }, bin })).toEqual([]);
    const slotPath = await compiled(tree({ runner: '["my-runner"]', slotExtra: `[server]\nenv = { PATH = ${JSON.stringify(bin)} }\n` }));
    expect(await preflight(slotPath.model, { env: { PATH: "/nonexistent" }, bin: null })).toEqual([]);
    expect(await findRunner("my-runner", "/", { PATH: "/nonexistent" }, bin)).toEqual({ found: true, word: "my-runner", path: join(bin, "my-runner"), via: "bin" });
    expect(await findRunner("my-runner", "/", { PATH: bin }, bin)).toMatchObject({ found: true, via: "path" });
    // hal0's own runner word, as fixtures/box names it.
    expect(await findRunner("hal0-fake-llama-server", "/", {})).toMatchObject({ found: true, path: join(HAL0_BIN!, "hal0-fake-llama-server"), via: "bin" });
  });

  it("a runner path with / is taken against the config folder; a file without x is not executable", async () => {
    const root = tree({ runner: '["./bin/run"]', files: { "bin/run": "#!/bin/sh\n", "bin/plain": "#!/bin/sh\n" } });
    chmodSync(join(root, "bin/run"), 0o755);
    chmodSync(join(root, "bin/plain"), 0o644);
    expect(await preflight((await compiled(root)).model)).toEqual([]);
    writeFileSync(join(root, "profiles.toml"), `[profile.fake]\nrunner = ["bin/plain"]\ndevice_class = "cpu"\n`);
    const plain = await preflight((await compiled(root)).model);
    expect(plain.map((f) => `${f.code} ${f.problem} ${f.summary}`)).toEqual([`slot.runner_missing runner_not_executable the runner \`bin/plain\` of slot chat is not executable: ${join(root, "bin/plain")}`]);
    writeFileSync(join(root, "profiles.toml"), `[profile.fake]\nrunner = ["bin/gone"]\ndevice_class = "cpu"\n`);
    const gone = await preflight((await compiled(root)).model);
    expect(gone.map((f) => `${f.code} ${f.problem} ${f.summary}`)).toEqual([`slot.runner_missing runner_not_found the runner \`bin/gone\` of slot chat does not exist: ${join(root, "bin/gone")}`]);
  });

  it("checks the drafter and projector only when the argv uses them; a folder is not a model file; hf_repo models and disabled slots are skipped", async () => {
    const extra = `draft = "draft.gguf"\nmmproj = "mmproj.gguf"\ntype = "llm"\n`;
    const off = await compiled(tree({ modelExtra: extra }));
    expect(await preflight(off.model)).toEqual([]);
    const on = await compiled(tree({ modelExtra: extra, slotExtra: `[tune]\nspeculation = "draft"\nvision = true\n` }));
    expect((await preflight(on.model, { texts: on.texts })).map(brief)).toEqual([
      "chat draft slot.model_missing models.toml:3:9",
      "chat mmproj slot.model_missing models.toml:4:10",
    ]);
    const dir = tree({ path: "models", files: { "models/x": "" } });
    expect((await preflight((await compiled(dir)).model)).map((f) => `${f.code} ${f.summary}`)).toEqual([`slot.model_unreadable the model file of slot chat is not a regular file: ${join(dir, "models")}`]);
    const hf = await compiled(folder({
      "profiles.toml": `[profile.fake]\nrunner = ["node"]\ndevice_class = "cpu"\n`,
      "models.toml": `[model.far]\nhf_repo = "x/y"\nhf_filename = "y.gguf"\n`,
      "slots/chat.toml": `profile = "fake"\nmodel = "far"\nport = 8081\n`,
    }));
    expect(await preflight(hf.model)).toEqual([]);
    const disabled = await compiled(tree({ runner: '["no-such-runner-xyz"]', path: "nope.gguf", slotExtra: "enabled = false\n" }));
    expect(await preflight(disabled.model)).toEqual([]);
  });

  it("docker runtime: the image is the runner (not checked); the model files, bind-mounted from the host, are", async () => {
    const { model } = await compiled(tree({ hal0: `[slots]\nruntime = "docker"\n`, runner: '["no-such-runner-xyz"]', path: "nope.gguf" }));
    expect((await preflight(model)).map((f) => `${f.subject} ${f.code}`)).toEqual(["model slot.model_missing"]);
  });

  it("the sweep's cache runs again only for another model or after maxAgeMs", async () => {
    const { model } = await compiled(tree({ path: "nope.gguf" }));
    let now = 0;
    const cache = new PreflightCache({ maxAgeMs: 1000, now: () => now });
    const first = await cache.findings(model);
    expect(first).toHaveLength(1);
    now = 999;
    expect(await cache.findings(model)).toBe(first);
    expect(cache.runs).toBe(1);
    const other = (await compiled(tree({ path: "nope.gguf" }))).model;
    await cache.findings(other);
    expect(cache.runs).toBe(2);
    now = 1000;
    await cache.findings(model);
    expect(cache.runs).toBe(3);
  });
});

/** A tree whose model file tiny.gguf is a real GGUF header (writeGguf): architecture `arch`, training context `ctx`. */
function ggufTree(o: { arch?: string; ctx?: number; modelExtra?: string; slotExtra?: string; files?: Record<string, string> } = {}): string {
  const root = tree({ runner: '["node"]', modelExtra: o.modelExtra, slotExtra: o.slotExtra, files: o.files });
  writeGguf(join(root, "tiny.gguf"), { kvs: modelKvs({ arch: o.arch ?? "llama", ctx: o.ctx ?? 8192 }) });
  return root;
}

const said = (f: Finding) => `${brief(f)} ${f.summary}`;

describe("preflight: the model file's GGUF header", () => {
  it("a ctx_size above the training context: slot.ctx_exceeds_training (advisory), at the slot's [tune] ctx_size", async () => {
    const root = ggufTree({ ctx: 8192, slotExtra: "[tune]\nctx_size = 40960\n" });
    const { model, texts } = await compiled(root);
    const found = await preflight(model, { texts });
    const file = join(root, "tiny.gguf");
    expect(found.map(said)).toEqual([`chat model slot.ctx_exceeds_training slots/chat.toml:5:12 slot chat asks ctx_size 40960 > the model's training context 8192 (n_ctx_train in ${file})`]);
    expect(found[0]).toMatchObject({ problem: "ctx_exceeds_training", severity: "warning", path: ["tune", "ctx_size"], target: file });
    expect(found[0]!.detail).toContain("llama.context_length = 8192");
    expect(found[0]!.related).toEqual([{ file: "models.toml", line: 2, column: 8, message: "model `tiny`'s file" }]);
  });

  it("placed at the profile's [tune] ctx_size when the profile set it, at the slot's profile key for the default", async () => {
    const profiles = `[profile.fake]\nrunner = ["node"]\ndevice_class = "cpu"\n[profile.fake.tune]\nctx_size = 16384\n`;
    const byProfile = await compiled(ggufTree({ ctx: 8192, files: { "profiles.toml": profiles } }));
    expect((await preflight(byProfile.model, { texts: byProfile.texts })).map(brief)).toEqual(["chat model slot.ctx_exceeds_training profiles.toml:5:12"]);
    // The default ctx_size (8192) above a 4096 header.
    const byDefault = await compiled(ggufTree({ ctx: 4096 }));
    const found = await preflight(byDefault.model, { texts: byDefault.texts });
    expect(found.map(brief)).toEqual(["chat model slot.ctx_exceeds_training slots/chat.toml:1:11"]);
    expect(found[0]!.summary).toContain("asks ctx_size 8192 > the model's training context 4096");
  });

  it("a ctx_size equal to or below the training context: no finding", async () => {
    for (const ctx of [8192, 4096]) {
      const { model, texts } = await compiled(ggufTree({ ctx: 8192, slotExtra: `[tune]\nctx_size = ${ctx}\n` }));
      expect(await preflight(model, { texts })).toEqual([]);
    }
  });

  it("models.toml's context_length contradicted by the header: slot.model_fact_mismatch at that key, naming both values", async () => {
    const root = ggufTree({ ctx: 40960, modelExtra: "context_length = 131072\n" });
    const { model, texts } = await compiled(root);
    const found = await preflight(model, { texts });
    expect(found.map(said)).toEqual([
      `chat model slot.model_fact_mismatch models.toml:3:18 models.toml says context_length = 131072 for model \`tiny\` (slot chat), but its GGUF header says 40960 (llama.context_length in ${join(root, "tiny.gguf")})`,
    ]);
    expect(found[0]).toMatchObject({ problem: "model_fact_mismatch", path: ["model", "tiny", "context_length"] });
    expect(found[0]!.related).toEqual([{ file: "slots/chat.toml", line: 2, column: 9, message: "slot chat serves model `tiny`" }]);
    // Agreeing, or not set: nothing.
    expect(await preflight((await compiled(ggufTree({ ctx: 40960, modelExtra: "context_length = 40960\n" }))).model)).toEqual([]);
    expect(await preflight((await compiled(ggufTree({ ctx: 40960 }))).model)).toEqual([]);
  });

  it("a models.toml architecture the header contradicts: slot.model_fact_mismatch naming both", async () => {
    const root = ggufTree({ arch: "qwen3", ctx: 40960, modelExtra: 'architecture = "llama"\n' });
    const found = await preflight((await compiled(root)).model);
    expect(found.map((f) => `${f.code} ${f.file} ${f.path.join(".")}`)).toEqual(["slot.model_fact_mismatch models.toml model.tiny.architecture"]);
    expect(found[0]!.summary).toBe(`models.toml says architecture = "llama" for model \`tiny\` (slot chat), but its GGUF header says "qwen3" (general.architecture in ${join(root, "tiny.gguf")})`);
    expect(await preflight((await compiled(ggufTree({ arch: "qwen3", ctx: 40960, modelExtra: 'architecture = "qwen3"\n' }))).model)).toEqual([]);
  });

  it("a model file that is not a GGUF (or a truncated one, as fixtures/box's) gives no finding; a GGUF is known by its magic, not its name", async () => {
    const slotExtra = "[tune]\nctx_size = 40960\n";
    const text = await compiled(tree({ slotExtra, files: { "tiny.gguf": "not a gguf at all, just text" } }));
    expect(await preflight(text.model)).toEqual([]);
    const truncated = tree({ slotExtra });
    writeFileSync(join(truncated, "tiny.gguf"), Buffer.from("GGUF\x03\x00\x00\x00", "latin1"));
    expect(await preflight((await compiled(truncated)).model)).toEqual([]);
    const named = tree({ path: "tiny.bin", slotExtra, files: { "tiny.bin": "" } });
    writeGguf(join(named, "tiny.bin"), { kvs: modelKvs({ arch: "llama", ctx: 8192 }) });
    expect((await preflight((await compiled(named)).model)).map((f) => f.code)).toEqual(["slot.ctx_exceeds_training"]);
  });

  it("each header is parsed once: per call for the slots sharing it, and across calls while its size and mtime stay", async () => {
    const root = ggufTree({ ctx: 8192, slotExtra: "[tune]\nctx_size = 40960\n", files: { "slots/code.toml": `profile = "fake"\nmodel = "tiny"\nport = 8082\n[tune]\nctx_size = 32768\n` } });
    const { model } = await compiled(root);
    const before = preflightHeaderReads();
    expect((await preflight(model)).map((f) => `${f.slot} ${f.code}`)).toEqual(["chat slot.ctx_exceeds_training", "code slot.ctx_exceeds_training"]);
    expect(preflightHeaderReads()).toBe(before + 1);
    // Another call (another Model object too): no new parse.
    expect(await preflight(model)).toHaveLength(2);
    expect(await preflight((await compiled(root)).model)).toHaveLength(2);
    expect(preflightHeaderReads()).toBe(before + 1);
    // A new file at the path (another mtime): read again, its facts used.
    writeGguf(join(root, "tiny.gguf"), { kvs: modelKvs({ arch: "llama", ctx: 65536 }) });
    utimesSync(join(root, "tiny.gguf"), new Date(), new Date(Date.now() + 5000));
    expect(await preflight(model)).toEqual([]);
    expect(preflightHeaderReads()).toBe(before + 2);
  });
});
