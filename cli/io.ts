import { writeSync } from "node:fs";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { countDiagnostics } from "../compiler/index.js";
import { closest } from "../compiler/suggest.js";
import type { Diagnostic } from "../schema/index.js";

/** What a command may touch: streams, environment and working folder. Tests pass their own. */
export interface CliIo {
  readonly stdout: { write(text: string): unknown; isTTY?: boolean };
  readonly stderr: { write(text: string): unknown; isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** Where questions are answered; absent or not a TTY means nobody can answer. */
  readonly stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
}

/**
 * The exit statuses of every command (issue 16):
 * 0 done; 1 an error (a refusal with a registry code, a tree with errors, a
 * failed step); 2 only "there are changes" (`plan --detailed-exitcode`,
 * `drift`, `agent reprovision hermes` without --repair); 64 a command line
 * hal0 cannot read (EX_USAGE of sysexits.h); 70 an internal error (bin/hal0.cjs).
 */
export const EXIT_OK = 0;
export const EXIT_ERROR = 1;
export const EXIT_CHANGES = 2;
export const EXIT_USAGE = 64;
export const EXIT_INTERNAL = 70;

/** A usage error (`cli.usage`): one line on stderr, exit 64. */
export class UsageError extends Error {}

/**
 * The tree has errors: the command exits 1, and `main` prints the errors
 * (text on stderr, or under --json the one JSON document on stdout).
 */
export class InvalidConfigError extends Error {
  constructor(
    readonly root: string,
    /** Everything the compiler said (errors and warnings), as `hal0 validate --json` lists it. */
    readonly diagnostics: readonly Diagnostic[],
    /** The tree's files by path, for the code frames of the text. */
    readonly texts: ReadonlyMap<string, string> = new Map(),
  ) {
    super(`${root} has ${diagnostics.filter((d) => d.severity === "error").length} error(s)`);
  }
}

/** A refusal with a registry code (`plan.stale`, `config.not_found`, …): printed as `code: message`, exit 1. */
export class CliError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

/**
 * The diagnostic shape of `hal0 validate --json` (schema/diagnostic.ts), for
 * every failure a command reports under --json. A failure that is about no
 * file of the tree (a missing config folder, an engine that does not answer,
 * a usage error) has `file`, `line` and `column` null and an empty `path`.
 */
export type CliDiagnostic = Omit<Diagnostic, "code" | "file" | "line" | "column"> & {
  code: string;
  file: string | null;
  line: number | null;
  column: number | null;
};

/** The one JSON document a command prints on stdout when it fails under --json. */
export interface JsonFailure {
  ok: false;
  exit_code: number;
  error_count: number;
  warning_count: number;
  diagnostics: CliDiagnostic[];
}

/** A diagnostic about no file: `summary` is the message's first line, `detail` the whole message. */
export function cliDiagnostic(code: string, message: string, severity: Diagnostic["severity"] = "error"): CliDiagnostic {
  return { code, severity, summary: message.split("\n")[0]!, detail: message, file: null, line: null, column: null, path: [], related: [] };
}

export function jsonFailure(exitCode: number, diagnostics: ReadonlyArray<Diagnostic | CliDiagnostic>): JsonFailure {
  const { errors, warnings } = countDiagnostics(diagnostics);
  return { ok: false, exit_code: exitCode, error_count: errors, warning_count: warnings, diagnostics: [...diagnostics] };
}

/**
 * Prints the failure document (`{ok: false, exit_code, error_count,
 * warning_count, diagnostics}`) on stdout and returns `exitCode`, so a
 * command can `return writeJsonFailure(io, EXIT_ERROR, diagnostics)`; on one
 * line with `oneLine` (a command whose --json output is JSON lines).
 */
export function writeJsonFailure(io: CliIo, exitCode: number, diagnostics: ReadonlyArray<Diagnostic | CliDiagnostic>, oneLine = false): number {
  io.stdout.write(`${JSON.stringify(jsonFailure(exitCode, diagnostics), null, oneLine ? undefined : 2)}\n`);
  return exitCode;
}

/**
 * node's `parseArgs`, with an unknown option turned into a UsageError naming
 * the closest known one: "Unknown option '--confg'. Did you mean --config?".
 */
export function parseCommandArgs<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  let parsed: ReturnType<typeof parseArgs<T>>;
  try {
    parsed = parseArgs(config);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      const known = Object.keys(config.options ?? {}).map((o) => (o.length === 1 ? `-${o}` : `--${o}`));
      throw new UsageError(unknownOption((err as Error).message, known, config.allowPositionals === true ? config.args ?? [] : undefined));
    }
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
      const dashed = dashedValue((err as Error).message, config.args ?? []);
      if (dashed !== undefined) throw new UsageError(dashed);
    }
    throw err;
  }
  refuseEmpty(parsed.values as Record<string, unknown>, parsed.positionals);
  for (const name of PATH_OPTIONS) {
    const value = (parsed.values as Record<string, unknown>)[name];
    if (typeof value === "string") refuseUnexpanded(value, `--${name}`);
  }
  return parsed;
}

/** The options whose value is a path (a folder or a file hal0 reads or writes). */
const PATH_OPTIONS = ["config", "state", "out", "plan", "unit-dir"] as const;

/**
 * A path that starts with `~` the shell left as it is (`--state=~/box-state`:
 * bash expands a tilde only at a word's start; `'~/box'` quoted) is a usage
 * error: resolved against the working folder it made a folder named `~` there
 * (`./~/box-state`), the box's database and operator token in it, and the
 * home folder's `~/box-state` never made. `what` is the option (`--state`) or the command before the argument (`hal0 init`).
 */
