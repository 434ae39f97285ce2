import { converge, type Converged, type ConvergeOptions } from "../reconciler/converge.js";
import type { ExecEvent, StepResult } from "../reconciler/execute.js";
import type { Box } from "./box.js";
import type { CliIo } from "./io.js";

/**
 * `apply` and `down`: one converge of the box with progress as it goes and
 * the closing summary when anything ran (the caller's `review` prints the
 * plan and asks).
 */
export async function convergeWithProgress(box: Pick<Box, "model" | "driver" | "state" | "hermesCredentials">, io: CliIo, options: Omit<ConvergeOptions, "onEvent">): Promise<Converged> {
  const done = await converge({ model: box.model, driver: box.driver, state: box.state, hermesCredentials: box.hermesCredentials }, { ...options, onEvent: progressReporter(io) });
  if (done.results.length > 0) io.stdout.write(`${formatResults(done.results)}\n`);
  return done;
}

/**
 * Apply progress. On a terminal, one line per slot rewritten in place
 * (starting → warming → ready, with elapsed time); otherwise one plain line
 * per event, so logs and CI read well.
 */
export function progressReporter(io: CliIo): (event: ExecEvent) => void {
  if (io.stdout.isTTY !== true) {
    return (e) => io.stdout.write(`${e.address}: ${e.phase} (${seconds(e.elapsed_ms)})${e.message ? ` ${e.message}` : ""}\n`);
  }
  const order: string[] = [];
  const lines = new Map<string, string>();
  let drawn = 0;
  return (e) => {
    if (!lines.has(e.address)) order.push(e.address);
    lines.set(e.address, `${e.address.padEnd(24)} ${e.phase.padEnd(9)} ${seconds(e.elapsed_ms).padStart(6)}${e.message ? `  ${e.message}` : ""}`);
    // Move up over the block drawn last time and draw it again, one line per slot.
    let out = drawn > 0 ? `\u001b[${drawn}A` : "";
    for (const address of order) out += `\u001b[2K${lines.get(address)}\n`;
    drawn = order.length;
    io.stdout.write(out);
  };
}

/** The closing lines of an apply: counts, then each failure with its code and reason. */
export function formatResults(results: readonly StepResult[]): string {
  const failed = results.filter((r) => !r.ok);
  const count = (action: string) => results.filter((r) => r.ok && r.action === action).length;
  const head = `Apply ${failed.length ? "finished with errors" : "complete"}: ${count("create")} created, ${count("replace")} replaced, ${count("delete")} deleted, ${count("update")} updated, ${failed.length} failed.`;
  return [head, ...failed.map((r) => `  ✗ ${r.address} (${r.action}): ${r.code}: ${r.error}`)].join("\n");
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}
