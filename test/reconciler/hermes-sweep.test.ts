import { chmodSync, chownSync, existsSync, lchownSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { compile, loadTree } from "../../compiler/index.js";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { executePlan } from "../../reconciler/execute.js";
import { observe } from "../../reconciler/observe.js";
import { planChanges } from "../../reconciler/plan.js";
import { StateStore } from "../../reconciler/state.js";
import { Sweeper } from "../../reconciler/sweep.js";
import { parse } from "yaml";
import { openDb, type Db } from "../../server/db.js";
import { hermesCredentials as credentialsOf } from "../../server/identity/hermes-credentials.js";
import { TokenStore } from "../../server/identity/tokens.js";
import { planJson } from "../../reconciler/format.js";
import { applyHal0Keys, HermesYamlError } from "../../reconciler/hermes-wire.js";
import { deadPid } from "./kill-write.js";

/** A box with no slots and a Hermes home with named profiles, swept in process. */
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function box(host = "0.0.0.0", withTokens = false) {
  const dir = mkdtempSync(join(tmpdir(), "hal0-hermes-sweep-"));
  dirs.push(dir);
  const root = join(dir, "etc");
  const home = join(dir, "hermes");
  mkdirSync(root);
  writeFileSync(join(root, "hal0.toml"), `[server]\nhost = "${host}"\n\n[hermes]\nhome = "../hermes"\n`);
  for (const p of ["a", "b"]) {
    mkdirSync(join(home, "profiles", p), { recursive: true });
    writeFileSync(join(home, "profiles", p, "config.yaml"), `# profile ${p}\nmodel:\n  default: x   # keep\n`);
  }
  const state = new StateStore(join(dir, "state"));
  // The credentials as `hal0 serve` injects them: a real TokenStore over <state>/hal0.db.
  const db = withTokens ? openDb(state.dir) : undefined;
  if (db) dbs.push(db);
  const tokens = db ? new TokenStore(db, state.dir) : undefined;
  const hermesCredentials = tokens ? credentialsOf(tokens) : undefined;
  const sweeper = new Sweeper({ root, state, driverFor: async () => new ProcessDriver({ stateDir: state.dir }), hermesCredentials });
  return { dir, home, state, sweeper, tokens, hermesCredentials, file: (p: string) => join(home, "profiles", p, "config.yaml") };
}

const dbs: Db[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) db.close();
});

/** The bearer of one of hal0's servers in a profile file, as Hermes will send it. */
function bearerIn(file: string, id: "hal0-admin" | "hal0-memory"): string | undefined {
  const headers = (parse(readFileSync(file, "utf8")) as { mcp_servers?: Record<string, { headers?: Record<string, string> }> }).mcp_servers?.[id]?.headers;
  return /^Bearer (\S+)$/.exec(headers?.Authorization ?? "")?.[1];
}

function mtimes(dir: string): string[] {
  return readdirSync(dir, { recursive: true }).map(String).sort().map((p) => `${p} ${statSync(join(dir, p)).mtimeMs}`);
}

