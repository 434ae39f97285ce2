import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { FlagTable, RunnerFlag } from "../../compiler/runner-facts.js";
import {
  FLAG_TABLE_VERSION,
  NEWEST_DIALECT,
  dialectOf,
  flagTable,
  parseLlamaHelp,
  parseRunnerVersion,
  runnerFacts,
  suggestFlag,
  valueArity,
} from "../../compiler/runner-help.js";

const fixture = (name: string): string => readFileSync(join(import.meta.dirname, "../../fixtures/llama-server", name), "utf8");

const helpText = fixture("help.txt");
const olderText = fixture("older-help.txt");
const current = parseLlamaHelp(helpText);
const older = parseLlamaHelp(olderText);

function flag(table: FlagTable, name: string): RunnerFlag {
  const f = table.byName.get(name);
  if (!f) throw new Error(`no flag ${name}`);
  return f;
}

/** Entries counted independently of the parser: lines at column 0 starting with `-`, section headers aside. */
function entryLines(text: string): string[] {
  return text.split("\n").filter((l) => l.startsWith("-") && !l.startsWith("-----"));
}

describe.each([
  ["help.txt", helpText, current],
  ["older-help.txt", olderText, older],
])("parseLlamaHelp(%s): shape", (_name, text, table) => {
  it("parses one flag per entry line", () => {
    const lines = entryLines(text);
    expect(lines.length).toBeGreaterThan(100);
    expect(table.flags).toHaveLength(lines.length);
    // Each flag's first spelling is how its entry line starts.
    table.flags.forEach((f, i) => expect(lines[i]!.startsWith(f.names[0]!)).toBe(true));
  });

  it("parses only well-formed names, and byName covers every spelling", () => {
    let spellings = 0;
    for (const f of table.flags) {
      expect(f.names.length).toBeGreaterThan(0);
      for (const n of f.names) {
        expect(n).toMatch(/^--?[A-Za-z0-9][A-Za-z0-9._+-]*$/);
        expect(table.byName.get(n)).toBe(f);
        spellings++;
      }
      expect(f.names).toContain(f.canonical);
      if (f.names.some((n) => n.startsWith("--"))) expect(f.canonical.startsWith("--")).toBe(true);
      expect(f.takes_value).toBe(f.placeholder !== null);
      if (f.placeholder !== null) expect(f.placeholder).not.toMatch(/^-|\s$/);
      if (f.list) expect(f.values).not.toBeNull();
    }
    expect(table.byName.size).toBe(spellings); // no spelling printed twice in these helps
  });

  it("byEnv covers every env variable printed", () => {
    const printed = new Set([...text.matchAll(/\(env: ([A-Z_0-9]+)\)/g)].map((m) => m[1]!));
    expect(new Set(table.byEnv.keys())).toEqual(printed);
    for (const [env, f] of table.byEnv) expect(f.env).toBe(env);
  });

  it("keeps descriptions on one line, without the env line, and never mistakes description text for a name", () => {
    for (const f of table.flags) {
      expect(f.description).not.toMatch(/\n|  /);
      expect(f.description).not.toMatch(/\(env: /);
    }
    expect(flag(table, "--ctx-size").description).toMatch(/^size of the prompt context \(default: /);
    expect(flag(table, "--control-vector-layer-range").description).toBe(
      "layer range to apply the control vector(s) to, start and end inclusive",
    );
  });

  it("parses a 680-line help well under 5 ms", () => {
    // The best of a few runs: the parser's own cost, not the load of a shared machine.
    parseLlamaHelp(text); // warm up
    let best = Infinity;
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now();
      parseLlamaHelp(text);
      best = Math.min(best, performance.now() - t0);
    }
    expect(best).toBeLessThan(5);
  });
});

describe("parseLlamaHelp: the current help (build 9749)", () => {
  it("counts 245 flags", () => {
    expect(current.flags).toHaveLength(245);
  });

  it("reads names, placeholder and description start at column 40", () => {
    const c = flag(current, "-c");
    expect(c.names).toEqual(["-c", "--ctx-size"]);
    expect(c.canonical).toBe("--ctx-size");
    expect(c.placeholder).toBe("N");
    expect(c.env).toBe("LLAMA_ARG_CTX_SIZE");
    expect(flag(current, "--predict").names).toEqual(["-n", "--predict", "--n-predict"]);
    const kvo = flag(current, "--no-kv-offload");
    expect(kvo.names).toEqual(["-kvo", "--kv-offload", "-nkvo", "--no-kv-offload"]);
    expect(kvo.canonical).toBe("--kv-offload");
    expect(kvo.takes_value).toBe(false);
    expect(kvo.description).toMatch(/^whether to enable KV cache offloading/);
    expect(flag(current, "--ui").names).toEqual(["--ui", "--webui", "--no-ui", "--no-webui"]);
  });

  it("reads placeholders with spaces and long heads whose description is on the next line", () => {
    const ot = flag(current, "-ot");
    expect(ot.names).toEqual(["-ot", "--override-tensor"]);
    expect(ot.placeholder).toBe("<tensor name pattern>=<buffer type>,...");
    expect(ot.values).toBeNull();
    expect(ot.description).toBe("override tensor buffer type");
    expect(valueArity(ot)).toBe(1);
    const range = flag(current, "--control-vector-layer-range");
    expect(range.placeholder).toBe("START END");
    expect(valueArity(range)).toBe(2);
    expect(flag(current, "-dr").placeholder).toBe("[<repo>/]<model>[:quant]");
    expect(flag(current, "-dr").values).toBeNull();
    expect(flag(current, "--fit-target").placeholder).toBe("MiB0,MiB1,MiB2,...");
  });

  it("--flash-attn takes on|off|auto", () => {
    const fa = flag(current, "-fa");
    expect(fa.canonical).toBe("--flash-attn");
    expect(fa.takes_value).toBe(true);
    expect(fa.placeholder).toBe("[on|off|auto]");
    expect(fa.values).toEqual(["on", "off", "auto"]);
    expect(fa.list).toBe(false);
    expect(fa.env).toBe("LLAMA_ARG_FLASH_ATTN");
    expect(flag(current, "--fit").values).toEqual(["on", "off"]);
  });

  it("--spec-type is a list of types, with draft-mtp and no bare mtp", () => {
    const st = flag(current, "--spec-type");
    expect(st.list).toBe(true);
    expect(st.takes_value).toBe(true);
    expect(st.values).toContain("none");
    expect(st.values).toContain("draft-simple");
    expect(st.values).toContain("draft-mtp");
    expect(st.values).toContain("ngram-cache");
    expect(st.values).not.toContain("mtp");
    expect(st.values).toHaveLength(11);
    expect(st.env).toBe("LLAMA_ARG_SPEC_TYPE");
    expect(st.description).toBe("comma-separated list of types of speculative decoding to use (default: none)");
  });

  it("sets from {…}, <a|b> and descriptions; no set from counters, ranges or open lists", () => {
    expect(flag(current, "--rope-scaling").values).toEqual(["none", "linear", "yarn"]);
    expect(flag(current, "-sm").values).toEqual(["none", "layer", "row", "tensor"]);
    expect(flag(current, "--cpu-strict").values).toEqual(["0", "1"]);
    expect(flag(current, "--numa").values).toEqual(["distribute", "isolate", "numactl"]);
    for (const open of ["-ts", "--tools", "--fit-target", "-dev", "--poll", "--override-kv", "--lora-scaled", "--chat-template", "-m"]) {
      const f = flag(current, open);
      expect(f.values, open).toBeNull();
      expect(f.list, open).toBe(false);
    }
    // `-lv N` lists 0..5 in its description but takes any number: a numeric placeholder gets no set.
    expect(flag(current, "-lv").values).toBeNull();
  });

  it("-ctk/-ctv: the allowed values of the description", () => {
    const kv = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"];
    expect(flag(current, "-ctk").values).toEqual(kv);
    expect(flag(current, "--cache-type-v").values).toEqual(kv);
    expect(flag(current, "-ctkd").values).toEqual(kv);
    expect(flag(current, "-ctk").canonical).toBe("--cache-type-k");
    expect(flag(current, "-ctkd").canonical).toBe("--spec-draft-type-k");
  });

  it("--load-mode and --reasoning-format: the `- name:` lines, plus the default", () => {
    const lm = flag(current, "-lm");
    expect(lm.canonical).toBe("--load-mode");
    expect(lm.values).toEqual(["none", "mmap", "mlock", "mmap+mlock", "dio"]);
    expect(lm.env).toBe("LLAMA_ARG_LOAD_MODE");
    expect(flag(current, "--reasoning-format").values).toEqual(["none", "deepseek", "deepseek-legacy", "auto"]);
  });

  it("deprecated flags, with or without a replacement", () => {
    for (const name of ["--no-mmap", "--mmap", "--mlock", "-dio", "--no-direct-io"]) {
      expect(flag(current, name).deprecated, name).toEqual({ replacement: "--load-mode" });
      expect(flag(current, name).removed, name).toBeNull();
    }
    expect(flag(current, "--mmap").names).toEqual(["--mmap", "--no-mmap"]);
    expect(flag(current, "--no-mmap").env).toBe("LLAMA_ARG_MMAP");
    expect(flag(current, "-dt").deprecated).toEqual({ replacement: null });
    expect(flag(current, "--load-mode").deprecated).toBeNull();
    expect(flag(current, "--ctx-size").deprecated).toBeNull();
  });

  it("removed flags, with the runner's hint", () => {
    const dm = flag(current, "--draft-max");
    expect(dm.names).toEqual(["--draft", "--draft-n", "--draft-max"]);
    expect(dm.removed).toEqual({ hint: "use --spec-draft-n-max or --spec-ngram-mod-n-max" });
    expect(dm.env).toBe("LLAMA_ARG_DRAFT_MAX");
    expect(current.byEnv.get("LLAMA_ARG_DRAFT_MAX")).toBe(dm);
    expect(dm.deprecated).toBeNull();
    expect(flag(current, "--spec-ngram-size-n").removed).toEqual({
      hint: "use the respective --spec-ngram-*-size-n or --spec-ngram-mod-n-match",
    });
    expect(current.flags.filter((f) => f.removed !== null)).toHaveLength(5);
    expect(flag(current, "--spec-draft-n-max").removed).toBeNull();
  });

  it("the removed flag's hint matches what the runner says when given it", () => {
    const stderr = fixture("removed-flag.txt");
    const said = /the argument has been removed\. (.*)$/m.exec(stderr)![1];
    expect(flag(current, "--draft-max").removed!.hint).toBe(said);
    // The usage block of that stderr parses as a one-flag table too.
    const excerpt = parseLlamaHelp(stderr);
    expect(excerpt.flags).toHaveLength(1);
    expect(excerpt.flags[0]).toEqual(flag(current, "--draft-max"));
  });

  it("--spec-draft-model has the older spellings as aliases", () => {
    const md = flag(current, "-md");
    expect(md.names).toEqual(["--spec-draft-model", "-md", "--model-draft"]);
    expect(md.canonical).toBe("--spec-draft-model");
    expect(flag(current, "--model-draft")).toBe(md);
    expect(md.placeholder).toBe("FNAME");
    expect(md.env).toBe("LLAMA_ARG_SPEC_DRAFT_MODEL");
    expect(md.description).toBe("draft model for speculative decoding (default: unused)");
  });

  it("env variables other than LLAMA_ARG_*", () => {
    expect(current.byEnv.get("HF_TOKEN")!.canonical).toBe("--hf-token");
    expect(current.byEnv.get("LLAMA_API_KEY")!.canonical).toBe("--api-key");
    expect(current.byEnv.get("LLAMA_ARG_THINK")!.canonical).toBe("--reasoning-format");
    expect(flag(current, "--top-p").env).toBeNull();
  });

  it("--reasoning, --reasoning-budget, --chat-template-kwargs", () => {
    expect(flag(current, "-rea").canonical).toBe("--reasoning");
    expect(flag(current, "--reasoning").values).toEqual(["on", "off", "auto"]);
    expect(flag(current, "--reasoning-budget").placeholder).toBe("N");
    expect(flag(current, "--chat-template-kwargs").placeholder).toBe("STRING");
  });
});

describe("parseLlamaHelp: the older help (build 4748)", () => {
  it("counts 147 flags", () => {
    expect(older.flags).toHaveLength(147);
  });

  it("-fa takes no value", () => {
    const fa = flag(older, "--flash-attn");
    expect(fa.names).toEqual(["-fa", "--flash-attn"]);
    expect(fa.takes_value).toBe(false);
    expect(fa.placeholder).toBeNull();
    expect(fa.values).toBeNull();
  });

  it("--draft-max is a live flag and -md is --model-draft", () => {
    const dm = flag(older, "--draft-max");
    expect(dm.canonical).toBe("--draft-max");
    expect(dm.removed).toBeNull();
    expect(dm.env).toBe("LLAMA_ARG_DRAFT_MAX");
    expect(dm.takes_value).toBe(true);
    const md = flag(older, "-md");
    expect(md.names).toEqual(["-md", "--model-draft"]);
    expect(md.canonical).toBe("--model-draft");
    expect(md.env).toBe("LLAMA_ARG_MODEL_DRAFT");
    expect(older.byName.has("--spec-draft-model")).toBe(false);
  });

  it("has none of the newer flags", () => {
    for (const name of ["--spec-type", "--reasoning", "-rea", "--reasoning-budget", "--chat-template-kwargs", "--load-mode"]) {
      expect(older.byName.has(name), name).toBe(false);
    }
    expect(older.flags.every((f) => f.removed === null && f.deprecated === null)).toBe(true);
  });

  it("two-word placeholders, and the older descriptions' value lists", () => {
    const ls = flag(older, "--lora-scaled");
    expect(ls.placeholder).toBe("FNAME SCALE");
    expect(valueArity(ls)).toBe(2);
    expect(valueArity(flag(older, "--lora"))).toBe(1);
    expect(valueArity(flag(older, "--mlock"))).toBe(0);
    expect(flag(older, "--reasoning-format").values).toEqual(["deepseek", "none"]);
    expect(flag(older, "-sm").values).toEqual(["none", "layer", "row"]);
    expect(flag(older, "-ctv").values).toEqual(["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]);
    expect(flag(older, "--no-mmap").names).toEqual(["--no-mmap"]);
    expect(flag(older, "--no-mmap").env).toBe("LLAMA_ARG_NO_MMAP");
  });
});

describe("parseLlamaHelp: odd input", () => {
  it("empty and non-help text give an empty table", () => {
    expect(parseLlamaHelp("").flags).toEqual([]);
    expect(parseLlamaHelp("usage: kokoro-server [options]\n  serve speech\n").flags).toEqual([]);
  });

  it("CRLF line ends, and a head without a same-line description", () => {
    const t = parseLlamaHelp("-x,    --ex N                           an example\r\n                                        (env: X_EX)\r\n--solo\r\n");
    expect(t.flags).toHaveLength(2);
    expect(flag(t, "-x")).toMatchObject({ canonical: "--ex", placeholder: "N", env: "X_EX", description: "an example" });
    expect(flag(t, "--solo")).toMatchObject({ canonical: "--solo", takes_value: false, description: "" });
  });

  it("an unsure description list gives no set", () => {
    const t = parseLlamaHelp("--kind K                                pick one\n                                        allowed values: a, b c\n");
    expect(flag(t, "--kind").values).toBeNull();
  });
});

describe("dialectOf", () => {
  it("the current help: --spec-type with draft-mtp and draft-simple, --spec-draft-model, --reasoning, --reasoning-budget, --chat-template-kwargs", () => {
    const d = dialectOf(current);
    expect([d.spec_type, d.mtp_type, d.draft_type, d.draft_flag]).toEqual([true, "draft-mtp", "draft-simple", "--spec-draft-model"]);
    expect([d.reasoning_flag, d.reasoning_budget, d.template_kwargs]).toEqual([true, true, true]);
    expect(d.id).toBe("llama-server:spec-type,mtp=draft-mtp,draft=draft-simple,draft-flag=--spec-draft-model,reasoning,budget,kwargs");
  });

  it("the older help", () => {
    expect(dialectOf(older)).toEqual({
      id: "llama-server:draft-flag=--model-draft",
      spec_type: false,
      mtp_type: null,
      draft_type: null,
      draft_flag: "--model-draft",
      reasoning_flag: false,
      reasoning_budget: false,
      template_kwargs: false,
      mmproj: false,
    });
  });

  it("NEWEST_DIALECT is the dialect of help.txt", () => {
    expect(NEWEST_DIALECT).toEqual(dialectOf(parseLlamaHelp(helpText)));
  });

  it("a build that spells MTP `mtp`, and one with no flags at all", () => {
    const t = parseLlamaHelp(
      [
        ["--spec-type none,draft-simple,mtp", "speculation types"],
        ["-md,   --model-draft FNAME", "draft model"],
        ["-rea,  --reasoning [on|off]", "reasoning"],
      ]
        .map(([head, desc]) => head!.padEnd(40) + desc)
        .join("\n"),
    );
    expect(dialectOf(t)).toMatchObject({
      id: "llama-server:spec-type,mtp=mtp,draft=draft-simple,draft-flag=--model-draft,reasoning",
      mtp_type: "mtp",
      draft_type: "draft-simple",
      draft_flag: "--model-draft",
      reasoning_flag: true,
    });
    expect(dialectOf(parseLlamaHelp("")).id).toBe("llama-server:");
  });

  it("a `--reasoning` without on/off values is not the reasoning flag", () => {
    const t = parseLlamaHelp("--reasoning                             think harder\n");
    expect(dialectOf(t).reasoning_flag).toBe(false);
  });
});

describe("parseRunnerVersion", () => {
  it("the current build", () => {
    expect(parseRunnerVersion(fixture("version.txt"))).toEqual({
      kind: "llama-server",
      build: 9749,
      commit: "d32676d77",
      line: "version: 9749 (d32676d77)",
    });
  });

  it("the older build", () => {
    expect(parseRunnerVersion(fixture("older-version.txt"))).toEqual({
      kind: "llama-server",
      build: 4748,
      commit: "c392e5094",
      line: "version: 4748 (c392e5094)",
    });
  });

  it("backend log lines before the version line", () => {
    const v = parseRunnerVersion("ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA\n" + fixture("version.txt"));
    expect(v).toMatchObject({ kind: "llama-server", build: 9749, commit: "d32676d77", line: "version: 9749 (d32676d77)" });
  });

  it("other runners", () => {
    expect(parseRunnerVersion("\n  kokoro-server 1.2.0  \nmore\n")).toEqual({ kind: "other", build: null, commit: null, line: "kokoro-server 1.2.0" });
    expect(parseRunnerVersion("")).toEqual({ kind: "other", build: null, commit: null, line: "" });
    // The version shape without a `built with` line is not llama.cpp's.
    expect(parseRunnerVersion("version: 9749 (d32676d77)\n")).toMatchObject({ kind: "other", build: null, line: "version: 9749 (d32676d77)" });
    expect(parseRunnerVersion("version: 1.2 (abc)\nbuilt with go")).toMatchObject({ kind: "other", commit: null });
    expect(parseRunnerVersion("x".repeat(500)).line).toHaveLength(200);
  });
});

describe("runnerFacts", () => {
  it("a llama-server with its help: flags and dialect", () => {
    const facts = runnerFacts(fixture("older-version.txt"), olderText, "/usr/bin/llama-server");
    expect(facts.version.build).toBe(4748);
    expect(facts.flags!.flags).toHaveLength(147);
    expect(facts.dialect!.draft_flag).toBe("--model-draft");
    expect(facts.source).toBe("/usr/bin/llama-server");
  });

  it("no help, an empty help, or another runner: no flags, no dialect", () => {
    const none = { flags: null, dialect: null };
    expect(runnerFacts(fixture("version.txt"), null, "s")).toMatchObject(none);
    expect(runnerFacts(fixture("version.txt"), "", "s")).toMatchObject(none);
    const other = runnerFacts("kokoro-server 1.2.0", helpText, "image sha256:abc");
    expect(other).toMatchObject({ ...none, version: { kind: "other", line: "kokoro-server 1.2.0" }, source: "image sha256:abc" });
  });
});

describe("suggestFlag", () => {
  it("suggests a close spelling", () => {
    expect(suggestFlag(current, "--ctx-sise")).toBe("--ctx-size");
    expect(suggestFlag(current, "--flash-atn")).toBe("--flash-attn");
    expect(suggestFlag(older, "--model-drafts")).toBe("--model-draft");
  });

  it("stays quiet when nothing is close, and never suggests a removed flag", () => {
    expect(suggestFlag(current, "--no-such-flag")).toBeUndefined();
    expect(suggestFlag(current, "--draft-maxx")).not.toBe("--draft-max");
    expect(suggestFlag(older, "--draft-maxx")).toBe("--draft-max");
  });
});

describe("FLAG_TABLE_VERSION (the runner probe keeps parsed flags under it and reads them back while it holds)", () => {
  /** What parseLlamaHelp made of the recorded help texts when FLAG_TABLE_VERSION was `version`. */
  const RECORDED = {
    version: 1,
    "help.txt": "369fa07d651b3bfddff0f4c5bc445e091b1580d663c3c8cdcf5cabb295c17a3d",
    "older-help.txt": "cd2d0f3b10e6225b8d4e888215f4dd1824a18d39857b5e436ec0c3976c1d9531",
  };

  it.each(["help.txt", "older-help.txt"] as const)("is bumped whenever the parser reads %s differently", (name) => {
    const digest = createHash("sha256").update(JSON.stringify(parseLlamaHelp(fixture(name)).flags)).digest("hex");
    if (digest === RECORDED[name]) expect(FLAG_TABLE_VERSION).toBe(RECORDED.version);
    // A parser that reads the same text differently must not meet the tables the old one stored: bump FLAG_TABLE_VERSION, then record the new digests here.
    else expect(FLAG_TABLE_VERSION, `parseLlamaHelp reads ${name} differently now: bump FLAG_TABLE_VERSION`).toBeGreaterThan(RECORDED.version);
  });

  it("builds from stored flags (JSON, as runners.json keeps them) the table and facts parsing gives", () => {
    const stored = JSON.parse(JSON.stringify(current.flags)) as RunnerFlag[];
    expect(flagTable(stored)).toEqual(current);
    const version = fixture("version.txt");
    expect(runnerFacts(version, helpText, "x", stored)).toEqual(runnerFacts(version, helpText, "x"));
  });
});
