import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { compile, loadTree, type Model } from "../../compiler/index.js";
import { captureIo } from "./helpers.js";
import { freePort } from "../reconciler/process-helpers.js";

/**
 * The whole loop on real processes: apply the example box, plan again,
 * change one slot, remove one, kill one, and bring it all down. Runners are
 * the fake llama-server of fixtures/runner on the box's own loopback ports.
 */
const BOX = join(import.meta.dirname, "../../fixtures/box");

/** A copy of the example box in a new folder (`box`), beside a state folder path (`dir`, not made). */
function copiedBox(prefix: string): { base: string; box: string; dir: string } {
  const base = mkdtempSync(join(tmpdir(), prefix));
  const box = join(base, "box");
  cpSync(BOX, box, { recursive: true });
  return { base, box, dir: join(base, "state") };
}
let config: string;
let state: string;

async function run(...args: string[]) {
  const io = captureIo({}, process.cwd());
  const code = await main([...args, "--config", config, "--state", state], io);
  return { code, out: io.out(), err: io.err() };
}

async function desired(): Promise<Model> {
  const loaded = await loadTree(config);
  return compile(loaded.tree).model!;
}

function runtimePid(name: string): number {
  return JSON.parse(readFileSync(join(state, "slots", name, "runtime.json"), "utf8")).pid;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function getJson(port: number, path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.json() };
}

