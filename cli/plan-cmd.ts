import { resolve } from "node:path";
import { formatPlan, planJson } from "../reconciler/format.js";
import { previewPlan } from "../reconciler/converge.js";
import { notInstalled, preflight } from "../reconciler/preflight.js";
import { writeFileAtomic } from "../reconciler/index.js";
import { openBox, treeWarnings, warningLines, writeOtherConfigNote, writeOtherServeNote, writeRunnerNotes, type Box } from "./box.js";
import { EXIT_CHANGES, EXIT_OK, parseCommandArgs, type CliIo } from "./io.js";
import { refuseNonFile } from "./paths.js";
import type { Plan } from "../schema/index.js";
import { redactTyped } from "../server/redact.js";


export const PLAN_HELP = `hal0 plan [--config DIR] [--state DIR] [--json] [--out FILE] [--detailed-exitcode] [--verbose]

Observes the box and prints what 'hal0 apply' would change, and why. Changes nothing.
The tree's warnings (as hal0 validate lists them) follow the plan.
What the host would refuse at apply (a runner that is not installed, a model file that is
missing) is printed as 'note:' lines on stderr.
  --config DIR          the config folder (default: $HAL0_CONFIG, $HAL0_HOME/etc/hal0, /etc/hal0)
  --state DIR           the state folder (default: $HAL0_STATE, $HAL0_HOME/var/lib/hal0, /var/lib/hal0)
  --json                print the plan as JSON (a failure too: {ok: false, exit_code, diagnostics})
  --out FILE            also save the plan (JSON) for 'hal0 apply --plan FILE'
  --detailed-exitcode   exit 0 when there is nothing to do, 2 when there are changes
  --verbose             also list the resources that stay as they are
Exit status: 0 planned (with --detailed-exitcode: nothing to do), 2 changes (only with
--detailed-exitcode), 1 error (config.not_found, a tree with errors, runtime.unavailable),
64 usage error.`;

export const BOX_OPTIONS = { config: { type: "string" }, state: { type: "string" } } as const;

/** `hal0 plan`: observe, plan, print. Only reads. */
export async function runPlan(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({
    args, strict: true, allowPositionals: false,
    options: { ...BOX_OPTIONS, json: { type: "boolean" }, out: { type: "string" }, "detailed-exitcode": { type: "boolean" }, verbose: { type: "boolean" } },
  });
  // A file --out cannot name is refused before the box is observed (not after the plan was printed).
  const out = values.out === undefined ? undefined : refuseNonFile(resolve(io.cwd, values.out), "--out");
  const box = await openBox(values, io, { checkRunners: true });
  await writeRunnerNotes(box, io);
  await writeOtherServeNote(box, io);
  await writeOtherConfigNote(box, io);
  const [{ plan }, findings] = await Promise.all([previewPlan(box), preflight(box.model)]);
  // What the host will refuse at apply (a runner not installed, a model file missing): the plan's actions stay what the planner says.
  for (const f of findings) io.stderr.write(`note: ${f.code}: ${f.summary}\n`);
  writeNotInstalled(box.model, io);
  // Saved before it is printed: a file the system refuses (a read-only mount, a full disk) fails the command with
  // nothing on stdout but its failure, which under --json is then the one document there, not a second one after the plan.
  if (out !== undefined) await writeFileAtomic(out, `${planJson(savedPlan(plan))}\n`);
  // The tree's warnings come with the plan (after it; under --json its `diagnostics`), and change neither the plan nor the exit status.
  const warnings = treeWarnings(box);
  io.stdout.write(values.json
    ? `${warnings.length === 0 ? planJson(savedPlan(plan)) : planJson({ ...savedPlan(plan), diagnostics: redactTyped(warnings) } as Plan)}\n`
    : `${formatPlan(shownPlan(plan), { verbose: values.verbose === true })}\n${await warningLines(box)}`);
  return values["detailed-exitcode"] && plan.has_changes ? EXIT_CHANGES : EXIT_OK;
}

/**
 * A plan as it leaves hal0 (`--json`, `--out`, a CI log): secrets masked as
 * every API reply masks them (an env value under a secret-like name, a
 * token-like string). `hal0 apply --plan` runs the same plan made again.
 */
export function savedPlan(plan: Plan): Plan {
  return redactTyped(plan);
}

/**
 * The plan the text form prints from, masked as `savedPlan` masks it, with
 * less to walk: a no-op change prints its address and reason alone (also
 * under `--verbose`: formatChange), neither of which can hold a secret, so
 * its views are passed on as they are. On a box of 50 running slots with
 * nothing to do that was most of the plan's bytes, and ~13 ms of a cold
 * `hal0 plan` (test/cli/shown-plan.test.ts holds the two to the same text).
 */
export function shownPlan(plan: Plan): Plan {
  return { ...redactTyped({ ...plan, changes: [] }), changes: plan.changes.map((c) => (c.action === "no-op" ? c : redactTyped(c))) };
}

/** The plan's note of each Hub model an enabled slot uses whose file is not here, and what apply does about it. */
export function writeNotInstalled(model: Box["model"], io: CliIo): void {
  const pullFirst = model.settings.models.pull_on_apply;
  for (const m of notInstalled(model)) {
    const then = pullFirst ? "hal0 apply pulls it first ([models] pull_on_apply = true)" : `pull it with hal0 model pull ${m.hf_repo} ${m.hf_filename} --id ${m.id}, or set [models] pull_on_apply = true`;
    io.stderr.write(`note: model.not_installed: model ${m.id} (${m.hf_repo}/${m.hf_filename}, used by slot ${m.slots.join(", ")}) is not on this host: ${then}\n`);
  }
}
