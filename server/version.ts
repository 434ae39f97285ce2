import { readFileSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "../reconciler/package-root.js";

let version: string | undefined;

/** hal0's version, from its package.json (read once). */
export function packageVersion(): string {
  return (version ??= (JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version: string }).version);
}
