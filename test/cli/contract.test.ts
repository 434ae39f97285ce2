import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { DEFAULT_SCOPES, SCOPES } from "../../server/identity/tokens.js";
import { captureIo, hal0ForNobody } from "./helpers.js";

/**
 * The CLI's contract (issue 16): exit 2 means only "there are changes"; errors
 * are 1 with a registry code, usage errors 64; under --json every failure is
 * one JSON document on stdout with diagnostics; an unknown option names the
 * closest known one; `hal0 status` keeps one line per slot.
 */
const FAKE_RUNNER = join(import.meta.dirname, "../../fixtures/runner/fake-llama-server.mjs");
const MODEL = join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");

let dir: string;
/** A valid tree with two process slots, `s` and `t` (never started here). */
let good: string;
/** A tree with one error: hal0.toml:2:11 `runtime = 3`. */
let broken: string;
/** A docker box whose engine does not answer. */
let docker: string;
const missing = () => join(dir, "no-such-config");
const state = () => join(dir, "state");

async function run(args: string[], env: Record<string, string> = {}) {
  const io = captureIo(env, dir);
  const code = await main(args, io);
  return { code, out: io.out(), err: io.err() };
}

/** The one JSON document of a failure, checked for the diagnostic shape of `hal0 validate --json`. */
function failureDoc(out: string, exit: number) {
  const doc = JSON.parse(out) as { ok: boolean; exit_code: number; error_count: number; diagnostics: Array<Record<string, unknown>> };
  expect(doc).toMatchObject({ ok: false, exit_code: exit });
  expect(doc.error_count).toBeGreaterThan(0);
  for (const d of doc.diagnostics) expect(Object.keys(d).sort()).toEqual(["code", "column", "detail", "file", "line", "path", "related", "severity", "summary"]);
  return doc;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "hal0-contract-"));
  good = join(dir, "good");
  mkdirSync(join(good, "slots"), { recursive: true });
  writeFileSync(join(good, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\n\n[hermes]\nhome = "${join(dir, "hermes")}"\n`);
  writeFileSync(join(good, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(FAKE_RUNNER)}]\ndevice_class = "cpu"\n`);
  writeFileSync(join(good, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(MODEL)}\n`);
  writeFileSync(join(good, "slots/s.toml"), `profile = "fake"\nmodel = "tiny"\nport = 39401\n`);
  writeFileSync(join(good, "slots/t.toml"), `profile = "fake"\nmodel = "tiny"\nport = 39402\n`);
  broken = join(dir, "broken");
  mkdirSync(broken);
  writeFileSync(join(broken, "hal0.toml"), "[slots]\nruntime = 3\n");
  docker = join(dir, "docker");
  mkdirSync(docker);
  writeFileSync(join(docker, "hal0.toml"), `[slots]\nruntime = "docker"\ndocker_host = "unix://${join(dir, "nobody.sock")}"\n`);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("exit statuses: 2 is only 'changes'", () => {
  it("hal0 with no command prints the usage on stderr and exits 64; an unknown command is 64 with a suggestion", async () => {
    const none = await run([]);
    expect(none.code).toBe(64);
    expect(none.err).toContain("usage: hal0 <command>");
    expect(none.err).toMatch(/^ {2}64 +usage error/m);
    const typo = await run(["pln"]);
    expect(typo.code).toBe(64);
    expect(typo.err).toBe("hal0: unknown command 'pln'. Did you mean plan? (try 'hal0 --help')\n");
    expect((await run(["--help"])).code).toBe(0);
  });

  it("hal0 help COMMAND is that command's --help (stdout, 0); hal0 help alone the usage; an unknown one is 64", async () => {
    const help = await run(["help", "plan"]);
    expect(help.code).toBe(0);
    expect(help.out).toBe((await run(["plan", "--help"])).out);
    expect(help.out).toMatch(/^hal0 plan /);
    expect((await run(["help"])).out).toContain("usage: hal0 <command>");
    const typo = await run(["help", "pln"]);
    expect([typo.code, typo.err]).toEqual([64, "hal0: unknown command 'pln'. Did you mean plan? (try 'hal0 --help')\n"]);
  });

  it.each([
    ["plan"], ["apply", "--yes"], ["status"], ["down"], ["drift"], ["doctor"], ["reconcile", "--once"], ["agent", "reprovision", "hermes"], ["web"], ["serve", "--port", "0"],
  ])("a missing config folder is an error, not usage, and leaves no state behind: hal0 %s → 1 config.not_found", async (...command) => {
    const stateDir = join(dir, `state-${command.join("-")}`);
    const r = await run([...command, "--config", missing(), "--state", stateDir]);
    expect(r.code, r.err).toBe(1);
    expect(r.err).toBe(`hal0 ${command[0]}: config.not_found: config folder not found: ${missing()}\n`);
    expect(existsSync(stateDir), `hal0 ${command[0]} wrote ${stateDir}`).toBe(false);
  });

  it.each([
    ["plan"], ["apply", "--yes"], ["status"], ["down"], ["drift"], ["doctor"], ["reconcile", "--once"], ["agent", "reprovision", "hermes"], ["web"], ["serve", "--port", "0"], ["validate"],
  ])("a config folder --config did not name says where it came from and what to do: hal0 %s → 1 config.not_found", async (...command) => {
    const advice = "name the box's folder with --config DIR, or write the example box into a new folder with hal0 init DIR";
    const stateDir = join(dir, `state-env-${command.join("-")}`);
    const fromEnv = await run([...command, "--state", stateDir], { HAL0_CONFIG: missing() });
    expect(fromEnv.code, fromEnv.err).toBe(1);
    expect(fromEnv.err).toBe(`hal0 ${command[0]}: config.not_found: config folder not found: ${missing()} (the folder $HAL0_CONFIG names); ${advice}\n`);
    const home = join(dir, "no-such-home");
    const fromHome = await run([...command, "--state", stateDir], { HAL0_HOME: home });
    expect(fromHome.err).toBe(`hal0 ${command[0]}: config.not_found: config folder not found: ${join(home, "etc/hal0")} ($HAL0_HOME/etc/hal0); ${advice}\n`);
    expect(existsSync(stateDir), `hal0 ${command[0]} wrote ${stateDir}`).toBe(false);
    // hal0's own default, /etc/hal0, on a machine without it (the first `hal0 serve` of a person who left --config out).
    if (!existsSync("/etc/hal0")) {
      const line = `config folder not found: /etc/hal0 (hal0's default: no --config was given, and $HAL0_CONFIG and $HAL0_HOME are unset); ${advice}`;
      const byDefault = await run([...command, "--state", stateDir]);
      expect(byDefault.err).toBe(`hal0 ${command[0]}: config.not_found: ${line}\n`);
      // validate --json writes its own document: the same line.
      if (command[0] === "validate") expect(failureDoc((await run([...command, "--json"])).out, 1).diagnostics[0]).toMatchObject({ code: "config.not_found", summary: line });
    }
  });

  it.each([
    ["plan"], ["apply", "--yes"], ["status"], ["down"], ["drift"], ["doctor"], ["reconcile", "--once"], ["agent", "reprovision", "hermes"], ["web"], ["serve", "--port", "0"], ["validate"],
  ])("--config naming a file (the box's hal0.toml) says which folder was meant: hal0 %s → 1 config.not_found", async (...command) => {
    const folder = join(dir, "a-box");
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "hal0.toml"), "");
    const stateDir = join(dir, `state-file-${command.join("-")}`);
    const r = await run([...command, "--config", join(folder, "hal0.toml"), "--state", stateDir]);
    expect(r.code, r.err).toBe(1);
    expect(r.err).toBe(`hal0 ${command[0]}: config.not_found: config folder not found: ${join(folder, "hal0.toml")} is a file; the config is the folder that holds hal0.toml and the other files: ${folder}\n`);
    expect(existsSync(stateDir), `hal0 ${command[0]} wrote ${stateDir}`).toBe(false);
  });

  it.each([
    ["plan"], ["apply", "--yes"], ["status"], ["down"], ["drift"], ["doctor"], ["reconcile", "--once"], ["reconcile"], ["web"], ["serve", "--port", "0"], ["validate"],
  ])("--config below a file (box/hal0.toml/x) is a folder that is not there: hal0 %s → 1 config.not_found, not system.io", async (...command) => {
    const folder = join(dir, "b-box");
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "hal0.toml"), "");
    const below = join(folder, "hal0.toml", "x");
    const stateDir = join(dir, `state-below-${command.join("-")}`);
    const r = await run([...command, "--config", below, "--state", stateDir]);
    expect(r.code, r.err).toBe(1);
    expect(r.err).toBe(`hal0 ${command[0]}: config.not_found: config folder not found: ${below}\n`);
    expect(existsSync(stateDir), `hal0 ${command[0]} wrote ${stateDir}`).toBe(false);
  });

  it("validate --json with --config below a file: the validate document with its config.not_found error", async () => {
    const below = join(dir, "b-box", "hal0.toml", "x");
    mkdirSync(join(dir, "b-box"), { recursive: true });
    writeFileSync(join(dir, "b-box", "hal0.toml"), "");
    const r = await run(["validate", "--json", "--config", below]);
    expect(r.code, r.err).toBe(1);
    expect(JSON.parse(r.out)).toMatchObject({ ok: false, valid: false, error_count: 1, diagnostics: [{ code: "config.not_found" }], runners: [] });
  });

  it.each([["plan"], ["apply", "--yes"], ["status"], ["down"], ["drift"]])("an engine that does not answer is 1 runtime.unavailable: hal0 %s", async (...command) => {
    const r = await run([...command, "--config", docker, "--state", state()]);
    expect(r.code, r.err).toBe(1);
    expect(r.err).toMatch(new RegExp(`^hal0 ${command[0]}: runtime\\.unavailable: \\[slots\\] runtime = "docker": the engine at unix://.*nobody\\.sock does not answer`));
  });

  it("hal0 --version and hal0 version print the package's version and the node it runs on (exit 0); --json as a document", async () => {
    const { version } = JSON.parse(readFileSync(join(import.meta.dirname, "../../package.json"), "utf8")) as { version: string };
    expect(version).toMatch(/^\d+\.\d+\.\d+/);
    for (const args of [["--version"], ["version"]]) {
      const r = await run(args);
      expect(r.code, r.err).toBe(0);
      expect(r.out).toBe(`hal0 ${version} (node ${process.version}, ${process.platform} ${process.arch})\n`);
    }
    expect(JSON.parse((await run(["version", "--json"])).out)).toEqual({ version, node: process.version, platform: process.platform, arch: process.arch });
    expect((await run(["version", "extra"])).code).toBe(64);
    expect((await run(["--help"])).out).toMatch(/^ {2}version +hal0's version/m);
  });

  it("usage errors are 64: an extra argument, a missing option value", async () => {
    expect((await run(["plan", "extra", "--config", good])).code).toBe(64);
    expect((await run(["plan", "--config"])).code).toBe(64);
    expect((await run(["agent", "reprovision", "--config", good])).code).toBe(64);
    expect((await run(["status", "a", "b", "--config", good])).code).toBe(64);
  });

  it("an empty value is a usage error (64), never the flag left out: it fell back to a default nobody named", async () => {
    for (const args of [
      ["plan", "--config", good, "--state", ""],
      ["validate", "--config", ""],
      ["apply", "--config", good, "--state", state(), "--plan", "", "--yes"],
      ["schema", "--out", ""],
      ["init", ""],
      ["serve", "--config", good, "--state", state(), "--port="],
      ["token", "create", "--state", state(), "--agent", "x", "--scope", ""],
      ["status", "", "--config", good, "--state", state()],
    ]) {
      const r = await run(args);
      expect(`${args.join(" ")} → ${r.code}`).toBe(`${args.join(" ")} → 64`);
      expect(r.err).toMatch(/needs a value; it was given an empty one|an empty argument/);
    }
    expect(existsSync(join(dir, "hal0.toml"))).toBe(false); // init "" wrote nothing into the working folder
  });

  it("a port on the command line is written in decimal digits: 0x4A97, 1e4, -1 and 8080.0 are usage errors (64)", async () => {
    for (const [cmd, port] of [["serve", "0x4A97"], ["serve", "1e4"], ["serve", "8080.0"], ["web", "0x10"], ["web", "1e4"], ["serve", "65536"]]) {
      const r = await run([cmd!, "--config", good, "--state", state(), `--port=${port}`]);
      expect(`${cmd} --port=${port} → ${r.code}`).toBe(`${cmd} --port=${port} → 64`);
      expect(r.err).toMatch(/--port must be/);
    }
  });

  it("plan --detailed-exitcode and drift keep 2 for changes", async () => {
    expect((await run(["plan", "--detailed-exitcode", "--config", good, "--state", state()])).code).toBe(2);
    expect((await run(["plan", "--config", good, "--state", state()])).code).toBe(0);
  });
});

