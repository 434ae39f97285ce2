import { compile, countDiagnostics, loadTree, ConfigNotFoundError, configNotFoundMessage, runnerKey, type RunnerFacts } from "../compiler/index.js";
import { runnerTargets, withRunners } from "../reconciler/runner-observe.js";
import { RunnerProbe } from "../reconciler/runner-probe.js";
import { findingDiagnostic, preflight } from "../reconciler/preflight.js";
import type { Diagnostic } from "../schema/index.js";
import { redactText } from "../server/redact.js";
import { CliError, EXIT_ERROR, EXIT_OK, parseCommandArgs, type CliIo } from "./io.js";
import { configAdvice, configDir, statePath } from "./paths.js";
import { formatAnnotation, formatDiagnostic, formatSummary } from "./format-diagnostics.js";

export const VALIDATE_HELP = `hal0 validate [--config DIR] [--state DIR] [--json] [--strict] [--runners]

Compiles the whole config tree and reports every problem, each at its file:line:col.
Then, when it compiles, checks the host as apply will meet it: each enabled slot's
runner is found and executable (process runtime: PATH, then hal0's bin/; a path
with / against the config folder), its model files (path, and draft, mmproj,
chat template when used) exist and are readable, and a GGUF model's header
agrees: ctx_size within its training context, models.toml's architecture and
context_length as the header says. Those are warnings (slot.runner_missing,
slot.model_missing, slot.model_unreadable, slot.ctx_exceeds_training,
slot.model_fact_mismatch).
Each slot's argv is checked against its runner's flag table (its --help) when hal0
knows the runner: plain validate reads the facts the state folder caches (hal0 plan,
apply and serve ask each runner once) and says which runners it has none for;
--runners asks the runners now. A removed, unknown or badly valued flag is an error
(slot.runner_flag_removed, slot.runner_flag_unknown, slot.runner_flag_value), a
deprecated one a warning (slot.runner_flag_deprecated), each at the key that wrote it.
  --config DIR   the config folder (default: $HAL0_CONFIG, $HAL0_HOME/etc/hal0, /etc/hal0)
  --state DIR    the state folder whose runner facts are read (default: $HAL0_STATE, $HAL0_HOME/var/lib/hal0, /var/lib/hal0)
  --runners      ask each runner --version and --help now (cached by binary path, size and mtime)
  --json         print {ok, exit_code, valid, error_count, warning_count, diagnostics[], runners[]}
                 instead of text (ok and exit_code as every command's --json failure has them)
  --strict       the host checks are errors: exit 1 when any fails
Exit status: 0 valid, 1 invalid (or no config folder: config.not_found), 64 usage error.`;

