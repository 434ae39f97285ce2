import type { Plan } from "../schema/index.js";
import { refreshConditions } from "../reconciler/conditions-store.js";
import { executePlan, type ExecEvent, type StepResult } from "../reconciler/execute.js";
import { observe } from "../reconciler/observe.js";
import type { Box } from "./box.js";
import { EXIT_INVALID, EXIT_OK, type CliIo } from "./io.js";

/**
 * Executes a plan for `apply` and `down` (the caller holds the lock): progress
 * as it goes, the closing summary, then the slots' conditions from a fresh
 * observation. Exit 0 when every step succeeded, 1 otherwise.
 */
export async function executeWithProgress(plan: Plan, box: Box, io: CliIo): Promise<number> {
  const { slots } = box.model.settings;
  const results = await executePlan(plan, {
    driver: box.driver, state: box.state, cwd: box.root, onEvent: progressReporter(io), hermesCredentials: box.hermesCredentials,
    healthTimeoutS: slots.health_timeout_s, stopGraceS: slots.stop_grace_s, parallel: slots.parallel,
  });
  io.stdout.write(`${formatResults(results)}\n`);
  await refreshConditions(box.model, (await observe(box.model, box.driver, box.state, { hermesCredentials: box.hermesCredentials })).observed, box.state);
  return results.every((r) => r.ok) ? EXIT_OK : EXIT_INVALID;
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
