import type { Approval } from "../server/approvals.js";
import { APPROVAL_STATES } from "../server/approval-states.js";
import { localServer } from "./box.js";
import { CliError, EXIT_ERROR, EXIT_OK, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { stateDir } from "./paths.js";
import { BOX_OPTIONS } from "./plan-cmd.js";
import { operatorTokenFrom } from "../server/identity/tokens.js";
import { isLoopbackHost } from "../schema/settings.js";
import { showInvisible } from "../server/web/render.js";

export const APPROVALS_HELP = `hal0 agent approvals list [--only STATE] [--json]
hal0 agent approvals show ID [--json]
hal0 agent approvals approve ID
hal0 agent approvals deny ID [--reason TEXT]
  [--config DIR] [--state DIR] [--server URL]

Gated requests waiting for a person. Against the database in the state folder
directly, or with --server (or $HAL0_SERVER) through a running 'hal0 serve'.
Only an operator decides: the token in <state>/operator.token (or $HAL0_TOKEN). With
--server, operator.token is sent only to a server on loopback or the one serving
--state (its serve.lock); another server needs $HAL0_TOKEN (auth.required). A
$HAL0_TOKEN minted narrower (--scope rest) approves and reads whole no hal0-memory or
hal0-agents request, either way (auth.scope_denied), as through the server.
Approving re-plans the request and runs it; one whose files moved is refused (stale).
With --json a failure is {ok: false, exit_code, diagnostics} on stdout too.
Exit status (approvals): 0 done, 1 refused (approvals.*, auth.*), or the request failed or
was stale, 64 usage error.`;

/** The four approval verbs, against the database or a running server. */
export async function runApprovals(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args, strict: true, allowPositionals: true,
    options: { ...BOX_OPTIONS, server: { type: "string" }, json: { type: "boolean" }, reason: { type: "string" }, only: { type: "string" } },
  });
  const [verb, id, ...extra] = positionals;
  if (!verb || !["list", "show", "approve", "deny"].includes(verb) || extra.length > 0 || (verb !== "list" && !id)) throw new UsageError("expected: hal0 agent approvals list | show ID | approve ID | deny ID");
  // A state no request can be in lists nothing, which reads as "nothing waits": refused instead.
  if (values.only !== undefined && !(APPROVAL_STATES as readonly string[]).includes(values.only)) throw new UsageError(`--only ${JSON.stringify(values.only)}: a request's state is one of ${APPROVAL_STATES.join(", ")}`);
  const server = values.server ?? io.env.HAL0_SERVER;
  const state = stateDir(values.state, io.env, io.cwd);
  const backend = server ? httpBackend(server, await serverToken(server, state, io.env)) : await dbBackend(values, io);
  try {
    const by = "cli";
    if (verb === "list") {
      const items = await backend.list(values.only);
      io.stdout.write(values.json ? `${JSON.stringify({ approvals: items }, null, 2)}\n` : `${items.map(line).join("\n") || "no approval requests"}\n`);
      return EXIT_OK;
    }
    const approval = verb === "show" ? await backend.get(id!) : verb === "approve" ? await backend.approve(id!, by) : await backend.deny(id!, by, values.reason);
    io.stdout.write(values.json || verb === "show" ? `${JSON.stringify({ approval }, null, 2)}\n` : `${line(approval)}\n`);
    return approval.state === "failed" || approval.state === "stale" ? EXIT_ERROR : EXIT_OK;
  } finally {
    await backend.close();
  }
}

function line(a: Approval): string {
  const why = a.reason ? ` — ${printable(a.reason)}` : "";
  return `${a.id}  ${a.state.padEnd(9)} ${a.tool.padEnd(16)} ${a.caller.agent.padEnd(18)} ${a.created_at}  ${printable(a.summary)}${why}`;
}

/** Text an agent chose (a plan's summary) as one line the terminal only prints: no escape sequence, line break or bidi override of its own. */
function printable(text: string): string {
  return showInvisible(text);
}

interface Backend {
  list(state?: string): Promise<Approval[]>;
  get(id: string): Promise<Approval>;
  approve(id: string, by: string): Promise<Approval>;
  deny(id: string, by: string, reason?: string): Promise<Approval>;
  /** (the `by` argument is unused: the operator is the one the credential proves) */
  close(): void | Promise<void>;
}