/** `hal0 validate`: exit 0 valid, 1 invalid, usage errors as main maps them. */
export async function runValidate(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({
    args, strict: true, allowPositionals: false,
    options: { config: { type: "string" }, state: { type: "string" }, json: { type: "boolean", default: false }, strict: { type: "boolean", default: false }, runners: { type: "boolean", default: false } },
  });
  const root = configDir(values.config, io.env, io.cwd);
  const loaded = await loadTree(root).catch((err: unknown) => (err instanceof ConfigNotFoundError ? undefined : Promise.reject(err)));
  if (loaded === undefined) {
    const message = configNotFoundMessage(root);
    if (!values.json) throw new CliError("config.not_found", message);
    // The same line as without --json, which main gives where the folder came from when --config did not name it.
    const missing = { code: "config.not_found", severity: "error", summary: `${message}${configAdvice(values.config, io.env)}`, detail: `${root} does not exist or is not a folder; pass --config DIR, or set HAL0_CONFIG or HAL0_HOME.`, file: null, line: null, column: null, path: [], related: [] };
    io.stdout.write(`${JSON.stringify({ ok: false, exit_code: EXIT_ERROR, valid: false, error_count: 1, warning_count: 0, diagnostics: [missing], runners: [] }, null, 2)}\n`);
    return EXIT_ERROR;
  }
  // The runners' facts: from the state folder's cache (fast, nothing runs), or asked now with --runners.
  const probe = new RunnerProbe({ stateDir: statePath(values.state, io.env, io.cwd), root, env: process.env });
  const observed = await withRunners(compile(loaded.tree, loaded.diagnostics), loaded.tree, loaded.diagnostics, probe, values.runners ? "probe" : "cached");
  const compiled = observed.result;
  const unknown = compiled.model ? runnerTargets(compiled.model).filter((t) => !observed.runners.has(runnerKey(t.runtime, t.word, t.path))) : [];
  const runnerNotes = unknown.map((t) => `${t.runtime === "docker" ? "image" : "runner"} \`${t.word}\`: ${values.runners ? `could not be asked (${observed.probe?.failed.get(runnerKey(t.runtime, t.word, t.path)) ?? "not found"})` : "no facts cached (run hal0 validate --runners, or hal0 plan)"}; its slots' flags are not checked`);
  // The host checks (a pure compile cannot make them), for a tree that compiles: runners are looked up on
  // hal0's own PATH, as the process driver spawns them (with process.env, whatever the caller's io.env).
  const found = compiled.model ? await preflight(compiled.model, { env: process.env, texts: loaded.tree.files }) : [];
  const diagnostics = [...compiled.diagnostics, ...(compiled.model?.runnerDiagnostics ?? []), ...found.map((f) => findingDiagnostic(f, values.strict ? "error" : "warning"))].sort(byPosition);
  const { errors, warnings } = countDiagnostics(diagnostics);
  const text = { root, cwd: io.cwd, color: !io.env.NO_COLOR && io.stdout.isTTY === true, texts: loaded.tree.files };
  if (values.json) {
    const runners = compiled.model ? runnerTargets(compiled.model).map((t) => ({ runner: t.word, runtime: t.runtime, ...runnerSummary(observed.runners.get(runnerKey(t.runtime, t.word, t.path))) })) : [];
    io.stdout.write(`${JSON.stringify({ ok: errors === 0, exit_code: errors === 0 ? EXIT_OK : EXIT_ERROR, valid: errors === 0, error_count: errors, warning_count: warnings, diagnostics, runners }, null, 2)}\n`);
  } else {
    for (const d of diagnostics) io.stdout.write(`${formatDiagnostic(d, text)}\n\n`);
    // A probe's failure quotes what the runner printed, run with its slot's env: masked as every CLI line quoting a runner.
    for (const note of runnerNotes) io.stderr.write(redactText(`note: ${note}\n`));
    io.stdout.write(`${formatSummary(errors, warnings, root, text)}\n`);
  }
  // Under --json stdout is the one document (`validate --json > report.json`, `| jq`): the annotations go to stderr, which the runner reads them from too.
  const annotations = values.json ? io.stderr : io.stdout;
  if (io.env.GITHUB_ACTIONS === "true") for (const d of diagnostics) annotations.write(`${formatAnnotation(d, text)}\n`);
  return errors === 0 ? EXIT_OK : EXIT_ERROR;
}

/** A runner as validate --json lists it: checked (a llama-server with a flag table), not_checked (another runner), or unprobed. */
function runnerSummary(facts: RunnerFacts | undefined): { status: "checked" | "not_checked" | "unprobed"; version: string | null; source: string | null } {
  if (facts === undefined) return { status: "unprobed", version: null, source: null };
  return { status: facts.flags ? "checked" : "not_checked", version: facts.version.line, source: facts.source };
}

/** The compiler's order (file, line, column, code, summary), kept with the host checks merged in. */
function byPosition(a: Diagnostic, b: Diagnostic): number {
  return cmp(a.file, b.file) || a.line - b.line || a.column - b.column || cmp(a.code, b.code) || cmp(a.summary, b.summary);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
