// Run by test/server/bridge-runs.test.ts with vite-node: a hal0 server on the
// given folders starts a bridge run whose stand-in Hermes starts a child,
// prints `ready <run id> <leader pid> <child pid>` and waits to be SIGKILLed
// (a crash: nothing of hal0 gets to stop the run).
import { ProcessDriver } from "../../reconciler/index.js";
import { createHal0Server } from "../../server/hal0-server.js";

const [root, stateDir] = process.argv.slice(2) as [string, string];
const hal0 = createHal0Server({ root, stateDir, driverFor: async () => new ProcessDriver({ stateDir }), env: { HERMES_FAKE_DELAY_MS: "10" } });
await hal0.box.snapshot();
const run = await hal0.runs!.start({ profile: "alpha", prompt: "work [skill=learnt-before-crash] [child]", caller: "operator:crash" });
for (;;) {
  const ev = hal0.runs!.events(run.id, 0);
  const child = ev.lines.map((l) => /^child pid: (\d+)$/.exec(l)?.[1]).find((x) => x !== undefined);
  const row = hal0.runs!.get(run.id)!;
  if (child && row.pid_start !== null) {
    process.stdout.write(`ready ${run.id} ${row.pid} ${child}\n`);
    break;
  }
  await new Promise((r) => setTimeout(r, 20));
}
setInterval(() => {}, 1000);
