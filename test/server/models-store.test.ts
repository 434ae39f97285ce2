import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse, stringify } from "smol-toml";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ROUTES } from "../../server/routes/index.js";
import { modelStoreRoutes } from "../../server/routes/models-store.js";
import { ggufBytes, modelKvs } from "./gguf-writer.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/**
 * The model store routes (server/routes/models-store.ts) for real, over a
 * served copy of fixtures/box: small GGUF files in a temp folder that the
 * copy's hal0.toml names as the first of `[models] roots` (so the store,
 * unset, is that folder), moved for real to another folder, or refused.
 */

// Until server/routes/index.ts lists them, the routes are served on top of the table (never twice).
const routes = [...ROUTES, ...modelStoreRoutes.filter((r) => !ROUTES.some((t) => t.method === r.method && t.path === r.path))];

let s: TestServer & { dir: string };
/** The current store: the first of roots. */
let store: string;
/** Where migrations go: a second root, not yet created. */
let fast: string;

beforeEach(async () => {
  s = await startTestServer({ extra: { routes } });
  store = join(s.dir, "store");
  fast = join(s.dir, "fast");
  mkdirSync(store);
  // [models] replaced whole (the fixture may set a store of its own): these two roots, no store.
  const doc = parse(readFileSync(join(s.config, "hal0.toml"), "utf8"));
  writeFileSync(join(s.config, "hal0.toml"), stringify({ ...doc, models: { roots: [store, fast] } }));
});
afterEach(async () => s.close());

const hal0Toml = () => readFileSync(join(s.config, "hal0.toml"), "utf8");
const modelsToml = () => readFileSync(join(s.config, "models.toml"), "utf8");
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

/** A small GGUF model file of about `floats * 4` bytes of tensor data. */
function gguf(path: string, name: string, floats = 1024): Buffer {
  const bytes = ggufBytes({ kvs: modelKvs({ name }), tensors: [{ name: "w", dims: [floats] }] });
  writeFileSync(path, bytes);
  return bytes;
}

/** Registers model `id` (its facts from the header) with extra facts. */
async function register(id: string, body: Record<string, unknown>): Promise<void> {
  const r = await s.call("POST", "/api/models", { body: { id, ...body } });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}

/** alpha (with drafter alpha-draft, and its sha256 recorded) and beta in the store; floats sizes each file. */
async function twoModelsAndADraft(floats = 1024): Promise<{ alpha: Buffer; draft: Buffer; beta: Buffer }> {
  const files = {
    alpha: gguf(join(store, "alpha.gguf"), "Alpha", floats),
    draft: gguf(join(store, "alpha-draft.gguf"), "Alpha Draft", Math.max(16, floats >> 4)),
    beta: gguf(join(store, "beta.gguf"), "Beta", floats),
  };
  await register("alpha", { path: join(store, "alpha.gguf"), draft: join(store, "alpha-draft.gguf"), sha256: sha(files.alpha), size_bytes: files.alpha.length });
  await register("beta", { path: join(store, "beta.gguf") });
  return files;
}

describe("GET /api/settings/models/store (model_store)", () => {
  it("is served once, by settings.ts: the store (unset) and the roots", async () => {
    expect(modelStoreRoutes.some((r) => r.method === "GET")).toBe(false);
    expect(routes.filter((r) => r.method === "GET" && r.path === "/api/settings/models/store")).toHaveLength(1);
    const r = await s.call("GET", "/api/settings/models/store");
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.store).toMatchObject({ path: "", set: false });
    expect(r.body.roots).toEqual([
      { path: store, resolved: store, exists: true, is_dir: true },
      { path: fast, resolved: fast, exists: false, is_dir: false },
    ]);
  });
});

