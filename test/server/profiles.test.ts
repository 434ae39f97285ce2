import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { seal } from "../../server/envelopes.js";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());

const profiles = (): string => readFileSync(join(s.config, "profiles.toml"), "utf8");
const HEADER = "# Profiles of this box.\n#\n# This example box runs anywhere";
const mine = { name: "agent-hi", image: "hal0-runner:local", runner: ["node", "../runner/fake-llama-server.mjs"], flags: "-fa on", device_class: "cpu", intent: "Agents", tune: { ctx_size: 16384, enable_thinking: true, reasoning_effort: "high", reasoning_budget: 2048 } };

describe("profile reads", () => {
  it("lists seeds and file profiles with their origin and users", async () => {
    const res = await s.call("GET", "/api/profiles");
    expect(res.status).toBe(200);
    expect(res.body.count).toBe(8);
    expect(res.body.profiles.find((p: any) => p.name === "cpu-small")).toMatchObject({ origin: "file", seed: false, device_class: "cpu", used_by: ["utility"] });
    expect(res.body.profiles.find((p: any) => p.name === "rocm")).toMatchObject({ origin: "file", seed: true, used_by: ["vision"] });
  });

  it("shows one profile with used_by and origin; unknown is 404", async () => {
    const res = await s.call("GET", "/api/profiles/rocm-moe");
    expect(res.body).toMatchObject({ name: "rocm-moe", origin: "file", seed: true, overrides_seed: true, used_by: ["chat"], used_by_stacks: ["forge"], tune: { ctx_size: 65536 } });
    const nope = await s.call("GET", "/api/profiles/nope");
    expect(nope.status).toBe(404);
    expect(nope.body.error.code).toBe("profiles.not_found");
    expect(nope.body.error.details.known).toContain("cpu-small");
  });

  it("a name that breaks its grammar in the path is 422 saying the grammar, not a regex", async () => {
    for (const [path, words] of [["/api/profiles/a%2Fb", "a name of 1–32 characters"], ["/api/models/Big", "an id of 1–64 characters"], ["/api/stacks/a..b", "an id of 1–64 characters"]] as const) {
      const res = await s.call("GET", path);
      expect(res.status, path).toBe(422);
      expect(res.body.error.details.fields[0].msg, path).toContain(words);
      expect(res.body.error.message, path).not.toMatch(/pattern|\/\^/);
    }
  });
});

