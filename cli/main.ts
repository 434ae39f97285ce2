import { runSchema, SCHEMA_HELP } from "./schema-cmd.js";
import { runValidate, VALIDATE_HELP } from "./validate.js";
import { EXIT_OK, EXIT_USAGE, UsageError, processIo, type CliIo } from "./io.js";

const COMMANDS: Record<string, { run: (args: string[], io: CliIo) => Promise<number>; help: string }> = {
  validate: { run: runValidate, help: VALIDATE_HELP },
  schema: { run: runSchema, help: SCHEMA_HELP },
};

const USAGE = `usage: hal0 <command> [options]

commands:
  validate   compile the config tree and report every problem
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
    throw err;
  }
}

function isParseArgsError(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return typeof code === "string" && code.startsWith("ERR_PARSE_ARGS");
}
