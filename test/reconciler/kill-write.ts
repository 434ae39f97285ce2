import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pathToFileURL } from "node:url";
import { PROJECT, transpileClosure } from "./process-helpers.js";

/** reconciler/atomic.ts transpiled for a plain `node` (once per test file). */
let atomicModule: Promise<string> | undefined;
function atomicJs(): Promise<string> {
  atomicModule ??= (async () => {
    const out = mkdtempSync(join(tmpdir(), "hal0-atomic-js-"));
    await transpileClosure(join(PROJECT, "reconciler/atomic.ts"), out);
    return join(out, "reconciler/atomic.js");
  })();
  return atomicModule;
}

/** Temp files of any form beside `target` (`.<base>.…tmp`). */
export function tempsBeside(target: string): string[] {
  const base = basename(target);
  return readdirSync(dirname(target)).filter((n) => n.startsWith(`.${base}.`) && n.endsWith(".tmp"));
}

/**
 * A real crash mid-write: a child `node` calls writeFileAtomic(`target`, a
 * big text) in a loop and gets SIGKILL at a random moment while one of its
 * temp files exists. Tries again until a kill leaves a temp behind (one that
 * lands after the rename leaves none). Resolves with the child's pid and the
 * temps it left.
 */
export async function killMidWrite(target: string, trials = 20): Promise<{ pid: number; left: string[] }> {
  const module = pathToFileURL(await atomicJs()).href;
  const script = `
    import { writeFileAtomic } from ${JSON.stringify(module)};
    const text = "# filler\\n".repeat(4 * 1024 * 1024); // 36 MiB: a write takes long enough to be caught mid-way
    process.stdout.write("ready\\n");
    for (let i = 0; ; i++) await writeFileAtomic(${JSON.stringify(target)}, text + "# " + i + "\\n");
  `;
  for (let trial = 0; trial < trials; trial++) {
    const before = new Set(tempsBeside(target));
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    await once(child.stdout!, "data");
    await sleep(50 + Math.random() * 250);
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && !tempsBeside(target).some((n) => !before.has(n))) await sleep(1);
    const exited = once(child, "exit");
    child.kill("SIGKILL");
    await exited;
    const left = tempsBeside(target).filter((n) => !before.has(n));
    if (left.length > 0) return { pid: child.pid!, left };
  }
  throw new Error(`no kill -9 in ${trials} trials left a temp file beside ${target}`);
}

/** The pid of a process that has exited (spawned, waited for). */
export async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await once(child, "exit");
  return child.pid!;
}
