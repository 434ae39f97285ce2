import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { alive } from "../reconciler/process-helpers.js";
import { captureIo, healthWithin, writeFakeBox } from "./helpers.js";

/**
 * `hal0 status` and `hal0 down` work on what hal0 started even when the tree
 * no longer compiles: an operator who broke a file mid-edit can still see and
 * stop the box. Both use the inventory's slots with the runtime of the
 * settings last applied, not the broken tree's.
 */
const SLOTS = ["dn-0", "dn-1"];
const base = mkdtempSync(join(tmpdir(), "hal0-invalid-tree-"));
const config = join(base, "box");
const state = join(base, "state");

afterAll(async () => {
  for (const name of SLOTS) for (const r of await markedRunners(state, name)) process.kill(r.pid, "SIGKILL");
  rmSync(base, { recursive: true, force: true });
});

async function run(...args: string[]) {
  const io = captureIo();
  const code = await main([...args, "--config", config, "--state", state], io);
  return { code, out: io.out(), err: io.err() };
}

describe("hal0 status and hal0 down on a tree with errors", () => {
  it("with nothing ever applied, says so and stops nothing (exit 0)", async () => {
    mkdirSync(join(config, "slots"), { recursive: true });
    writeFileSync(join(config, "hal0.toml"), "[slots\n");
    const r = await run("down");
    expect(r.code, r.err).toBe(0);
    expect(r.err).toBe(`note: ${config} has 1 error(s) (hal0 validate lists them); down stops the slots in the inventory with the runtime of the settings last applied\nnote: the state folder ${state} does not exist: there is no inventory of slots hal0 started there, and down leaves it missing (is --state the one apply used?)\n`);
    expect(r.out).toBe("Nothing to stop: no slot hal0 started runs.\n");
    expect(existsSync(state)).toBe(false);
  });

  it("status shows, and down stops, every running slot with the applied runtime, whatever the broken settings file now says", async () => {
    const ports = await writeFakeBox(config, SLOTS);
    const applied = await run("apply", "--yes");
    expect(applied.code, applied.out + applied.err).toBe(0);
    for (const port of ports) expect(await healthWithin(port, 10_000)).toBe(200);
    const pids = SLOTS.map((name) => JSON.parse(readFileSync(join(state, "slots", name, "runtime.json"), "utf8")).pid as number);

    // The settings now name an engine that does not exist, and a slot file does not parse: the tree has two errors.
    writeFileSync(join(config, "hal0.toml"), `[slots]\nruntime = "docker"\ndocker_host = "unix://${join(base, "no-engine.sock")}"\nstop_grace_s = "soon"\n`);
    writeFileSync(join(config, "slots", "dn-1.toml"), `profile = "fake"\nport = \n`);
    expect((await run("plan")).code).toBe(1);

    // status shows what runs, with the conditions last recorded; what the tree wants is unknown.
    const status = await run("status");
    expect(status.code, status.err).toBe(0);
    expect(status.err).toBe(`note: ${config} has 2 error(s) (hal0 validate lists them); status shows what runs, with the conditions last recorded; what the tree wants is unknown\n`);
    for (const [i, name] of SLOTS.entries()) expect(status.out).toMatch(new RegExp(`^${name} +ready +${pids[i]} +${ports[i]} `, "m"));
    expect(status.out).not.toContain("disabled");
    const json = JSON.parse((await run("status", "--json")).out);
    expect(json.slots.map((r: any) => [r.name, r.state, r.enabled, r.pid])).toEqual(SLOTS.map((name, i) => [name, "ready", null, pids[i]]));
    expect(json.tree_valid).toBe(false);
    expect(json.diagnostics.filter((d: any) => d.severity === "error").map((d: any) => d.file).sort()).toEqual(["hal0.toml", "slots/dn-1.toml"]);
    expect(json.slots[0].conditions.find((c: any) => c.type === "Ready")?.status).toBe("True");
    const one = await run("status", "dn-0");
    expect(one.code).toBe(0);
    expect(one.out).toMatch(/^slot {6}dn-0\n/);

    const down = await run("down");
    expect(down.code, down.out + down.err).toBe(0);
    expect(down.err).toBe(`note: ${config} has 2 error(s) (hal0 validate lists them); down stops the slots in the inventory with the runtime of the settings last applied\n`);
    for (const name of SLOTS) expect(down.out).toMatch(new RegExp(`- slot\\.${name} \\(down\\)`));
    expect(down.out).toContain("Down complete: 2 stopped, 0 failed.");
    for (const pid of pids) expect(await alive(pid), String(pid)).toBe(false);
    for (const name of SLOTS) expect(await markedRunners(state, name)).toEqual([]);
    expect(JSON.parse(readFileSync(join(state, "inventory.json"), "utf8")).slots).toEqual({});

    // Nothing is left to stop: a second down is a no-op.
    const again = await run("down");
    expect(again.code).toBe(0);
    expect(again.out).toBe("Nothing to stop: no slot hal0 started runs.\n");
    expect(existsSync(join(state, "slots", "dn-0", "runtime.json"))).toBe(false);
  });
});