describe("Hermes profiles in the sweep", () => {
  it("wires every named profile ([hermes] home relative to the config folder; a wildcard [server] host is reached on loopback), then a sweep with nothing to do writes nothing", async () => {
    const { dir, sweeper, file } = box();
    const first = await sweeper.sweep();
    expect(first.outcome).toBe("converged");
    expect(first.results.map((r) => `${r.address} ${r.ok}`)).toEqual(["hermes.a true", "hermes.b true", "settings true"]);
    expect(readFileSync(file("a"), "utf8")).toContain("url: http://127.0.0.1:8080/mcp/admin");
    expect(readFileSync(file("a"), "utf8").startsWith("# profile a\nmodel:\n  default: x   # keep\nmcp_servers:\n  hal0-admin:\n")).toBe(true);
    const before = mtimes(dir);
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
    expect(mtimes(dir)).toEqual(before);
  });

  it("undoes a hand edit on the next sweep", async () => {
    const { sweeper, file } = box("127.0.0.1");
    await sweeper.sweep();
    const wired = readFileSync(file("b"), "utf8");
    writeFileSync(file("b"), wired.replace("timeout: 60", "timeout: 5"));
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.b")).toMatchObject({ action: "update", reason: "drifted", changed_paths: ["mcp_servers.hal0-admin.timeout"] });
    expect(readFileSync(file("b"), "utf8")).toBe(wired);
  });

  it("hal0's entries removed by hand are drift: written back (drifted) under enforce, left out and reported under drift = \"warn\"", async () => {
    const { dir, sweeper, file } = box("127.0.0.1");
    await sweeper.sweep();
    const wired = readFileSync(file("b"), "utf8");
    const unwired = wired.slice(0, wired.indexOf("mcp_servers:"));
    writeFileSync(file("b"), unwired);
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.b")).toMatchObject({ action: "update", reason: "drifted", changed_paths: ["mcp_servers.hal0-admin", "mcp_servers.hal0-memory"] });
    expect(readFileSync(file("b"), "utf8")).toBe(wired);
    writeFileSync(join(dir, "etc", "hal0.toml"), `${readFileSync(join(dir, "etc", "hal0.toml"), "utf8")}\n[reconcile]\ndrift = "warn"\n`);
    await sweeper.sweep();
    writeFileSync(file("b"), unwired);
    const warned = await sweeper.sweep();
    expect(warned.plan!.changes.find((c) => c.address === "hermes.b")).toMatchObject({ action: "no-op", reason: "drifted" });
    expect(warned.plan!.warnings).toContainEqual(expect.objectContaining({ address: "hermes.b", code: "hermes.drifted" }));
    expect(readFileSync(file("b"), "utf8")).toBe(unwired);
  });

  it("a wired profile whose config.yaml became a symbolic link to nothing (its dotfiles checkout moved) is reported and left alone, not dropped from the plan in silence; the link mended, it is wired again", async () => {
    const { dir, sweeper, file } = box("127.0.0.1");
    await sweeper.sweep();
    const dotfiles = join(dir, "dotfiles");
    mkdirSync(dotfiles);
    renameSync(file("a"), join(dotfiles, "hermes-a.yaml"));
    symlinkSync(join(dir, "moved", "hermes-a.yaml"), file("a"));
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "invalid_yaml" });
    expect(report.plan!.warnings).toContainEqual(expect.objectContaining({ address: "hermes.a", code: "hermes.invalid_yaml", message: expect.stringContaining(`it is a symbolic link to ${join(dir, "moved", "hermes-a.yaml")}, which does not exist`) }));
    expect(report.plan!.changes.filter((c) => c.action === "delete")).toEqual([]);
    expect(lstatSync(file("a")).isSymbolicLink()).toBe(true);
    rmSync(file("a"));
    symlinkSync(join(dotfiles, "hermes-a.yaml"), file("a"));
    const mended = await sweeper.sweep();
    expect(mended.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "unchanged" });
    expect(mended.plan!.warnings).toEqual([]);
  });

  it("hal0's entries written with a merge key (hal0-memory: {<<: *admin, url: …}) are read as Hermes reads them: nothing to do when they resolve to what hal0 wants, and once rewritten no alias is left dangling", async () => {
    const { sweeper, file, tokens } = box("127.0.0.1", true);
    await sweeper.sweep();
    const bearer = bearerIn(file("a"), "hal0-admin")!;
    const merged = `# profile a\nmodel:\n  default: x   # keep\nmcp_servers:\n  hal0-admin: &admin\n    type: http\n    url: http://127.0.0.1:8080/mcp/admin\n    timeout: 60\n    headers:\n      Authorization: "Bearer ${bearer}"\n  hal0-memory:\n    <<: *admin\n    url: http://127.0.0.1:8080/mcp/memory\n`;
    writeFileSync(file("a"), merged);
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "unchanged" });
    expect(readFileSync(file("a"), "utf8")).toBe(merged);
    // A rotation rewrites hal0-admin, and hal0-memory with it (its merge key used hal0-admin's anchor).
    const rotated = tokens!.rotate("hermes__a");
    expect((await sweeper.sweep()).plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "update", reason: "changed" });
    expect(readFileSync(file("a"), "utf8")).not.toContain("*admin");
    expect(bearerIn(file("a"), "hal0-memory")).toBe(rotated.token);
    expect((await sweeper.sweep()).plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "unchanged" });
  });

  it("a profile's config.yaml that is a symbolic link (a dotfiles checkout) stays one; the file it leads to is wired and keeps its mode", async () => {
    const { dir, sweeper, file } = box("127.0.0.1");
    const dotfiles = join(dir, "dotfiles");
    mkdirSync(dotfiles);
    renameSync(file("a"), join(dotfiles, "hermes-a.yaml"));
    chmodSync(join(dotfiles, "hermes-a.yaml"), 0o600);
    symlinkSync(join(dotfiles, "hermes-a.yaml"), file("a"));
    expect((await sweeper.sweep()).outcome).toBe("converged");
    expect(lstatSync(file("a")).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(dotfiles, "hermes-a.yaml"), "utf8")).toContain("url: http://127.0.0.1:8080/mcp/admin");
    expect(statSync(join(dotfiles, "hermes-a.yaml")).mode & 0o7777).toBe(0o600);
    expect(readdirSync(dotfiles)).toEqual(["hermes-a.yaml"]);
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
  });

  // hal0 runs as root here (as in CI): a link made by a less trusted user must not lead it to edit another user's file.
  it.skipIf(process.getuid?.() !== 0)("a config.yaml linked by one user to another user's file (a system YAML file, say) is left alone; a link to the linker's own file is wired", async () => {
    const { dir, home, sweeper, file } = box("127.0.0.1");
    const HERMES_USER = 65534;
    const system = join(dir, "system.yaml");
    writeFileSync(system, "# a root-owned file\nkeep: true\n", { mode: 0o644 });
    rmSync(file("a"));
    symlinkSync(system, file("a"));
    lchownSync(file("a"), HERMES_USER, HERMES_USER);
    // a folder link too: profiles/c leads to another user's folder holding a config.yaml
    const theirs = join(dir, "theirs");
    mkdirSync(theirs);
    writeFileSync(join(theirs, "config.yaml"), "# theirs\n");
    symlinkSync(theirs, join(home, "profiles", "c"));
    lchownSync(join(home, "profiles", "c"), HERMES_USER, HERMES_USER);
    // the linker's own file is followed, as a dotfiles link is
    const own = join(dir, "own.yaml");
    writeFileSync(own, "# the hermes user's own file\n");
    chownSync(own, HERMES_USER, HERMES_USER);
    rmSync(file("b"));
    symlinkSync(own, file("b"));
    lchownSync(file("b"), HERMES_USER, HERMES_USER);
    const report = await sweeper.sweep();
    expect(report.results.map((r) => `${r.address} ${r.ok}`)).toEqual(["hermes.b true", "settings true"]);
    const why = Object.fromEntries(report.plan!.warnings.filter((w) => w.code === "hermes.invalid_yaml").map((w) => [w.address, w.message]));
    expect(why["hermes.a"]).toContain(`a symbolic link of user ${HERMES_USER} to a file of user 0`);
    expect(why["hermes.c"]).toContain(`${join(home, "profiles", "c")}, a symbolic link of user ${HERMES_USER}`);
    expect(readFileSync(system, "utf8")).toBe("# a root-owned file\nkeep: true\n");
    expect(statSync(system).mode & 0o777).toBe(0o644);
    expect(readFileSync(join(theirs, "config.yaml"), "utf8")).toBe("# theirs\n");
    expect(readFileSync(own, "utf8")).toContain("url: http://127.0.0.1:8080/mcp/admin");
  });

  it("a profile folder that is a symbolic link to one kept elsewhere is wired like any other", async () => {
    const { dir, sweeper, home } = box("127.0.0.1");
    const elsewhere = join(dir, "elsewhere", "c");
    mkdirSync(elsewhere, { recursive: true });
    writeFileSync(join(elsewhere, "config.yaml"), "# profile c\n");
    symlinkSync(elsewhere, join(home, "profiles", "c"));
    const first = await sweeper.sweep();
    expect(first.results.map((r) => `${r.address} ${r.ok}`)).toContain("hermes.c true");
    expect(readFileSync(join(elsewhere, "config.yaml"), "utf8")).toContain("url: http://127.0.0.1:8080/mcp/admin");
    expect(lstatSync(join(home, "profiles", "c")).isSymbolicLink()).toBe(true);
  });

  it("a profile folder reached under two names (a link to another profile's folder, two links to one kept elsewhere) is one profile, wired once: sweeps do not write two tokens into its file by turns", async () => {
    const { dir, home, sweeper, file, tokens } = box("127.0.0.1", true);
    symlinkSync("b", join(home, "profiles", "a-alias"));
    const elsewhere = join(dir, "elsewhere", "c");
    mkdirSync(elsewhere, { recursive: true });
    writeFileSync(join(elsewhere, "config.yaml"), "# profile c\n");
    for (const name of ["c2", "c1"]) symlinkSync(elsewhere, join(home, "profiles", name));
    const first = await sweeper.sweep();
    expect(first.results.map((r) => `${r.address} ${r.ok}`)).toEqual(["hermes.a true", "hermes.b true", "hermes.c1 true", "settings true"]);
    expect(bearerIn(file("b"), "hal0-admin")).toBe(tokens!.handedOn("hermes__b"));
    expect(bearerIn(join(elsewhere, "config.yaml"), "hal0-admin")).toBe(tokens!.handedOn("hermes__c1"));
    for (let i = 0; i < 2; i++) expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
  });

  it("profiles sharing one config.yaml through symbolic links wire it once, as the profile whose file it is; the links are reported and left alone, so sweeps do not write two tokens into it by turns", async () => {
    const { dir, home, sweeper, file, tokens } = box("127.0.0.1", true);
    rmSync(file("a"));
    symlinkSync("../b/config.yaml", file("a"));
    // Two links to one file kept elsewhere: the first name's.
    writeFileSync(join(dir, "shared.yaml"), "# shared\n");
    for (const p of ["d", "c"]) {
      mkdirSync(join(home, "profiles", p));
      symlinkSync(join(dir, "shared.yaml"), file(p));
    }
    const first = await sweeper.sweep();
    expect(first.results.map((r) => `${r.address} ${r.ok}`)).toEqual(["hermes.b true", "hermes.c true", "settings true"]);
    expect(bearerIn(file("b"), "hal0-admin")).toBe(tokens!.handedOn("hermes__b"));
    expect(bearerIn(join(dir, "shared.yaml"), "hal0-admin")).toBe(tokens!.handedOn("hermes__c"));
    const why = Object.fromEntries(first.plan!.warnings.filter((w) => w.code === "hermes.invalid_yaml").map((w) => [w.address, w.message]));
    expect(why["hermes.a"]).toContain("it is the same file as profile b's config.yaml");
    expect(why["hermes.d"]).toContain("it is the same file as profile c's config.yaml");
    for (let i = 0; i < 2; i++) expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
    expect(bearerIn(file("b"), "hal0-admin")).toBe(tokens!.handedOn("hermes__b"));
    expect(lstatSync(file("a")).isSymbolicLink()).toBe(true);
  });

  it("a config.yaml hal0 cannot read (a folder, a pipe, a loop of links) is left alone with a warning naming why; the sweep, a plan and down go on", async () => {
    const { dir, home, state, sweeper, file } = box("127.0.0.1");
    rmSync(file("a"));
    mkdirSync(file("a"));
    mkdirSync(join(home, "profiles", "c"));
    execFileSync("mkfifo", [file("c")]);
    mkdirSync(join(home, "profiles", "d"));
    symlinkSync("config.yaml", file("d"));
    const report = await sweeper.sweep();
    expect(report.outcome).toBe("converged");
    expect(report.results.map((r) => `${r.address} ${r.ok}`)).toEqual(["hermes.b true", "settings true"]);
    for (const p of ["a", "c", "d"]) expect(report.plan!.changes.find((c) => c.address === `hermes.${p}`)).toMatchObject({ action: "no-op", reason: "invalid_yaml" });
    const why = Object.fromEntries(report.plan!.warnings.filter((w) => w.code === "hermes.invalid_yaml").map((w) => [w.address, w.message]));
    expect(why["hermes.a"]).toContain("it is a folder, not a file");
    expect(why["hermes.c"]).toContain("it is not a regular file");
    expect(why["hermes.d"]).toContain("ELOOP");
    expect(readFileSync(file("b"), "utf8")).toContain("hal0-memory:");
    const model = compile((await loadTree(join(dir, "etc"))).tree).model!;
    const { observed, inventory } = await observe(model, new ProcessDriver({ stateDir: state.dir }), state);
    expect(planChanges(model, observed, inventory, { destroy: true }).has_changes).toBe(false);
  });

  it("a config.yaml whose aliases do not resolve is left alone (hermes.invalid_yaml); the sweep goes on", async () => {
    const { sweeper, file } = box("127.0.0.1");
    // Parses without an error, fails when read: it used to fail the whole sweep with an uncoded error.
    writeFileSync(file("a"), "model: x\nfallback: *nowhere\n");
    const report = await sweeper.sweep();
    expect(report.outcome).toBe("converged");
    expect(report.results.map((r) => `${r.address} ${r.ok}`)).toEqual(["hermes.b true", "settings true"]);
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "invalid_yaml" });
    expect(report.plan!.warnings.find((w) => w.address === "hermes.a")!.message).toContain("nowhere");
    expect(readFileSync(file("a"), "utf8")).toBe("model: x\nfallback: *nowhere\n");
  });

  it("a config.yaml that uses an anchor of one of hal0's entries elsewhere is left alone (hermes.invalid_yaml), never broken", async () => {
    const { sweeper, file } = box("127.0.0.1");
    // hal0 replaces its entries whole: the anchor would go, and `mine` would point at nothing.
    const shared = "model: x\nmcp_servers:\n  hal0-admin: &adm\n    type: http\n    url: http://example/mcp\n  mine: *adm\n";
    writeFileSync(file("a"), shared);
    const report = await sweeper.sweep();
    expect(report.outcome).toBe("converged");
    expect(report.results.map((r) => `${r.address} ${r.ok}`)).toEqual(["hermes.b true", "settings true"]);
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "invalid_yaml" });
    expect(report.plan!.warnings.find((w) => w.address === "hermes.a")!.message).toContain("&adm");
    expect(readFileSync(file("a"), "utf8")).toBe(shared);
    expect(() => applyHal0Keys(shared, {}, [])).toThrow(HermesYamlError);
    // An anchor of the person's own entry that hal0's entry uses is fine: hal0 writes its entry out in full.
    const theirs = "mcp_servers:\n  mine: &m\n    url: http://example/mcp\n  hal0-admin: *m\n  other: *m\n";
    expect(parse(applyHal0Keys(theirs, {}, []))).toEqual({ mcp_servers: { mine: { url: "http://example/mcp" }, other: { url: "http://example/mcp" } } });
  });

  it("a config.yaml that is not UTF-8 text keeps every byte (left alone, hermes.invalid_yaml); one with a byte-order mark keeps it when wired", async () => {
    const { sweeper, file } = box("127.0.0.1");
    const latin1 = Buffer.from("# caf\xe9 notes\nmodel:\n  default: x\n", "latin1");
    writeFileSync(file("a"), latin1);
    writeFileSync(file("b"), `\ufeff# profile b\nmodel:\n  default: x\n`);
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "invalid_yaml" });
    expect(report.plan!.warnings.find((w) => w.address === "hermes.a")?.message).toContain("it is not UTF-8 text");
    expect(readFileSync(file("a")).equals(latin1)).toBe(true);
    const b = readFileSync(file("b"));
    expect([...b.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    expect(b.toString("utf8")).toContain("hal0-memory:");
  });

  it("a write removes the temps a dead writer (a hal0 killed mid-write) left beside the profile's config.yaml, and keeps a live writer's", async () => {
    const { home, sweeper } = box("127.0.0.1");
    const folder = join(home, "profiles", "a");
    const stale = join(folder, `.config.yaml.${await deadPid()}.0123456789ab.hal0.tmp`);
    const live = join(folder, `.config.yaml.${process.pid}.0123456789ab.hal0.tmp`);
    for (const f of [stale, live]) writeFileSync(f, "mcp_servers:\n");
    expect((await sweeper.sweep()).results.map((r) => `${r.address} ${r.ok}`)).toContain("hermes.a true");
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(live)).toBe(true);
  });

  it("a profile that cannot be written is a failed step (hermes.write_failed); the others still converge", async () => {
    const { dir, state, file } = box("127.0.0.1");
    const loaded = await loadTree(join(dir, "etc"));
    const model = compile(loaded.tree).model!;
    const driver = new ProcessDriver({ stateDir: state.dir });
    const { observed, inventory } = await observe(model, driver, state);
    const plan = planChanges(model, observed, inventory);
    // Between plan and apply, profile a's config.yaml turns into a folder: it cannot be read or written, even by root.
    rmSync(file("a"));
    mkdirSync(file("a"));
    const results = await executePlan(plan, { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: dir });
    expect(results.find((r) => r.address === "hermes.a")).toMatchObject({ ok: false, code: "hermes.write_failed" });
    expect(results.find((r) => r.address === "hermes.b")).toMatchObject({ ok: true });
    expect(readFileSync(file("b"), "utf8")).toContain("hal0-memory:");
    const managed = JSON.parse(readFileSync(join(state.dir, "hermes-managed.json"), "utf8"));
    expect(Object.keys(managed.profiles)).toEqual(["b"]);
  });
});

