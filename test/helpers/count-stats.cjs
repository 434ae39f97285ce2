// Preloaded into a child `hal0 serve` (node -r): counts every lstat and stat made through node's fs/promises
// (its named ES exports too, which the file watcher's folder reads used), and on SIGUSR2 appends the count so far
// to $HAL0_TEST_STATS_FILE, one line each.
const fsp = require("node:fs/promises");
const { appendFileSync } = require("node:fs");
const { syncBuiltinESMExports } = require("node:module");
let count = 0;
for (const name of ["lstat", "stat"]) {
  const real = fsp[name];
  fsp[name] = function (...args) {
    count++;
    return real.apply(this, args);
  };
}
syncBuiltinESMExports();
process.on("SIGUSR2", () => appendFileSync(process.env.HAL0_TEST_STATS_FILE, `${count}\n`));