export function refuseUnexpanded(value: string, what: string): void {
  if (!/^~[^/]*(\/|$)/.test(value)) return;
  throw new UsageError(`${what} was given '${value}', whose '~' the shell did not expand (it does not after '=' or inside quotes): write ${what} ${value}, or the full path (./${value} for a folder of that name here)`);
}

/**
 * An empty value (`--state ""`, `--port=`, `init ""`) is a usage error: taken
 * as the flag left out, it fell back to a default the caller did not name
 * (`--state ""` wrote to /var/lib/hal0, `apply --plan ""` applied a new plan
 * nobody had read).
 */
function refuseEmpty(values: Record<string, unknown>, positionals: readonly string[]): void {
  for (const [name, value] of Object.entries(values)) {
    if (value === "" || (Array.isArray(value) && value.includes(""))) throw new UsageError(`option --${name} needs a value; it was given an empty one`);
  }
  if (positionals.includes("")) throw new UsageError("an empty argument: name what it stands for");
}

/**
 * The line for node's ERR_PARSE_ARGS_UNKNOWN_OPTION message, given the
 * command's options (`--config`, …) and, for a command that takes arguments
 * (`init DIR`), its command line: an argument that starts with a dash
 * (`hal0 init -box`) is named, with how to pass it (node's own hint was lost
 * with its second line, so "Unknown option '-b'" left the user guessing).
 */
export function unknownOption(nodeMessage: string, known: readonly string[], args?: readonly string[]): string {
  const option = /^Unknown option '([^']*)'/.exec(nodeMessage)?.[1];
  if (option === undefined) return nodeMessage.split("\n")[0]!;
  const long = known.filter((k) => k.startsWith("--")).map((k) => k.slice(2));
  const hit = option.startsWith("--") ? closest(option.slice(2), long) : undefined;
  if (hit) return `Unknown option '${option}'. Did you mean --${hit}?`;
  const given = args === undefined ? undefined : optionsOfArgs(args).find((a) => (option.startsWith("--") ? a === option || a.startsWith(`${option}=`) : !a.startsWith("--") && a.startsWith(option)));
  if (given === undefined) return `Unknown option '${option}'. See --help for the options.`;
  return `Unknown option '${option}'${given === option ? "" : ` (in '${given}')`}. See --help for the options; an argument that starts with '-' goes after '--': -- ${given}`;
}

/**
 * node's "argument is ambiguous" (`--config -box`: the value starts with a
 * dash) said with the value and both ways to pass it; undefined for another
 * ERR_PARSE_ARGS_INVALID_OPTION_VALUE (a boolean given a value).
 */
function dashedValue(nodeMessage: string, args: readonly string[]): string | undefined {
  const option = /^Option '([^' ]+)' argument is ambiguous/.exec(nodeMessage)?.[1];
  if (option === undefined) return undefined;
  const options = optionsOfArgs(args);
  const value = options[options.indexOf(option) + 1];
  if (value === undefined) return undefined;
  return `option ${option} was given '${value}', which starts with a dash: if that is its value, write ${option}=${value}${/^-[^-]/.test(value) ? ` (a path also as ${option} ./${value})` : ""}; else give ${option} its value`;
}

/** The arguments before a `--` terminator: where options are. */
function optionsOfArgs(args: readonly string[]): readonly string[] {
  const end = args.indexOf("--");
  return end === -1 ? args : args.slice(0, end);
}

export function processIo(): CliIo {
  keepGoingWhenOutputCloses();
  return { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd(), stdin: process.stdin };
}

/**
 * A reader that goes away (`hal0 apply | head -1`) must not stop a command
 * half-way: node ignores SIGPIPE and reports EPIPE as an 'error' on the
 * stream, which, unheard, ended the process in the middle of an apply (its
 * lock left, some slots started). The command goes on to its end and its
 * exit status; what it would have printed is dropped. Any other error of
 * the streams (`hal0 plan --json > plan.json` on a full disk: ENOSPC) lets
 * the command end as cleanly, and then fails it: exit 1 (unless it failed
 * already), said on stderr as system.io; said at exit, as such an error may
 * come after the command returned. Thrown from the listener, it ended hal0
 * at once with a trace that quoted the bundle's minified source.
 */
function keepGoingWhenOutputCloses(): void {
  // The first output the command could not write, other than to a reader that went away.
  let lost: { readonly stream: string; readonly err: NodeJS.ErrnoException } | undefined;
  let heard = false;
  for (const [name, stream] of [["stdout", process.stdout], ["stderr", process.stderr]] as const) {
    if (stream.listenerCount("error") > 0) continue;
    heard = true;
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "EPIPE" || err.code === "ERR_STREAM_DESTROYED") return;
      lost ??= { stream: name, err };
    });
  }
  if (!heard) return;
  process.once("exit", (code) => {
    if (lost === undefined) return;
    const reason = new RegExp(`^${lost.err.code}: ([^,]+),`).exec(lost.err.message)?.[1] ?? lost.err.message;
    try {
      writeSync(2, `hal0: system.io: could not write ${lost.stream}: ${reason}${lost.err.code ? ` (${lost.err.code})` : ""}\n`);
    } catch {
      // stderr is what failed: the exit status alone says it.
    }
    if (code === EXIT_OK) process.exitCode = EXIT_ERROR;
  });
}
