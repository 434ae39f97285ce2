import { parseArgs } from "node:util";
import { compile, ConfigNotFoundError, loadTree, type Model } from "../compiler/index.js";
import type { Diagnostic, Plan } from "../schema/index.js";
import { applyHermesChange } from "../reconciler/execute.js";
import { formatPlan } from "../reconciler/format.js";
import { readHermesFile } from "../reconciler/hermes-files.js";
import { hermesHome, hermesIdentity, planHermesProfile, profileFile } from "../reconciler/hermes-plan.js";
import { acquireLock } from "../reconciler/lock.js";
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
  const file = profileFile(hermesHome(model), null);
  const text = await readHermesFile(file);
  if (text === undefined) throw new CliError("hermes.write_failed", `no default Hermes profile at ${file}`);
  const managed = (await state.readHermesManaged()).default;
  const credentials = stateHermesCredentials(state.dir);
  const { change, warning } = planHermesProfile(model, null, text, managed, { enforce: true, token: credentials.fingerprint(hermesIdentity(null)) });
  const plan = onePlan(model, change, warning);
  io.stdout.write(`${formatPlan(plan, { verbose: true })}\n`);
  if (change.action === "no-op") return warning ? 1 : EXIT_OK;
  if (!values.repair) return 2;
  const release = await acquireLock(state.dir, "hal0 agent reprovision hermes --repair");
  try {
    await applyHermesChange(change, state, { credentials });
  } catch (err) {
    throw new CliError("hermes.write_failed", `${file}: ${(err as Error).message}`);
  } finally {
    await release();
  }
  io.stdout.write(`Wired ${file} (${change.reason}).\n`);
  return EXIT_OK;
}

/** A plan of one Hermes change, for the canonical text. */
function onePlan(model: Model, change: Plan["changes"][number], warning: Plan["warnings"][number] | undefined): Plan {
  const update = change.action === "update" ? 1 : 0;
  return {
    format_version: 1, id: "", base: { config_digest: model.digest, observed: {} },
    has_changes: update === 1, changes: [change], warnings: warning ? [warning] : [],
    settings: { immediate: [], service_restart: {}, manual_restart: [], unknown: [] },
    summary: { create: 0, update, replace: 0, delete: 0, no_op: 1 - update },
  };
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
