import type { Diagnostic } from "../schema/index.js";
import { SECRET_FLAG } from "../schema/secret-flag.js";
import { dashed, isFlag } from "./argv.js";
import type { Site, Reporter } from "./report.js";
import type { FlagTable, RunnerFacts, RunnerFlag } from "./runner-facts.js";
import { numericProblem, numericValue, suggestFlag, valueArity } from "./runner-help.js";
import { closest } from "./suggest.js";

/**
 * The argv check: every word hal0 would pass a llama-server runner, and every
 * `LLAMA_ARG_*` variable of its env, against the runner's own flag table (its
 * `--help`, parsed by runner-help.ts). Pure: the table is data the observe
 * side handed to compile. Each finding is reported at the TOML key that wrote
 * the word (a profile's `flags`, the slot's `extra_args`, an env key, or the
 * `[tune]` key hal0 maps to a flag), so an operator fixes it where it is.
 *
 * - a flag the table does not know → `slot.runner_flag_unknown` (did-you-mean),
 *   and so is a `--flag=value` word: llama-server reads each word whole and
 *   has no such form (it exits 1: `error: invalid argument: --flag=value`);
 * - a removed flag → `slot.runner_flag_removed` (the runner's own hint);
 * - a value outside a listed set, a missing value, a word after a flag that
 *   takes none, or a numeric flag's value its help does not allow (not a
 *   number, not whole, negative, out of a printed range: runner-help.ts
 *   `numericValue`) → `slot.runner_flag_value`;
 * - a deprecated flag → `slot.runner_flag_deprecated` (a warning; it runs).
 *
 * The runner would refuse the first three at start (exit 1): the sweep holds
 * such a slot back and `hal0 plan` fails, before anything starts.
 */

/** One word of a slot's argv and the key that wrote it. */
export interface SitedWord {
  readonly word: string;
  readonly site: Site;
  /** Who wrote it, for messages: "profile `rocm`'s flags", "extra_args", "[tune] speculation". */
  readonly by: string;
}

/** One env variable of a slot and the key that set it. */
export interface SitedEnv {
  readonly name: string;
  readonly value: string;
  readonly site: Site;
  readonly by: string;
}

/**
 * What hal0 suggests for a flag the runner deprecates in favour of
 * `--load-mode`: the load mode that does what the old flag did.
 */
const LOAD_MODE_FOR: Readonly<Record<string, string>> = {
  "--no-mmap": "none", "--mmap": "mmap", "--mlock": "mmap+mlock",
  "--direct-io": "dio", "-dio": "dio", "--no-direct-io": "mmap", "-ndio": "mmap",
};

/** How a runner is named in messages: `llama-server b9749`, else its version line. */
export function runnerLabel(facts: RunnerFacts): string {
  return facts.version.build !== null ? `llama-server b${facts.version.build}` : facts.version.line || "the runner";
}

