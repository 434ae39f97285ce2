import { once } from "node:events";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { dirname, join, relative } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { expect } from "vitest";
import { compile, sourceTree } from "../../compiler/index.js";
import type { SlotView } from "../../reconciler/index.js";

/** Helpers for process-driver.test.ts: free ports, one-slot views, /proc reads, a driver runnable by plain node. */

export const PROJECT = fileURLToPath(new URL("../..", import.meta.url));
export const RUNNER = join(PROJECT, "fixtures/runner/fake-llama-server.mjs");
const MODEL_FILE = join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");

/**
 * A port nothing listens on right now, below the kernel's ephemeral range
 * (32768–60999). A port bound to 0 and released comes from that range, where
 * the next outgoing connection of any suite running meanwhile may take it as its
 * local port before the runner binds it (a slot then fails `slot.port_in_use`).
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const server = createServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => resolve(true));
    });
    if (!bound) continue;
    server.close();
    await once(server, "close");
    return port;
  }
}

interface ViewOptions {
  readonly port: number;
  readonly env?: Record<string, string>;
  readonly runner?: readonly string[];
  readonly modelPath?: string;
  /** The config folder the tree claims to be (relative paths resolve against it). */
  readonly root: string;
}

/** Compiles a one-slot tree in memory and takes the slot's view, as the executor would. */
export function viewFor({ port, root, env = {}, runner = ["node", RUNNER], modelPath = MODEL_FILE }: ViewOptions): SlotView {
  const files: Array<[string, string]> = [
    ["hal0.toml", "[slots]\nport_range_start = 1024\nport_range_end = 65535\n"],
    ["profiles.toml", `[profile.fake]\nrunner = ${JSON.stringify(runner)}\nflags = "--parallel 1 --threads 2"\ndevice_class = "cpu"\n`],
    ["models.toml", `[model.tiny]\npath = ${JSON.stringify(modelPath)}\ntype = "llm"\n`],
    ["slots/s.toml", `profile = "fake"\nmodel = "tiny"\nport = ${port}\n\n[tune]\nctx_size = 2048\n\n[server]\nenv = ${tomlTable(env)}\n`],
  ];
  const { model, diagnostics } = compile(sourceTree(root, files));
  expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);
  const s = model!.slots.s!;
  return { profile: s.profile, model: s.model ?? null, type: s.type, port: s.port, device: s.device, tune: s.tune_effective, spec: s.spec, spec_hash: s.spec_hash };
}

function tomlTable(env: Record<string, string>): string {
  return `{ ${Object.entries(env).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")} }`;
}

/** Alive and not a zombie (a killed child of this process may linger as one until reaped). */
export async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
  return stat !== undefined && !/^[ZX]$/.test(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0]!);
}

/** Fields 5 (process group) and 22 (start time) of /proc/<pid>/stat. */
export async function procFields(pid: number): Promise<{ pgid: number; start: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { pgid: Number(rest[2]), start: Number(rest[19]) };
}

export async function until(check: () => Promise<boolean>, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await sleep(20);
  }
}

/**
 * Transpiles `entry` and every module its emitted JavaScript imports
 * relatively into `outDir`, keeping the project's layout, so a plain `node`
 * can run the driver without a build step.
 */
export async function transpileClosure(entry: string, outDir: string): Promise<void> {
  const pending = [entry];
  const done = new Set<string>();
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (done.has(file)) continue;
    done.add(file);
    const js = ts.transpileModule(await readFile(file, "utf8"), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
    }).outputText;
    const out = join(outDir, relative(PROJECT, file).replace(/\.ts$/, ".js"));
    await mkdir(dirname(out), { recursive: true });
    await writeFile(out, js);
    for (const [, spec] of js.matchAll(/from\s+"(\.{1,2}\/[^"]+)\.js"/g)) pending.push(join(dirname(file), `${spec}.ts`));
  }
}
