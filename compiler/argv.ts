/**
 * Runner argv helpers: shell-style splitting of `flags` / `extra_args`, and
 * last-wins normalisation of llama-server style flags.
 */

/** Short and long spellings of one flag; the long one is canonical. */
const FLAG_ALIASES: ReadonlyMap<string, string> = new Map(Object.entries({
  "-m": "--model",
  "-a": "--alias",
  "-c": "--ctx-size",
  "-md": "--model-draft",
  "--spec-draft-model": "--model-draft",
  "-rea": "--reasoning",
  "-mm": "--mmproj",
  "-hf": "--hf-repo",
  "-hfr": "--hf-repo",
  "-hff": "--hf-file",
  // The other ways llama-server picks or fetches a model file (fixtures/llama-server/help.txt, older-help.txt).
  "-mu": "--model-url",
  "-dr": "--docker-repo",
  "-hfd": "--hf-repo-draft",
  "-hfrd": "--hf-repo-draft",
  "--spec-draft-hf": "--hf-repo-draft",
  "-mmu": "--mmproj-url",
  "-hfv": "--hf-repo-v",
  "-hfrv": "--hf-repo-v",
  "-hffv": "--hf-file-v",
  "-fa": "--flash-attn",
  "-ctk": "--cache-type-k",
  "-ctv": "--cache-type-v",
  "-b": "--batch-size",
  "-ub": "--ubatch-size",
  "-np": "--parallel",
  "-t": "--threads",
  "-ngl": "--n-gpu-layers",
  "--gpu-layers": "--n-gpu-layers",
  // Other spellings of the type flags hal0 sets: `--embeddings` must not make an llm slot an embedding one unseen.
  "--embeddings": "--embedding",
  "--rerank": "--reranking",
}));

/** The lengths of the long spellings among the aliases (`--gpu-layers`): any other long flag is its own canonical name. */
const LONG_ALIAS_LENGTHS: ReadonlySet<number> = new Set([...FLAG_ALIASES.keys()].filter((k) => k.startsWith("--")).map((k) => k.length));

/**
 * Flags that may appear more than once; every occurrence is kept, in order.
 * llama-server adds the keys of each `--api-key-file` to those of the others:
 * a person's own key file must not drop the one hal0 gives a swarm runner.
 */
const REPEATABLE_FLAGS = new Set(["--lora", "--lora-scaled", "--override-kv", "--control-vector", "--control-vector-scaled", "--api-key-file"]);

/**
 * Flags whose value is two words (`--control-vector-layer-range START END`, both
 * builds): dropping an earlier occurrence drops both, or the second would be
 * left as a stray word the runner refuses (`error: invalid argument: 10`).
 */
const TWO_WORD_FLAGS = new Set(["--control-vector-layer-range"]);

/**
 * llama-server's model presets (`--gpt-oss-20b-default`, …: "can download
 * weights from the internet"): each fetches a model of its own from the Hub
 * and runs it in place of `--model`. Those of the recorded builds (4748, 9749).
 */
const MODEL_PRESETS = [
  "--embd-bge-small-en-default", "--embd-e5-small-en-default", "--embd-gte-small-default", "--embd-gemma-default",
  "--fim-qwen-1.5b-default", "--fim-qwen-3b-default", "--fim-qwen-7b-default", "--fim-qwen-7b-spec", "--fim-qwen-14b-spec", "--fim-qwen-30b-default",
  "--gpt-oss-20b-default", "--gpt-oss-120b-default", "--vision-gemma-4b-default", "--vision-gemma-12b-default",
];