/** The same stores `hal0 serve` uses, opened in this process (loaded only here: better-sqlite3 and h3). */
async function dbBackend(flags: { config?: string; state?: string }, io: CliIo): Promise<Backend> {
  const { ApiError } = await import("../server/errors.js");
  const state = stateDir(flags.state, io.env, io.cwd);
  const hal0 = await localServer(flags, io);
  await hal0.box.snapshot().catch(() => undefined);
  // Whoever can read the state folder is the person at the box: the owner's token (or $HAL0_TOKEN's operator) decides.
  const { operatorTokenFrom: tokenFrom, OWNER } = await import("../server/identity/tokens.js");
  const { asReadBy } = await import("../server/routes/approvals.js");
  const { narrowedScopes } = await import("../server/gate.js");
  const own = tokenFrom(state, io.env as NodeJS.ProcessEnv);
  const token = own === undefined ? undefined : hal0.tokens.verify(own);
  if (own !== undefined && (!token || token.kind !== "operator")) {
    await hal0.close();
    throw new CliError("auth.invalid_token", "HAL0_TOKEN (or <state>/operator.token) is not a live operator token");
  }
  // An operator token minted narrower (--scope rest) decides and reads here as it does through the server: not a request of a surface it does not reach.
  const scopes = token === undefined ? {} : narrowedScopes(token.scopes);
  const decider = { kind: "operator" as const, name: token?.name ?? OWNER, ...scopes };
  const reader = { kind: "operator" as const, agent: decider.name, ...scopes };
  const wrap = async <T>(work: () => T | Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (err) {
      if (err instanceof ApiError) throw new CliError(err.code, err.message);
      throw err;
    }
  };
  return {
    list: (s) => wrap(() => hal0.approvals.list(s as never).map((a) => asReadBy(a, reader))),
    get: (id) => wrap(() => asReadBy(hal0.approvals.get(id) ?? (() => { throw new CliError("approvals.not_found", `no approval request ${id}`); })(), reader)),
    approve: (id) => wrap(async () => asReadBy(await hal0.approvals.approve(id, decider), reader)),
    deny: (id, _by, reason) => wrap(() => asReadBy(hal0.approvals.deny(id, decider, reason), reader)),
    close: () => hal0.close(),
  };
}

/**
 * The credential sent to `--server`: `$HAL0_TOKEN` when set, else the state
 * folder's `operator.token` — this box's owner credential — and that only to
 * a server on loopback or the `hal0 serve` this state folder's serve.lock
 * names (the box it is for). Sent to any other address (a `$HAL0_SERVER` left
 * naming another box), it would hand that server the owner's token, over
 * plain HTTP: refused, `auth.required`, nothing sent.
 */
async function serverToken(server: string, state: string, env: CliIo["env"]): Promise<string | undefined> {
  // A query or #fragment would swallow the API path appended to it (http://host:8080?x=1/api/… asks for / instead).
  if (!URL.canParse(server) || !/^https?:$/.test(new URL(server).protocol) || new URL(server).search !== "" || new URL(server).hash !== "" || /[?#]/.test(server)) {
    throw new UsageError(`--server ${JSON.stringify(server.slice(0, 80))}: expected the URL of a running hal0 serve, such as http://127.0.0.1:8080 (no ?query or #fragment)`);
  }
  const given = env.HAL0_TOKEN?.trim();
  if (given) return given;
  const own = operatorTokenFrom(state, env as NodeJS.ProcessEnv);
  const url = new URL(server);
  if (own === undefined || isLoopbackHost(url.hostname)) return own;
  const { serveHolder } = await import("../reconciler/lock.js");
  const served = (await serveHolder(state))?.url;
  if (served !== undefined && URL.canParse(served) && new URL(served).origin === url.origin) return own;
  throw new CliError("auth.required", `${url.origin} is neither on loopback nor the hal0 serve of ${state}${served ? ` (${new URL(served).origin})` : ""}: the state folder's operator.token is this box's owner credential and is not sent there; set HAL0_TOKEN to an operator token of that server`);
}

function httpBackend(base: string, token: string | undefined): Backend {
  const call = async (method: string, path: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${base.replace(/\/$/, "")}${path}`, {
      method, headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body),
    }).catch((err: Error) => {
      throw new CliError("approvals.unavailable", `cannot reach ${base}: ${err.message}`);
    });
    const json = await res.json().catch(() => ({}));
    if (!res.ok) throw new CliError(json?.error?.code ?? `system.http_${res.status}`, json?.error?.message ?? res.statusText);
    return json;
  };
  /** `key` of the reply, of the shape hal0 serve answers with; another server (a runner's port, a web page) is not hal0 serve. */
  const answer = async (key: "approvals" | "approval", method: string, path: string, body?: unknown, paged = false): Promise<any> => {
    const reply = await call(method, path, body);
    const value = reply?.[key];
    if (key === "approvals" ? Array.isArray(value) : typeof value === "object" && value !== null && !Array.isArray(value)) return paged ? { items: value, more: reply.more === true } : value;
    throw new CliError("approvals.unavailable", `${base} answered ${method} ${path} with no ${key === "approvals" ? "list of approvals" : "approval"}: it is not a hal0 serve; point --server (or $HAL0_SERVER) at hal0 serve's address, such as http://127.0.0.1:8080`);
  };
  return {
    // The server answers a page at a time (500 at most, `more` when a later page has some): read them all, oldest first.
    list: async (s) => {
      const all: unknown[] = [];
      for (;;) {
        const query = `?${s ? `state=${encodeURIComponent(s)}&` : ""}offset=${all.length}`;
        const page = await answer("approvals", "GET", `/api/agent/approvals${query}`, undefined, true);
        all.push(...page.items);
        if (!page.more || page.items.length === 0) return all as never;
      }
    },
    get: async (id) => answer("approval", "GET", `/api/agent/approvals/${encodeURIComponent(id)}`),
    approve: async (id) => answer("approval", "POST", `/api/agent/approvals/${encodeURIComponent(id)}/approve`),
    deny: async (id, _by, reason) => answer("approval", "POST", `/api/agent/approvals/${encodeURIComponent(id)}/deny`, reason ? { reason } : {}),
    close: () => undefined,
  };
}
