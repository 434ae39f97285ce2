import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { renderUnit, systemdAnalyze, unitProblems, unitWords } from "../../reconciler/systemd-unit.js";
import { captureIo, hal0ForNobody } from "./helpers.js";

/**
 * `hal0 service install` and the doctor's `service_unit` row. The unit is
 * checked by the real `systemd-analyze verify` (offline: this machine runs no
 * systemd as PID 1). Folder names carry a space, so quoting is exercised.
 */
const HAL0_BIN = join(import.meta.dirname, "../../bin/hal0.cjs");
let dir: string;
let config: string;
let state: string;
let units: string;
let store: string;
let hermes: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "hal0-service-"));
  config = join(dir, "my box");
  state = join(dir, "var lib", "hal0");
  units = join(dir, "units");
  store = join(dir, "models store");
  hermes = join(dir, "hermes home");
  cpSync(join(import.meta.dirname, "../../fixtures/box"), config, { recursive: true });
  const toml = join(config, "hal0.toml");
  writeFileSync(toml, `${readFileSync(toml, "utf8").replace(/^store = .*$/m, `store = ${JSON.stringify(store)}`)}\n[hermes]\nhome = ${JSON.stringify(hermes)}\n`);
  mkdirSync(units);
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function hal0(args: string[]) {
  const io = captureIo({ PATH: "/usr/local/bin:/usr/bin:/bin" }, dir);
  const code = await main(args, io);
  return { code, out: io.out(), err: io.err() };
}

async function doctorRow(extra: string[] = []) {
  const r = await hal0(["doctor", "--json", "--config", config, "--state", state, "--unit-dir", units, ...extra]);
  return JSON.parse(r.out).rows.find((x: { check: string }) => x.check === "service_unit") as { status: string; message: string; hint: string };
}

