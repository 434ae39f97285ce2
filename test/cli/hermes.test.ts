import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { main } from "../../cli/index.js";
import { captureIo } from "./helpers.js";
import { openDb } from "../../server/db.js";
import { TokenStore } from "../../server/identity/tokens.js";

/**
 * Hermes profile wiring end to end, on real files: a Hermes home with two
 * named profiles and a default one; `hal0 apply` wires the named ones only,
 * a hand edit of a hal0 key is drift, `hal0 agent reprovision hermes
 * --repair` wires the default one, `hal0 doctor` reports each row.
 */
let dir: string;
let config: string;
let state: string;
let home: string;

const CODER = `# coder — my notes stay
model:
  default: "qwen3-coder"   # served by slot coder
toolsets: [hermes-cli, file]

mcp_servers:
  # mine
  github:
    command: npx

memory:
  provider: holographic
`;
const BRAIN = "# the brain\nmodel:\n  default: qwen3-4b\nhal0:\n  memory_private: true\n";
const DEFAULT = "# default profile\nmodel:\n  default: qwen3-4b\n";

async function run(...args: string[]) {
  const io = captureIo({}, dir);
  const code = await main([...args, "--config", config, "--state", state], io);
  return { code, out: io.out(), err: io.err() };
}

const file = (p: string | null) => (p === null ? join(home, "config.yaml") : join(home, "profiles", p, "config.yaml"));
const read = (p: string | null) => readFileSync(file(p), "utf8");
const servers = (p: string | null) => (parse(read(p)) as { mcp_servers?: Record<string, any> }).mcp_servers ?? {};
const bearerOf = (p: string | null, id: string): string | undefined => /^Bearer (\S+)$/.exec(servers(p)[id]?.headers?.Authorization ?? "")?.[1];