describe("profile writes", () => {
  it("creates a profile (tune with reasoning effort and an integer budget), appended so the file's comments stay", async () => {
    const before = profiles();
    const res = await s.call("POST", "/api/profiles", { body: mine });
    expect(res.status).toBe(201);
    const text = profiles();
    expect(text.startsWith(before)).toBe(true);
    expect(text).toContain(HEADER);
    expect(text).toMatch(/\[profile\.agent-hi\.tune\]\nctx_size = 16384\nenable_thinking = true\nreasoning_effort = "high"\nreasoning_budget = 2048\n/);
    expect((await s.call("GET", "/api/profiles/agent-hi")).body).toMatchObject({ origin: "file", seed: false, tune: { reasoning_budget: 2048 } });
    for (const name of ["agent-hi", "cpu-small", "rocm"]) {
      const again = await s.call("POST", "/api/profiles", { body: { ...mine, name } });
      expect(again.status, name).toBe(409);
      expect(again.body.error.code).toBe("profiles.exists");
    }
  });

  it("refuses a fractional budget, an unknown effort and an unknown key", async () => {
    for (const tune of [{ reasoning_budget: 1.5 }, { reasoning_effort: "extreme" }, { temperature: 0.2 }]) {
      const res = await s.call("POST", "/api/profiles", { body: { ...mine, tune } });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe("validation.invalid");
    }
  });

  it("updates key by key: a value sets, null removes, comments survive", async () => {
    const res = await s.call("PUT", "/api/profiles/cpu-small", { body: { intent: "Fast helpers", description: null, tune: { reasoning_effort: "medium", reasoning_budget: 512, ctx_size: null } } });
    expect(res.status).toBe(200);
    const text = profiles();
    expect(text).toContain("# 8 of the 16 Zen 5 cores; the rest stay free for hal0, Hermes and the OS.");
    expect(text).toContain('intent = "Fast helpers"');
    expect(text).not.toContain("Titles, summaries, routing decisions");
    const got = (await s.call("GET", "/api/profiles/cpu-small")).body;
    expect(got.tune).toEqual({ enable_thinking: false, reasoning_effort: "medium", reasoning_budget: 512, vision: false, speculation: "off" });
    expect((await s.call("PUT", "/api/profiles/nope", { body: { intent: "x" } })).body.error.code).toBe("profiles.not_found");
    expect((await s.call("PUT", "/api/profiles/cpu-small", { body: { tune: { reasoning_budget: 2.5 } } })).status).toBe(422);
  });

  it("an update the tree refuses (a reserved flag) is 422 config.invalid and writes nothing", async () => {
    const before = profiles();
    const res = await s.call("PUT", "/api/profiles/cpu-small", { body: { flags: "--port 9999" } });
    expect(res.status).toBe(422);
    expect(res.body.error.details.diagnostics[0].code).toBe("profile.flag_reserved");
    expect(profiles()).toBe(before);
  });

  it("deletes: in use → 409 naming the slots; an override reverts to its seed; a seed itself is immutable", async () => {
    const used = await s.call("DELETE", "/api/profiles/cpu-small");
    expect(used.status).toBe(409);
    expect(used.body.error).toMatchObject({ code: "profiles.in_use", details: { slots: ["utility"], stacks: [] } });

    await s.call("POST", "/api/profiles", { body: mine });
    expect((await s.call("DELETE", "/api/profiles/agent-hi")).body).toMatchObject({ deleted: true, reverted_to_seed: false });
    expect(profiles()).not.toContain("agent-hi");

    const reverted = await s.call("DELETE", "/api/profiles/comfyui");
    expect(reverted.body).toMatchObject({ deleted: true, reverted_to_seed: true });
    expect((await s.call("GET", "/api/profiles/comfyui")).body).toMatchObject({ origin: "seed", runner: ["comfyui-server"] });
    const seed = await s.call("DELETE", "/api/profiles/comfyui");
    expect(seed.status).toBe(409);
    expect(seed.body.error.code).toBe("profiles.seed_immutable");
    expect((await s.call("DELETE", "/api/profiles/nope")).status).toBe(404);

    const override = await s.call("PUT", "/api/profiles/comfyui", { body: { intent: "Images, overridden", tune: { ctx_size: 4096 } } });
    expect(override.status).toBe(200);
    expect((await s.call("GET", "/api/profiles/comfyui")).body).toMatchObject({ origin: "file", image: "ghcr.io/hal0ai/comfyui-server:latest", intent: "Images, overridden", tune: { ctx_size: 4096, enable_thinking: false } });
  });
});

