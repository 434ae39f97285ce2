// Loads the bundled CLI (dist/cli-bundle/hal0.cjs, written by scripts/bundle.mjs) with V8's
// code cache: the functions a command compiled when the build ran it are read back from
// hal0.cjs.<key>.cache instead of being parsed and compiled again (~a quarter of a short
// command's CPU). Node 20 has no compile cache for modules (module.enableCompileCache is
// Node 22), so the bundle is one CommonJS script run through vm.Script, which takes one.
// V8 uses a cache only for the same V8 version and flags (otherwise it says so, and the
// script compiles as usual): the cache's name carries node's version and heap flags.
//
// V8 trusts the rest of a cache's bytes. It checks a cache against its script by the
// script's length alone, and it does not check the bytes it deserializes: a cache with a
// flipped byte ends the process in a V8 fatal error, and a cache left from another build of
// the same length (an edited constant, a build stopped before it wrote the caches) would
// run that build's code. So the build writes the bundle's sha256 on its last line and puts
// it in the cache's name, and each cache starts with the sha256 of its own bytes, checked
// here before V8 sees them (~0.9 ms a command, as Node 22's own compile cache checks a CRC
// of its caches): a cache of another bundle is never found, and a damaged one is set aside.
// CommonJS, as bin/hal0.cjs: an ES module entry would start node's ES module loader and
// read every export of each built-in it imports (fs's lazy streams among them) first.
"use strict";
const { createHash, hash } = require("node:crypto");
const { readFileSync } = require("node:fs");
const { createRequire, Module } = require("node:module");
const { dirname } = require("node:path");
const vm = require("node:vm");

/** Whether this node can run the bundle: `import()` inside it needs the main context's loader (Node ≥ 20.12). */
const canLoadBundle = vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER !== undefined;

/** The last line of a bundle the build finished: the sha256 of everything before it. */
const ID_LINE = /\/\/# hal0-bundle-sha256=([0-9a-f]{64})\n$/;

/** A cache file: this magic, the sha256 of V8's bytes, then V8's bytes (at offset 40, aligned as V8 wants them). */
const MAGIC = Buffer.from("hal0cc1\n", "latin1");
const HEADER = MAGIC.length + 32;

/** The bundle's text `text` with its id line after it (the build's last step): the sha256 of what comes before. */
function withBundleId(text) {
  const body = text.endsWith("\n") ? text : `${text}\n`;
  return `${body}//# hal0-bundle-sha256=${hash("sha256", body, "hex")}\n`;
}

/** The bundle's sha256 as its last line gives it; undefined for a text without the line (not a finished build). */
function bundleId(source) {
  return ID_LINE.exec(source.slice(-128))?.[1];
}

/**
 * The code cache file for the bundle `file` whose text is `source`, under this
 * node's version and architecture and the young generation's size flag (the
 * bin's shebang sets one; V8 refuses a cache made under other heap flags);
 * undefined when the text carries no id. The build writes one cache without
 * the flag and one with the shebang's; under any other flags V8 may refuse
 * the cache, and the bundle compiles as it would without one.
 */
function cachePath(file, source) {
  const id = bundleId(source);
  if (id === undefined) return undefined;
  const flags = process.execArgv.filter((a) => a.startsWith("--max-semi-space-size") || a.startsWith("--min-semi-space-size"));
  const key = createHash("sha256").update(JSON.stringify([process.version, process.arch, flags, id])).digest("hex").slice(0, 12);
  return `${file}.${key}.cache`;
}

/** What a cache file holds for V8: its bytes when their sha256 is the one written before them, else "damaged". */
function cacheBytes(file) {
  const data = readFileSync(file);
  if (data.length <= HEADER || !data.subarray(0, MAGIC.length).equals(MAGIC)) return "damaged";
  const bytes = data.subarray(HEADER);
  return hash("sha256", bytes, "buffer").equals(data.subarray(MAGIC.length, HEADER)) ? bytes : "damaged";
}

/** A cache file's contents for V8's bytes `bytes`: what `cacheBytes` reads back. */
function cacheFile(bytes) {
  return Buffer.concat([MAGIC, hash("sha256", bytes, "buffer"), bytes]);
}

/**
 * Runs the bundle's top level and returns its exports (`main`), the script (to
 * write its cache), the cache file it looked for, and what became of it:
 * "taken", "rejected" (by V8: other flags or another V8), "damaged" (its bytes
 * are not the ones written: not given to V8), or "none" (no file, or not asked).
 */
function loadBundle(file, { useCache = true } = {}) {
  // The bundle is ASCII (scripts/bundle.mjs sees to it): read as latin1, the same string without UTF-8 decoding.
  const source = readFileSync(file, "latin1");
  const path = cachePath(file, source);
  let cachedData;
  let cache = "none";
  if (useCache && path !== undefined) {
    try {
      const bytes = cacheBytes(path);
      if (bytes === "damaged") cache = "damaged";
      else cachedData = bytes;
    } catch {
      // no cache for this node, these flags and this bundle: compiled as usual
    }
  }
  const script = new vm.Script(Module.wrap(source), { filename: file, cachedData, importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER });
  if (cachedData !== undefined) cache = script.cachedDataRejected ? "rejected" : "taken";
  const module = { exports: {} };
  script.runInThisContext().call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  return { exports: module.exports, script, cachePath: path, cache };
}

exports.canLoadBundle = canLoadBundle;
exports.cacheFile = cacheFile;
exports.loadBundle = loadBundle;
exports.withBundleId = withBundleId;
