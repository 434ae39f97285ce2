import { stat } from "node:fs/promises";
import type { Model } from "../compiler/index.js";
import type { Plan } from "../schema/index.js";
import { converge, previewPlan } from "../reconciler/converge.js";
import { formatPlan } from "../reconciler/format.js";
import { hermesHome, profileFile } from "../reconciler/hermes-plan.js";
import { StateStore } from "../reconciler/state.js";
import { stateHermesCredentials } from "../server/identity/hermes-credentials.js";
import { CliError, EXIT_CHANGES, EXIT_ERROR, EXIT_OK, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { compileOrThrow, stateDir } from "./paths.js";
import { BOX_OPTIONS, shownPlan } from "./plan-cmd.js";
import { APPROVALS_HELP } from "./approvals-cmd.js";

export { compileTree } from "./paths.js";

export const AGENT_HELP = `hal0 agent reprovision hermes [--repair] [--config DIR] [--state DIR]
${APPROVALS_HELP}

The sweep keeps every named Hermes profile (<[hermes] home>/profiles/<p>/config.yaml)
wired to hal0's MCP servers; the default profile (<[hermes] home>/config.yaml) is
converged only here, on demand. Without --repair it shows what would change and writes
nothing; with --repair it writes hal0's keys (hal0-admin, hal0-memory, the installed
servers exposed to Hermes) with the bearer token of agent "hermes" (minted on first
wiring, kept in <state>/tokens/hermes) and touches nothing else. hal0 never creates
Hermes' own files: with no Hermes home or no default profile there is nothing to wire
(a warning, hermes.not_found; an error with --repair).
Exit status (reprovision): 0 wired or nothing to wire, 2 changes to make (without
--repair), 1 error (hermes.not_found with --repair, hermes.write_failed, a profile
hal0 cannot edit, apply.locked, config.not_found, a tree with errors), 64 usage error.`;

/** `hal0 agent reprovision hermes [--repair]`, or `hal0 agent approvals …`. */
export async function runAgent(args: string[], io: CliIo): Promise<number> {
  if (args[0] === "approvals") return (await import("./approvals-cmd.js")).runApprovals(args.slice(1), io);
  const { values, positionals } = parseCommandArgs({ args, strict: true, allowPositionals: true, options: { ...BOX_OPTIONS, repair: { type: "boolean" } } });
  if (positionals[0] !== "reprovision" || positionals[1] !== "hermes" || positionals.length !== 2) throw new UsageError("expected: hal0 agent reprovision hermes [--repair] | hal0 agent approvals …");
  const { model, state } = await openModel(values, io);
  // No runtime: only the default profile (`hermes`) is planned, so no engine is needed.
  const target = { model, state, hermesCredentials: stateHermesCredentials(state.dir) };
  const options = { hermesDefault: true, only: { addresses: ["hermes" as const] } };
  const home = hermesHome(model);
  const file = profileFile(home, null);
  // Nothing to wire: say so before planning, so a read-only look takes no lock and writes nothing.
  const missing = await missingHermes(home, file);
  if (missing) {
    if (values.repair) throw new CliError("hermes.not_found", `${missing}; hal0 does not create Hermes' files`);
    io.stdout.write(`! hermes: hermes.not_found: ${missing}; nothing to wire\n`);
    return EXIT_OK;
  }
  const show = (plan: Plan) => {
    // The file went away between the look above and the plan.
    if (!plan.changes.some((c) => c.address === "hermes")) throw new CliError("hermes.not_found", `no default Hermes profile at ${file}`);
    io.stdout.write(`${formatPlan(shownPlan(plan), { verbose: true })}\n`);
  };
  if (!values.repair) {
    const { plan } = await previewPlan(target, options);
    show(plan);
    if (plan.has_changes) return EXIT_CHANGES;
    return plan.warnings.length > 0 ? EXIT_ERROR : EXIT_OK;
  }
  const done = await converge(target, {
    holder: "hal0 agent reprovision hermes --repair", plan: options, conditions: "skip",
    review: (plan) => {
      show(plan);
      return true;
    },
  });
  const change = done.plan.changes.find((c) => c.address === "hermes")!;
  if (done.outcome === "nothing_to_do") return done.plan.warnings.length > 0 ? EXIT_ERROR : EXIT_OK;
  const failed = done.results.find((r) => !r.ok);
  if (failed) throw new CliError("hermes.write_failed", `${file}: ${failed.error ?? "the write failed"}`);
  io.stdout.write(`Wired ${file} (${change.reason}).\n`);
  return EXIT_OK;
}

/** Why there is no default Hermes profile to wire (no home, or no config.yaml in it); undefined when there is one. */
async function missingHermes(home: string, file: string): Promise<string | undefined> {
  const [dir, profile] = await Promise.all([stat(home).catch(() => undefined), stat(file).catch(() => undefined)]);
  if (!dir?.isDirectory()) return `no Hermes home at ${home} (install Hermes, or set [hermes] home)`;
  if (!profile) return `no default Hermes profile at ${file}`;
  return undefined;
}

/**
 * The compiled tree and the state folder, without building a runtime (which
 * for docker needs a live engine): what `agent` works on. A tree with errors
 * is InvalidConfigError (exit 1; `main` prints its diagnostics).
 */
export async function openModel(flags: { config?: string; state?: string }, io: CliIo): Promise<{ root: string; model: Model; state: StateStore }> {
  const { root, model } = await compileOrThrow(flags, io);
  return { root, model, state: new StateStore(stateDir(flags.state, io.env, io.cwd)) };
}
