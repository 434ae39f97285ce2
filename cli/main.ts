import { accessSync, constants, existsSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { closest } from "../compiler/suggest.js";
import { writeRefused } from "../memory/sqlite.js";
import { LockedError } from "../reconciler/lock.js";
import { isCode } from "../schema/codes.js";
import { databaseBusy, printableMessage } from "../server/errors.js";
import { redactText } from "../server/redact.js";
import { formatDiagnostic, formatSummary } from "./format-diagnostics.js";
import {
  CliError, cliDiagnostic, EXIT_ERROR, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, InvalidConfigError, UsageError, processIo, writeJsonFailure,
  type CliDiagnostic, type CliIo,
} from "./io.js";

interface Command {
  readonly run: (args: string[], io: CliIo) => Promise<number>;
  readonly help: string;
  /** Its --json output is JSON lines (`model pull`'s progress, `reconcile`'s reports): a failure document is one line too, so `--json | tail -1 | jq` reads it. */
  readonly jsonLines?: boolean;
}

/**
 * Each command's module loads only when that command runs: `hal0 validate`
 * never loads the reconciler, and only `hal0 reconcile` loads the watcher.
 */
const COMMANDS: Record<string, () => Promise<Command>> = {
  validate: async () => { const m = await import("./validate.js"); return { run: m.runValidate, help: m.VALIDATE_HELP }; },
  init: async () => { const m = await import("./init-cmd.js"); return { run: m.runInit, help: m.INIT_HELP }; },
  plan: async () => { const m = await import("./plan-cmd.js"); return { run: m.runPlan, help: m.PLAN_HELP }; },
  apply: async () => { const m = await import("./apply-cmd.js"); return { run: m.runApply, help: m.APPLY_HELP }; },
  status: async () => { const m = await import("./status-cmd.js"); return { run: m.runStatus, help: m.STATUS_HELP }; },
  down: async () => { const m = await import("./down-cmd.js"); return { run: m.runDown, help: m.DOWN_HELP }; },
  reconcile: async () => { const m = await import("./reconcile-cmd.js"); return { run: m.runReconcile, help: m.RECONCILE_HELP, jsonLines: true }; },
  drift: async () => { const m = await import("./drift-cmd.js"); return { run: m.runDrift, help: m.DRIFT_HELP }; },
  agent: async () => { const m = await import("./agent-cmd.js"); return { run: m.runAgent, help: m.AGENT_HELP }; },
  doctor: async () => { const m = await import("./doctor-cmd.js"); return { run: m.runDoctor, help: m.DOCTOR_HELP }; },
  serve: async () => { const m = await import("./serve-cmd.js"); return { run: m.runServe, help: m.SERVE_HELP }; },
  web: async () => { const m = await import("./web-cmd.js"); return { run: m.runWeb, help: m.WEB_HELP }; },
  schema: async () => { const m = await import("./schema-cmd.js"); return { run: m.runSchema, help: m.SCHEMA_HELP }; },
  token: async () => { const m = await import("./token-cmd.js"); return { run: m.runToken, help: m.TOKEN_HELP }; },
  model: async () => { const m = await import("./model-cmd.js"); return { run: m.runModel, help: m.MODEL_HELP, jsonLines: true }; },
  service: async () => { const m = await import("./service-cmd.js"); return { run: m.runService, help: m.SERVICE_HELP }; },
  bridge: async () => { const m = await import("./bridge-cmd.js"); return { run: m.runBridge, help: m.BRIDGE_HELP }; },
  version: async () => { const m = await import("./version-cmd.js"); return { run: m.runVersion, help: m.VERSION_HELP }; },
};

const USAGE = `usage: hal0 <command> [options]

commands:
  serve      serve the REST API and run the reconcile loop (until SIGTERM)
  web        print a one-time link that logs a browser into the operator's pages
  init       write the example box into a new or empty folder (init DIR)
  validate   compile the config tree and report every problem
  plan       show what apply would change, and why
  apply      converge the box to the config (asks first unless --yes)
  status     each slot's state, pid, port and spec; status SLOT: one slot in full
  down       stop every slot hal0 started
  reconcile  converge without asking: once (--once) or on every change and interval
  drift      list what changed behind hal0's back (exit 2 when something did)
  agent      agent reprovision hermes [--repair]: wire the default Hermes profile;
             agent approvals list|show|approve|deny: gated requests waiting for a person
  doctor     check the tree, state folder, runtime and Hermes wiring (exit 1 on a failure)
  schema     write the JSON Schemas of every file kind
  token      create | list | revoke | rotate: operators' and agents' credentials
  model      model pull REPO FILE: pull a model from the Hugging Face Hub, verify it, register it
  service    service install: write the systemd unit of hal0 serve (--print: show it only)
  bridge     admit NAME | list | revoke NAME: remote coding agents on hal0-agents (/mcp/agents)
  version    hal0's version and the node it runs on (also: hal0 --version)

exit status:
  0   done
  1   an error: 'hal0 <command>: <code>: <message>' on stderr (a tree with errors:
      its diagnostics); with --json, one JSON document on stdout:
      {"ok": false, "exit_code", "error_count", "warning_count", "diagnostics": [...]}
  2   there are changes: plan --detailed-exitcode, drift, agent reprovision hermes
  64  usage error: an unknown command or option, a missing or extra argument
  70  internal error (a bug): 'hal0: internal error: <stack>' on stderr; with --json,
      the failure document with code system.internal

Run 'hal0 <command> --help' (or 'hal0 help <command>') for a command's options.`;

/** How a failed command ends: its exit status, the text for stderr, the diagnostics for --json. */
interface Failure {
  readonly exit: number;
  readonly text: string;
  readonly diagnostics: readonly CliDiagnostic[] | InvalidConfigError["diagnostics"];
}

/**
 * Runs one hal0 command; returns the exit status (see USAGE). A failure is
 * printed once: a line (or the tree's diagnostics) on stderr, or with --json
 * one JSON document on stdout.
 */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  const [first, ...rest] = argv;
  // `hal0 help COMMAND`, as git and npm take it: that command's --help.
  if (first === "help" && rest[0] !== undefined && !rest[0].startsWith("-")) return main([rest[0], "--help"], io);
  // `--version` as native tools take it: the version command.
  const name = first === "--version" ? "version" : first;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    // Asked for: stdout, exit 0. No command at all is a usage error: stderr, exit 64.
    (name === undefined ? io.stderr : io.stdout).write(`${USAGE}\n`);
    return name === undefined ? EXIT_USAGE : EXIT_OK;
  }
  const json = optionsOf(rest).includes("--json");
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) {
    const hit = closest(name, Object.keys(COMMANDS));
    const message = `unknown command '${name}'${hit ? `. Did you mean ${hit}?` : ""} (try 'hal0 --help')`;
    return fail(io, json, masked(EXIT_USAGE, `hal0: ${message}\n`, "cli.usage", message));
  }
  const command = await load();
  if (optionsOf(rest).includes("--help") || optionsOf(rest).includes("-h")) {
    io.stdout.write(`${command.help}\n`);
    return EXIT_OK;
  }
  try {
    return await command.run(rest, io);
  } catch (err) {
    const failure = await failureOf(err, name, io, rest);
    if (failure) return fail(io, json, failure, command.jsonLines);
    if (!json) throw err;
    // Still one JSON document; the stack goes to stderr as bin/hal0.cjs would print it.
    io.stderr.write(redactText(`hal0: internal error: ${(err as Error)?.stack ?? String(err)}\n`));
    return fail(io, json, masked(EXIT_INTERNAL, "", "system.internal", `internal error: ${(err as Error)?.message ?? String(err)}`), command.jsonLines);
  }
}

