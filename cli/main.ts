import { LockedError } from "../reconciler/lock.js";
import { CliError, EXIT_INVALID, EXIT_OK, EXIT_USAGE, InvalidConfigError, UsageError, processIo, type CliIo } from "./io.js";

interface Command {
  readonly run: (args: string[], io: CliIo) => Promise<number>;
  readonly help: string;
}

/**
 * Each command's module loads only when that command runs: `hal0 validate`
 * never loads the reconciler, and only `hal0 reconcile` loads the watcher.
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  validate: async () => { const m = await import("./validate.js"); return { run: m.runValidate, help: m.VALIDATE_HELP }; },
  plan: async () => { const m = await import("./plan-cmd.js"); return { run: m.runPlan, help: m.PLAN_HELP }; },
  apply: async () => { const m = await import("./apply-cmd.js"); return { run: m.runApply, help: m.APPLY_HELP }; },
  status: async () => { const m = await import("./status-cmd.js"); return { run: m.runStatus, help: m.STATUS_HELP }; },
  down: async () => { const m = await import("./down-cmd.js"); return { run: m.runDown, help: m.DOWN_HELP }; },
  reconcile: async () => { const m = await import("./reconcile-cmd.js"); return { run: m.runReconcile, help: m.RECONCILE_HELP }; },
  drift: async () => { const m = await import("./drift-cmd.js"); return { run: m.runDrift, help: m.DRIFT_HELP }; },
  agent: async () => { const m = await import("./agent-cmd.js"); return { run: m.runAgent, help: m.AGENT_HELP }; },
  doctor: async () => { const m = await import("./doctor-cmd.js"); return { run: m.runDoctor, help: m.DOCTOR_HELP }; },
  serve: async () => { const m = await import("./serve-cmd.js"); return { run: m.runServe, help: m.SERVE_HELP }; },
  web: async () => { const m = await import("./web-cmd.js"); return { run: m.runWeb, help: m.WEB_HELP }; },
  schema: async () => { const m = await import("./schema-cmd.js"); return { run: m.runSchema, help: m.SCHEMA_HELP }; },
  token: async () => { const m = await import("./token-cmd.js"); return { run: m.runToken, help: m.TOKEN_HELP }; },
};

const USAGE = `usage: hal0 <command> [options]

commands:
  serve      serve the REST API and run the reconcile loop (until SIGTERM)
  web        print a one-time link that logs a browser into the operator's pages
  validate   compile the config tree and report every problem
  plan       show what apply would change, and why
  apply      converge the box to the config (asks first unless --yes)
  status     each slot's state, pid, port and spec
  down       stop every slot hal0 started
  reconcile  converge without asking: once (--once) or on every change and interval
  drift      list what changed behind hal0's back (exit 2 when something did)
  agent      agent reprovision hermes [--repair]: wire the default Hermes profile;
             agent approvals list|show|approve|deny: gated requests waiting for a person
  doctor     check the tree, state folder, runtime and Hermes wiring (exit 1 on a failure)
  schema     write the JSON Schemas of every file kind
  token      create | list | revoke | rotate: operators' and agents' credentials

Run 'hal0 <command> --help' for a command's options.`;

/** Runs one hal0 command; returns the exit status. Usage errors print one line and return 2. */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    io.stdout.write(`${USAGE}\n`);
    return name === undefined ? EXIT_USAGE : EXIT_OK;
  }
  const load = COMMANDS[name];
  if (!load) {
    io.stderr.write(`hal0: unknown command '${name}' (try 'hal0 --help')\n`);
    return EXIT_USAGE;
  }
  const command = await load();
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
