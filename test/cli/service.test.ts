import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { systemdAnalyze } from "../../reconciler/systemd-unit.js";
import { captureIo } from "./helpers.js";

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

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "hal0-service-"));
  config = join(dir, "my box");
  state = join(dir, "var lib", "hal0");
  units = join(dir, "units");
  store = join(dir, "models store");
  cpSync(join(import.meta.dirname, "../../fixtures/box"), config, { recursive: true });
  const toml = join(config, "hal0.toml");
  writeFileSync(toml, readFileSync(toml, "utf8").replace(/^store = .*$/m, `store = ${JSON.stringify(store)}`));
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
    expect(r.out).toContain(`ReadWritePaths=${q(state)} ${q(config)} ${q(store)}\n`);
    for (const line of ["Restart=on-failure", "NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=read-only", "PrivateTmp=yes", "Environment=PATH=/usr/local/bin:/usr/bin:/bin", "WantedBy=multi-user.target"]) {
      expect(r.out).toContain(`${line}\n`);
    }
    expect(readdirSync(units)).toEqual([]);
    expect(existsSync(state)).toBe(false);
  });

  it.runIf(systemdAnalyze() !== undefined)("writes hal0.service that systemd-analyze verify passes clean, and makes the folders it opens for writing", async () => {
    const r = await hal0(["service", "install", "--config", config, "--state", state, "--unit-dir", units, "--user", "root"]);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toBe("");
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
});

describe("hal0 doctor's service_unit row", () => {
  it.runIf(systemdAnalyze() !== undefined)("ok when the unit serves this box and verifies clean; fail for other folders or a missing node; warn on what verify says", async () => {
    expect(await doctorRow()).toMatchObject({ status: "ok", message: expect.stringContaining("systemd-analyze verify is clean") });
    // Another state folder: the unit is not this box's.
    const other = await hal0(["doctor", "--json", "--config", config, "--state", join(dir, "other"), "--unit-dir", units]);
    expect(JSON.parse(other.out).rows.find((x: any) => x.check === "service_unit")).toMatchObject({ status: "fail", message: expect.stringContaining("serves --config") });

    const file = join(units, "hal0.service");
    const good = readFileSync(file, "utf8");
    writeFileSync(file, good.replace("PrivateTmp=yes", "PrivateTmp=yes\nPrivateTmpp=yes"));
    expect(await doctorRow()).toMatchObject({ status: "warn", message: expect.stringContaining("Unknown key") });
    writeFileSync(file, good.replace(process.execPath, join(dir, "gone", "node")));
    expect(await doctorRow()).toMatchObject({ status: "fail", message: expect.stringContaining("does not exist"), hint: expect.stringContaining("hal0 service install") });
    writeFileSync(file, good);
  });

  it("ok without a unit: hal0 serve needs no systemd", async () => {
    const empty = join(dir, "no-units");
    mkdirSync(empty, { recursive: true });
    const r = await hal0(["doctor", "--json", "--config", config, "--state", state, "--unit-dir", empty]);
    expect(JSON.parse(r.out).rows.find((x: any) => x.check === "service_unit")).toMatchObject({ status: "ok", message: expect.stringContaining("no hal0.service") });
  });
});
