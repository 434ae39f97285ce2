import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compile, runnerKey, sourceTree, type Model, type RunnerFacts, type RunnerFactsIndex } from "../../compiler/index.js";
import { runnerFacts } from "../../compiler/runner-help.js";
import { CODES, type Diagnostic } from "../../schema/index.js";

/**
 * The argv check and the dialect mappings, in compile: the runner facts are
 * data (here parsed from the recorded --version / --help of llama-server
 * build 9749 and of the older build 4748), so each case is a pure compile.
 */

const FACTS = join(import.meta.dirname, "../../fixtures/llama-server");
const read = (name: string) => readFileSync(join(FACTS, name), "utf8");
const CURRENT = runnerFacts(read("version.txt"), read("help.txt"), "llama-server b9749 (recorded)");
const OLDER = runnerFacts(read("older-version.txt"), read("older-help.txt"), "llama-server b4748 (recorded)");
const KOKORO = runnerFacts("kokoro-server 1.2.0\n", null, "kokoro (recorded)");

const ROOT = "/box";
const MODELS = `[model.qwen3]
path = "models/qwen3.gguf"
type = "llm"
context_length = 40960
jinja = true
mtp = true
draft = "models/qwen3-draft.gguf"
`;

/** The seeds run `llama-server`; a profiles.toml profile may name another runner. */
function facts(runner: RunnerFacts, word = "llama-server"): RunnerFactsIndex {
  return new Map([[runnerKey("process", word), runner]]);
}

function build(files: Record<string, string>, runners?: RunnerFactsIndex): { model: Model; diagnostics: Diagnostic[] } {
  const result = compile(sourceTree(ROOT, Object.entries({ "models.toml": MODELS, ...files })), [], { runners });
  const errors = result.diagnostics.filter((d) => d.severity === "error");
  expect(errors, JSON.stringify(errors, null, 2)).toEqual([]);
  return { model: result.model!, diagnostics: result.diagnostics };
}

const at = (d: Diagnostic) => `${d.file}:${d.line}:${d.column} ${d.severity} ${d.code}`;
const chat = (tune: string, extra = "") => ({ "slots/chat.toml": `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n[tune]\n${tune}\n${extra}` });

describe("the current dialect (build 9749)", () => {
  it("maps mtp to --spec-type draft-mtp, thinking to --reasoning, the effort to the template", () => {
    const { model } = build(chat(`speculation = "mtp"\nenable_thinking = true\nreasoning_effort = "high"`), facts(CURRENT));
    const argv = model.slots.chat!.spec.argv.join(" ");
    expect(argv).toContain("--spec-type draft-mtp");
    expect(argv).not.toMatch(/--spec-type mtp\b/);
    expect(argv).toContain("--reasoning on --reasoning-budget 4096");
    expect(argv).toContain(`--chat-template-kwargs {"reasoning_effort":"high"}`);
    expect(model.slots.chat!.runner).toMatchObject({ status: "checked", version: "version: 9749 (d32676d77)", diagnostics: [] });
  });

  it("maps draft to --spec-type draft-simple with --spec-draft-model, and thinking off to --reasoning off", () => {
    const { model } = build(chat(`speculation = "draft"\nenable_thinking = false`), facts(CURRENT));
    const argv = model.slots.chat!.spec.argv.join(" ");
    expect(argv).toContain("--reasoning off --chat-template-kwargs");
    expect(argv).not.toContain("--reasoning-budget");
    expect(argv).toContain("--spec-type draft-simple --spec-draft-model /box/models/qwen3-draft.gguf");
    expect(model.runnerDiagnostics).toEqual([]);
  });

  it("passes the seed profiles' flags (--load-mode none, -fa on, …) without a finding", () => {
    const seeds = ["rocm", "rocm-dnse", "rocm-moe", "vulkan"];
    const files = Object.fromEntries(seeds.map((p, i) => [`slots/s${i}.toml`, `profile = "${p}"\nmodel = "qwen3"\nport = ${8081 + i}\n${p === "vulkan" ? 'placement = { device = "gpu-vulkan" }\n' : ""}`]));
    const { model } = build(files, facts(CURRENT));
    expect(model.runnerDiagnostics).toEqual([]);
    expect(Object.values(model.slots).every((s) => s.runner.status === "checked")).toBe(true);
  });

  it("writes the same argv, and the same spec hash, for a probed current runner as for an unprobed one", () => {
    const tree = chat(`speculation = "mtp"`);
    const probed = build(tree, facts(CURRENT)).model.slots.chat!;
    const unprobed = build(tree).model.slots.chat!;
    expect(unprobed.runner.status).toBe("unprobed");
    expect(probed.spec).toEqual(unprobed.spec);
    expect(probed.spec_hash).toBe(unprobed.spec_hash);
    expect(probed.spec.observed).toEqual({ runner_dialect: CURRENT.dialect!.id });
  });
});

