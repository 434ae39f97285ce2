import { existsSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { CliError, EXIT_OK, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { compileTree, stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";

export const WEB_HELP = `hal0 web [--config DIR] [--state DIR] [--host H] [--port N | --origin URL] [--json]

Prints a one-time link that logs a browser into the operator's pages of 'hal0 serve':
http://<host>:<port>/login?code=…, at the address the hal0 serve running on this state
folder listens on, else [server] host and port (a wildcard host prints 127.0.0.1).
The link works once, within 5 minutes; the browser then holds a 12-hour session.
It logs in as the owner (<state>/operator.token, minted when missing) or as the
operator whose token is in $HAL0_TOKEN. Whoever can read the state folder may run it.
  --host, --port    the address 'hal0 serve' listens on (default: where the hal0 serve
                    running on this state folder listens, else [server] host and port)
  --origin URL      the link under one of [server] public_origins instead (an HTTPS
                    reverse proxy's: https://hal0.example.com/login?code=…)
  --json            {"url", "expires_at", "operator"} instead of the bare link (a failure:
                    {ok: false, exit_code, diagnostics})
The state folder must be the serve's: one without a database (hal0.db: no hal0 serve has
run there, a mistyped --state) is refused (state.not_found) and nothing is made there, as
no server would take its link; with no hal0 serve running on it, a note says so.
Exit status: 0 printed, 1 error (auth.invalid_token, config.not_found, state.not_found), 64 usage error
(a --host that is not a host name or an IP address, a --port outside 1..65535, an
--origin that [server] public_origins does not list, --origin with --host or --port).`;

/** How long a printed link works. */
const CODE_TTL_S = 5 * 60;

/** `hal0 web`: mints a login code in the state folder's database and prints the link. */
export async function runWeb(args: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs({
    args, strict: true, allowPositionals: false,
    options: { ...BOX_OPTIONS, host: { type: "string" }, port: { type: "string" }, origin: { type: "string" }, json: { type: "boolean" } },
  });
  if (values.origin !== undefined && (values.host !== undefined || values.port !== undefined)) throw new UsageError("--origin names the whole address: give it without --host and --port");
  const state = stateDir(values.state, io.env, io.cwd);
  if (values.host !== undefined && !isHostName(values.host)) throw new UsageError(`--host must be a host name or an IP address, not ${JSON.stringify(values.host.slice(0, 80))}`);
  const portFlag = values.port === undefined ? undefined : /^\d{1,5}$/.test(values.port) ? Number(values.port) : Number.NaN;
  if (portFlag !== undefined && (!Number.isInteger(portFlag) || portFlag < 1 || portFlag > 65535)) throw new UsageError(`--port must be 1..65535, not ${values.port}`);
  const configured = await serverAddress(values, io);
  // A code lives in the state folder's database, where only the hal0 serve of that folder looks: minted into a new one
  // (a mistyped --state, the default /var/lib/hal0 beside a serve started with --state) it made a box's state folder
  // for nothing, and the link, opened at the serve that runs, was refused (401).
  if (!existsSync(join(state, "hal0.db"))) {
    throw new CliError("state.not_found", `state folder ${state} has no database (hal0.db): no hal0 serve has run there, so none would take its link; name the serve's state folder with --state (or $HAL0_STATE)`);
  }
  const origin = values.origin === undefined ? undefined : publicOrigin(values.origin, configured.publicOrigins);
  // A hal0 serve running on this state folder says where it listens (its --host / --port, a port 0 it was given).
  const running = values.host === undefined && portFlag === undefined ? await runningAddress(state) : undefined;
  const server = running ?? configured;
  if (values.host === undefined && portFlag === undefined && running === undefined) {
    io.stderr.write(`note: no hal0 serve runs on the state folder ${state} now: the link works at a hal0 serve started on it (--state ${state}) within 5 minutes; a serve on another state folder refuses it\n`);
  }
  const host = linkHost(values.host ?? server.host);
  const port = portFlag ?? server.port;

  // Loaded only here: better-sqlite3.
  const { openDb } = await import("../server/db.js");
  const { TokenStore, operatorTokenFrom } = await import("../server/identity/tokens.js");
  const db = openDb(state);
  try {
    const tokens = new TokenStore(db, state);
    const owner = tokens.ensureOwner();
    const secret = io.env.HAL0_TOKEN?.trim() ? operatorTokenFrom(state, io.env as NodeJS.ProcessEnv)! : owner.token;
    const token = tokens.verify(secret);
    if (!token || token.kind !== "operator") throw new CliError("auth.invalid_token", "HAL0_TOKEN is not a live operator token (unset it to log in as the owner)");
    const code = tokens.loginCode(token.id, CODE_TTL_S, origin);
    const url = `${origin ?? `http://${host}:${port}`}/login?code=${encodeURIComponent(code)}`;
    const expiresAt = new Date(Date.now() + CODE_TTL_S * 1000).toISOString();
    io.stdout.write(values.json ? `${JSON.stringify({ url, expires_at: expiresAt, operator: token.name })}\n` : `${url}\n`);
    if (!values.json) {
      io.stderr.write(`hal0 web: open that link within 5 minutes to log in as ${token.name}; it works once.\n`);
      // Behind a reverse proxy, the browser is elsewhere: say how to get the link it can open.
      if (origin === undefined && configured.publicOrigins.length > 0) io.stderr.write(`hal0 web: through a reverse proxy, run it with --origin ${configured.publicOrigins[0]} for a link under that origin.\n`);
    }
    return EXIT_OK;
  } finally {
    db.close();
  }
}

/**
 * `[server] host` and `port` of the compiled config; of its hal0.toml alone when
 * only other files have errors (as `hal0 serve` listens then); the defaults
 * when hal0.toml itself does not compile.
 */
export async function serverAddress(flags: { config?: string }, io: CliIo): Promise<{ host: string; port: number; publicOrigins: readonly string[] }> {
  const { root, model, settings } = await compileTree(flags, io);
  const server = (model?.settings ?? settings)?.server;
  if (!server) io.stderr.write(`hal0 web: ${root}/hal0.toml does not compile (see 'hal0 validate'); the link uses the default 127.0.0.1:8080\n`);
  return { host: server?.host ?? "127.0.0.1", port: server?.port ?? 8080, publicOrigins: server?.public_origins ?? [] };
}

/** `--origin`: one of `[server] public_origins` (compared as browsers do, case aside); any other would be refused at the gate. */
function publicOrigin(given: string, listed: readonly string[]): string {
  const wanted = given.trim().replace(/\/+$/, "").toLowerCase();
  const found = listed.find((o) => o.toLowerCase() === wanted);
  if (found !== undefined) return found;
  const shown = JSON.stringify(given.slice(0, 80));
  throw new UsageError(listed.length === 0
    ? `--origin ${shown}: [server] public_origins lists no origin, and hal0 serve answers only its own address and those (docs/config.md)`
    : `--origin ${shown} is not one of [server] public_origins: ${listed.join(", ")}`);
}

/** The address in the `serve.lock` of a live `hal0 serve` on `state`, if any. */
async function runningAddress(state: string): Promise<{ host: string; port: number } | undefined> {
  const { serveHolder } = await import("../reconciler/lock.js");
  const url = (await serveHolder(state))?.url;
  if (url === undefined || !URL.canParse(url)) return undefined;
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port) || 80 };
}

const LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const HOST_NAME = new RegExp(`^${LABEL}(?:\\.${LABEL})*\\.?$`);

/** A host name (`box.lan`), an IP address (`::1` bracketed or not) or a wildcard (`0.0.0.0`, `*`): what a link may name. */
export function isHostName(host: string): boolean {
  const h = host.trim().replace(/^\[(.*)\]$/, "$1");
  return h === "*" || isIP(h) !== 0 || (h.length <= 253 && HOST_NAME.test(h));
}

/** The host a browser can reach: a wildcard address is this machine's loopback; an IPv6 literal is bracketed. */
export function linkHost(host: string): string {
  const h = host.trim().replace(/^\[(.*)\]$/, "$1");
  if (h === "" || h === "0.0.0.0" || h === "::" || h === "*") return "127.0.0.1";
  return h.includes(":") ? `[${h}]` : h;
}