describe("hal0 service install", () => {
  it("--print shows the unit and writes nothing", async () => {
    const r = await hal0(["service", "install", "--print", "--config", config, "--state", state, "--unit-dir", units]);
    expect(r.code, r.err).toBe(0);
    const q = (p: string) => `"${p}"`;
    expect(r.out).toContain(`ExecStart=${process.execPath} --max-semi-space-size=2 ${HAL0_BIN.replace(/\/test\/cli\/\.\.\/\.\./, "")} serve --config ${q(config)} --state ${q(state)}\n`);
    // The Hermes home, which hal0 writes but never creates: `-`, so a missing one does not keep the unit from starting.
    expect(r.out).toContain(`ReadWritePaths=${q(state)} ${q(config)} ${q(store)} ${q(`-${hermes}`)}\n`);
    for (const line of ["Restart=on-failure", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=read-only", "Environment=PATH=/usr/local/bin:/usr/bin:/bin", "WantedBy=multi-user.target"]) {
      expect(r.out).toContain(`${line}\n`);
    }
    // Every folder here lies under /tmp, which a private /tmp would hide: the unit leaves it off, and says so.
    expect(r.out).not.toMatch(/^PrivateTmp=/m);
    expect(r.out).toMatch(/^# No PrivateTmp=: a private \/tmp would hide .*my box/m);
    // (hal0 itself is named first when its checkout lies under /tmp too, as in a CI clone.)
    expect(r.err).toMatch(/^hal0 service: the unit leaves PrivateTmp= off: a private \/tmp would hide /);
    expect(r.err).toContain(`${state}, ${config}, ${store}, ${hermes} from the service`);
    expect(readdirSync(units)).toEqual([]);
    expect(existsSync(state)).toBe(false);
  });

  it("a box outside /tmp gets PrivateTmp=yes, and a Hermes home inside the state folder no line of its own", () => {
    const text = renderUnit({ node: "/usr/bin/node", bin: "/opt/hal0/bin/hal0.cjs", config: "/etc/hal0", state: "/var/lib/hal0", writableIfPresent: ["/var/lib/hal0/.hermes"], writable: ["/srv/models"] });
    expect(text).toContain("ReadWritePaths=/var/lib/hal0 /etc/hal0 /srv/models\n");
    expect(text).toContain("PrivateTmp=yes\n");
    const home = renderUnit({ node: "/usr/bin/node", bin: "/opt/hal0/bin/hal0.cjs", config: "/etc/hal0", state: "/var/lib/hal0", writableIfPresent: ["/home/ada/.hermes"] });
    expect(home).toContain("ReadWritePaths=/var/lib/hal0 /etc/hal0 -/home/ada/.hermes\n");
  });

  it("a $ in a path is doubled on the command line only, where systemd expands variables; Environment= and ReadWritePaths= take it as it is", () => {
    const o = { node: "/usr/bin/node", bin: "/opt/hal0/bin/hal0.cjs", config: "/etc/hal0", state: "/srv/hal0$box%1", path: "/opt/$tools/bin:/usr/bin" };
    const text = renderUnit(o);
    expect(text).toContain(" --state /srv/hal0$$box%%1\n");
    expect(text).toContain("ReadWritePaths=/srv/hal0$box%%1 /etc/hal0\n");
    expect(text).toContain("Environment=PATH=/opt/$tools/bin:/usr/bin\n");
    // Read back as systemd reads it: the unit serves that state folder and leaves it writable.
    const unit = { file: "hal0.service", text, exec: unitWords(text.split("\n").find((l) => l.startsWith("ExecStart="))!.slice("ExecStart=".length), true) };
    expect(unit.exec.at(-1)).toBe(o.state);
    expect(unitProblems(unit, { writable: [o.state, o.config], writableIfPresent: [] })).toEqual([]);
  });

  it.runIf(process.getuid?.() === 0)("--user: an unknown user is refused; a folder it makes is the user's; one the user cannot write is named", async () => {
    const unknown = await hal0(["service", "install", "--print", "--config", config, "--state", state, "--user", "no_such_user_h0"]);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain("service.install_failed: no user no_such_user_h0 on this machine");
    const own = join(dir, "nobody units");
    mkdirSync(own);
    const nobodyState = join(dir, "nobody state");
    chmodSync(dir, 0o755); // mkdtemp's 0700 would keep nobody out of every folder here
    const r = await hal0(["service", "install", "--config", config, "--state", nobodyState, "--unit-dir", own, "--user", "nobody"]);
    expect(r.code, r.err).toBe(0);
    // Group= is nobody's primary group by its name (nogroup on Debian): a group named nobody need not exist, and the unit would not start (216/GROUP).
    const group = spawnSync("id", ["-gn", "nobody"], { encoding: "utf8" }).stdout.trim();
    expect(readFileSync(join(own, "hal0.service"), "utf8")).toContain(`User=nobody\nGroup=${group}\n`);
    expect(statSync(nobodyState).uid).toBe(Number(spawnSync("id", ["-u", "nobody"], { encoding: "utf8" }).stdout));
    // The config folder is root's (and the test's folder 0700): the real system says nobody cannot write it.
    expect(r.err).toContain(`hal0 service: nobody, the service's user, cannot write ${config}: chown -R nobody: ${config}`);
    expect(r.err).not.toContain(`cannot write ${nobodyState}`);
  });

  it.runIf(systemdAnalyze() !== undefined)("writes hal0.service that systemd-analyze verify passes clean, and makes the folders it opens for writing", async () => {
    const r = await hal0(["service", "install", "--config", config, "--state", state, "--unit-dir", units, "--user", "root"]);
    expect(r.code, r.err).toBe(0);
    expect(r.err.split("\n").filter((l) => l !== "" && !l.includes("leaves PrivateTmp= off"))).toEqual([]);
    const file = join(units, "hal0.service");
    expect(r.out).toContain(`wrote ${file}`);
    expect(statSync(state).mode & 0o777).toBe(0o700);
    expect(statSync(store).isDirectory()).toBe(true);
    const verify = spawnSync(systemdAnalyze()!, ["verify", file], { encoding: "utf8" });
    expect(verify.status, verify.stderr).toBe(0);
    expect(`${verify.stdout}${verify.stderr}`.trim()).toBe("");
    // A file systemd reads: no temp left beside it.
    expect(readdirSync(units)).toEqual(["hal0.service"]);
  });

  it("refuses what it cannot do: a unit folder that is not there, a bad user, a wrong verb", async () => {
    const missing = await hal0(["service", "install", "--config", config, "--state", state, "--unit-dir", join(dir, "nope")]);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain("service.install_failed");
    expect((await hal0(["service", "install", "--user", "bad user", "--print", "--config", config])).code).toBe(64);
    expect((await hal0(["service", "uninstall"])).code).toBe(64);
    expect((await hal0(["service"])).code).toBe(64);
  });

  it.runIf(process.getuid?.() === 0)("run by a user who is not root, says what to do: root writes a system unit, and hal0's default state folder", async () => {
    chmodSync(dir, 0o755); // mkdtemp's 0700 would keep nobody out of the box
    const roots = join(dir, "root units");
    mkdirSync(roots, { mode: 0o755 });
    const asNobody = (...args: string[]) => spawnSync("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", process.execPath, hal0ForNobody("bin/hal0.cjs"), "service", "install", "--config", config, ...args], {
      cwd: dir, encoding: "utf8", env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: dir },
    });
    const ownState = join(dir, "nobody's own state");
    mkdirSync(ownState, { mode: 0o700 });
    spawnSync("chown", ["nobody:", ownState]); // the user's own: only the unit folder is root's
    const unit = asNobody("--state", ownState, "--unit-dir", roots);
    expect(unit.status, unit.stderr).toBe(1);
    expect(unit.stderr).toContain(`service.install_failed: cannot write ${join(roots, "hal0.service")}: permission denied (EACCES); a system unit is written by root: run this as root (sudo); --print shows the unit and writes nothing\n`);
    if (!existsSync("/var/lib/hal0")) {
      const noState = asNobody("--unit-dir", roots);
      expect(noState.status, noState.stderr).toBe(1);
      expect(noState.stderr).toContain("service.install_failed: cannot make /var/lib/hal0: permission denied (EACCES); it is hal0's default state folder (no --state was given): run this as root (sudo), or name the state folder with --state DIR\n");
    }
    expect(readdirSync(roots)).toEqual([]);
  });

  it("a unit it cannot write leaves none of the folders it made for it, and says what was refused without a temp file's name", async () => {
    const blocked = join(dir, "blocked units");
    mkdirSync(join(blocked, "hal0.service"), { recursive: true }); // a folder where the unit goes: the write is refused
    const fresh = join(dir, "fresh", "var lib", "hal0");
    const r = await hal0(["service", "install", "--config", config, "--state", fresh, "--unit-dir", blocked]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`service.install_failed: cannot write ${join(blocked, "hal0.service")}: illegal operation on a directory (EISDIR) (the folders this install made are removed again)`);
    expect(r.err).not.toContain(".hal0.tmp");
    expect(existsSync(join(dir, "fresh"))).toBe(false);
    expect(readdirSync(blocked)).toEqual(["hal0.service"]);
  });

  it("refuses a folder whose name holds a line break, which would end the unit's line and start a directive of its own", async () => {
    // A model store named in hal0.toml (an agent's privileged change once a person approves it) or a --config / --state folder.
    const evil = join(dir, "x\nExecStartPre=/bin/touch /tmp/hal0-unit-injected");
    const box = join(dir, "evil box");
    cpSync(config, box, { recursive: true });
    const toml = join(box, "hal0.toml");
    writeFileSync(toml, readFileSync(toml, "utf8").replace(/^store = .*$/m, `store = ${JSON.stringify(evil)}`));
    for (const args of [["--config", box, "--state", state], ["--config", config, "--state", evil]]) {
      const r = await hal0(["service", "install", "--print", ...args, "--unit-dir", units]);
      expect(r.code, r.out).toBe(1);
      expect(r.out).not.toMatch(/^ExecStartPre=/m);
      expect(r.err).toContain("service.install_failed");
      expect(r.err).toContain("line break");
    }
    expect(() => renderUnit({ node: "/usr/bin/node", bin: "/opt/hal0/bin/hal0.cjs", config: "/etc/hal0", state: "/var/lib/hal0", path: "/bin\nUser=root" })).toThrow(/line break/);
  });
});

