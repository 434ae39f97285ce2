import { acquireLoopLock, LoopLockedError, serveHolder, serveLabel } from "../reconciler/lock.js";
import { SweepLoop } from "../reconciler/loop.js";
import { StateStore } from "../reconciler/state.js";
import { ConfigEmptyError, Sweeper, type SweepReport } from "../reconciler/sweep.js";
import { stateHermesCredentials } from "../server/identity/hermes-credentials.js";
import { driverFor, runnerProbeFor } from "./box.js";
import { CliError, EXIT_ERROR, EXIT_OK, parseCommandArgs, type CliIo } from "./io.js";
import { ConfigNotFoundError, configNotFoundMessage } from "../compiler/index.js";
import { configDir, requireConfigFolder, stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";
import { redactTyped } from "../server/redact.js";
import { Interrupt } from "./progress.js";
import { StateGuard, type GuardLogger } from "../server/state-guard.js";
import { printableMessage, type ApiError } from "../server/errors.js";

export const RECONCILE_HELP = `hal0 reconcile [--config DIR] [--state DIR] [--once] [--json]

Converges the box to the config without asking, like 'hal0 apply --yes': once with
--once, else forever — every [reconcile] interval_s, ~100 ms after any .toml change, until
SIGINT or SIGTERM (SIGHUP: a sweep now, failing slots tried at once). A tree with errors changes nothing; failing slots back off. The loop
refuses to start (server.already_running) where hal0 serve already runs its own loop on
the state folder, or another hal0 reconcile loop does (reconcile.lock names it; a hal0 serve
with its loop does not start beside this one either); --once is one sweep, beside it or not.
  --json   one JSON report per sweep, each on one line (a failure too: {ok: false, exit_code, diagnostics})
Exit status (--once): 0 converged or nothing to do, 1 otherwise (a step failed, a tree with
errors, the lock held, config.not_found, runtime.unavailable); the loop exits 0 on
SIGINT/SIGTERM, and 1 when its state folder is removed under it (state.folder_gone: the
runners' records are put back, the runners left running) or another loop took its
reconcile.lock (server.lock_lost). 64 usage error.`;

/** `hal0 reconcile`: exit 0 when the sweep converged or had nothing to do, 1 otherwise (with --once). */
export async function runReconcile(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({ args, strict: true, allowPositionals: false, options: { ...BOX_OPTIONS, once: { type: "boolean" }, json: { type: "boolean" } } });
  const root = configDir(values.config, io.env, io.cwd);
  const state = new StateStore(stateDir(values.state, io.env, io.cwd));
  const sweeper = new Sweeper({ root, state, driverFor: async (model) => driverFor(model, state.dir, process.env, { reuseInspects: true }), hermesCredentials: stateHermesCredentials(state.dir), runners: runnerProbeFor(root, state.dir).probe });
  // A report as it leaves hal0: secrets masked (a plan's env values), as in hal0 plan --json.
  const print = (report: SweepReport) => io.stdout.write(`${values.json ? JSON.stringify(redactTyped(report)) : formatReport(redactTyped(report))}\n`);
  // No config folder to converge to: said at once, as --once and hal0 serve say it, not a loop of failed sweeps.
  requireConfigFolder(root);
  if (values.once) {
    // Ctrl-C as in hal0 apply: the sweep starts no further step and stops waiting for /health, then reports.
    const interrupt = new Interrupt(io);
    interrupt.arm();
    const report = await sweeper.sweep(interrupt.signal).catch((err: unknown) => {
      if (err instanceof ConfigNotFoundError) throw new CliError("config.not_found", configNotFoundMessage(root));
      throw err;
    }).finally(() => interrupt.disarm());
    print(report);
    return report.outcome === "converged" || report.outcome === "nothing_to_do" ? EXIT_OK : EXIT_ERROR;
  }
  // A second loop beside hal0 serve's own would sweep the same box twice over (serialised by the apply lock, but each
  // sweep observing and planning again): one loop per state folder.
  const serving = await serveHolder(state.dir);
  if (serving?.reconcile) {
    throw new CliError("server.already_running", `${serveLabel(serving)} already runs the reconcile loop on this state folder; run 'hal0 reconcile --once' for one sweep now, or start hal0 serve with --no-reconcile`);
  }
  // Held while this loop runs: a hal0 serve with its own loop, or a second hal0 reconcile, does not start beside it.
  const release = await acquireLoopLock(state.dir, "hal0 reconcile").catch((err: unknown) => {
    if (err instanceof LoopLockedError) throw new CliError(err.code, `${err.message}; run 'hal0 reconcile --once' for one sweep now`);
    throw err;
  });
  const loop = new SweepLoop(sweeper, {
    root, onReport: print, onError: (err) => io.stderr.write(`hal0 reconcile: sweep failed: ${err instanceof ConfigNotFoundError || err instanceof ConfigEmptyError ? `${err.code}: ` : ""}${(err as Error).message}\n`),
    intervalS: () => sweeper.lastGoodModel?.settings.reconcile.interval_s ?? 120,
  });
  loop.start();
  // SIGHUP asks for a sweep now (the tree is read again by it) in which failing slots are tried at once.
  const sweepNow = () => loop.retryNow();
  process.on("SIGHUP", sweepNow);
  // The state folder removed under the loop (or its reconcile.lock taken by another loop): one coded line, the runners'
  // records put back, and the loop stops with status 1, as hal0 serve does — not a sweep failing on ENOENT forever.
  let lost: ApiError | undefined;
  let guard!: StateGuard;
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
    guard = new StateGuard(state.dir, lineLogger(io), (err) => {
      lost = err;
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    }, undefined, { program: "hal0 reconcile", lockFile: "reconcile.lock" });
    guard.start();
  });
  guard.stop();
  process.off("SIGHUP", sweepNow);
  await loop.stop();
  // A lock another loop now holds is not this one's to remove.
  if (lost?.code !== "server.lock_lost") await release();
  return lost === undefined ? EXIT_OK : EXIT_ERROR;
}

/** The state guard's lines on stderr: `hal0 reconcile: <code>: <message>`. */
function lineLogger(io: CliIo): GuardLogger {
  const line = (fields: Record<string, unknown>, message: string) =>
    io.stderr.write(`hal0 reconcile: ${typeof fields.code === "string" ? `${fields.code}: ` : ""}${typeof fields.message === "string" ? fields.message : message}\n`);
  return { warn: line, error: line };
}

/** One line per sweep, then one per failed step, held-back change or diagnostic. */
export function formatReport(r: SweepReport): string {
  const done = r.results.filter((s) => s.ok).map((s) => `${s.action} ${s.address}`);
  const lines = [`${r.at} sweep: ${r.outcome}${done.length ? ` (${done.join(", ")})` : ""}${r.locked ? `: ${r.locked.code}: ${r.locked.message}` : ""}`];
  for (const s of r.results.filter((x) => !x.ok)) lines.push(`  ✗ ${s.address} (${s.action}): ${s.code}: ${s.error}`);
  for (const d of r.deferred) lines.push(`  … ${d.address}: ${d.why}`);
  for (const d of r.diagnostics) lines.push(`  ${d.file}:${d.line}:${d.column}: ${d.severity}[${d.code}]: ${d.summary}`);
  // A file's name, a runner's words: their control characters written out (\u001b), as every refusal of the CLI.
  return printableMessage(lines.join("\n"));
}