/** The state folder's token store (real SQLite), opened for one look. */
function withTokens<T>(fn: (tokens: TokenStore) => T): T {
  const db = openDb(state);
  try {
    return fn(new TokenStore(db, state));
  } finally {
    db.close();
  }
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "hal0-hermes-"));
  config = join(dir, "etc");
  state = join(dir, "state");
  home = join(dir, "hermes");
  mkdirSync(join(config, "mcp-servers"), { recursive: true });
  writeFileSync(join(config, "hal0.toml"), `[server]\nport = 8090\n\n[hermes]\nhome = "${home}"\n`);
  writeFileSync(join(config, "mcp-servers", "inventory.toml"), 'name = "Inventory"\nspec = "npx:inventory-mcp"\ntransport = "streamable-http"\nurl = "http://127.0.0.1:9300/mcp"\n\n[exposure]\nhermes = true\n');
  for (const p of ["coder", "hal0-brain"]) mkdirSync(join(home, "profiles", p), { recursive: true });
  writeFileSync(file("coder"), CODER);
  chmodSync(file("coder"), 0o600);
  writeFileSync(file("hal0-brain"), BRAIN);
  writeFileSync(file(null), DEFAULT);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("Hermes profiles through the CLI", () => {
  it("hal0 apply wires the named profiles, keeps every foreign byte and the file mode, and leaves the default profile alone", async () => {
    const apply = await run("apply", "--yes");
    expect(apply.code, apply.err).toBe(0);
    expect(apply.out).toContain("~ hermes.coder (new)");
    expect(apply.out).toContain("~ hermes.hal0-brain (new)");
    expect(read(null)).toBe(DEFAULT);
    // The bearer is coder's own agent token, minted on this first wiring; X-hal0-Agent is no longer written.
    const bearer = bearerOf("coder", "hal0-admin");
    expect(servers("coder")["hal0-admin"]).toEqual({ type: "http", url: "http://127.0.0.1:8090/mcp/admin", timeout: 60, headers: { Authorization: `Bearer ${bearer}` } });
    expect(bearerOf("coder", "hal0-memory")).toBe(bearer);
    expect(withTokens((t) => t.verify(bearer!))).toMatchObject({ kind: "agent", name: "hermes__coder" });
    expect(withTokens((t) => t.verify(bearerOf("hal0-brain", "hal0-memory")!))).toMatchObject({ kind: "agent", name: "hermes__hal0-brain" });
    expect(read("coder")).not.toContain("X-hal0-Agent");
    // What apply printed shows the placeholder, never the token.
    expect(apply.out).toContain('"Authorization":"Bearer [redacted]"');
    expect(apply.out).not.toMatch(/hal0_ag_/);
    expect(servers("coder").inventory).toEqual({ type: "http", url: "http://127.0.0.1:9300/mcp", timeout: 60 });
    expect(read("hal0-brain")).toContain('X-hal0-Private: "1"');
    // Only hal0's entries were added: the person's text is intact around them.
    const coder = read("coder");
    expect(coder.startsWith(CODER.slice(0, CODER.indexOf("\nmemory:")))).toBe(true);
    expect(coder.endsWith("\nmemory:\n  provider: holographic\n")).toBe(true);
    expect(statSync(file("coder")).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(join(state, "hermes-managed.json"), "utf8")).profiles.coder.ids).toEqual(["inventory"]);
  });

  it("then hal0 plan --detailed-exitcode has nothing to do", async () => {
    const plan = await run("plan", "--detailed-exitcode");
    expect(plan.code, plan.out).toBe(0);
  });

  it("after hal0 token rotate hermes__coder, plan (text and --json) names the bearer as Bearer [redacted] only, doctor warns, apply writes the new token", async () => {
    const old = bearerOf("coder", "hal0-admin")!;
    const brain = read("hal0-brain");
    const io = captureIo({}, dir);
    expect(await main(["token", "rotate", "hermes__coder", "--state", state], io), io.err()).toBe(0);
    const rotated = { token: io.out().trim() };
    expect(rotated.token).toMatch(/^hal0_ag_/);
    const plan = await run("plan", "--detailed-exitcode");
    expect(plan.code, plan.out).toBe(2);
    expect(plan.out).toContain("~ hermes.coder (changed)");
    expect(plan.out).toContain('mcp_servers.hal0-admin.headers.Authorization: "Bearer [redacted]" → "Bearer [redacted]" (another token)');
    const json = await run("plan", "--json");
    const coder = (JSON.parse(json.out) as { changes: Array<{ address: string; changed_paths: string[]; before: any; after: any }> }).changes.find((c) => c.address === "hermes.coder")!;
    expect(coder.changed_paths).toEqual(["mcp_servers.hal0-admin.headers.Authorization", "mcp_servers.hal0-memory.headers.Authorization"]);
    expect(coder.before.mcp_servers["hal0-admin"].headers).toEqual({ Authorization: "Bearer [redacted]" });
    expect(coder.after.mcp_servers["hal0-admin"].headers).toEqual({ Authorization: "Bearer [redacted]" });
    for (const out of [plan.out, json.out]) {
      expect(out).not.toContain(old);
      expect(out).not.toContain(rotated.token);
    }
    const doctor = await run("doctor", "--json");
    expect((JSON.parse(doctor.out).rows as Array<{ check: string; status: string; message: string }>).find((r) => r.check === "hermes_profiles_mcp")).toMatchObject({ status: "warn", message: expect.stringContaining("not wired: coder (changed)") });
    const apply = await run("apply", "--yes");
    expect(apply.code, apply.err).toBe(0);
    expect(bearerOf("coder", "hal0-admin")).toBe(rotated.token);
    expect(bearerOf("coder", "hal0-memory")).toBe(rotated.token);
    expect(withTokens((t) => t.verify(old))).toBeUndefined();
    expect(withTokens((t) => t.verify(rotated.token))).toMatchObject({ name: "hermes__coder" });
    expect(read("hal0-brain")).toBe(brain);
    expect((await run("plan", "--detailed-exitcode")).code).toBe(0);
  });

  it("a hand edit of a hal0 key is drift: plan, drift and the next apply say so; apply restores it", async () => {
    const wired = read("coder");
    writeFileSync(file("coder"), wired.replace("http://127.0.0.1:8090/mcp/admin", "http://10.0.0.9:8090/mcp/admin"));
    const plan = await run("plan", "--detailed-exitcode");
    expect(plan.code).toBe(2);
    expect(plan.out).toContain("~ hermes.coder (drifted)");
    expect(plan.out).toContain('mcp_servers.hal0-admin.url: "http://10.0.0.9:8090/mcp/admin" → "http://127.0.0.1:8090/mcp/admin"');
    const drift = await run("drift", "--json");
    expect(drift.code).toBe(2);
    expect(JSON.parse(drift.out).drift).toEqual([expect.objectContaining({ address: "hermes.coder", reason: "drifted", action: "update" })]);
    expect((await run("apply", "--yes")).code).toBe(0);
    expect(read("coder")).toBe(wired);
  });

  it("under drift = \"warn\", a hand edit kept while hal0 has a change of its own for the profile (a new port) is still listed by hal0 drift, before the apply and after it", async () => {
    const toml = join(config, "hal0.toml");
    const original = readFileSync(toml, "utf8");
    const wired = read("coder");
    writeFileSync(toml, `${original.replace("port = 8090", "port = 8091")}\n[reconcile]\ndrift = "warn"\n`);
    writeFileSync(file("coder"), wired.replace("timeout: 60", "timeout: 9"));
    try {
      const drift = await run("drift", "--json");
      expect(drift.code).toBe(2);
      expect(JSON.parse(drift.out).drift).toEqual([expect.objectContaining({ address: "hermes.coder", reason: "drifted", policy: "warn", action: "update", details: [expect.stringContaining("(mcp_servers.hal0-admin.timeout)")] })]);
      expect((await run("apply", "--yes")).code).toBe(0);
      expect(servers("coder")["hal0-admin"]).toMatchObject({ url: "http://127.0.0.1:8091/mcp/admin", timeout: 9 });
      const after = await run("drift");
      expect(after.code).toBe(2);
      expect(after.out).toContain("hermes.coder has hal0 keys edited by hand; drift = \"warn\": reported only\n    mcp_servers.hal0-admin.timeout was edited by hand");
    } finally {
      writeFileSync(toml, original);
    }
    expect((await run("apply", "--yes")).code).toBe(0);
    expect(read("coder")).toBe(wired);
  });

  it("hal0 doctor's memory row names a bearer that is not the profile's live token; apply fixes it", async () => {
    withTokens((t) => t.rotate("hermes__hal0-brain"));
    const row = async () => (JSON.parse((await run("doctor", "--json")).out).rows as Array<{ check: string; status: string; message: string }>).find((r) => r.check === "hermes_brain_memory")!;
    expect(await row()).toMatchObject({ status: "warn", message: expect.stringContaining("its bearer is not hermes__hal0-brain's live agent token") });
    expect((await row()).message).toContain("mcp_servers.hal0-memory.headers.Authorization");
    expect((await run("apply", "--yes")).code).toBe(0);
    expect(await row()).toMatchObject({ status: "ok" });
  });

  it("hal0 doctor reports each row; the default profile is not wired yet", async () => {
    const doctor = await run("doctor", "--json");
    expect(doctor.code, doctor.out).toBe(0);
    const rows = Object.fromEntries((JSON.parse(doctor.out).rows as Array<{ check: string; status: string }>).map((r) => [r.check, r.status]));
    // (toMatchObject: the doctor gains rows of its own, e.g. the disk checks; these are the ones this box decides)
    expect(rows).toMatchObject({ tree: "ok", state_folder: "ok", runtime: "ok", hermes_profiles_mcp: "ok", hermes_default_memory: "warn", hermes_brain_memory: "ok" });
    expect(doctor.out).toContain("hal0 agent reprovision hermes --repair");
  });

  it("hal0 agent reprovision hermes shows, and with --repair writes, the default profile's wiring", async () => {
    const dry = await run("agent", "reprovision", "hermes");
    expect(dry.code).toBe(2);
    expect(dry.out).toContain("~ hermes (new)");
    expect(read(null)).toBe(DEFAULT);
    const repair = await run("agent", "reprovision", "hermes", "--repair");
    expect(repair.code, repair.err).toBe(0);
    expect(read(null).startsWith(DEFAULT)).toBe(true);
    // The default profile authenticates as agent "hermes".
    const bearer = bearerOf(null, "hal0-memory")!;
    expect(servers(null)["hal0-memory"]).toEqual({ type: "http", url: "http://127.0.0.1:8090/mcp/memory", timeout: 60, headers: { Authorization: `Bearer ${bearer}` } });
    expect(withTokens((t) => t.verify(bearer))).toMatchObject({ kind: "agent", name: "hermes" });
    expect(repair.out).toContain('"Authorization":"Bearer [redacted]"');
    expect(repair.out + dry.out).not.toMatch(/hal0_ag_/);
    expect((await run("agent", "reprovision", "hermes", "--repair")).code).toBe(0);
    const doctor = await run("doctor", "--json");
    expect((JSON.parse(doctor.out).rows as Array<{ check: string; status: string }>).find((r) => r.check === "hermes_default_memory")!.status).toBe("ok");
    // The sweep still does not touch the default profile.
    expect((await run("plan", "--detailed-exitcode")).code).toBe(0);
  });

  it("hal0: {wire_mcp: false} removes exactly hal0's keys; the person's server stays", async () => {
    writeFileSync(file("coder"), `${read("coder")}hal0:\n  wire_mcp: false\n`);
    const apply = await run("apply", "--yes");
    expect(apply.code, apply.err).toBe(0);
    expect(apply.out).toContain("~ hermes.coder (opted_out)");
    expect(read("coder")).toBe(`${CODER}hal0:\n  wire_mcp: false\n`);
    expect((await run("plan", "--detailed-exitcode")).code).toBe(0);
  });

  it("hal0 doctor fails on a profile that is not YAML, and exits 1", async () => {
    mkdirSync(join(home, "profiles", "broken"), { recursive: true });
    writeFileSync(file("broken"), "model: [unclosed\n");
    const doctor = await run("doctor");
    expect(doctor.code).toBe(1);
    expect(doctor.out).toMatch(/^fail {2}hermes_profiles_mcp .*not YAML hal0 can edit: broken/m);
    const plan = await run("plan");
    expect(plan.out).toContain("! hermes.broken: hermes.invalid_yaml:");
  });
});

