import { runSchema, SCHEMA_HELP } from "./schema-cmd.js";
import { runValidate, VALIDATE_HELP } from "./validate.js";
import { runPlan, PLAN_HELP } from "./plan-cmd.js";
import { runApply, APPLY_HELP } from "./apply-cmd.js";
import { runStatus, STATUS_HELP } from "./status-cmd.js";
import { runDown, DOWN_HELP } from "./down-cmd.js";
import { runReconcile, RECONCILE_HELP } from "./reconcile-cmd.js";
import { runDrift, DRIFT_HELP } from "./drift-cmd.js";
import { runAgent, AGENT_HELP } from "./agent-cmd.js";
import { runDoctor, DOCTOR_HELP } from "./doctor-cmd.js";
import { InvalidConfigError } from "./box.js";
import { LockedError } from "../reconciler/lock.js";
import { CliError, EXIT_INVALID, EXIT_OK, EXIT_USAGE, UsageError, processIo, type CliIo } from "./io.js";

const COMMANDS: Record<string, { run: (args: string[], io: CliIo) => Promise<number>; help: string }> = {
  validate: { run: runValidate, help: VALIDATE_HELP },
  plan: { run: runPlan, help: PLAN_HELP },
  apply: { run: runApply, help: APPLY_HELP },
  status: { run: runStatus, help: STATUS_HELP },
  down: { run: runDown, help: DOWN_HELP },
  reconcile: { run: runReconcile, help: RECONCILE_HELP },
  drift: { run: runDrift, help: DRIFT_HELP },
  agent: { run: runAgent, help: AGENT_HELP },
  doctor: { run: runDoctor, help: DOCTOR_HELP },
  schema: { run: runSchema, help: SCHEMA_HELP },
};

const USAGE = `usage: hal0 <command> [options]

commands:
  validate   compile the config tree and report every problem
  plan       show what apply would change, and why
  apply      converge the box to the config (asks first unless --yes)
  status     each slot's state, pid, port and spec
  down       stop every slot hal0 started
  reconcile  converge without asking: once (--once) or on every change and interval
  drift      list what changed behind hal0's back (exit 2 when something did)
  agent      agent reprovision hermes [--repair]: wire the default Hermes profile
  doctor     check the tree, state folder, runtime and Hermes wiring (exit 1 on a failure)
  schema     write the JSON Schemas of every file kind

Run 'hal0 <command> --help' for a command's options.`;

/** Runs one hal0 command; returns the exit status. Usage errors print one line and return 2. */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    io.stdout.write(`${USAGE}\n`);
    return name === undefined ? EXIT_USAGE : EXIT_OK;
  }
  const command = COMMANDS[name];
  if (!command) {
    io.stderr.write(`hal0: unknown command '${name}' (try 'hal0 --help')\n`);
    return EXIT_USAGE;
  }
  if (rest.includes("--help") || rest.includes("-h")) {
    io.stdout.write(`${command.help}\n`);
    return EXIT_OK;
  }
  try {
    return await command.run(rest, io);
  } catch (err) {
    if (err instanceof UsageError || isParseArgsError(err)) {
      io.stderr.write(`hal0 ${name}: ${(err as Error).message.split("\n")[0]}\n`);
      return EXIT_USAGE;
    }
    if (err instanceof CliError || err instanceof LockedError) {
      io.stderr.write(`hal0 ${name}: ${err.code}: ${err.message}\n`);
      return EXIT_INVALID;
    }
    if (err instanceof InvalidConfigError) return EXIT_INVALID;
    throw err;
  }
}

function isParseArgsError(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return typeof code === "string" && code.startsWith("ERR_PARSE_ARGS");
}
