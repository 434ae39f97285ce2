import { createServer, maxHeaderSize, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { toNodeListener, type App } from "h3";
import { pino, type Logger } from "pino";
import { removeStaleTemps } from "../reconciler/atomic.js";
import { INTERRUPTED } from "../reconciler/drivers/driver.js";
import { commandOf, listeningInodes, portInUseMessage, socketOwner } from "../reconciler/drivers/proc.js";
import { acquireLoopLock, acquireServeLock, LoopLockedError, pullHolder, ServeLockedError } from "../reconciler/lock.js";
import { LoopControl, SweepLoop } from "../reconciler/loop.js";
import { StateStore } from "../reconciler/state.js";
import { removeMadeFolder } from "../reconciler/state-folder.js";
import { Sweeper, type SweepReport } from "../reconciler/sweep.js";
import { TREE_FOLDERS } from "../reconciler/tree-cache.js";
import { isLoopbackHost } from "../schema/settings.js";
import { cutBody } from "./body.js";
import { StateGuard } from "./state-guard.js";
import { ApiError, envelope, storageFull } from "./errors.js";
import { createHal0Server, type Hal0Server, type Hal0ServerOptions } from "./hal0-server.js";
import { logFilePath, RotatingLog } from "./log-file.js";
import { redactLogFields, redactText } from "./redact.js";
import { endEventStreams, isEventStream } from "./sse.js";

export interface ServeOptions extends Pick<Hal0ServerOptions, "root" | "stateDir" | "driverFor" | "env" | "runners" | "scrapeIntervalS"> {
  /** Overrides `[server] host` / `port` (tests pass port 0). */
  readonly host?: string;
  readonly port?: number;
  readonly logger?: Logger;
  /** Runs the reconcile loop in this process (default true). */
  readonly reconcile?: boolean;
  /** How long `close()` lets open event streams run while requests are in flight (default SHUTDOWN_GRACE_MS). */
  readonly shutdownGraceMs?: number;
  /**
   * The outermost folder this start makes for the state folder (missingFolder, taken before anything touched it):
   * when the start fails (a busy port…), the state folder goes, and each parent up to it while empty (removeMadeFolder).
   */
  readonly madeState?: string;
  /** How often the state folder is looked at (default STATE_CHECK_MS). */
  readonly stateCheckMs?: number;
}

/** How often `hal0 serve` scrapes each running slot's /metrics into the stats ring (its own timer, not the sweep's). */
export const SCRAPE_INTERVAL_S = 60;

/** At most this long after SIGTERM/SIGINT, open event streams are ended (sooner when no other request is in flight). */
export const SHUTDOWN_GRACE_MS = 3000;

export interface Serving {
  readonly server: Hal0Server;
  /** The JSON-lines logger the server writes to (its file in the state folder too). */
  readonly logger: Logger;
  readonly url: string;
  readonly port: number;
  /** Reads the config tree again and asks for a sweep (SIGHUP), as `POST /api/settings/reload` does; logs the revision. */
  reload(): Promise<void>;
  /**
   * Stops taking requests (a request that still arrives is refused with 503
   * `server.shutting_down`), lets the requests in flight finish, ends the
   * open event streams (once nothing else is in flight, or after the grace),
   * lets the sweep finish, closes the database.
   */
  close(): Promise<void>;
  /** Resolves when the server cannot go on (its state folder removed: `state.folder_gone`; its serve.lock taken by another server: `server.lock_lost`; hal0.db removed or replaced: `state.database_gone`; logged); the caller then closes it. */
  readonly lost: Promise<ApiError>;
}

/**
 * The JSON-lines logger of `hal0 serve`: secrets redacted wherever they could
 * appear. Known fields (headers, cookies, tokens, env values: `redactLogFields`), and
 * then every line as written through server/redact.ts's `redactText`: bearer
 * and hal0 tokens, `"api_key": "…"` / `TOKEN=…` pairs, `--api-key …` flags,
 * URL passwords and `sk-…` style keys, wherever a message or an error's
 * stack quotes them. With `file` (hal0 serve: `<state>/logs/hal0.log`, see
 * server/log-file.ts), every redacted line also goes to that bounded file.
 */
export function serveLogger(level = "info", destination?: NodeJS.WritableStream, file?: RotatingLog): Logger {
  let logger: Logger | undefined;
  const out = (destination ?? new StdoutLines((state, code) => logger?.[state === "down" ? "warn" : "info"]({ code }, state === "down"
    ? `hal0 serve's standard output refused a line (${code}): its lines go to the log file only, and it is tried again every ${STDOUT_RETRY_MS / 1000} s`
    : "hal0 serve's standard output takes its lines again"))) as NodeJS.WritableStream & { flush?: (cb?: (err?: Error) => void) => void; flushSync?: () => void };
  const redacting = {
    write: (line: string) => {
      const clean = redactText(line);
      file?.write(clean);
      return out.write(clean);
    },
    flush: (cb?: (err?: Error) => void) => (out.flush ? out.flush(cb) : cb?.()),
    flushSync: () => out.flushSync?.(),
  };
  logger = pino(
    {
      level,
      base: { svc: "hal0" },
      // The fields hal0 puts secrets in, masked before the line is written (server/redact.ts: pino's `redact` paths cost several µs on every line).
      formatters: { log: redactLogFields },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    redacting as never,
  );
  return logger;
}

/** While standard output refuses lines, it is tried again at most this often. */
export const STDOUT_RETRY_MS = 5000;

/**
 * `hal0 serve`'s standard output: pino's buffered writer on fd 1, given up
 * while fd 1 refuses lines. A stdout that is a file on a disk that filled up
 * (`hal0 serve > hal0.out`) refuses every write with ENOSPC; left to itself
 * the writer keeps every unwritten line in memory, its error reaches the
 * process's last net, which logs it, which is one more line refused — the
 * server spun on it and grew without end, and at SIGTERM its final flush
 * retried forever. Here the first refusal drops what was waiting (the log
 * file has those lines), says so once (`onChange`, logged while stdout is
 * down, so it goes to the file), and lines go to the file alone until a
 * later line, at least STDOUT_RETRY_MS on, is taken by a new writer.
 * A closed pipe (EPIPE) is pino's to end quietly, as before.
 */
class StdoutLines {
  private boom: ReturnType<typeof pino.destination> | undefined = this.open();
  /** When stdout refused a line, on the monotonic clock: a wall clock set back would keep it given up for as long as its step. */
  private downSince = 0;
  /** Said down and not up since: a retry that fails again says nothing. */
  private down = false;

  constructor(private readonly onChange: (state: "down" | "up", code: string) => void) {}

  write(line: string): boolean {
    if (this.boom === undefined) {
      if (performance.now() - this.downSince < STDOUT_RETRY_MS) return true;
      this.boom = this.open();
      this.boom.once("write", () => {
        this.down = false;
        this.onChange("up", "");
      });
    }
    return this.boom.write(line);
  }

  flush(cb?: (err?: Error) => void): void {
    if (this.boom === undefined) return void cb?.();
    this.boom.flush(cb);
  }

  flushSync(): void {
    this.boom?.flushSync();
  }

  private open(): ReturnType<typeof pino.destination> {
    const boom = pino.destination({ dest: 1, sync: false });
    boom.on("error", (err: NodeJS.ErrnoException) => {
      // EPIPE: the reader is gone for good; pino's own handler has already made this writer a no-op.
      if (this.boom !== boom || err.code === "EPIPE") return;
      // destroy() drops the waiting lines (fd 1 stays open), and pino's exit flush skips a destroyed writer.
      this.boom = undefined;
      this.downSince = performance.now();
      boom.removeAllListeners("write");
      boom.destroy();
      if (this.down) return;
      this.down = true;
      this.onChange("down", err.code ?? "EIO");
    });
    return boom;
  }
}

/**
 * `hal0 serve`: the h3 app on `[server] host:port` (node's http server; the
 * process owns its signals), with the reconcile loop in the same process.
 * A commit through the API nudges the loop; so does any `.toml` change.
 * Before anything reads the tree, the temp files of writers that died
 * mid-write are removed (reconciler/atomic.ts). When the address cannot be
 * bound, everything opened is closed again and the error names the address
 * (and who holds the port), so the process exits at once.
 */
export async function serve(options: ServeOptions): Promise<Serving> {
  // One server per state folder, decided before anything in it is touched (a second one's stale-temp sweep would remove the first's writes in flight).
  const serveLock = await acquireServeLock(options.stateDir).catch((err: unknown) => {
    if (err instanceof ServeLockedError) throw new ApiError(err.code, err.message, { ...err.holder });
    throw err;
  });
  // And one sweep loop: a `hal0 reconcile` loop already on the folder keeps this server's out (the two would undo each other's sweeps).
  const releaseLoop = options.reconcile === false ? async () => {} : await acquireLoopLock(options.stateDir, "hal0 serve").catch(async (err: unknown) => {
    await serveLock.release();
    if (err instanceof LoopLockedError) throw new ApiError(err.code, `${err.message}: stop it first, or start hal0 serve with --no-reconcile`, { ...err.holder });
    throw err;
  });
  // A serve.lock another server holds now (server.lock_lost) is its own: this one's stop leaves it.
  let lockTaken = false;
  const lock = { describe: serveLock.describe, release: async () => {
    await releaseLoop();
    if (!lockTaken) await serveLock.release();
  } };
  // hal0's own bounded log file in the state folder (logs_tail reads it), unless the caller brings its logger.
  const logFile = options.logger ? undefined : new RotatingLog(logFilePath(options.stateDir));
  const logger = options.logger ?? serveLogger("info", undefined, logFile);
  const removed = await removeStaleTemps(await hal0Folders(options.root, options.stateDir));
  if (removed.length > 0) logger.info({ files: removed }, "removed stale temp files");
  const state = new StateStore(options.stateDir);
  let last: SweepReport | undefined;
  // The sweep loop's handle: the server's services (service_list, service_action restart) hold it; the loop is attached below.
  const loop = new LoopControl();
  const server = createHal0Server({
    root: options.root, stateDir: options.stateDir, driverFor: options.driverFor, env: options.env, logger, runners: options.runners,
    nudge: () => loop.request(), sweeps: () => ({ running: loop.attached, last }), loop,
    scrapeIntervalS: options.scrapeIntervalS ?? SCRAPE_INTERVAL_S,
  });
  // Pulls a stopped hal0 serve left under way go on, from the bytes on disk. Only the long-running server resumes them:
  // a CLI command that opens the same stores (hal0 model pull, hal0 agent approvals) must not start other pulls.
  server.pulls?.worker.resume();
  // And later: a `hal0 model pull` stopped while this serve runs leaves its pull downloading; once no pull command holds the folder, the serve goes on with it.
  server.pulls?.worker.adoptOrphans(async () => (await pullHolder(options.stateDir)) === undefined);
  const front = new Front(server.app, logger);
  let started: { snapshot: Awaited<ReturnType<typeof server.box.snapshot>>; host: string; bound: number };
  try {
    const snapshot = await server.box.snapshot();
    // A tree with errors (and none compiled before): its hal0.toml's own [server] when that file validated.
    const settings = server.box.lastSettings()?.server;
    const host = options.host ?? settings?.host ?? "127.0.0.1";
    const port = options.port ?? settings?.port ?? 8080;
    if ((settings?.auth ?? "token") === "off" && !isLoopbackHost(host)) {
      throw new ApiError("server.auth_off_exposed", `[server] auth = "off" cannot listen on ${host}: every caller would be an operator; listen on loopback or use auth = "token"`);
    }
    const bound = await front.listen(host, port);
    await server.box.watch();
    started = { snapshot, host, bound };
  } catch (err) {
    // Nothing may keep the process alive: not the socket, the watcher, nor the database.
    front.abort();
    await server.box.close();
    await server.close();
    logger.flush();
    logFile?.close();
    // A state folder this start made holds nothing of a box that ever ran (its database, a new operator token): it goes,
    // while the lock still keeps any other hal0 serve out, so a typo in --state leaves no stray owner token behind.
    if (options.madeState !== undefined) await removeMadeFolder(options.madeState, options.stateDir).catch(() => undefined);
    await lock.release();
    throw err;
  }
  const { snapshot, host, bound } = started;
  const url = `http://${urlHost(host)}:${bound}`;
  await lock.describe({ url: `${url}/`, reconcile: options.reconcile !== false, config: options.root });
  // The state folder removed under the server: one coded line, the runners' records put back, and the caller stops it (never a sweep failing on ENOENT forever).
  let lostWith!: (err: ApiError) => void;
  const lost = new Promise<ApiError>((resolve) => (lostWith = resolve));
  const guard = new StateGuard(options.stateDir, logger, (err) => {
    if (err.code === "server.lock_lost") lockTaken = true;
    loop.stop().catch(() => undefined); // no further sweep writes into the folder put back
    lostWith(err);
  }, server.dbFile);
  guard.start(options.stateCheckMs);
  const auth = server.box.lastSettings()?.server.auth ?? "token";
  // Where the person's credential is (never the token itself): the CLI reads it from there, `hal0 web` turns it into a login link.
  if (server.box.lastSettings() === undefined) {
    logger.warn({ config: options.root }, "hal0.toml has errors and no version of the tree has compiled: [server], [bridge] and the other settings are the built-in defaults until it does (hal0 validate names them)");
  }
  logger.info({ url: `${url}/`, config: options.root, state: options.stateDir, revision: snapshot.revision, auth, operator_file: join(options.stateDir, "operator.token") }, "hal0 serve listening");
  if (auth === "off") logger.warn({ auth }, "[server] auth = \"off\": every loopback caller is trusted as an operator, and an agent is whoever its X-hal0-Agent header says; use auth = \"token\" unless this box has a single user");
  // The sweep hands each Hermes profile its agent token from the server's own token store.
  // Its observations serve the liveness reads; each step it takes makes the next read observe anew.
  const sweeper = new Sweeper({
    root: options.root, state, driverFor: options.driverFor, hermesCredentials: server.box.options.hermesCredentials, runners: options.runners,
    onObserved: (model, slots, startedAt) => server.box.seedLiveness(model, slots, startedAt),
    onEvent: () => server.box.forgetLiveness(),
  });
  if (options.reconcile !== false) {
    loop.attach((observe) => new SweepLoop(sweeper, {
      root: options.root,
      intervalS: () => sweeper.lastGoodModel?.settings.reconcile.interval_s ?? 120,
      onReport: (report, ms) => {
        // Nothing to do is logged once after a sweep that did or said something (the tree fixed, a failure gone), so the log's last word is the box's state.
        const settled = report.outcome === "nothing_to_do" && last !== undefined && last.outcome !== "nothing_to_do";
        last = report;
        observe.report(report);
        server.metrics?.observeSweep(report, ms);
        if (report.outcome !== "nothing_to_do" || settled) logSweep(logger, report);
      },
      onError: (err, ms) => {
        observe.error(err);
        server.metrics?.observeSweep(undefined, ms);
        // A coded error (the config folder gone) is said in its words, not as a stack.
        // A full disk, or a file system that refuses the write (read-only, permission), is said as the registry's code or the errno and the path: it repeats every sweep until fixed, so never as a stack.
        const full = storageFull(err);
        const code = (err as { code?: unknown }).code;
        const errno = err as NodeJS.ErrnoException;
        if (full) logger.error({ code: full.code, message: full.message }, "sweep failed");
        else if (typeof code === "string" && code.includes(".")) logger.error({ code, message: (err as Error).message }, "sweep failed");
        else if (typeof code === "string" && /^E[A-Z]+$/.test(code) && typeof errno.path === "string") logger.error({ errno: code, path: errno.path, message: errno.message }, "sweep failed");
        else logger.error({ err }, "sweep failed");
      },
    }));
  }
  const expiry = setInterval(() => {
    // A database that cannot take the update now (a full disk) is tried again at the next tick, not the end of the server.
    try {
      server.approvals.expireDue();
    } catch (err) {
      logger.error({ err }, "expiring approvals failed");
    }
  }, 30_000);
  expiry.unref();
  let closing: Promise<void> | undefined;
  return {
    server, url, port: bound, logger, lost,
    async reload() {
      // What POST /api/settings/reload does, for a person at the box (SIGHUP, systemctl reload hal0).
      const snap = await server.box.snapshot().catch((err: unknown) => {
        logger.error({ code: (err as { code?: unknown }).code, message: (err as Error).message }, "reload: the config tree cannot be read");
        return undefined;
      });
      if (snap === undefined) return;
      loop.retryNow();
      const errors = snap.diagnostics.filter((d) => d.severity === "error");
      logger.info({ revision: snap.revision, errors: errors.length, reconcile: options.reconcile !== false }, "reload: the config tree read again; a sweep is asked, failing slots tried again at once");
    },
    close() {
      closing ??= (async () => {
        clearInterval(expiry);
        guard.stop();
        server.box.interrupt(); // a slot restart in flight stops waiting for /health, so the drain does not wait out a load
        server.runs?.interrupt(); // an agent_run_wait in flight answers now, so the drain does not wait out its 300 s
        await front.drain(options.shutdownGraceMs ?? SHUTDOWN_GRACE_MS);
        await loop.stop();
        await server.box.close();
        await server.close();
        await lock.release();
        logger.info("hal0 serve stopped");
        logger.flush();
        logFile?.close();
      })();
      return closing;
    },
  };
}

/**
 * The HTTP server and its drain. node's own server, not listhen: listhen's
 * port search hid why a port could not be bound (and moved a port it deems
 * unsafe, or a wildcard host, elsewhere), and node's `close()` waits for
 * every connection, so an open event stream held a shutdown forever.
 */
class Front {
  readonly http: Server;
  /** Replies in progress (requests in flight and open event streams). */
  private readonly open = new Set<ServerResponse>();
  private closing = false;

  constructor(app: App, private readonly logger: Logger) {
    const handler = toNodeListener(app);
    // node's own refusals (a Host-less HTTP/1.1 request, a request it cannot parse, headers over its limit, a timeout) are bare status lines: hal0 answers them with the envelope.
    this.http = createServer({ requireHostHeader: false }, (req, res) => {
      if (this.closing) return refuseShuttingDown(res);
      if (req.httpVersion === "1.1" && req.headers.host === undefined) return refuseRaw(res, malformed("an HTTP/1.1 request names its Host (RFC 9112 §3.2)", "missing_host"));
      this.open.add(res);
      res.once("close", () => this.open.delete(res));
      // Once stopping, a connection carries no next request: it closes after its reply.
      res.once("finish", () => void (this.closing && req.socket.end()));
      void handler(req, res);
    });
  }

  /** Binds `host:port` (0: any free port) and resolves with the port; a failure is `server.port_in_use` or `server.listen_failed`. */
  async listen(host: string, port: number): Promise<number> {
    try {
      await new Promise<void>((resolve, reject) => {
        this.http.once("error", reject);
        this.http.listen(port, host, () => {
          this.http.off("error", reject);
          resolve();
        });
      });
    } catch (err) {
      throw await listenError(err as NodeJS.ErrnoException, host, port);
    }
    this.http.on("error", (err) => this.logger.error({ err }, "http server error"));
    this.http.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket, this.http));
    // An Expect other than 100-continue: node answered a bare 417 (no body, the connection kept); the envelope, and closed, as node's other refusals.
    this.http.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => refuseRaw(res, new ApiError("request.expectation_failed", `Expect: ${JSON.stringify(String(req.headers.expect ?? "").slice(0, 64))} is not met; only Expect: 100-continue is taken`, { expect: String(req.headers.expect ?? "").slice(0, 64) })));
    // CONNECT is no route's method (hal0 is not a proxy); without a listener node drops the connection unanswered.
    this.http.on("connect", (req: IncomingMessage, socket: Duplex) => answerOnSocket(socket, new ApiError("route.method_not_allowed", `CONNECT is not allowed on ${req.url ?? "/"}: hal0 is not a proxy`, { allowed: [] })));
    return (this.http.address() as { port: number }).port;
  }

  /** Startup failed: the socket goes, if it was bound. */
  abort(): void {
    if (this.http.listening) {
      this.http.close();
      this.http.closeAllConnections();
    }
  }

  /**
   * Stops listening and refuses what still arrives on an open connection
   * (503 `server.shutting_down`); lets the requests in flight finish, with
   * no limit (an apply is not cut short); ends the open event streams once
   * nothing else is in flight, or after `graceMs` at the latest (a stream
   * never finishes on its own); refuses a request whose body has still not
   * all arrived by then (503, nothing ran: node's request timeout stops with
   * the listener, so a client that never sends the rest held the shutdown
   * forever); resolves when every connection is closed.
   */
  async drain(graceMs: number): Promise<void> {
    if (!this.http.listening) return;
    this.closing = true;
    const closed = new Promise<void>((resolve) => this.http.close(() => resolve()));
    for (const res of this.open) if (!res.headersSent) res.setHeader("Connection", "close");
    this.http.closeIdleConnections();
    const deadline = performance.now() + graceMs; // monotonic: a clock step does not cut the grace short or stretch it
    let waiting = false;
    while (this.open.size > 0) {
      const inFlight = [...this.open].filter((res) => !isEventStream(res)).length;
      const late = performance.now() >= deadline;
      if (late) {
        // A request whose body has still not all arrived did nothing yet (every route reads its whole body first): refused, not waited for.
        const cut = [...this.open].filter((res) => cutBody(res.req, shuttingDown())).length;
        if (cut > 0) this.logger.info({ requests: cut }, "refused requests whose body had not arrived");
      }
      if (inFlight === 0 || late) {
        const streams = endEventStreams(this.open);
        if (streams > 0) this.logger.info({ streams, requests_in_flight: inFlight }, "ended open event streams");
      }
      if (late && inFlight > 0 && !waiting) {
        waiting = true;
        this.logger.info({ requests_in_flight: inFlight }, "waiting for the requests in flight");
      }
      await sleep(20);
    }
    // Every reply is done. A connection still open carries no request (a client that sent part of one): cut after a moment.
    this.http.closeIdleConnections();
    const cut = setTimeout(() => this.http.closeAllConnections(), 1000);
    await closed;
    clearTimeout(cut);
  }
}

