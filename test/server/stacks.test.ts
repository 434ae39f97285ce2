import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { seal } from "../../server/envelopes.js";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());

const read = (file: string): string => readFileSync(join(s.config, file), "utf8");
const edit = (file: string, from: string | RegExp, to: string): void => writeFileSync(join(s.config, file), read(file).replace(from, to));
/** Every file of the config folder, path → text. */
function tree(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const folder of ["", "slots", "stacks"]) {
    for (const name of readdirSync(join(s.config, folder))) if (name.endsWith(".toml")) out[join(folder, name)] = read(join(folder, name));
  }
  return out;
}
const pointer = (): string => join(s.state, "stacks-state.json");
const FORGE_DISABLES = ["npu-assist", "speech", "utility", "whisper"].map((slot) => ({ slot, reason: "not in stack forge (mode replace)" }));

describe("stack apply", () => {
  it("dry run lists every change and every slot replace would disable, and writes nothing", async () => {
    const before = tree();
    for (const res of [await s.call("POST", "/api/stacks/forge/apply?dry_run=true"), await s.call("POST", "/api/stacks/forge/apply", { body: { dry_run: true } })]) {
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ stack: "forge", dry_run: true, committed: false, creates: [], kept: [] });
      expect(res.body.disables).toEqual(FORGE_DISABLES);
      expect(res.body.changes).toContainEqual({ slot: "chat", before_model: "qwen3-30b-a3b", after_model: "glm-4.5-air", changed: true, keys: ["model", "tune.ctx_size", "tune.speculation"] });
      expect(res.body.changes).toContainEqual({ slot: "coder", before_model: "qwen2.5-coder-32b", after_model: "qwen2.5-coder-32b", changed: false, keys: [] });
      expect(res.body.summary).toContain("utility: disabled (not in stack forge (mode replace))");
      expect(res.body.plan.changes.find((c: any) => c.address === "slot.chat").after).toBeTruthy();
    }
    expect(tree()).toEqual(before);
    expect(existsSync(pointer())).toBe(false);
    // Either place saying dry run is a dry run: a body's `dry_run: false` beside ?dry_run=true writes nothing.
    expect((await s.call("POST", "/api/stacks/forge/apply?dry_run=true", { body: { dry_run: false } })).body).toMatchObject({ dry_run: true, committed: false });
    expect(tree()).toEqual(before);
  });

  it("a pinned slot outside a replace stack is kept, with why", async () => {
    edit("slots/utility.toml", "priority = 60", "priority = 60\npinned = true");
    const res = await s.call("POST", "/api/stacks/forge/apply?dry_run=1");
    expect(res.body.disables.map((d: any) => d.slot)).toEqual(["npu-assist", "speech", "whisper"]);
    expect(res.body.kept).toEqual([{ slot: "utility", reason: expect.stringMatching(/^pinned: not in stack forge \(mode replace\)/) }]);
  });

  it("a pinned slot a stack names with enabled = false is kept too, with why, and the rest of the stack applies", async () => {
    writeFileSync(join(s.config, "stacks/quiet.toml"), 'name = "Quiet"\n[[slot]]\nslot = "chat"\nenabled = false\n[slot.tune]\nctx_size = 16384\n[[slot]]\nslot = "coder"\nenabled = false\n');
    const status = await s.call("GET", "/api/stacks/quiet");
    expect(status.body.would_change).toEqual(["chat: kept (pinned)", "chat: sets tune.ctx_size", "coder: sets enabled"]);
    const res = await s.call("POST", "/api/stacks/quiet/apply");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.kept).toEqual([{ slot: "chat", reason: "pinned: stack quiet says enabled = false, but a pinned slot is never disabled by a stack" }]);
    expect(read("slots/chat.toml")).toMatch(/^enabled = true$/m);
    expect(read("slots/chat.toml")).toMatch(/ctx_size = 16384/);
    expect(read("slots/coder.toml")).toMatch(/^enabled = false$/m);
    expect(res.body.pointer).toMatchObject({ active_slug: "quiet" });
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "quiet", drift: "clean" });
  });

  it("commits one change set, keeps comments, writes the pointer; drift goes clean → modified on a hand or profile-only edit", async () => {
    const res = await s.call("POST", "/api/stacks/forge/apply");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ dry_run: false, committed: true, pointer: { active_slug: "forge" } });
    expect(res.body.files).toEqual(["slots/chat.toml", "slots/npu-assist.toml", "slots/speech.toml", "slots/utility.toml", "slots/whisper.toml"]);
    const chat = read("slots/chat.toml");
    expect(chat).toMatch(/^model = "glm-4.5-air"$/m);
    expect(chat).toMatch(/ctx_size = 65536/);
    expect(chat).toContain("# rocm-moe's base is 64k, but Qwen3-30B-A3B's native window is 40960.");
    expect(read("slots/utility.toml")).toMatch(/^enabled = false$/m);
    expect(read("slots/utility.toml")).toContain("# Titles, summaries and routing decisions for Hermes");
    expect(JSON.parse(readFileSync(pointer(), "utf8"))).toMatchObject({ active_slug: "forge", content_hash: expect.stringMatching(/^sha256:/), applied_at: expect.any(String) });

    let list = await s.call("GET", "/api/stacks");
    expect(list.body).toMatchObject({ active: "forge", drift: "clean", count: 2 });
    expect(list.body.stacks.find((x: any) => x.slug === "forge")).toMatchObject({ active: true, drift: "clean", mode: "replace" });
    expect(list.body.stacks.find((x: any) => x.slug === "voice")).toMatchObject({ active: false, drift: "none" });

    edit("slots/chat.toml", 'profile = "rocm-moe"', 'profile = "rocm"');
    list = await s.call("GET", "/api/stacks");
    expect(list.body.drift).toBe("modified");
    expect((await s.call("GET", "/api/stacks/forge")).body).toMatchObject({ active: true, drift: "modified" });

    await s.call("POST", "/api/stacks/forge/apply");
    expect((await s.call("GET", "/api/stacks")).body.drift).toBe("clean");
    edit("slots/speech.toml", "enabled = false", "enabled = true");
    expect((await s.call("GET", "/api/stacks")).body.drift).toBe("modified");
  });

  it("a re-apply of a clean stack changes nothing; deleting the active stack makes drift modified", async () => {
    await s.call("POST", "/api/stacks/forge/apply");
    const again = await s.call("POST", "/api/stacks/forge/apply?dry_run=true");
    expect(again.body.changes.every((c: any) => !c.changed)).toBe(true);
    expect(again.body.disables).toEqual([]);
    expect(again.body.summary).toEqual(["stack forge: every slot already matches, nothing to change"]);
    expect((await s.call("DELETE", "/api/stacks/forge")).status).toBe(200);
    expect(existsSync(join(s.config, "stacks/forge.toml"))).toBe(false);
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "forge", drift: "modified" });
  });

  it("editing the active stack so that applying it again would change a slot makes drift modified", async () => {
    await s.call("POST", "/api/stacks/forge/apply");
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "forge", drift: "clean" });
    // Its name alone changes no slot: still clean.
    expect((await s.call("PUT", "/api/stacks/forge", { body: { name: "Forge 2" } })).status).toBe(200);
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "forge", drift: "clean" });
    const res = await s.call("PUT", "/api/stacks/forge", { body: { slot: [{ slot: "chat", model: "glm-4.5-air", profile: "rocm-moe", tune: { ctx_size: 32768, speculation: "mtp" } }, { slot: "coder" }, { slot: "embed" }, { slot: "rerank" }] } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await s.call("GET", "/api/stacks/forge")).body.would_change).toEqual(["chat: sets tune.ctx_size"]);
    const list = (await s.call("GET", "/api/stacks")).body;
    expect(list).toMatchObject({ active: "forge", drift: "modified", drift_reason: "stack forge was edited after it was applied: applying it again would change slot files" });
    expect((await s.call("GET", "/api/stacks/forge")).body).toMatchObject({ active: true, drift: "modified" });
    await s.call("POST", "/api/stacks/forge/apply");
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "forge", drift: "clean" });
  });

  it("a stack given another slot or mode after it was applied is drift modified for that edit, not blamed on the slot files", async () => {
    await s.call("POST", "/api/stacks/forge/apply");
    const files = tree();
    const entries = [{ slot: "chat", model: "glm-4.5-air", profile: "rocm-moe", tune: { ctx_size: 65536, speculation: "mtp" } }, { slot: "coder" }, { slot: "embed" }, { slot: "rerank" }];
    expect((await s.call("PUT", "/api/stacks/forge", { body: { slot: [...entries, { slot: "vision" }] } })).status).toBe(200);
    expect(Object.entries(tree()).filter(([file, text]) => file.startsWith("slots/") && files[file] !== text)).toEqual([]);
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "forge", drift: "modified", drift_reason: "stack forge was edited after it was applied: applying it again would change slot files" });
    // Another mode that the slots already satisfy (nothing else is enabled): the box holds the stack as it is now.
    expect((await s.call("PUT", "/api/stacks/forge", { body: { slot: entries, mode: "merge" } })).status).toBe(200);
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "forge", drift: "clean" });
    edit("slots/coder.toml", "priority = 70", "priority = 70\nenabled = false");
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ drift: "modified", drift_reason: "stack forge was edited after it was applied: applying it again would change slot files" });
  });

  it("merge leaves other slots alone and enables the stack's", async () => {
    const res = await s.call("POST", "/api/stacks/voice/apply");
    expect(res.status).toBe(200);
    expect(res.body.disables).toEqual([]);
    expect(res.body.files).toEqual([]);
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "voice", drift: "clean" });
  });

  it("a pointer that cannot be written leaves the apply committed, saying so, not a failure of what it changed", async () => {
    mkdirSync(pointer()); // a folder where the pointer goes: writing it fails (as on a full or read-only state folder)
    const res = await s.call("POST", "/api/stacks/forge/apply");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ committed: true, pointer: { error: { code: "system.io", message: expect.stringContaining("stacks-state.json") } } });
    expect(read("slots/chat.toml")).toMatch(/^model = "glm-4.5-air"$/m);
    expect((await s.call("GET", "/api/activity?route=POST%20/api/stacks/{slug}/apply")).body.items[0]).toMatchObject({ outcome: "ok" });
    rmSync(pointer(), { recursive: true });
    await s.call("POST", "/api/stacks/forge/apply"); // nothing left to write but the pointer
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "forge", drift: "clean" });
  });

  it("a corrupt pointer is drift none", async () => {
    writeFileSync(pointer(), "{not json");
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: null, drift: "none" });
  });

  it("an apply that would break the tree is refused with diagnostics and writes nothing", async () => {
    edit("stacks/voice.toml", 'profile = "flm"', 'profile = "vulkan"');
    const before = tree();
    const res = await s.call("POST", "/api/stacks/voice/apply");
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe("config.invalid");
    expect(tree()).toEqual(before);
    expect(existsSync(pointer())).toBe(false);
  });
});