describe("a folder that is a file: 1 cli.not_a_folder before anything is read or written; the file system's refusals: 1 system.io, never an internal error", () => {
  /** A file where a folder is wanted, with what it held. */
  const file = () => {
    const f = join(dir, "a-file");
    writeFileSync(f, "not a folder\n");
    return f;
  };

  it.each([
    ["plan"], ["apply", "--yes"], ["status"], ["down"], ["drift"], ["doctor"], ["reconcile", "--once"], ["web"], ["token", "list"], ["agent", "approvals", "list"], ["agent", "reprovision", "hermes"],
  ])("a state folder that is a file, or lies below one (--state or $HAL0_STATE): hal0 %s", async (...command) => {
    const f = file();
    const config = command[0] === "token" ? [] : ["--config", good];
    const at = await run([...command, ...config, "--state", f]);
    expect(at.code, at.err).toBe(1);
    expect(at.out).toBe("");
    expect(at.err).toBe(`hal0 ${command[0]}: cli.not_a_folder: state folder ${f} is a file, not a folder\n`);
    const below = await run([...command, ...config], { HAL0_STATE: join(f, "state") });
    expect(below.code, below.err).toBe(1);
    expect(below.err).toBe(`hal0 ${command[0]}: cli.not_a_folder: state folder ${join(f, "state")} cannot be made: ${f} is a file, not a folder\n`);
    expect(readFileSync(f, "utf8")).toBe("not a folder\n");
  });

  it("hal0 bridge on a state folder without a database is state.not_found and makes nothing; a --config that is not there is config.not_found", async () => {
    const empty = join(dir, "bridge-no-state");
    for (const args of [["list"], ["revoke", "carol"], ["admit", "carol", "--url", "http://box.lan:8080"]]) {
      const r = await run(["bridge", ...args, "--config", good, "--state", empty]);
      expect(`${args[0]} → ${r.code}`).toBe(`${args[0]} → 1`);
      expect(r.err).toContain(`state.not_found: state folder ${empty} has no database`);
      expect(r.out).toBe("");
      expect(existsSync(empty)).toBe(false);
    }
    const served = join(dir, "bridge-state");
    expect((await run(["token", "list", "--state", served])).code).toBe(0); // a database, as a serve leaves it
    for (const args of [["admit", "carol"], ["list"]]) {
      const r = await run(["bridge", ...args, "--config", missing(), "--state", served]);
      expect(`${args[0]} → ${r.code}`).toBe(`${args[0]} → 1`);
      expect(r.err).toContain(`config.not_found: config folder not found: ${missing()}`);
      expect(r.out).toBe("");
    }
    expect((await run(["token", "list", "--json", "--state", served])).out).not.toContain("carol");
  });

  it("hal0 web on a state folder without a database (no serve ran there) is state.not_found and makes nothing; on one whose serve is not running it notes that the link needs one", async () => {
    const empty = join(dir, "web-no-state");
    for (const json of [[], ["--json"]]) {
      const r = await run(["web", ...json, "--config", good, "--state", empty]);
      expect(r.code, r.err).toBe(1);
      if (json.length === 0) expect(r.err).toBe(`hal0 web: state.not_found: state folder ${empty} has no database (hal0.db): no hal0 serve has run there, so none would take its link; name the serve's state folder with --state (or $HAL0_STATE)\n`);
      else expect(JSON.parse(r.out)).toMatchObject({ ok: false, exit_code: 1, diagnostics: [{ code: "state.not_found" }] });
      expect(r.out).not.toContain("/login?code=");
      expect(existsSync(empty)).toBe(false);
    }
    const served = join(dir, "web-state");
    expect((await run(["token", "list", "--state", served])).code).toBe(0); // a database, as a serve leaves it
    const r = await run(["web", "--config", good, "--state", served]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/\/login\?code=/);
    expect(r.err).toContain(`note: no hal0 serve runs on the state folder ${served} now: the link works at a hal0 serve started on it`);
    // Given the address, the person knows where the serve is: no note.
    expect((await run(["web", "--config", good, "--state", served, "--port", "8080"])).err).not.toContain("note:");
  });

  it("hal0 token --help names every scope the store takes and gives an operator by default", async () => {
    const help = (await run(["token", "--help"])).out.replace(/\s+/g, " ");
    for (const scope of [...SCOPES, "profile:<name>"]) expect(help).toContain(scope);
    expect(DEFAULT_SCOPES.operator).toEqual(SCOPES);
    expect(help).toContain("an operator all four");
  });

  it("hal0 token list shows a bridge token's profiles beside its scopes, as --scope takes them", async () => {
    const state = join(dir, "bridge-profiles-state");
    expect((await run(["token", "list", "--state", state])).code).toBe(0);
    const admitted = await run(["bridge", "admit", "dana", "--profiles", "coder,writer", "--url", "http://127.0.0.1:8080", "--config", good, "--state", state]);
    expect(admitted.code, admitted.err).toBe(0);
    const line = (await run(["token", "list", "--state", state])).out.split("\n").find((l) => l.includes(" dana "));
    expect(line).toMatch(/ mcp:agents,profile:coder,profile:writer +created /);
  });

  it("hal0 token list keeps its columns: the owner's four scopes and a long agent name do not push a row's dates out of line", async () => {
    const state = join(dir, "token-columns-state");
    expect((await run(["token", "create", "--agent", "a-coding-agent-with-a-long-name", "--scope", "rest", "--state", state])).code).toBe(0);
    const lines = (await run(["token", "list", "--state", state])).out.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines.some((l) => l.includes("mcp:admin,mcp:memory,rest,mcp:agents"))).toBe(true);
    expect(new Set(lines.map((l) => l.indexOf(" created "))).size, lines.join("\n")).toBe(1);
  });

  it("a token pasted where a name goes (create --operator, rotate, bridge admit) is refused, never kept as a name nor repeated", async () => {
    const state = join(dir, "secret-name-state");
    expect((await run(["token", "list", "--state", state])).code).toBe(0);
    const owner = readFileSync(join(state, "operator.token"), "utf8").trim();
    for (const args of [["token", "create", "--operator", owner], ["token", "create", "--agent", "hf_abcdefghijklmnop"], ["token", "rotate", owner], ["bridge", "admit", owner, "--config", good]]) {
      const r = await run([...args, "--state", state]);
      expect(`${args.slice(0, 2).join(" ")} → ${r.code}`).toBe(`${args.slice(0, 2).join(" ")} → 1`);
      expect(r.err).toContain("auth.name_invalid: a token name may not read as a secret");
      expect(r.out + r.err).not.toContain(owner);
    }
    const listed = (await run(["token", "list", "--all", "--json", "--state", state])).out;
    expect(JSON.parse(listed).tokens.map((t: { name: string }) => t.name)).toEqual(["owner"]);
  });

  it("status, drift and plan on a state folder that is not there (a mistyped --state) leave no folder behind (the runners' facts are kept in memory)", async () => {
    const typo = join(dir, "typo-state", "hal0");
    for (const args of [["status"], ["status", "--json"], ["drift"], ["plan"]]) {
      const r = await run([...args, "--config", good, "--state", typo]);
      expect(`${args.join(" ")} → ${r.code}`, r.err).toBe(`${args.join(" ")} → 0`);
      expect(existsSync(join(dir, "typo-state")), args.join(" ")).toBe(false);
    }
  });

  it("hal0 token revoke given a token's secret for its id names that token's id and does not print the secret (under --json neither)", async () => {
    const state = join(dir, "revoke-secret-state");
    expect((await run(["token", "list", "--state", state])).code).toBe(0);
    const owner = readFileSync(join(state, "operator.token"), "utf8").trim();
    const id = JSON.parse((await run(["token", "list", "--json", "--state", state])).out).tokens[0].id;
    for (const json of [[], ["--json"]]) {
      const r = await run(["token", "revoke", owner, ...json, "--state", state]);
      expect(r.code).toBe(1);
      expect(r.out + r.err).toContain(`auth.token_not_found`);
      expect(r.out + r.err).toContain(`it is the secret of ${id}: revoke that id`);
      expect(r.out + r.err).not.toContain(owner);
    }
    // One no token has: not repeated either.
    const r = await run(["token", "revoke", "hal0_op_abcdefghijklmnopqrstuvwxyz012345", "--state", state]);
    expect([r.code, r.err.includes("reads as a token's secret"), r.err.includes("abcdefgh")]).toEqual([1, true, false]);
  });

  it("hal0 token revoke given a name for the id names that name's live token ids and says to revoke them or rotate the name; nothing is revoked", async () => {
    const state = join(dir, "revoke-name-state");
    for (let i = 0; i < 2; i++) expect((await run(["token", "create", "--agent", "ci", "--state", state])).code).toBe(0);
    const ids = JSON.parse((await run(["token", "list", "--json", "--state", state])).out).tokens.filter((t: { name: string }) => t.name === "ci").map((t: { id: string }) => t.id).sort();
    expect(ids).toHaveLength(2);
    const r = await run(["token", "revoke", "ci", "--state", state]);
    expect(r.code).toBe(1);
    expect(r.err).toContain("auth.token_not_found: no token has the id ci: revoke takes a token's id, and ci is a name, of ");
    for (const id of ids) expect(r.err).toContain(`${id} (agent)`);
    expect(r.err).toContain("or rotate the name (hal0 token rotate ci)");
    const json = await run(["token", "revoke", "ci", "--json", "--state", state]);
    expect(JSON.parse(json.out)).toMatchObject({ ok: false, exit_code: 1, diagnostics: [{ code: "auth.token_not_found" }] });
    expect(JSON.parse((await run(["token", "list", "--json", "--state", state])).out).tokens.filter((t: { name: string; revoked_at: string | null }) => t.name === "ci" && t.revoked_at === null)).toHaveLength(2);
    // A name nobody has is said as before.
    expect((await run(["token", "revoke", "nobody", "--state", state])).err).toBe("hal0 token: auth.token_not_found: no token nobody\n");
  });

  it("a state database SQLite cannot open or use (a folder where hal0.db goes, a file that is no database) is system.io naming it, for every command that opens it", async () => {
    const folder = mkdtempSync(join(dir, "db-folder-"));
    mkdirSync(join(folder, "hal0.db"));
    const garbage = mkdtempSync(join(dir, "db-garbage-"));
    writeFileSync(join(garbage, "hal0.db"), Buffer.alloc(8192, 0x5a));
    for (const [where, reason] of [[folder, /could not open the database .*hal0\.db: .*\(SQLITE_CANTOPEN/], [garbage, /could not open the database .*hal0\.db: it is not a SQLite database \(SQLITE_NOTADB/]] as const) {
      for (const args of [["token", "list", "--state", where], ["agent", "approvals", "list", "--config", good, "--state", where], ["bridge", "list", "--config", good, "--state", where]]) {
        const r = await run(args);
        expect(`${args.join(" ")} → ${r.code}`).toBe(`${args.join(" ")} → 1`);
        expect(r.err).toMatch(/system\.io: /);
        expect(r.err).toMatch(reason);
        expect(r.err).not.toMatch(/internal error|    at /);
      }
    }
  });

  it("plan --json with a state folder that is a file: one JSON document with the diagnostic; validate, which only reads the runner cache there, still validates", async () => {
    const f = file();
    const r = await run(["plan", "--json", "--config", good, "--state", f]);
    expect(r.code).toBe(1);
    expect(r.err).toBe("");
    expect(failureDoc(r.out, 1).diagnostics).toEqual([expect.objectContaining({ code: "cli.not_a_folder", summary: `state folder ${f} is a file, not a folder`, file: null })]);
    const v = await run(["validate", "--config", good, "--state", f]);
    expect(v.code, v.err).toBe(0);
  });

  it("a folder hal0 cannot create on a read-only mount is system.io naming EROFS and the folder, not node's ENOENT", async () => {
    const ro = join(dir, "read-only");
    mkdirSync(ro);
    // mode=755: a tmpfs root is 1777 by default, a shared folder hal0 refuses as a state folder (state.shared).
    execFileSync("mount", ["-t", "tmpfs", "-o", "ro,size=1m,mode=755", "tmpfs", ro]);
    try {
      const init = await run(["init", join(ro, "box")]);
      expect(init.code, init.err).toBe(1);
      expect(init.err).toBe(`hal0 init: system.io: could not mkdir ${join(ro, "box")}: ${ro} is on a read-only file system (EROFS)\n`);
      const schema = await run(["schema", "--out", join(ro, "a", "schemas")]);
      expect(schema.code, schema.err).toBe(1);
      expect(schema.err).toMatch(new RegExp(`^hal0 schema: system\\.io: could not mkdir ${ro}/a.*: ${ro} is on a read-only file system \\(EROFS\\)\n$`));
      // A state folder there: the file the write was for is named, not its temp file.
      const apply = await run(["apply", "--yes", "--config", good, "--state", ro]);
      expect(apply.code, apply.err).toBe(1);
      // … with the state folder it is in, where that came from, and what to do.
      expect(apply.err).toBe(`hal0 apply: system.io: could not write ${ro}/apply.lock: read-only file system (EROFS); hal0 reads and writes its state folder ${ro} (--state): remount it read-write, or name another with --state DIR\n`);
      const home = await run(["apply", "--yes", "--config", good], { HAL0_HOME: ro });
      expect(home.err).toBe(`hal0 apply: system.io: could not mkdir ${ro}/var: ${ro} is on a read-only file system (EROFS); hal0 reads and writes its state folder ${ro}/var/lib/hal0 ($HAL0_HOME/var/lib/hal0): remount it read-write, or name another with --state DIR\n`);
    } finally {
      execFileSync("umount", [ro]);
    }
  });

  it.runIf(process.getuid?.() === 0)("a state folder the user may not write says where it came from and what to do: hal0's default /var/lib/hal0 (no --state), one of root's named by --state", async () => {
    // A person's first start: a box of their own, --state left out, so hal0's default, /var/lib/hal0, which is root's.
    const own = join(dir, "nobody");
    mkdirSync(join(own, "box"), { recursive: true });
    writeFileSync(join(own, "box", "hal0.toml"), "");
    for (const d of [dir, own, join(own, "box")]) chmodSync(d, 0o755);
    execFileSync("chown", ["-R", "nobody:", own]);
    const asNobody = (...args: string[]) => spawnSync("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", process.execPath, hal0ForNobody(), ...args], {
      cwd: own, encoding: "utf8", env: { PATH: process.env.PATH!, HOME: own },
    });
    // Not there (mkdir refused), or made by root before (a state file in it unreadable, or a file refused): the same advice.
    const there = existsSync("/var/lib/hal0");
    const first = asNobody("apply", "--yes", "--config", "box");
    expect(first.status, first.stderr).toBe(1);
    expect(first.stderr).toMatch(there
      ? /^hal0 apply: system\.io: (could not \w+|cannot read the state file) \/var\/lib\/hal0\/\S+: permission denied \(EACCES\); /
      : /^hal0 apply: system\.io: could not mkdir \/var\/lib\/hal0: permission denied \(EACCES\); /);
    expect(first.stderr).toContain("; /var/lib/hal0 is hal0's default state folder (no --state was given, and $HAL0_STATE and $HAL0_HOME are unset): name one you may write with --state DIR (hal0 init's next steps use DIR/.state)\n");
    expect(existsSync("/var/lib/hal0")).toBe(there);
    // A state folder root made (a `sudo hal0 serve` once): the lock's temp file is named as the lock it was for.
    const roots = join(dir, "roots-state");
    mkdirSync(roots, { mode: 0o700 });
    const serve = asNobody("serve", "--config", "box", "--state", roots, "--port", "0");
    expect(serve.status, serve.stderr).toBe(1);
    expect(serve.stderr).toBe(`hal0 serve: system.io: could not write ${roots}/serve.lock: permission denied (EACCES); hal0 reads and writes its state folder ${roots} (--state): run hal0 as a user who may, such as its owner, or name another with --state DIR\n`);
  });

  it("plan --json --out on a read-only mount: one JSON document on stdout, the system.io failure, not the plan and then the failure", async () => {
    const ro = join(dir, "read-only-out");
    mkdirSync(ro);
    execFileSync("mount", ["-t", "tmpfs", "-o", "ro,size=1m,mode=755", "tmpfs", ro]);
    try {
      const r = await run(["plan", "--json", "--out", join(ro, "plan.json"), "--config", good, "--state", state()]);
      expect(r.code, r.err).toBe(1);
      expect(failureDoc(r.out, 1).diagnostics).toEqual([expect.objectContaining({ code: "system.io", summary: expect.stringContaining(`${ro}/plan.json: read-only file system (EROFS)`) })]);
      const text = await run(["plan", "--out", join(ro, "plan.json"), "--config", good, "--state", state()]);
      expect(text.code, text.err).toBe(1);
      expect(text.out).toBe("");
      expect(text.err).toMatch(/^hal0 plan: system\.io: could not write .*plan\.json: read-only file system \(EROFS\)\n$/);
    } finally {
      execFileSync("umount", [ro]);
    }
  });

  it("schema --out: a file is cli.not_a_folder; a folder where a schema file goes is system.io naming both paths, with no temporary file left", async () => {
    const f = file();
    const r = await run(["schema", "--out", f]);
    expect(r.code).toBe(1);
    expect(r.err).toBe(`hal0 schema: cli.not_a_folder: --out ${f} is a file, not a folder\n`);
    const out = join(dir, "schemas");
    mkdirSync(join(out, "slot.schema.json"), { recursive: true });
    const refused = await run(["schema", "--out", out]);
    expect(refused.code, refused.err).toBe(1);
    expect(refused.err).toMatch(new RegExp(`^hal0 schema: system\\.io: could not rename ${out}/\\.slot\\.schema\\.json\\.[^ ]+\\.tmp to ${out}/slot\\.schema\\.json: illegal operation on a directory \\(EISDIR\\)\n$`));
    expect(readdirSync(out).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  it("apply --plan naming a folder or a missing file is 1 plan.invalid saying which, and what the flag names", async () => {
    const folder = await run(["apply", "--plan", dir, "--yes", "--config", good, "--state", state()]);
    expect(folder.code, folder.err).toBe(1);
    expect(folder.err).toBe(`hal0 apply: plan.invalid: cannot read ${dir}: it is a folder (it names a plan saved by hal0 plan --out FILE)\n`);
    const gone = await run(["apply", "--plan", join(dir, "no-plan.json"), "--yes", "--config", good, "--state", state()]);
    expect(gone.err).toBe(`hal0 apply: plan.invalid: cannot read ${join(dir, "no-plan.json")}: no such file (it names a plan saved by hal0 plan --out FILE)\n`);
  });

  it("apply --plan naming a fifo nobody writes, a device or a socket is 1 plan.invalid at once, before the box is opened; a plan handed on a pipe (/dev/stdin) is read", async () => {
    const fifo = join(dir, "plan.fifo");
    execFileSync("mkfifo", [fifo]);
    const bin = join(import.meta.dirname, "../../bin/hal0.js");
    // Its own process, bounded: before the fix it waited for a writer for ever (the bound ends it, and the test fails on its status).
    const hal0 = (args: string[]) => spawnSync(process.execPath, [bin, ...args], { cwd: dir, encoding: "utf8", timeout: 30_000 });
    for (const [file, why] of [[fifo, "it is a named pipe (a fifo), not a file: reading it would wait for a writer for as long as none comes"], ["/dev/zero", "it is a device, not a file"]] as const) {
      const stateFolder = join(dir, "state-plan-fifo");
      const refused = hal0(["apply", "--plan", file, "--yes", "--config", good, "--state", stateFolder]);
      expect([refused.status, refused.stderr]).toEqual([1, `hal0 apply: plan.invalid: cannot read ${file}: ${why} (it names a plan saved by hal0 plan --out FILE; a plan on a pipe: --plan /dev/stdin)\n`]);
      expect(existsSync(stateFolder), file).toBe(false);
    }
    // A pipe the shell hands over is still read: not a plan here, so plan.invalid for what it holds, not for what it is.
    // A shell's pipe in front of it (node's own stdin for a child is a socket pair, which /dev/stdin cannot open).
    const piped = spawnSync("sh", ["-c", `printf '{}' | "$0" "$@"`, process.execPath, bin, "apply", "--plan", "/dev/stdin", "--yes", "--config", good, "--state", join(dir, "state-plan-stdin")], { cwd: dir, encoding: "utf8", timeout: 30_000 });
    expect([piped.status, piped.stderr]).toEqual([1, "hal0 apply: plan.invalid: /dev/stdin is not a hal0 plan (format_version 1)\n"]);
  });

  it("plan --out naming a folder, or a file in a folder that is missing or a file, is 1 cli.not_a_file before the box is observed: nothing printed, nothing written", async () => {
    const parent = join(dir, "plan-out");
    mkdirSync(join(parent, "taken"), { recursive: true });
    const f = file();
    const cases: Array<[string, string]> = [
      [join(parent, "taken"), `--out ${join(parent, "taken")} is a folder; name the file to write`],
      [join(parent, "missing", "plan.json"), `--out ${join(parent, "missing", "plan.json")} cannot be written: its folder ${join(parent, "missing")} does not exist`],
      [join(f, "plan.json"), `--out ${join(f, "plan.json")} cannot be written: ${f} is a file, not a folder`],
    ];
    for (const [i, [out, message]] of cases.entries()) {
      const stateFolder = join(dir, `state-plan-out-${i}`);
      const r = await run(["plan", "--out", out, "--config", good, "--state", stateFolder]);
      expect(r.code, r.err).toBe(1);
      expect(r.err).toBe(`hal0 plan: cli.not_a_file: ${message}\n`);
      expect(r.out).toBe("");
      expect(existsSync(stateFolder), out).toBe(false);
    }
    expect(readdirSync(parent)).toEqual(["taken"]);
    expect(readdirSync(join(parent, "taken"))).toEqual([]);
    // A file that exists is replaced, as before.
    const plan = join(parent, "plan.json");
    writeFileSync(plan, "old\n");
    const ok = await run(["plan", "--out", plan, "--config", good, "--state", state()]);
    expect(ok.code, ok.err).toBe(0);
    expect(JSON.parse(readFileSync(plan, "utf8")).format_version).toBe(1);
  });

  it("plan --out naming a pipe, or a link to one (as /dev/stdout is), is 1 cli.not_a_file: the pipe and its link are left as they are, not replaced by a file", async () => {
    const parent = join(dir, "plan-out-pipe");
    mkdirSync(parent);
    const pipe = join(parent, "fifo");
    execFileSync("mkfifo", [pipe]);
    const link = join(parent, "stdout");
    symlinkSync(pipe, link);
    for (const out of [pipe, link]) {
      const r = await run(["plan", "--out", out, "--config", good, "--state", state()]);
      expect(r.code, r.err).toBe(1);
      expect(r.err).toBe(`hal0 plan: cli.not_a_file: --out ${out} is not a regular file (a device, a pipe or a socket); the plan is saved by replacing its file whole, so name a regular file (--json prints the plan on stdout)\n`);
      expect(r.out).toBe("");
    }
    expect(lstatSync(pipe).isFIFO()).toBe(true);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readdirSync(parent).sort()).toEqual(["fifo", "stdout"]);
  });

  it("plan --out naming a link to a regular file writes that file and keeps the link; a link through a process's open files (/dev/stdout with stdout sent to a file) is 1 cli.not_a_file, left a link", async () => {
    const parent = join(dir, "plan-out-link");
    mkdirSync(parent);
    const real = join(parent, "real.json");
    writeFileSync(real, "old\n");
    const link = join(parent, "plan.json");
    symlinkSync("real.json", link);
    const ok = await run(["plan", "--out", link, "--config", good, "--state", state()]);
    expect(ok.code, ok.err).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(JSON.parse(readFileSync(real, "utf8")).format_version).toBe(1);
    // As /dev/stdout -> /proc/self/fd/1 is when stdout goes to a file: the link leads, through /proc, to a regular file.
    const fd = openSync(join(parent, "captured"), "w");
    try {
      const stdout = join(parent, "stdout");
      symlinkSync(`/proc/${process.pid}/fd/${fd}`, stdout);
      expect(statSync(stdout).isFile()).toBe(true);
      const r = await run(["plan", "--out", stdout, "--config", good, "--state", state()]);
      expect(r.code, r.err).toBe(1);
      expect(r.err).toBe(`hal0 plan: cli.not_a_file: --out ${stdout} is not a regular file (a device, a pipe or a socket); the plan is saved by replacing its file whole, so name a regular file (--json prints the plan on stdout)\n`);
      expect(lstatSync(stdout).isSymbolicLink()).toBe(true);
      expect(readFileSync(join(parent, "captured"), "utf8")).toBe("");
    } finally {
      closeSync(fd);
    }
    expect(readdirSync(parent).sort()).toEqual(["captured", "plan.json", "real.json", "stdout"]);
  });
});

describe("--json prints JSON, on failure too", () => {
  it("plan --json on an invalid tree: the tree's diagnostics, as validate --json has them, exit 1; nothing on stderr", async () => {
    const r = await run(["plan", "--json", "--config", broken, "--state", state()]);
    expect(r.code).toBe(1);
    expect(r.err).toBe("");
    const doc = failureDoc(r.out, 1);
    expect(doc.diagnostics).toEqual([expect.objectContaining({ code: "config.invalid_value", severity: "error", file: "hal0.toml", line: 2, column: 11, path: ["slots", "runtime"] })]);
  });

  it("reconcile --json prints JSON lines, one report per sweep: a failure (config.not_found, a usage error) is one line too", async () => {
    for (const args of [["reconcile", "--json", "--config", missing()], ["reconcile", "--once", "--json", "--config", missing()], ["reconcile", "--json", "--bogus"]]) {
      const r = await run([...args, "--state", state()]);
      const lines = r.out.trim().split("\n");
      expect(lines, r.out).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({ ok: false });
    }
  });

  it("plan without --json on an invalid tree prints the diagnostics on stderr (exit 1)", async () => {
    const r = await run(["plan", "--config", broken, "--state", state()]);
    expect(r.code).toBe(1);
    expect(r.out).toBe("");
    expect(r.err).toContain("hal0.toml:2:11: error[config.invalid_value]");
  });

  it.each([["plan"], ["status"], ["drift"], ["doctor"], ["reconcile", "--once"]])("hal0 %s --json with a missing config folder: {ok: false, diagnostics: [config.not_found]} with null positions", async (...command) => {
    const r = await run([...command, "--json", "--config", missing(), "--state", state()]);
    expect(r.code).toBe(1);
    const doc = failureDoc(r.out, 1);
    expect(doc.diagnostics).toEqual([{ code: "config.not_found", severity: "error", summary: `config folder not found: ${missing()}`, detail: `config folder not found: ${missing()}`, file: null, line: null, column: null, path: [], related: [] }]);
  });

  it("hal0 status --json on a broken tree shows what runs (nothing here), says the tree is not valid and carries its errors; exit 0", async () => {
    const r = await run(["status", "--json", "--config", broken, "--state", state()]);
    expect(r.code, r.err).toBe(0);
    const doc = JSON.parse(r.out);
    expect(doc).toMatchObject({ slots: [], tree_valid: false });
    expect(doc.diagnostics[0]).toMatchObject({ code: "config.invalid_value", file: "hal0.toml", line: 2 });
    expect(JSON.parse((await run(["status", "--json", "--config", good, "--state", state()])).out)).toMatchObject({ tree_valid: true });
  });

  it.each([["plan"], ["status"], ["drift"]])("hal0 %s --json on a broken tree and with an engine that does not answer", async (...command) => {
    if (command[0] !== "status") {
      const tree = await run([...command, "--json", "--config", broken, "--state", state()]);
      expect(failureDoc(tree.out, 1).diagnostics[0]).toMatchObject({ code: "config.invalid_value", file: "hal0.toml", line: 2 });
    }
    const engine = await run([...command, "--json", "--config", docker, "--state", state()]);
    expect(engine.code).toBe(1);
    expect(failureDoc(engine.out, 1).diagnostics[0]).toMatchObject({ code: "runtime.unavailable", file: null });
  });

  it("a usage error under --json is a cli.usage document, exit 64", async () => {
    const r = await run(["status", "--json", "--confg", good]);
    expect(r.code).toBe(64);
    expect(failureDoc(r.out, 64).diagnostics[0]).toMatchObject({ code: "cli.usage", summary: "Unknown option '--confg'. Did you mean --config?" });
  });

  it("status SLOT --json for an unknown slot: slot.not_found", async () => {
    const r = await run(["status", "nope", "--json", "--config", good, "--state", state()]);
    expect(r.code).toBe(1);
    expect(failureDoc(r.out, 1).diagnostics[0]).toMatchObject({ code: "slot.not_found" });
  });

  it("a secret typed where a name goes is not printed back, in text or under --json (as the API masks its error messages)", async () => {
    const secret = "hal0_op_AbCdEfGhIjKlMnOpQrStUvWx";
    for (const args of [["status", secret, "--config", good, "--state", state()], ["status", secret, "--json", "--config", good, "--state", state()], [secret], [secret, "--json"], ["status", `--${secret}`]]) {
      const r = await run(args);
      expect(r.code, args.join(" ")).not.toBe(0);
      expect(`${r.out}${r.err}`, args.join(" ")).not.toContain(secret);
      expect(`${r.out}${r.err}`, args.join(" ")).toContain("[redacted]");
    }
  });

  it("doctor --json carries the tree's diagnostics beside its rows", async () => {
    const r = await run(["doctor", "--json", "--config", broken, "--state", state()]);
    expect(r.code).toBe(1);
    const doc = JSON.parse(r.out);
    expect(doc.ok).toBe(false);
    expect(doc.rows.find((x: { check: string }) => x.check === "tree").status).toBe("fail");
    expect(doc.diagnostics).toEqual([expect.objectContaining({ code: "config.invalid_value", file: "hal0.toml", line: 2 })]);
  });
});

describe("an unknown option names the closest known one (exit 64), for every command", () => {
  it.each([
    [["validate", "--confg", "x"], "--confg", "--config"],
    [["plan", "--confg", "x"], "--confg", "--config"],
    [["plan", "--detailed-exitcod"], "--detailed-exitcod", "--detailed-exitcode"],
    [["apply", "--yess"], "--yess", "--yes"],
    [["status", "--jsno"], "--jsno", "--json"],
    [["down", "--stat", "x"], "--stat", "--state"],
    [["reconcile", "--onse"], "--onse", "--once"],
    [["drift", "--confg", "x"], "--confg", "--config"],
    [["agent", "reprovision", "hermes", "--repiar"], "--repiar", "--repair"],
    [["agent", "approvals", "list", "--onlly", "x"], "--onlly", "--only"],
    [["doctor", "--confg", "x"], "--confg", "--config"],
    [["serve", "--no-reconcil"], "--no-reconcil", "--no-reconcile"],
    [["web", "--hots", "x"], "--hots", "--host"],
    [["schema", "--ot", "x"], "--ot", "--out"],
    [["token", "list", "--al"], "--al", "--all"],
    [["version", "--jsn"], "--jsn", "--json"],
  ])("hal0 %j", async (args, option, hit) => {
    const r = await run(args);
    expect(r.code, r.err).toBe(64);
    expect(r.err).toBe(`hal0 ${args[0]}: Unknown option '${option}'. Did you mean ${hit}?\n`);
  });

  it("with nothing close, points at --help", async () => {
    const r = await run(["plan", "--zzzzzz"]);
    expect(r.code).toBe(64);
    expect(r.err).toBe("hal0 plan: Unknown option '--zzzzzz'. See --help for the options.\n");
  });

  it.each([
    [["serve", "--port", "0", "--config", "no-such-config", "--state=~/box-state"], "--state", "~/box-state"],
    [["apply", "--yes", "--config=~/box"], "--config", "~/box"],
    [["plan", "--config", "good", "--out=~/plan.json"], "--out", "~/plan.json"],
    [["service", "install", "--print", "--unit-dir=~"], "--unit-dir", "~"],
    [["init", "~/mybox"], "hal0 init", "~/mybox"],
  ])("a path whose '~' the shell left (after '=', quoted) is a usage error, and no folder named ~ is made here: hal0 %j", async (args, what, value) => {
    const r = await run(args);
    expect(r.code, r.err).toBe(64);
    expect(r.err).toBe(`hal0 ${args[0]}: ${what} was given '${value}', whose '~' the shell did not expand (it does not after '=' or inside quotes): write ${what} ${value}, or the full path (./${value} for a folder of that name here)\n`);
    expect(existsSync(join(dir, "~"))).toBe(false);
  });

  it("a folder whose name starts with a dash is named, with how to pass it: after '--' for an argument, --config=-box for an option's value", async () => {
    const init = await run(["init", "-box"]);
    expect(init.code).toBe(64);
    expect(init.err).toBe("hal0 init: Unknown option '-b' (in '-box'). See --help for the options; an argument that starts with '-' goes after '--': -- -box\n");
    expect(existsSync(join(dir, "-box"))).toBe(false);
    const value = await run(["validate", "--config", "-box"]);
    expect(value.code).toBe(64);
    expect(value.err).toBe("hal0 validate: option --config was given '-box', which starts with a dash: if that is its value, write --config=-box (a path also as --config ./-box); else give --config its value\n");
    // The value left out before another option: the same line names it.
    const json = await run(["status", "--config", "--json"]);
    expect(json.code).toBe(64);
    expect(failureDoc(json.out, 64).diagnostics[0]).toMatchObject({ code: "cli.usage", summary: "option --config was given '--json', which starts with a dash: if that is its value, write --config=--json; else give --config its value" });
    // Both ways the lines name work.
    expect((await run(["init", "--", "-box"])).code).toBe(0);
    const copy = await run(["validate", "--config=-box"]);
    expect(copy.code, copy.err).toBe(0);
    expect((await run(["validate", "--config", "./-box"])).code).toBe(copy.code);
  });
});

describe("hal0 status: one line per slot; the whole error in --json and in status SLOT", () => {
  const STACK = [
    "Error: the runner exited with status 1 before /health answered: llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' has wrong shape",
    ...Array.from({ length: 13 }, (_, i) => `    at frame${i} (/usr/lib/hal0/dist/reconciler/drivers/process.js:${100 + i}:7)`),
  ].join("\n");
  let failedState: string;

  beforeAll(() => {
    failedState = join(dir, "failed-state");
    mkdirSync(failedState, { recursive: true });
    const outcome = { ok: false, action: "create", code: "slot.spawn_failed", error: STACK, at: "2025-01-01T00:00:00.000Z" };
    writeFileSync(join(failedState, "outcomes.json"), JSON.stringify({ s: outcome }));
  });

  it("the table has one line per slot: the error's code and first line, cut at ~80 characters", async () => {
    const r = await run(["status", "--config", good, "--state", failedState]);
    expect(r.code, r.err).toBe(0);
    const table = r.out.split("\n\n")[0]!.split("\n");
    expect(table).toHaveLength(3);
    expect(table[0]).toMatch(/^SLOT +STATE +PID +PORT +SPEC +NOTE$/);
    const s = table.find((l) => l.startsWith("s "))!;
    expect(s).toMatch(/^s +error +- +39401 +- +Stalled: slot\.spawn_failed; Degraded: slot\.spawn_failed; slot\.spawn_failed: Error: the runner exited/);
    expect(s).not.toContain("at frame");
    const note = s.slice(s.indexOf("slot.spawn_failed: Error"));
    expect(note.length).toBeLessThanOrEqual(80);
    expect(note.endsWith("…")).toBe(true);
    expect(r.out).not.toContain("at frame0");
    expect(r.out).toContain("'hal0 status SLOT' shows one in full");
  });

  it("--json keeps the whole text", async () => {
    const r = await run(["status", "--json", "--config", good, "--state", failedState]);
    expect(r.code).toBe(0);
    const s = (JSON.parse(r.out).slots as Array<{ name: string; last_error: string }>).find((x) => x.name === "s")!;
    expect(s.last_error).toBe(`slot.spawn_failed: ${STACK}`);
  });

  it("status SLOT shows state, pid, port, spec hash, conditions and the full last error", async () => {
    const r = await run(["status", "s", "--config", good, "--state", failedState]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^slot +s$/m);
    expect(r.out).toMatch(/^state +error$/m);
    expect(r.out).toMatch(/^pid +-$/m);
    expect(r.out).toMatch(/^port +39401$/m);
    expect(r.out).toMatch(/^spec +-$/m);
    expect(r.out).toMatch(/^desired +sha256:[0-9a-f]{64}$/m);
    expect(r.out).toMatch(/^last step create failed at 2025-01-01T00:00:00.000Z$/m);
    expect(r.out).toMatch(/^ {2}Stalled +True +slot\.spawn_failed /m);
    expect(r.out.slice(r.out.indexOf("last error:\n"))).toBe(`last error:\n${`slot.spawn_failed: ${STACK}`.split("\n").map((l) => `  ${l}`).join("\n")}\n`);
    const json = await run(["status", "s", "--json", "--config", good, "--state", failedState]);
    const slot = JSON.parse(json.out).slot;
    expect(slot).toMatchObject({ name: "s", state: "error", pid: null, port: 39401, spec_hash: null, last_error: `slot.spawn_failed: ${STACK}`, last_outcome: { code: "slot.spawn_failed", action: "create" } });
    expect(slot.conditions.map((c: { type: string }) => c.type)).toEqual(["Ready", "Reconciling", "Stalled", "Degraded"]);
  });

  it("an unknown SLOT is 1 slot.not_found, naming the closest slot", async () => {
    const r = await run(["status", "ss", "--config", good, "--state", failedState]);
    expect(r.code).toBe(1);
    expect(r.err).toBe("hal0 status: slot.not_found: no slot 'ss'. Did you mean s? (slots: s, t)\n");
  });
});

describe("hal0 agent reprovision hermes without Hermes", () => {
  it("read-only, no Hermes home: a warning line, exit 0, nothing written", async () => {
    const st = join(dir, "agent-state-1");
    const r = await run(["agent", "reprovision", "hermes", "--config", good, "--state", st]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toBe(`! hermes: hermes.not_found: no Hermes home at ${join(dir, "hermes")} (install Hermes, or set [hermes] home); nothing to wire\n`);
    expect(r.err).toBe("");
    expect(existsSync(st)).toBe(false);
    expect(existsSync(join(dir, "hermes"))).toBe(false);
  });

  it("--repair with no Hermes home is 1 hermes.not_found, and writes nothing", async () => {
    const st = join(dir, "agent-state-2");
    const r = await run(["agent", "reprovision", "hermes", "--repair", "--config", good, "--state", st]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/^hal0 agent: hermes\.not_found: no Hermes home at .*hermes/);
    expect(existsSync(st)).toBe(false);
    expect(existsSync(join(dir, "hermes"))).toBe(false);
  });

  it("a home without a default profile: a warning (exit 0) read-only, hermes.not_found (exit 1) with --repair", async () => {
    mkdirSync(join(dir, "hermes", "profiles"), { recursive: true });
    try {
      const look = await run(["agent", "reprovision", "hermes", "--config", good, "--state", state()]);
      expect(look.code, look.err).toBe(0);
      expect(look.out).toBe(`! hermes: hermes.not_found: no default Hermes profile at ${join(dir, "hermes", "config.yaml")}; nothing to wire\n`);
      const repair = await run(["agent", "reprovision", "hermes", "--repair", "--config", good, "--state", state()]);
      expect(repair.code).toBe(1);
      expect(repair.err).toBe(`hal0 agent: hermes.not_found: no default Hermes profile at ${join(dir, "hermes", "config.yaml")}; hal0 does not create Hermes' files\n`);
      expect(existsSync(join(dir, "hermes", "config.yaml"))).toBe(false);
    } finally {
      rmSync(join(dir, "hermes"), { recursive: true, force: true });
    }
  });
});
