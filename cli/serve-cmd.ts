import { ConfigNotFoundError, configNotFoundMessage } from "../compiler/index.js";
import { StateStore } from "../reconciler/state.js";
import { missingFolder } from "../reconciler/state-folder.js";
import { ApiError, storageFull } from "../server/errors.js";
import { serve } from "../server/serve.js";
import { driverFor, runnerProbeFor } from "./box.js";
import { CliError, EXIT_OK, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { compileTree, configDir, requireConfigFolder, stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";

export const SERVE_HELP = `hal0 serve [--config DIR] [--state DIR] [--host H] [--port N] [--no-reconcile]

Serves the box: the REST API on [server] host:port (default 127.0.0.1:8080) and the
reconcile loop in the same process. Logs JSON lines on stdout. SIGTERM or SIGINT:
refuses new requests (503), interrupts the sweep and any slot restart (no further step
starts; a runner still loading is left running for the next sweep; the restart answers
409 apply.interrupted), finishes the requests in flight (an agent_run_wait answers
at once), ends open
event streams (at once when nothing else is in flight, else after 3 s), closes the
database, exits 0; a second signal exits at once. SIGHUP (systemctl reload hal0) reads the
config tree again and asks for a sweep, as POST /api/settings/reload does. A busy port exits 1 with
server.port_in_use, naming the address and the pid holding it; a state folder
another hal0 serve runs on exits 1 with server.already_running, naming it. A start
that fails leaves no state folder it made (no database, no operator token).
A state folder removed while it runs: state.folder_gone is logged once, the records
of the runners it started are put back (hal0 status and hal0 down find them), exit 1.
hal0.db removed or replaced while it runs: state.database_gone is logged once, exit 1.
  --host, --port    override [server] host / port (port 0 = any free port)
  --no-reconcile    serve the API only; leave converging to 'hal0 reconcile'`;

/** `hal0 serve`: runs until SIGTERM/SIGINT, then exits 0. */
export async function runServe(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({
    args, strict: true, allowPositionals: false,
    options: { ...BOX_OPTIONS, host: { type: "string" }, port: { type: "string" }, "no-reconcile": { type: "boolean" } },
  });
  const root = configDir(values.config, io.env, io.cwd);
  const state = stateDir(values.state, io.env, io.cwd);
  const port = values.port === undefined ? undefined : /^\d{1,5}$/.test(values.port) ? Number(values.port) : Number.NaN;
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) throw new UsageError(`--port must be 0..65535, not ${values.port}`);
  // A missing config folder is said before the state folder is touched: no database or token is left behind by a serve that never ran.
  requireConfigFolder(root);
  // A state folder this start makes is removed again if the start fails: no database or new operator token is left behind.
  const madeState = missingFolder(state);
  // The first SIGTERM or SIGINT drains and exits 0, even one that comes while the server is still starting
  // (it is caught from here on, so node's default never kills a half-started server); a second one ends the process at once.
  let stopRequested!: () => void;
  const stopped = new Promise<void>((resolve) => (stopRequested = resolve));
  const stop = () => {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    stopRequested();
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  // SIGHUP (systemctl reload hal0) reads the tree again and asks for a sweep: a daemon's reload, never node's default exit.
  let serving: Awaited<ReturnType<typeof serve>> | undefined;
  const reload = () => void serving?.reload();
  process.on("SIGHUP", reload);
  // One runner probe for the API's writes and the sweep (its cache in the state folder). On the docker and swarm
  // runtime the engine is reached first, so images are asked through it from the first sweep on.
  const runners = runnerProbeFor(root, state).probe;
  const first = await compileTree({ config: root }, io).catch(() => undefined);
  if (first?.model !== undefined && first.model.settings.slots.runtime !== "process") await driverFor(first.model, new StateStore(state).dir, io.env).catch(() => undefined);
  serving = await serve({
    root, stateDir: state, env: io.env as NodeJS.ProcessEnv, host: values.host, port, reconcile: !values["no-reconcile"], runners, madeState,
    driverFor: async (model) => driverFor(model, new StateStore(state).dir, io.env, { reuseInspects: true }),
  }).catch((err: unknown) => {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    process.off("SIGHUP", reload);
    if (err instanceof ConfigNotFoundError) throw new CliError("config.not_found", configNotFoundMessage(root));
    // serve() closed what it opened (the database, the watcher): the process ends as soon as this is printed.
    if (err instanceof ApiError && STARTUP_CODES.has(err.code)) throw new CliError(err.code, err.message);
    throw err;
  });
  // The last net under the server: a write a full disk refused, thrown where no caller catches it (a timer, a child's
  // output), is logged and the server goes on: what it could not write is lost, the rest keeps working (SQLite rolled the
  // write back). Anything else ends the process as node would, with the error on stderr.
  const uncaught = (err: unknown) => {
    if (storageFull(err)) return void serving.logger.error({ err }, "a write failed: the disk is full; hal0 serve goes on without it");
    serving.logger.fatal({ err }, "uncaught error");
    serving.logger.flush();
    io.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  };
  process.on("uncaughtException", uncaught);
  // The state folder removed under the server (state.folder_gone, logged by serve): it stops as on SIGTERM, and exits 1.
  const lost = await Promise.race([stopped.then(() => undefined), serving.lost]);
  await serving.close();
  process.off("SIGHUP", reload);
  process.off("uncaughtException", uncaught);
  if (lost !== undefined) {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    throw new CliError(lost.code, lost.message);
  }
  return EXIT_OK;
}

/** What keeps `hal0 serve` from starting, printed as `code: message` (exit 1). */
const STARTUP_CODES = new Set(["server.auth_off_exposed", "server.already_running", "server.port_in_use", "server.listen_failed"]);
