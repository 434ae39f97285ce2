// Writes the V8 code cache of the bundled CLI (dist/cli-bundle/hal0.cjs) for this node and
// its flags (bin/load-bundle.cjs names it): runs `--help`, `validate` and `plan` of the example
// box (process runtime, a fresh state folder, nothing started) in this process, quietly, then
// saves what V8 compiled for them, behind the sha256 that bin/load-bundle.cjs checks (written
// atomically, by tsc's writeFileAtomic, so no reader meets half a file). Run by
// scripts/bundle.mjs once per set of flags, after tsc.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { cacheFile, canLoadBundle, loadBundle } from "../bin/load-bundle.cjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { writeFileAtomic } = await import(pathToFileURL(join(root, "dist/reconciler/atomic.js")).href);
const file = join(root, "dist/cli-bundle/hal0.cjs");
if (!canLoadBundle) process.exit(0);
const { exports, script, cachePath } = loadBundle(file, { useCache: false });
if (cachePath === undefined) throw new Error(`${file} has no id line (scripts/bundle.mjs writes it): no code cache written`);
const state = mkdtempSync(join(tmpdir(), "hal0-code-cache-"));
const quiet = { write: () => true, isTTY: false };
const io = { stdout: quiet, stderr: quiet, env: { ...process.env, NO_COLOR: "1" }, cwd: root };
const box = join(root, "fixtures/box");
try {
  for (const args of [["--help"], ["plan", "--help"], ["validate", "--config", box], ["plan", "--config", box, "--state", state], ["status", "--config", box, "--state", state]]) {
    // A command that fails here (a host without what it needs) still leaves what it compiled.
    await exports.main(args, io).catch(() => undefined);
  }
  await writeFileAtomic(cachePath, cacheFile(script.createCachedData()));
} finally {
  rmSync(state, { recursive: true, force: true });
}
