import { open } from "node:fs/promises";
import { resolve } from "node:path";
import { createInterface } from "node:readline/promises";
import { Plan } from "../schema/index.js";
import { PlanStaleError } from "../reconciler/converge.js";
import { formatPlan } from "../reconciler/format.js";
import { notInstalled } from "../reconciler/preflight.js";
import { movedSince, openBox, warningLines, writeOtherConfigNote, writeOtherServeNote, writeRunnerNotes } from "./box.js";
import { installMissing } from "./model-cmd.js";
import { notReadableWhole } from "./paths.js";
import { BOX_OPTIONS, savedPlan, shownPlan, writeNotInstalled } from "./plan-cmd.js";
import { convergeWithProgress } from "./progress.js";
import { CliError, EXIT_ERROR, EXIT_OK, parseCommandArgs, UsageError, type CliIo } from "./io.js";

export const APPLY_HELP = `hal0 apply [--config DIR] [--state DIR] [--plan FILE] [--yes]

Plans (or loads a saved plan), shows it, asks (only 'yes' applies; any other answer,
Ctrl-D or Ctrl-C cancels: exit 1), and converges the box: stops and deletes first,
then starts, each slot health-gated. One apply at a time.
  --plan FILE   apply a plan saved by 'hal0 plan --out'; refused when stale (plan.stale)
  --yes         do not ask
SIGINT or SIGTERM while it runs: no further step starts, the steps under way finish (a
start stops waiting for /health and leaves its runner running; one still pulling its image
stops the pull and creates nothing), then the summary; a second
signal stops hal0 at once.
Exit status: 0 every step succeeded (or nothing to do), 1 a step failed, the apply was
cancelled, interrupted or refused (plan.stale, plan.invalid, apply.locked, config.not_found,
a tree with errors, runtime.unavailable), 64 usage error (also: changes to confirm and no
terminal to ask on; pass --yes).`;

/** `hal0 apply`: exit 0 when every step succeeded, 1 when one failed, or the plan was cancelled or refused. */
export async function runApply(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({ args, strict: true, allowPositionals: false, options: { ...BOX_OPTIONS, plan: { type: "string" }, yes: { type: "boolean" } } });
  // Before the box is opened: a fifo nobody writes, or /dev/zero, is refused at once, not read for ever.
  const notAFile = values.plan === undefined ? undefined : notReadableWhole(resolve(io.cwd, values.plan));
  if (notAFile !== undefined) throw new CliError("plan.invalid", `cannot read ${resolve(io.cwd, values.plan!)}: ${notAFile} (it names a plan saved by hal0 plan --out FILE; a plan on a pipe: --plan /dev/stdin)`);
  let box = await openBox(values, io, { checkRunners: true, makesState: true });
  // [models] pull_on_apply: the Hub models the enabled slots use come down first (each its own change), then the box is read again.
  const missing = notInstalled(box.model).map((m) => m.id);
  if (missing.length > 0 && box.model.settings.models.pull_on_apply && values.plan !== undefined) {
    // A saved plan was made before they were pulled: pulling registers them in models.toml, which moves the config, so
    // the plan could only be refused as stale after the download (of gigabytes, for nothing it could apply).
    throw new CliError("plan.stale", `${resolve(io.cwd, values.plan)} was planned while model${missing.length > 1 ? "s" : ""} ${missing.join(", ")} ${missing.length > 1 ? "were" : "was"} not installed; [models] pull_on_apply would pull ${missing.length > 1 ? "them" : "it"} first and register ${missing.length > 1 ? "them" : "it"} in models.toml, so that plan no longer applies: pull ${missing.length > 1 ? "them" : "it"} (hal0 model pull, or hal0 apply without --plan), then make the plan again (hal0 plan --out)`);
  }
  if (missing.length > 0 && box.model.settings.models.pull_on_apply) {
    await installMissing(values, io, missing);
    box = await openBox(values, io, { checkRunners: true, makesState: true });
  } else writeNotInstalled(box.model, io);
  await writeRunnerNotes(box, io);
  await writeOtherServeNote(box, io);
  await writeOtherConfigNote(box, io);
  const file = values.plan === undefined ? undefined : resolve(io.cwd, values.plan);
  const saved = file === undefined ? undefined : await readSavedPlan(file);
  const done = await convergeWithProgress(box, io, {
    holder: `hal0 apply ${args.join(" ")}`.trim(),
    saved: saved?.plan,
    review: async (plan) => {
      // Under the lock: the files as they are now are the ones this apply read. One that moved while it started (a runner
      // probed, an engine asked; hal0 serve committing an edit meanwhile) would have it converge the box to the older text,
      // undoing what a sweep of the newer one already did: refused, naming the files.
      const moved = await movedSince(box, values, io);
      if (moved.length > 0) throw new CliError("plan.stale", `the config changed while hal0 apply was reading it: ${moved.join(", ")}; nothing was applied: run hal0 apply again, which plans from the files as they are now`);
      // The plan that runs is made again (the file's secrets are masked); the file must be that plan as hal0 wrote it.
      if (saved && !saved.writes(plan)) throw new CliError("plan.invalid", `${file} was changed after hal0 wrote it: it is not plan ${plan.id} as hal0 plan --out writes it; make the plan again (hal0 plan --out)`);
      io.stdout.write(`${formatPlan(shownPlan(plan))}\n${await warningLines(box)}`);
      return !plan.has_changes || values.yes === true || (await confirm(io));
    },
  }).catch((err: unknown) => {
    if (err instanceof PlanStaleError) throw new CliError("plan.stale", err.message);
    throw err;
  });
  if (done.outcome === "cancelled") {
    io.stdout.write("Apply cancelled.\n");
    return EXIT_ERROR;
  }
  return done.outcome === "failed" || done.outcome === "interrupted" ? EXIT_ERROR : EXIT_OK;
}

