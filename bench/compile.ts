import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { parse } from "smol-toml";
import { compile } from "../compiler/index.js";
import { generateTree } from "./generate.js";
import { benchApply } from "./apply.js";
import { benchMemory } from "./memory.js";
import { benchServe } from "./serve.js";
import { benchPull } from "./pull.js";
import { median, quartiles, stat, summarize, summaryTable } from "./measure.js";

/**
 * `npm run bench`: compile time of generated trees beside smol-toml's bare
 * parse of the same bytes, in one run. Target: compile within 3× of bare
 * parse at 1000 slots. Parse and compile alternate round by round after a
 * warm-up, so both see the same machine load; the ratio is the median of the
 * per-round ratios, printed with its interquartile range. Every round is a
 * cold compile: the same tree object, but nothing of it is cached between
 * rounds (compile keeps no state).
 */
const SIZES = [10, 100, 1000];
const TARGET_RATIO = 3;
/** At least this many rounds per size, more while the time budget lasts. */
const MIN_ROUNDS = 15;

interface Pair {
  readonly a: number[];
  readonly b: number[];
  /** b/a of each round. */
  readonly ratios: number[];
}

/** Times `a` and `b` in alternating rounds, so both see the same machine load. */
function timePair(a: () => void, b: () => void, budgetMs: number): Pair {
  for (let i = 0; i < 3; i++) (a(), b());
  const out: Pair = { a: [], b: [], ratios: [] };
  const end = performance.now() + budgetMs;
  while (out.a.length < MIN_ROUNDS || (performance.now() < end && out.a.length < 200)) {
    const t0 = performance.now();
    a();
    const t1 = performance.now();
    b();
    const t2 = performance.now();
    out.a.push(t1 - t0);
    out.b.push(t2 - t1);
    out.ratios.push((t2 - t1) / (t1 - t0));
  }
  return out;
}

/** "3.05× (IQR 2.98–3.11, n=40)": the median per-round ratio with its spread. */
function ratioStat(ratios: number[]): string {
  const q = quartiles(ratios);
  return `${median(ratios).toFixed(2)}× (IQR ${q.q1.toFixed(2)}–${q.q3.toFixed(2)}, n=${q.n})`;
}

const rows: string[][] = [["slots", "files", "KiB", "smol-toml parse", "hal0 compile", "compile / parse", "target"]];
let verdict = "";
for (const slots of SIZES) {
  const tree = generateTree(slots);
  const texts = [...tree.files.values()];
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
  const check = compile(tree);
  const errors = check.diagnostics.filter((d) => d.severity === "error");
  if (errors.length > 0) throw new Error(`generated tree of ${slots} slots is invalid: ${JSON.stringify(errors[0])}`);
  const pair = timePair(() => texts.forEach((t) => parse(t)), () => compile(tree), 4000);
  const ratio = median(pair.ratios);
  const digits = slots < 100 ? 3 : 2;
  rows.push([String(slots), String(tree.files.size), (bytes / 1024).toFixed(1), stat(pair.a, "ms", digits), stat(pair.b, "ms", digits), ratioStat(pair.ratios), slots === 1000 ? `≤ ${TARGET_RATIO}×` : ""]);
  if (slots === 1000) {
    const pass = ratio <= TARGET_RATIO;
    verdict = `${pass ? "PASS" : "MISS"}: ${ratio.toFixed(2)}× ${pass ? "≤" : ">"} ${TARGET_RATIO}× at 1000 slots`;
    summarize({
      measure: "compile 1000 slots",
      hal0: `${stat(pair.b)}, ${ratio.toFixed(2)}× parse (IQR ${quartiles(pair.ratios).q1.toFixed(2)}–${quartiles(pair.ratios).q3.toFixed(2)})`,
      anchor: `smol-toml parse ${stat(pair.a)}`,
      target: `≤ ${TARGET_RATIO}×`,
      pass,
    });
  }
}

const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
for (const row of rows) console.log(row.map((cell, c) => cell.padStart(widths[c]!)).join("  "));
console.log(`\n${verdict}  (node ${process.version}, ${new Date().toISOString()})`);

/** The parts that failed: a part that throws is printed as FAILED and the run goes on to the next (the run's exit status is then 1). */
const failed: string[] = [];
async function part(title: string, run: () => Promise<string[]>): Promise<void> {
  console.log(`\n${title}`);
  try {
    for (const line of await run()) console.log(line);
  } catch (err) {
    failed.push(title);
    console.log(`  FAILED: ${err instanceof Error ? err.message : String(err)}`);
  }
}

await part("plan / apply (whole hal0 processes; targets come with the docker runtime)", benchApply);
await part("hal0 serve (a whole process on a 50-slot box, its sweep loop converged)", benchServe);
await part("model pulls (the Hub client and the pull worker)", benchPull);
await part("hal0-memory (the embedded engine over MCP)", benchMemory);

const dockerHost = process.env.DOCKER_HOST;
// The docker part's anchor is Debian's docker-compose: without it there is nothing to stand beside, so say so instead of failing.
const hasCompose = (process.env.PATH ?? "").split(":").some((dir) => dir !== "" && existsSync(join(dir, "docker-compose")));
if (dockerHost && !hasCompose) {
  console.log("\ndocker runtime: skipped (its anchor, docker-compose, is not installed: apt-get install docker-compose)");
} else if (dockerHost) {
  await part(`docker runtime beside docker-compose 1.29 (engine ${dockerHost}; 50 slots of hal0-runner:local)`, async () => (await import("./compose.js")).benchCompose(dockerHost));
} else {
  console.log("\ndocker runtime: skipped (no DOCKER_HOST; run bash .ci/docker-up.sh and export the DOCKER_HOST it prints)");
}

// The swarm part needs the three-node rig (.ci/swarm-up.sh): its manager's socket, answering as a swarm manager.
const swarmDir = process.env.HAL0_SWARM_DIR ?? join(process.env.RUNNER_TEMP ?? "/tmp", "hal0-swarm");
const managerSocket = join(swarmDir, "n1/docker.sock");
const managerHost = `unix://${managerSocket}`;
const isManager = existsSync(managerSocket) && (await promisify(execFile)("docker", ["info", "--format", "{{.Swarm.ControlAvailable}}"], { env: { ...process.env, DOCKER_HOST: managerHost }, timeout: 10_000 })
  .then(({ stdout }) => stdout.trim() === "true", () => false));
if (isManager) {
  await part(`swarm runtime beside docker stack deploy (manager ${managerHost}; 30 slots of hal0-runner:local, 10 pinned to each of 3 nodes)`, async () => (await import("./swarm.js")).benchSwarm(managerHost));
} else {
  console.log(`\nswarm runtime: skipped (no swarm manager at ${managerHost}; start the three-node rig with bash .ci/swarm-up.sh up)`);
}

console.log("\nsummary (medians with their interquartile range and sample count; the anchor and floor measured in this same run)");
for (const line of summaryTable()) console.log(line);
if (failed.length > 0) {
  console.log(`\nFAILED parts (their rows are missing above): ${failed.join("; ")}`);
  process.exitCode = 1;
}