describe("hal0 doctor's service_unit row", () => {
  it.runIf(systemdAnalyze() !== undefined)("ok when the unit serves this box and verifies clean; fail for other folders or a missing node; warn on what verify says", async () => {
    expect(await doctorRow()).toMatchObject({ status: "ok", message: expect.stringContaining("systemd-analyze verify is clean") });
    // Another state folder: the unit is not this box's.
    const other = await hal0(["doctor", "--json", "--config", config, "--state", join(dir, "other"), "--unit-dir", units]);
    expect(JSON.parse(other.out).rows.find((x: any) => x.check === "service_unit")).toMatchObject({ status: "fail", message: expect.stringContaining("serves --config") });

    const file = join(units, "hal0.service");
    const good = readFileSync(file, "utf8");
    writeFileSync(file, good.replace("ProtectHome=read-only", "ProtectHome=read-only\nPrivateTmpp=yes"));
    expect(await doctorRow()).toMatchObject({ status: "warn", message: expect.stringContaining("Unknown key") });
    // A unit of an older hal0: a private /tmp, which hides this box (it lies under /tmp) from the service.
    writeFileSync(file, good.replace(/^# No PrivateTmp=.*$/m, "PrivateTmp=yes"));
    expect(await doctorRow()).toMatchObject({ status: "fail", message: expect.stringMatching(/its PrivateTmp=yes hides .*my box/), hint: expect.stringContaining("hal0 service install") });
    // A Hermes home that is there, left read-only (the unit names no such folder).
    mkdirSync(hermes, { recursive: true });
    writeFileSync(file, good.replace(` "-${hermes}"`, ""));
    expect(await doctorRow()).toMatchObject({ status: "fail", message: expect.stringContaining(`its ReadWritePaths= leave ${hermes} read-only to the service`) });
    // One missing is fine while there is none: hal0 never creates it.
    rmSync(hermes, { recursive: true });
    expect(await doctorRow()).toMatchObject({ status: "ok" });
    writeFileSync(file, good.replace(process.execPath, join(dir, "gone", "node")));
    expect(await doctorRow()).toMatchObject({ status: "fail", message: expect.stringContaining("does not exist"), hint: expect.stringContaining("hal0 service install") });
    writeFileSync(file, good);
  });

  it("the hint to install again keeps the unit's User= and quotes each folder, so it can be pasted as it is", async () => {
    const r = await hal0(["service", "install", "--config", config, "--state", state, "--unit-dir", units]);
    expect(r.code, r.err).toBe(0);
    const file = join(units, "hal0.service");
    const good = readFileSync(file, "utf8");
    try {
      // A unit written with --user ada: installing it again without --user would run hal0 as root.
      writeFileSync(file, good.replace("Restart=on-failure", "User=ada\nGroup=users\nRestart=on-failure"));
      const other = join(dir, "other state");
      const row = JSON.parse((await hal0(["doctor", "--json", "--config", config, "--state", other, "--unit-dir", units])).out).rows.find((x: any) => x.check === "service_unit");
      expect(row).toMatchObject({ status: "fail", hint: `run hal0 service install --config '${config}' --state '${other}' --unit-dir ${units} --user ada again` });
      // Without User=: root, as hal0 service install writes it without --user.
      writeFileSync(file, good);
      const plain = JSON.parse((await hal0(["doctor", "--json", "--config", config, "--state", other, "--unit-dir", units])).out).rows.find((x: any) => x.check === "service_unit");
      expect(plain.hint).toBe(`run hal0 service install --config '${config}' --state '${other}' --unit-dir ${units} again`);
    } finally {
      writeFileSync(file, good);
    }
  });

  it("ok without a unit: hal0 serve needs no systemd", async () => {
    const empty = join(dir, "no-units");
    mkdirSync(empty, { recursive: true });
    const r = await hal0(["doctor", "--json", "--config", config, "--state", state, "--unit-dir", empty]);
    expect(JSON.parse(r.out).rows.find((x: any) => x.check === "service_unit")).toMatchObject({ status: "ok", message: expect.stringContaining("no hal0.service") });
  });
});
