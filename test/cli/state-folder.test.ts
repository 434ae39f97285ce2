import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { markedRunners } from "../../reconciler/drivers/process-orphans.js";
import { alive } from "../reconciler/process-helpers.js";
import { captureIo, writeFakeBox } from "./helpers.js";

/**
 * The state folder holds tokens, hal0.db and each runner's record with its
 * env (an HF_TOKEN): whichever command makes it first makes it 0700, and one
 * found open to group or others is closed.
 */
const base = mkdtempSync(join(tmpdir(), "hal0-state-folder-"));
const config = join(base, "box");
const states = [join(base, "fresh", "state"), join(base, "open"), join(base, "damaged-db"), join(base, "damaged-hermes")];

afterAll(async () => {
  for (const state of states) for (const r of await markedRunners(state, "sf")) process.kill(r.pid, "SIGKILL");
  rmSync(base, { recursive: true, force: true });
});

const mode = (path: string) => statSync(path).mode & 0o777;

describe("the state folder", () => {
  it("is made 0700 by apply (plan, which only reads, leaves a missing one missing), and an open one (0755) is closed to 0700", async () => {
    await writeFakeBox(config, ["sf"], { HF_TOKEN: "hf_" + "s".repeat(34) });
    const fresh = states[0]!;
    expect((await main(["plan", "--config", config, "--state", fresh], captureIo())).toString()).toBe("0");
    expect(existsSync(fresh)).toBe(false);
    expect(await main(["apply", "--yes", "--config", config, "--state", fresh], captureIo())).toBe(0);
    expect(mode(fresh)).toBe(0o700);
    expect(await main(["down", "--config", config, "--state", fresh], captureIo())).toBe(0);
    const open = states[1]!;
    mkdirSync(open);
    chmodSync(open, 0o755);
    expect(await main(["apply", "--yes", "--config", config, "--state", open], captureIo())).toBe(0);
    expect(mode(open)).toBe(0o700);
    expect(await main(["down", "--config", config, "--state", open], captureIo())).toBe(0);
  });

  it("down on a state folder that is not there (a mistyped --state) stops nothing and leaves it missing, a tree with errors too", async () => {
    if (!existsSync(config)) await writeFakeBox(config, ["sf"]);
    const typo = join(base, "typo", "state");
    const io = captureIo();
    expect(await main(["down", "--config", config, "--state", typo], io), io.err()).toBe(0);
    expect(existsSync(join(base, "typo"))).toBe(false);
    expect(io.out()).toBe("Nothing to stop: no slot hal0 started runs.\n");
    expect(io.err()).toContain(`note: the state folder ${typo} does not exist: there is no inventory of slots hal0 started there`);
    const broken = join(base, "broken-box");
    await writeFakeBox(broken, ["sf"]);
    writeFileSync(join(broken, "hal0.toml"), "[slots\n");
    const invalid = captureIo();
    expect(await main(["down", "--config", broken, "--state", typo], invalid), invalid.err()).toBe(0);
    expect(existsSync(join(base, "typo"))).toBe(false);
  });

  it("a shared folder (world-writable, as /tmp) named as the state folder is refused with state.shared and keeps its mode; nothing is written there", async () => {
    const shared = join(base, "shared-tmp");
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    writeFileSync(join(shared, "someone-else"), "");
    for (const args of [["token", "list"], ["web", "--config", config], ["plan", "--config", config], ["apply", "--yes", "--config", config]]) {
      const io = captureIo();
      expect(await main([...args, "--state", shared], io), args[0]).toBe(1);
      expect(io.err()).toMatch(new RegExp(`^hal0 ${args[0]}: state\\.shared: state folder ${shared.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} is one anybody may write`));
    }
    expect(statSync(shared).mode & 0o7777).toBe(0o1777);
    expect(readdirSync(shared)).toEqual(["someone-else"]);
    // A folder of its own inside it is fine, and made 0700.
    expect(await main(["token", "list", "--state", join(shared, "hal0")], captureIo())).toBe(0);
    expect(mode(join(shared, "hal0"))).toBe(0o700);
    expect(statSync(shared).mode & 0o7777).toBe(0o1777);
  });

  it("a folder holding other files and none of hal0's (--state /, a home folder) is refused with state.foreign, keeps its mode and gets nothing written; validate --runners leaves it as it is too", async () => {
    if (!existsSync(config)) await writeFakeBox(config, ["sf"]);
    const home = join(base, "home");
    mkdirSync(join(home, "projects"), { recursive: true });
    writeFileSync(join(home, "notes.txt"), "mine\n");
    writeFileSync(join(home, ".profile"), "");
    chmodSync(home, 0o755);
    for (const args of [["token", "list"], ["plan", "--config", config], ["apply", "--yes", "--config", config], ["serve", "--config", config, "--port", "0"]]) {
      const io = captureIo();
      expect(await main([...args, "--state", home], io), args[0]).toBe(1);
      expect(io.err()).toBe(`hal0 ${args[0]}: state.foreign: state folder ${home} holds other files (notes.txt, projects) and none of hal0's; hal0 keeps its state folder to itself (it closes it to 0700 and writes its tokens and records there), so it leaves this one as it is: name a folder of its own, such as ${home}/hal0-state (hal0 makes it)\n`);
    }
    // validate only reads the runner cache there, and asked to probe it writes none into such a folder, nor closes it.
    expect(await main(["validate", "--runners", "--config", config, "--state", home], captureIo())).toBe(0);
    expect(mode(home)).toBe(0o755);
    expect(readdirSync(home).sort()).toEqual([".profile", "notes.txt", "projects"]);
    // An empty folder, or one holding hal0's files (a state folder of an older hal0 left open), is hal0's: used, and closed.
    const older = join(base, "older-state");
    mkdirSync(older);
    writeFileSync(join(older, "runners.json"), "{}\n");
    chmodSync(older, 0o755);
    expect(await main(["token", "list", "--state", older], captureIo())).toBe(0);
    expect(mode(older)).toBe(0o700);
  });

  it("an inventory that does not parse, or whose slot entry is none (null, an unknown runtime), is state.corrupt (exit 1), never read as empty: plan, status and down refuse, the runner keeps running", async () => {
    const state = states[1]!;
    expect(await main(["apply", "--yes", "--config", config, "--state", state], captureIo())).toBe(0);
    const file = join(state, "inventory.json");
    const whole = readFileSync(file, "utf8");
    const pid = JSON.parse(readFileSync(join(state, "slots", "sf", "runtime.json"), "utf8")).pid as number;
    // A slot's entry that is no record of a started slot (null, or a runtime hal0 has none of) is as damaged: hal0 would not know where its runner runs.
    const entry = (value: unknown) => `${JSON.stringify({ ...JSON.parse(whole), slots: { sf: value } })}\n`;
    for (const broken of [whole.slice(0, 40), "[]\n", entry(null), entry({ created_at: "2026-01-01T00:00:00.000Z", runtime: "Process" })]) {
      writeFileSync(file, broken);
      for (const command of ["plan", "status", "down"]) {
        const io = captureIo();
        expect(await main([command, "--config", config, "--state", state], io), command).toBe(1);
        expect(io.err()).toMatch(new RegExp(`^hal0 ${command}: state\\.corrupt: ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} does not parse`));
      }
      expect(await alive(pid)).toBe(true);
    }
    writeFileSync(file, whole);
    expect(await main(["down", "--config", config, "--state", state], captureIo())).toBe(0);
    expect(await alive(pid)).toBe(false);
  });

  it("an inventory a newer hal0 wrote (a higher format version) is state.newer_schema naming it and both versions (exit 1) for plan, apply, status and down, and is left as it is", async () => {
    const state = states[1]!;
    if (!existsSync(config)) await writeFakeBox(config, ["sf"]);
    expect(await main(["apply", "--yes", "--config", config, "--state", state], captureIo())).toBe(0);
    const file = join(state, "inventory.json");
    const whole = readFileSync(file, "utf8");
    const pid = JSON.parse(readFileSync(join(state, "slots", "sf", "runtime.json"), "utf8")).pid as number;
    const newer = `${JSON.stringify({ ...JSON.parse(whole), version: 2, placements: { sf: "node-b" } }, null, 2)}\n`;
    writeFileSync(file, newer);
    try {
      for (const command of ["plan", "apply", "status", "down"]) {
        const io = captureIo();
        expect(await main([command, ...(command === "apply" ? ["--yes"] : []), "--config", config, "--state", state], io), `${command}: ${io.err()}`).toBe(1);
        expect(io.err()).toBe(`hal0 ${command}: state.newer_schema: ${file} was written by a newer hal0 (its format version is 2; this hal0 knows 1): this hal0 leaves it untouched; run that hal0 again, or restore a backup taken before the upgrade\n`);
      }
      expect(readFileSync(file, "utf8")).toBe(newer);
      expect(await alive(pid)).toBe(true);
    } finally {
      writeFileSync(file, whole);
    }
    expect(await main(["down", "--config", config, "--state", state], captureIo())).toBe(0);
    expect(await alive(pid)).toBe(false);
  });

  it("a state file that is a folder is system.io naming it (exit 1, no stack), never read as empty: plan, status and down refuse, the runner keeps running, and the file is there again once the folder is moved away", async () => {
    const state = states[1]!;
    if (!existsSync(config)) await writeFakeBox(config, ["sf"]);
    expect(await main(["apply", "--yes", "--config", config, "--state", state], captureIo())).toBe(0);
    const pid = JSON.parse(readFileSync(join(state, "slots", "sf", "runtime.json"), "utf8")).pid as number;
    // Each file, with the commands that read it.
    const readers: Record<string, string[]> = { "inventory.json": ["plan", "status", "down"], "applied-settings.json": ["plan", "status"], "outcomes.json": ["status"], "conditions.json": ["status"] };
    for (const [name, commands] of Object.entries(readers)) {
      const file = join(state, name);
      const whole = readFileSync(file, "utf8");
      rmSync(file);
      mkdirSync(file);
      try {
        for (const command of commands) {
          const io = captureIo();
          expect(await main([command, "--config", config, "--state", state], io), `${command} with ${name}: ${io.err()}`).toBe(1);
          expect(io.err()).toBe(`hal0 ${command}: system.io: cannot read the state file ${file}: it is a folder (EISDIR); move the folder away (hal0 writes the file again)\n`);
        }
        expect(await alive(pid), name).toBe(true);
      } finally {
        rmSync(file, { recursive: true });
        writeFileSync(file, whole);
      }
    }
    expect(await main(["down", "--config", config, "--state", state], captureIo())).toBe(0);
    expect(await alive(pid)).toBe(false);
  });

  it("a hal0.db that cannot be opened (damaged) does not keep hal0 down from stopping the box, Hermes profiles wired or not; their conditions stay as recorded", async () => {
    const state = states[2]!;
    const wired = join(base, "wired");
    const home = join(base, "hermes");
    await writeFakeBox(wired, ["sf"]);
    writeFileSync(join(wired, "hal0.toml"), `${readFileSync(join(wired, "hal0.toml"), "utf8")}\n[hermes]\nhome = ${JSON.stringify(home)}\n`);
    mkdirSync(join(home, "profiles", "coder"), { recursive: true });
    writeFileSync(join(home, "profiles", "coder", "config.yaml"), "model: qwen3\n");
    expect(await main(["apply", "--yes", "--config", wired, "--state", state], captureIo())).toBe(0);
    const pid = JSON.parse(readFileSync(join(state, "slots", "sf", "runtime.json"), "utf8")).pid as number;
    const hermes = JSON.parse(readFileSync(join(state, "conditions.json"), "utf8"))["hermes.coder"];
    expect(hermes.conditions.find((c: { type: string }) => c.type === "Ready").status).toBe("True");
    const db = join(state, "hal0.db");
    writeFileSync(db, readFileSync(db).subarray(0, 8192)); // cut short: SQLITE_CORRUPT
    const io = captureIo();
    expect(await main(["down", "--config", wired, "--state", state], io), io.err()).toBe(0);
    expect(io.out()).toContain("Down complete: 1 stopped, 0 failed.");
    expect(await alive(pid)).toBe(false);
    expect(JSON.parse(readFileSync(join(state, "conditions.json"), "utf8"))["hermes.coder"]).toEqual(hermes);
  });

  it("a hermes-managed.json that does not parse (or holds no records) is state.corrupt for plan, apply, status and the doctor, left as it is and never read as empty; down still stops the box", async () => {
    const state = states[3]!;
    const wired = join(base, "wired-record");
    const home = join(base, "hermes-record");
    await writeFakeBox(wired, ["sf"]);
    writeFileSync(join(wired, "hal0.toml"), `${readFileSync(join(wired, "hal0.toml"), "utf8")}\n[hermes]\nhome = ${JSON.stringify(home)}\n`);
    mkdirSync(join(wired, "mcp-servers"));
    writeFileSync(join(wired, "mcp-servers", "inventory.toml"), 'name = "Inventory"\nspec = "npx:inventory-mcp"\ntransport = "streamable-http"\nurl = "http://127.0.0.1:9300/mcp"\n\n[exposure]\nhermes = true\n');
    for (const p of ["coder", "writer"]) {
      mkdirSync(join(home, "profiles", p), { recursive: true });
      writeFileSync(join(home, "profiles", p, "config.yaml"), "model: qwen3\n");
    }
    expect(await main(["apply", "--yes", "--config", wired, "--state", state], captureIo())).toBe(0);
    const pid = JSON.parse(readFileSync(join(state, "slots", "sf", "runtime.json"), "utf8")).pid as number;
    const file = join(state, "hermes-managed.json");
    const whole = readFileSync(file, "utf8");
    expect(Object.keys(JSON.parse(whole).profiles).sort()).toEqual(["coder", "writer"]);
    // The installed server goes and the writer profile with it: read as empty, the record would keep inventory in
    // coder's file and writer's token live, and its next write would drop writer's record.
    rmSync(join(wired, "mcp-servers", "inventory.toml"));
    rmSync(join(home, "profiles", "writer"), { recursive: true });
    for (const broken of [whole.slice(0, whole.length / 2), "[]\n", '{"profiles": {"coder": {"ids": "inventory"}}}\n']) {
      writeFileSync(file, broken);
      for (const command of ["plan", "apply", "status"]) {
        const io = captureIo();
        expect(await main([command, ...(command === "apply" ? ["--yes"] : []), "--config", wired, "--state", state], io), `${command}: ${io.err()}`).toBe(1);
        expect(io.err()).toMatch(new RegExp(`^hal0 ${command}: state\\.corrupt: ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} does not parse \\(.+\\): it is hal0's record of what it wrote into each Hermes profile`));
      }
      const doctor = captureIo();
      expect(await main(["doctor", "--json", "--config", wired, "--state", state], doctor)).toBe(1);
      expect(JSON.parse(doctor.out()).rows.find((r: { check: string }) => r.check === "hermes_profiles_mcp")).toMatchObject({ status: "fail", message: expect.stringMatching(/^state\.corrupt: /) });
      expect(readFileSync(file, "utf8")).toBe(broken);
      expect(readFileSync(join(home, "profiles", "coder", "config.yaml"), "utf8")).toContain("inventory");
      expect(await alive(pid)).toBe(true);
    }
    // Restored, the next apply takes inventory out of coder's file and forgets writer.
    writeFileSync(file, whole);
    expect(await main(["apply", "--yes", "--config", wired, "--state", state], captureIo())).toBe(0);
    expect(readFileSync(join(home, "profiles", "coder", "config.yaml"), "utf8")).not.toContain("inventory");
    expect(Object.keys(JSON.parse(readFileSync(file, "utf8")).profiles)).toEqual(["coder"]);
    writeFileSync(file, "{");
    const io = captureIo();
    expect(await main(["down", "--config", wired, "--state", state], io), io.err()).toBe(0);
    expect(await alive(pid)).toBe(false);
    expect(readFileSync(file, "utf8")).toBe("{");
  });

  it("a steps.json that is not one (null, a list, half a file) says no step is under way: status answers, and apply runs and removes it as it ends", async () => {
    const state = states[1]!;
    const file = join(state, "steps.json");
    for (const broken of ["null\n", "[]\n", "{\"pid\": 1, \"slots\": nu"]) {
      writeFileSync(file, broken);
      const io = captureIo();
      expect(await main(["status", "sf", "--json", "--config", config, "--state", state], io), `${broken}: ${io.err()}`).toBe(0);
      expect(JSON.parse(io.out()).slot.step).toBeNull();
      expect(await main(["apply", "--yes", "--config", config, "--state", state], captureIo()), broken).toBe(0);
      expect(existsSync(file)).toBe(false);
      expect(await main(["down", "--config", config, "--state", state], captureIo())).toBe(0);
    }
  });

  it("conditions.json and outcomes.json entries that are not of their shape (a hand edit, a newer hal0's) are none: status answers, nothing reads 'undefined', and apply and down go on", async () => {
    const state = states[1]!;
    if (!existsSync(config)) await writeFakeBox(config, ["sf"]);
    expect(await main(["apply", "--yes", "--config", config, "--state", state], captureIo())).toBe(0);
    const conditions = join(state, "conditions.json");
    const real = JSON.parse(readFileSync(conditions, "utf8"));
    writeFileSync(conditions, JSON.stringify({ ...real, "slot.sf": "x", settings: { conditions: 3 } }));
    writeFileSync(join(state, "outcomes.json"), JSON.stringify({ sf: 5, settings: { ok: "yes" } }));
    const io = captureIo();
    expect(await main(["status", "--config", config, "--state", state], io), io.err()).toBe(0);
    expect(io.out()).toMatch(/^sf\s+ready\s/m);
    expect(io.out()).not.toContain("undefined");
    const apply = captureIo();
    expect(await main(["apply", "--yes", "--config", config, "--state", state], apply), apply.err()).toBe(0);
    expect(await main(["down", "--config", config, "--state", state], captureIo())).toBe(0);
    expect(JSON.parse(readFileSync(join(state, "outcomes.json"), "utf8")).sf).toMatchObject({ ok: true, action: "delete" });
  });

  it("the leftovers of a killed apply (its steps.json, its apply.lock, the temps of its writes) are not left behind: the next apply, even with nothing to do, removes them", async () => {
    const state = states[1]!;
    expect(await main(["apply", "--yes", "--config", config, "--state", state], captureIo())).toBe(0);
    const dead = spawnSync(process.execPath, ["-e", ""]).pid!; // a process that has ended
    const since = new Date().toISOString();
    writeFileSync(join(state, "steps.json"), JSON.stringify({ pid: dead, pid_start: 1, slots: { sf: { action: "replace", phase: "warming", since } } }));
    writeFileSync(join(state, "apply.lock"), JSON.stringify({ pid: dead, pid_start: 1, host: hostname(), started_at: since, command: "hal0 apply" }));
    // Its writes cut short by the kill: a temp of the steps beside them, one of the runner's record in its folder.
    const temps = [join(state, `.steps.json.${dead}.0123456789ab.hal0.tmp`), join(state, "slots", "sf", `.runtime.json.${dead}.0123456789ab.hal0.tmp`)];
    for (const temp of temps) writeFileSync(temp, "{");
    const status = captureIo();
    expect(await main(["status", "sf", "--json", "--config", config, "--state", state], status)).toBe(0);
    expect(JSON.parse(status.out()).slot.step).toBeNull();
    const io = captureIo();
    expect(await main(["apply", "--yes", "--config", config, "--state", state], io)).toBe(0);
    expect(io.out()).toContain("No changes.");
    expect(readdirSync(state).filter((f) => f === "steps.json" || f === "apply.lock" || f.endsWith(".hal0.tmp"))).toEqual([]);
    expect(readdirSync(join(state, "slots", "sf")).filter((f) => f.endsWith(".hal0.tmp"))).toEqual([]);
    expect(await main(["down", "--config", config, "--state", state], captureIo())).toBe(0);
  });

  it("a config folder with no .toml file is an empty box, and plan says so before it plans every slot's delete", async () => {
    const state = states[1]!;
    expect(await main(["apply", "--yes", "--config", config, "--state", state], captureIo())).toBe(0);
    const empty = mkdtempSync(join(base, "empty-"));
    const io = captureIo();
    expect(await main(["plan", "--config", empty, "--state", state], io)).toBe(0);
    expect(io.err()).toContain(`note: ${empty} holds no .toml file: an empty box, which wants no slot`);
    expect(io.out()).toMatch(/- slot\.sf/);
    expect(await main(["down", "--config", config, "--state", state], captureIo())).toBe(0);
  });
});

