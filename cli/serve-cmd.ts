import { parseArgs } from "node:util";
import { ConfigNotFoundError } from "../compiler/index.js";
import { StateStore } from "../reconciler/state.js";
import { serve } from "../server/serve.js";
import { driverFor } from "./box.js";
import { CliError, EXIT_OK, UsageError, type CliIo } from "./io.js";
import { configDir, stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";

export const SERVE_HELP = `hal0 serve [--config DIR] [--state DIR] [--host H] [--port N] [--no-reconcile]

Serves the box: the REST API on [server] host:port (default 127.0.0.1:8080) and the
reconcile loop in the same process. Logs JSON lines on stdout. SIGTERM or SIGINT:
finishes the sweep and requests in flight, closes the database, exits 0.
  --host, --port    override [server] host / port (port 0 = any free port)
  --no-reconcile    serve the API only; leave converging to 'hal0 reconcile'`;

/** `hal0 serve`: runs until SIGTERM/SIGINT, then exits 0. */
export async function runServe(args: string[], io: CliIo): Promise<number> {
  const { values } = parseArgs({
    args, strict: true, allowPositionals: false,
    options: { ...BOX_OPTIONS, host: { type: "string" }, port: { type: "string" }, "no-reconcile": { type: "boolean" } },
  });
  const root = configDir(values.config, io.env, io.cwd);
  const state = stateDir(values.state, io.env, io.cwd);
  const port = values.port === undefined ? undefined : Number(values.port);
  if (port !== undefined && (!Number.isInteger(port) || port < 0 || port > 65535)) throw new UsageError(`--port must be 0..65535, not ${values.port}`);
  const serving = await serve({
    root, stateDir: state, env: io.env as NodeJS.ProcessEnv, host: values.host, port, reconcile: !values["no-reconcile"],
    driverFor: async (model) => driverFor(model, new StateStore(state).dir, io.env),
  }).catch((err: unknown) => {
    if (err instanceof ConfigNotFoundError) throw new UsageError(`config folder not found: ${root}`);
    if ((err as { code?: string }).code === "server.auth_off_exposed") throw new CliError("server.auth_off_exposed", (err as Error).message);
    if ((err as Error).name === "GetPortError" || (err as { code?: string }).code === "EADDRINUSE") {
      throw new CliError("server.port_in_use", `cannot listen on ${values.host ?? "[server] host"}:${port ?? "[server] port"}: ${(err as Error).message}`);
    }
    throw err;
  });
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await serving.close();
  return EXIT_OK;
}
