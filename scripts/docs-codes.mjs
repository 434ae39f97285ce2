// Rewrites the code table of docs/codes.md from the registry (schema/codes.ts, built to dist/):
// `npm run docs-codes` after adding a code. test/docs.test.ts checks the table matches.
import { readFileSync, writeFileSync } from "node:fs";
import { CODES } from "../dist/schema/index.js";

const file = new URL("../docs/codes.md", import.meta.url);
const text = readFileSync(file, "utf8");
const head = "| code | severity | meaning |\n|---|---|---|\n";
const start = text.indexOf(head);
if (start < 0) throw new Error("docs/codes.md has no code table header");
let end = start + head.length;
while (text.startsWith("| `", end)) end = text.indexOf("\n", end) + 1;
const rows = Object.entries(CODES).map(([code, info]) => `| \`${code}\` | ${info.severity} | ${info.meaning.replaceAll("|", "\\|")} |\n`);
writeFileSync(file, text.slice(0, start) + head + rows.join("") + text.slice(end));
console.log(`docs/codes.md: ${rows.length} codes`);