describe("POST /api/settings/models/store (model_store_set)", () => {
  it("writes [models] store and moves no file", async () => {
    const files = await twoModelsAndADraft();
    const before = modelsToml();
    const r = await s.call("POST", "/api/settings/models/store", { body: { store: fast } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ store: fast, effective: fast, exists: false, under_roots: true, files_moved: 0, committed: true, files: ["hal0.toml"], previous: { store: "", effective: store } });
    expect(r.body.note).toMatch(/no model file was moved/);
    expect(hal0Toml()).toContain(`store = ${JSON.stringify(fast)}`);
    expect(modelsToml()).toBe(before);
    expect(readFileSync(join(store, "alpha.gguf")).equals(files.alpha)).toBe(true);
    expect(existsSync(fast)).toBe(false);
    const got = await s.call("GET", "/api/settings/models/store");
    expect(got.body.store).toMatchObject({ path: fast, set: true, resolved: fast });
    // The same again writes nothing.
    const again = await s.call("POST", "/api/settings/models/store", { body: { store: fast } });
    expect(again.body).toMatchObject({ committed: false, files: [] });
  });

  it("a dry run plans and writes nothing", async () => {
    const before = hal0Toml();
    const r = await s.call("POST", "/api/settings/models/store?dry_run=true", { body: { store: fast } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ dry_run: true, committed: false });
    expect(hal0Toml()).toBe(before);
  });

  it("refuses a file, a folder that cannot be created, and a bad body; hal0.toml stays", async () => {
    const before = hal0Toml();
    const file = join(s.dir, "a-file");
    writeFileSync(file, "not a folder\n");
    const asFile = await s.call("POST", "/api/settings/models/store", { body: { store: file } });
    expect([asFile.status, asFile.body.error.code]).toEqual([409, "model.store_not_directory"]);
    expect(asFile.body.error.details).toMatchObject({ path: file, type: "file" });
    const noParent = await s.call("POST", "/api/settings/models/store", { body: { store: join(s.dir, "no", "such", "folder") } });
    expect([noParent.status, noParent.body.error.code]).toEqual([422, "model.store_unwritable"]);
    expect(noParent.body.error.details).toMatchObject({ reason: "parent_missing" });
    const underFile = await s.call("POST", "/api/settings/models/store", { body: { store: join(file, "models") } });
    expect([underFile.status, underFile.body.error.details.reason]).toEqual([422, "parent_not_directory"]);
    const bad = await s.call("POST", "/api/settings/models/store", { body: { store: fast, extra: 1 } });
    expect([bad.status, bad.body.error.code]).toEqual([422, "validation.invalid"]);
    expect(hal0Toml()).toBe(before);
  });
});

