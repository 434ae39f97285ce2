#!/usr/bin/env -S node --max-semi-space-size=2
// Entry point of the `hal0` command (package.json "bin"): runs the CLI built into dist/.
// Small young-generation semi-spaces (2 MB, from the line above) keep the long-running
// `hal0 serve` near the memory it uses: idle RSS ~93 MB instead of ~140 MB on a 50-slot box.
// Running it as `node bin/hal0.cjs` skips the flag. CommonJS, so that node starts it without
// its ES module loader; `node bin/hal0.js` runs this same file.
//
// `npm run build` writes the CLI twice: tsc's one file per module (dist/cli/main.js, what the
// tests and the bench import) and the bundle of scripts/bundle.mjs (dist/cli-bundle/hal0.cjs,
// with V8 code caches beside it; see load-bundle.cjs), which starts faster. The bundle runs
// unless it is missing or older than tsc's output (a tsc-only build after it): then dist/cli.
"use strict";
const { statSync } = require("node:fs");
const { join } = require("node:path");
const { pathToFileURL } = require("node:url");
const { canLoadBundle, loadBundle } = require("./load-bundle.cjs");

const bundle = join(__dirname, "../dist/cli-bundle/hal0.cjs");
const modules = join(__dirname, "../dist/cli/main.js");
const loaded = canLoadBundle && fresh(bundle, modules) ? Promise.resolve(bundled(bundle)) : import(pathToFileURL(modules).href);

loaded
  .then(({ main }) => main(process.argv.slice(2)))
  .then(
    (code) => {
      process.exitCode = code;
      // The command is done. When nothing is left in the event loop (no timer, socket, child or file
      // operation still running), exit now: node would otherwise wait for V8's background compiles of
      // the code that ran hot (~5-15 ms after a docker plan) and tear the heap down before exiting.
      // Anything still pending keeps the usual exit, after it.
      setImmediate(() => {
        if (process.getActiveResourcesInfo().length === 0) process.exit();
      });
    },
    (err) => {
      process.stderr.write(`hal0: internal error: ${err?.stack ?? err}\n`);
      process.exitCode = 70;
    },
  );

/** The bundle's exports; a damaged code cache is said on stderr (the command runs without it, compiled as usual). */
function bundled(file) {
  const { exports, cache, cachePath } = loadBundle(file);
  if (cache === "damaged") {
    process.stderr.write(`hal0: note: the CLI's code cache ${cachePath} is damaged (its bytes are not the ones the build wrote); this command runs without it (compiled as usual). \`npm run build\` in ${join(__dirname, "..")} writes it again.\n`);
  }
  return exports;
}

/** True when `built` exists and is not older than `source` (or `source` is missing). */
function fresh(built, source) {
  const b = statSync(built, { throwIfNoEntry: false });
  if (b === undefined) return false;
  const s = statSync(source, { throwIfNoEntry: false });
  return s === undefined || b.mtimeMs >= s.mtimeMs;
}
