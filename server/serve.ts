import { toNodeListener } from "h3";
import { listen, type Listener } from "listhen";
import { pino, type Logger } from "pino";
import { SweepLoop } from "../reconciler/loop.js";
import { StateStore } from "../reconciler/state.js";
import { Sweeper, type SweepReport } from "../reconciler/sweep.js";
import { createHal0Server, type Hal0Server, type Hal0ServerOptions } from "./hal0-server.js";

export interface ServeOptions extends Pick<Hal0ServerOptions, "root" | "stateDir" | "driverFor" | "env"> {
  /** Overrides `[server] host` / `port` (tests pass port 0). */
  readonly host?: string;
  readonly port?: number;
  readonly logger?: Logger;
  /** Runs the reconcile loop in this process (default true). */
  readonly reconcile?: boolean;
}

export interface Serving {
  readonly server: Hal0Server;
  readonly url: string;
  readonly port: number;
  /** Stops taking requests, lets the sweep and requests in flight finish, closes the database. */
  close(): Promise<void>;
}

/** The JSON-lines logger of `hal0 serve`: secrets redacted wherever they could appear. */
export function serveLogger(level = "info", destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { svc: "hal0" },
      redact: { paths: ["headers.authorization", "*.headers.authorization", "args.*.token", "*.secret", "*.password", "*.api_key"], censor: "[redacted]" },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    (destination ?? pino.destination({ dest: 1, sync: false })) as never,
  );
}

/**
 * `hal0 serve`: the h3 app on `[server] host:port` (listhen, autoClose off:
 * the process owns its signals), with the reconcile loop in the same process.
 * A commit through the API nudges the loop; so does any `.toml` change.
 */
export async function serve(options: ServeOptions): Promise<Serving> {
  const logger = options.logger ?? serveLogger();
  const state = new StateStore(options.stateDir);
  const sweeper = new Sweeper({ root: options.root, state, driverFor: options.driverFor });
  let last: SweepReport | undefined;
  let loop: SweepLoop | undefined;
  const server = createHal0Server({
    root: options.root, stateDir: options.stateDir, driverFor: options.driverFor, env: options.env, logger,
    nudge: () => loop?.request(), sweeps: () => ({ running: loop !== undefined, last }),
  });
  await server.box.watch();
  const snapshot = await server.box.snapshot();
  const settings = snapshot.model?.settings.server;
  const host = options.host ?? settings?.host ?? "127.0.0.1";
  const port = options.port ?? settings?.port ?? 8080;
  // listhen's port search would silently move a busy port elsewhere (isProd turns that off); 0 asks it for a random free one.
  const listener: Listener = await listen(toNodeListener(server.app), {
    hostname: host, port: port === 0 ? ({ random: true } as never) : port, autoClose: false, showURL: false, qr: false, public: false, isTest: true, isProd: true,
  });
  const bound = Number(new URL(listener.url).port);
  logger.info({ url: listener.url, config: options.root, state: options.stateDir, revision: snapshot.revision }, "hal0 serve listening");
  if (options.reconcile !== false) {
    loop = new SweepLoop(sweeper, {
      root: options.root,
      intervalS: () => sweeper.lastGoodModel?.settings.reconcile.interval_s ?? 120,
      onReport: (report) => {
        last = report;
        if (report.outcome !== "nothing_to_do") logger.info({ sweep: report.outcome, results: report.results.length, diagnostics: report.diagnostics.length }, "sweep");
      },
      onError: (err) => logger.error({ err }, "sweep failed"),
    });
    loop.start();
  }
  const expiry = setInterval(() => server.approvals.expireDue(), 30_000);
  expiry.unref();
  return {
    server, url: listener.url.replace(/\/$/, ""), port: bound,
    async close() {
      clearInterval(expiry);
      await listener.close();
      await loop?.stop();
      await server.box.close();
      await server.close();
      logger.info("hal0 serve stopped");
      logger.flush();
    },
  };
}
