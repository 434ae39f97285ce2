import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RESERVED_ENV, RESERVED_FLAGS, canonicalFlag } from "../../compiler/argv.js";
import { compile, groupArgv, normalizeArgv, shellSplit, sourceTree } from "../../compiler/index.js";
import { parseLlamaHelp } from "../../compiler/runner-help.js";

describe("shellSplit", () => {
  it("splits on whitespace and honours quotes and escapes", () => {
    expect(shellSplit(`-fa on  --override-kv 'a=b c' --x "q \\"u\\"" a\\ b`)).toEqual(["-fa", "on", "--override-kv", "a=b c", "--x", 'q "u"', "a b"]);
    expect(shellSplit("")).toEqual([]);
    expect(shellSplit(`--empty ""`)).toEqual(["--empty", ""]);
  });

  it("splits text without quotes or escapes on runs of spaces, tabs and line breaks only", () => {
    expect(shellSplit("  -b 512\t--no-mmap\r\n  -ub  256 ")).toEqual(["-b", "512", "--no-mmap", "-ub", "256"]);
    expect(shellSplit(" \t\n")).toEqual([]);
    // A form feed or a non-breaking space is part of a word, as in the quoting path.
    expect(shellSplit("a\fb c\u00a0d")).toEqual(["a\fb", "c\u00a0d"]);
    expect(shellSplit("a\fb 'c'")).toEqual(["a\fb", "c"]);
  });

  it("returns undefined for an unterminated quote", () => {
    expect(shellSplit(`--chat-template 'abc`)).toBeUndefined();
    expect(shellSplit(`"abc`)).toBeUndefined();
  });
});

describe("normalizeArgv", () => {
  it("keeps the last value of a flag set twice, at its last position", () => {
    expect(normalizeArgv(["-b", "512", "--no-mmap", "-b", "1024"])).toEqual(["--no-mmap", "-b", "1024"]);
  });

  it("treats aliases as one flag", () => {
    expect(normalizeArgv(["--batch-size", "512", "-fa", "on", "-b", "2048", "--flash-attn", "off"])).toEqual(["-b", "2048", "--flash-attn", "off"]);
  });

  it("keeps every occurrence of repeatable flags", () => {
    expect(normalizeArgv(["--lora", "a.gguf", "--lora", "b.gguf", "--override-kv", "x=1", "--override-kv", "y=2"]))
      .toEqual(["--lora", "a.gguf", "--lora", "b.gguf", "--override-kv", "x=1", "--override-kv", "y=2"]);
  });

  it("drops a repeated flag with its value word, keeps stray words, and lets a flag before a flag take no value", () => {
    expect(normalizeArgv(["llama-server", "-b", "512", "stray", "--no-mmap", "-b", "--jinja", "-b", "64", "--x=1", "tail"]))
      .toEqual(["llama-server", "stray", "--no-mmap", "--jinja", "-b", "64", "--x=1", "tail"]);
    // No flag repeats: the same array back.
    const argv = ["llama-server", "-b", "512", "--jinja"];
    expect(normalizeArgv(argv)).toBe(argv);
  });

  it("drops a repeated two-word flag with both its words (`--control-vector-layer-range START END`), so no stray word reaches the runner", () => {
    expect(normalizeArgv(["--control-vector-layer-range", "1", "10", "-c", "5", "--control-vector-layer-range", "2", "20"]))
      .toEqual(["-c", "5", "--control-vector-layer-range", "2", "20"]);
    expect(groupArgv(["--control-vector-layer-range", "2", "20"])).toEqual({ flags: new Map([["--control-vector-layer-range", ["2 20"]]]), positional: [] });
    // Each --control-vector-scaled adds a vector, as each --control-vector does: all kept.
    const scaled = ["--control-vector-scaled", "a.gguf", "0.5", "--control-vector-scaled", "b.gguf", "0.8"];
    expect(normalizeArgv(scaled)).toEqual(scaled);
  });

  it("keeps the first `from` words (the runner's prefix) as they are, whatever flags they hold", () => {
    expect(normalizeArgv(["toolbox", "run", "-c", "box", "llama-server", "-c", "4096", "--ctx-size", "8192"], 5))
      .toEqual(["toolbox", "run", "-c", "box", "llama-server", "--ctx-size", "8192"]);
    const argv = ["sh", "-c", "exec x", "-c", "1"];
    expect(normalizeArgv(argv, 3)).toBe(argv);
  });

  it("reads negative numbers as values and --flag=value as one token", () => {
    expect(normalizeArgv(["--reasoning-budget", "-1", "--threads=4", "--threads=8"])).toEqual(["--reasoning-budget", "-1", "--threads=8"]);
  });

  it("agrees with a plain last-occurrence reading on thousands of random argvs", () => {
    // The reference: every flag's last position found with a map, then one forward pass.
    const alias: Record<string, string> = { "-b": "--batch-size", "-t": "--threads", "-c": "--ctx-size", "--gpu-layers": "--n-gpu-layers", "-ngl": "--n-gpu-layers" };
    const isFlag = (w: string) => w.length > 1 && w[0] === "-" && !/[0-9.]/.test(w[1]!);
    const canon = (w: string) => { const n = w.split("=", 1)[0]!; return alias[n] ?? n; };
    const reference = (argv: string[]): string[] => {
      const names: Array<string | null | undefined> = [];
      const last = new Map<string, number>();
      for (let i = 0; i < argv.length; i++) {
        if (!isFlag(argv[i]!)) continue;
        names[i] = canon(argv[i]!);
        last.set(names[i]!, i);
        if (!argv[i]!.includes("=") && i + 1 < argv.length && !isFlag(argv[i + 1]!)) names[++i] = null;
      }
      const out: string[] = [];
      for (let i = 0; i < argv.length; i++) {
        const n = names[i];
        if (typeof n === "string" && last.get(n) !== i && n !== "--lora") {
          if (names[i + 1] === null) i++;
          continue;
        }
        out.push(argv[i]!);
      }
      return out;
    };
    const words = ["-b", "--batch-size", "-t", "--threads=4", "-c", "--ctx-size", "--gpu-layers", "-ngl", "--lora", "--jinja", "--x=1", "512", "-1", ".5", "a.gguf", "stray"];
    let seed = 7;
    const next = () => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed);
    for (let n = 0; n < 5000; n++) {
      const argv = Array.from({ length: next() % 14 }, () => words[next() % words.length]!);
      expect(normalizeArgv(argv), JSON.stringify(argv)).toEqual(reference(argv));
    }
  });
});

