import { parse } from "smol-toml";
import { compile } from "../compiler/index.js";
import { generateTree } from "./generate.js";

/**
 * `npm run bench`: compile time of generated trees beside smol-toml's bare
 * parse of the same bytes, in one run. Target: compile within 3× of bare
 * parse at 1000 slots. Medians of repeated runs after a warm-up.
 */
const SIZES = [10, 100, 1000];
const TARGET_RATIO = 3;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function time(fn: () => void, budgetMs: number): number {
  for (let i = 0; i < 3; i++) fn();
  const samples: number[] = [];
  const end = performance.now() + budgetMs;
  while (samples.length < 5 || (performance.now() < end && samples.length < 200)) {
    const t0 = performance.now();
    fn();
    samples.push(performance.now() - t0);
  }
  return median(samples);
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
  const parseMs = time(() => texts.forEach((t) => parse(t)), 2000);
  const compileMs = time(() => compile(tree), 2000);
  const ratio = compileMs / parseMs;
  rows.push([String(slots), String(tree.files.size), (bytes / 1024).toFixed(1), parseMs.toFixed(2), compileMs.toFixed(2), `${ratio.toFixed(2)}×`, slots === 1000 ? `≤ ${TARGET_RATIO}×` : ""]);
  if (slots === 1000) verdict = ratio <= TARGET_RATIO ? `PASS: ${ratio.toFixed(2)}× ≤ ${TARGET_RATIO}× at 1000 slots` : `MISS: ${ratio.toFixed(2)}× > ${TARGET_RATIO}× at 1000 slots`;
}

const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
for (const row of rows) console.log(row.map((cell, c) => cell.padStart(widths[c]!)).join("  "));
console.log(`\n${verdict}  (node ${process.version}, ${new Date().toISOString()})`);
