// Loads the bundled CLI (dist/cli-bundle/hal0.cjs, written by scripts/bundle.mjs) with V8's
// code cache: the functions a command compiled when the build ran it are read back from
// hal0.cjs.<key>.cache instead of being parsed and compiled again (~a quarter of a short
// command's CPU). Node 20 has no compile cache for modules (module.enableCompileCache is
// Node 22), so the bundle is one CommonJS script run through vm.Script, which takes one.
// V8 uses a cache only for the same source, V8 version and flags (otherwise it says so,
// and the script compiles as usual): the cache's name carries node's version and heap flags.
// CommonJS, as bin/hal0.cjs: an ES module entry would start node's ES module loader and
// read every export of each built-in it imports (fs's lazy streams among them) first.
"use strict";
const { createHash } = require("node:crypto");
const { readFileSync } = require("node:fs");
const { createRequire, Module } = require("node:module");
const { dirname } = require("node:path");
const vm = require("node:vm");

/** Whether this node can run the bundle: `import()` inside it needs the main context's loader (Node ≥ 20.12). */
const canLoadBundle = vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER !== undefined;

/**
 * The code cache file for `file` under this node's version and architecture,
 * and the young generation's size flag (the bin's shebang sets one; V8 refuses
 * a cache made under other heap flags). The build writes one cache without the
 * flag and one with the shebang's; under any other flags V8 may refuse the
 * cache, and the bundle compiles as it would without one.
 */
function cachePath(file) {
  const flags = process.execArgv.filter((a) => a.startsWith("--max-semi-space-size") || a.startsWith("--min-semi-space-size"));
  const key = createHash("sha256").update(JSON.stringify([process.version, process.arch, flags])).digest("hex").slice(0, 12);
  return `${file}.${key}.cache`;
}

/**
 * Runs the bundle's top level and returns its exports (`main`), the script (to
 * write its cache) and whether V8 refused the cache it was given (undefined: none).
 */
function loadBundle(file, { useCache = true } = {}) {
  // The bundle is ASCII (scripts/bundle.mjs sees to it): read as latin1, the same string without UTF-8 decoding.
  const source = readFileSync(file, "latin1");
  let cachedData;
  if (useCache) {
    try {
      cachedData = readFileSync(cachePath(file));
    } catch {
      // no cache for this node and these flags: compiled as usual
    }
  }
  const script = new vm.Script(Module.wrap(source), { filename: file, cachedData, importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER });
  const module = { exports: {} };
  script.runInThisContext().call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  return { exports: module.exports, script, rejected: cachedData === undefined ? undefined : script.cachedDataRejected };
}

exports.canLoadBundle = canLoadBundle;
exports.cachePath = cachePath;
exports.loadBundle = loadBundle;
