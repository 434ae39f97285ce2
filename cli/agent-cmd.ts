import { parseArgs } from "node:util";
import { compile, ConfigNotFoundError, loadTree, type Model } from "../compiler/index.js";
import type { Diagnostic, Plan } from "../schema/index.js";
import { converge, previewPlan } from "../reconciler/converge.js";
import { formatPlan } from "../reconciler/format.js";
import { hermesHome, profileFile } from "../reconciler/hermes-plan.js";
import { StateStore } from "../reconciler/state.js";
import { stateHermesCredentials } from "../server/identity/hermes-credentials.js";
import { formatDiagnostic, formatSummary } from "./format-diagnostics.js";
import { CliError, EXIT_OK, InvalidConfigError, UsageError, type CliIo } from "./io.js";
import { configDir, stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";
import { APPROVALS_HELP } from "./approvals-cmd.js";

export const AGENT_HELP = `hal0 agent reprovision hermes [--repair] [--config DIR] [--state DIR]
${APPROVALS_HELP}

The sweep keeps every named Hermes profile (<[hermes] home>/profiles/<p>/config.yaml)
wired to hal0's MCP servers; the default profile (<[hermes] home>/config.yaml) is
converged only here, on demand. Without --repair it shows what would change (exit 2
when something would); with --repair it writes hal0's keys (hal0-admin, hal0-memory,
the installed servers exposed to Hermes) with the bearer token of agent "hermes" (minted
on first wiring, kept in <state>/tokens/hermes) and touches nothing else.`;

/** `hal0 agent reprovision hermes [--repair]`. */
export async function runAgent(args: string[], io: CliIo): Promise<number> {
  if (args[0] === "approvals") return (await import("./approvals-cmd.js")).runApprovals(args.slice(1), io);
  const { values, positionals } = parseArgs({ args, strict: true, allowPositionals: true, options: { ...BOX_OPTIONS, repair: { type: "boolean" } } });
  if (positionals[0] !== "reprovision" || positionals[1] !== "hermes" || positionals.length !== 2) throw new UsageError("expected: hal0 agent reprovision hermes [--repair]");
  const { model, state } = await openModel(values, io);
  // No runtime: only the default profile (`hermes`) is planned, so no engine is needed.
  const target = { model, state, hermesCredentials: stateHermesCredentials(state.dir) };
  const options = { hermesDefault: true, only: { addresses: ["hermes" as const] } };
  const file = profileFile(hermesHome(model), null);
  const show = (plan: Plan) => {
    if (!plan.changes.some((c) => c.address === "hermes")) throw new CliError("hermes.write_failed", `no default Hermes profile at ${file}`);
    io.stdout.write(`${formatPlan(plan, { verbose: true })}\n`);
  };
  if (!values.repair) {
    const { plan } = await previewPlan(target, options);
    show(plan);
    if (plan.has_changes) return 2;
    return plan.warnings.length > 0 ? 1 : EXIT_OK;
  }
  const done = await converge(target, {
    holder: "hal0 agent reprovision hermes --repair", plan: options, conditions: "skip",
    review: (plan) => {
      show(plan);
      return true;
    },
  });
  const change = done.plan.changes.find((c) => c.address === "hermes")!;
  if (done.outcome === "nothing_to_do") return done.plan.warnings.length > 0 ? 1 : EXIT_OK;
  const failed = done.results.find((r) => !r.ok);
  if (failed) throw new CliError("hermes.write_failed", `${file}: ${failed.error ?? "the write failed"}`);
  io.stdout.write(`Wired ${file} (${change.reason}).\n`);
  return EXIT_OK;
}

/**
 * The compiled tree and the state folder, without building a runtime (which
 * for docker needs a live engine): what `agent` and `doctor` work on. Errors
 * of the tree are printed, then InvalidConfigError (exit 1).
 */
export async function openModel(flags: { config?: string; state?: string }, io: CliIo): Promise<{ root: string; model: Model; state: StateStore }> {
  const result = await compileTree(flags, io);
  if (!result.model) {
    const text = { root: result.root, cwd: io.cwd, color: false, texts: result.texts };
    const errors = result.diagnostics.filter((d) => d.severity === "error");
    for (const d of errors) io.stderr.write(`${formatDiagnostic(d, text)}\n\n`);
    io.stderr.write(`${formatSummary(errors.length, result.diagnostics.length - errors.length, result.root, text)}\n`);
    throw new InvalidConfigError(`${result.root} has ${errors.length} error(s)`);
  }
  return { root: result.root, model: result.model, state: new StateStore(stateDir(flags.state, io.env, io.cwd)) };
}

export async function compileTree(flags: { config?: string }, io: CliIo): Promise<{ root: string; model?: Model; diagnostics: Diagnostic[]; texts: ReadonlyMap<string, string> }> {
  const root = configDir(flags.config, io.env, io.cwd);
  const loaded = await loadTree(root).catch((err: unknown) => {
    if (err instanceof ConfigNotFoundError) throw new UsageError(`config folder not found: ${root}`);
    throw err;
  });
  const { model, diagnostics } = compile(loaded.tree, loaded.diagnostics);
  return { root, model, diagnostics, texts: loaded.tree.files };
}