describe("the older dialect (build 4748)", () => {
  it("writes a drafter as --model-draft with no --spec-type, and no reasoning flags", () => {
    const { model } = build(chat(`speculation = "draft"\nenable_thinking = false`), facts(OLDER));
    const argv = model.slots.chat!.spec.argv;
    expect(argv.join(" ")).toContain("--model-draft /box/models/qwen3-draft.gguf");
    for (const flag of ["--spec-type", "--reasoning", "--reasoning-budget", "--chat-template-kwargs", "--spec-draft-model"]) expect(argv, flag).not.toContain(flag);
  });

  it("makes mtp and thinking tune_unavailable, with the runner as the reason, instead of flags it would refuse", () => {
    const { model, diagnostics } = build(chat(`speculation = "mtp"\nenable_thinking = true`), facts(OLDER));
    const slot = model.slots.chat!;
    expect(slot.tune_effective).toMatchObject({ speculation: "off", enable_thinking: false });
    expect(slot.tune_unavailable.speculation?.reason).toMatch(/llama-server b4748.*no MTP/);
    expect(slot.tune_unavailable.enable_thinking?.reason).toMatch(/neither `--reasoning` nor `--chat-template-kwargs`/);
    expect(diagnostics.filter((d) => d.code === "slot.tune_unavailable").map(at)).toEqual([
      "slots/chat.toml:5:15 warning slot.tune_unavailable",
      "slots/chat.toml:6:19 warning slot.tune_unavailable",
    ]);
    expect(slot.spec.argv).not.toContain("--spec-type");
  });

  it("makes vision tune_unavailable (the build has no --mmproj) instead of passing a flag it would refuse", () => {
    const models = `${MODELS}mmproj = "models/qwen3-mmproj.gguf"\n`;
    // A profile of plain flags both builds take (the seeds' `-fa on` and `--load-mode` are refused by the older one).
    const profile = `[profile.mine]\nrunner = ["llama-server"]\nflags = "-b 512"\ndevice_class = "cpu"\n`;
    const tree = { "models.toml": models, "profiles.toml": profile, "slots/chat.toml": `profile = "mine"\nmodel = "qwen3"\nport = 8081\n[tune]\nvision = true\nenable_thinking = false\n` };
    const older = build(tree, facts(OLDER));
    const slot = older.model.slots.chat!;
    expect(slot.spec.argv).not.toContain("--mmproj");
    expect(slot.tune_effective.vision).toBe(false);
    expect(slot.tune_unavailable.vision?.reason).toMatch(/llama-server b4748.*has no `--mmproj`/);
    expect(older.model.runnerDiagnostics).toEqual([]);
    expect(older.diagnostics.filter((d) => d.code === "slot.tune_unavailable").map(at)).toEqual(["slots/chat.toml:5:10 warning slot.tune_unavailable"]);
    // The current build takes it.
    const current = build(tree, facts(CURRENT)).model.slots.chat!;
    expect(current.spec.argv.join(" ")).toContain("--mmproj /box/models/qwen3-mmproj.gguf");
  });

  it("refuses `-fa on` (a switch there) at the profile's flags, and the spec hash differs from the current dialect's", () => {
    const tree = { "profiles.toml": `[profile.mine]\nrunner = ["llama-server"]\nflags = "-fa on -b 512"\ndevice_class = "cpu"\n`, "slots/chat.toml": `profile = "mine"\nmodel = "qwen3"\nport = 8081\n` };
    const older = build(tree, facts(OLDER)).model;
    // At the refused word itself inside the flags string (`on`).
    expect(older.runnerDiagnostics.map(at)).toEqual(["profiles.toml:3:14 error slot.runner_flag_value"]);
    expect(older.runnerDiagnostics[0]!.summary).toBe("`-fa` takes no value in llama-server b4748");
    const current = build(tree, facts(CURRENT)).model;
    expect(current.runnerDiagnostics).toEqual([]);
    expect(older.slots.chat!.spec_hash).not.toBe(current.slots.chat!.spec_hash);
    expect(older.slots.chat!.spec.observed).toEqual({ runner_dialect: "llama-server:draft-flag=--model-draft" });
  });
});