function malformed(why: string, reason: string): ApiError {
  return new ApiError("request.malformed", `not a request hal0 can read: ${why}`, { reason });
}

/** A request node refused before any handler saw it, as hal0's envelope (what node would send bare), and the connection closed. */
function answerClientError(err: NodeJS.ErrnoException & { reason?: string }, socket: Duplex, http: Server): void {
  if (err.code === "ECONNRESET") return void socket.destroy(); // the client went: no one to answer
  const api = err.code === "HPE_HEADER_OVERFLOW"
    ? new ApiError("request.header_too_large", `the request line and headers are larger than ${maxHeaderSize / 1024} KiB (a URL or query string that long is refused)`, { max_header_kb: maxHeaderSize / 1024 })
    : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? new ApiError("request.timeout", `the request did not arrive in time (its headers within ${http.headersTimeout / 1000} s, all of it within ${http.requestTimeout / 1000} s)`, { headers_timeout_s: http.headersTimeout / 1000, request_timeout_s: http.requestTimeout / 1000 })
      : malformed(err.reason ?? err.message, err.code ?? "unknown");
  answerOnSocket(socket, api);
}

/** Writes `err`'s reply on a socket no response owns yet (one whose response began is only closed), then closes it, as node does with its own. */
function answerOnSocket(socket: Duplex, err: ApiError): void {
  const active = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
  if (socket.writable && !active?.headersSent) {
    const body = JSON.stringify(envelope(err));
    socket.write(`HTTP/1.1 ${err.status} ${STATUS_CODES[err.status] ?? ""}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  }
  socket.destroy();
}

function refuseRaw(res: ServerResponse, err: ApiError): void {
  const body = JSON.stringify(envelope(err));
  res.writeHead(err.status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), connection: "close" }).end(body);
}

function shuttingDown(): ApiError {
  return new ApiError("server.shutting_down", "hal0 serve is shutting down; retry once it is back");
}

function refuseShuttingDown(res: ServerResponse): void {
  const err = shuttingDown();
  res.writeHead(err.status, { "content-type": "application/json", connection: "close", "retry-after": "5" }).end(JSON.stringify(envelope(err)));
}

/** Why `host:port` could not be bound, as the registry's error: the holder named for a busy port. */
async function listenError(err: NodeJS.ErrnoException, host: string, port: number): Promise<ApiError> {
  const where = `${urlHost(host, false)}:${port}`;
  if (err.code === "EADDRINUSE") {
    // /proc names the holder (a scan of every process's fds: ~50 ms, more on a loaded host); bounded, so a busy port still fails fast.
    const holder = await Promise.race([portHolder(port), sleep(HOLDER_LOOKUP_MS, undefined, { ref: false })]);
    return new ApiError("server.port_in_use", `cannot listen on ${where}: ${portInUseMessage(port, holder ?? {})}`, { host, port, ...holder });
  }
  const why = err.code === "EACCES" ? `permission denied${port < 1024 ? " (a port below 1024 needs privileges)" : ""}`
    : err.code === "EADDRNOTAVAIL" ? `${host} is not an address of this machine`
    : err.code === "ENOTFOUND" || err.code === "EAI_AGAIN" ? `${host} does not resolve`
    : err.message;
  return new ApiError("server.listen_failed", `cannot listen on ${where}: ${why}`, { host, port, errno: err.code });
}

const HOLDER_LOOKUP_MS = 1500;

/** The process listening on `port` (lowest pid holding its socket) and its command line, from /proc. */
async function portHolder(port: number): Promise<{ pid: number; command?: string } | undefined> {
  const pid = await socketOwner(await listeningInodes(port));
  if (pid === undefined) return undefined;
  const command = await commandOf(pid);
  return command === undefined ? { pid } : { pid, command };
}

/** `host` as a URL's host: IPv6 in brackets; a wildcard address as loopback (what a client on this machine can reach), unless `reachable` is false. */
function urlHost(host: string, reachable = true): string {
  if (reachable && host === "0.0.0.0") return "127.0.0.1";
  if (reachable && (host === "::" || host === "[::]")) return "[::1]";
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}

/**
 * Where hal0 writes with writeFileAtomic and so where a crashed writer's
 * temp can be: the tree's folders (as the loader reads them), the state
 * folder, its credentials and tokens folders, and each slot's record folder.
 */
async function hal0Folders(root: string, stateDir: string): Promise<string[]> {
  return [...TREE_FOLDERS.map((f) => join(root, f)), ...(await new StateStore(stateDir).folders())];
}

/** At most this many errors or failed steps are named in one sweep's log line. */
const SWEEP_LOG_ITEMS = 10;

/**
 * A sweep's log line. One that leaves something undone (a tree with errors, a
 * failed step) is a warning that says what, where and why, so that a person
 * who edited a file and reads the journal needs nothing else: each error at
 * its file:line:col with its code, each failed step with its code and the
 * first line of its message.
 */
function logSweep(logger: Logger, report: SweepReport): void {
  const fields: Record<string, unknown> = { sweep: report.outcome, results: report.results.length, diagnostics: report.diagnostics.length };
  // What it did, each step with why: `replace slot.utility (spec_changed)`.
  const done = report.results.filter((r) => r.ok).slice(0, SWEEP_LOG_ITEMS).map((r) => {
    const reason = report.plan?.changes.find((c) => c.address === r.address)?.reason;
    return `${r.action} ${r.address}${reason ? ` (${reason})` : ""}`;
  });
  if (done.length > 0) fields.done = done;
  const errors = report.diagnostics.filter((d) => d.severity === "error");
  if (errors.length > 0) fields.errors = errors.slice(0, SWEEP_LOG_ITEMS).map((d) => `${d.file}:${d.line}:${d.column}: ${d.code}: ${d.summary}`);
  const failed = report.results.filter((r) => !r.ok && r.code !== INTERRUPTED);
  if (failed.length > 0) fields.failed = failed.slice(0, SWEEP_LOG_ITEMS).map((r) => ({ address: r.address, code: r.code ?? "slot.apply_failed", message: (r.error ?? "").split("\n")[0]!.slice(0, 300) }));
  if (errors.length > 0 || failed.length > 0) logger.warn(fields, "sweep");
  else logger.info(fields, "sweep");
}