describe("stack CRUD", () => {
  const body = { slug: "lean", name: "Lean", mode: "replace", slot: [{ slot: "utility", tune: { reasoning_effort: "high", reasoning_budget: 1024 } }] };

  it("creates, reads, updates (comments survive) and deletes", async () => {
    const made = await s.call("POST", "/api/stacks", { body });
    expect(made.status).toBe(201);
    expect(read("stacks/lean.toml")).toMatch(/\[\[slot\]\]\nslot = "utility"/);
    expect((await s.call("POST", "/api/stacks", { body })).body.error).toMatchObject({ code: "stacks.exists" });
    const got = await s.call("GET", "/api/stacks/lean");
    expect(got.body).toMatchObject({ slug: "lean", name: "Lean", mode: "replace", active: false, drift: "none" });
    expect(got.body.slot[0]).toMatchObject({ slot: "utility", exists: true, live: { model: "qwen3-4b", enabled: true } });
    expect(got.body.disables.length).toBeGreaterThan(0);

    const upd = await s.call("PUT", "/api/stacks/forge", { body: { description: "Coding, lean" } });
    expect(upd.status).toBe(200);
    expect(read("stacks/forge.toml")).toContain('description = "Coding, lean"');
    expect(read("stacks/forge.toml")).toContain("# Heads-down coding: the big MoE with MTP on chat");
    expect(read("stacks/forge.toml")).toContain('speculation = "mtp"   # GLM 4.5 Air ships MTP heads');

    const replaced = await s.call("PUT", "/api/stacks/forge", { body: { slot: [{ slot: "coder" }] } });
    expect(replaced.status).toBe(200);
    expect((await s.call("GET", "/api/stacks/forge")).body.slot.map((e: any) => e.slot)).toEqual(["coder"]);

    expect((await s.call("DELETE", "/api/stacks/lean")).body).toMatchObject({ slug: "lean", deleted: true });
    expect(existsSync(join(s.config, "stacks/lean.toml"))).toBe(false);
  });

  it("answers an unknown slug with 404 stacks.not_found on every route", async () => {
    for (const [method, path, b] of [["GET", "/api/stacks/nope"], ["PUT", "/api/stacks/nope", { name: "x" }], ["DELETE", "/api/stacks/nope"], ["POST", "/api/stacks/nope/apply"], ["POST", "/api/stacks/nope/export"]] as const) {
      const res = await s.call(method, path, b ? { body: b } : {});
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error.code).toBe("stacks.not_found");
    }
  });

  it("refuses a bad body and a stack naming an unknown slot", async () => {
    expect((await s.call("POST", "/api/stacks", { body: { slug: "../x", name: "x" } })).status).toBe(422);
    const bad = await s.call("POST", "/api/stacks", { body: { slug: "ghost", name: "G", slot: [{ slot: "chat", model: "no-such-model" }] } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.details.diagnostics[0].code).toBe("stack.unknown_model");
  });

  it("snapshots the enabled slots as a new replace stack", async () => {
    const res = await s.call("POST", "/api/stacks/snapshot", { body: { slug: "now", name: "Now" } });
    expect(res.status).toBe(201);
    expect(res.body.stack.slot.map((e: any) => e.slot)).toEqual(["chat", "coder", "embed", "npu-assist", "rerank", "speech", "utility", "whisper"]);
    expect((await s.call("GET", "/api/stacks/now")).body).toMatchObject({ mode: "replace", would_change: ["stack now: every slot already matches, nothing to change"] });
    expect((await s.call("POST", "/api/stacks/snapshot", { body: { slug: "now" } })).body.error.code).toBe("stacks.exists");
  });
});