function fail(io: CliIo, json: boolean, failure: Failure, oneLine = false): number {
  if (json) return writeJsonFailure(io, failure.exit, failure.diagnostics, oneLine);
  io.stderr.write(failure.text);
  return failure.exit;
}

/**
 * A refusal's text and diagnostic masked as the API masks every error envelope's message: a secret typed where a
 * name or path goes (`hal0 status hal0_op_…`), or quoted by a lower layer, is not printed to a terminal or a CI log.
 * A tree's diagnostics are not passed through here: they point into the operator's own files.
 */
function masked(exit: number, text: string, code: string, message: string): Failure {
  // And its control characters written out (`\u001b`): a name from a file or an argument is quoted as it was given.
  const safe = printableMessage(redactText(message));
  return { exit, text: printableMessage(redactText(text)), diagnostics: [cliDiagnostic(code, safe)] };
}

/** What an error thrown by a command means for the exit status; undefined: a bug (rethrown, or system.internal under --json). */
async function failureOf(thrown: unknown, name: string, io: CliIo, args: readonly string[]): Promise<Failure | undefined> {
  // A write to the state folder's database that the disk refused (full, read-only): system.io naming the file, not a bug.
  const err = writeRefused(thrown);
  if (err instanceof InvalidConfigError) {
    const text = { root: err.root, cwd: io.cwd, color: !io.env.NO_COLOR && io.stderr.isTTY === true, texts: err.texts };
    const errors = err.diagnostics.filter((d) => d.severity === "error");
    const lines = errors.map((d) => `${formatDiagnostic(d, text)}\n\n`).join("");
    return { exit: EXIT_ERROR, text: `${lines}${formatSummary(errors.length, err.diagnostics.length - errors.length, err.root, text)}\n`, diagnostics: err.diagnostics };
  }
  if (err instanceof UsageError || isParseArgsError(err)) {
    // Every command parses through io.ts parseCommandArgs, which names the closest option of an unknown one.
    const message = (err as Error).message.split("\n")[0]!;
    return masked(EXIT_USAGE, `hal0 ${name}: ${message}\n`, "cli.usage", message);
  }
  // A refusal with a registry code: CliError, LockedError (apply.locked), ConfigNotFoundError (config.not_found), …
  const code = (err as { code?: unknown } | null)?.code;
  if (err instanceof CliError || err instanceof LockedError || (err instanceof Error && typeof code === "string" && isCode(code))) {
    // A config folder --config did not name: where it came from, and what to do.
    // A state file hal0's user may not read (StateUnreadableError): where the state folder came from, and what to do.
    const { file, errno } = err as { file?: unknown; errno?: unknown };
    const unreadable = code === "system.io" && typeof file === "string" && typeof errno === "string" && BOX_COMMANDS.has(name);
    const advice = code === "config.not_found" && BOX_COMMANDS.has(name) ? (await import("./paths.js")).configAdvice(flagOf(args, "config"), io.env)
      : unreadable ? await inStateFolder(file, errno, undefined, args, io) : "";
    const message = `${(err as Error).message}${advice}`;
    return masked(EXIT_ERROR, `hal0 ${name}: ${code as string}: ${message}\n`, code as string, message);
  }
  // hal0.db held by another process's write past SQLite's wait (state.db_busy, to retry).
  const busy = databaseBusy(err);
  if (busy) return masked(EXIT_ERROR, `hal0 ${name}: ${busy.code}: ${busy.message}\n`, busy.code, busy.message);
  // The file system refused (a folder hal0 may not write, a full disk, a read-only mount): said with its path, no stack.
  const refused = fileSystemRefusal(err);
  if (refused !== undefined) {
    const { path, syscall } = err as { path?: string; syscall?: string };
    const advice = BOX_COMMANDS.has(name) ? await inStateFolder(path, /\((E[A-Z0-9]+)\)$/.exec(refused)?.[1], syscall, args, io) : name === "init" && /\((EACCES|EPERM)\)$/.test(refused) ? INIT_DENIED : "";
    const message = `${refused}${advice}`;
    return masked(EXIT_ERROR, `hal0 ${name}: system.io: ${message}\n`, "system.io", message);
  }
  return undefined;
}

