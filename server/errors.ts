import { EditRefusal } from "../compiler/edits/refusal.js";
import { MemoryError } from "../memory/errors.js";
import { CODES, isCode, type Code } from "../schema/index.js";
import { redactText } from "./redact.js";

/**
 * A refusal with a registered code: the route layer turns it into the error
 * envelope of DESIGN.md §4 with the code's HTTP status. Handlers throw it;
 * anything else thrown becomes `system.internal`.
 */
export class ApiError extends Error {
  constructor(
    readonly code: Code,
    message: string,
    readonly details: Readonly<Record<string, unknown>> = {},
    /** Overrides the registry's status (rare: a code shared by two statuses). */
    readonly statusOverride?: number,
  ) {
    super(message);
  }

  get status(): number {
    return this.statusOverride ?? CODES[this.code].http;
  }
}

/** The body of every non-2xx reply. */
export interface ErrorEnvelope {
  readonly error: { readonly code: string; readonly message: string; readonly details: Readonly<Record<string, unknown>> };
}

/**
 * The reply of a refusal, over REST and MCP alike. Its message is redacted
 * (server/redact.ts `redactText`) however it was made: a message that quotes
 * what a lower layer said (fetch repeating a header, an engine echoing a URL)
 * must not hand a credential to the caller.
 */
export function envelope(err: ApiError): ErrorEnvelope {
  return { error: { code: err.code, message: printableMessage(redactText(err.message)), details: err.details } };
}

/** A control character (C0 but tab and line feed, DEL, C1) or an invisible formatting one (a bidi override, a zero-width one). */
const UNPRINTABLE = /[^\P{Cc}\t\n]|\p{Cf}/gu;

/**
 * A message as it may reach a terminal or a log read line by line: each
 * control character but the line feeds (hal0's own messages of several
 * lines) and tabs, and each invisible formatting character, written as
 * `\u001b`. Messages quote what a caller gave as it was decoded (`GET
 * /api/slots/a%1b[31m` is "no slot `a\u001b[31m`"), a file's name, an
 * argument; printed as they are, they would carry the caller's escape
 * sequences, carriage returns and bidi overrides to whoever reads them. The
 * one place for the error envelope (REST and MCP) and the CLI's refusals;
 * `details` keep the values as given.
 */
export function printableMessage(text: string): string {
  return text.replace(UNPRINTABLE, (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, "0")}`);
}

export function notFound(code: Code, what: string, known?: readonly string[]): ApiError {
  return new ApiError(code, `${what} not found`, known === undefined ? {} : { known: [...known].sort() });
}

/**
 * The one mapping from a lower layer's refusal to the HTTP one: a compiler
 * builder's `EditRefusal` and a memory engine's `MemoryError` become the
 * `ApiError` of the same code, message and details; anything else is
 * returned as it is.
 */
export function apiErrorOf(err: unknown): unknown {
  if (err instanceof EditRefusal || err instanceof MemoryError) return new ApiError(err.code, err.message, err.details);
  // A lower layer's error that carries a registry code (a driver's DriverError, the runtime's
  // `runtime.unavailable` when the engine does not answer, LockedError's `apply.locked`) is that
  // refusal, as the CLI reports it — not an internal error.
  const code = (err as { code?: unknown } | null)?.code;
  if (err instanceof Error && !(err instanceof ApiError) && typeof code === "string" && isCode(code)) return new ApiError(code, err.message);
  return storageFull(err) ?? databaseBusy(err) ?? databaseReadOnly(err) ?? err;
}

/**
 * hal0.db refusing a write because hal0 may not write it (another user's
 * after a command run with sudo, or mode 0444: SQLite then opens it read-only
 * and only a write fails) as `system.io` saying so, where `system.internal`
 * would only send them to the log. (memory.db's is said by the engine, naming
 * that file: memory/sqlite.ts damagedInUse.)
 */
export function databaseReadOnly(err: unknown): ApiError | undefined {
  const { code } = (err ?? {}) as { code?: unknown };
  if (typeof code !== "string" || !code.startsWith("SQLITE_READONLY")) return undefined;
  const uid = typeof process.getuid === "function" ? ` (uid ${process.getuid()})` : "";
  return new ApiError("system.io", `could not write the state folder's database (hal0.db): hal0 may not write it (another user's, after a command run with sudo; mode 0444; or a read-only mount); give the user hal0 runs as${uid} read and write access to it and to its folder, or remount it read-write, then retry`, { cause: code });
}

/**
 * hal0.db held past SQLite's wait (busy_timeout, 5 s) by another process's
 * write (a sqlite3 shell or a database browser left inside a transaction) as
 * `state.db_busy` (503): the call failed at that write, and the caller can retry once
 * that process lets go, where `system.internal` would only send them to the
 * log. (memory.db's is `memory.engine_unavailable`, said by the engine.)
 */
export function databaseBusy(err: unknown): ApiError | undefined {
  const { code } = (err ?? {}) as { code?: unknown };
  if (typeof code !== "string" || !code.startsWith("SQLITE_BUSY")) return undefined;
  return new ApiError("state.db_busy", `the state folder's database (hal0.db) is held by another process's write (a sqlite3 shell or a database browser with a transaction open), so hal0 could not write to it; end that transaction or close that program, then retry`, { retry_after_s: 5, cause: code });
}

/**
 * A full disk under the state folder (SQLite's SQLITE_FULL, a write's ENOSPC
 * or EDQUOT; a database opened first on it, memory.db, named) as
 * `server.storage_full` (507): the caller can act on it, where
 * `system.internal` would only send them to the log.
 */
export function storageFull(err: unknown): ApiError | undefined {
  const { code, path } = (err ?? {}) as { code?: unknown; path?: unknown };
  if (code !== "SQLITE_FULL" && code !== "ENOSPC" && code !== "EDQUOT") return undefined;
  // SQLite's own SQLITE_FULL names no file; one memory/sqlite.ts raised as a database was opened (memory.db) names it.
  const where = typeof path === "string" ? path : code === "SQLITE_FULL" ? "the state folder's database" : "a file hal0 writes";
  return new ApiError("server.storage_full", `hal0 could not write ${where}: the disk is full (${code}); free space there, then retry`, { cause: code });
}

/** Runs `fn` (sync or async); a lower layer's refusal it throws comes out as its `ApiError` (`apiErrorOf`). */
export function refusing<T>(fn: () => T): T {
  let out: T;
  try {
    out = fn();
  } catch (err) {
    throw apiErrorOf(err);
  }
  if (out instanceof Promise) return out.catch((err: unknown) => Promise.reject(apiErrorOf(err))) as T;
  return out;
}
