import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { formatPlan, planJson } from "../reconciler/format.js";
import { previewPlan } from "../reconciler/converge.js";
import { writeFileAtomic } from "../reconciler/index.js";
import { openBox } from "./box.js";
import { EXIT_OK, type CliIo } from "./io.js";


export const PLAN_HELP = `hal0 plan [--config DIR] [--state DIR] [--json] [--out FILE] [--detailed-exitcode] [--verbose]

Observes the box and prints what 'hal0 apply' would change, and why. Changes nothing.
  --config DIR          the config folder (default: $HAL0_CONFIG, $HAL0_HOME/etc/hal0, /etc/hal0)
  --state DIR           the state folder (default: $HAL0_STATE, $HAL0_HOME/var/lib/hal0, /var/lib/hal0)
  --json                print the plan as JSON
  --out FILE            also save the plan (JSON) for 'hal0 apply --plan FILE'
  --detailed-exitcode   exit 0 when there is nothing to do, 2 when there are changes, 1 on error
  --verbose             also list the resources that stay as they are`;

export const BOX_OPTIONS = { config: { type: "string" }, state: { type: "string" } } as const;

/** `hal0 plan`: observe, plan, print. Only reads. */
export async function runPlan(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args, strict: true, allowPositionals: false,
    options: { ...BOX_OPTIONS, json: { type: "boolean" }, out: { type: "string" }, "detailed-exitcode": { type: "boolean" }, verbose: { type: "boolean" } },
  });
  const box = await openBox(values, io);
  const { plan } = await previewPlan(box);
  io.stdout.write(values.json ? `${planJson(plan)}\n` : `${formatPlan(plan, { verbose: values.verbose === true })}\n`);
  if (values.out) await writeFileAtomic(resolve(io.cwd, values.out), `${planJson(plan)}\n`);
  return values["detailed-exitcode"] && plan.has_changes ? 2 : EXIT_OK;
}