describe("the argv check's findings, each at the key that wrote the flag", () => {
  const profiles = `[profile.mine]
runner = ["llama-server"]
flags = "-fa on --draft-max 4 --no-mmap"
device_class = "cpu"
env = { LLAMA_ARG_DRAFT_MIN = "2" }
`;
  const slot = `profile = "mine"
model = "qwen3"
port = 8081

[server]
extra_args = "--spec-type mtp --no-such-flag"
env = { LLAMA_ARG_CTX_SIZ = "4096", LLAMA_ARG_FLASH_ATTN = "maybe" }
`;

  it("reports removed, unknown, badly valued and deprecated flags and variables; compile's own diagnostics stay clean", () => {
    const { model, diagnostics } = build({ "profiles.toml": profiles, "slots/chat.toml": slot }, facts(CURRENT));
    expect(diagnostics.filter((d) => CODES[d.code as keyof typeof CODES]?.stage === "runner")).toEqual([]);
    expect(model.runnerDiagnostics.map((d) => `${at(d)} ${d.summary}`)).toEqual([
      "profiles.toml:3:17 error slot.runner_flag_removed `--draft-max` has been removed from llama-server b9749",
      "profiles.toml:3:31 warning slot.runner_flag_deprecated `--no-mmap` is deprecated in llama-server b9749: use `--load-mode none`",
      "profiles.toml:5:9 error slot.runner_flag_removed `LLAMA_ARG_DRAFT_MIN` (`--draft-min`) has been removed from llama-server b9749",
      "slots/chat.toml:6:27 error slot.runner_flag_value `--spec-type mtp`: llama-server b9749 takes a comma list of none, draft-simple, draft-eagle3, draft-mtp, draft-dflash, draft-dspark, ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache",
      "slots/chat.toml:6:31 error slot.runner_flag_unknown `--no-such-flag` is not a flag of llama-server b9749",
      "slots/chat.toml:7:9 error slot.runner_flag_unknown `LLAMA_ARG_CTX_SIZ` is not a variable of llama-server b9749",
      "slots/chat.toml:7:37 error slot.runner_flag_value `LLAMA_ARG_FLASH_ATTN=maybe`: llama-server b9749 takes one of on, off, auto",
    ]);
    const byCode = (code: string) => model.runnerDiagnostics.find((d) => d.code === code)!;
    expect(byCode("slot.runner_flag_removed").detail).toContain('"the argument has been removed. use --spec-draft-n-max or --spec-ngram-mod-n-max". Did you mean `--spec-draft-n-max`?');
    expect(byCode("slot.runner_flag_unknown").detail).toContain("error: invalid argument: --no-such-flag");
    expect(byCode("slot.runner_flag_value").detail).toContain("Did you mean `draft-mtp`?");
    expect(model.runnerDiagnostics.find((d) => d.summary.startsWith("`LLAMA_ARG_CTX_SIZ`"))!.detail).toContain("Did you mean `LLAMA_ARG_CTX_SIZE`?");
    expect(model.slots.chat!.runner.diagnostics).toHaveLength(7);
  });

  it("refuses a `--flag=value` word, which llama-server (and the stand-in) reads whole and exits 1 on, and says how to write it", () => {
    const eq = `profile = "mine"\nmodel = "qwen3"\nport = 8081\n\n[server]\nextra_args = "--metrics --cache-reuse=256 --no-such=1"\n`;
    const tree = { "profiles.toml": profiles.replace('flags = "-fa on --draft-max 4 --no-mmap"', 'flags = "-fa on"').replace(/^env = .*$/m, ""), "slots/chat.toml": eq };
    const { model } = build(tree, facts(CURRENT));
    expect(model.runnerDiagnostics.map((d) => `${at(d)} ${d.summary}`)).toEqual([
      "slots/chat.toml:6:25 error slot.runner_flag_unknown `--cache-reuse=256` is not a flag of llama-server b9749: it takes no `--flag=value` form",
      "slots/chat.toml:6:43 error slot.runner_flag_unknown `--no-such=1` is not a flag of llama-server b9749: it takes no `--flag=value` form",
    ]);
    expect(model.runnerDiagnostics[0]!.detail).toContain("Write it as two words: `--cache-reuse 256`.");
    // The stand-in refuses it as the real one does, so a test box cannot start what hal0 lets through.
    const run = spawnSync(process.execPath, [join(import.meta.dirname, "../../fixtures/runner/fake-llama-server.mjs"), "--port", "0", "--cache-reuse=256"], { encoding: "utf8" });
    expect([run.status, run.stderr]).toEqual([1, "error: invalid argument: --cache-reuse=256\n"]);
  });

  it("a `--api-key=KEY` or `--hf-token=TOKEN` word is refused without repeating its secret (a diagnostic is printed to terminals and CI logs)", () => {
    const eq = `profile = "mine"\nmodel = "qwen3"\nport = 8081\n\n[server]\nextra_args = "--metrics --api-key=eqkey-8c1d --hf-token=hf_eqtoken9b2e"\n`;
    const tree = { "profiles.toml": profiles.replace('flags = "-fa on --draft-max 4 --no-mmap"', 'flags = "-fa on"').replace(/^env = .*$/m, ""), "slots/chat.toml": eq };
    const { model } = build(tree, facts(CURRENT));
    expect(JSON.stringify(model.runnerDiagnostics)).not.toMatch(/eqkey|eqtoken/);
    expect(model.runnerDiagnostics.map((d) => d.summary)).toEqual([
      "`--api-key=[redacted]` is not a flag of llama-server b9749: it takes no `--flag=value` form",
      "`--hf-token=[redacted]` is not a flag of llama-server b9749: it takes no `--flag=value` form",
    ]);
    expect(model.runnerDiagnostics[0]!.detail).toContain("Write it as two words: `--api-key KEY`.");
  });

  it("the stand-in refuses, as hal0 does, a value outside every set the help lists, however it lists it (`--load-mode`, `--numa`, `--reasoning-format`)", () => {
    for (const [build, facts] of [["", CURRENT], ["older", OLDER]] as const) {
      const listed = facts.flags!.flags.filter((f) => f.values !== null && f.removed === null);
      expect(listed.map((f) => f.canonical), build).toEqual(expect.arrayContaining(build === "" ? ["--load-mode", "--numa", "--reasoning-format", "--cache-type-k"] : ["--numa", "--reasoning-format"]));
      for (const flag of listed) {
        const name = flag.canonical;
        const run = (value: string) => spawnSync(process.execPath, [join(import.meta.dirname, "../../fixtures/runner/fake-llama-server.mjs"), name, value, "--help"], { encoding: "utf8", env: { ...process.env, HAL0_FAKE_BUILD: build } });
        expect(run("no-such-value").status, `${build} ${name} no-such-value`).toBe(1);
        expect(run(flag.values![0]!).status, `${build} ${name} ${flag.values![0]}`).toBe(0);
      }
    }
  });

  it("reads a long flag's `_` as `-`, as llama-server (and the stand-in) does: `--cache_reuse 256` passes, `--ctx_size` is a reserved flag", () => {
    const base = profiles.replace('flags = "-fa on --draft-max 4 --no-mmap"', 'flags = "-fa on"').replace(/^env = .*$/m, "");
    const slotWith = (extra: string) => `profile = "mine"\nmodel = "qwen3"\nport = 8081\n\n[server]\nextra_args = "${extra}"\n`;
    const { model } = build({ "profiles.toml": base, "slots/chat.toml": slotWith("--metrics --cache_reuse 256") }, facts(CURRENT));
    expect(model.runnerDiagnostics).toEqual([]);
    const run = spawnSync(process.execPath, [join(import.meta.dirname, "../../fixtures/runner/fake-llama-server.mjs"), "--cache_reuse", "256", "--help"], { encoding: "utf8" });
    expect(run.status).toBe(0);
    for (const spelling of ["--ctx_size 999", "--hf_repo someone/model", "--model_draft d.gguf"]) {
      const result = compile(sourceTree(ROOT, Object.entries({ "models.toml": MODELS, "profiles.toml": base, "slots/chat.toml": slotWith(spelling) })), [], { runners: facts(CURRENT) });
      expect(result.diagnostics.filter((d) => d.severity === "error").map((d) => d.code), spelling).toEqual(["profile.flag_reserved"]);
    }
  });

  it("holds a numeric flag's value to what the help says: a number, whole where the default is, not negative unless named, within a printed range", () => {
    const base = profiles.replace('flags = "-fa on --draft-max 4 --no-mmap"', 'flags = "--threads 1.5 --batch-size -3 --parallel abc"').replace(/^env = .*$/m, 'env = { LLAMA_ARG_UBATCH = "-1" }');
    const extra = `profile = "mine"\nmodel = "qwen3"\nport = 8081\n\n[server]\nextra_args = "--temp x --poll 200 --cache-reuse 99999999999 -ngl all --prio -1 --temp 0.7 --parallel -1 --seed 4294967295"\n`;
    const { model } = build({ "profiles.toml": base, "slots/chat.toml": extra }, facts(CURRENT));
    expect(model.runnerDiagnostics.map((d) => `${at(d)} ${d.summary}`)).toEqual([
      "profiles.toml:3:20 error slot.runner_flag_value `--threads 1.5`: `1.5` is not a whole number",
      "profiles.toml:3:37 error slot.runner_flag_value `--batch-size -3`: `-3` is negative",
      "profiles.toml:3:51 error slot.runner_flag_value `--parallel abc`: `abc` is not a number",
      "profiles.toml:5:9 error slot.runner_flag_value `LLAMA_ARG_UBATCH=-1`: `-1` is negative",
      "slots/chat.toml:6:22 error slot.runner_flag_value `--temp x`: `x` is not a number",
      "slots/chat.toml:6:31 error slot.runner_flag_value `--poll 200`: `200` is above 100",
      "slots/chat.toml:6:49 error slot.runner_flag_value `--cache-reuse 99999999999`: `99999999999` is out of range (its magnitude is at most 2147483647)",
    ]);
    const detail = (start: string) => model.runnerDiagnostics.find((d) => d.summary.startsWith(start))!.detail;
    expect(detail("`--threads 1.5`")).toContain("would silently run with `--threads 1`");
    // What stoi reads a number from runs with that number: not refused at start, but not what was written either; blanks before it are skipped.
    const lead = build({ "profiles.toml": base.replace(/^flags = .*$/m, 'flags = "--threads 4abc --batch-size \' 512\'"').replace(/^env = .*$/m, ""), "slots/chat.toml": `profile = "mine"\nmodel = "qwen3"\nport = 8081\n` }, facts(CURRENT)).model;
    expect(lead.runnerDiagnostics.map((d) => `${d.summary} | ${d.detail}`)).toEqual([
      "`--threads 4abc`: `4abc` is not a number | profile `mine`'s flags passes `--threads 4abc`; llama-server b9749 takes a whole number there (`N`); it reads only the number it starts with and would silently run with `--threads 4`.",
    ]);
    expect(detail("`--parallel abc`")).toContain('exits 1 at start: `error while handling argument "--parallel": stoi`');
    expect(detail("`--batch-size -3`")).toContain("takes a whole number, not negative there (`N`)");
    // The tune keys hal0 writes as numbers (`--ctx-size`, `--reasoning-budget`) pass: their schema bounds them.
    expect(model.slots.chat!.spec.argv.join(" ")).toMatch(/--ctx-size \d+/);
  });

  it("reports a finding of a profile's flags once, however many slots use the profile", () => {
    const two = { "profiles.toml": profiles, "slots/a.toml": `profile = "mine"\nmodel = "qwen3"\nport = 8081\n`, "slots/b.toml": `profile = "mine"\nmodel = "qwen3"\nport = 8082\n` };
    const { model } = build(two, facts(CURRENT));
    expect(model.slots.a!.runner.diagnostics).toHaveLength(3);
    expect(model.slots.b!.runner.diagnostics).toHaveLength(3);
    expect(model.runnerDiagnostics).toHaveLength(3);
  });

  it("checks nothing of an unprobed runner, nor of one that is not llama-server", () => {
    const tree = { "profiles.toml": profiles.replace('runner = ["llama-server"]', 'runner = ["kokoro-server"]'), "slots/chat.toml": slot };
    expect(build(tree).model.slots.chat!.runner).toMatchObject({ status: "unprobed", diagnostics: [] });
    const other = build(tree, facts(KOKORO, "kokoro-server")).model.slots.chat!.runner;
    expect(other).toMatchObject({ status: "not_checked", version: "kokoro-server 1.2.0", diagnostics: [] });
  });
});

describe("the registry", () => {
  it("holds every runner-stage code this file exercises, and no other", () => {
    const runnerCodes = Object.entries(CODES).filter(([, info]) => info.stage === "runner").map(([code]) => code).sort();
    expect(runnerCodes).toEqual(["slot.runner_flag_deprecated", "slot.runner_flag_removed", "slot.runner_flag_unknown", "slot.runner_flag_value"]);
  });
});
