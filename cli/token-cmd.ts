import { existsSync } from "node:fs";
import { join } from "node:path";
import { CliError, EXIT_OK, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { stateDir } from "./paths.js";

export const TOKEN_HELP = `hal0 token create (--operator NAME | --agent NAME) [--scope SCOPE,…] [--json]
hal0 token list [--all] [--json]
hal0 token revoke ID
hal0 token rotate NAME [--kind operator|agent] [--json]
  [--state DIR]

Credentials for hal0's API and MCP servers, in the state folder's database
(only a hash of each token is stored). create and rotate print the token once,
on stdout; keep it. Scopes: mcp:admin, mcp:memory, rest, mcp:agents (with
profile:<name> or profile:* beside it, as 'hal0 bridge admit' gives them; default:
an operator all four, an agent mcp:admin,mcp:memory). Revoking or rotating takes effect
at once, in a running 'hal0 serve' too. Rotating a Hermes profile's token
(hermes__<p>) rewrites <state>/tokens/hermes__<p>; the next sweep writes the
new one into the profile. Whoever can read the state folder manages tokens.
revoke takes a token's id (hal0 token list); given a name, it revokes nothing and
names that name's live tokens' ids (rotate NAME replaces them all).
With --json a failure is {ok: false, exit_code, diagnostics} on stdout too.
Exit status: 0 done, 1 refused (auth.token_not_found, auth.name_invalid, …), 64 usage error.`;

/** `hal0 token …`: against the state folder's database directly (the person at the box). */
export async function runToken(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args, strict: true, allowPositionals: true,
    options: {
      state: { type: "string" }, operator: { type: "string" }, agent: { type: "string" }, scope: { type: "string", multiple: true },
      json: { type: "boolean" }, all: { type: "boolean" }, kind: { type: "string" },
    },
  });
  const [verb, arg, ...extra] = positionals;
  if (!verb || !["create", "list", "revoke", "rotate"].includes(verb) || extra.length > 0) throw new UsageError("expected: hal0 token create | list | revoke ID | rotate NAME");
  const print = (human: string, json: unknown) => io.stdout.write(values.json ? `${JSON.stringify(json, null, 2)}\n` : `${human}\n`);
  return withTokenStore(values.state, io, async (tokens) => {
    if (verb === "create") {
      if (arg !== undefined) throw new UsageError("create takes --operator NAME or --agent NAME, not a positional name");
      if ((values.operator === undefined) === (values.agent === undefined)) throw new UsageError("create needs exactly one of --operator NAME or --agent NAME");
      const kind = values.operator !== undefined ? "operator" : "agent";
      // No --scope: the kind's default; --scope "" (a list of nothing) is refused by the store.
      const scopes = values.scope === undefined ? undefined : values.scope.flatMap((s) => s.split(",")).map((s) => s.trim()).filter(Boolean);
      const minted = tokens.mint(kind, (values.operator ?? values.agent)!, scopes);
      io.stderr.write(`hal0 token: ${minted.id} for ${kind}:${minted.name} (${minted.scopes.join(", ")}); shown once — keep it\n`);
      print(minted.token, { token: minted });
      return EXIT_OK;
    }
    if (verb === "list") {
      if (arg !== undefined) throw new UsageError("list takes no argument");
      const list = tokens.list({ all: values.all });
      // A bridge token's profiles are part of what it reaches: shown beside its scopes (profile:NAME, as --scope takes them).
      const reach = (t: (typeof list)[number]) => [...t.scopes, ...(t.profiles ?? []).map((p) => `profile:${p}`)].join(",");
      // Columns as wide as their widest cell (an operator's four scopes, a 64-character agent name), so every row's dates line up.
      const nameWidth = Math.max(20, ...list.map((t) => t.name.length));
      const reachWidth = Math.max(30, ...list.map((t) => reach(t).length));
      const rows = list.map((t) => `${t.id}  ${t.kind.padEnd(8)} ${t.name.padEnd(nameWidth)} ${reach(t).padEnd(reachWidth)} created ${t.created_at}  last used ${t.last_used_at ?? "never"}${t.revoked_at ? `  revoked ${t.revoked_at}` : ""}`);
      print(rows.join("\n") || "no tokens", { tokens: list });
      return EXIT_OK;
    }
    if (arg === undefined) throw new UsageError(`${verb} needs ${verb === "revoke" ? "a token id (hal0 token list)" : "a name"}`);
    if (verb === "revoke") {
      const t = tokens.revoke(arg);
      print(`revoked ${t.id} (${t.kind}:${t.name})`, { token: t });
      return EXIT_OK;
    }
    if (values.operator !== undefined || values.agent !== undefined) throw new UsageError("rotate takes the name as its argument: hal0 token rotate NAME [--kind operator|agent]");
    if (values.kind !== undefined && values.kind !== "operator" && values.kind !== "agent") throw new UsageError("--kind is operator or agent");
    const minted = tokens.rotate(arg, values.kind as "operator" | "agent" | undefined);
    io.stderr.write(`hal0 token: ${minted.id} replaces every earlier token of ${minted.kind}:${minted.name}; shown once — keep it\n`);
    print(minted.token, { token: minted });
    return EXIT_OK;
  });
}

/**
 * The state folder's token store, opened for one command (the owner's token
 * made if it is not there yet; with `existing`, a folder without hal0.db is
 * CliError `state.not_found` and nothing is made) and closed after it; a refusal of the store
 * (`auth.*`, `bridge.*`) is the command's coded error. `hal0 token` and
 * `hal0 bridge` both work through it.
 */
export async function withTokenStore<T>(state: string | undefined, io: CliIo, work: (tokens: import("../server/identity/tokens.js").TokenStore) => Promise<T> | T, options: { existing?: boolean } = {}): Promise<T> {
  const { openDb } = await import("../server/db.js");
  const { ApiError } = await import("../server/errors.js");
  const { TokenStore } = await import("../server/identity/tokens.js");
  const dir = stateDir(state, io.env, io.cwd);
  // A state folder no server has used: its tokens would be for a server that does not read them.
  if (options.existing && !existsSync(join(dir, "hal0.db"))) {
    throw new CliError("state.not_found", `state folder ${dir} has no database (hal0.db): no hal0 serve has run there; name the serve's state folder with --state (or $HAL0_STATE)`);
  }
  const db = openDb(dir);
  try {
    const tokens = new TokenStore(db, dir);
    tokens.ensureOwner();
    return await work(tokens);
  } catch (err) {
    if (err instanceof ApiError) throw new CliError(err.code, err.message);
    throw err;
  } finally {
    db.close();
  }
}