/** Flags hal0 sets itself; profiles and extra_args may not. Value: where to set it instead. */
export const RESERVED_FLAGS: Readonly<Record<string, string>> = {
  "--model": "the slot's `model`",
  "--host": "nothing: slots always bind 127.0.0.1",
  "--port": "the slot's `port`",
  "--alias": "the slot's `model` (the alias is the model id)",
  "--ctx-size": "`[tune] ctx_size`",
  "--mmproj": "the model's `mmproj` and `[tune] vision`",
  "--model-draft": "the model's `draft` and `[tune] speculation`",
  "--hf-repo": "the model's `hf_repo` in models.toml",
  "--hf-file": "the model's `hf_filename` in models.toml",
  // hal0 owns the model files: a runner that downloads one itself would run a file hal0 never checked nor stored.
  "--model-url": "the slot's `model` (a models.toml entry; `hal0 model pull` downloads a file)",
  "--docker-repo": "the slot's `model` (a models.toml entry; `hal0 model pull` downloads a file)",
  "--hf-repo-draft": "the model's `draft` and `[tune] speculation`",
  "--mmproj-url": "the model's `mmproj` and `[tune] vision`",
  "--hf-repo-v": "a vocoder file on disk, with `--model-vocoder`",
  "--hf-file-v": "a vocoder file on disk, with `--model-vocoder`",
  "--reasoning": "`[tune] enable_thinking`",
  "--reasoning-budget": "`[tune] enable_thinking` and `reasoning_budget`",
  "--chat-template-kwargs": "`[tune] enable_thinking` and `reasoning_effort`",
  "--embedding": "the slot's `type = \"embedding\"`",
  "--reranking": "the slot's `type = \"reranking\"`",
  ...Object.fromEntries(MODEL_PRESETS.map((preset) => [preset, "the slot's `model` (a models.toml entry; `hal0 model pull` downloads a file)"])),
};

/**
 * The variables llama-server reads for the flags hal0 sets (each flag's
 * `(env: …)` in its --help, builds 4748 to 9749): the same flags set another
 * way, so a profile's or slot's `env` may not set them either.
 */
export const RESERVED_ENV: Readonly<Record<string, string>> = {
  LLAMA_ARG_MODEL: "--model", LLAMA_ARG_HOST: "--host", LLAMA_ARG_PORT: "--port", LLAMA_ARG_ALIAS: "--alias",
  LLAMA_ARG_CTX_SIZE: "--ctx-size", LLAMA_ARG_MMPROJ: "--mmproj", LLAMA_ARG_MODEL_DRAFT: "--model-draft",
  LLAMA_ARG_SPEC_DRAFT_MODEL: "--model-draft", LLAMA_ARG_HF_REPO: "--hf-repo", LLAMA_ARG_HF_FILE: "--hf-file",
  LLAMA_ARG_REASONING: "--reasoning", LLAMA_ARG_THINK_BUDGET: "--reasoning-budget",
  LLAMA_ARG_CHAT_TEMPLATE_KWARGS: "--chat-template-kwargs", LLAMA_ARG_EMBEDDINGS: "--embedding", LLAMA_ARG_RERANKING: "--reranking",
  LLAMA_ARG_MODEL_URL: "--model-url", LLAMA_ARG_DOCKER_REPO: "--docker-repo", LLAMA_ARG_SPEC_DRAFT_HF_REPO: "--hf-repo-draft",
  LLAMA_ARG_HFD_REPO: "--hf-repo-draft", LLAMA_ARG_MMPROJ_URL: "--mmproj-url", LLAMA_ARG_HF_REPO_V: "--hf-repo-v", LLAMA_ARG_HF_FILE_V: "--hf-file-v",
};

/** `-x`, `--xy`, `--xy=1`; not `-`, and not a negative number such as `-1`. */
export function isFlag(token: string): boolean {
  if (token.length < 2 || token.charCodeAt(0) !== 45 /* - */) return false;
  const second = token.charCodeAt(1);
  return !(second >= 48 && second <= 57) && second !== 46 /* . */;
}

