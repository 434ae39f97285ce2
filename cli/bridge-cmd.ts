import { CliError, EXIT_OK, parseCommandArgs, UsageError, type CliIo } from "./io.js";
import { withTokenStore } from "./token-cmd.js";
import { BOX_OPTIONS } from "./plan-cmd.js";
import { compileTree, configDir, requireConfigFolder } from "./paths.js";

export const BRIDGE_HELP = `hal0 bridge admit NAME [--profiles P,Q] [--url URL] [--json]
hal0 bridge list [--all] [--json]
hal0 bridge revoke NAME [--json]
  [--config DIR] [--state DIR]

Admits a remote coding agent (Claude Code, Codex, Cursor, …) to hal0-agents at
/mcp/agents, where it runs and teaches the box's Hermes. admit mints an agent
token that reaches /mcp/agents and the Hermes profiles named (default: every
profile), nothing else, and prints it once on stdout with ready client config:
the 'claude mcp add' line, Codex's ~/.codex/config.toml block and Cursor's
.cursor/mcp.json. The URL is http://<[server] host>:<[server] port>/mcp/agents
unless --url says another (the http:// or https:// address agents reach the box
at; anything else is a usage error). A profile named that [hermes] home holds
no folder of is warned about (names are case-sensitive); the admission stands.
list shows each admission: name, profiles, created, last used, revoked (--all).
revoke ends every live admission of NAME at once, in a running 'hal0 serve' too.
[bridge] enabled = false in hal0.toml turns the mount off (404) without revoking.
Whoever can read the state folder admits agents. The state folder is the serve's:
one without a database (hal0.db) is refused (state.not_found), and so is a
--config folder that is not there (config.not_found); admit needs the config
for its URL unless --url is given.
  --json   the token and configs (admit), the admissions (list) as JSON; a
           failure is {ok: false, exit_code, diagnostics}
Exit status: 0 done, 1 refused (bridge.already_admitted, bridge.not_admitted,
auth.name_invalid, state.not_found, config.not_found), 64 usage error.`;

/** `hal0 bridge …`: bridge tokens in the state folder's database, as `hal0 token` mints any token. */
export async function runBridge(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommandArgs({
    args, strict: true, allowPositionals: true,
    options: { ...BOX_OPTIONS, profiles: { type: "string" }, url: { type: "string" }, json: { type: "boolean" }, all: { type: "boolean" } },
  });
  const [verb, name, ...extra] = positionals;
  if (!verb || !["admit", "list", "revoke"].includes(verb) || extra.length > 0) throw new UsageError("expected: hal0 bridge admit NAME | list | revoke NAME");
  if (verb !== "list" && name === undefined) throw new UsageError(`${verb} needs the agent's NAME`);
  if (verb === "list" && name !== undefined) throw new UsageError("list takes no argument");
  if (verb !== "admit" && (values.profiles !== undefined || values.url !== undefined)) throw new UsageError("--profiles and --url are for admit");
  const print = (human: string, json: unknown) => io.stdout.write(values.json ? `${JSON.stringify(json, null, 2)}\n` : `${human}\n`);
  const { bridgeScopes, isAdmission } = await import("../server/bridge/access.js");
  // A --config that is not there is an error, never a quiet default.
  if (values.config !== undefined) requireConfigFolder(configDir(values.config, io.env, io.cwd));
  // Worked out before anything is minted: a config that cannot be read leaves no token behind.
  if (values.url !== undefined && !isHttpUrl(values.url)) throw new UsageError(`--url is the http:// or https:// address agents reach the box at, not ${JSON.stringify(values.url)}`);
  const url = verb === "admit" ? mountUrl(values.url ?? (await defaultUrl(values, io))) : "";
  return withTokenStore(values.state, io, async (tokens) => {
    const admissions = (all: boolean) => tokens.list({ all }).filter(isAdmission);
    if (verb === "admit") {
      const profiles = values.profiles === undefined ? ["*"] : values.profiles.split(",").map((p) => p.trim()).filter(Boolean);
      if (profiles.length === 0) throw new UsageError("--profiles names at least one Hermes profile (or leave it out for every profile)");
      if (admissions(false).some((t) => t.name === name)) throw new CliError("bridge.already_admitted", `${name} is admitted already; revoke it first (hal0 bridge revoke ${name}) or rotate its token (hal0 token rotate ${name})`);
      const minted = tokens.mint("agent", name!, bridgeScopes(profiles));
      for (const line of await unknownProfiles(values, io, profiles)) io.stderr.write(`hal0 bridge: warning: ${line}\n`);
      const { clientConfigs } = await import("../server/bridge/clients.js");
      const configs = clientConfigs(url, minted.token);
      io.stderr.write(`hal0 bridge: ${minted.id} admits agent:${minted.name} to ${url} (profiles: ${reach(minted.profiles)}); the token is shown once — keep it\n`);
      print([
        minted.token, "",
        "# Claude Code", configs.claude_code, "",
        "# Codex: ~/.codex/config.toml", configs.codex, "",
        "# Cursor: .cursor/mcp.json", configs.cursor,
      ].join("\n"), { token: minted, url, configs });
      return EXIT_OK;
    }
    if (verb === "list") {
      const list = admissions(values.all === true);
      const rows = list.map((t) => `${t.name.padEnd(20)} ${reach(t.profiles).padEnd(24)} created ${t.created_at}  last used ${t.last_used_at ?? "never"}${t.revoked_at ? `  revoked ${t.revoked_at}` : ""}`);
      print(rows.join("\n") || "no agent is admitted to the bridge (hal0 bridge admit NAME)", { admissions: list.map(admission) });
      return EXIT_OK;
    }
    const live = admissions(false).filter((t) => t.name === name);
    if (live.length === 0) throw new CliError("bridge.not_admitted", `no live bridge admission is named ${name} (hal0 bridge list)`);
    const revoked = live.map((t) => tokens.revoke(t.id));
    print(`revoked ${revoked.map((t) => t.id).join(", ")} (agent:${name}): it no longer reaches /mcp/agents`, { revoked: revoked.map(admission) });
    return EXIT_OK;
  }, { existing: true });
}

