import { parseArgs } from "node:util";
import { executePlan } from "../reconciler/execute.js";
import { refreshConditions } from "../reconciler/conditions-store.js";
import { formatPlan } from "../reconciler/format.js";
import { observe } from "../reconciler/observe.js";
import { planChanges } from "../reconciler/plan.js";
import { acquireLock } from "../reconciler/lock.js";
import { openBox } from "./box.js";
import { EXIT_INVALID, EXIT_OK, type CliIo } from "./io.js";
import { BOX_OPTIONS } from "./plan-cmd.js";
import { formatResults, progressReporter } from "./progress.js";

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
    const { observed, inventory } = await observe(box.model, box.driver, box.state, PLAN_ONLY);
    const plan = planChanges(box.model, observed, inventory, { destroy: true });
    io.stdout.write(`${formatPlan(plan)}\n`);
    if (!plan.has_changes) return EXIT_OK;
    const results = await executePlan(plan, {
      driver: box.driver, state: box.state, cwd: box.root, onEvent: progressReporter(io),
      healthTimeoutS: box.model.settings.slots.health_timeout_s, stopGraceS: box.model.settings.slots.stop_grace_s, parallel: box.model.settings.slots.parallel,
    });
    io.stdout.write(`${formatResults(results)}\n`);
    await refreshConditions(box.model, (await observe(box.model, box.driver, box.state)).observed, box.state);
    return results.every((r) => r.ok) ? EXIT_OK : EXIT_INVALID;
  } finally {
    await release();
  }
}
