import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { SlotType, SlotView } from "../../schema/index.js";

/**
 * A runner's command line is world-readable (`/proc/<pid>/cmdline`, `ps`; a
 * container's runner is a process of the host too): any local user reads an
 * `--api-key KEY` or `--hf-token TOKEN` given there. llama-server reads both
 * from its environment as well (`LLAMA_API_KEY`, `HF_TOKEN`: help.txt's
 * `(env: …)`), which /proc shows to its owner and root alone, so the process
 * and docker runtimes move them there out of the argv they start.
 *
 * The environment, not `--api-key-file`: llama-server reads `LLAMA_API_KEY`
 * with the very handler of `--api-key`, so the runner takes each value exactly
 * as it would have taken the flag, whatever its build — the current one's
 * comma list (its CSV reader: quotes, nothing trimmed) or an older one's single
 * key (build 4748 has no list: `a,b` is one key). A key file would not: its
 * lines are taken whole, and the current build skips a line starting with `#`
 * as a comment (a key `#…` would be dropped, and a runner with only that key
 * would want none). Several `--api-key` flags (the compiler keeps the last of
 * them: profile.api_key_repeated) and a `LLAMA_API_KEY` the slot declares
 * (first) are joined with `,` into the one variable: the list the current
 * build reads; an older build takes one key, so give it one.
 * The token's flag wins over a declared `HF_TOKEN`, as it does in the runner.
 *
 * Only for the slot types whose argv hal0 writes in llama-server's words
 * (LLAMA_SERVER_TYPES: llm, embedding, reranking), and only for a runner probed as llama-server (the
 * view's `secrets_in_env`): another runner (FastFlowLM), or one not probed,
 * may not read the variables and would run with no key, so it keeps the flags
 * in its argv. The spec, its hash and the runtime record (the docker label)
 * keep the argv as the config wrote it.
 */

/** The slot types whose runner is llama-server: hal0 writes their argv in its words (context, tune, `--metrics`, its secret flags). */
export const LLAMA_SERVER_TYPES: ReadonlySet<string> = new Set<SlotType>(["llm", "embedding", "reranking"]);

/** The variables the secret flags' values move to. */
export const API_KEY_ENV = "LLAMA_API_KEY";
export const HF_TOKEN_ENV = "HF_TOKEN";

export interface HiddenArgv {
  readonly argv: readonly string[];
  /** The variables that carry what was taken out (over the declared env). */
  readonly env: Readonly<Record<string, string>>;
}

/** The secret flag a word is (`--api-key`, `--hf-token`, `-hft`, or one of them with `=VALUE`), if it is one. */
function secretFlag(word: string): { flag: string; inline: string | undefined } | undefined {
  const eq = word.startsWith("--") ? word.indexOf("=") : -1;
  const flag = eq > 0 ? word.slice(0, eq) : word;
  if (flag !== "--api-key" && flag !== "--hf-token" && flag !== "-hft") return undefined;
  return { flag, inline: eq > 0 ? word.slice(eq + 1) : undefined };
}

/** A secret flag's value in an argv: where it stands, the flag it is the value of, and whether it is that word's own `--flag=VALUE`. */
export interface SecretValue {
  readonly index: number;
  readonly flag: "--api-key" | "--hf-token" | "-hft";
  readonly inline: boolean;
}

/** The values of `argv`'s secret flags after its `prefix` words, in order (a flag without its value has none, and stays). */
export function secretValues(argv: readonly string[], prefix: number): SecretValue[] {
  const out: SecretValue[] = [];
  for (let i = prefix; i < argv.length; i++) {
    const secret = secretFlag(argv[i]!);
    if (secret === undefined) continue;
    if (secret.inline !== undefined) out.push({ index: i, flag: secret.flag as SecretValue["flag"], inline: true });
    else if (i + 1 < argv.length) out.push({ index: ++i, flag: secret.flag as SecretValue["flag"], inline: false });
  }
  return out;
}

/** A secret value's text (the word after its flag, or what follows `=`). */
export function secretText(argv: readonly string[], at: SecretValue): string {
  const word = argv[at.index]!;
  return at.inline ? word.slice(word.indexOf("=") + 1) : word;
}

/**
 * `argv` with llama-server's secret flags taken out (after the runner's
 * `prefix` words, which are passed as written), their values in `env`;
 * `declared` is the env the runner gets besides (a `LLAMA_API_KEY` there keeps
 * its keys, before the flags').
 */
export function hideSecretFlags(argv: readonly string[], prefix: number, declared: Readonly<Record<string, string>> = {}): HiddenArgv {
  const values = secretValues(argv, prefix);
  const taken = new Set(values.flatMap((v) => (v.inline ? [v.index] : [v.index - 1, v.index])));
  const keys = values.filter((v) => v.flag === "--api-key").map((v) => secretText(argv, v));
  const tokens = values.filter((v) => v.flag !== "--api-key").map((v) => secretText(argv, v));
  const env: Record<string, string> = {};
  if (keys.length > 0) env[API_KEY_ENV] = [...(declared[API_KEY_ENV] === undefined ? [] : [declared[API_KEY_ENV]]), ...keys].join(",");
  if (tokens.length > 0) env[HF_TOKEN_ENV] = tokens.at(-1)!;
  return { argv: argv.filter((_, i) => !taken.has(i)), env };
}

/** What the runner of a slot's `view` is started with: its argv with the secret flags taken out, and the env that carries them (when it reads them there). */
export function runnerArgv(argv: readonly string[], prefix: number, view: Pick<SlotView, "type" | "secrets_in_env">, declared: Readonly<Record<string, string>>): HiddenArgv {
  return LLAMA_SERVER_TYPES.has(view.type) && view.secrets_in_env === true ? hideSecretFlags(argv, prefix, declared) : { argv, env: {} };
}

/** The argv and env a process runner of a slot's `view` is spawned with (a key file an earlier hal0 wrote in `dir` is removed). */
export async function spawnedArgv(argv: readonly string[], prefix: number, view: Pick<SlotView, "type" | "secrets_in_env">, dir: string, declared: Readonly<Record<string, string>> = {}): Promise<HiddenArgv> {
  await removeKeyFile(dir);
  return runnerArgv(argv, prefix, view, declared);
}

/** `<dir>/api-key`, where an earlier hal0 wrote a slot's keys for `--api-key-file`: not left on disk. */
export function removeKeyFile(dir: string): Promise<void> {
  return rm(join(dir, "api-key"), { force: true });
}

/**
 * llama-server's reading of a comma-separated list (common/arg.cpp `parse_csv_row`, which `--api-key` and
 * `LLAMA_API_KEY` go through): fields split at commas outside quotes; a field opened by `"` runs to its closing
 * `"` (`""` is a quote), a quote inside an unquoted field is itself; nothing is trimmed.
 */
export function llamaCsvRow(input: string): string[] {
  const fields: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < input.length; i++) {
    const ch = input[i]!;
    if (ch === '"') {
      if (!quoted) {
        if (field !== "") field += '"';
        else quoted = true;
      } else if (input[i + 1] === '"') {
        field += '"';
        i++;
      } else quoted = false;
    } else if (ch === "," && !quoted) {
      fields.push(field);
      field = "";
    } else field += ch;
  }
  fields.push(field);
  return fields;
}