/** Checks `words` (the argv after the runner prefix) and `env` against `table`; reports each finding once. */
export function checkArgv(words: readonly SitedWord[], env: readonly SitedEnv[], facts: RunnerFacts, table: FlagTable, reporter: Reporter): void {
  const label = runnerLabel(facts);
  const seen = new Set<string>();
  const report = (...args: Parameters<Reporter["report"]>) => {
    const key = `${args[0]}\0${args[1].file}\0${args[1].path.join(".")}\0${args[2]}`;
    if (seen.has(key)) return;
    seen.add(key);
    reporter.report(...args);
  };
  for (let i = 0; i < words.length; i++) {
    const { word, site, by } = words[i]!;
    if (!isFlag(word)) {
      report("slot.runner_flag_unknown", site, `\`${word}\` is not a flag of ${label}`,
        `${by} passes \`${word}\` where ${label} expects a flag; it would exit 1 at start (\`error: invalid argument: ${word}\`).`);
      continue;
    }
    const eq = word.indexOf("=");
    const name = eq < 0 ? word : word.slice(0, eq);
    // The runner reads a long flag's `_` as `-` (`--cache_reuse` is `--cache-reuse`).
    const flag = table.byName.get(dashed(name));
    if (eq >= 0) {
      // A secret flag's value (`--api-key=KEY`) is never repeated: a diagnostic is printed to terminals and CI logs.
      const secret = SECRET_FLAG.test(name);
      const shown = secret ? `${name}=[redacted]` : word;
      const value = secret ? (flag?.placeholder ?? "[redacted]") : word.slice(eq + 1);
      report("slot.runner_flag_unknown", site, `\`${shown}\` is not a flag of ${label}: it takes no \`--flag=value\` form`,
        `${by} passes \`${shown}\`; ${label} reads each word whole, knows no flag of that name and would exit 1 at start (\`error: invalid argument: ${shown}\`).${flag === undefined ? "" : ` Write it as two words: \`${name} ${value}\`.`}`);
      continue;
    }
    if (flag === undefined) {
      const hit = suggestFlag(table, name);
      report("slot.runner_flag_unknown", site, `\`${name}\` is not a flag of ${label}`,
        `${by} passes \`${name}\`; ${label} does not list it in its --help and would exit 1 at start (\`error: invalid argument: ${name}\`).${hit ? ` Did you mean \`${hit}\`?` : ""}`);
      // Its value (if any) is unknowable: skip a following non-flag word so it is not reported twice.
      if (i + 1 < words.length && !isFlag(words[i + 1]!.word)) i++;
      continue;
    }
    let value: string | undefined;
    // A value's findings point at the value when it is a word of its own (`mtp` of `--spec-type mtp`).
    let valueSite = site;
    if (flag.takes_value && i + 1 < words.length) {
      valueSite = words[i + 1]!.site;
      value = words[++i]!.word;
      i += Math.min(valueArity(flag) - 1, words.length - 1 - i); // `START END`: both words are the value
    }
    if (flag.removed) {
      const named = [...flag.removed.hint.matchAll(/--?[a-z][a-z0-9-]*/g)].map((m) => m[0]).filter((n) => table.byName.has(n) && !table.byName.get(n)!.removed);
      report("slot.runner_flag_removed", site, `\`${name}\` has been removed from ${label}`,
        `${by} passes \`${name}\`; the runner refuses it and exits 1 at start: "the argument has been removed. ${flag.removed.hint}".${named.length > 0 ? ` Did you mean \`${named[0]}\`?` : ""}`);
      continue;
    }
    if (flag.deprecated) {
      const replacement = suggestReplacement(name, flag, table);
      report("slot.runner_flag_deprecated", site, `\`${name}\` is deprecated in ${label}${replacement ? `: use \`${replacement}\`` : ""}`,
        `${by} passes \`${name}\`; ${label} still runs with it but warns that it is deprecated${flag.deprecated.replacement ? ` in favour of \`${flag.deprecated.replacement}\`` : ""}. hal0 never rewrites flags: change it by hand${replacement ? ` to \`${replacement}\`` : ""}.`);
    }
    if (!flag.takes_value) {
      if (i + 1 < words.length && !isFlag(words[i + 1]!.word)) {
        const extra = words[i + 1]!.word;
        report("slot.runner_flag_value", words[i + 1]!.site, `\`${name}\` takes no value in ${label}`,
          `${by} passes \`${name} ${extra}\`; in this runner \`${name}\` is a switch (${flag.placeholder ?? "no value"}), so \`${extra}\` would be read as an argument it refuses (exit 1). Drop \`${extra}\`.`);
        i++;
      }
      continue;
    }
    if (value === undefined) {
      report("slot.runner_flag_value", site, `\`${name}\` needs a value (${flag.placeholder ?? "a value"})`,
        `${by} ends with \`${name}\`; ${label} expects ${flag.placeholder ?? "a value"} after it and would exit 1.`);
      continue;
    }
    const bad = badValues(flag, value);
    if (bad.length > 0) {
      // `mtp` → `draft-mtp`: a value renamed by a prefix is no typo closest() would find.
      const renamed = flag.values!.filter((v) => v.endsWith(`-${bad[0]}`));
      const hit = renamed.length === 1 ? renamed[0] : closest(bad[0]!, flag.values!);
      report("slot.runner_flag_value", valueSite, `\`${name} ${value}\`: ${label} takes ${flag.list ? "a comma list of" : "one of"} ${flag.values!.join(", ")}`,
        `${by} passes \`${name} ${value}\`; ${label} refuses ${bad.map((b) => `\`${b}\``).join(", ")} and exits 1 at start.${hit ? ` Did you mean \`${hit}\`?` : ""}`);
      continue;
    }
    const number = numberFinding(flag, value, name, label);
    if (number) report("slot.runner_flag_value", valueSite, `\`${name} ${value}\`: \`${value}\` ${number.problem}`, `${by} passes \`${name} ${value}\`; ${number.detail}`);
  }
  for (const { name, value, site, by } of env) {
    const flag = table.byEnv.get(name);
    if (flag === undefined) {
      if (!name.startsWith("LLAMA_ARG_")) continue;
      const hit = closest(name, table.byEnv.keys());
      report("slot.runner_flag_unknown", site, `\`${name}\` is not a variable of ${label}`,
        `${by} sets \`${name}\`; ${label} reads no such variable, so the setting would silently not apply.${hit ? ` Did you mean \`${hit}\`?` : ""}`);
      continue;
    }
    if (flag.removed) {
      report("slot.runner_flag_removed", site, `\`${name}\` (\`${flag.canonical}\`) has been removed from ${label}`,
        `${by} sets \`${name}\`: "the argument has been removed. ${flag.removed.hint}".`);
      continue;
    }
    if (flag.deprecated) {
      const replacement = suggestReplacement(flag.canonical, flag, table);
      report("slot.runner_flag_deprecated", site, `\`${name}\` (\`${flag.canonical}\`) is deprecated in ${label}${replacement ? `: use \`${replacement}\`` : ""}`,
        `${by} sets \`${name}\`; ${label} still reads it but warns that it is deprecated${flag.deprecated.replacement ? ` in favour of \`${flag.deprecated.replacement}\`` : ""}.`);
    }
    const bad = flag.takes_value ? badValues(flag, value) : [];
    if (bad.length > 0) {
      report("slot.runner_flag_value", site, `\`${name}=${value}\`: ${label} takes ${flag.list ? "a comma list of" : "one of"} ${flag.values!.join(", ")}`,
        `${by} sets \`${name}\` (\`${flag.canonical}\`) to a value ${label} refuses at start.`);
      continue;
    }
    const number = flag.takes_value ? numberFinding(flag, value, flag.canonical, label) : null;
    if (number) report("slot.runner_flag_value", site, `\`${name}=${value}\`: \`${value}\` ${number.problem}`, `${by} sets \`${name}\` (\`${flag.canonical}\`); ${number.detail}`);
  }
}

