import { parseArgs } from "node:util";
import { compile, loadTree, ConfigNotFoundError } from "../compiler/index.js";
import { EXIT_INVALID, EXIT_OK, UsageError, type CliIo } from "./io.js";
import { configDir } from "./paths.js";
import { formatAnnotation, formatDiagnostic, formatSummary } from "./format-diagnostics.js";

export const VALIDATE_HELP = `hal0 validate [--config DIR] [--json]

Compiles the whole config tree and reports every problem, each at its file:line:col.
  --config DIR   the config folder (default: $HAL0_CONFIG, $HAL0_HOME/etc/hal0, /etc/hal0)
  --json         print {valid, error_count, warning_count, diagnostics[]} instead of text
Exit status: 0 valid, 1 invalid, 2 usage error.`;

/** `hal0 validate`: exit 0 valid, 1 invalid, 2 usage. */
export async function runValidate(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, options: { config: { type: "string" }, json: { type: "boolean", default: false } }, strict: true, allowPositionals: false });
  const root = configDir(values.config, io.env, io.cwd);
  const loaded = await loadTree(root).catch((err: unknown) => {
    if (err instanceof ConfigNotFoundError) throw new UsageError(`config folder not found: ${root}`);
    throw err;
  });
  const { diagnostics } = compile(loaded.tree, loaded.diagnostics);
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
  return errors === 0 ? EXIT_OK : EXIT_INVALID;
}