describe("Hermes profiles get their agent token", () => {
  it("the first sweep mints each profile's token and writes it as the bearer of both hal0 servers; the plan shows only Bearer [redacted]", async () => {
    const { state, sweeper, tokens, file } = box("127.0.0.1", true);
    chmodSync(file("a"), 0o644);
    chmodSync(file("b"), 0o640);
    const first = await sweeper.sweep();
    expect(first.outcome).toBe("converged");
    // A file that now holds a token is not readable by others; its owner's and group's bits stay.
    expect(statSync(file("a")).mode & 0o777).toBe(0o640);
    expect(statSync(file("b")).mode & 0o777).toBe(0o640);
    for (const p of ["a", "b"]) {
      const bearer = bearerIn(file(p), "hal0-admin");
      expect(bearer).toMatch(/^hal0_ag_[A-Za-z0-9_-]{32}$/);
      expect(bearerIn(file(p), "hal0-memory")).toBe(bearer);
      // The token the store verifies as this profile's agent, with the agent's scopes.
      expect(tokens!.verify(bearer!)).toMatchObject({ kind: "agent", name: `hermes__${p}`, scopes: ["mcp:admin", "mcp:memory"] });
      expect(readFileSync(join(state.dir, "tokens", `hermes__${p}`), "utf8").trim()).toBe(bearer);
      expect(statSync(join(state.dir, "tokens", `hermes__${p}`)).mode & 0o777).toBe(0o600);
      expect(readFileSync(file(p), "utf8")).not.toContain("X-hal0-Agent");
      expect(readFileSync(file(p), "utf8")).not.toContain("[redacted]");
    }
    expect(bearerIn(file("a"), "hal0-admin")).not.toBe(bearerIn(file("b"), "hal0-admin"));
    // Neither the plan nor anything hal0 stored in the state folder (but the 0600 token files) holds a token.
    const json = planJson(first.plan!);
    expect(json).toContain('"Authorization": "Bearer [redacted]"');
    expect(json).not.toMatch(/hal0_ag_/);
    for (const f of readdirSync(state.dir, { recursive: true }).map(String).filter((f) => f.endsWith(".json"))) expect(readFileSync(join(state.dir, f), "utf8"), f).not.toMatch(/hal0_ag_/);
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
  });

  it("under drift = \"warn\", a rotated token still reaches a profile whose hal0 keys were edited by hand: the bearer is written, the hand edit kept and still reported", async () => {
    const { dir, sweeper, tokens, file } = box("127.0.0.1", true);
    const toml = join(dir, "etc", "hal0.toml");
    writeFileSync(toml, `${readFileSync(toml, "utf8")}\n[reconcile]\ndrift = "warn"\n`);
    await sweeper.sweep();
    writeFileSync(file("a"), readFileSync(file("a"), "utf8").replace("timeout: 60", "timeout: 7"));
    const rotated = tokens!.rotate("hermes__a");
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "update", reason: "changed", changed_paths: ["mcp_servers.hal0-admin.headers.Authorization", "mcp_servers.hal0-memory.headers.Authorization"] });
    expect(report.plan!.warnings).toContainEqual(expect.objectContaining({ address: "hermes.a", code: "hermes.drifted", message: expect.stringContaining("(mcp_servers.hal0-admin.timeout)") }));
    expect(bearerIn(file("a"), "hal0-admin")).toBe(rotated.token);
    expect(bearerIn(file("a"), "hal0-memory")).toBe(rotated.token);
    expect(readFileSync(file("a"), "utf8")).toContain("timeout: 7");
    // Still the person's edit, not hal0's: reported under warn, undone once drift is enforced.
    const again = await sweeper.sweep();
    expect(again.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "drifted", changed_paths: ["mcp_servers.hal0-admin.timeout"] });
    writeFileSync(toml, readFileSync(toml, "utf8").replace('drift = "warn"', 'drift = "enforce"'));
    const enforced = await sweeper.sweep();
    expect(enforced.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "update", reason: "drifted" });
    expect(readFileSync(file("a"), "utf8")).not.toContain("timeout: 7");
    expect(bearerIn(file("a"), "hal0-admin")).toBe(rotated.token);
  });

  it("after hal0 token rotate hermes__<p>, the next sweep converges the file to the new token and the old one no longer verifies", async () => {
    const { state, sweeper, tokens, file } = box("127.0.0.1", true);
    await sweeper.sweep();
    const old = bearerIn(file("a"), "hal0-admin")!;
    const untouched = readFileSync(file("b"), "utf8");
    const rotated = tokens!.rotate("hermes__a");
    expect(readFileSync(join(state.dir, "tokens", "hermes__a"), "utf8").trim()).toBe(rotated.token);
    const report = await sweeper.sweep();
    expect(report.outcome).toBe("converged");
    const change = report.plan!.changes.find((c) => c.address === "hermes.a")!;
    expect(change).toMatchObject({ action: "update", reason: "changed", changed_paths: ["mcp_servers.hal0-admin.headers.Authorization", "mcp_servers.hal0-memory.headers.Authorization"] });
    expect(JSON.stringify(report.plan)).not.toContain(old);
    expect(JSON.stringify(report.plan)).not.toContain(rotated.token);
    expect(bearerIn(file("a"), "hal0-admin")).toBe(rotated.token);
    expect(bearerIn(file("a"), "hal0-memory")).toBe(rotated.token);
    expect(tokens!.verify(rotated.token)).toMatchObject({ name: "hermes__a" });
    expect(tokens!.verify(old)).toBeUndefined();
    expect(readFileSync(file("b"), "utf8")).toBe(untouched);
    expect(report.plan!.changes.find((c) => c.address === "hermes.b")).toMatchObject({ action: "no-op" });
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
  });

  it("a profile folder removed from the home is a delete: the sweep revokes its token and drops its copy and record; an unmounted home revokes nothing", async () => {
    const { dir, home, state, sweeper, tokens, file } = box("127.0.0.1", true);
    await sweeper.sweep();
    const a = bearerIn(file("a"), "hal0-admin")!;
    const b = bearerIn(file("b"), "hal0-admin")!;
    // The home's disk unmounted: the mount point is there, empty. Nothing is concluded from it.
    renameSync(home, join(dir, "hermes.off"));
    mkdirSync(home);
    const blind = await sweeper.sweep();
    expect(blind.plan!.changes.filter((c) => c.kind === "hermes")).toEqual([]);
    expect(blind.plan!.warnings.map((w) => `${w.address} ${w.code}`)).toEqual(["hermes.a hermes.home_unobservable", "hermes.b hermes.home_unobservable"]);
    expect(tokens!.verify(a)).toMatchObject({ name: "hermes__a" });
    expect(tokens!.verify(b)).toMatchObject({ name: "hermes__b" });
    rmSync(home, { recursive: true });
    renameSync(join(dir, "hermes.off"), home);

    rmSync(join(home, "profiles", "a"), { recursive: true });
    const report = await sweeper.sweep();
    expect(report.outcome).toBe("converged");
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "delete", reason: "removed" });
    expect(tokens!.verify(a)).toBeUndefined();
    expect(existsSync(join(state.dir, "tokens", "hermes__a"))).toBe(false);
    expect(Object.keys((await state.readHermesManaged()).profiles)).toEqual(["b"]);
    expect(tokens!.verify(b)).toMatchObject({ name: "hermes__b" });
    expect(bearerIn(file("b"), "hal0-admin")).toBe(b);
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
  });

  it("a token minted for a profile whose write then failed is revoked once the profile folder is removed", async () => {
    const { dir, home, state, sweeper, tokens, hermesCredentials, file } = box("127.0.0.1", true);
    const model = compile((await loadTree(join(dir, "etc"))).tree).model!;
    const driver = new ProcessDriver({ stateDir: state.dir });
    const { observed, inventory } = await observe(model, driver, state, { hermesCredentials });
    const plan = planChanges(model, observed, inventory);
    // Between plan and apply, profile a's config.yaml turns into a folder: its token is minted, its write fails.
    rmSync(file("a"));
    mkdirSync(file("a"));
    const results = await executePlan(plan, { driver, state, healthTimeoutS: 5, stopGraceS: 1, cwd: dir, hermesCredentials });
    expect(results.find((r) => r.address === "hermes.a")).toMatchObject({ ok: false, code: "hermes.write_failed" });
    const minted = readFileSync(join(state.dir, "tokens", "hermes__a"), "utf8").trim();
    expect(tokens!.verify(minted)).toMatchObject({ name: "hermes__a" });
    // The person gives up on that profile and removes it: nothing may act as it any more.
    rmSync(join(home, "profiles", "a"), { recursive: true });
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "delete", reason: "removed" });
    expect(tokens!.verify(minted)).toBeUndefined();
    expect(existsSync(join(state.dir, "tokens", "hermes__a"))).toBe(false);
    expect(Object.keys((await state.readHermesManaged()).profiles)).toEqual(["b"]);
  });

  it("a revoked token, or a bearer typed by hand, is replaced by a live one on the next sweep", async () => {
    const { sweeper, tokens, file } = box("127.0.0.1", true);
    await sweeper.sweep();
    const old = bearerIn(file("a"), "hal0-admin")!;
    tokens!.revoke(tokens!.verify(old)!.id);
    await sweeper.sweep();
    const fresh = bearerIn(file("a"), "hal0-admin")!;
    expect(fresh).not.toBe(old);
    expect(tokens!.verify(fresh)).toMatchObject({ name: "hermes__a" });
    writeFileSync(file("b"), readFileSync(file("b"), "utf8").replaceAll(bearerIn(file("b"), "hal0-memory")!, fresh));
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.b")!.changed_paths).toEqual(["mcp_servers.hal0-admin.headers.Authorization", "mcp_servers.hal0-memory.headers.Authorization"]);
    expect(tokens!.verify(bearerIn(file("b"), "hal0-admin")!)).toMatchObject({ name: "hermes__b" });
  });

  it("an observation never mints: planning on a fresh box leaves the token store empty", async () => {
    const { dir, state, tokens, hermesCredentials } = box("127.0.0.1", true);
    const model = compile((await loadTree(join(dir, "etc"))).tree).model!;
    const { observed, inventory } = await observe(model, new ProcessDriver({ stateDir: state.dir }), state, { hermesCredentials });
    expect(observed.hermes_tokens).toEqual({ hermes__a: null, hermes__b: null });
    expect(planChanges(model, observed, inventory).changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "update", reason: "new" });
    expect(tokens!.list()).toEqual([]);
  });

  it("without credentials (a pure test of the sweep), hal0 writes no Authorization header, never the placeholder", async () => {
    const { sweeper, file } = box("127.0.0.1");
    await sweeper.sweep();
    const text = readFileSync(file("a"), "utf8");
    expect(text).toContain("hal0-memory:");
    expect(text).not.toContain("Authorization");
    expect(text).not.toContain("[redacted]");
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
  });
});

