import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll } from "vitest";

/**
 * Written /proc and /sys trees for the host probes and figures (they read the
 * host through one root path): `tree(files, links)` makes a temp root holding
 * each file and symlink; every root is removed after the file's tests.
 */
export function sysroots(prefix = "hal0-sysroot-"): (files: Record<string, string>, links?: Record<string, string>) => string {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  return (files, links = {}) => {
    const root = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(root);
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, rel)), { recursive: true });
      writeFileSync(join(root, rel), text);
    }
    for (const [rel, target] of Object.entries(links)) {
      mkdirSync(dirname(join(root, rel)), { recursive: true });
      symlinkSync(target, join(root, rel));
    }
    return root;
  };
}