describe("stack export and import", () => {
  it("exports nothing while profiles.toml does not parse (a hand edit): 422 config.invalid naming it, as the stack file's own parse error is", async () => {
    writeFileSync(join(s.config, "profiles.toml"), `${read("profiles.toml")}\nbroken = = =\n`);
    for (const path of ["/api/stacks/forge/export", "/api/profiles/rocm/export"]) {
      const res = await s.call("POST", path);
      expect([res.status, res.body.error?.code], `${path} ${JSON.stringify(res.body)}`).toEqual([422, "config.invalid"]);
      expect(res.body.error.message).toMatch(/^profiles\.toml is not valid TOML: /);
    }
  });

  it("round-trips through a checksummed envelope", async () => {
    const exp = await s.call("POST", "/api/stacks/forge/export");
    expect(exp.status).toBe(200);
    expect(exp.body).toMatchObject({ kind: "hal0.stack", version: 1, slug: "forge", checksum: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
    expect(Object.keys(exp.body.profiles)).toEqual(["rocm-moe"]);
    expect(exp.body.stack.slot[0]).toMatchObject({ slot: "chat", model: "glm-4.5-air", tune: { ctx_size: 65536 } });

    const dry = await s.call("POST", "/api/stacks/import", { body: { envelope: exp.body, slug: "forge2", dry_run: true } });
    expect(dry.status).toBe(201);
    expect(dry.body).toMatchObject({ dry_run: true, committed: false, profiles_skipped: ["rocm-moe"] });
    expect(existsSync(join(s.config, "stacks/forge2.toml"))).toBe(false);

    const imp = await s.call("POST", "/api/stacks/import", { body: { envelope: exp.body, slug: "forge2" } });
    expect(imp.status).toBe(201);
    expect((await s.call("GET", "/api/stacks/forge2")).body).toMatchObject({ name: "Forge", mode: "replace" });
    expect((await s.call("POST", "/api/stacks/import", { body: { envelope: exp.body } })).body.error.code).toBe("stacks.exists");
  });

  it("refuses a tampered, foreign, too new or slug-less envelope", async () => {
    const exp = (await s.call("POST", "/api/stacks/forge/export")).body;
    const tampered = { ...exp, stack: { ...exp.stack, mode: "merge" } };
    const cases: Array<[unknown, string]> = [
      [tampered, "stacks.bad_envelope"],
      [{ ...exp, kind: "hal0.profile" }, "stacks.bad_envelope"],
      ["nope", "stacks.bad_envelope"],
      [{ ...exp, version: 2 }, "stacks.envelope_too_new"],
      [seal({ kind: "hal0.stack", version: 1, stack: exp.stack, profiles: {} }), "stacks.import_no_slug"],
      [seal({ kind: "hal0.stack", version: 1, slug: "x", stack: { name: "X", bogus: 1 } }), "stacks.bad_envelope"],
    ];
    for (const [envelope, code] of cases) {
      const res = await s.call("POST", "/api/stacks/import", { body: { envelope } });
      expect(res.status, code).toBe(400);
      expect(res.body.error.code).toBe(code);
    }
  });

  it("an imported stack naming a slot the box lacks creates that slot, disabled, on a free port; apply enables it", async () => {
    const envelope = seal({ kind: "hal0.stack", version: 1, slug: "extra", stack: { name: "Extra", slot: [{ slot: "helper", model: "qwen3-4b", profile: "cpu-small" }] }, profiles: { "cpu-tiny": { flags: "--threads 2", device_class: "cpu" } } });
    const res = await s.call("POST", "/api/stacks/import", { body: { envelope } });
    expect(res.status).toBe(201);
    expect(res.body.creates).toEqual([{ slot: "helper", file: "slots/helper.toml", profile: "cpu-small", model: "qwen3-4b", port: 8085, enabled: false }]);
    expect(res.body.profiles_added).toEqual(["cpu-tiny"]);
    expect(read("profiles.toml")).toMatch(/\[profile\.cpu-tiny\]\n/);
    expect(read("slots/helper.toml")).toMatch(/enabled = false/);
    const merged = await s.call("POST", "/api/stacks/extra/apply");
    expect(merged.status).toBe(422); // merge: a ninth enabled slot is over [slots] max_slots
    expect(merged.body.error.details.diagnostics[0].code).toBe("slot.max_slots_exceeded");
    expect(read("slots/helper.toml")).toMatch(/enabled = false/);
    expect((await s.call("PUT", "/api/stacks/extra", { body: { mode: "replace" } })).status).toBe(200);
    const applied = await s.call("POST", "/api/stacks/extra/apply");
    expect(applied.status).toBe(200);
    expect(applied.body.changes).toEqual([{ slot: "helper", before_model: "qwen3-4b", after_model: "qwen3-4b", changed: true, keys: ["enabled"] }]);
    expect(applied.body.kept).toEqual([{ slot: "chat", reason: expect.stringContaining("pinned") }]);
    expect(read("slots/helper.toml")).toMatch(/enabled = true/);
  });
});