/**
 * A numeric flag's value the help does not allow (`--ctx-size -5`,
 * `--threads 1.5`, `--parallel abc`): the summary and what the runner would
 * do with it; null when the flag takes no number or the value is one it takes.
 */
function numberFinding(flag: RunnerFlag, value: string, name: string, label: string): { problem: string; detail: string } | null {
  const spec = numericValue(flag);
  const found = spec === null ? null : numericProblem(spec, value, name);
  if (found === null) return null;
  const kind = spec!.integer === true ? "a whole number" : "a number";
  const range = spec!.min !== null && spec!.max !== null ? ` from ${spec!.min} to ${spec!.max}` : spec!.min === 0 ? ", not negative" : "";
  const words = spec!.words.length > 0 ? `, or ${spec!.words.map((w) => `\`${w}\``).join(", ")}` : "";
  return {
    problem: found.problem,
    detail: `${label} takes ${kind}${range}${words} there (\`${flag.placeholder}\`); it ${found.runs}.`,
  };
}

/** The values of `value` outside the flag's listed set (all of them for a comma list), none when it lists no set. */
function badValues(flag: RunnerFlag, value: string): string[] {
  if (flag.values === null) return [];
  const parts = flag.list ? value.split(",") : [value];
  return parts.filter((p) => !flag.values!.includes(p));
}

/** `--load-mode none` for `--no-mmap`, else the replacement flag the help names. */
function suggestReplacement(name: string, flag: RunnerFlag, table: FlagTable): string | null {
  const replacement = flag.deprecated?.replacement ?? null;
  if (replacement === null) return null;
  const mode = LOAD_MODE_FOR[name];
  const target = table.byName.get(replacement);
  if (mode !== undefined && target?.values?.includes(mode)) return `${replacement} ${mode}`;
  return replacement;
}

/**
 * Every slot's runner diagnostics, once each (slots sharing a profile share
 * its flags' findings), in the compiler's order.
 */
export function uniqueDiagnostics(lists: Iterable<readonly Diagnostic[]>): Diagnostic[] {
  const out = new Map<string, Diagnostic>();
  for (const list of lists) for (const d of list) out.set(`${d.file}\0${d.line}\0${d.column}\0${d.code}\0${d.summary}`, d);
  return [...out.values()].sort((a, b) => cmp(a.file, b.file) || a.line - b.line || a.column - b.column || cmp(a.code, b.code) || cmp(a.summary, b.summary));
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
