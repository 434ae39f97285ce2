import { execFile } from "node:child_process";
import { promisify } from "node:util";

/** What every bench part measures with: the median of its samples, and a whole process's wall time. */

const exec = promisify(execFile);

/** The median sample (the upper one of an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Milliseconds from spawning `cmd args` until it exits 0 (a non-zero exit throws). */
export async function wall(cmd: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<number> {
  const t0 = performance.now();
  await exec(cmd, args, { env, cwd, maxBuffer: 32 << 20 });
  return performance.now() - t0;
}