describe("hal0 status: conditions of the settings and of each Hermes profile", () => {
  it("shows them beside the slots (--json: every condition; text: Ready and what is wrong)", async () => {
    const json = await run("status", "--json");
    expect(json.code, json.err).toBe(0);
    const resources = Object.fromEntries((JSON.parse(json.out).resources as Array<{ address: string; conditions: Array<{ type: string; status: string; reason: string }> }>)
      .map((r) => [r.address, Object.fromEntries(r.conditions.map((c) => [c.type, `${c.status} ${c.reason}`]))]));
    expect(resources.settings).toEqual({ Ready: "True Applied", Reconciling: "False Converged", Stalled: "False Progressing", Degraded: "False AsExpected" });
    expect(resources["hermes.hal0-brain"]).toMatchObject({ Ready: "True Wired", Reconciling: "False Converged" });
    expect(resources["hermes.coder"]).toMatchObject({ Ready: "True OptedOut" });
    expect(resources["hermes.broken"]).toMatchObject({ Ready: "False InvalidYaml", Stalled: "True InvalidYaml", Degraded: "False AsExpected" });
    const text = await run("status");
    expect(text.out).toMatch(/^RESOURCE +READY +NOTE$/m);
    expect(text.out).toMatch(/^hermes\.broken +False +Ready: InvalidYaml .*; Stalled: InvalidYaml \(.*cannot be read or does not parse as YAML; hal0 leaves it alone until it is fixed\)$/m);
    expect(text.out).toMatch(/^settings +True$/m);
  });
});

