/** What a command may touch: streams, environment and working folder. Tests pass their own. */
export interface CliIo {
  readonly stdout: { write(text: string): unknown; isTTY?: boolean };
  readonly stderr: { write(text: string): unknown; isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** Where questions are answered; absent or not a TTY means nobody can answer. */
  readonly stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
}

/** A usage error: one line on stderr, exit 2. */
export class UsageError extends Error {}

/** Thrown when the tree has errors; they have been printed. The command exits 1. */
export class InvalidConfigError extends Error {}

/** A refusal with a registry code (`plan.stale`, `apply.locked`, …): printed as `code: message`, exit 1. */
export class CliError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

export const EXIT_OK = 0;
export const EXIT_INVALID = 1;
export const EXIT_USAGE = 2;

export function processIo(): CliIo {
  return { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd(), stdin: process.stdin };
}
