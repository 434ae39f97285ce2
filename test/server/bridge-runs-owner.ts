// Run by test/server/bridge-runs.test.ts with vite-node: a run queue that owns
// the runs of a state folder (not a guest), as a hal0 serve's is, over its own
// connection to <state>/hal0.db. Prints `ready` once it has recovered, then
// starts whatever it finds queued, until SIGTERM closes it.
import { RunService } from "../../server/bridge/runs/service.js";
import { openDb } from "../../server/db.js";
import { Settings } from "../../schema/index.js";

const [stateDir, home, command] = process.argv.slice(2) as [string, string, string];
const db = openDb(stateDir);
const runs = new RunService({ db, stateDir, env: {}, settings: () => Settings.parse({ hermes: { home, command }, bridge: { max_runs: 4 } }) });
await runs.ready;
process.stdout.write("ready\n");
process.once("SIGTERM", () => {
  void runs.close().then(() => {
    db.close();
    process.exit(0);
  });
});
setInterval(() => {}, 1000);