describe("a removed Hermes profile loses its token", () => {
  it("a missing or empty home revokes nothing; a profile folder gone from a present home is a planned delete that revokes its token, its copy and its record; re-created, it gets a fresh token", async () => {
    const old = bearerOf("hal0-brain", "hal0-admin")!;
    const kept = join(state, "tokens", "hermes__hal0-brain");
    const managed = () => Object.keys((JSON.parse(readFileSync(join(state, "hermes-managed.json"), "utf8")) as { profiles: Record<string, unknown> }).profiles);
    expect(withTokens((t) => t.verify(old))).toMatchObject({ name: "hermes__hal0-brain" });

    // The home unmounted (gone, then an empty mount point): nothing can be concluded, nothing is revoked.
    renameSync(home, `${home}.off`);
    for (const empty of [false, true]) {
      if (empty) mkdirSync(home);
      const apply = await run("apply", "--yes");
      expect(apply.code, apply.err).toBe(0);
      expect(apply.out).toMatch(/! hermes\.hal0-brain: hermes\.home_unobservable: .*(does not exist|is empty)/);
      expect(apply.out).not.toContain("(removed)");
      expect(withTokens((t) => t.verify(old))).toMatchObject({ name: "hermes__hal0-brain" });
      expect(existsSync(kept)).toBe(true);
      expect(managed()).toContain("hal0-brain");
    }
    rmSync(home, { recursive: true });
    renameSync(`${home}.off`, home);

    // A profiles folder hal0 may not read (EACCES for a user other than root under a 0700 folder; a loop of links here, as
    // the tests run as root): the home cannot be observed, which revokes nothing, and plan, status and doctor still run.
    renameSync(join(home, "profiles"), join(home, "profiles.off"));
    symlinkSync("profiles", join(home, "profiles"));
    const unread = await run("apply", "--yes");
    expect(unread.code, unread.err).toBe(0);
    expect(unread.out).toMatch(/! hermes\.hal0-brain: hermes\.home_unobservable: .*profiles cannot be read \(ELOOP\)/);
    expect(withTokens((t) => t.verify(old))).toMatchObject({ name: "hermes__hal0-brain" });
    expect((await run("status")).code).toBe(0);
    const doctor = await run("doctor");
    expect(doctor.out).toMatch(/^warn {2}hermes_profiles_mcp +cannot read .*\/profiles \(ELOOP\)/m);
    // The file is named once, with why.
    expect(doctor.out).toContain(`hermes_brain_memory    cannot read ${file("hal0-brain")}: it is a loop of symbolic links (ELOOP)\n`);
    rmSync(join(home, "profiles"));
    renameSync(join(home, "profiles.off"), join(home, "profiles"));

    // The profile's folder removed from a present home.
    rmSync(join(home, "profiles", "hal0-brain"), { recursive: true });
    const plan = await run("plan", "--json");
    expect((JSON.parse(plan.out) as { changes: Array<{ address: string; action: string; reason: string }> }).changes).toContainEqual(expect.objectContaining({ address: "hermes.hal0-brain", action: "delete", reason: "removed" }));
    expect(withTokens((t) => t.verify(old))).toMatchObject({ name: "hermes__hal0-brain" });
    const apply = await run("apply", "--yes");
    expect(apply.code, apply.err).toBe(0);
    expect(apply.out).toContain("- hermes.hal0-brain (removed)");
    expect(withTokens((t) => t.verify(old))).toBeUndefined();
    expect(existsSync(kept)).toBe(false);
    expect(managed()).not.toContain("hal0-brain");
    expect((await run("plan")).out).not.toContain("hermes.hal0-brain");

    // Created again: wired with a fresh, live token.
    mkdirSync(join(home, "profiles", "hal0-brain"));
    writeFileSync(file("hal0-brain"), BRAIN);
    const again = await run("apply", "--yes");
    expect(again.code, again.err).toBe(0);
    expect(again.out).toContain("~ hermes.hal0-brain (new)");
    const fresh = bearerOf("hal0-brain", "hal0-admin")!;
    expect(fresh).not.toBe(old);
    expect(withTokens((t) => t.verify(fresh))).toMatchObject({ name: "hermes__hal0-brain" });
    expect(readFileSync(kept, "utf8").trim()).toBe(fresh);
  });
});

describe("two boxes sharing one [hermes] home", () => {
  it("hal0 doctor warns when hal0's entries in a profile point at another box's server", async () => {
    rmSync(join(home, "profiles", "broken"), { recursive: true });
    expect((await run("doctor")).out).not.toContain("another server than this box's");
    // A second box (its own config and state folder, another port) pointed at the same home.
    const other = join(dir, "other");
    mkdirSync(other);
    writeFileSync(join(other, "hal0.toml"), `[server]\nport = 8091\n\n[hermes]\nhome = "${home}"\n`);
    const io = captureIo({}, dir);
    expect(await main(["apply", "--yes", "--config", other, "--state", join(dir, "other-state")], io), io.err()).toBe(0);
    const doctor = await run("doctor");
    expect(doctor.out).toMatch(/^warn {2}hermes_profiles_mcp .*hal0-brain \(http:\/\/127\.0\.0\.1:8091\/mcp\/admin\)/m);
    expect(doctor.out).toContain("if another hal0 box uses this [hermes] home, give each box its own");
  });
});