describe("a repeated --api-key", () => {
  it("is warned of where it is written, in a profile's flags or a slot's extra_args: only the last key reaches the runner; one value or a slot overriding its profile's is not", () => {
    const models = `[model.qwen3]\npath = "models/qwen3.gguf"\ntype = "llm"\n`;
    const profiles = `[profile.keyed]\nrunner = ["llama-server"]\ndevice_class = "cpu"\nflags = "--api-key p-one --threads 2 --api-key=p-two"\n[profile.one]\nrunner = ["llama-server"]\ndevice_class = "cpu"\nflags = "--api-key p-one"\n`;
    const slot = (profile: string, port: number, extra: string) => `profile = "${profile}"\nmodel = "qwen3"\nport = ${port}\n[server]\nextra_args = "${extra}"\n`;
    const result = compile(sourceTree("/box", [
      ["models.toml", models], ["profiles.toml", profiles],
      ["slots/twice.toml", slot("one", 8081, "--api-key s-one --api-key s-two")],
      ["slots/list.toml", slot("one", 8082, "--api-key s-one,s-two")],
      ["slots/over.toml", slot("one", 8083, "--api-key s-three")],
    ]), []);
    expect(result.diagnostics.filter((d) => d.code === "profile.api_key_repeated").map((d) => `${d.file} ${d.severity} ${d.summary}`)).toEqual([
      "profiles.toml warning `--api-key` is given 2 times; the runner gets the last key alone",
      "slots/twice.toml warning `--api-key` is given 2 times; the runner gets the last key alone",
    ]);
    expect(result.diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    // What the warning says: the spec carries the last key alone.
    const argv = result.model!.slots.twice!.spec.argv;
    expect(argv.filter((w) => w.startsWith("--api-key"))).toEqual(["--api-key"]);
    expect(argv[argv.indexOf("--api-key") + 1]).toBe("s-two");
    // No secret in the diagnostics (they go to terminals and CI logs).
    expect(JSON.stringify(result.diagnostics)).not.toMatch(/p-one|p-two|s-one|s-two/);
  });
});

describe("reserved flags", () => {
  it("are refused under each spelling llama-server gives them (`--embeddings`, `--rerank`, `-md`, `-hfr`)", () => {
    const models = `[model.qwen3]\npath = "models/qwen3.gguf"\ntype = "llm"\n`;
    const fetching = ["-mu https://x/m.gguf", "--model-url https://x/m.gguf", "-dr gemma3", "--docker-repo ai/gemma3", "-hfd a/b", "-hfrd a/b", "--spec-draft-hf a/b", "--hf-repo-draft a/b", "--spec_draft_hf a/b", "-mmu https://x/p.gguf", "--mmproj-url https://x/p.gguf", "-hfv a/b", "-hfrv a/b", "--hf-repo-v a/b", "-hffv f.gguf", "--hf-file-v f.gguf", "-hf a/b", "-hff f.gguf"];
    for (const spelling of ["--embeddings", "--rerank", "--embedding", "--reranking", "-md d.gguf", "--spec-draft-model d.gguf", "-hfr a/b", "-rea on", ...fetching]) {
      const slot = `profile = "rocm"\nmodel = "qwen3"\nport = 8081\n[server]\nextra_args = "${spelling}"\n`;
      const result = compile(sourceTree("/box", [["models.toml", models], ["slots/chat.toml", slot]]), []);
      expect(result.diagnostics.filter((d) => d.severity === "error").map((d) => d.code), spelling).toEqual(["profile.flag_reserved"]);
    }
  });

  it("are refused as the environment variables llama-server reads for them, at the env key (`LLAMA_ARG_EMBEDDINGS`)", () => {
    const models = `[model.qwen3]\npath = "models/qwen3.gguf"\ntype = "llm"\n`;
    const profiles = `[profile.mine]\nrunner = ["llama-server"]\ndevice_class = "cpu"\nenv = { OMP_NUM_THREADS = "8", LLAMA_ARG_MMPROJ = "p.gguf" }\n`;
    const slot = `profile = "mine"\nmodel = "qwen3"\nport = 8081\n[server]\nenv = { LLAMA_ARG_EMBEDDINGS = "1", LLAMA_ARG_THREADS = "4", LLAMA_ARG_MODEL_URL = "https://x/m.gguf" }\n`;
    const result = compile(sourceTree("/box", [["models.toml", models], ["profiles.toml", profiles], ["slots/chat.toml", slot]]), []);
    expect(result.diagnostics.filter((d) => d.severity === "error").map((d) => `${d.file}:${d.line}:${d.column} ${d.code} ${d.summary}`)).toEqual([
      "profiles.toml:4:32 profile.flag_reserved `LLAMA_ARG_MMPROJ` (`--mmproj`) is set by hal0",
      "slots/chat.toml:5:9 profile.flag_reserved `LLAMA_ARG_EMBEDDINGS` (`--embedding`) is set by hal0",
      "slots/chat.toml:5:62 profile.flag_reserved `LLAMA_ARG_MODEL_URL` (`--model-url`) is set by hal0",
    ]);
  });

  it("list every variable the recorded builds name for a reserved flag", () => {
    for (const help of ["help.txt", "older-help.txt"]) {
      const table = parseLlamaHelp(readFileSync(join(import.meta.dirname, "../../fixtures/llama-server", help), "utf8"));
      for (const flag of table.flags) {
        const reserved = flag.names.map(canonicalFlag).find((n) => Object.hasOwn(RESERVED_FLAGS, n));
        if (reserved !== undefined && flag.env !== null) expect(RESERVED_ENV[flag.env], `${help} ${flag.env}`).toBe(reserved);
      }
    }
  });

  it("cover every flag of the recorded builds that picks or downloads a model file, under each of its spellings", () => {
    // `--hf-token` is left out: it picks nothing, and only the downloads reserved here would use it.
    const fetching = /download|model repository|Hugging Face model file|Docker Hub|URL to a multimodal projector|Same as --hf-repo/;
    let presets = 0;
    for (const help of ["help.txt", "older-help.txt"]) {
      const table = parseLlamaHelp(readFileSync(join(import.meta.dirname, "../../fixtures/llama-server", help), "utf8"));
      for (const flag of table.flags) {
        const reserved = flag.names.map(canonicalFlag).filter((n) => Object.hasOwn(RESERVED_FLAGS, n));
        if (fetching.test(flag.description)) expect(reserved.length, `${help} ${flag.names.join(", ")}`).toBe(flag.names.length);
        if (/can download weights/.test(flag.description)) presets++;
        // A flag reserved under one spelling is reserved under all, as the same flag.
        if (reserved.length > 0) expect(new Set(flag.names.map(canonicalFlag)), `${help} ${flag.names.join(", ")}`).toEqual(new Set([reserved[0]]));
      }
    }
    expect(presets).toBeGreaterThan(10); // the model presets (`--gpt-oss-20b-default`) were read
  });
});
