import { rm } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../atomic.js";

/**
 * A process runner's command line is world-readable (`/proc/<pid>/cmdline`,
 * `ps`): any local user reads an `--api-key KEY` or `--hf-token TOKEN` given
 * there. llama-server takes both another way, so the process runtime moves
 * them out of the argv it spawns: the API keys into `<state>/slots/<name>/api-key`
 * (0600, one a line) named by `--api-key-file` (each one adds its keys), the
 * Hugging Face token into `HF_TOKEN` (its default; a process's environment is
 * its owner's alone). Only for the slot types whose argv hal0 writes in
 * llama-server's words (llm, embedding, reranking); the spec, its hash and the
 * runtime record keep the argv as the config wrote it.
 */
export const LLAMA_TYPES: ReadonlySet<string> = new Set(["llm", "embedding", "reranking"]);

export interface HiddenArgv {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** The API keys to write to `keyFile` (none: no file). */
  readonly keys: readonly string[];
}

/** `argv` with llama-server's secret flags taken out (after the runner's `prefix` words, which are passed as written). */
export function hideSecretFlags(argv: readonly string[], prefix: number, keyFile: string): HiddenArgv {
  const out = argv.slice(0, prefix);
  const keys: string[] = [];
  const env: Record<string, string> = {};
  for (let i = prefix; i < argv.length; i++) {
    const word = argv[i]!;
    const eq = word.indexOf("=");
    const flag = word.startsWith("--") && eq > 0 ? word.slice(0, eq) : word;
    const inline = flag === word ? undefined : word.slice(eq + 1);
    if (flag !== "--api-key" && flag !== "--hf-token" && flag !== "-hft") {
      out.push(word);
      continue;
    }
    const value = inline ?? argv[i + 1];
    if (value === undefined) {
      out.push(word); // a flag without its value: the runner refuses it as written
      continue;
    }
    if (inline === undefined) i++;
    if (flag === "--api-key") keys.push(...value.split(",").map((k) => k.trim()).filter((k) => k !== ""));
    else env.HF_TOKEN = value;
  }
  if (keys.length > 0) out.push("--api-key-file", keyFile);
  return { argv: out, env, keys };
}

/** The argv and env a process runner of a slot of `type` is spawned with, its API keys written to `<dir>/api-key` (0600) first. */
export async function spawnedArgv(argv: readonly string[], prefix: number, type: string, dir: string): Promise<{ argv: readonly string[]; env: Readonly<Record<string, string>> }> {
  const keyFile = join(dir, "api-key");
  if (!LLAMA_TYPES.has(type)) {
    await rm(keyFile, { force: true });
    return { argv, env: {} };
  }
  const hidden = hideSecretFlags(argv, prefix, keyFile);
  if (hidden.keys.length > 0) await writeFileAtomic(keyFile, `${hidden.keys.join("\n")}\n`, 0o600);
  else await rm(keyFile, { force: true });
  return { argv: hidden.argv, env: hidden.env };
}