describe("profile export, import and generate", () => {
  it("round-trips a profile through a .hal0profile.json envelope", async () => {
    const exp = await s.call("POST", "/api/profiles/cpu-small/export");
    expect(exp.status).toBe(200);
    expect(exp.body).toMatchObject({ kind: "hal0.profile", version: 1, name: "cpu-small", profile: { flags: "--threads 8 -b 256 -ub 256 --parallel 2 --load-mode mmap+mlock" }, checksum: expect.stringMatching(/^sha256:/) });
    expect((await s.call("POST", "/api/profiles/import", { body: { envelope: exp.body } })).body.error.code).toBe("profiles.exists");
    const dry = await s.call("POST", "/api/profiles/import", { body: { envelope: exp.body, name: "cpu-copy", dry_run: true } });
    expect(dry.body).toMatchObject({ dry_run: true, committed: false });
    expect(profiles()).not.toContain("cpu-copy");
    const imp = await s.call("POST", "/api/profiles/import", { body: { envelope: exp.body, name: "cpu-copy" } });
    expect(imp.status).toBe(201);
    expect((await s.call("GET", "/api/profiles/cpu-copy")).body).toMatchObject({ origin: "file", flags: "--threads 8 -b 256 -ub 256 --parallel 2 --load-mode mmap+mlock", tune: { ctx_size: 16384 } });
    const seedExp = await s.call("POST", "/api/profiles/flm/export");
    expect(seedExp.body.profile.device_class).toBe("npu");
    expect((await s.call("POST", "/api/profiles/nope/export")).status).toBe(404);
  });

  it("refuses a tampered, foreign, too new, invalid or nameless envelope", async () => {
    const exp = (await s.call("POST", "/api/profiles/cpu-small/export")).body;
    const cases: Array<[unknown, string]> = [
      [{ ...exp, profile: { ...exp.profile, flags: "-b 1" } }, "profiles.bad_envelope"],
      [{ ...exp, kind: "hal0.stack" }, "profiles.bad_envelope"],
      [{ kind: "hal0.profile" }, "profiles.bad_envelope"],
      [{ ...exp, version: 3 }, "profiles.envelope_too_new"],
      [seal({ kind: "hal0.profile", version: 1, name: "x", profile: { tune: { reasoning_budget: 0.5 } } }), "profiles.bad_envelope"],
      [seal({ kind: "hal0.profile", version: 1, profile: exp.profile }), "profiles.import_no_name"],
    ];
    for (const [envelope, code] of cases) {
      const res = await s.call("POST", "/api/profiles/import", { body: { envelope } });
      expect(res.status, code).toBe(400);
      expect(res.body.error.code).toBe(code);
    }
  });

  it("generates a suggestion fitted to a model and writes nothing", async () => {
    const before = profiles();
    const res = await s.call("POST", "/api/profiles/generate", { body: { model: "glm-4.5-air" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "rocm-moe-glm-4-5-air", based_on: "rocm-moe", written: false, exists: false, profile: { device_class: "gpu", backend: "rocm", cloned_from: "rocm-moe", tune: { ctx_size: 65536, enable_thinking: true, speculation: "mtp" } } });
    const coder = await s.call("POST", "/api/profiles/generate", { body: { model: "qwen2.5-coder-32b", tune: { reasoning_effort: "low", reasoning_budget: 0 } } });
    expect(coder.body.profile.tune).toMatchObject({ ctx_size: 32768, enable_thinking: false, reasoning_budget: 0, speculation: "draft", reasoning_effort: "low" });
    expect((await s.call("POST", "/api/profiles/generate", { body: { device: "gpu-vulkan" } })).body).toMatchObject({ based_on: "vulkan", name: "vulkan-custom" });
    expect((await s.call("POST", "/api/profiles/generate", { body: { device_class: "npu" } })).body.based_on).toBe("flm");
    const unknown = await s.call("POST", "/api/profiles/generate", { body: { model: "nope" } });
    expect(unknown.status).toBe(422);
    expect(profiles()).toBe(before);
  });
});

describe("a profile's masked runner word sent back", () => {
  it("keeps its secret behind its own flag; moved behind another flag, the write is refused and the secret never shows", async () => {
    const created = await s.call("POST", "/api/profiles", { body: { ...mine, runner: ["node", "../runner/fake-llama-server.mjs", "--api-key", "sk-live-77", "--alias", "chat"] } });
    expect(created.status).toBeLessThan(300);
    const read = (await s.call("GET", "/api/profiles/agent-hi")).body;
    const runner: string[] = read.runner ?? read.profile?.runner;
    expect(runner).toEqual(["node", "../runner/fake-llama-server.mjs", "--api-key", "[redacted]", "--alias", "chat"]);
    // The words moved: the mask now stands behind --alias, which no read masks.
    const moved = await s.call("PUT", "/api/profiles/agent-hi", { body: { runner: ["node", "../runner/fake-llama-server.mjs", "--alias", "[redacted]", "--api-key", "chat"] } });
    expect(moved.body.error).toMatchObject({ code: "validation.invalid", details: { reason: "masked_value" } });
    expect(profiles()).toContain("sk-live-77");
    expect(JSON.stringify((await s.call("GET", "/api/profiles/agent-hi")).body)).not.toContain("sk-live-77");
    // Sent back as read, with a word added at the end: kept.
    const kept = await s.call("PUT", "/api/profiles/agent-hi", { body: { runner: [...runner, "--verbose"] } });
    expect(kept.status).toBe(200);
    expect(profiles()).toContain("sk-live-77");
  });
});
