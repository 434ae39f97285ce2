import { EditRefusal } from "../compiler/edits/refusal.js";
import { MemoryError } from "../memory/errors.js";
import { CODES, type Code } from "../schema/index.js";

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

export function envelope(err: ApiError): ErrorEnvelope {
  return { error: { code: err.code, message: err.message, details: err.details } };
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
  return err;
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
