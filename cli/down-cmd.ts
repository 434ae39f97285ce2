import { existsSync } from "node:fs";
import { previewPlan } from "../reconciler/converge.js";
import { formatPlan } from "../reconciler/format.js";
import { loopHolder, serveHolder, serveLabel } from "../reconciler/lock.js";
import { inventoryBox, openBox } from "./box.js";
import { EXIT_ERROR, EXIT_OK, InvalidConfigError, parseCommandArgs, type CliIo } from "./io.js";
import { stateDir } from "./paths.js";
import { BOX_OPTIONS, shownPlan } from "./plan-cmd.js";
import { convergeWithProgress } from "./progress.js";

export const DOWN_HELP = `hal0 down [--config DIR] [--state DIR]

Stops every slot in the inventory (what hal0 started), and nothing else. On the
docker runtime that includes a slot's container renamed by hand (it still carries
this box's labels for the slot). With nothing to stop it says "Nothing to stop: no
slot hal0 started runs." (the plan's summary). A state folder that is not there (a mistyped
--state) has nothing to stop: down says so and does not make it. Where a
hal0 serve or hal0 reconcile runs its reconcile loop on the state folder, down says
that its next sweep starts the enabled slots again.
A tree with errors does not stop it: down then says how many errors there are
and stops the inventory's slots with the runtime of the settings last applied.
Exit status: 0 every stop succeeded (or nothing to stop), 1 one failed, was interrupted,
or down was refused (apply.locked, config.not_found, runtime.unavailable, state.corrupt),
64 usage error.`;

/** `hal0 down`: a plan that deletes every inventory member, executed like any other. */
export async function runDown(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({ args, strict: true, allowPositionals: false, options: BOX_OPTIONS });
  const box = await openBox(values, io).catch(async (err: unknown) => {
    if (!(err instanceof InvalidConfigError)) throw err;
    const errors = err.diagnostics.filter((d) => d.severity === "error").length;
    io.stderr.write(`note: ${err.root} has ${errors} error(s) (hal0 validate lists them); down stops the slots in the inventory with the runtime of the settings last applied\n`);
    return inventoryBox(err.root, values, io);
  });
  // No state folder, no inventory: hal0 started nothing there (a mistyped --state). Planned without the lock, which
  // would make the folder; only a slot still found there (a docker container labelled for this box) is stopped.
  if (!existsSync(box.state.dir)) {
    const { plan } = await previewPlan(box, { destroy: true });
    if (!plan.has_changes) {
      io.stdout.write(`${formatPlan(shownPlan(plan), { command: "down" })}\n`);
      io.stderr.write(`note: the state folder ${box.state.dir} does not exist: there is no inventory of slots hal0 started there, and down leaves it missing (is --state the one apply used?)\n`);
      return EXIT_OK;
    }
  }
  const done = await convergeWithProgress(box, io, {
    holder: `hal0 down ${args.join(" ")}`.trim(),
    plan: { destroy: true },
    review: (plan) => {
      io.stdout.write(`${formatPlan(shownPlan(plan), { command: "down" })}\n`);
      return true;
    },
  });
  // Down stops what runs now; a server's sweep loop on the same state folder converges to the tree again.
  const state = stateDir(values.state, io.env, io.cwd);
  const serving = await serveHolder(state);
  const looping = serving?.reconcile ? serveLabel(serving) : await loopHolder(state).then((h) => h && `${h.command} (pid ${h.pid})`);
  if (looping) {
    io.stderr.write(`note: ${looping} runs the reconcile loop on this state folder: its next sweep starts the enabled slots again; stop it first to keep the box down\n`);
  }
  return done.outcome === "failed" || done.outcome === "interrupted" ? EXIT_ERROR : EXIT_OK;
}
