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
import { median, summaryTable } from "./measure.js";

/**
 * `npm run bench`: compile time of generated trees beside smol-toml's bare
 * parse of the same bytes, in one run. Target: compile within 3× of bare
 * parse at 1000 slots. Parse and compile alternate round by round after a
 * warm-up; the ratio is the median of the per-round ratios.
 */
const SIZES = [10, 100, 1000];
const TARGET_RATIO = 3;

/**
 * Times `a` and `b` in alternating rounds, so both see the same machine load,
 * and returns the median of each and the median of the per-round ratios b/a.
 */
function timePair(a: () => void, b: () => void, budgetMs: number): { a: number; b: number; ratio: number } {
  for (let i = 0; i < 3; i++) (a(), b());
  const as: number[] = [];
  const bs: number[] = [];
  const ratios: number[] = [];
  const end = performance.now() + budgetMs;
  while (as.length < 7 || (performance.now() < end && as.length < 200)) {
    const t0 = performance.now();
    a();
    const t1 = performance.now();
    b();
    const t2 = performance.now();
    as.push(t1 - t0);
    bs.push(t2 - t1);
    ratios.push((t2 - t1) / (t1 - t0));
  }
  return { a: median(as), b: median(bs), ratio: median(ratios) };
}

const rows: string[][] = [["slots", "files", "KiB", "smol-toml parse (ms)", "hal0 compile (ms)", "ratio", "target"]];
let verdict = "";
for (const slots of SIZES) {
  const tree = generateTree(slots);
  const texts = [...tree.files.values()];
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
  const check = compile(tree);
  const errors = check.diagnostics.filter((d) => d.severity === "error");
  if (errors.length > 0) throw new Error(`generated tree of ${slots} slots is invalid: ${JSON.stringify(errors[0])}`);
  const { a: parseMs, b: compileMs, ratio } = timePair(() => texts.forEach((t) => parse(t)), () => compile(tree), 4000);
  rows.push([String(slots), String(tree.files.size), (bytes / 1024).toFixed(1), parseMs.toFixed(2), compileMs.toFixed(2), `${ratio.toFixed(2)}×`, slots === 1000 ? `≤ ${TARGET_RATIO}×` : ""]);
  if (slots === 1000) verdict = ratio <= TARGET_RATIO ? `PASS: ${ratio.toFixed(2)}× ≤ ${TARGET_RATIO}× at 1000 slots` : `MISS: ${ratio.toFixed(2)}× > ${TARGET_RATIO}× at 1000 slots`;
}

const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
for (const row of rows) console.log(row.map((cell, c) => cell.padStart(widths[c]!)).join("  "));
console.log(`\n${verdict}  (node ${process.version}, ${new Date().toISOString()})`);

console.log("\nplan / apply (whole hal0 processes; targets come with the docker runtime)");
for (const line of await benchApply()) console.log(line);

console.log("\nhal0 serve (a whole process on a 50-slot box, its sweep loop converged)");
for (const line of await benchServe()) console.log(line);

console.log("\nmodel pulls (the Hub client and the pull worker)");
for (const line of await benchPull()) console.log(line);

console.log("\nhal0-memory (the embedded engine over MCP)");
for (const line of await benchMemory()) console.log(line);

const dockerHost = process.env.DOCKER_HOST;
// The docker part's anchor is Debian's docker-compose: without it there is nothing to stand beside, so say so instead of failing.
const hasCompose = (process.env.PATH ?? "").split(":").some((dir) => dir !== "" && existsSync(join(dir, "docker-compose")));
if (dockerHost && !hasCompose) {
  console.log("\ndocker runtime: skipped (its anchor, docker-compose, is not installed: apt-get install docker-compose)");
} else if (dockerHost) {
  console.log(`\ndocker runtime beside docker-compose 1.29 (engine ${dockerHost}; 50 slots of hal0-runner:local)`);
  const { benchCompose } = await import("./compose.js");
  for (const line of await benchCompose(dockerHost)) console.log(line);
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
  console.log(`\nswarm runtime beside docker stack deploy (manager ${managerHost}; 30 slots of hal0-runner:local, 10 pinned to each of 3 nodes)`);
  const { benchSwarm } = await import("./swarm.js");
  for (const line of await benchSwarm(managerHost)) console.log(line);
} else {
  console.log(`\nswarm runtime: skipped (no swarm manager at ${managerHost}; start the three-node rig with bash .ci/swarm-up.sh up)`);
}

console.log("\nsummary (medians with their interquartile range and sample count; the anchor and floor measured in this same run)");
for (const line of summaryTable()) console.log(line);
