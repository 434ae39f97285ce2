#!/usr/bin/env node
// Entry point of the `hal0` command: runs the compiled CLI from dist/.
import { main } from "../dist/cli/main.js";

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`hal0: internal error: ${err?.stack ?? err}\n`);
    process.exitCode = 70;
  },
);
