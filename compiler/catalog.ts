import { isAbsolute, join } from "node:path";
import { Profile, SEED_PROFILES, type ModelFacts } from "../schema/index.js";
import { RESERVED_ENV, RESERVED_FLAGS, reservedFlagsIn, shellSplit } from "./argv.js";
import { parseWith } from "./fast-validate.js";
import type { CompiledModelFacts, CompiledProfile } from "./model.js";
import type { Parsed } from "./read.js";
import type { Reporter } from "./report.js";

/** The seed profiles, parsed through the same schema as a person's file: once, by the first compile (not when the module loads). */
let seeds: ReadonlyMap<string, Profile> | undefined;

function seedProfiles(): ReadonlyMap<string, Profile> {
  return (seeds ??= new Map(Object.entries(SEED_PROFILES).map(([name, raw]) => [name, parseWith(Profile, raw)])));
}

/** Seeds, overridden by name by profiles.toml. Each profile's flags are split and checked once. */
export function compileProfiles(file: Parsed<{ profile: Record<string, Profile> }> | undefined, reporter: Reporter): Map<string, CompiledProfile> {
  const merged = new Map<string, { profile: Profile; origin: "seed" | "file" }>();
  for (const [name, profile] of seedProfiles()) merged.set(name, { profile, origin: "seed" });
  for (const [name, profile] of Object.entries(file?.value.profile ?? {})) merged.set(name, { profile, origin: "file" });
  const out = new Map<string, CompiledProfile>();
  for (const name of [...merged.keys()].sort()) {
    const { profile, origin } = merged.get(name)!;
    const site = { file: file?.file ?? "profiles.toml", path: ["profile", name, "flags"], target: "value" as const };
    checkEnv(profile.env, ["profile", name, "env"], file?.file ?? "profiles.toml", reporter);
    out.set(name, Object.assign({}, profile, { name, origin, flags_argv: checkedWords(profile.flags, site, reporter) }));
  }
  return out;
}

/**
 * Shell-splits `flags` or `extra_args` and refuses the flags hal0 owns.
 * Returns the words; an unterminated quote is reported and yields none.
 */
export function checkedWords(text: string, site: { file: string; path: Array<string | number>; target: "value" }, reporter: Reporter): string[] {
  // Most slots have no extra_args: nothing to split or check.
  if (text === "") return [];
  const words = shellSplit(text);
  if (words === undefined) {
    reporter.report("config.invalid_value", site, "unterminated quote", `\`${site.path.join(".")}\` has a quote that is never closed.`);
    return [];
  }
  // A flag given twice keeps its last value (normalizeArgv): a second `--api-key` drops the first key, which llama-server
  // itself would take beside it; said, so a client with that key does not meet a silent 401.
  const keys = words.filter((w) => w === "--api-key" || w.startsWith("--api-key=")).length;
  if (keys > 1) {
    reporter.report("profile.api_key_repeated", site, `\`--api-key\` is given ${keys} times; the runner gets the last key alone`,
      "A flag given twice keeps its last value. Give several keys as one value, `--api-key k1,k2` (llama-server builds that read a key list: every current one), or in a key file of your own, `--api-key-file FILE` (one key a line; it repeats).");
  }
  const reported = new Set<string>();
  for (const { written, flag } of reservedFlagsIn(words)) {
    if (reported.has(flag)) continue;
    reported.add(flag);
    const name = written === flag ? `\`${flag}\`` : `\`${written}\` (\`${flag}\`)`;
    reporter.report("profile.flag_reserved", site, `${name} is set by hal0`, `hal0 sets \`${flag}\` itself; use ${RESERVED_FLAGS[flag]} instead.`);
  }
  return words;
}

/** Refuses the variables that set a flag hal0 owns (`LLAMA_ARG_EMBEDDINGS` is `--embedding`), at each one's key. */
export function checkEnv(env: Readonly<Record<string, string>>, path: ReadonlyArray<string | number>, file: string, reporter: Reporter): void {
  for (const key of Object.keys(env)) {
    if (!Object.hasOwn(RESERVED_ENV, key)) continue;
    const flag = RESERVED_ENV[key]!;
    reporter.report("profile.flag_reserved", { file, path: [...path, key], target: "key" }, `\`${key}\` (\`${flag}\`) is set by hal0`,
      `llama-server reads \`${key}\` as \`${flag}\`, which hal0 sets itself; use ${RESERVED_FLAGS[flag]} instead.`);
  }
}

/** Models with their file paths made absolute against the config folder. */
export function compileModels(file: Parsed<{ model: Record<string, ModelFacts> }> | undefined, root: string): Map<string, CompiledModelFacts> {
  const out = new Map<string, CompiledModelFacts>();
  const models = file?.value.model ?? {};
  for (const id of Object.keys(models).sort()) {
    const facts = models[id]!;
    // Object.assign, not spread: V8 copies a wide object into a literal with
    // trailing keys several times slower (measured by `npm run bench`).
    out.set(id, Object.assign({}, facts, {
      id,
      path_abs: absolute(root, facts.path),
      draft_abs: absolute(root, facts.draft),
      mmproj_abs: absolute(root, facts.mmproj),
      chat_template_file_abs: facts.chat_template.endsWith(".jinja") ? absolute(root, facts.chat_template) : undefined,
    }));
  }
  return out;
}

function absolute(root: string, path: string | undefined): string | undefined {
  if (path === undefined) return undefined;
  return isAbsolute(path) ? path : join(root, path);
}
