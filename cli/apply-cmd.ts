import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";
import { Plan } from "../schema/index.js";
import { formatPlan } from "../reconciler/format.js";
import { observe } from "../reconciler/observe.js";
import { planChanges } from "../reconciler/plan.js";
import { describeMoves } from "../reconciler/digest.js";
import { acquireLock } from "../reconciler/lock.js";
import { openBox, type Box } from "./box.js";
import { BOX_OPTIONS } from "./plan-cmd.js";
import { executeWithProgress } from "./progress.js";
import { CliError, EXIT_INVALID, EXIT_OK, UsageError, type CliIo } from "./io.js";

/** Plans never read health: skip the /health probes. */
const PLAN_ONLY = { health: false } as const;

export const APPLY_HELP = `hal0 apply [--config DIR] [--state DIR] [--plan FILE] [--yes]

Plans (or loads a saved plan), shows it, asks, and converges the box: stops and
deletes first, then starts, each slot health-gated. One apply at a time.
  --plan FILE   apply a plan saved by 'hal0 plan --out'; refused when stale (plan.stale)
  --yes         do not ask`;

/** `hal0 apply`: exit 0 when every step succeeded, 1 when one failed or the plan was refused. */
export async function runApply(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, strict: true, allowPositionals: false, options: { ...BOX_OPTIONS, plan: { type: "string" }, yes: { type: "boolean" } } });
  const box = await openBox(values, io);
  const release = await acquireLock(box.state.dir, `hal0 apply ${args.join(" ")}`.trim());
  try {
    const plan = values.plan ? await checkedSavedPlan(resolve(io.cwd, values.plan), box) : await freshPlan(box);
    io.stdout.write(`${formatPlan(plan)}\n`);
    if (!plan.has_changes) return EXIT_OK;
    if (!values.yes && !(await confirm(io))) {
      io.stdout.write("Apply cancelled.\n");
      return EXIT_INVALID;
    }
    return await executeWithProgress(plan, box, io);
  } finally {
    await release();
  }
}

async function freshPlan(box: Box): Promise<Plan> {
  const { observed, inventory } = await observe(box.model, box.driver, box.state, { ...PLAN_ONLY, hermesCredentials: box.hermesCredentials });
  return planChanges(box.model, observed, inventory);
}

/** A saved plan applies only to the config and box it was made from; otherwise `plan.stale`, naming what moved. */
async function checkedSavedPlan(file: string, box: Box): Promise<Plan> {
  const text = await readFile(file, "utf8").catch(() => {
    throw new CliError("plan.invalid", `cannot read ${file}`);
  });
  const parsed = Plan.safeParse(parseJson(text));
  if (!parsed.success) throw new CliError("plan.invalid", `${file} is not a hal0 plan (format_version 1)`);
  const saved = parsed.data;
  const { observed } = await observe(box.model, box.driver, box.state, { ...PLAN_ONLY, hermesCredentials: box.hermesCredentials });
  const moved = describeMoves(saved, observed, box.model.digest);
  if (moved.length > 0) throw new CliError("plan.stale", `the plan is stale; re-run hal0 plan:\n${moved.map((m) => `  - ${m}`).join("\n")}`);
  return saved;
}

async function confirm(io: CliIo): Promise<boolean> {
  if (!io.stdin || io.stdin.isTTY !== true) throw new UsageError("the plan has changes and nobody can confirm them here; pass --yes");
  const rl = createInterface({ input: io.stdin, output: io.stdout as NodeJS.WritableStream });
  try {
    return (await rl.question("Apply these changes? Only 'yes' is accepted: ")).trim() === "yes";
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