describe("hal0 apply / plan / status / down on the example box", () => {
  const started: number[] = [];

  beforeAll(() => {
    // A copy of the example box alone, outside the repo: its runner word (hal0-fake-llama-server) is found in hal0's bin/.
    const base = mkdtempSync(join(tmpdir(), "hal0-box-"));
    config = join(base, "box");
    cpSync(BOX, config, { recursive: true });
    state = mkdtempSync(join(tmpdir(), "hal0-state-"));
  });

  afterAll(async () => {
    await run("down");
    for (const pid of started) if (alive(pid)) process.kill(pid, "SIGKILL");
  });

  it("starts every enabled slot as a process: /health 200, /props shows the resolved argv", async () => {
    const { code, out } = await run("apply", "--yes");
    expect(code, out).toBe(0);
    // 8 slots, and the box's settings recorded as applied (they differ from the defaults).
    expect(out).toMatch(/Apply complete: 8 created, 0 replaced, 0 deleted, 1 updated, 0 failed\./);
    const model = await desired();
    for (const slot of Object.values(model.slots).filter((s) => s.enabled)) {
      started.push(runtimePid(slot.name));
      expect((await getJson(slot.port, "/health")).status, slot.name).toBe(200);
      const props = await getJson(slot.port, "/props");
      // The runner word is the whole prefix: the stand-in reports the arguments after it.
      expect(props.body.argv, slot.name).toEqual(slot.spec.argv.slice(1));
    }
  });

  it("plans nothing right after an apply (--detailed-exitcode 0)", async () => {
    const { code, out } = await run("plan", "--detailed-exitcode");
    expect(code, out).toBe(0);
    expect(out).toContain("No changes.");
  });

  it("restarts only the slot whose ctx_size changed, naming tune.ctx_size and the argv flag", async () => {
    const pids = Object.fromEntries((Object.values((await desired()).slots)).filter((s) => s.enabled).map((s) => [s.name, runtimePid(s.name)]));
    const file = join(config, "slots/utility.toml");
    writeFileSync(file, readFileSync(file, "utf8").replace(/ctx_size = \d+/, "ctx_size = 12288"));
    const plan = await run("plan", "--detailed-exitcode");
    expect(plan.code).toBe(2);
    expect(plan.out).toContain("-/+ slot.utility");
    expect(plan.out).toContain("tune.ctx_size");
    expect(plan.out).toContain("argv.--ctx-size");
    const { code, out } = await run("apply", "--yes");
    expect(code, out).toBe(0);
    expect(out).toMatch(/0 created, 1 replaced, 0 deleted/);
    for (const [name, pid] of Object.entries(pids)) {
      if (name === "utility") expect(runtimePid(name)).not.toBe(pid);
      else expect(runtimePid(name), name).toBe(pid);
    }
    expect((await getJson((await desired()).slots.utility!.port, "/props")).body.ctx_size).toBe(12288);
    started.push(runtimePid("utility"));
  });

  it("stops only the slot whose file was deleted", async () => {
    const before = Object.fromEntries(Object.values((await desired()).slots).filter((s) => s.enabled).map((s) => [s.name, runtimePid(s.name)]));
    rmSync(join(config, "slots/utility.toml"));
    const { code, out } = await run("apply", "--yes");
    expect(code, out).toBe(0);
    expect(out).toContain("- slot.utility (removed_from_config)");
    expect(out).toMatch(/0 created, 0 replaced, 1 deleted/);
    for (const [name, pid] of Object.entries(before)) expect(alive(pid), name).toBe(name !== "utility");
  });

  it("reports a killed runner as not_running, and apply brings it back", async () => {
    const pid = runtimePid("embed");
    process.kill(pid, "SIGKILL");
    await new Promise((r) => setTimeout(r, 200));
    const plan = await run("plan");
    expect(plan.out).toMatch(/\+ slot\.embed \(not_running\)/);
    const drift = await run("drift", "--json");
    expect(drift.code).toBe(2);
    expect(JSON.parse(drift.out).drift).toEqual([{ address: "slot.embed", reason: "not_running", policy: "enforce", action: "create", details: [expect.stringMatching(/exited/)] }]);
    const status = await run("status", "--json");
    expect(JSON.parse(status.out).slots.find((s: { name: string }) => s.name === "embed").state).toBe("offline");
    const { code, out } = await run("apply", "--yes");
    expect(code, out).toBe(0);
    expect(alive(runtimePid("embed"))).toBe(true);
    started.push(runtimePid("embed"));
  });

  it("refuses a saved plan once the box has moved, naming what moved (plan.stale)", async () => {
    const file = join(state, "saved-plan.json");
    expect((await run("plan", "--out", file)).code).toBe(0);
    process.kill(runtimePid("rerank"), "SIGKILL");
    await new Promise((r) => setTimeout(r, 200));
    const { code, err } = await run("apply", "--plan", file, "--yes");
    expect(code).toBe(1);
    expect(err).toContain("plan.stale");
    expect(err).toMatch(/slot\.rerank: running, spec sha256:[0-9a-f]{12}… when planned; now not running \(process exited/);
    expect(err).not.toContain("slot.chat");
    await run("apply", "--yes");
    expect((await run("plan", "--out", file)).code).toBe(0);
    const chat = join(config, "slots/chat.toml");
    writeFileSync(chat, readFileSync(chat, "utf8").replace("priority = 90", "priority = 91"));
    const edited = await run("apply", "--plan", file, "--yes");
    expect(edited.code).toBe(1);
    expect(edited.err).toMatch(/plan\.stale: .*\n  - config: the config changed since the plan was made \(sha256:/);
  });

  it("refuses a saved plan edited after hal0 wrote it (plan.invalid: it is not the plan made again, as hal0 writes it), and applies nothing", async () => {
    await run("apply", "--yes");
    const file = join(state, "edited-plan.json");
    expect((await run("plan", "--out", file)).code).toBe(0);
    const saved = JSON.parse(readFileSync(file, "utf8"));
    const before = readFileSync(join(state, "inventory.json"), "utf8");
    const chat = saved.changes.find((c: { address: string }) => c.address === "slot.chat");
    chat.after.port = 19199;
    writeFileSync(file, JSON.stringify(saved, null, 2));
    const edited = await run("apply", "--plan", file, "--yes");
    expect(edited.code).toBe(1);
    expect(edited.err).toMatch(/plan\.invalid: .*was changed after hal0 wrote it/);
    expect(readFileSync(join(state, "inventory.json"), "utf8")).toBe(before);
    // The same bytes as written (whitespace aside) still apply.
    chat.after.port = 8081;
    writeFileSync(file, JSON.stringify(saved));
    expect((await run("apply", "--plan", file, "--yes")).code).toBe(0);
  });

  it("a plan leaves hal0 with its secrets masked (text, --json, --out, apply, reconcile --json), and the masked file still applies with the real values", async () => {
    await run("apply", "--yes");
    const secret = "hf_" + "k".repeat(34);
    const embed = join(config, "slots/embed.toml");
    writeFileSync(embed, `${readFileSync(embed, "utf8")}env = { HF_TOKEN = "${secret}", GREETING = "hello" }\n`);
    const json = await run("plan", "--json");
    expect(json.code, json.err).toBe(0);
    expect(json.out).not.toContain(secret);
    expect(JSON.parse(json.out).changes.find((c: { address: string }) => c.address === "slot.embed").after.spec.env).toEqual({ GREETING: "hello", HF_TOKEN: "[redacted]" });
    // The text a person (or a CI log) reads too, plain and verbose.
    for (const args of [["plan"], ["plan", "--verbose"]]) {
      const text = await run(...args);
      expect(text.out).not.toContain(secret);
      expect(text.out).toContain("[redacted]");
    }
    const file = join(state, "secret-plan.json");
    expect((await run("plan", "--out", file)).code).toBe(0);
    expect(readFileSync(file, "utf8")).not.toContain(secret);
    const applied = await run("apply", "--plan", file, "--yes");
    expect(applied.code, applied.err).toBe(0);
    expect(applied.out + applied.err).not.toContain(secret);
    // The runner got the real value: the plan that ran was made again from the config.
    const environ = readFileSync(`/proc/${runtimePid("embed")}/environ`, "utf8").split("\0");
    expect(environ).toContain(`HF_TOKEN=${secret}`);
    started.push(runtimePid("embed"));
    // A new secret value is said as a change of value, not as a reordering.
    writeFileSync(embed, readFileSync(embed, "utf8").replace(secret, "hf_" + "m".repeat(34)));
    const rotated = await run("plan");
    expect(rotated.out).toContain('env.HF_TOKEN: "[redacted]" → "[redacted]" (another value)');
    expect(rotated.out).not.toContain("reordered");
    writeFileSync(embed, readFileSync(embed, "utf8").replace(/^env = .*\n/m, ""));
    const once = await run("reconcile", "--once", "--json");
    expect(once.code, once.err).toBe(0);
    expect(once.out).not.toContain(secret);
    expect(once.out).toContain("[redacted]");
  });

  it("status lists each slot's state, pid, port and spec", async () => {
    await run("apply", "--yes");
    const { code, out } = await run("status", "--json");
    expect(code).toBe(0);
    const rows = JSON.parse(out).slots as Array<{ name: string; state: string; pid: number | null; port: number }>;
    expect(rows.find((r) => r.name === "chat")).toMatchObject({ state: "ready", port: 8081 });
    const chat = (JSON.parse(out).slots as Array<{ name: string; conditions: Array<{ type: string; status: string; observedGeneration: number }> }>).find((r) => r.name === "chat")!;
    expect(chat.conditions.map((c) => `${c.type}=${c.status}`)).toEqual(["Ready=True", "Reconciling=False", "Stalled=False", "Degraded=False"]);
    expect(readFileSync(join(state, "conditions.json"), "utf8")).toContain('"slot.chat"');
    expect(rows.find((r) => r.name === "vision")).toMatchObject({ state: "offline", pid: null });
    for (const r of rows) if (r.pid) started.push(r.pid);
  });

  it("drift is empty once converged (exit 0)", async () => {
    const { code, out } = await run("drift");
    expect(code, out).toBe(0);
    expect(out).toBe("No drift.\n");
  });

  it("down leaves no process behind", async () => {
    const pids = Object.values((await desired()).slots).filter((s) => s.enabled).map((s) => runtimePid(s.name));
    // A settings change waiting for the next apply stays waiting: down stops slots, nothing else.
    const settings = join(config, "hal0.toml");
    const applied = readFileSync(join(state, "applied-settings.json"), "utf8");
    writeFileSync(settings, readFileSync(settings, "utf8").replace(/^ttl_s = \d+$/m, "ttl_s = 3600"));
    const { code, out } = await run("down");
    expect(code, out).toBe(0);
    expect(out).not.toMatch(/settings/);
    expect(readFileSync(join(state, "applied-settings.json"), "utf8")).toBe(applied);
    for (const pid of pids) expect(alive(pid), String(pid)).toBe(false);
    expect((await run("plan", "--detailed-exitcode")).code).toBe(2);
  });
});

describe("hal0 status of a slot disabled since its last step failed", () => {
  it("is offline with no last error, neither Stalled nor Degraded: that failure is nothing to fix (as slot_state says)", async () => {
    const { base, box, dir } = copiedBox("hal0-disabled-");
    // vision is disabled in the example box; its create failed before that (its model file was missing).
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(dir, "outcomes.json"), JSON.stringify({ vision: { ok: false, action: "create", code: "slot.spawn_failed", error: "exit 3", at: "2026-01-01T00:00:00.000Z" } }));
    const io = captureIo({}, process.cwd());
    expect(await main(["status", "--json", "--config", box, "--state", dir], io), io.err()).toBe(0);
    const vision = (JSON.parse(io.out()).slots as Array<{ name: string; state: string; last_error: string | null; conditions: Array<{ type: string; status: string }> }>).find((r) => r.name === "vision")!;
    expect(vision).toMatchObject({ enabled: false, state: "offline", last_error: null });
    expect(vision.conditions.map((c) => `${c.type}=${c.status}`)).toEqual(["Ready=False", "Reconciling=False", "Stalled=False", "Degraded=False"]);
    rmSync(base, { recursive: true, force: true });
  });
});

describe("hal0 apply --plan FILE with [models] pull_on_apply and a model not installed", () => {
  it("is refused before any pull (plan.stale): pulling registers the model in models.toml, which moves the config the saved plan was made from", async () => {
    const { base, box, dir } = copiedBox("hal0-pull-plan-");
    // qwen3-4b (slot utility) as a Hub file only; hal0 apply is to pull it first.
    const models = join(box, "models.toml");
    writeFileSync(models, readFileSync(models, "utf8").replace('[model."qwen3-4b"]\nname = "Qwen3 4B"\npath = "models/Qwen3-4B-Q4_K_M.gguf"\n', '[model."qwen3-4b"]\nname = "Qwen3 4B"\n'));
    const settings = join(box, "hal0.toml");
    writeFileSync(settings, readFileSync(settings, "utf8").replace(/^store = .*$/m, '$&\npull_on_apply = true'));
    const before = readFileSync(models, "utf8");
    // A Hub nobody answers at: a pull that starts fails (model.pull_failed), not plan.stale.
    const env = { HF_ENDPOINT: "http://127.0.0.1:9" };
    const plan = captureIo(env, process.cwd());
    expect(await main(["plan", "--out", join(base, "plan.json"), "--config", box, "--state", dir], plan), plan.err()).toBe(0);
    expect(plan.err()).toContain("note: model.not_installed: model qwen3-4b");
    const apply = captureIo(env, process.cwd());
    expect(await main(["apply", "--plan", join(base, "plan.json"), "--yes", "--config", box, "--state", dir], apply)).toBe(1);
    expect(apply.err()).toContain(`hal0 apply: plan.stale: ${join(base, "plan.json")} was planned while model qwen3-4b was not installed; [models] pull_on_apply would pull it first`);
    expect(apply.out()).not.toContain("pulling it first");
    expect(readFileSync(models, "utf8")).toBe(before);
    rmSync(base, { recursive: true, force: true });
  });
});

describe("a runner that prints a secret before it fails", () => {
  it("has its last lines masked wherever the CLI prints them: apply's progress and summary, reconcile --once, status and status SLOT (text and --json), the runner probe's notes, validate --runners and doctor", async () => {
    const { base, box, dir } = copiedBox("hal0-leak-");
    // One slot, whose runner prints the token it was given and exits: the failed start's message quotes the runner's last lines.
    for (const gone of ["slots", "stacks", "agents", "capabilities.toml", "upstreams.toml"]) rmSync(join(box, gone), { recursive: true, force: true });
    mkdirSync(join(box, "slots"));
    writeFileSync(join(box, "leak.sh"), '#!/bin/sh\necho "starting with token $HF_TOKEN"\nexit 3\n', { mode: 0o755 });
    writeFileSync(join(box, "profiles.toml"), `${readFileSync(join(box, "profiles.toml"), "utf8")}\n[profile.leaky]\nrunner = ["./leak.sh"]\ndevice_class = "cpu"\n`);
    const secret = "hf_abcdefghijklmnopqrstuvwx";
    const port = await freePort();
    const settings = join(box, "hal0.toml");
    writeFileSync(settings, readFileSync(settings, "utf8").replace(/^port_range_start = \d+$/m, `port_range_start = ${port}`).replace(/^port_range_end = \d+$/m, `port_range_end = ${port}`));
    writeFileSync(join(box, "slots", "leak.toml"), `profile = "leaky"\nmodel = "qwen3-4b"\nport = ${port}\ntype = "llm"\n\n[placement]\ndevice = "cpu"\n\n[server]\nenv = { HF_TOKEN = "${secret}" }\n`);
    const cli = async (...args: string[]) => {
      const io = captureIo({}, process.cwd());
      const code = await main([...args, "--config", box, "--state", dir], io);
      return { code, text: io.out() + io.err() };
    };
    const apply = await cli("apply", "--yes");
    expect(apply.code).toBe(1);
    expect(apply.text, apply.text).toContain("slot.spawn_failed");
    expect(apply.text).toContain("starting with token [redacted]");
    // The record itself keeps what the runner said (the state folder is the operator's); only what is printed is masked.
    expect(readFileSync(join(dir, "outcomes.json"), "utf8")).toContain(secret);
    // validate --runners and doctor run the runner with its slot's env too (--version), and quote what it printed.
    for (const args of [["status"], ["status", "--json"], ["status", "leak"], ["status", "leak", "--json"], ["reconcile", "--once"], ["reconcile", "--once", "--json"], ["validate", "--runners"], ["doctor"], ["doctor", "--json"], ["plan"]]) {
      const r = await cli(...args);
      // (status's table shows a last error's first line only: the runner's lines are not there to mask.)
      if (args.join(" ") !== "status") expect(r.text, args.join(" ")).toContain("[redacted]");
      expect(r.text, args.join(" ")).not.toContain(secret);
    }
    expect(apply.text).not.toContain(secret);
    await cli("down");
    rmSync(base, { recursive: true, force: true });
  });
});