const SHELL_SPECIAL = /['"\\]/;
const SHELL_BLANKS = /[ \t\n\r]+/;

/** Splits a shell-quoted string into words; `undefined` when a quote is left open. */
export function shellSplit(input: string): string[] | undefined {
  // Without a quote or a backslash, the words are the runs between spaces, tabs and line breaks.
  if (!SHELL_SPECIAL.test(input)) return input.split(SHELL_BLANKS).filter((word) => word !== "");
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < input.length; i++) {
    const ch = input[i]!;
    if (quote === "'") {
      if (ch === "'") quote = undefined;
      else word += ch;
    } else if (quote === '"') {
      if (ch === '"') quote = undefined;
      else if (ch === "\\" && i + 1 < input.length && '"\\$`'.includes(input[i + 1]!)) word += input[++i];
      else word += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      inWord = true;
    } else if (ch === "\\" && i + 1 < input.length) {
      word += input[++i];
      inWord = true;
    } else if (ch === " " || ch === "\t" || ch === "\n" || ch === "\r") {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (quote) return undefined;
  if (inWord) words.push(word);
  return words;
}

/**
 * Last-wins de-duplication: a flag set twice keeps its last value, at the
 * position of its last occurrence; repeatable flags keep every occurrence.
 * Aliases count as the same flag (`-c` and `--ctx-size`). A flag takes the
 * next word as its value unless that word is itself a flag (the next two for
 * `--control-vector-layer-range START END`). Returns `argv`
 * itself when no flag repeats. The first `from` words (the runner's argv
 * prefix: `toolbox run -c llama-rocm llama-server`) are a command of their
 * own, kept word for word: neither read as flags nor dropped.
 */
export function normalizeArgv(argv: readonly string[], from = 0): string[] {
  // names[i]: the canonical name of the flag at i; null for the value word that flag takes; undefined for a stray word.
  // A slot's argv has a few dozen words: a look-back over the flags seen so far finds a repeat without a map.
  const names: Array<string | null | undefined> = new Array(argv.length);
  const seen: string[] = [];
  let repeated = false;
  for (let i = from; i < argv.length; i++) {
    const token = argv[i]!;
    if (!isFlag(token)) continue;
    const name = canonicalFlag(token);
    if (!repeated) for (let j = 0; j < seen.length; j++) if (seen[j] === name) repeated = true;
    seen.push(name);
    names[i] = name;
    const words = TWO_WORD_FLAGS.has(name) ? 2 : 1;
    for (let w = 0; w < words && !token.includes("=") && i + 1 < argv.length && !isFlag(argv[i + 1]!); w++) names[++i] = null;
  }
  if (!repeated) return argv as string[];
  // Walking back from the end, the first occurrence met is a flag's last; an earlier one is dropped with its value.
  const kept: string[] = [];
  const out: string[] = [];
  for (let i = argv.length - 1; i >= from; i--) {
    const name = names[i];
    if (typeof name === "string") {
      if (kept.includes(name) && !REPEATABLE_FLAGS.has(name)) {
        // Its value words were the last ones kept (walking back): they go with it.
        for (let j = i + 1; names[j] === null; j++) out.pop();
        continue;
      }
      kept.push(name);
    }
    out.push(argv[i]!);
  }
  for (let i = from - 1; i >= 0; i--) out.push(argv[i]!);
  return out.reverse();
}

/**
 * The canonical name of a flag token (`-c=1` → `--ctx-size`); a long flag is
 * looked up only when it may be an alias. A long flag's `_` is `-`, as
 * llama-server reads it (`--ctx_size` is `--ctx-size`), so a reserved flag
 * or a repeat is not missed for its spelling.
 */
export function canonicalFlag(token: string): string {
  const eq = token.indexOf("=");
  let written = eq < 0 ? token : token.slice(0, eq);
  if (written.charCodeAt(1) === 45 /* - */) {
    written = dashed(written);
    if (!LONG_ALIAS_LENGTHS.has(written.length)) return written;
  }
  return FLAG_ALIASES.get(written) ?? written;
}

/**
 * argv read as `normalizeArgv` reads it: each flag under its canonical name
 * with one entry per occurrence (its value, or null for a flag that takes
 * none), and the positional words (runner prefix, stray words) in order.
 */
export function groupArgv(argv: readonly string[]): { flags: Map<string, Array<string | null>>; positional: string[] } {
  const flags = new Map<string, Array<string | null>>();
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (!isFlag(token)) {
      positional.push(token);
      continue;
    }
    const eq = token.indexOf("=");
    const next = argv[i + 1];
    let value: string | null = null;
    const name = canonicalFlag(token);
    if (eq >= 0) value = token.slice(eq + 1);
    else if (next !== undefined && !isFlag(next)) {
      value = argv[++i]!;
      if (TWO_WORD_FLAGS.has(name) && i + 1 < argv.length && !isFlag(argv[i + 1]!)) value += ` ${argv[++i]!}`;
    }
    flags.set(name, [...(flags.get(name) ?? []), value]);
  }
  return { flags, positional };
}

/** A long flag with each `_` read as `-`, as llama-server reads its arguments (common/arg.cpp); other words as they are. */
export function dashed(word: string): string {
  return word.startsWith("--") && word.includes("_") ? word.replaceAll("_", "-") : word;
}

/** The reserved flags `words` set: each as written and as its canonical name, in order. */
export function reservedFlagsIn(words: readonly string[]): Array<{ written: string; flag: string }> {
  const out: Array<{ written: string; flag: string }> = [];
  for (const token of words) {
    if (!isFlag(token)) continue;
    const flag = canonicalFlag(token);
    if (Object.hasOwn(RESERVED_FLAGS, flag)) out.push({ written: token.split("=", 1)[0]!, flag });
  }
  return out;
}
