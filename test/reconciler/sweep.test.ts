import { spawn } from "node:child_process";
import { once } from "node:events";
import { appendFileSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it, onTestFinished, vi } from "vitest";
import { ProcessDriver } from "../../reconciler/drivers/process.js";
import { RUNNER_LOG_MAX_BYTES } from "../../reconciler/drivers/runtime-record.js";
import { acquireLock } from "../../reconciler/lock.js";
import { SweepLoop } from "../../reconciler/loop.js";
import { StateStore } from "../../reconciler/state.js";
import { Sweeper, type SweepReport } from "../../reconciler/sweep.js";
import { watchFolders } from "../../reconciler/tree-watch.js";
import type { SlotDriver } from "../../reconciler/index.js";
import { alive, freePort, RUNNER } from "./process-helpers.js";
import { until } from "../helpers/until.js";

const MODEL = join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");
const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** A one-slot box on a free port, a state folder, and a sweeper whose driver counts observe calls. */
async function box(opts: { model?: string; now?: () => number } = {}) {
  const root = mkdtempSync(join(tmpdir(), "hal0-sweep-"));
  const port = await freePort();
  mkdirSync(join(root, "slots"));
  writeFileSync(join(root, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 10\nstop_grace_s = 2\n`);
  writeFileSync(join(root, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
  writeFileSync(join(root, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(opts.model ?? MODEL)}\n`);
  writeSlot(root, port, 2048);
  const state = new StateStore(mkdtempSync(join(tmpdir(), "hal0-sweep-state-")));
  const real = new ProcessDriver({ stateDir: state.dir });
  const counts = { observe: 0 };
  const driver: SlotDriver = Object.assign(Object.create(real) as SlotDriver, {
    observe: () => {
      counts.observe++;
      return real.observe();
    },
  });
  const sweeper = new Sweeper({ root, state, driverFor: async () => driver, now: opts.now });
  cleanups.push(() => real.stop("s", 1));
  return { root, port, state, sweeper, counts };
}

function writeSlot(root: string, port: number, ctx: number): void {
  writeFileSync(join(root, "slots/s.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n[tune]\nctx_size = ${ctx}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "50" }\n`);
}

function pidOf(state: StateStore): number {
  return JSON.parse(readFileSync(join(state.dir, "slots/s/runtime.json"), "utf8")).pid;
}

function snapshot(dir: string): string[] {
  // runner.log is the runner's own output (it logs each /health probe), not a write of hal0's.
  return readdirSync(dir, { recursive: true }).map(String).filter((p) => !p.endsWith("runner.log")).sort().map((p) => `${p} ${statSync(join(dir, p)).mtimeMs}`);
}

describe("the sweep", () => {
  it("converges, then a sweep with nothing to do observes once and writes nothing", async () => {
    const { state, sweeper, counts } = await box();
    expect((await sweeper.sweep()).outcome).toBe("converged");
    const before = snapshot(state.dir);
    counts.observe = 0;
    const idle = await sweeper.sweep();
    expect(idle.outcome).toBe("nothing_to_do");
    expect(counts.observe).toBe(1);
    expect(snapshot(state.dir)).toEqual(before);
  });

  it("keeps each runner's log under its cap: a sweep moves one over it to runner.log.1, the runner untouched", async () => {
    const { state, sweeper } = await box();
    await sweeper.sweep();
    const pid = pidOf(state);
    const log = join(state.dir, "slots/s/runner.log");
    appendFileSync(log, Buffer.alloc(RUNNER_LOG_MAX_BYTES + 1, 0x61));
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
    expect(statSync(log).size).toBeLessThan(4096);
    expect(statSync(`${log}.1`).size).toBe(RUNNER_LOG_MAX_BYTES); // its last 16 MiB (no line ends in them: from the cut)
    expect(pidOf(state)).toBe(pid);
    expect(await alive(pid)).toBe(true);
  });

  it("keeps the last good model on a broken TOML edit: reports it and changes nothing", async () => {
    const { root, state, sweeper } = await box();
    await sweeper.sweep();
    const pid = pidOf(state);
    writeFileSync(join(root, "slots/s.toml"), "profile = \"fake\"\nport = [unterminated\n");
    const report = await sweeper.sweep();
    expect(report.outcome).toBe("invalid_config");
    expect(report.diagnostics.map((d) => `${d.file} ${d.code}`)).toEqual(["slots/s.toml config.parse_error"]);
    expect(sweeper.lastGoodModel?.slots.s).toBeDefined();
    expect(pidOf(state)).toBe(pid);
    expect(await alive(pid)).toBe(true);
  });

  it("a config folder emptied under it (a volume unmounted leaves its mount point) stops nothing: config.empty, the runner kept; the files back, it converges as before", async () => {
    const { root, state, sweeper } = await box();
    expect((await sweeper.sweep()).outcome).toBe("converged");
    const pid = pidOf(state);
    renameSync(root, `${root}.away`);
    mkdirSync(root);
    await expect(sweeper.sweep()).rejects.toMatchObject({ code: "config.empty", message: expect.stringContaining(`${root} holds no .toml file while 1 slot(s) hal0 started are in its inventory`) });
    expect(await alive(pid)).toBe(true);
    expect(Object.keys((await state.readInventory()).slots)).toEqual(["s"]);
    rmSync(root, { recursive: true });
    renameSync(`${root}.away`, root);
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
    expect(pidOf(state)).toBe(pid);
  });

  it("a runner that keeps dying soon after it is ready: each restart waits longer, the slot is CrashLoop, and 10 min of running ends the count", async () => {
    let clock = Date.parse("2026-12-01T10:00:00Z");
    const { state, sweeper } = await box({ now: () => clock });
    const crash = async () => {
      const pid = pidOf(state);
      process.kill(pid, "SIGKILL");
      await until(() => alive(pid), (up) => !up);
    };
    const degraded = async () => (await state.readConditions())["slot.s"]!.conditions.find((c) => c.type === "Degraded")!;
    expect((await sweeper.sweep()).outcome).toBe("converged");
    expect((await state.readOutcomes()).s!.restarts).toBeUndefined();

    // Dies 1 min after it was ready: started again at once, the first restart in a row.
    clock += 60_000;
    await crash();
    expect((await sweeper.sweep()).outcome).toBe("converged");
    expect((await state.readOutcomes()).s!.restarts).toBe(1);
    expect((await degraded()).status).toBe("False"); // one crash is no loop

    // Dies again at once: its restart waits 10 s.
    await crash();
    const held = await sweeper.sweep();
    expect(held.outcome).toBe("nothing_to_do");
    expect(held.deferred).toEqual([{ address: "slot.s", why: "slot.crash_loop: retry in 10 s (restart 1)" }]);
    clock += 10_000;
    expect((await sweeper.sweep()).outcome).toBe("converged");
    expect((await state.readOutcomes()).s!.restarts).toBe(2);
    expect(await degraded()).toMatchObject({ status: "True", reason: "CrashLoop" });
    expect((await degraded()).message).toContain("waits 20 s");

    // The next wait doubles, from the restart: it died 5 s after it.
    clock += 5_000;
    await crash();
    expect((await sweeper.sweep()).deferred).toEqual([{ address: "slot.s", why: "slot.crash_loop: retry in 15 s (restart 2)" }]);
    clock += 15_000;
    expect((await sweeper.sweep()).outcome).toBe("converged");
    expect((await state.readOutcomes()).s!.restarts).toBe(3);

    // Ran 10 min: no longer a loop (the condition clears on the next sweep), and its next death is restarted at once, uncounted.
    clock += 10 * 60_000;
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do");
    expect((await degraded()).status).toBe("False");
    await crash();
    expect((await sweeper.sweep()).outcome).toBe("converged");
    expect((await state.readOutcomes()).s!.restarts).toBeUndefined();
  });

  it("backs off a transient failure, and retries at once when the spec changes", async () => {
    const { root, port, sweeper } = await box();
    const blocker: Server = createServer().listen(port, "127.0.0.1");
    await once(blocker, "listening");
    cleanups.push(() => new Promise((r) => blocker.close(r)));
    const first = await sweeper.sweep();
    expect(first.outcome).toBe("failed");
    expect(first.results.find((r) => r.address === "slot.s")).toMatchObject({ ok: false, code: "slot.port_in_use" });
    const second = await sweeper.sweep();
    expect(second.outcome).toBe("nothing_to_do");
    expect(second.deferred).toEqual([{ address: "slot.s", why: expect.stringMatching(/^slot\.port_in_use: retry in 1 s \(failure 1\)$/) }]);
    await new Promise((r) => blocker.close(r));
    writeSlot(root, port, 4096);
    expect((await sweeper.sweep()).outcome).toBe("converged");
  });

  it("a step of the wall clock neither holds a failed slot back for as long nor lets it retry at once: the backoff runs on the monotonic clock", async () => {
    // Only Date is faked, ticking on from where it is set, as a clock NTP steps does; timers and the runner stay real.
    vi.useFakeTimers({ toFake: ["Date"], shouldAdvanceTime: true });
    onTestFinished(() => void vi.useRealTimers());
    const { port, sweeper } = await box();
    const blocker: Server = createServer().listen(port, "127.0.0.1");
    await once(blocker, "listening");
    cleanups.push(() => new Promise((r) => blocker.close(r)));
    expect((await sweeper.sweep()).results.find((r) => r.address === "slot.s")).toMatchObject({ ok: false, code: "slot.port_in_use" });
    const held = [{ address: "slot.s", why: expect.stringMatching(/^slot\.port_in_use: retry in 1 s \(failure 1\)$/) }];
    const day = 24 * 3600_000;
    vi.setSystemTime(Date.now() + day); // a day ahead: not a day of waiting done
    expect((await sweeper.sweep()).deferred).toEqual(held);
    vi.setSystemTime(Date.now() - 2 * day); // a day behind: not a day more to wait
    expect((await sweeper.sweep()).deferred).toEqual(held);
  });

  it("holds a failure that needs a fix for 30 s; a new spec is tried at once", async () => {
    const { root, port, sweeper } = await box({ model: "/nonexistent/model.gguf" });
    expect((await sweeper.sweep()).results.find((r) => r.address === "slot.s")).toMatchObject({ code: "slot.spawn_failed" });
    await sleep(1100);
    expect((await sweeper.sweep()).deferred[0]?.why).toMatch(/^slot\.spawn_failed: retry in (29|30) s \(failure 1\), or at once when its spec changes or on a reload$/);
    writeFileSync(join(root, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(MODEL)}\n`);
    writeSlot(root, port, 2048);
    expect((await sweeper.sweep()).outcome).toBe("converged");
  });

  it("a fix on the host (the model file put in place) is tried at once on a reload (retryNow), without a spec change", async () => {
    const missing = join(mkdtempSync(join(tmpdir(), "hal0-sweep-model-")), "later.gguf");
    const { sweeper } = await box({ model: missing });
    expect((await sweeper.sweep()).results.find((r) => r.address === "slot.s")).toMatchObject({ code: "slot.spawn_failed" });
    copyFileSync(MODEL, missing);
    expect((await sweeper.sweep()).outcome).toBe("nothing_to_do"); // backing off: hal0 cannot see the fix
    sweeper.retryNow();
    expect((await sweeper.sweep()).outcome).toBe("converged");
  });
});

/** A one-slot box with a running sweep loop (interval far away), after its first converging sweep. */
async function convergedLoop(checkMs?: number, debounceMs?: number) {
  const b = await box();
  const reports: SweepReport[] = [];
  const loop = new SweepLoop(b.sweeper, { root: b.root, intervalS: () => 3600, onReport: (r) => reports.push(r), checkMs, debounceMs });
  loop.start();
  cleanups.push(() => loop.stop());
  await waitFor(() => reports.some((r) => r.outcome === "converged"));
  return { ...b, reports };
}

describe("the sweep loop", () => {
  it("sweeps on start and again once the tree holds still after a .toml changes", async () => {
    const { root, port, state, reports } = await convergedLoop();
    const pid = pidOf(state);
    await sleep(300);
    writeSlot(root, port, 8192);
    await waitFor(() => reports.filter((r) => r.outcome === "converged").length >= 2);
    expect(pidOf(state)).not.toBe(pid);
    expect(reports.at(-1)?.plan?.changes.find((c) => c.address === "slot.s")?.changed_paths).toContain("tune.ctx_size");
  });

  it("thousands of slot files copied in at once (cp of a folder, by another process): one sweep, of the whole copy, not sweeps of parts of it", async () => {
    const { root, port, reports } = await convergedLoop();
    const from = mkdtempSync(join(tmpdir(), "hal0-sweep-many-"));
    for (let i = 0; i < 3000; i++) writeFileSync(join(from, `m${i}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${port}\nenabled = false\n`);
    await sleep(300);
    const seen = reports.length;
    const copy = spawn("sh", ["-c", `cp ${from}/*.toml ${join(root, "slots")}/`], { stdio: "ignore" });
    await once(copy, "exit");
    const slotsIn = (r: SweepReport) => r.plan?.changes.filter((c) => c.kind === "slot").length;
    await waitFor(() => reports.length > seen && slotsIn(reports.at(-1)!) === 3001, 60_000);
    await sleep(1500);
    // One sweep of the whole copy (before, ten or so as its events came in, some over a file cp had made and not yet
    // written: invalid_config, no plan). A machine that stops cp for longer than the quiet time may see one part first.
    const counts = reports.slice(seen).map(slotsIn);
    expect(counts).not.toContain(undefined);
    expect(counts.at(-1)).toBe(3001);
    expect(counts.length).toBeLessThanOrEqual(2);
  }, 90_000);

  it("an edit swept while another apply holds the lock is swept again once that apply ends, not an interval later", async () => {
    // The interval is an hour: only the loop's own retry can start the second sweep.
    const { root, port, state, reports } = await convergedLoop(300);
    const pid = pidOf(state);
    // Another apply (hal0 apply, hal0 down, a slot restart) holds the state folder while the edit is made.
    const release = await acquireLock(state.dir, "hal0 apply --yes (another)");
    let released = false;
    cleanups.push(() => (released ? undefined : release()));
    const seen = reports.length;
    writeSlot(root, port, 8192);
    await waitFor(() => reports.length > seen);
    expect(reports.slice(seen).map((r) => r.outcome)).toEqual(["locked"]);
    expect(pidOf(state)).toBe(pid);
    // While it holds the lock, nothing is swept again: the loop waits for the holder, not on it.
    await sleep(1000);
    expect(reports.slice(seen).map((r) => r.outcome)).toEqual(["locked"]);
    await release();
    released = true;
    await waitFor(() => reports.some((r, i) => i > seen && r.outcome === "converged"));
    expect(reports.slice(seen).map((r) => r.outcome)).toEqual(["locked", "converged"]);
    expect(pidOf(state)).not.toBe(pid);
  });

  it("files hal0 does not read start no sweep: an editor's lock (.#s.toml), a copy's AppleDouble (._s.toml); the edit itself is one sweep", async () => {
    const { root, port, reports } = await convergedLoop(300);
    const seen = reports.length;
    symlinkSync("root@box.4242:1700000000", join(root, "slots/.#s.toml"));
    writeFileSync(join(root, "slots/._s.toml"), "\0\u0005\u0016\u0007");
    writeFileSync(join(root, ".hal0.toml"), "junk");
    await sleep(300);
    rmSync(join(root, "slots/.#s.toml"));
    // Quiet for longer than the debounce and several checks: any sweep these started has run.
    await sleep(1200);
    expect(reports.length).toBe(seen);
    writeSlot(root, port, 6144);
    await waitFor(() => reports.length > seen);
    await sleep(1200);
    expect(reports.map((r) => r.outcome).slice(seen)).toEqual(["converged"]);
  });
});

describe("the sweep loop when what it watches goes away and comes back", () => {
  // The interval is an hour: only the watcher, or the check for what it missed, can start these sweeps.
  it("a folder moved away and back: the next edit is swept", async () => {
    const { root, port, state, reports } = await convergedLoop(300);
    const pid = pidOf(state);
    renameSync(join(root, "slots"), join(root, "slots.away"));
    await waitFor(() => reports.at(-1)?.outcome === "invalid_config" || reports.some((r) => r.plan?.changes.some((c) => c.action === "delete")));
    renameSync(join(root, "slots.away"), join(root, "slots"));
    await sleep(800);
    const seen = reports.length;
    writeSlot(root, port, 8192);
    await waitFor(() => reports.length > seen && reports.at(-1)?.plan?.changes.find((c) => c.address === "slot.s")?.changed_paths.includes("tune.ctx_size") === true);
    expect(pidOf(state)).not.toBe(pid);
  });

  it("the config folder itself replaced: the next edit is swept", async () => {
    const { root, port, reports } = await convergedLoop(300);
    renameSync(root, `${root}.away`);
    await sleep(400);
    renameSync(`${root}.away`, root);
    await sleep(800);
    const seen = reports.length;
    writeSlot(root, port, 4096);
    await waitFor(() => reports.length > seen && reports.at(-1)?.plan?.changes.find((c) => c.address === "slot.s")?.changed_paths.includes("tune.ctx_size") === true);
  });

  it("a linked slot file whose target an editor replaces (write, then rename over it): each edit is swept", async () => {
    const { root, port, reports } = await convergedLoop(300);
    const dotfiles = mkdtempSync(join(tmpdir(), "hal0-sweep-dotfiles-"));
    const target = join(dotfiles, "s.toml");
    copyFileSync(join(root, "slots/s.toml"), target);
    rmSync(join(root, "slots/s.toml"));
    symlinkSync(target, join(root, "slots/s.toml"));
    for (const ctx of [3072, 5120]) {
      await sleep(500);
      const seen = reports.length;
      writeFileSync(`${target}.tmp`, readFileSync(target, "utf8").replace(/ctx_size = \d+/, `ctx_size = ${ctx}`));
      renameSync(`${target}.tmp`, target);
      await waitFor(() => reports.length > seen && (reports.at(-1)?.plan?.changes.find((c) => c.address === "slot.s")?.after as { tune?: { ctx_size?: number } } | null)?.tune?.ctx_size === ctx);
    }
    expect(port).toBeGreaterThan(0);
  });

  it("a resource folder removed and made again (rm -rf slots, then restored): the watcher alone sees the files of the new one", async () => {
    // The check for what the watcher missed runs once an hour here: only the watcher can start these sweeps.
    const { root, port, reports } = await convergedLoop(3_600_000);
    rmSync(join(root, "slots"), { recursive: true });
    await waitFor(() => reports.some((r) => r.plan?.changes.some((c) => c.address === "slot.s" && c.action === "delete")));
    await sleep(300);
    mkdirSync(join(root, "slots"));
    await sleep(300);
    const seen = reports.length;
    writeSlot(root, port, 7168);
    await waitFor(() => reports.length > seen && reports.at(-1)?.plan?.changes.find((c) => c.address === "slot.s")?.action === "create");
    // And the next edit in it.
    await sleep(300);
    const again = reports.length;
    writeSlot(root, port, 6144);
    await waitFor(() => reports.length > again && reports.at(-1)?.plan?.changes.find((c) => c.address === "slot.s")?.changed_paths.includes("tune.ctx_size") === true);
  });

  it("a config folder that is a symbolic link switched to another folder: the switch is swept, and each later edit there is seen by the watcher, not the check", async () => {
    const b = await box();
    const base = mkdtempSync(join(tmpdir(), "hal0-sweep-link-"));
    const other = join(base, "other");
    cpSync(b.root, other, { recursive: true });
    const link = join(base, "config");
    symlinkSync(b.root, link);
    const reports: SweepReport[] = [];
    // Another watcher of the same folders in the process (hal0 serve's reads watch them too).
    const reader = watchFolders([join(link, "slots")], () => {});
    cleanups.push(() => reader.close());
    const sweeper = new Sweeper({ root: link, state: b.state, driverFor: async () => new ProcessDriver({ stateDir: b.state.dir }) });
    const loop = new SweepLoop(sweeper, { root: link, intervalS: () => 3600, onReport: (r) => reports.push(r), checkMs: 300 });
    loop.start();
    cleanups.push(() => loop.stop());
    await waitFor(() => reports.some((r) => r.outcome === "converged"));
    const ctxOf = (r: SweepReport | undefined) => (r?.plan?.changes.find((c) => c.address === "slot.s")?.after as { tune?: { ctx_size?: number } } | null)?.tune?.ctx_size;
    writeSlot(other, b.port, 3072);
    renameSync(link, `${link}.old`);
    symlinkSync(other, link);
    await waitFor(() => ctxOf(reports.at(-1)) === 3072);
    await sleep(500);
    const watches = loop.watches;
    for (const ctx of [4096, 5120]) {
      const seen = reports.length;
      writeSlot(other, b.port, ctx);
      await waitFor(() => reports.length > seen && ctxOf(reports.at(-1)) === ctx);
      // The watcher saw it: the check found nothing it missed, so it did not set the watcher up again.
      expect(loop.watches).toBe(watches);
    }
  });

  it("a folder made after the start (mcp-servers/): a bad file in it is reported", async () => {
    const { root, reports } = await convergedLoop(300);
    mkdirSync(join(root, "mcp-servers"));
    writeFileSync(join(root, "mcp-servers/x.toml"), "bogus = 1\n");
    await waitFor(() => reports.at(-1)?.outcome === "invalid_config");
    expect(reports.at(-1)!.diagnostics.map((d) => d.file)).toContain("mcp-servers/x.toml");
  });
});

describe("the sweep loop with a broken edit", () => {
  it("reports the diagnostics, changes nothing, and converges once the file is fixed", async () => {
    const { root, port, state, reports } = await convergedLoop();
    const pid = pidOf(state);
    await sleep(200);
    writeFileSync(join(root, "slots/s.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n[tune\nctx_size = 1\n`);
    await waitFor(() => reports.some((r) => r.outcome === "invalid_config"));
    expect(reports.at(-1)!.diagnostics[0]).toMatchObject({ file: "slots/s.toml", code: "config.parse_error", line: 4 });
    expect(pidOf(state)).toBe(pid);
    expect(await alive(pid)).toBe(true);
    writeSlot(root, port, 3072);
    await waitFor(() => reports.at(-1)?.outcome === "converged");
    expect(pidOf(state)).not.toBe(pid);
  });
});

describe("the sweep loop with a file it cannot read", () => {
  it("says why in each diagnostic's one line (what the sweep's log line prints): UTF-16, a link that leads nowhere, a folder", async () => {
    const { root, port, reports } = await convergedLoop();
    const lines = () => reports.at(-1)!.diagnostics.map((d) => `${d.file}:${d.line}:${d.column}: ${d.code}: ${d.summary}`);
    // Saved as UTF-16 (Windows PowerShell's redirect, Notepad's "Unicode").
    writeFileSync(join(root, "slots/s.toml"), Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(`profile = "fake"\n`, "utf16le")]));
    symlinkSync("/nonexistent/x.toml", join(root, "slots/x.toml"));
    mkdirSync(join(root, "slots/y.toml"));
    await waitFor(() => reports.at(-1)?.outcome === "invalid_config" && reports.at(-1)!.diagnostics.length === 3);
    expect(lines()).toEqual([
      "slots/s.toml:1:1: config.read_error: cannot read slots/s.toml: it is UTF-16 text, not UTF-8",
      "slots/x.toml:1:1: config.read_error: cannot read slots/x.toml: a symbolic link that leads to no file",
      "slots/y.toml:1:1: config.read_error: cannot read slots/y.toml: it is a folder",
    ]);
    expect(port).toBeGreaterThan(0);
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error("timed out waiting");
    await sleep(50);
  }
}