describe("POST /api/settings/models/store/migrate (model_store_migrate)", () => {
  it("moves two models and a drafter, rewrites their paths and the store in one change, then removes the old files", async () => {
    const files = await twoModelsAndADraft();
    const r = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: fast } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ store: fast, effective: fast, previous: { store: "", effective: store }, committed: true, old_files_removed: true, not_removed: [] });
    expect(r.body.files.sort()).toEqual(["hal0.toml", "models.toml"]);
    expect(r.body.moved.map((m: any) => [m.from, m.to, m.sha256])).toEqual([
      [join(store, "alpha-draft.gguf"), join(fast, "alpha-draft.gguf"), sha(files.draft)],
      [join(store, "alpha.gguf"), join(fast, "alpha.gguf"), sha(files.alpha)],
      [join(store, "beta.gguf"), join(fast, "beta.gguf"), sha(files.beta)],
    ]);
    expect(r.body.bytes_moved).toBe(files.alpha.length + files.draft.length + files.beta.length);
    // The fixture's models live in the config folder, outside the store: left where they are.
    expect(r.body.left).toContainEqual({ id: "qwen3-30b-a3b", file: "path", path_abs: join(s.config, "models/Qwen3-30B-A3B-Q4_K_M.gguf"), reason: "outside_store" });
    expect(r.body.left.some((l: any) => l.id === "alpha" || l.id === "beta")).toBe(false);

    for (const [name, bytes] of [["alpha.gguf", files.alpha], ["alpha-draft.gguf", files.draft], ["beta.gguf", files.beta]] as const) {
      expect(readFileSync(join(fast, name)).equals(bytes), name).toBe(true);
      expect(existsSync(join(store, name)), name).toBe(false);
    }
    expect(readdirSync(fast).sort()).toEqual(["alpha-draft.gguf", "alpha.gguf", "beta.gguf"]);
    expect(hal0Toml()).toContain(`store = ${JSON.stringify(fast)}`);
    const toml = modelsToml();
    expect(toml).not.toContain(store + "/");
    const alpha = (await s.call("GET", "/api/models/alpha")).body;
    expect(alpha).toMatchObject({ path: join(fast, "alpha.gguf"), draft: join(fast, "alpha-draft.gguf"), sha256: sha(files.alpha), size_bytes: files.alpha.length });
    expect((await s.call("GET", "/api/models/beta")).body).toMatchObject({ path: join(fast, "beta.gguf") });
    const fixtureQwen = (await s.call("GET", "/api/models/qwen3-30b-a3b")).body;
    expect(fixtureQwen.path).toBe("models/Qwen3-30B-A3B-Q4_K_M.gguf");
  });

  it("moves every part of a split model with its first part (llama.cpp reads them from beside it)", async () => {
    const names = ["big-00001-of-00003.gguf", "big-00002-of-00003.gguf", "big-00003-of-00003.gguf"];
    const bytes = names.map((n, i) => gguf(join(store, n), `Big ${i + 1}`));
    await register("big", { path: join(store, names[0]!) });
    const r = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: fast } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.moved.map((m: any) => [m.to, m.sha256])).toEqual(names.map((n, i) => [join(fast, n), sha(bytes[i]!)]));
    expect(readdirSync(fast).sort()).toEqual(names);
    expect(readdirSync(store)).toEqual([]);
    expect((await s.call("GET", "/api/models/big")).body).toMatchObject({ path: join(fast, names[0]!) });
    expect(modelsToml()).not.toContain("00002-of");
  });

  it("a dry run lists what would move and copies nothing", async () => {
    const files = await twoModelsAndADraft();
    const before = [hal0Toml(), modelsToml()];
    const r = await s.call("POST", "/api/settings/models/store/migrate?dry_run=true", { body: { store: fast } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ dry_run: true, committed: false, total_bytes: files.alpha.length + files.draft.length + files.beta.length });
    expect(r.body.files.map((f: any) => f.to)).toEqual([join(fast, "alpha-draft.gguf"), join(fast, "alpha.gguf"), join(fast, "beta.gguf")]);
    expect(r.body.needed_bytes).toBe(r.body.total_bytes + Math.ceil(r.body.total_bytes / 100));
    expect(existsSync(fast)).toBe(false);
    expect([hal0Toml(), modelsToml()]).toEqual(before);
    // An agent's dry run (the tool is gated) runs too, saying the real one would wait; the real one is queued.
    const agent = await s.call("POST", "/api/settings/models/store/migrate?dry_run=true", { as: "agent:hermes__ops", body: { store: fast } });
    expect(agent.status, JSON.stringify(agent.body)).toBe(200);
    expect(agent.body).toMatchObject({ dry_run: true, committed: false, total_bytes: r.body.total_bytes, approval: { approval_needed: true } });
    const real = await s.call("POST", "/api/settings/models/store/migrate", { as: "agent:hermes__ops", body: { store: fast } });
    expect(real.status, JSON.stringify(real.body)).toBe(202);
    expect(existsSync(fast)).toBe(false);
    expect([hal0Toml(), modelsToml()]).toEqual(before);
  });

  it("not enough space on the target (a 1 MiB tmpfs): 507 with the numbers, nothing copied", async () => {
    // ~1.2 MB each: more than the tmpfs holds.
    const files = await twoModelsAndADraft(300_000);
    const tiny = join(s.dir, "tiny");
    mkdirSync(tiny);
    const before = [hal0Toml(), modelsToml()];
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", tiny]);
    try {
      const r = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: tiny } });
      expect(r.status, JSON.stringify(r.body)).toBe(507);
      expect(r.body.error.code).toBe("model.store_no_space");
      const total = files.alpha.length + files.draft.length + files.beta.length;
      expect(r.body.error.details).toMatchObject({ path: tiny, measured_at: tiny, total_bytes: total, needed_bytes: total + Math.ceil(total / 100), files: 3 });
      expect(r.body.error.details.free_bytes).toBeLessThanOrEqual(1024 * 1024);
      expect(r.body.error.details.free_bytes).toBeLessThan(r.body.error.details.needed_bytes);
      expect(readdirSync(tiny)).toEqual([]);
      // A store folder not yet made on it is measured at the mount.
      const below = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: join(tiny, "models") } });
      expect([below.status, below.body.error.details.measured_at]).toEqual([507, tiny]);
      expect(readdirSync(tiny)).toEqual([]);
    } finally {
      execFileSync("umount", [tiny]);
    }
    expect([hal0Toml(), modelsToml()]).toEqual(before);
    for (const name of ["alpha.gguf", "alpha-draft.gguf", "beta.gguf"]) expect(existsSync(join(store, name)), name).toBe(true);
  });

  it("a verify failure (a recorded sha256 the file does not have) leaves the old store in use and no copy behind", async () => {
    const files = await twoModelsAndADraft();
    const bad = gguf(join(store, "zz-bad.gguf"), "Bad");
    await register("zz-bad", { path: join(store, "zz-bad.gguf"), sha256: "0".repeat(64) });
    const before = [hal0Toml(), modelsToml()];
    const r = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: fast } });
    expect(r.status, JSON.stringify(r.body)).toBe(500);
    expect(r.body.error.code).toBe("model.store_migrate_failed");
    expect(r.body.error.details).toMatchObject({ step: "verify", file: join(store, "zz-bad.gguf"), model_id: "zz-bad", expected: "0".repeat(64), actual: sha(bad) });
    expect(r.body.error.message).toMatch(/old store stays in use/);
    // The three files copied before it are gone again, and the folder the migration made.
    expect(existsSync(fast)).toBe(false);
    expect([hal0Toml(), modelsToml()]).toEqual(before);
    for (const [name, bytes] of [["alpha.gguf", files.alpha], ["alpha-draft.gguf", files.draft], ["beta.gguf", files.beta], ["zz-bad.gguf", bad]] as const) {
      expect(readFileSync(join(store, name)).equals(bytes), name).toBe(true);
    }
    expect((await s.call("GET", "/api/settings/models/store")).body.store).toMatchObject({ path: "", set: false });
  });

  it("a change set refused after the copies (the tree moved since the If-Match revision) removes them and keeps the old store", async () => {
    // Big enough (~66 MB) that the copy is still under way when models.toml moves.
    const files = await twoModelsAndADraft(8_000_000);
    const base = (await s.call("GET", "/api/settings")).body.revision;
    const pending = s.call("POST", "/api/settings/models/store/migrate", { body: { store: fast }, headers: { "if-match": `"${base}"` } });
    // The migration makes the new store once the pipeline has judged the change; then someone edits models.toml.
    const deadline = Date.now() + 10_000;
    while (!existsSync(fast) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 1));
    expect(existsSync(fast)).toBe(true);
    writeFileSync(join(s.config, "models.toml"), `${modelsToml()}\n# edited by hand during the copy\n`);
    const before = [hal0Toml(), modelsToml()];
    const r = await pending;
    expect(r.status, JSON.stringify(r.body).slice(0, 500)).toBe(500);
    expect(r.body.error).toMatchObject({ code: "model.store_migrate_failed", details: { step: "commit", cause: { code: "config.stale" } } });
    expect(existsSync(fast)).toBe(false);
    expect([hal0Toml(), modelsToml()]).toEqual(before);
    expect(readFileSync(join(store, "alpha.gguf")).equals(files.alpha)).toBe(true);
    expect(readFileSync(join(store, "beta.gguf")).equals(files.beta)).toBe(true);
  });

  it("a verify failure into an existing store folder removes only its own copies", async () => {
    await twoModelsAndADraft();
    gguf(join(store, "zz-bad.gguf"), "Bad");
    await register("zz-bad", { path: join(store, "zz-bad.gguf"), sha256: "f".repeat(64) });
    mkdirSync(fast);
    writeFileSync(join(fast, "someone-elses.txt"), "keep me\n");
    const r = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: fast } });
    expect([r.status, r.body.error.details.step]).toEqual([500, "verify"]);
    expect(readdirSync(fast)).toEqual(["someone-elses.txt"]);
  });

  it("refuses the same store, one inside it, a file as target and files the target already holds, before copying", async () => {
    await twoModelsAndADraft();
    const same = await s.call("POST", "/api/settings/models/store/migrate", { body: { store } });
    expect([same.status, same.body.error.code]).toEqual([422, "validation.invalid"]);
    const inside = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: join(store, "sub") } });
    expect([inside.status, inside.body.error.code]).toEqual([422, "validation.invalid"]);
    const file = join(s.dir, "a-file");
    writeFileSync(file, "x");
    expect((await s.call("POST", "/api/settings/models/store/migrate", { body: { store: file } })).body.error.code).toBe("model.store_not_directory");
    mkdirSync(fast);
    writeFileSync(join(fast, "beta.gguf"), "already here\n");
    const taken = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: fast } });
    expect([taken.status, taken.body.error.code, taken.body.error.details.paths]).toEqual([409, "model.store_file_exists", [join(fast, "beta.gguf")]]);
    expect(readdirSync(fast)).toEqual(["beta.gguf"]);
    expect(existsSync(join(store, "alpha.gguf"))).toBe(true);
  });

  it("an agent's call waits for an operator and copies nothing until approved; approved, it runs", async () => {
    const files = await twoModelsAndADraft();
    const queued = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: fast }, as: "agent:hermes__coder" });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    expect(queued.body).toMatchObject({ status: "pending_approval" });
    expect(existsSync(fast)).toBe(false);
    // Refused before it is queued when it could not run.
    const file = join(s.dir, "a-file");
    writeFileSync(file, "x");
    const refused = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: file }, as: "agent:hermes__coder" });
    expect(refused.body.error?.code).toBe("model.store_not_directory");

    const approved = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    expect(approved.body.approval).toMatchObject({ state: "executed" });
    expect(readFileSync(join(fast, "alpha.gguf")).equals(files.alpha)).toBe(true);
    expect(existsSync(join(store, "alpha.gguf"))).toBe(false);
    expect(hal0Toml()).toContain(`store = ${JSON.stringify(fast)}`);
  });

  it("is judged by what it commits: opened to autonomous_write for the agent, it still waits for a person ([models] store is privileged), REST and MCP, and its dry run says so", async () => {
    await twoModelsAndADraft();
    writeFileSync(join(s.config, "policy.toml"), '[tiers]\nautonomous_write = ["model_store_migrate"]\n');
    await s.hal0.box.snapshot();
    const before = [hal0Toml(), modelsToml()];
    const rest = await s.call("POST", "/api/settings/models/store/migrate", { body: { store: fast }, as: "agent:hermes__ops" });
    expect(rest.status, JSON.stringify(rest.body)).toBe(202);
    expect(rest.body).toMatchObject({ status: "pending_approval" });
    expect(rest.body.effects.join("\n")).toMatch(/\[models\] store/);
    const c = await adminClient(s.url, "hermes__ops");
    try {
      const mcp = await callTool(c, "model_store_migrate", { store: fast });
      expect(mcp.body, JSON.stringify(mcp.body)).toMatchObject({ status: "pending_approval" });
      const preview = await callTool(c, "model_store_migrate", { store: fast, dry_run: true });
      expect(preview.body, JSON.stringify(preview.body)).toMatchObject({ dry_run: true, committed: false, approval: { approval_needed: true } });
    } finally {
      await c.close();
    }
    expect(existsSync(fast)).toBe(false);
    expect([hal0Toml(), modelsToml()]).toEqual(before);
  });
});
