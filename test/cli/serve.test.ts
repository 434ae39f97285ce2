import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { once } from "node:events";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { httpCall } from "../server/harness.js";
import { deadPid, killMidWrite } from "../reconciler/kill-write.js";
import { freePort, PROJECT, RUNNER } from "../reconciler/process-helpers.js";
import { captureIo, healthWithin, startServe } from "./helpers.js";
import { openDb } from "../../server/db.js";
import { TokenStore } from "../../server/identity/tokens.js";

const HAL0 = join(PROJECT, "bin/hal0.js");

/** A one-slot box on the process runtime (the fake runner), with its slot disabled. */
async function smallBox(): Promise<{ config: string; state: string; port: number }> {
  const base = mkdtempSync(join(tmpdir(), "hal0-serve-"));
  const config = join(base, "box");
  mkdirSync(join(config, "slots"), { recursive: true });
  const port = await freePort();
  copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
  writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n[reconcile]\ninterval_s = 3600\n`);
  writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
  writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
  writeFileSync(join(config, "slots/solo.toml"), `# the one slot\nprofile = "fake"\nmodel = "tiny"\nport = ${port}\nenabled = false\n`);
  return { config, state: join(base, "state"), port };
}


const exitOf = (child: ChildProcess) => new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

/** A test's clean-up: its serve stopped first (one a failed test left running would start the slot again), then `hal0 down`. */
async function downAfter(child: ChildProcess, config: string, state: string): Promise<unknown> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = exitOf(child);
    child.kill("SIGTERM");
    await exited;
  }
  return main(["down", "--config", config, "--state", state], captureIo());
}

