import type { Code } from "../schema/index.js";

/** The registry codes a memory engine refuses with (schema/codes-api.ts). */
export type MemoryErrorCode = Extract<Code, "memory.not_found" | "memory.operation_state" | "memory.engine_unavailable" | "memory.engine_error" | "memory.store_replaced" | "mcp.memory_schema">;

/**
 * A memory engine's refusal: a registered code, a message and details. The
 * engines know nothing of HTTP; hal0-memory's adapter (server/memory/run.ts)
 * turns one into the `ApiError` of the same code, message and details, so a
 * tool's reply carries exactly what the engine said.
 */
export class MemoryError extends Error {
  constructor(
    readonly code: MemoryErrorCode,
    message: string,
    readonly details: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}
