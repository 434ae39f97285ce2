import { compile, loadTree, ConfigNotFoundError } from "../compiler/index.js";
import { findingDiagnostic, preflight } from "../reconciler/preflight.js";
import type { Diagnostic } from "../schema/index.js";
import { CliError, EXIT_ERROR, EXIT_OK, parseCommandArgs, type CliIo } from "./io.js";
import { configDir } from "./paths.js";
import { formatAnnotation, formatDiagnostic, formatSummary } from "./format-diagnostics.js";

export const VALIDATE_HELP = `hal0 validate [--config DIR] [--json] [--strict]

Compiles the whole config tree and reports every problem, each at its file:line:col.
Then, when it compiles, checks the host as apply will meet it: each enabled slot's
runner is found and executable (process runtime: PATH, then hal0's bin/; a path
with / against the config folder) and its model files (path, and draft, mmproj,
chat template when used) exist and are readable. Those are warnings
(slot.runner_not_found, slot.runner_not_executable, slot.model_missing,
slot.model_unreadable).
  --config DIR   the config folder (default: $HAL0_CONFIG, $HAL0_HOME/etc/hal0, /etc/hal0)
  --json         print {valid, error_count, warning_count, diagnostics[]} instead of text
  --strict       the host checks are errors: exit 1 when any fails
Exit status: 0 valid, 1 invalid (or no config folder: config.not_found), 64 usage error.`;

/** `hal0 validate`: exit 0 valid, 1 invalid, usage errors as main maps them. */
export async function runValidate(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({
    args, strict: true, allowPositionals: false,
    options: { config: { type: "string" }, json: { type: "boolean", default: false }, strict: { type: "boolean", default: false } },
  });
  const root = configDir(values.config, io.env, io.cwd);
  const loaded = await loadTree(root).catch((err: unknown) => (err instanceof ConfigNotFoundError ? undefined : Promise.reject(err)));
  if (loaded === undefined) {
    const message = `config folder not found: ${root}`;
    if (!values.json) throw new CliError("config.not_found", message);
    const missing = { code: "config.not_found", severity: "error", summary: message, detail: `${root} does not exist or is not a folder; pass --config DIR, or set HAL0_CONFIG or HAL0_HOME.`, file: null, line: null, column: null, path: [], related: [] };
    io.stdout.write(`${JSON.stringify({ valid: false, error_count: 1, warning_count: 0, diagnostics: [missing] }, null, 2)}\n`);
    return EXIT_ERROR;
  }
  const compiled = compile(loaded.tree, loaded.diagnostics);
  // The host checks (a pure compile cannot make them), for a tree that compiles: runners are looked up on
  // hal0's own PATH, as the process driver spawns them (with process.env, whatever the caller's io.env).
  const found = compiled.model ? await preflight(compiled.model, { env: process.env, texts: loaded.tree.files }) : [];
  const diagnostics = [...compiled.diagnostics, ...found.map((f) => findingDiagnostic(f, values.strict ? "error" : "warning"))].sort(byPosition);
  const errors = diagnostics.filter((d) => d.severity === "error").length;
  const warnings = diagnostics.length - errors;
  const text = { root, cwd: io.cwd, color: !io.env.NO_COLOR && io.stdout.isTTY === true, texts: loaded.tree.files };
  if (values.json) {
    io.stdout.write(`${JSON.stringify({ valid: errors === 0, error_count: errors, warning_count: warnings, diagnostics }, null, 2)}\n`);
  } else {
    for (const d of diagnostics) io.stdout.write(`${formatDiagnostic(d, text)}\n\n`);
    io.stdout.write(`${formatSummary(errors, warnings, root, text)}\n`);
  }
  if (io.env.GITHUB_ACTIONS === "true") for (const d of diagnostics) io.stdout.write(`${formatAnnotation(d, text)}\n`);
  return errors === 0 ? EXIT_OK : EXIT_ERROR;
}

/** The compiler's order (file, line, column, code, summary), kept with the host checks merged in. */
function byPosition(a: Diagnostic, b: Diagnostic): number {
  return cmp(a.file, b.file) || a.line - b.line || a.column - b.column || cmp(a.code, b.code) || cmp(a.summary, b.summary);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
