import { parseArgs } from "node:util";
import { formatPlan } from "../reconciler/format.js";
import { observe } from "../reconciler/observe.js";
import { planChanges } from "../reconciler/plan.js";
import { acquireLock } from "../reconciler/lock.js";
import { openBox } from "./box.js";
import { EXIT_OK, type CliIo } from "./io.js";
import { BOX_OPTIONS } from "./plan-cmd.js";
import { executeWithProgress } from "./progress.js";

/** Plans never read health: skip the /health probes. */
const PLAN_ONLY = { health: false } as const;

export const DOWN_HELP = `hal0 down [--config DIR] [--state DIR]

Stops every slot in the inventory (what hal0 started), and nothing else.`;

/** `hal0 down`: a plan that deletes every inventory member, executed like any other. */
export async function runDown(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({ args, strict: true, allowPositionals: false, options: BOX_OPTIONS });
  const box = await openBox(values, io);
  const release = await acquireLock(box.state.dir, `hal0 down ${args.join(" ")}`.trim());
  try {
    const { observed, inventory } = await observe(box.model, box.driver, box.state, { ...PLAN_ONLY, hermesCredentials: box.hermesCredentials });
    const plan = planChanges(box.model, observed, inventory, { destroy: true });
    io.stdout.write(`${formatPlan(plan)}\n`);
    if (!plan.has_changes) return EXIT_OK;
    return await executeWithProgress(plan, box, io);
  } finally {
    await release();
  }
}