describe("hal0 serve (a real process)", () => {
  const cleanup: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const c of cleanup) await c();
  });

  it("serves the API with JSON-line request logs, and exits 0 on SIGTERM", async () => {
    const { config, state } = await smallBox();
    const { child, url, lines } = await startServe(config, state, ["--no-reconcile"]);
    // The first start made the operator's token: 0600 in a 0700 state folder.
    const tokenFile = join(state, "operator.token");
    expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
    expect(statSync(state).mode & 0o777).toBe(0o700);
    const token = readFileSync(tokenFile, "utf8").trim();
    expect(token).toMatch(/^hal0_op_[A-Za-z0-9_-]{32}$/);
    const res = await httpCall(url, "GET", "/api/plans", { headers: { authorization: `Bearer ${token}`, "x-request-id": "abc" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-request-id")).toBe("abc");
    expect((await httpCall(url, "POST", "/api/plans", { body: { edits: [] } })).status).toBe(401);
    const exited = exitOf(child);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    const log = lines();
    expect(log.find((l) => l.msg === "request")).toMatchObject({ reqId: "abc", caller: "operator:owner", route: "GET /api/plans", status: 200 });
    expect(JSON.stringify(log)).not.toContain(token);
    expect(typeof log.find((l) => l.msg === "request").ms).toBe("number");
    expect(log.at(-1).msg).toBe("hal0 serve stopped");
  }, 30_000);

  it("a hal0 reconcile loop already on the state folder keeps a hal0 serve with its own loop (and a second reconcile loop) out, since two loops undo each other's sweeps; --no-reconcile starts", async () => {
    const { config, state } = await smallBox();
    const looping = spawn(process.execPath, [HAL0, "reconcile", "--config", config, "--state", state], { stdio: "ignore" });
    cleanup.push(() => downAfter(looping, config, state));
    const lockFile = join(state, "reconcile.lock");
    for (let i = 0; i < 200 && !existsSync(lockFile); i++) await new Promise((r) => setTimeout(r, 50));
    expect(JSON.parse(readFileSync(lockFile, "utf8"))).toMatchObject({ pid: looping.pid, command: "hal0 reconcile" });
    const second = captureIo();
    expect(await main(["reconcile", "--config", config, "--state", state], second)).toBe(1);
    expect(second.err()).toContain(`hal0 reconcile: server.already_running: \`hal0 reconcile\` (pid ${looping.pid} on `);
    const served = spawn(process.execPath, [HAL0, "serve", "--config", config, "--state", state, "--port", "0"], { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    served.stderr!.on("data", (c: Buffer) => (err += c.toString()));
    expect(await exitOf(served)).toBe(1);
    expect(err).toContain(`server.already_running: \`hal0 reconcile\` (pid ${looping.pid} on `);
    expect(err).toContain("start hal0 serve with --no-reconcile");
    const api = await startServe(config, state, ["--no-reconcile"]);
    const down = captureIo();
    expect(await main(["down", "--config", config, "--state", state], down)).toBe(0);
    expect(down.err()).toContain(`note: hal0 reconcile (pid ${looping.pid}) runs the reconcile loop on this state folder`);
    for (const child of [api.child, looping]) {
      const exited = exitOf(child);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
    expect(existsSync(lockFile)).toBe(false);
  }, 60_000);

  it("runs the sweep in-process: a change applied over REST converges the slot; hal0 reconcile's loop does not start beside it", async () => {
    const { config, state, port } = await smallBox();
    const { child, url } = await startServe(config, state);
    const io = captureIo();
    expect(await main(["reconcile", "--config", config, "--state", state], io)).toBe(1);
    expect(io.err()).toContain(`hal0 reconcile: server.already_running: hal0 serve (pid ${child.pid} at ${url}/) already runs the reconcile loop on this state folder; run 'hal0 reconcile --once'`);
    cleanup.push(() => downAfter(child, config, state));
    // One sweep still runs beside the loop; the server's own first sweep may hold the apply lock a moment (apply.locked): tried again.
    let once = captureIo();
    for (let tries = 0; tries < 50; tries++) {
      once = captureIo();
      if ((await main(["reconcile", "--once", "--config", config, "--state", state], once)) === 0) break;
      expect(once.out()).toContain("sweep: locked: apply.locked");
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(once.out()).not.toContain("apply.locked");
    const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    const planned = await httpCall(url, "POST", "/api/plans", { body: { edits: [{ file: "slots/solo.toml", op: "set", path: ["enabled"], value: true }] }, headers });
    expect(planned.body.valid).toBe(true);
    expect((await httpCall(url, "POST", `/api/plans/${planned.body.id}/apply`, { headers })).status).toBe(200);
    expect(readFileSync(join(config, "slots/solo.toml"), "utf8")).toMatch(/^# the one slot\n/);
    expect(await healthWithin(port, 20_000)).toBe(200);
    // hal0 down beside the loop stops the slot, and says the loop will start it again.
    // (The server's own sweep may still hold the apply lock: down is then refused with apply.locked, and tried again.)
    let down = captureIo();
    for (let tries = 0; tries < 50; tries++) {
      down = captureIo();
      if ((await main(["down", "--config", config, "--state", state], down)) === 0) break;
      expect(down.err()).toContain("apply.locked");
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(down.err()).toContain(`note: hal0 serve (pid ${child.pid} at ${url}/) runs the reconcile loop on this state folder: its next sweep starts the enabled slots again`);
    const exited = exitOf(child);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 60_000);

  it("plan and apply with another config folder on the state folder a serve's loop runs on say that its next sweep undoes them; the same folder is not noted", async () => {
    const { config, state } = await smallBox();
    const { child, url } = await startServe(config, state);
    cleanup.push(() => downAfter(child, config, state));
    const other = mkdtempSync(join(tmpdir(), "hal0-other-box-"));
    writeFileSync(join(other, "hal0.toml"), "");
    const note = `note: hal0 serve (pid ${child.pid} at ${url}/) runs the reconcile loop on this state folder for the config folder ${config}, not ${other}: its next sweep converges the box back to that folder`;
    // The server's own sweep may hold the apply lock a moment: apply is then refused with apply.locked, and tried again.
    const run = async (args: string[]) => {
      for (let tries = 0; ; tries++) {
        const io = captureIo();
        const code = await main(args, io);
        if (code === 0 || tries > 50 || !io.err().includes("apply.locked")) return { code, err: io.err() };
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    for (const command of [["plan"], ["apply", "--yes"]]) {
      const elsewhere = await run([...command, "--config", other, "--state", state]);
      expect(elsewhere.code, elsewhere.err).toBe(0);
      expect(elsewhere.err).toContain(note);
      const same = await run([...command, "--config", config, "--state", state]);
      expect(same.code, same.err).toBe(0);
      expect(same.err).not.toContain("runs the reconcile loop");
    }
    // The same folder by another name (a symlink to it) is the same folder: no note.
    const alias = join(mkdtempSync(join(tmpdir(), "hal0-alias-")), "box");
    symlinkSync(config, alias);
    const viaLink = await run(["plan", "--config", alias, "--state", state]);
    expect(viaLink.code, viaLink.err).toBe(0);
    expect(viaLink.err).not.toContain("runs the reconcile loop");
  }, 60_000);

  it("the sweep's log line says what is undone and what was done: a hand edit's error at file:line:col, the fix, a failed step with its code, the steps it took", async () => {
    const { config, state, port } = await smallBox();
    const { child, lines } = await startServe(config, state);
    cleanup.push(() => downAfter(child, config, state));
    const sweeps = () => lines().filter((l) => l.msg === "sweep");
    const logged = async (what: string, found: (l: any) => boolean) => {
      for (let i = 0; i < 200 && !sweeps().some(found); i++) await new Promise((r) => setTimeout(r, 50));
      expect(sweeps().find(found), `${what}: ${JSON.stringify(sweeps())}`).toBeDefined();
      return sweeps().find(found);
    };
    // A person breaks the slot file (the watcher runs a sweep): a warning at the error's place.
    const slot = join(config, "slots/solo.toml");
    writeFileSync(slot, readFileSync(slot, "utf8").replace(`port = ${port}`, 'port = "x"'));
    const invalid = await logged("invalid_config", (l) => l.sweep === "invalid_config");
    expect(invalid).toMatchObject({ level: 40, diagnostics: 1, errors: ["slots/solo.toml:4:8: config.invalid_type: expected an integer, found a string"] });
    // Fixed: the next sweep's line says so, at info, so the log's last word is not the error.
    writeFileSync(slot, readFileSync(slot, "utf8").replace('port = "x"', `port = ${port}`));
    await logged("fixed", (l) => l.level === 30 && l.time > invalid.time);
    // Broken and fixed again, with nothing left to do: "nothing_to_do" is said once, after the error.
    writeFileSync(slot, readFileSync(slot, "utf8").replace(`port = ${port}`, 'port = "y"'));
    const again = await logged("invalid again", (l) => l.sweep === "invalid_config" && l.time > invalid.time);
    writeFileSync(slot, readFileSync(slot, "utf8").replace('port = "y"', `port = ${port}`));
    expect(await logged("settled", (l) => l.sweep === "nothing_to_do" && l.time > again.time)).toMatchObject({ level: 30, diagnostics: 0 });
    // The slot enabled on a port that is taken: the failed step, by address, code and message.
    const holder = createServer().listen(port, "127.0.0.1");
    await once(holder, "listening");
    let failedAt = "";
    try {
      writeFileSync(slot, readFileSync(slot, "utf8").replace("enabled = false", "enabled = true"));
      const failed = await logged("failed step", (l) => Array.isArray(l.failed));
      failedAt = failed.time;
      expect(failed).toMatchObject({ level: 40, failed: [{ address: "slot.solo", code: "slot.port_in_use", message: expect.stringContaining(String(port)) }] });
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
    // Freed, and retried at once (a reload): what the sweep did, each step with why.
    child.kill("SIGHUP");
    const converged = await logged("converged", (l) => l.sweep === "converged" && l.time > failedAt);
    expect(converged).toMatchObject({ level: 30, done: [expect.stringMatching(/^create slot\.solo \((new|not_running)\)$/)] });
    const exited = exitOf(child);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 30_000);

  it("SIGHUP reads the tree again and asks for a sweep (systemctl reload hal0); the server stays up", async () => {
    const { config, state } = await smallBox();
    const { child, url, lines } = await startServe(config, state);
    const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    const sweeps = async () => {
      const text = (await httpCall(url, "GET", "/metrics", { headers })).body as string;
      return [...text.matchAll(/^hal0_sweeps_total\{outcome="[a-z_]+"\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
    };
    // The first sweep at start; then, with interval_s = 3600 and no file change, none but the one SIGHUP asks for.
    for (let i = 0; i < 100 && (await sweeps()) < 1; i++) await new Promise((r) => setTimeout(r, 50));
    const before = await sweeps();
    child.kill("SIGHUP");
    for (let i = 0; i < 100 && (await sweeps()) === before; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await sweeps()).toBe(before + 1);
    expect(lines().find((l) => l.msg === "reload: the config tree read again; a sweep is asked, failing slots tried again at once")).toMatchObject({ revision: expect.stringMatching(/^rev_/), errors: 0 });
    expect((await httpCall(url, "GET", "/api/status", { headers })).status).toBe(200);
    const exited = exitOf(child);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 30_000);

  it("a runner installed after its slot failed to start runs at the next SIGHUP, not minutes later", async () => {
    const { config, state, port } = await smallBox();
    const runner = join(config, "..", "bin", "late-runner");
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = [${JSON.stringify(runner)}]\ndevice_class = "cpu"\n`);
    const slot = join(config, "slots/solo.toml");
    writeFileSync(slot, readFileSync(slot, "utf8").replace("enabled = false", "enabled = true"));
    const { child, lines } = await startServe(config, state);
    cleanup.push(() => downAfter(child, config, state));
    for (let i = 0; i < 200 && !lines().some((l) => l.msg === "sweep" && l.failed); i++) await new Promise((r) => setTimeout(r, 50));
    expect(lines().find((l) => l.msg === "sweep" && l.failed)?.failed).toEqual([expect.objectContaining({ address: "slot.solo", code: "slot.spawn_failed" })]);
    // The person installs the runner, then reloads.
    mkdirSync(dirname(runner), { recursive: true });
    writeFileSync(runner, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(RUNNER)} "$@"\n`);
    chmodSync(runner, 0o755);
    child.kill("SIGHUP");
    expect(await healthWithin(port, 20_000)).toBe(200);
    const exited = exitOf(child);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 40_000);

  it("an agent's settings_reload keeps a failing slot's backoff and says until when; an operator's reload tries it at once", async () => {
    const { config, state } = await smallBox();
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = [${JSON.stringify(join(config, "..", "bin", "missing-runner"))}]\ndevice_class = "cpu"\n`);
    const slot = join(config, "slots/solo.toml");
    writeFileSync(slot, readFileSync(slot, "utf8").replace("enabled = false", "enabled = true"));
    const { child, url, lines } = await startServe(config, state);
    cleanup.push(() => downAfter(child, config, state));
    const failures = () => lines().filter((l) => l.msg === "sweep" && l.failed?.some((f: { address: string }) => f.address === "slot.solo")).length;
    const sweeps = () => lines().filter((l) => l.msg === "sweep").length;
    for (let i = 0; i < 200 && failures() === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(failures()).toBe(1);
    const db = openDb(state);
    const agent = new TokenStore(db, state).mint("agent", "looper", ["rest"]).token;
    db.close();
    // An agent looping on reload: each call asks for a sweep, none tries the slot before its backoff ends.
    for (let call = 0; call < 3; call++) {
      const before = sweeps();
      const res = await httpCall(url, "POST", "/api/settings/reload", { headers: { authorization: `Bearer ${agent}` } });
      expect(res.status).toBe(200);
      expect(res.body.backoff_kept).toEqual([expect.objectContaining({ code: "slot.backoff_kept", address: "slot.solo", reason: "slot.spawn_failed" })]);
      expect(Date.parse(res.body.backoff_kept[0].retry_at)).toBeGreaterThan(Date.now());
      for (let i = 0; i < 200 && sweeps() === before; i++) await new Promise((r) => setTimeout(r, 50));
    }
    expect(failures()).toBe(1);
    // The operator's reload (the host fixed) tries it at once.
    const operator = readFileSync(join(state, "operator.token"), "utf8").trim();
    const forced = await httpCall(url, "POST", "/api/settings/reload", { headers: { authorization: `Bearer ${operator}` } });
    expect(forced.body.backoff_kept).toBeUndefined();
    for (let i = 0; i < 200 && failures() === 1; i++) await new Promise((r) => setTimeout(r, 50));
    expect(failures()).toBe(2);
  }, 40_000);

  it("refuses a port that is taken, with a coded error", async () => {
    const { config, state } = await smallBox();
    const first = await startServe(config, state, ["--no-reconcile"]);
    const port = new URL(first.url).port;
    const io = captureIo();
    expect(await main(["serve", "--config", config, "--state", `${state}-2`, "--port", port, "--no-reconcile"], io)).toBe(1);
    expect(io.err()).toContain("server.port_in_use");
    const exited = exitOf(first.child);
    first.child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 30_000);

  it("a start that fails on a busy port leaves no state folder it made: no hal0.db, no new operator token (a mistyped --state left both)", async () => {
    const { config, state } = await smallBox();
    const holder = createServer().listen(0, "127.0.0.1");
    await once(holder, "listening");
    try {
      const port = String((holder.address() as { port: number }).port);
      const typo = `${state}-typo`;
      const io = captureIo();
      expect(await main(["serve", "--config", config, "--state", join(typo, "state"), "--port", port, "--no-reconcile"], io)).toBe(1);
      expect(io.err()).toContain("server.port_in_use");
      expect(existsSync(typo)).toBe(false);
      // The same folder, now with the port free: made again from nothing, and served.
      holder.close();
      await once(holder, "close");
      const served = await startServe(config, join(typo, "state"), ["--no-reconcile"]);
      expect(existsSync(join(typo, "state", "operator.token"))).toBe(true);
      const exited = exitOf(served.child);
      served.child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (holder.listening) holder.close();
    }
  }, 30_000);

  it("one hal0 serve per state folder: a second exits 1 at once naming the first, which serves on; a killed one's lock is taken over", async () => {
    const { config, state } = await smallBox();
    const first = await startServe(config, state, ["--no-reconcile"]);
    const lock = JSON.parse(readFileSync(join(state, "serve.lock"), "utf8"));
    expect(lock).toMatchObject({ pid: first.child.pid, url: `${first.url}/`, command: "hal0 serve" });
    const second = spawn(process.execPath, [HAL0, "serve", "--config", config, "--state", state, "--port", "0", "--no-reconcile"], { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    second.stderr!.on("data", (c: Buffer) => (err += c.toString()));
    const killer = setTimeout(() => second.kill("SIGKILL"), 20_000);
    expect(await exitOf(second)).toBe(1);
    clearTimeout(killer);
    expect(err).toContain(`server.already_running: another hal0 serve runs on this state folder: pid ${first.child.pid} on `);
    expect(err).toContain(`at ${first.url}/, since `);
    expect((await httpCall(first.url, "GET", "/api/status")).status).toBe(200);
    expect(JSON.parse(readFileSync(join(state, "serve.lock"), "utf8")).pid).toBe(first.child.pid);
    // A hal0 serve run with --no-reconcile leaves the loop to hal0 reconcile (the next test: one that runs its own does not).
    const loop = spawn(process.execPath, [HAL0, "reconcile", "--config", config, "--state", state], { stdio: ["ignore", "pipe", "pipe"] });
    await new Promise((r) => setTimeout(r, 1500));
    expect(loop.exitCode).toBeNull();
    const loopExit = exitOf(loop);
    loop.kill("SIGTERM");
    expect(await loopExit).toBe(0);
    // hal0 web's link goes where the running serve listens (here a port 0 gave it), not to [server] port.
    const web = captureIo();
    expect(await main(["web", "--config", config, "--state", state, "--json"], web), web.err()).toBe(0);
    const link = JSON.parse(web.out()).url as string;
    expect(web.err()).not.toContain("no hal0 serve runs");
    expect(new URL(link).host).toBe(new URL(first.url).host);
    const opened = await fetch(link, { redirect: "manual" });
    expect([opened.status, /^hal0_session_[0-9a-f]{12}=/.test(opened.headers.get("set-cookie") ?? "")]).toEqual([303, true]);
    // Killed outright, the first leaves its lock behind: the next serve takes it over.
    const killed = exitOf(first.child);
    first.child.kill("SIGKILL");
    await killed;
    expect(existsSync(join(state, "serve.lock"))).toBe(true);
    const next = await startServe(config, state, ["--no-reconcile"]);
    expect(JSON.parse(readFileSync(join(state, "serve.lock"), "utf8")).pid).toBe(next.child.pid);
    const exited = exitOf(next.child);
    next.child.kill("SIGTERM");
    expect(await exited).toBe(0);
    // A clean stop releases it.
    expect(existsSync(join(state, "serve.lock"))).toBe(false);
  }, 60_000);

  // Issue 16: a busy port used to leave `hal0 serve` alive (hal0.db open, the watcher running) with
  // "cannot listen on [server] host:[server] port". It exits 1 at once, naming the address and who holds it.
  describe("on a busy port it exits 1 at once, naming the address and the holder", () => {
    async function holdPort(): Promise<{ port: number; release: () => Promise<void> }> {
      const holder = createServer().listen(0, "127.0.0.1");
      await once(holder, "listening");
      return { port: (holder.address() as { port: number }).port, release: async () => void (await new Promise((r) => holder.close(r))) };
    }

    /** Runs `hal0 serve` expecting it to fail: its exit code, stderr, and how long it lived after printing the error. */
    async function serveFails(args: string[]): Promise<{ code: number | null; afterMessageMs: number; err: string }> {
      const child = spawn(process.execPath, [HAL0, "serve", ...args], { stdio: ["ignore", "pipe", "pipe"] });
      let err = "";
      let printed = 0;
      child.stderr!.on("data", (c: Buffer) => {
        err += c.toString();
        printed ||= Date.now();
      });
      const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      const code = await exitOf(child);
      clearTimeout(killer);
      return { code, afterMessageMs: Date.now() - (printed || Date.now()), err };
    }

    it("--port N", async () => {
      const { config, state } = await smallBox();
      const { port, release } = await holdPort();
      try {
        const { code, afterMessageMs, err } = await serveFails(["--config", config, "--state", state, "--port", String(port)]);
        expect(code).toBe(1);
        expect(afterMessageMs).toBeLessThan(1000); // it used to print this and stay alive (hal0.db open, the watcher running)
        expect(err).toContain(`server.port_in_use: cannot listen on 127.0.0.1:${port}: port ${port} is already in use by pid ${process.pid} (`);
        expect(err).not.toContain("[server]");
      } finally {
        await release();
      }
    }, 30_000);

    it("[server] host and port from hal0.toml", async () => {
      const { config, state } = await smallBox();
      const { port, release } = await holdPort();
      try {
        writeFileSync(join(config, "hal0.toml"), `${readFileSync(join(config, "hal0.toml"), "utf8")}[server]\nhost = "127.0.0.1"\nport = ${port}\n`);
        const { code, afterMessageMs, err } = await serveFails(["--config", config, "--state", state]);
        expect(code).toBe(1);
        expect(afterMessageMs).toBeLessThan(1000);
        expect(err).toContain(`server.port_in_use: cannot listen on 127.0.0.1:${port}: port ${port} is already in use by pid ${process.pid}`);
      } finally {
        await release();
      }
    }, 30_000);
  });

  describe("a tree with an error outside hal0.toml, and none compiled before: hal0.toml's own settings, not the built-in defaults", () => {
    /** A slot file with an error: the tree does not compile, hal0.toml does. */
    const breakSlot = (config: string) => writeFileSync(join(config, "slots/broken.toml"), `profile = "fake"\nmodel = "tiny"\nport = "not a port"\n`);

    it("listens on hal0.toml's [server] port", async () => {
      const { config, state } = await smallBox();
      breakSlot(config);
      const holder = createServer().listen(0, "127.0.0.1");
      await once(holder, "listening");
      const port = (holder.address() as { port: number }).port;
      try {
        writeFileSync(join(config, "hal0.toml"), `${readFileSync(join(config, "hal0.toml"), "utf8")}[server]\nport = ${port}\n`);
        const child = spawn(process.execPath, [HAL0, "serve", "--config", config, "--state", state], { stdio: ["ignore", "pipe", "pipe"] });
        let err = "";
        child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
        const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
        const code = await exitOf(child);
        clearTimeout(killer);
        // It tried the configured port (held here), not 8080.
        expect([code, err]).toEqual([1, expect.stringContaining(`server.port_in_use: cannot listen on 127.0.0.1:${port}`)]);
        // hal0 web's link (no serve running) goes there too; the serve that failed to start left no state folder, and web needs the serve's database.
        expect(await main(["web", "--config", config, "--state", state, "--json"], captureIo())).toBe(1);
        expect(await main(["token", "list", "--state", state], captureIo())).toBe(0);
        const web = captureIo();
        expect(await main(["web", "--config", config, "--state", state, "--json"], web), web.err()).toBe(0);
        expect(new URL(JSON.parse(web.out()).url).port).toBe(String(port));
        expect(web.err()).not.toContain("does not compile");
      } finally {
        await new Promise((r) => holder.close(r));
      }
    }, 30_000);

    it("keeps [bridge] enabled = false and [server] allowed_hosts; a hal0.toml with errors of its own is served on the defaults, with a warning", async () => {
      const { config, state } = await smallBox();
      breakSlot(config);
      const settings = readFileSync(join(config, "hal0.toml"), "utf8");
      writeFileSync(join(config, "hal0.toml"), `${settings}[server]\nallowed_hosts = ["hal0.local"]\n[bridge]\nenabled = false\n`);
      const { child, url, lines } = await startServe(config, state, ["--no-reconcile"]);
      cleanup.push(() => downAfter(child, config, state));
      const token = readFileSync(join(state, "operator.token"), "utf8").trim();
      // The bridge is off: /mcp/agents is no route (it is one on the built-in defaults).
      const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } } };
      const agents = await httpCall(url, "POST", "/mcp/agents", { headers: { authorization: `Bearer ${token}`, accept: "application/json, text/event-stream" }, body: init });
      expect([agents.status, agents.body?.error?.code]).toEqual([404, "route.not_found"]);
      const proxied = await httpCall(url, "GET", "/api/status", { headers: { authorization: `Bearer ${token}`, host: "hal0.local" } });
      expect(proxied.status).toBe(200);
      expect(lines().some((l) => l.msg?.includes("hal0.toml has errors"))).toBe(false);
      const exited = exitOf(child);
      child.kill("SIGTERM");
      await exited;
      // hal0.toml itself broken: nothing to go on but the defaults, and the log says so.
      writeFileSync(join(config, "hal0.toml"), `${settings}[bridge]\nenabled = "no"\n`);
      const again = await startServe(config, state, ["--no-reconcile"]);
      cleanup.push(() => downAfter(again.child, config, state));
      expect(again.lines().find((l) => l.msg?.includes("hal0.toml has errors"))).toMatchObject({ level: 40 });
    }, 30_000);
  });

  it("removes the temp files a killed writer left (kill -9 mid-write), in the tree and the state folder (its credentials, tokens and run logs too), and keeps a live writer's (issue 16)", async () => {
    const { config, state } = await smallBox();
    const solo = join(config, "slots/solo.toml");
    const text = readFileSync(solo, "utf8");
    const crashed = await killMidWrite(solo);
    writeFileSync(solo, text); // what the crashed writer was replacing is whole again; its temp is not
    const dead = await deadPid();
    for (const f of ["slots/solo", "credentials", "tokens", "runs"]) mkdirSync(join(state, f), { recursive: true, mode: 0o700 });
    // A provider credential's and an agent token's temps hold the secret itself.
    const stateTemps = [join(state, `.inventory.json.${dead}.0123456789ab.hal0.tmp`), join(state, `slots/solo/.runtime.json.${dead}.0123456789ab.hal0.tmp`),
      join(state, `credentials/.openrouter.${dead}.0123456789ab.hal0.tmp`), join(state, `tokens/.hermes__ops.${dead}.0123456789ab.hal0.tmp`),
      join(state, `runs/.run_0123456789abcdef.log.${dead}.0123456789ab.hal0.tmp`)]; // a Hermes run's log cut while a crash stopped its trim
    const oldTrim = join(state, "runs/run_fedcba9876543210.log.tmp"); // the same, as hal0 named that temp before
    writeFileSync(oldTrim, "output");
    const live = join(config, `slots/.solo.toml.${process.pid}.0123456789ab.hal0.tmp`);
    for (const f of [...stateTemps, live]) writeFileSync(f, "{");
    const left = crashed.left.map((n) => join(config, "slots", n));
    for (const f of left) expect(existsSync(f)).toBe(true);
    const { child, lines } = await startServe(config, state, ["--no-reconcile"]);
    cleanup.push(async () => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"));
    for (const f of [...left, ...stateTemps, oldTrim]) expect(existsSync(f)).toBe(false);
    expect(existsSync(live)).toBe(true);
    expect(lines().find((l) => l.msg === "removed stale temp files")?.files.sort()).toEqual([...left, ...stateTemps].sort());
    const exited = exitOf(child);
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }, 60_000);
});