/**
 * A plan saved by `hal0 plan --out`: secrets masked, so it names the plan to
 * run rather than holding it. It applies only to the config and box it was
 * made from (converge refuses it with `plan.stale` otherwise), and `writes`
 * says whether the file is exactly what hal0 writes for a plan (a file
 * edited since is not the plan that was reviewed). A file of an older hal0,
 * secrets unmasked, is still read.
 */
async function readSavedPlan(file: string): Promise<{ plan: Plan; writes: (plan: Plan) => boolean }> {
  const text = await readBounded(file).catch((err: NodeJS.ErrnoException) => {
    if (err instanceof CliError) throw err;
    const why = err.code === "ENOENT" ? "no such file" : err.code === "EISDIR" ? "it is a folder" : err.code === "EACCES" || err.code === "EPERM" ? "permission denied" : (err.code ?? err.message);
    throw new CliError("plan.invalid", `cannot read ${file}: ${why} (it names a plan saved by hal0 plan --out FILE)`);
  });
  const raw = parseJson(text);
  // \`hal0 plan --json\` adds the tree's warnings to the plan as \`diagnostics\` (\`hal0 plan --json | hal0 apply --plan /dev/stdin\`): not part of the plan.
  if (raw !== null && typeof raw === "object" && !Array.isArray(raw) && Object.hasOwn(raw, "diagnostics")) delete (raw as Record<string, unknown>).diagnostics;
  const parsed = Plan.safeParse(raw);
  if (!parsed.success) throw new CliError("plan.invalid", `${file} is not a hal0 plan (format_version 1)`);
  const content = JSON.stringify(raw);
  return { plan: parsed.data, writes: (plan) => content === JSON.stringify(savedPlan(plan)) || content === JSON.stringify(plan) };
}

/** The most a saved plan may hold: a plan of a box of 1,000 slots is a few MiB. */
export const MAX_PLAN_BYTES = 32 * 1024 * 1024;

/**
 * A saved plan's text, read up to MAX_PLAN_BYTES: a file or a pipe (`--plan /dev/stdin`) that holds more is
 * `plan.invalid` once that much was read, the same for both, rather than read whole into memory (a pipe has no
 * size to check first: \`cat /dev/zero | hal0 apply --plan /dev/stdin\` was read until node ran out of memory).
 */
async function readBounded(file: string): Promise<string> {
  const handle = await open(file, "r");
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(64 * 1024);
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      total += bytesRead;
      if (total > MAX_PLAN_BYTES) throw new CliError("plan.invalid", `${file} holds more than ${MAX_PLAN_BYTES / 1024 / 1024} MiB: no plan hal0 writes is that large (it names a plan saved by hal0 plan --out FILE)`);
      chunks.push(chunk.subarray(0, bytesRead));
    }
    return Buffer.concat(chunks, total).toString("utf8");
  } finally {
    await handle.close();
  }
}

async function confirm(io: CliIo): Promise<boolean> {
  if (!io.stdin || io.stdin.isTTY !== true) throw new UsageError("the plan has changes and nobody can confirm them here; pass --yes");
  const rl = createInterface({ input: io.stdin, output: io.stdout as NodeJS.WritableStream });
  // Ctrl-D (the input ends) or Ctrl-C at the question is a no: cancelled, exit 1, the lock released. Unheard, an
  // ended input left the question open forever: node exited 0 with nothing applied and the lock file left behind.
  const unanswered = new Promise<undefined>((resolve) => rl.once("close", () => resolve(undefined)));
  try {
    const answer = await Promise.race([rl.question("Apply these changes? Only 'yes' is accepted: "), unanswered]).catch((err: unknown) => {
      if ((err as Error | null)?.name === "AbortError") return undefined;
      throw err;
    });
    if (answer === undefined) io.stdout.write("\n");
    return answer?.trim() === "yes";
  } finally {
    rl.close();
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
