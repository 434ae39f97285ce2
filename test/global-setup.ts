import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * One temporary folder for the whole run: every test's `mkdtemp(tmpdir())` lands in it (the
 * workers and the processes they spawn inherit TMPDIR), and it is removed when the run ends, so
 * runs leave no folders behind. HAL0_TEST_HOST_TMP keeps the host's own temporary folder for the
 * locks that runs on one engine share (test/reconciler/docker-helpers.ts).
 */
export default function setup(): () => void {
  const host = process.env.HAL0_TEST_HOST_TMP ?? tmpdir();
  const dir = mkdtempSync(join(host, "hal0-tests-"));
  // As the host's own folder is (sticky, everyone's): tests that run something as another user (nobody) reach their folders.
  chmodSync(dir, 0o1777);
  process.env.HAL0_TEST_HOST_TMP = host;
  process.env.TMPDIR = dir;
  process.env.HAL0_TEST_NOBODY_PROJECT = projectForNobody(dir);
  return () => rmSync(dir, { recursive: true, force: true });
}

/**
 * Where a test that runs hal0 as another user (nobody, as root drops to it) finds hal0: this
 * checkout when that user may read it, else a copy of what runs (bin, dist, fixtures, node_modules,
 * package.json) in `dir`, hard-linked where it can be. A checkout in a private folder (a
 * `mktemp -d`, /root) is one nobody cannot reach, though hal0 there works as any user's would.
 */
function projectForNobody(dir: string): string {
  const project = join(dirname(fileURLToPath(import.meta.url)), "..");
  if (process.getuid?.() !== 0) return project;
  const reach = spawnSync("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "test", "-r", join(project, "bin/hal0.js")]);
  if (reach.status === 0) return project;
  const copy = join(dir, "hal0-for-nobody");
  mkdirSync(copy, { mode: 0o755 });
  const parts = ["bin", "dist", "fixtures", "node_modules", "package.json"].map((p) => join(project, p));
  if (spawnSync("cp", ["-al", ...parts, copy]).status !== 0 && spawnSync("cp", ["-a", ...parts, copy]).status !== 0) {
    throw new Error(`cannot copy hal0 to ${copy} for the tests that run it as nobody (${project} is out of that user's reach)`);
  }
  return copy;
}
