import { converge, type Converged, type ConvergeOptions } from "../reconciler/converge.js";
import { INTERRUPTED, longLivedAbort } from "../reconciler/drivers/driver.js";
import type { ExecEvent, StepResult } from "../reconciler/execute.js";
import type { Box } from "./box.js";
import type { CliIo } from "./io.js";
import { redactText } from "../server/redact.js";

/**
 * `apply` and `down`: one converge of the box with progress as it goes and
 * the closing summary when anything ran (the caller's `review` prints the
 * plan and asks).
 */
export async function convergeWithProgress(box: Pick<Box, "model" | "driver" | "state" | "hermesCredentials">, io: CliIo, options: Omit<ConvergeOptions, "onEvent" | "signal">): Promise<Converged> {
  const interrupt = new Interrupt(io);
  try {
    const done = await converge({ model: box.model, driver: box.driver, state: box.state, hermesCredentials: box.hermesCredentials }, {
      ...options,
      onEvent: progressReporter(io),
      signal: interrupt.signal,
      // Armed once the plan is accepted: a signal at the question still ends hal0 at once (a terminal's Ctrl-C is a key there: it cancels).
      review: async (plan) => {
        const go = options.review ? await options.review(plan) : true;
        if (go && plan.has_changes) interrupt.arm();
        return go;
      },
    });
    if (done.results.length > 0) io.stdout.write(`${formatResults(done.results, options.plan?.destroy === true ? "down" : "apply")}\n`);
    if (done.unobserved) io.stderr.write(`hal0: the steps above ran, but the box could not be observed after them (${done.unobserved.code}: ${done.unobserved.message}); hal0 status shows the conditions of before until it can be\n`);
    return done;
  } finally {
    interrupt.disarm();
  }
}

/**
 * SIGINT and SIGTERM while an apply or down runs. The first aborts the
 * converge: no further step starts, the steps under way finish (a start's
 * wait for `/health` ends at once, its runner left running), the outcome is
 * recorded and the lock released, and the command ends with the summary
 * (exit 1). The second ends hal0 at once, by that signal; the inventory
 * already holds every runner started, and the next apply takes over the
 * lock of the dead holder.
 */
export class Interrupt {
  private readonly controller = longLivedAbort();
  private armed = false;
  readonly signal = this.controller.signal;
  constructor(private readonly io: CliIo) {}

  private readonly onSignal = (sig: NodeJS.Signals): void => {
    if (!this.controller.signal.aborted) {
      this.controller.abort();
      this.io.stderr.write(`\nhal0: ${sig}: no further step starts; the steps under way finish and runners already started are left running (the next apply or sweep checks them). ${sig} again stops hal0 at once.\n`);
      return;
    }
    this.disarm();
    process.kill(process.pid, sig);
  };

  arm(): void {
    if (this.armed) return;
    this.armed = true;
    process.on("SIGINT", this.onSignal);
    process.on("SIGTERM", this.onSignal);
  }

  disarm(): void {
    if (!this.armed) return;
    this.armed = false;
    process.off("SIGINT", this.onSignal);
    process.off("SIGTERM", this.onSignal);
  }
}

/**
 * Apply progress. On a terminal, one line per slot rewritten in place
 * (starting → warming → ready, with elapsed time); otherwise one plain line
 * per event, so logs and CI read well.
 */
export function progressReporter(io: CliIo): (event: ExecEvent) => void {
  // A failed start's message quotes the runner's last lines, which may hold a secret it printed: masked, as every API reply masks it.
  const report = reporter(io);
  return (e) => report(e.message ? { ...e, message: redactText(e.message) } : e);
}

function reporter(io: CliIo): (event: ExecEvent) => void {
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

/**
 * The closing lines of an apply — counts, then each failure with its code and
 * reason, then the steps an interrupt left — or of a down, whose every step
 * is a stop: "Down complete: 8 stopped, 0 failed." (its plan's deletes
 * remove slots from the inventory, not from the config).
 */
export function formatResults(results: readonly StepResult[], command: "apply" | "down" = "apply"): string {
  const failed = results.filter((r) => !r.ok && r.code !== INTERRUPTED);
  const left = results.filter((r) => r.code === INTERRUPTED);
  const count = (action: string) => results.filter((r) => r.ok && r.action === action).length;
  const done = command === "down"
    ? `${count("delete")} stopped, ${failed.length} failed`
    : `${count("create")} created, ${count("replace")} replaced, ${count("delete")} deleted, ${count("update")} updated, ${failed.length} failed`;
  const word = command === "down" ? "Down" : "Apply";
  const head = left.length > 0 ? `${word} interrupted: ${done}, ${left.length} left to the next ${command}.` : `${word} ${failed.length ? "finished with errors" : "complete"}: ${done}.`;
  return [head, ...failed.map((r) => `  ✗ ${r.address} (${r.action}): ${r.code}: ${redactText(r.error ?? "")}`), ...left.map((r) => `  - ${r.address} (${r.action}): ${redactText(r.error ?? "")}`)].join("\n");
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}