/** What `hal0 init DIR` adds to a refusal to read or write DIR (or make it): it writes only into a folder of the user's. */
const INIT_DENIED = "; hal0 init writes the box into a new or empty folder you may write: name one of your own, such as ~/mybox";

/** The commands that read a box's folders (`--config`, `--state` and their defaults): not init, schema or version, which name their own or none. */
const BOX_COMMANDS = new Set(Object.keys(COMMANDS).filter((c) => !["init", "schema", "version"].includes(c)));

/** The value of `--<option>` on the command line (its last, as parseArgs takes it), before a `--`; undefined when not given. */
function flagOf(args: readonly string[], option: string): string | undefined {
  let value: string | undefined;
  const options = optionsOf(args);
  for (let i = 0; i < options.length; i++) {
    if (options[i] === `--${option}`) value = options[++i];
    else if (options[i]!.startsWith(`--${option}=`)) value = options[i]!.slice(option.length + 3);
  }
  return value;
}

/**
 * For a refusal (permission denied, a read-only file system: `errno` as the
 * message words it, so a recursive mkdir's ENOENT said with its true cause
 * counts) of `path`, in the state folder: stateAdvice; else "".
 */
async function inStateFolder(path: string | undefined, errno: string | undefined, syscall: string | undefined, args: readonly string[], io: CliIo): Promise<string> {
  if (errno !== "EACCES" && errno !== "EPERM" && errno !== "EROFS") return "";
  if (path === undefined) return "";
  const { stateAdvice, statePath } = await import("./paths.js");
  const flag = flagOf(args, "state");
  const dir = statePath(flag, io.env, io.cwd);
  // The folder itself, a file in it, or a folder above it that making it had to make first.
  const ofState = path === dir || path.startsWith(`${dir}/`) || (syscall === "mkdir" && dir.startsWith(`${path}/`));
  return ofState ? stateAdvice(flag, io.env, dir, errno === "EROFS") : "";
}

