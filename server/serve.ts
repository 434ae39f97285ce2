import { join } from "node:path";
import { toNodeListener } from "h3";
import { listen, type Listener } from "listhen";
import { pino, type Logger } from "pino";
import { SweepLoop } from "../reconciler/loop.js";
import { StateStore } from "../reconciler/state.js";
import { Sweeper, type SweepReport } from "../reconciler/sweep.js";
import { isLoopbackHost } from "../schema/settings.js";
import { ApiError } from "./errors.js";
import { createHal0Server, type Hal0Server, type Hal0ServerOptions } from "./hal0-server.js";
import { redactText } from "./redact.js";

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

/**
 * The JSON-lines logger of `hal0 serve`: secrets redacted wherever they could
 * appear. Known places by path (headers, cookies, tokens, env values), and
 * then every line as written through server/redact.ts's `redactText`: bearer
 * and hal0 tokens, `"api_key": "…"` / `TOKEN=…` pairs, `--api-key …` flags,
 * URL passwords and `sk-…` style keys, wherever a message or an error's
 * stack quotes them.
 */
export function serveLogger(level = "info", destination?: NodeJS.WritableStream): Logger {
  const out = (destination ?? pino.destination({ dest: 1, sync: false })) as NodeJS.WritableStream & { flush?: (cb?: (err?: Error) => void) => void; flushSync?: () => void };
  const redacting = {
    write: (line: string) => out.write(redactText(line)),
    flush: (cb?: (err?: Error) => void) => (out.flush ? out.flush(cb) : cb?.()),
    flushSync: () => out.flushSync?.(),
  };
  return pino(
    {
      level,
      base: { svc: "hal0" },
      redact: {
        paths: [
          "headers.authorization", "headers.cookie", "*.headers.authorization", "*.headers.cookie", "req.headers.authorization", "req.headers.cookie",
          "token", "*.token", "args.*.token", "secret", "*.secret", "password", "*.password", "api_key", "*.api_key", "env.*", "*.env.*",
        ],
        censor: "[redacted]",
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    redacting as never,
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
  let last: SweepReport | undefined;
  let loop: SweepLoop | undefined;
  const server = createHal0Server({
    root: options.root, stateDir: options.stateDir, driverFor: options.driverFor, env: options.env, logger,
    nudge: () => loop?.request(), sweeps: () => ({ running: loop !== undefined, last }),
  });
  // The sweep hands each Hermes profile its agent token from the server's own token store.
  const sweeper = new Sweeper({ root: options.root, state, driverFor: options.driverFor, hermesCredentials: server.box.options.hermesCredentials });
  await server.box.watch();
  const snapshot = await server.box.snapshot();
  const settings = snapshot.model?.settings.server;
  const host = options.host ?? settings?.host ?? "127.0.0.1";
  const port = options.port ?? settings?.port ?? 8080;
  if ((settings?.auth ?? "token") === "off" && !isLoopbackHost(host)) {
    await server.box.close();
    await server.close();
    throw new ApiError("server.auth_off_exposed", `[server] auth = "off" cannot listen on ${host}: every caller would be an operator; listen on loopback or use auth = "token"`);
  }
  // listhen's port search would silently move a busy port elsewhere (isProd turns that off); 0 asks it for a random free one.
  const listener: Listener = await listen(toNodeListener(server.app), {
    hostname: host, port: port === 0 ? ({ random: true } as never) : port, autoClose: false, showURL: false, qr: false, public: false, isTest: true, isProd: true,
  });
  const bound = Number(new URL(listener.url).port);
  const auth = settings?.auth ?? "token";
  // Where the person's credential is (never the token itself): the CLI reads it from there, `hal0 web` turns it into a login link.
  logger.info({ url: listener.url, config: options.root, state: options.stateDir, revision: snapshot.revision, auth, operator_file: join(options.stateDir, "operator.token") }, "hal0 serve listening");
  if (auth === "off") logger.warn({ auth }, "[server] auth = \"off\": every loopback caller is trusted as an operator, and an agent is whoever its X-hal0-Agent header says; use auth = \"token\" unless this box has a single user");
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
