import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import { ggufBytes, kv, modelKvs } from "./gguf-writer.js";
import { setModelsTable, startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());
const outside = mkdtempSync(join(tmpdir(), "hal0-scan-"));
afterAll(() => rmSync(outside, { recursive: true, force: true }));

const modelsToml = () => readFileSync(join(s.config, "models.toml"), "utf8");
const TEMPLATE = "{%- if tools %}{{ tools }}{% endif %}{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}<think>";
const writeModel = (path: string, opts: Parameters<typeof modelKvs>[0] = {}) =>
  writeFileSync(path, ggufBytes({ kvs: modelKvs({ template: TEMPLATE, ...opts }), tensors: [{ name: "output.weight", dims: [4096] }] }));

/** Every line of `lines` is in `of`, in order: what a format-preserving edit keeps. */
function isSubsequence(lines: string[], of: string[]): boolean {
  let i = 0;
  for (const l of of) if (i < lines.length && l === lines[i]) i++;
  return i === lines.length;
}

// POST /api/models/scan/preview and POST /api/models/scan over [models] roots with real GGUF files.
describe("model scan", () => {
  const root = () => join(outside, `root-${Math.random().toString(36).slice(2)}`);
  function seedRoot(dir: string): void {
    mkdirSync(join(dir, "sub"), { recursive: true });
    writeModel(join(dir, "Qwen3-8B-Q4_K_M.gguf"), { name: "Qwen3 8B", ctx: 40960 });
    writeModel(join(dir, "sub", "Nomic-Embed.gguf"), { arch: "nomic-bert", name: "Nomic Embed", template: "", extra: [kv.u32("nomic-bert.pooling_type", 1)] });
    writeFileSync(join(dir, "mmproj-F16.gguf"), ggufBytes({ kvs: [kv.str("general.architecture", "clip"), kv.str("general.type", "mmproj")] }));
    writeModel(join(dir, "Big-00001-of-00002.gguf"), { name: "Big", extra: [{ key: "split.no", type: "uint16", value: 0 }, { key: "split.count", type: "uint16", value: 2 }] });
    writeModel(join(dir, "Big-00002-of-00002.gguf"), { name: "Big", extra: [{ key: "split.no", type: "uint16", value: 1 }, { key: "split.count", type: "uint16", value: 2 }] });
    writeFileSync(join(dir, "notes.gguf"), "not a model\n");
    writeFileSync(join(dir, "README.md"), "ignored\n");
  }
  const setRoots = (roots: string[]) => setModelsTable(s.config, `# where the weights live\nroots = ${JSON.stringify(roots)}`);

  it("previews what it would register without writing, then registers the new ones as one change set", async () => {
    const dir = root();
    seedRoot(dir);
    setRoots(["models", dir]);
    const before = modelsToml();
    const preview = await s.call("POST", "/api/models/scan/preview");
    expect(preview.status).toBe(200);
    expect(preview.body.roots.map((r: any) => [r.root, r.exists])).toEqual([["models", true], [dir, true]]);
    expect(preview.body.would_register).toEqual(["big", "qwen3-8b-q4_k_m", "nomic-embed"]);
    expect(preview.body.new.find((n: any) => n.id === "nomic-embed").entry).toMatchObject({ type: "embedding", capabilities: ["embedding"], path: join(dir, "sub", "Nomic-Embed.gguf") });
    expect(preview.body.known.map((k: any) => `${k.id}:${k.as}`)).toEqual(expect.arrayContaining(["qwen2.5-coder-32b:draft", "gemma-3-12b-it:mmproj", "qwen3-4b:model"]));
    const reasons = Object.fromEntries(preview.body.skipped.map((k: any) => [k.path.slice(dir.length + 1), k.reason]));
    expect(reasons["Big-00002-of-00002.gguf"]).toMatch(/shard 2 of 2/);
    expect(reasons["mmproj-F16.gguf"]).toMatch(/mmproj/);
    expect(reasons["notes.gguf"]).toMatch(/^not_gguf/);
    expect(modelsToml()).toBe(before);

    const scan = await s.call("POST", "/api/models/scan", { body: {} });
    expect(scan.status).toBe(200);
    expect(scan.body).toMatchObject({ committed: true, files: ["models.toml"], pruned: [] });
    expect(scan.body.registered.map((r: any) => r.id)).toEqual(["big", "qwen3-8b-q4_k_m", "nomic-embed"]);
    expect(scan.body.plan.id).toBeTruthy();
    expect(isSubsequence(before.split("\n"), modelsToml().split("\n"))).toBe(true);
    expect((await s.call("GET", "/api/models/qwen3-8b-q4_k_m")).body).toMatchObject({ installed: true, quant: "Q4_K_M", context_length: 40960, capabilities: ["chat", "tools", "reasoning"], gguf: { name: "Qwen3 8B" } });
    const again = await s.call("POST", "/api/models/scan");
    expect(again.body).toMatchObject({ registered: [], committed: false });
  });

  it("prunes entries whose file under a root is gone, keeping those a slot still uses", async () => {
    const dir = root();
    seedRoot(dir);
    setRoots(["models", dir]);
    await s.call("POST", "/api/models/scan");
    rmSync(join(dir, "Qwen3-8B-Q4_K_M.gguf"));
    rmSync(join(s.config, "models", "Qwen3-4B-Q4_K_M.gguf"));
    const preview = await s.call("POST", "/api/models/scan/preview", { body: { prune: true } });
    expect(preview.body.missing.map((m: any) => m.id)).toEqual(["qwen3-4b", "qwen3-8b-q4_k_m"]);
    const scan = await s.call("POST", "/api/models/scan", { body: { prune: true } });
    expect(scan.body).toMatchObject({ registered: [], pruned: ["qwen3-8b-q4_k_m"], kept_in_use: [{ id: "qwen3-4b", used_by: { slots: ["utility"] } }], committed: true });
    expect(modelsToml()).not.toContain("qwen3-8b-q4_k_m");
    expect(readFileSync(join(s.config, "hal0.toml"), "utf8")).toContain("# where the weights live");
  });

  it("reports a root that does not exist and registers nothing", async () => {
    setRoots(["/nonexistent/models"]);
    const r = await s.call("POST", "/api/models/scan/preview");
    expect(r.body).toMatchObject({ roots: [{ root: "/nonexistent/models", exists: false, files: 0 }], new: [], would_register: [] });
  });
});