/** "could not open /x/y: permission denied (EACCES)" for an error of node's file system calls (it has a syscall and a path); else undefined. */
function fileSystemRefusal(err: unknown): string | undefined {
  const e = err as { code?: unknown; syscall?: unknown; path?: unknown; dest?: unknown; message?: unknown } | null;
  if (!(err instanceof Error) || typeof e!.code !== "string" || !/^E[A-Z0-9]+$/.test(e!.code) || typeof e!.syscall !== "string" || typeof e!.path !== "string") return undefined;
  const reason = new RegExp(`^${e!.code}: ([^,]+),`).exec(String(e!.message))?.[1] ?? "refused";
  const truer = e!.syscall === "mkdir" && e!.code === "ENOENT" ? mkdirCause(e!.path) : undefined;
  if (truer) return `could not mkdir ${e!.path}: ${truer}`;
  // An atomic write's temp file (`.<base>.<pid>.<hex>.hal0.tmp`, reconciler/atomic.ts) is named as the file it was for.
  const written = /^(.*\/)\.(.+)\.\d+\.[0-9a-f]{12}\.hal0\.tmp$/.exec(e!.path);
  // Any call on it but a rename (said with the file it was renamed over): the open, write or lstat of its making.
  if (written && e!.syscall !== "rename") return `could not write ${written[1]}${written[2]}: ${reason} (${e!.code})`;
  return `could not ${e!.syscall} ${e!.path}${typeof e!.dest === "string" ? ` to ${e!.dest}` : ""}: ${reason} (${e!.code})`;
}

/**
 * Why a recursive mkdir said ENOENT: node's recursive mkdir reports ENOENT
 * for a folder it may not create under an existing one (a read-only mount,
 * EROFS). The nearest existing ancestor says the real reason: not a folder,
 * or not writable (its access(2) error). Undefined when no cause is found.
 */
function mkdirCause(path: string): string | undefined {
  let at = dirname(path);
  while (!existsSync(at) && dirname(at) !== at) at = dirname(at);
  if (!existsSync(at)) return undefined;
  if (!statSync(at).isDirectory()) return `${at} is not a folder (ENOTDIR)`;
  try {
    accessSync(at, constants.W_OK);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "EACCES";
    const why = code === "EROFS" ? "is on a read-only file system" : code === "EACCES" || code === "EPERM" ? "may not be written" : "cannot be written";
    return `${at} ${why} (${code})`;
  }
}

/** The arguments before a `--` terminator: where options are. */
function optionsOf(args: readonly string[]): readonly string[] {
  const end = args.indexOf("--");
  return end === -1 ? args : args.slice(0, end);
}

function isParseArgsError(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  return typeof code === "string" && code.startsWith("ERR_PARSE_ARGS");
}
