import { join } from "node:path";

/**
 * Everything hal0 knows about driving Hermes Agent (NousResearch/hermes-agent)
 * headless: how a run is invoked and how its output is read. Nothing else in
 * hal0 builds a Hermes command line or parses what Hermes prints.
 *
 * We cannot run the real Hermes here (it needs a model provider); the tests
 * drive fixtures/hermes/hermes, a stand-in built to these same assumptions.
 * What this module assumes, from Hermes's public docs and CLI source:
 *
 * 1. A one-shot run is `hermes chat --query=<prompt> -Q`: with stdin not a
 *    TTY (hal0 gives it none) `chat -q` answers and exits; `-Q` (`--quiet`)
 *    leaves only the final response on stdout (no banner, spinner or tool
 *    previews). The prompt goes as `--query=<prompt>` rather than `-q <prompt>`
 *    so a prompt that starts with `-` is never read as an option (argparse).
 * 2. `-t a,b` selects toolsets (comma-separated), `--max-turns N` bounds the
 *    agent's turns, `--resume <session id>` continues a stored session. hal0
 *    never passes `--yolo`: Hermes keeps its own approvals for dangerous
 *    commands. Session ids and toolset names are checked before they get here
 *    (no leading `-`), so no argument can become an option.
 * 3. A profile is a Hermes home: `<[hermes] home>/profiles/<name>/` (config.yaml,
 *    SOUL.md, memories/, skills/, state.db, .env), chosen by setting
 *    `HERMES_HOME` to that folder. hal0 does not use `--profile`, which
 *    resolves names against Hermes's own default root, not hal0's `[hermes] home`.
 *    The run's working directory is the profile's folder.
 * 4. At the end of a non-interactive run Hermes writes `\nsession_id: <id>` to
 *    stderr (cli.py: "reports session_id to stderr for automation wrappers");
 *    ids look like `20250820_143000_abc123`. The last such line wins (a
 *    compression can move a session to a new id during the run). Only stderr
 *    is read for it, and only an id of SESSION_ID's shape: stdout is the
 *    answer, whose words the prompt can choose.
 * 5. The exit status is the result: 0 a finished answer, non-zero a failure
 *    (1 an error, 130 interrupted). There is no structured result stream; the
 *    output is the text Hermes printed, the session id line left out.
 * 6. Hermes reads its provider keys from the profile's own `.env`, so the run
 *    needs none of hal0's environment: it gets PATH, HOME, locale and time
 *    zone, every `HERMES_*` variable of hal0's environment, and `HERMES_HOME`.
 */

/** What a run asks of Hermes. */
export interface HermesInvocation {
  readonly command: string;
  /** `[hermes] home`: the root holding `profiles/<name>/`. */
  readonly home: string;
  readonly profile: string;
  readonly prompt: string;
  readonly toolsets?: readonly string[];
  readonly maxTurns?: number;
  /** A session id to continue. */
  readonly resume?: string;
}

export interface HermesSpawn {
  readonly file: string;
  readonly argv: readonly string[];
  readonly env: Record<string, string>;
  readonly cwd: string;
}

/** A profile's Hermes home. */
export function profileHome(home: string, profile: string): string {
  return join(home, "profiles", profile);
}

/** The command line, environment and folder of one headless run. */
export function hermesSpawn(inv: HermesInvocation, parentEnv: NodeJS.ProcessEnv, markers: Record<string, string>): HermesSpawn {
  const argv = ["chat", `--query=${inv.prompt}`, "-Q"];
  if (inv.toolsets && inv.toolsets.length > 0) argv.push("-t", inv.toolsets.join(","));
  if (inv.maxTurns !== undefined) argv.push("--max-turns", String(inv.maxTurns));
  if (inv.resume !== undefined) argv.push("--resume", inv.resume);
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(parentEnv)) {
    if (v !== undefined && (PASSED.has(k) || k.startsWith("HERMES_"))) env[k] = v;
  }
  env.PATH ??= process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin";
  const home = profileHome(inv.home, inv.profile);
  return { file: inv.command, argv, env: { ...env, ...markers, HERMES_HOME: home }, cwd: home };
}

const PASSED = new Set(["PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"]);

/**
 * A Hermes session id as hal0 passes one after `--resume` (an agent's `resume`, or a run's reported id):
 * letters, digits, `_ . : -`, never starting with `-`, so it can never be read as an option.
 */
export const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;

const SESSION_LINE = /^session_id:\s*(\S+)\s*$/;

/** The session id a line of stderr reports, if it is Hermes's `session_id: <id>` line with an id of that shape. */
export function sessionIdOf(line: string): string | undefined {
  const id = SESSION_LINE.exec(line)?.[1];
  return id !== undefined && SESSION_ID.test(id) ? id : undefined;
}

/** The run's answer: its output without the session id line. */
export function finalOutput(text: string): string {
  return text.split("\n").filter((l) => sessionIdOf(l) === undefined).join("\n").trim();
}

/** How a run ended, read from its exit: done on 0, failed otherwise (with why). */
export function outcomeOf(code: number | null, signal: string | null): { state: "done" | "failed"; error?: string } {
  if (code === 0) return { state: "done" };
  if (code === 130) return { state: "failed", error: "Hermes reports the run interrupted (exit 130)" };
  if (code !== null) return { state: "failed", error: `hermes exited with code ${code}` };
  return { state: "failed", error: `hermes was killed by ${signal ?? "a signal"}` };
}
