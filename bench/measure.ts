import { execFile } from "node:child_process";
import { promisify } from "node:util";

/**
 * What every bench part measures with: the median of its samples with their
 * spread, a whole process's wall time, and the summary table — each
 * part adds its rows (hal0 beside its anchor and floor, the target, a verdict)
 * and the entry prints them together at the end of one run.
 */

const exec = promisify(execFile);

/** The median sample (the upper one of an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** The samples' quartiles: the spread printed beside a median. */
export function quartiles(xs: number[]): { q1: number; q3: number; min: number; max: number; n: number } {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor((s.length - 1) * q))]!;
  return { q1: at(0.25), q3: at(0.75), min: s[0]!, max: s[s.length - 1]!, n: s.length };
}

/**
 * "245 ms (IQR 238–251, n=12)": a median with its interquartile range and
 * sample count. `unit` "ms" prints milliseconds, "s" seconds (samples are ms).
 */
export function stat(xs: number[], unit: "ms" | "s" = "ms", digits = unit === "s" ? 2 : 1): string {
  const k = unit === "s" ? 1 / 1000 : 1;
  const f = (v: number) => (v * k).toFixed(digits);
  const q = quartiles(xs);
  return `${f(median(xs))} ${unit} (IQR ${f(q.q1)}–${f(q.q3)}, n=${q.n})`;
}

/** Milliseconds from spawning `cmd args` until it exits 0 (a non-zero exit throws). */
export async function wall(cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<number> {
  const t0 = performance.now();
  await exec(cmd, args, { env, cwd, maxBuffer: 32 << 20 });
  return performance.now() - t0;
}

/**
 * The environment without NODE_EXTRA_CA_CERTS, or undefined when it is not set.
 * With it set, every node process reads and parses that certificate bundle
 * before it runs a line of its script (on the bench's host, where it names the
 * system bundle, ~44 ms of `node -e 0`'s ~70 ms). The CLI rows are timed both
 * ways, the two interleaved: as the host has it, and with it unset, which is
 * how node starts where nothing sets it; hal0 does the same work in each.
 */
export function withoutExtraCaCerts(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv | undefined {
  if (env.NODE_EXTRA_CA_CERTS === undefined) return undefined;
  const { NODE_EXTRA_CA_CERTS: _unset, ...rest } = env;
  return rest;
}

/** One row of the summary: what was measured, hal0's figure, its anchor and floor, the target and whether it holds. */
export interface SummaryRow {
  readonly measure: string;
  readonly hal0: string;
  readonly anchor: string;
  readonly target: string;
  readonly pass: boolean;
}

const summaryRows: SummaryRow[] = [];

/** Adds a row to the summary printed at the end of `npm run bench`. */
export function summarize(row: SummaryRow): void {
  summaryRows.push(row);
}

/** The summary table, one line per row, columns aligned. */
export function summaryTable(): string[] {
  const rows = [["measure", "hal0", "anchor / floor", "target", ""], ...summaryRows.map((r) => [r.measure, r.hal0, r.anchor, r.target, r.pass ? "PASS" : "MISS"])];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((row) => row.map((cell, c) => cell.padEnd(widths[c]!)).join("  ").trimEnd());
}
