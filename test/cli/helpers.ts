import type { CliIo } from "../../cli/index.js";

/** An in-process io that records what a command prints. */
export function captureIo(env: Record<string, string> = {}, cwd = process.cwd()): CliIo & { out: () => string; err: () => string } {
  let out = "";
  let err = "";
  return {
    stdout: { write: (s: string) => (out += s), isTTY: false },
    stderr: { write: (s: string) => (err += s), isTTY: false },
    env,
    cwd,
    out: () => out,
    err: () => err,
  };
}
