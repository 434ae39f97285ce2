// `prepare`: npm runs it after `npm ci` / `npm install`, and npx runs it again the first
// time `npx hal0` is run in this folder (npm links the folder into its npx cache to run
// its own bin, and runs the package's `prepare` as it does): a second build, ~20 s, of
// what `npm ci` built a moment before. So this builds only when what the build reads
// changed since the last build it made: the sha256 of those files and of node's version,
// kept in dist/.build-inputs. `npm run build` (and `npm test`) always build.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** What the build reads: tsconfig.build.json's folders, the bundler and its loader, the configs and the locked packages. */
const FOLDERS = ["schema", "compiler", "reconciler", "memory", "server", "cli", "bench", "bin", "scripts"];
const FILES = ["package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json"];
const STAMP = join(root, "dist/.build-inputs");
const BUNDLE = join(root, "dist/cli-bundle/hal0.cjs");

function* filesUnder(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* filesUnder(path);
    else if (entry.isFile()) yield path;
  }
}

function inputsHash() {
  const hash = createHash("sha256").update(`${process.version}\0`);
  const paths = [...FOLDERS.flatMap((f) => (existsSync(join(root, f)) ? [...filesUnder(join(root, f))] : [])), ...FILES.map((f) => join(root, f)).filter(existsSync)];
  for (const path of paths) hash.update(`${path.slice(root.length)}\0`).update(readFileSync(path)).update("\0");
  return hash.digest("hex");
}

const wanted = inputsHash();
const built = existsSync(STAMP) ? readFileSync(STAMP, "utf8").trim() : undefined;
if (built === wanted && existsSync(BUNDLE)) {
  console.log("hal0: dist/ is built from these sources already (npm run build builds it again)");
} else {
  execFileSync(process.platform === "win32" ? "npm.cmd" : "npm", ["run", "build"], { cwd: root, stdio: "inherit" });
  writeFileSync(STAMP, `${wanted}\n`);
}
