#!/usr/bin/env -S node --max-semi-space-size=2
// Entry point of the `hal0` command: runs the CLI built into dist/.
// Small young-generation semi-spaces (2 MB, from the line above) keep the long-running
// `hal0 serve` near the memory it uses: idle RSS ~93 MB instead of ~140 MB on a 50-slot box,
// at no measurable cost to the short commands. Running it as `node bin/hal0.js` skips the flag.
//
// `npm run build` writes the CLI twice: tsc's one file per module (dist/cli/main.js, what the
// tests and the bench import) and the bundle of scripts/bundle.mjs (dist/cli-bundle/hal0.cjs,
// with V8 code caches beside it; see load-bundle.js), which starts faster. The bundle runs
// unless it is missing or older than tsc's output (a tsc-only build after it): then dist/cli.
import { statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { canLoadBundle, loadBundle } from "./load-bundle.js";

const bundle = fileURLToPath(new URL("../dist/cli-bundle/hal0.cjs", import.meta.url));
const modules = new URL("../dist/cli/main.js", import.meta.url);
const { main } = canLoadBundle && fresh(bundle, fileURLToPath(modules)) ? loadBundle(bundle).exports : await import(modules.href);

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`hal0: internal error: ${err?.stack ?? err}\n`);
    process.exitCode = 70;
  },
);

/** True when `built` exists and is not older than `source` (or `source` is missing). */
function fresh(built, source) {
  const b = statSync(built, { throwIfNoEntry: false });
  if (b === undefined) return false;
  const s = statSync(source, { throwIfNoEntry: false });
  return s === undefined || b.mtimeMs >= s.mtimeMs;
}