function isHttpUrl(text: string): boolean {
  if (!URL.canParse(text)) return false;
  const u = new URL(text);
  return (u.protocol === "http:" || u.protocol === "https:") && u.hostname !== "";
}

/** The mount's URL: `base` with `/mcp/agents` added unless it ends with it. */
function mountUrl(base: string): string {
  const trimmed = base.replace(/\/+$/, "");
  return trimmed.endsWith("/mcp/agents") ? trimmed : `${trimmed}/mcp/agents`;
}

function reach(profiles: readonly string[] | undefined): string {
  return !profiles || profiles.length === 0 ? "none" : profiles.includes("*") ? "all" : profiles.join(",");
}

function admission(t: { id: string; name: string; profiles?: readonly string[]; created_at: string; last_used_at: string | null; revoked_at: string | null }) {
  return { id: t.id, name: t.name, profiles: t.profiles?.includes("*") ? "all" : (t.profiles ?? []), created_at: t.created_at, last_used_at: t.last_used_at, revoked_at: t.revoked_at };
}

/** `http://<[server] host>:<[server] port>` of the compiled config (the default 127.0.0.1:8080 when it does not compile); a missing config folder is `config.not_found`. */
/**
 * A line for each named profile that `[hermes] home` holds no folder of
 * (profile names are case-sensitive: `Work` is not `work`). The admission
 * stands, as asked (a profile may be made later), but it reaches no profile
 * of that name until one is there. Nothing is said when the home cannot be
 * read or the tree does not compile.
 */
async function unknownProfiles(flags: { config?: string }, io: CliIo, profiles: readonly string[]): Promise<string[]> {
  const named = profiles.filter((p) => p !== "*");
  if (named.length === 0) return [];
  const { model } = await compileTree(flags, io).catch(() => ({ model: undefined }));
  if (model === undefined) return [];
  const { hermesHome } = await import("../reconciler/hermes-plan.js");
  const { missingProfileLines } = await import("../reconciler/hermes-files.js");
  return missingProfileLines(hermesHome(model), named);
}

async function defaultUrl(flags: { config?: string }, io: CliIo): Promise<string> {
  const { linkHost, serverAddress } = await import("./web-cmd.js");
  const { host, port } = await serverAddress(flags, io);
  return `http://${linkHost(host)}:${port}`;
}