describe("hal0 down's plan", () => {
  it("leaves Hermes files alone", async () => {
    const { dir, state } = box("127.0.0.1");
    const model = compile((await loadTree(join(dir, "etc"))).tree).model!;
    const { observed, inventory } = await observe(model, new ProcessDriver({ stateDir: state.dir }), state);
    expect(planChanges(model, observed, inventory).changes.filter((c) => c.kind === "hermes")).toHaveLength(2);
    expect(planChanges(model, observed, inventory, { destroy: true }).changes.filter((c) => c.kind === "hermes")).toEqual([]);
  });
});

describe("drift = \"warn\": hal0's later changes reach a profile edited by hand (a three-way merge with what hal0 last wrote)", () => {
  /** A wired box under drift = "warn", with its hal0.toml's path and a way to move the server's port. */
  async function warned() {
    const b = box("127.0.0.1", true);
    const toml = join(b.dir, "etc", "hal0.toml");
    writeFileSync(toml, `${readFileSync(toml, "utf8")}\n[reconcile]\ndrift = "warn"\n`);
    expect((await b.sweeper.sweep()).outcome).toBe("converged");
    const port = (n: number) => writeFileSync(toml, readFileSync(toml, "utf8").replace(/host = "127.0.0.1"\n(port = \d+\n)?/, `host = "127.0.0.1"\nport = ${n}\n`));
    const entry = (p: string, id: string) => (parse(readFileSync(b.file(p), "utf8")) as { mcp_servers: Record<string, Record<string, unknown>> }).mcp_servers[id];
    return { ...b, toml, port, entry };
  }

  it("a new port, a new installed server and a rotated token all reach a profile whose hal0-admin timeout was edited by hand; the edit stays and is reported, and nothing is written once converged", async () => {
    const { dir, state, sweeper, tokens, file, port, entry } = await warned();
    writeFileSync(file("a"), readFileSync(file("a"), "utf8").replace("timeout: 60", "timeout: 7"));
    port(8090);
    const moved = await sweeper.sweep();
    expect(moved.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "update", reason: "changed", changed_paths: ["mcp_servers.hal0-admin.url", "mcp_servers.hal0-memory.url"] });
    expect(moved.plan!.warnings).toContainEqual(expect.objectContaining({ address: "hermes.a", code: "hermes.drifted", message: expect.stringContaining("(mcp_servers.hal0-admin.timeout)") }));
    expect(moved.plan!.warnings.map((w) => w.code)).not.toContain("hermes.drift_conflict");
    expect(entry("a", "hal0-admin")).toMatchObject({ url: "http://127.0.0.1:8090/mcp/admin", timeout: 7 });
    expect(entry("a", "hal0-memory")).toMatchObject({ url: "http://127.0.0.1:8090/mcp/memory", timeout: 60 });
    expect(entry("b", "hal0-admin")).toMatchObject({ url: "http://127.0.0.1:8090/mcp/admin", timeout: 60 });
    // The entry keeps hal0's order of keys, as it was first written.
    expect(Object.keys(entry("a", "hal0-admin")!)).toEqual(Object.keys(entry("b", "hal0-admin")!));
    expect(readFileSync(file("a"), "utf8").startsWith("# profile a\nmodel:\n  default: x   # keep\n")).toBe(true);
    // What hal0 records as written is its own entries (the next merge's base), redacted: the edit stays the person's.
    const managed = JSON.parse(readFileSync(join(state.dir, "hermes-managed.json"), "utf8")) as { profiles: Record<string, { base: Record<string, { timeout: number; headers: { Authorization: string } }> }> };
    expect(managed.profiles.a!.base["hal0-admin"]).toMatchObject({ timeout: 60, headers: { Authorization: "Bearer [redacted]" } });
    const settled = readFileSync(file("a"), "utf8");
    const again = await sweeper.sweep();
    expect(again.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "drifted", changed_paths: ["mcp_servers.hal0-admin.timeout"] });
    expect(readFileSync(file("a"), "utf8")).toBe(settled);

    // An installed server exposed to Hermes is joined into the edited profile too.
    mkdirSync(join(dir, "etc", "mcp-servers"));
    writeFileSync(join(dir, "etc", "mcp-servers", "inventory.toml"), 'name = "Inventory"\nspec = "npx:inventory-mcp"\ntransport = "streamable-http"\nurl = "http://127.0.0.1:9300/mcp"\n\n[exposure]\nhermes = true\n');
    const joined = await sweeper.sweep();
    expect(joined.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "update", reason: "changed", changed_paths: ["mcp_servers.inventory"] });
    expect(entry("a", "inventory")).toEqual({ type: "http", url: "http://127.0.0.1:9300/mcp", timeout: 60 });
    expect(entry("a", "hal0-admin")).toMatchObject({ timeout: 7 });

    // A rotated token reaches it as well.
    const rotated = tokens!.rotate("hermes__a");
    await sweeper.sweep();
    expect(entry("a", "hal0-admin")).toMatchObject({ timeout: 7, headers: { Authorization: `Bearer ${rotated.token}` } });
    expect(entry("a", "hal0-memory")).toMatchObject({ headers: { Authorization: `Bearer ${rotated.token}` } });
    for (const f of readdirSync(state.dir).filter((f) => f.endsWith(".json"))) expect(readFileSync(join(state.dir, f), "utf8"), f).not.toMatch(/hal0_ag_/);

    // The person undoes their edit: the profile is hal0's again, nothing reported.
    writeFileSync(file("a"), readFileSync(file("a"), "utf8").replace("timeout: 7", "timeout: 60"));
    const clean = await sweeper.sweep();
    expect(clean.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "unchanged" });
    expect(clean.plan!.warnings.filter((w) => w.address === "hermes.a")).toEqual([]);
  });

  it("a key both the person and hal0 changed keeps the person's value and is reported as a conflict; the rest of hal0's change is made; drift = \"enforce\" then makes it", async () => {
    const { sweeper, file, toml, port, entry } = await warned();
    writeFileSync(file("a"), readFileSync(file("a"), "utf8").replace("url: http://127.0.0.1:8080/mcp/admin", "url: http://10.0.0.5:9999/mcp/admin"));
    port(8090);
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "update", reason: "changed", changed_paths: ["mcp_servers.hal0-memory.url"] });
    expect(report.plan!.warnings).toContainEqual(expect.objectContaining({ address: "hermes.a", code: "hermes.drift_conflict", message: expect.stringContaining("mcp_servers.hal0-admin.url was edited by hand") }));
    expect(entry("a", "hal0-admin")).toMatchObject({ url: "http://10.0.0.5:9999/mcp/admin" });
    expect(entry("a", "hal0-memory")).toMatchObject({ url: "http://127.0.0.1:8090/mcp/memory" });
    // Reported once as a conflict; from then on it is the person's edit, reported as drift.
    const again = await sweeper.sweep();
    expect(again.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "no-op", reason: "drifted" });
    expect(again.plan!.warnings.map((w) => w.code)).toEqual(["hermes.drifted"]);
    writeFileSync(toml, readFileSync(toml, "utf8").replace('drift = "warn"', 'drift = "enforce"'));
    await sweeper.sweep();
    expect(entry("a", "hal0-admin")).toMatchObject({ url: "http://127.0.0.1:8090/mcp/admin" });
  });

  it("a credential the person added to an entry hal0 joined stays in the file as they wrote it when hal0 changes that entry's other keys", async () => {
    const { dir, sweeper, file, port, entry } = await warned();
    mkdirSync(join(dir, "etc", "mcp-servers"));
    const inventory = join(dir, "etc", "mcp-servers", "inventory.toml");
    writeFileSync(inventory, 'name = "Inventory"\nspec = "npx:inventory-mcp"\ntransport = "streamable-http"\nurl = "http://127.0.0.1:9300/mcp"\n\n[exposure]\nhermes = true\n');
    await sweeper.sweep();
    writeFileSync(file("a"), readFileSync(file("a"), "utf8").replace("url: http://127.0.0.1:9300/mcp\n", "url: http://127.0.0.1:9300/mcp\n    headers:\n      Authorization: Bearer my-own-secret\n      authorization: Basic b3duOnNlY3JldA==\n"));
    writeFileSync(inventory, readFileSync(inventory, "utf8").replace("9300", "9301"));
    port(8090);
    const report = await sweeper.sweep();
    expect(report.plan!.changes.find((c) => c.address === "hermes.a")).toMatchObject({ action: "update", reason: "changed" });
    expect(JSON.stringify(report.plan)).not.toContain("my-own-secret");
    expect(entry("a", "inventory")).toEqual({ type: "http", url: "http://127.0.0.1:9301/mcp", timeout: 60, headers: { Authorization: "Bearer my-own-secret", authorization: "Basic b3duOnNlY3JldA==" } });
    expect(readFileSync(file("a"), "utf8")).not.toContain("[redacted]");
    expect(entry("a", "hal0-admin")).toMatchObject({ url: "http://127.0.0.1:8090/mcp/admin" });
  });
});
