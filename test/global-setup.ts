import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

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
  return () => rmSync(dir, { recursive: true, force: true });
}
