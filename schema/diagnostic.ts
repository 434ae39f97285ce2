import { z } from "zod";
import { CODES, type Code } from "./codes.js";

/**
 * The one diagnostic shape of compiler, CLI, REST and MCP (DESIGN.md §4).
 * `file` is relative to the config folder, `line` and `column` are 1-based and
 * point at the offending key or value (a table header or the file's start when
 * what is wrong is something missing). `path` is the key path inside the file.
 */
export const Severity = z.enum(["error", "warning"]);
export type Severity = z.infer<typeof Severity>;

export const SourcePosition = z.object({
  file: z.string(),
  line: z.int().min(1),
  column: z.int().min(1),
});
export type SourcePosition = z.infer<typeof SourcePosition>;

export const RelatedPosition = SourcePosition.extend({ message: z.string() });
export type RelatedPosition = z.infer<typeof RelatedPosition>;

export type KeyPath = ReadonlyArray<string | number>;

export const Diagnostic = z.object({
  code: z.enum(Object.keys(CODES) as [Code, ...Code[]]),
  severity: Severity,
  summary: z.string(),
  detail: z.string(),
  file: z.string(),
  line: z.int().min(1),
  column: z.int().min(1),
  path: z.array(z.union([z.string(), z.int()])),
  related: z.array(RelatedPosition),
});
export type Diagnostic = Omit<z.infer<typeof Diagnostic>, "code"> & { code: Code };
