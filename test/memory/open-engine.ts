// Run by test/memory/embedded.test.ts with vite-node: prints `ready`, waits
// for a line on stdin, then opens (and closes) the embedded engine on the
// given state folder and prints `opened`, or `failed <code> <message>`.
import { EmbeddedEngine } from "../../memory/embedded.js";

const stateDir = process.argv[2]!;
process.stdout.write("ready\n");
process.stdin.once("data", () => {
  process.stdin.pause();
  try {
    const e = new EmbeddedEngine({ stateDir });
    process.stdout.write("opened\n");
    void e.close();
  } catch (err) {
    process.stdout.write(`failed ${(err as { code?: string }).code} ${(err as Error).message}\n`);
  }
});
