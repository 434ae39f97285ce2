import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The folder of hal0's own package.json, from wherever this module runs
 * (source or dist/): the first folder above it that holds a package.json.
 * Undefined when there is none (a bundled copy without its package).
 */
export function findPackageRoot(): string | undefined {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const up = dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
  return dir;
}

/** The folder of hal0's own package.json (source or dist/); throws when there is none. */
export function packageRoot(): string {
  const root = findPackageRoot();
  if (root === undefined) throw new Error("hal0's package.json not found");
  return root;
}
