/**
 * Runner argv helpers: shell-style splitting of `flags` / `extra_args`, and
 * last-wins normalisation of llama-server style flags.
 */

/** Short and long spellings of one flag; the long one is canonical. */
const FLAG_ALIASES: Readonly<Record<string, string>> = {
  "-m": "--model",
  "-a": "--alias",
  "-c": "--ctx-size",
  "-md": "--model-draft",
  "-fa": "--flash-attn",
  "-ctk": "--cache-type-k",
  "-ctv": "--cache-type-v",
  "-b": "--batch-size",
  "-ub": "--ubatch-size",
  "-np": "--parallel",
  "-t": "--threads",
  "-ngl": "--n-gpu-layers",
  "--gpu-layers": "--n-gpu-layers",
};

/** Flags that may appear more than once; every occurrence is kept, in order. */
const REPEATABLE_FLAGS = new Set(["--lora", "--lora-scaled", "--override-kv", "--control-vector"]);

/** Flags hal0 sets itself; profiles and extra_args may not. Value: where to set it instead. */
export const RESERVED_FLAGS: Readonly<Record<string, string>> = {
  "--model": "the slot's `model`",
  "--host": "nothing: slots always bind 127.0.0.1",
  "--port": "the slot's `port`",
  "--alias": "the slot's `model` (the alias is the model id)",
  "--ctx-size": "`[tune] ctx_size`",
  "--mmproj": "the model's `mmproj` and `[tune] vision`",
  "--model-draft": "the model's `draft` and `[tune] speculation`",
};

export function canonicalFlag(token: string): string {
  const name = token.split("=", 1)[0]!;
  return FLAG_ALIASES[name] ?? name;
}

export function isFlag(token: string): boolean {
  return token.startsWith("-") && token.length > 1 && !/^-\d/.test(token);
}

/** Splits a shell-quoted string into words; `undefined` when a quote is left open. */
export function shellSplit(input: string): string[] | undefined {
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
    } else if (/\s/.test(ch)) {
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

/** Groups argv into flags with their (at most one) value; a bare word stays alone. */
function groups(argv: readonly string[]): string[][] {
  const out: string[][] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    const next = argv[i + 1];
    if (isFlag(token) && !token.includes("=") && next !== undefined && !isFlag(next)) {
      out.push([token, next]);
      i++;
    } else out.push([token]);
  }
  return out;
}

/**
 * Last-wins de-duplication: a flag set twice keeps its last value, at the
 * position of its last occurrence; repeatable flags keep every occurrence.
 * Aliases count as the same flag (`-c` and `--ctx-size`).
 */
export function normalizeArgv(argv: readonly string[]): string[] {
  const all = groups(argv);
  const lastIndex = new Map<string, number>();
  all.forEach((group, index) => {
    const head = group[0]!;
    if (isFlag(head)) lastIndex.set(canonicalFlag(head), index);
  });
  const out: string[] = [];
  all.forEach((group, index) => {
    const head = group[0]!;
    if (!isFlag(head)) return void out.push(...group);
    const name = canonicalFlag(head);
    if (REPEATABLE_FLAGS.has(name) || lastIndex.get(name) === index) out.push(...group);
  });
  return out;
}

/** The reserved flags `words` set, canonical names, in order of appearance. */
export function reservedFlagsIn(words: readonly string[]): string[] {
  return words.filter(isFlag).map(canonicalFlag).filter((f) => Object.hasOwn(RESERVED_FLAGS, f));
}
