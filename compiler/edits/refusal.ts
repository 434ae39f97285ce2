import type { Code } from "../../schema/index.js";

/**
 * A change the domain refuses to build (a model still in use, a seed profile
 * deleted, a tool on two policy lists): a registered code, a message and
 * details. The compiler knows nothing of HTTP; the server turns it into the
 * `ApiError` of the same code, message and details (server/errors.ts
 * `refusing`), so a reply carries exactly what the builder said.
 */
export class EditRefusal extends Error {
  constructor(
    readonly code: Code,
    message: string,
    readonly details: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}
