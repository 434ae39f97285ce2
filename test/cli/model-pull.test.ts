import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { splitSet, startFakeHub, type FakeHub } from "../helpers/fake-hub.js";
import { freePort } from "../reconciler/process-helpers.js";
import { ggufBytes, modelKvs } from "../server/gguf-writer.js";
import { main } from "../../cli/index.js";
import { captureIo } from "./helpers.js";

const run = promisify(execFile);
const HAL0 = join(import.meta.dirname, "../../bin/hal0.js");
const data = ggufBytes({ kvs: modelKvs({ arch: "gemma3", ctx: 8192 }), tensors: [{ name: "w", dims: [64 * 1024] }] });
/** Other bytes (the stand-in Hub serves blobs by sha256), served corrupted. */
const broken = ggufBytes({ kvs: modelKvs({ arch: "gemma3", ctx: 4096 }), tensors: [{ name: "w", dims: [64 * 1024] }] });
/** The parts of a split model. */
const parts = [2048, 1024].map((n) => ggufBytes({ kvs: modelKvs({ arch: "gemma3", ctx: 8192, name: `part ${n}` }), tensors: [{ name: "w", dims: [n] }] }));

/** `hal0 model pull` (the built CLI) against a local stand-in for the Hub: JSON lines, the registered entry, the refusals' exit status. */
describe("hal0 model pull (the built CLI)", () => {
  let hub: FakeHub;
  let dir: string;
  const hal0 = (args: string[]) => run(process.execPath, [HAL0, ...args, "--config", join(dir, "etc"), "--state", join(dir, "state")], { env: { ...process.env, HF_ENDPOINT: hub.endpoint } })
    .then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
  beforeAll(async () => {
    hub = await startFakeHub({ repos: { "acme/Gemma-Tiny-GGUF": { files: { "Gemma-Tiny-Q4_K_M.gguf": data, "Broken-Q4_K_M.gguf": broken } }, "acme/Gemma-Split-GGUF": { files: splitSet("Gemma-Split-Q8_0", parts) } } });
    dir = mkdtempSync(join(tmpdir(), "hal0-model-pull-"));
    mkdirSync(join(dir, "etc"), { recursive: true });
    writeFileSync(join(dir, "etc/hal0.toml"), `[models]\nstore = "store"\n`);
  });
  afterAll(async () => {
    await hub.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("--json: one JSON line per update, the last one done; the model is registered as the file's stem", async () => {
    const res = await hal0(["model", "pull", "acme/Gemma-Tiny-GGUF", "Gemma-Tiny-Q4_K_M.gguf", "--json"]);
    expect(res.code, res.stderr).toBe(0);
    const lines = res.stdout.trim().split("\n").map((l) => JSON.parse(l) as { model_id: string; state: string; bytes: number });
    expect(lines.at(-1)).toMatchObject({ model_id: "gemma-tiny-q4_k_m", state: "done", bytes: data.length });
    const models = readFileSync(join(dir, "etc/models.toml"), "utf8");
    expect(models).toMatch(/gemma-tiny-q4_k_m = \{ name = /);
    expect(models).toContain(`sha256 = "${createHash("sha256").update(data).digest("hex")}"`);
    expect(models).toContain('architecture = "gemma3"');
  });

  it("--json: a pull that fails after its progress lines ends with its failure document on one line too (model.pull_failed, exit 1)", async () => {
    hub.corrupt("acme/Gemma-Tiny-GGUF", "Broken-Q4_K_M.gguf", 100);
    const res = await hal0(["model", "pull", "acme/Gemma-Tiny-GGUF", "Broken-Q4_K_M.gguf", "--id", "broken", "--json"]);
    expect(res.code, res.stderr).toBe(1);
    const lines = res.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.length).toBeGreaterThan(1);
    expect(lines.at(-2)).toMatchObject({ model_id: "broken", state: "failed", reason: "checksum" });
    expect(lines.at(-1)).toMatchObject({ ok: false, exit_code: 1, diagnostics: [{ code: "model.pull_failed" }] });
  });

  it("refusals exit 1 with their code: the id already registered, a repo the Hub does not have", async () => {
    const again = await hal0(["model", "pull", "acme/Gemma-Tiny-GGUF", "Gemma-Tiny-Q4_K_M.gguf"]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("model.already_exists");
    const missing = await hal0(["model", "pull", "acme/nothing", "x.gguf", "--id", "x"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("model.not_found");
  });

  it("--json: a pull refused before any progress (the id registered already, a repo the Hub lacks, a usage error) is its failure document on one line too", async () => {
    for (const [args, code, exit] of [
      [["model", "pull", "acme/Gemma-Tiny-GGUF", "Gemma-Tiny-Q4_K_M.gguf", "--json"], "model.already_exists", 1],
      [["model", "pull", "acme/nothing", "x.gguf", "--id", "x", "--json"], "model.not_found", 1],
      [["model", "pull", "acme/nothing", "--json"], "cli.usage", 64],
    ] as const) {
      const io = captureIo({ ...process.env, HF_ENDPOINT: hub.endpoint } as Record<string, string>);
      expect(await main([...args, "--config", join(dir, "etc"), "--state", join(dir, "state")], io), args.join(" ")).toBe(exit);
      const lines = io.out().trim().split("\n");
      expect(lines, io.out()).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ ok: false, exit_code: exit, diagnostics: [{ code }] });
    }
  });

  it("an argument the pull refuses is named as the command line names it (--id, REPO, --revision), not as the REST route's field", async () => {
    const id = await hal0(["model", "pull", "acme/Gemma-Tiny-GGUF", "x.gguf", "--id", "BAD ID"]);
    expect(id.code).toBe(1);
    expect(id.stderr).toMatch(/^hal0 model: validation\.invalid: invalid argument: --id: an id of 1–64 characters/);
    const two = await hal0(["model", "pull", "not a repo", "x.gguf", "--id", "x", "--revision", "../up"]);
    expect(two.code).toBe(1);
    expect(two.stderr).toMatch(/^hal0 model: validation\.invalid: invalid arguments: REPO: an org\/name repository id; --revision: /);
    expect(two.stderr).not.toContain("body.");
  });

  it("a Hub model a slot uses but this host lacks: plan notes model.not_installed; with [models] pull_on_apply, apply pulls it first, then starts the slot", async () => {
    const box = join(dir, "box2");
    mkdirSync(join(box, "slots"), { recursive: true });
    const port = await freePort();
    const settings = `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n\n[models]\nstore = "store"\n`;
    writeFileSync(join(box, "hal0.toml"), settings);
    writeFileSync(join(box, "profiles.toml"), `[profile.cpu]\nrunner = ["hal0-fake-llama-server"]\nflags = "--threads 2"\ndevice_class = "cpu"\n`);
    writeFileSync(join(box, "models.toml"), `[model.gemma]\nhf_repo = "acme/Gemma-Tiny-GGUF"\nhf_filename = "Gemma-Tiny-Q4_K_M.gguf"\n`);
    writeFileSync(join(box, "slots/chat.toml"), `profile = "cpu"\nmodel = "gemma"\nport = ${port}\n\n[tune]\nctx_size = 4096\n`);
    const state = join(dir, "state2");
    const cli = (args: string[]) => run(process.execPath, [HAL0, ...args, "--config", box, "--state", state], { env: { ...process.env, HF_ENDPOINT: hub.endpoint } })
      .then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);

    const plan = await cli(["plan"]);
    expect(plan.code, plan.stderr).toBe(0);
    expect(plan.stderr).toContain("note: model.not_installed: model gemma (acme/Gemma-Tiny-GGUF/Gemma-Tiny-Q4_K_M.gguf, used by slot chat) is not on this host: pull it with hal0 model pull acme/Gemma-Tiny-GGUF Gemma-Tiny-Q4_K_M.gguf --id gemma, or set [models] pull_on_apply = true");

    writeFileSync(join(box, "hal0.toml"), settings.replace('store = "store"', 'store = "store"\npull_on_apply = true'));
    expect((await cli(["plan"])).stderr).toContain("hal0 apply pulls it first ([models] pull_on_apply = true)");
    try {
      const apply = await cli(["apply", "--yes"]);
      expect(apply.code, `${apply.stdout}${apply.stderr}`).toBe(0);
      expect(apply.stdout).toContain("model gemma: not installed; pulling it first");
      const models = readFileSync(join(box, "models.toml"), "utf8");
      expect(models).toContain('path = "store/Gemma-Tiny-Q4_K_M.gguf"');
      expect(models).toContain(`sha256 = "${createHash("sha256").update(data).digest("hex")}"`);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      const props = (await (await fetch(`http://127.0.0.1:${port}/props`)).json()) as { argv: string[] };
      expect(props.argv).toContain(join(box, "store/Gemma-Tiny-Q4_K_M.gguf"));
      expect((await cli(["plan"])).stderr).not.toContain("model.not_installed");

      // A split model: apply pulls every part, beside the first one its entry names.
      await cli(["down"]);
      writeFileSync(join(box, "models.toml"), `[model.gemma]\nhf_repo = "acme/Gemma-Split-GGUF"\nhf_filename = "Gemma-Split-Q8_0-00001-of-00002.gguf"\n`);
      const split = await cli(["apply", "--yes"]);
      expect(split.code, `${split.stdout}${split.stderr}`).toBe(0);
      expect(readFileSync(join(box, "models.toml"), "utf8")).toContain('path = "store/Gemma-Split-Q8_0-00001-of-00002.gguf"');
      for (const [i, n] of Object.keys(splitSet("Gemma-Split-Q8_0", parts)).entries()) expect(createHash("sha256").update(readFileSync(join(box, "store", n))).digest("hex"), n).toBe(createHash("sha256").update(parts[i]!).digest("hex"));

      // A later part gone: the model is not installed (llama.cpp cannot load it), so plan says so and apply pulls the set again.
      const second = join(box, "store", Object.keys(splitSet("Gemma-Split-Q8_0", parts))[1]!);
      rmSync(second);
      expect((await cli(["plan"])).stderr).toContain("model.not_installed: model gemma");
      const again = await cli(["apply", "--yes"]);
      expect(again.code, `${again.stdout}${again.stderr}`).toBe(0);
      expect(again.stdout).toContain("model gemma: not installed; pulling it first");
      expect(createHash("sha256").update(readFileSync(second)).digest("hex")).toBe(createHash("sha256").update(parts[1]!).digest("hex"));
    } finally {
      await cli(["down"]);
    }
  });

  it("with [models] pull_on_apply, a sha256 the entry records is what the bytes must hash to: the Hub's other bytes fail the apply, nothing placed, the pin kept", async () => {
    const box = join(dir, "box3");
    mkdirSync(join(box, "slots"), { recursive: true });
    const port = await freePort();
    writeFileSync(join(box, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n\n[models]\nstore = "store"\npull_on_apply = true\n`);
    writeFileSync(join(box, "profiles.toml"), `[profile.cpu]\nrunner = ["hal0-fake-llama-server"]\nflags = "--threads 2"\ndevice_class = "cpu"\n`);
    const pinned = createHash("sha256").update("the bytes a person verified").digest("hex");
    const models = `[model.gemma]\nhf_repo = "acme/Gemma-Tiny-GGUF"\nhf_filename = "Gemma-Tiny-Q4_K_M.gguf"\nsha256 = "${pinned}"\n`;
    writeFileSync(join(box, "models.toml"), models);
    writeFileSync(join(box, "slots/chat.toml"), `profile = "cpu"\nmodel = "gemma"\nport = ${port}\n\n[tune]\nctx_size = 4096\n`);
    const cli = (args: string[]) => run(process.execPath, [HAL0, ...args, "--config", box, "--state", join(dir, "state3")], { env: { ...process.env, HF_ENDPOINT: hub.endpoint } })
      .then((r) => ({ code: 0, ...r }), (e: { code: number; stdout: string; stderr: string }) => e);
    try {
      const apply = await cli(["apply", "--yes"]);
      expect(apply.code, `${apply.stdout}${apply.stderr}`).toBe(1);
      expect(apply.stderr).toContain("model.pull_failed");
      expect(apply.stderr).toContain(`not ${pinned}`);
      expect(readFileSync(join(box, "models.toml"), "utf8")).toBe(models);
      expect(existsSync(join(box, "store")) ? readdirSync(join(box, "store")) : []).toEqual([]);
    } finally {
      await cli(["down"]);
    }
  });
});
