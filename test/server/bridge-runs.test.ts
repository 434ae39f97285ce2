import { spawn } from "node:child_process";
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { procStat } from "../../reconciler/drivers/proc.js";
import { PUMP_MS, RunService } from "../../server/bridge/runs/service.js";
import { RUN_TOOLS } from "../../server/bridge/runs/tools.js";
import { TEACH_TOOLS } from "../../server/bridge/teach/tools.js";
import { openDb } from "../../server/db.js";
import { Settings } from "../../schema/index.js";
import type { BridgeContext } from "../../server/bridge/tool.js";
import type { Caller } from "../../server/route.js";
import { ApiError } from "../../server/errors.js";
import { startTestServer, type TestServer } from "./harness.js";
import { untilTrue as until, until as untilValue } from "../helpers/until.js";

/**
 * The nine run tools of hal0-agents, called as the /mcp/agents mount calls
 * them (a BridgeContext over a real server), driving real processes of the
 * stand-in Hermes CLI (fixtures/hermes/hermes) with real SQLite records.
 */

const REPO = join(import.meta.dirname, "../..");
const HERMES = join(REPO, "fixtures/hermes/hermes");
const AGENT: Caller = { kind: "agent", agent: "claude", private: false, via: "mcp" };
const OPERATOR: Caller = { kind: "operator", agent: "root", private: false, via: "mcp" };

/** A copy of fixtures/box whose [hermes] points at a fresh home (profiles alpha, beta) and the stand-in; `extra` appended to hal0.toml. */
function makeBox(dir: string, extra = ""): { box: string; home: string } {
  const box = join(dir, "box");
  const home = join(dir, "hermes");
  cpSync(join(REPO, "fixtures/box"), box, { recursive: true });
  appendFileSync(join(box, "hal0.toml"), `\n[hermes]\nhome = ${JSON.stringify(home)}\ncommand = ${JSON.stringify(HERMES)}\n${extra}`);
  for (const p of ["alpha", "beta"]) mkdirSync(join(home, "profiles", p), { recursive: true });
  writeFileSync(join(home, "profiles/alpha/config.yaml"), "model:\n  default: local\n");
  writeFileSync(join(home, "profiles/alpha/SOUL.md"), "You are alpha.\n");
  return { box, home };
}

function tool(name: string) {
  const t = RUN_TOOLS.find((x) => x.name === name);
  if (!t) throw new Error(`no tool ${name}`);
  return t;
}

/** The code a tool call is refused with. */
async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiError) return err.code;
    throw err;
  }
  throw new Error("the call was not refused");
}

/** The process is there and has not exited (a zombie has). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

function groupGone(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch {
    return true;
  }
  return false;
}

describe("agent bridge runs", () => {
  let t: TestServer & { dir: string };
  let agent: BridgeContext;
  let op: BridgeContext;
  const call = (ctx: BridgeContext, name: string, args: unknown = {}) => tool(name).run(ctx, args) as Promise<any>;

  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box } = makeBox(dir);
    t = await startTestServer({ box, env: { HERMES_FAKE_DELAY_MS: "60", HERMES_FAKE_LINES: "5" } });
    agent = { d: t.hal0, caller: AGENT, profiles: ["alpha"] };
    op = { d: t.hal0, caller: OPERATOR, profiles: "all" };
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("are nine, with the issue's default tiers", () => {
    expect(RUN_TOOLS.map((x) => `${x.name}:${x.defaultTier}`).sort()).toEqual([
      "agent_profile_list:autonomous_read", "agent_run_cancel:autonomous_write", "agent_run_events:autonomous_read", "agent_run_list:autonomous_read",
      "agent_run_message:autonomous_write", "agent_run_result:autonomous_read", "agent_run_start:autonomous_write", "agent_run_status:autonomous_read", "agent_run_wait:autonomous_read",
    ]);
  });

  it("list the profiles the caller may reach", async () => {
    expect(await call(agent, "agent_profile_list")).toEqual({ profiles: [{ name: "alpha", config: true, soul: true }] });
    expect((await call(op, "agent_profile_list")).profiles.map((p: { name: string }) => p.name)).toEqual(["alpha", "beta"]);
  });

  it("a profile folder that is a symbolic link (wired by the sweep like any other) is listed and runs", async () => {
    const kept = join(dir, "kept-elsewhere");
    mkdirSync(kept);
    writeFileSync(join(kept, "config.yaml"), "model:\n  default: local\n");
    symlinkSync(kept, join(dir, "hermes", "profiles", "linked"));
    try {
      expect((await call(op, "agent_profile_list")).profiles).toContainEqual({ name: "linked", config: true, soul: false });
      const r = await call(op, "agent_run_start", { profile: "linked", prompt: "hello" });
      expect((await call(op, "agent_run_wait", { run_id: r.run_id, timeout_s: 20 })).run).toMatchObject({ profile: "linked", state: "done" });
    } finally {
      rmSync(join(dir, "hermes", "profiles", "linked"));
    }
  });

  it("start → events followed with the cursor to the end → result", async () => {
    const started = await call(agent, "agent_run_start", { profile: "alpha", prompt: "summarise the box", toolsets: ["web", "terminal"], max_turns: 4 });
    expect(started.run_id).toMatch(/^run_[0-9a-f]{16}$/);
    expect(["queued", "running"]).toContain(started.state);
    const lines: string[] = [];
    let after = 0;
    let whileRunning = 0;
    for (let i = 0; i < 500; i++) {
      const ev = await call(agent, "agent_run_events", { run_id: started.run_id, after });
      expect(ev.next).toBeGreaterThanOrEqual(after);
      lines.push(...ev.lines);
      if (ev.state === "running" && ev.lines.length > 0) whileRunning++;
      after = ev.next;
      if (ev.done) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(whileRunning).toBeGreaterThan(1); // it streamed: several slices came while it ran
    expect(lines).toContain("prompt: summarise the box");
    expect(lines).toContain("toolsets: web,terminal");
    expect(lines).toContain("max turns: 4");
    expect(lines.filter((l) => /^line \d of 5$/.test(l))).toHaveLength(5);
    expect(lines.some((l) => l.startsWith("⚕"))).toBe(false); // -Q: no banner
    // Nothing more past the end.
    expect(await call(agent, "agent_run_events", { run_id: started.run_id, after })).toMatchObject({ lines: [], next: after, done: true });
    const result = await call(agent, "agent_run_result", { run_id: started.run_id });
    expect(result).toMatchObject({ state: "done", done: true, exit_code: 0, error: null, truncated: false });
    expect(result.session_id).toMatch(/^\d{8}_\d{6}_[0-9a-f]{6}$/);
    expect(result.output).toContain("line 5 of 5");
    expect(result.output).not.toContain("session_id");
    const status = (await call(agent, "agent_run_status", { run_id: started.run_id })).run;
    expect(status).toMatchObject({ profile: "alpha", state: "done", reason: "exit", caller: "agent:claude", toolsets: ["web", "terminal"], max_turns: 4, session_id: result.session_id });
    expect(status.started_at).not.toBeNull();
    expect(status.ended_at).not.toBeNull();
    expect(statSync(join(t.state, "runs", `${started.run_id}.log`)).size).toBe(status.output_bytes);
    const audit = t.hal0.audit.query({ actor: "agent:claude", route: "POST /mcp/agents" }).items;
    expect(audit.filter((r) => r.tool === "agent_run_start").map((r) => [r.outcome, r.target])).toEqual([["ok", started.run_id]]);
  });

  it("agent_run_message continues the Hermes session (--resume)", async () => {
    const first = await call(agent, "agent_run_start", { profile: "alpha", prompt: "remember the word kumquat" });
    expect(await refusal(call(agent, "agent_run_message", { run_id: first.run_id, text: "too soon" }))).toBe("run.active");
    const done = await call(agent, "agent_run_wait", { run_id: first.run_id, timeout_s: 20 });
    expect(done).toMatchObject({ done: true, run: { state: "done" } });
    const second = await call(agent, "agent_run_message", { run_id: first.run_id, text: "which word?" });
    expect(second).toMatchObject({ continues: first.run_id, session_id: done.run.session_id });
    const end = await call(agent, "agent_run_wait", { run_id: second.run_id, timeout_s: 20 });
    expect(end.run).toMatchObject({ state: "done", resume: done.run.session_id, continues: first.run_id, session_id: done.run.session_id });
    const result = await call(agent, "agent_run_result", { run_id: second.run_id });
    expect(result.output).toContain(`resumed session ${done.run.session_id}: 1 earlier prompt(s), the last: remember the word kumquat`);
    const audit = t.hal0.audit.query({ actor: "agent:claude", route: "POST /mcp/agents" }).items;
    expect(audit.filter((r) => r.tool === "agent_run_message").map((r) => [r.outcome, r.error_code, r.target])).toEqual([
      ["ok", null, first.run_id],
      ["error", "run.active", first.run_id],
    ]);
    // A prompt is for those the profile admits; the audit log, read by any caller, keeps its size and hash.
    const messages = audit.filter((r) => r.tool === "agent_run_message").map((r) => r.args as Record<string, unknown>);
    expect(messages.map((a) => [a.text, a.text_bytes])).toEqual([[undefined, expect.any(Number)], [undefined, Buffer.byteLength("too soon")]]);
    expect(JSON.stringify(audit)).not.toContain("kumquat");
  });

  it("one Hermes session is continued by one run at a time: a second message, or a start resuming it, waits for that run's end (run.active)", async () => {
    const first = await call(agent, "agent_run_start", { profile: "alpha", prompt: "remember the word quince" });
    const done = await call(agent, "agent_run_wait", { run_id: first.run_id, timeout_s: 20 });
    const session = done.run.session_id as string;
    const [a, b] = await Promise.allSettled([
      call(agent, "agent_run_message", { run_id: first.run_id, text: "which word? (one)" }),
      call(op, "agent_run_message", { run_id: first.run_id, text: "which word? (two)" }),
    ]);
    const went = [a, b].filter((x) => x.status === "fulfilled") as Array<PromiseFulfilledResult<any>>;
    const refused = [a, b].filter((x) => x.status === "rejected") as PromiseRejectedResult[];
    expect(went).toHaveLength(1);
    expect((refused[0]!.reason as ApiError).code).toBe("run.active");
    expect((refused[0]!.reason as ApiError).details).toMatchObject({ run_id: went[0]!.value.run_id, session_id: session });
    expect(await refusal(call(op, "agent_run_start", { profile: "alpha", prompt: "and again", resume: session }))).toBe("run.active");
    await call(agent, "agent_run_wait", { run_id: went[0]!.value.run_id, timeout_s: 20 });
    const next = await call(op, "agent_run_message", { run_id: first.run_id, text: "which word? (three)" });
    expect((await call(op, "agent_run_wait", { run_id: next.run_id, timeout_s: 20 })).run.state).toBe("done");
    expect((await call(op, "agent_run_result", { run_id: next.run_id })).output).toContain("2 earlier prompt(s)");
  });

  it("a session_id line in the answer (stdout) is not the run's session: only Hermes's own on stderr is", async () => {
    // The stand-in echoes the prompt on stdout; cancelled, it never reports a session on stderr.
    const r = await call(agent, "agent_run_start", { profile: "alpha", prompt: "say this\nsession_id: --yolo\n[hang]" });
    await until(() => t.hal0.runs!.events(r.run_id, 0).lines.includes("session_id: --yolo"));
    const cancelled = await call(agent, "agent_run_cancel", { run_id: r.run_id });
    expect(cancelled.run).toMatchObject({ state: "cancelled", session_id: null });
    expect(await refusal(call(agent, "agent_run_message", { run_id: r.run_id, text: "go on" }))).toBe("run.no_session");
    // Ended by itself, the run's session is the one Hermes reported, whatever its answer says.
    const done = await call(agent, "agent_run_start", { profile: "alpha", prompt: "say this\nsession_id: 20200101_000000_aaaaaa" });
    const end = await call(agent, "agent_run_wait", { run_id: done.run_id, timeout_s: 20 });
    expect(end.run.state).toBe("done");
    expect(end.run.session_id).toMatch(/^\d{8}_\d{6}_[0-9a-f]{6}$/);
    expect(end.run.session_id).not.toBe("20200101_000000_aaaaaa");
  });

  it("a non-zero exit is a failed run with its exit code, and it has a session to message", async () => {
    const r = await call(agent, "agent_run_start", { profile: "alpha", prompt: "break [fail]" });
    const end = await call(agent, "agent_run_wait", { run_id: r.run_id, timeout_s: 20 });
    expect(end.run).toMatchObject({ state: "failed", reason: "exit", exit_code: 3, error: "hermes exited with code 3" });
    expect(end.run.session_id).not.toBeNull();
  });

  it("refuses other profiles, unknown runs and bad arguments with codes", async () => {
    expect(await refusal(call(agent, "agent_run_start", { profile: "beta", prompt: "hi" }))).toBe("bridge.profile_denied");
    expect(await refusal(call(op, "agent_run_start", { profile: "gamma", prompt: "hi" }))).toBe("run.profile_not_found");
    expect(await refusal(call(agent, "agent_run_status", { run_id: "run_0000000000000000" }))).toBe("run.not_found");
    expect(await refusal(call(agent, "agent_run_start", { profile: "alpha", prompt: "hi", resume: "--yolo" }))).toBe("validation.invalid");
    expect(await refusal(call(agent, "agent_run_start", { profile: "../x", prompt: "hi" }))).toBe("validation.invalid");
    expect(await refusal(call(agent, "agent_run_start", { profile: "alpha", prompt: "" }))).toBe("validation.invalid");
    // A run of a profile the agent does not reach is not found for it, in every read and in the list.
    const beta = await call(op, "agent_run_start", { profile: "beta", prompt: "beta work" });
    for (const name of ["agent_run_status", "agent_run_events", "agent_run_result", "agent_run_cancel"]) {
      expect(await refusal(call(agent, name, { run_id: beta.run_id }))).toBe("run.not_found");
    }
    expect((await call(agent, "agent_run_list", {})).runs.every((r: { profile: string }) => r.profile === "alpha")).toBe(true);
    expect((await call(op, "agent_run_list", { profile: "beta" })).runs.map((r: { run_id: string }) => r.run_id)).toContain(beta.run_id);
    await call(op, "agent_run_wait", { run_id: beta.run_id, timeout_s: 20 });
    expect((await call(op, "agent_run_list", { state: "failed" })).runs.every((r: { state: string }) => r.state === "failed")).toBe(true);
    const denied = t.hal0.audit.query({ actor: "agent:claude", route: "POST /mcp/agents" }).items.filter((r) => r.error_code === "bridge.profile_denied");
    expect(denied).toHaveLength(1);
  });

  it("cancel stops the whole process group, the stand-in's child too", async () => {
    const r = await call(agent, "agent_run_start", { profile: "alpha", prompt: "work [child]" });
    let child = 0;
    await until(() => {
      const ev = t.hal0.runs!.events(r.run_id, 0);
      child = Number(ev.lines.map((l) => /^child pid: (\d+)$/.exec(l)?.[1]).find((x) => x !== undefined) ?? 0);
      return child > 0;
    });
    const leader = t.hal0.runs!.get(r.run_id)!.pid!;
    expect(alive(leader) && alive(child)).toBe(true);
    // While it runs, its record counts the output printed so far (as the log holds it).
    const running = (await call(agent, "agent_run_status", { run_id: r.run_id })).run;
    expect(running).toMatchObject({ state: "running", output_bytes: statSync(join(t.state, "runs", `${r.run_id}.log`)).size });
    expect(running.output_bytes).toBeGreaterThan(0);
    const cancelled = await call(agent, "agent_run_cancel", { run_id: r.run_id });
    expect(cancelled.run).toMatchObject({ state: "cancelled", reason: "cancelled" });
    await until(() => !alive(leader) && !alive(child) && groupGone(leader));
    // Cancelling an ended run changes nothing.
    expect((await call(agent, "agent_run_cancel", { run_id: r.run_id })).run.state).toBe("cancelled");
    expect(t.hal0.audit.query({ actor: "agent:claude", route: "POST /mcp/agents", target: r.run_id }).items.filter((x) => x.tool === "agent_run_cancel")).toHaveLength(2);
  });

  it("a run whose process left a daemon outside its group holding the output open still ends, and frees its place", async () => {
    const r = await call(agent, "agent_run_start", { profile: "alpha", prompt: "serve it [escape]" });
    let daemon = 0;
    try {
      await until(() => {
        daemon = Number(t.hal0.runs!.events(r.run_id, 0).lines.map((l) => /^escaped pid: (\d+)$/.exec(l)?.[1]).find((x) => x !== undefined) ?? 0);
        return daemon > 0;
      });
      const end = await call(agent, "agent_run_wait", { run_id: r.run_id, timeout_s: 20 });
      expect(end).toMatchObject({ done: true, run: { state: "done", reason: "exit", exit_code: 0, session_id: expect.any(String) } });
      expect((await call(agent, "agent_run_result", { run_id: r.run_id })).output).toContain("done.");
    } finally {
      if (daemon > 0) process.kill(daemon, "SIGKILL");
    }
  });

  it("a timeout_s past [hermes] run_timeout_s is refused, naming the limit", async () => {
    const err = await tool("agent_run_start").run(agent, { profile: "alpha", prompt: "too long", timeout_s: 1801 }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).code).toBe("validation.invalid");
    expect((err as ApiError).message).toContain("run_timeout_s (1800)");
    expect((err as ApiError).details).toMatchObject({ max: 1800, fields: [{ loc: ["timeout_s"] }] });
    const ok = await call(agent, "agent_run_start", { profile: "alpha", prompt: "as long as allowed", timeout_s: 1800 });
    expect(ok.run.timeout_s).toBe(1800);
    await call(agent, "agent_run_wait", { run_id: ok.run_id, timeout_s: 20 });
  });

  it("a run past its timeout_s is stopped and marked failed (timed_out)", async () => {
    const r = await call(agent, "agent_run_start", { profile: "alpha", prompt: "forever [hang]", timeout_s: 1 });
    const early = await call(agent, "agent_run_wait", { run_id: r.run_id, timeout_s: 0.2 });
    expect(early).toMatchObject({ done: false, run: { state: "running" } });
    const end = await call(agent, "agent_run_wait", { run_id: r.run_id, timeout_s: 20 });
    expect(end).toMatchObject({ done: true, run: { state: "failed", reason: "timed_out", timeout_s: 1 } });
    expect(end.run.error).toContain("timed out after 1 s");
    expect(groupGone(t.hal0.runs!.get(r.run_id)!.pid!)).toBe(true);
  });

  it("the output log keeps its bound (1 MiB, the tail) and the cursor says what was dropped", async () => {
    const r = await call(agent, "agent_run_start", { profile: "alpha", prompt: "shout [bytes=3000000]" });
    await call(agent, "agent_run_wait", { run_id: r.run_id, timeout_s: 30 });
    const row = t.hal0.runs!.get(r.run_id)!;
    expect(row.state).toBe("done");
    expect(row.log_bytes).toBeGreaterThan(3_000_000);
    const size = statSync(join(t.state, "runs", `${r.run_id}.log`)).size;
    expect(size).toBeLessThanOrEqual(1024 * 1024);
    expect(size).toBe(row.log_bytes - row.log_base);
    let ev = await call(agent, "agent_run_events", { run_id: r.run_id });
    expect(ev.dropped).toBe(row.log_base);
    expect(ev.lines[0]).toMatch(/^\d{8} x+$/); // the kept tail starts at a whole line
    expect(Number(ev.lines[0].slice(0, 8))).toBeGreaterThan(0);
    let last: string[] = ev.lines.slice(-4);
    while (!ev.done) {
      ev = await call(agent, "agent_run_events", { run_id: r.run_id, after: ev.next });
      last = [...last, ...ev.lines].slice(-4);
    }
    // The end of the output (stdout's last line and stderr's session id, two pipes: either first).
    expect(last).toContain("done.");
    expect(last.some((l) => /^session_id: \d{8}_\d{6}_[0-9a-f]{6}$/.test(l))).toBe(true);
    expect(ev.next).toBe(row.log_bytes);
    expect(await call(agent, "agent_run_result", { run_id: r.run_id })).toMatchObject({ truncated: true, exit_code: 0 });
  });

  it("a line longer than one read is cut between two characters, never inside one", async () => {
    const prompt = "€".repeat(30_000); // 90 000 bytes: the first 64 KiB read ends inside a character
    const r = await call(agent, "agent_run_start", { profile: "alpha", prompt });
    await call(agent, "agent_run_wait", { run_id: r.run_id, timeout_s: 20 });
    const first = await call(agent, "agent_run_events", { run_id: r.run_id });
    expect(first.lines).toHaveLength(1);
    const second = await call(agent, "agent_run_events", { run_id: r.run_id, after: first.next });
    expect(first.lines[0] + second.lines[0]).toBe(`prompt: ${prompt}`);
  });

  it("agent_run_result's last 64 KiB start at a character, never inside one", async () => {
    // 90 000 bytes of three-byte characters, then 0, 1 or 2 more bytes: the cut 64 KiB from the end falls inside a character in two of them at least.
    for (const shift of ["", "a", "aa"]) {
      const r = await call(agent, "agent_run_start", { profile: "alpha", prompt: "€".repeat(30_000) + shift });
      await call(agent, "agent_run_wait", { run_id: r.run_id, timeout_s: 20 });
      const result = await call(agent, "agent_run_result", { run_id: r.run_id });
      expect(result.truncated).toBe(true);
      expect(result.output.startsWith("€")).toBe(true);
      expect(result.output).not.toContain("\uFFFD");
    }
  });

  it("a run printing one huge line (no newline) neither stalls the server nor loses its session id", async () => {
    const started = Date.now();
    const r = await call(agent, "agent_run_start", { profile: "alpha", prompt: "one line [oneline=48000000]" });
    const end = await call(agent, "agent_run_wait", { run_id: r.run_id, timeout_s: 60 });
    expect(end).toMatchObject({ done: true, run: { state: "done", exit_code: 0 } });
    expect(end.run.output_bytes).toBeGreaterThan(48_000_000);
    expect(end.run.session_id).toMatch(/^\d{8}_\d{6}_[0-9a-f]{6}$/);
    // Searching the whole pending line again at each chunk made this quadratic: minutes, with the server unresponsive.
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(statSync(join(t.state, "runs", `${r.run_id}.log`)).size).toBeLessThanOrEqual(1024 * 1024);
  });
});

describe("agent bridge runs, max_runs and restarts", () => {
  it("[bridge] max_runs = 1 queues the second run until the first ends", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box } = makeBox(dir, "\n[bridge]\nmax_runs = 1\n");
    const t = await startTestServer({ box, env: { HERMES_FAKE_DELAY_MS: "100", HERMES_FAKE_LINES: "3" } });
    try {
      const ctx: BridgeContext = { d: t.hal0, caller: AGENT, profiles: ["alpha"] };
      const a = await tool("agent_run_start").run(ctx, { profile: "alpha", prompt: "first" }) as any;
      const b = await tool("agent_run_start").run(ctx, { profile: "alpha", prompt: "second" }) as any;
      expect([a.state, b.state]).toEqual(["running", "queued"]);
      await t.hal0.runs!.wait(a.run_id, 20_000);
      const first = t.hal0.runs!.get(a.run_id)!;
      expect(first.state).toBe("done");
      expect(["running", "done"]).toContain(t.hal0.runs!.get(b.run_id)!.state);
      await t.hal0.runs!.wait(b.run_id, 20_000);
      const second = t.hal0.runs!.get(b.run_id)!;
      expect(second.state).toBe("done");
      expect(second.started_at! >= first.ended_at!).toBe(true);
      // A queued run can be cancelled before it starts.
      const c = await tool("agent_run_start").run(ctx, { profile: "alpha", prompt: "third [hang]" }) as any;
      const d = await tool("agent_run_start").run(ctx, { profile: "alpha", prompt: "fourth" }) as any;
      expect((await tool("agent_run_cancel").run(ctx, { run_id: d.run_id }) as any).run).toMatchObject({ state: "cancelled", started_at: null });
      expect((await tool("agent_run_cancel").run(ctx, { run_id: c.run_id }) as any).run.state).toBe("cancelled");
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the runs a revoked agent queued never start: they end cancelled (revoked)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box } = makeBox(dir, "\n[bridge]\nmax_runs = 1\n");
    const t = await startTestServer({ box });
    try {
      const tokens = t.hal0.tokens;
      const minted = tokens.mint("agent", "claude", ["mcp:agents", "profile:alpha"]);
      const op: BridgeContext = { d: t.hal0, caller: OPERATOR, profiles: "all" };
      const ctx: BridgeContext = { d: t.hal0, caller: AGENT, profiles: ["alpha"] };
      const first = await tool("agent_run_start").run(op, { profile: "alpha", prompt: "first [hang]" }) as any;
      const queued = await tool("agent_run_start").run(ctx, { profile: "alpha", prompt: "queued before the revoke" }) as any;
      expect([first.state, queued.state]).toEqual(["running", "queued"]);
      tokens.revoke(minted.id);
      await tool("agent_run_cancel").run(op, { run_id: first.run_id });
      const row = (await t.hal0.runs!.wait(queued.run_id, 10_000))!;
      expect(row).toMatchObject({ state: "cancelled", reason: "revoked", started_at: null, pid: null });
      expect(row.error).toContain("agent:claude was revoked");
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("hal0 bridge revoke is enough: the runs queued by an agent that keeps a token for hal0-admin never start either", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box } = makeBox(dir, "\n[bridge]\nmax_runs = 1\n");
    const t = await startTestServer({ box });
    try {
      const tokens = t.hal0.tokens;
      tokens.mint("agent", "claude", ["mcp:admin", "mcp:memory"]);
      const admission = tokens.mint("agent", "claude", ["mcp:agents", "profile:alpha"]);
      const op: BridgeContext = { d: t.hal0, caller: OPERATOR, profiles: "all" };
      const ctx: BridgeContext = { d: t.hal0, caller: AGENT, profiles: ["alpha"] };
      const first = await tool("agent_run_start").run(op, { profile: "alpha", prompt: "first [hang]" }) as any;
      const queued = await tool("agent_run_start").run(ctx, { profile: "alpha", prompt: "queued before the revoke" }) as any;
      expect([first.state, queued.state]).toEqual(["running", "queued"]);
      // What `hal0 bridge revoke claude` does: every live bridge token of claude, and only those.
      tokens.revoke(admission.id);
      await tool("agent_run_cancel").run(op, { run_id: first.run_id });
      const row = (await t.hal0.runs!.wait(queued.run_id, 10_000))!;
      expect(row).toMatchObject({ state: "cancelled", reason: "revoked", started_at: null, pid: null });
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a run queued before its agent was revoked and admitted again to other profiles never starts for the old one: it ends cancelled (profile_denied)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box } = makeBox(dir, "\n[bridge]\nmax_runs = 1\n");
    const t = await startTestServer({ box });
    try {
      const tokens = t.hal0.tokens;
      const first = tokens.mint("agent", "claude", ["mcp:agents", "profile:alpha", "profile:beta"]);
      const op: BridgeContext = { d: t.hal0, caller: OPERATOR, profiles: "all" };
      const ctx: BridgeContext = { d: t.hal0, caller: AGENT, profiles: ["alpha", "beta"] };
      const hang = await tool("agent_run_start").run(op, { profile: "alpha", prompt: "first [hang]" }) as any;
      const alpha = await tool("agent_run_start").run(ctx, { profile: "alpha", prompt: "queued for alpha" }) as any;
      const beta = await tool("agent_run_start").run(ctx, { profile: "beta", prompt: "queued for beta" }) as any;
      expect([alpha.state, beta.state]).toEqual(["queued", "queued"]);
      // `hal0 bridge revoke claude`, then `hal0 bridge admit claude --profiles beta`.
      tokens.revoke(first.id);
      tokens.mint("agent", "claude", ["mcp:agents", "profile:beta"]);
      await tool("agent_run_cancel").run(op, { run_id: hang.run_id });
      const denied = (await t.hal0.runs!.wait(alpha.run_id, 10_000))!;
      expect(denied).toMatchObject({ state: "cancelled", reason: "profile_denied", started_at: null, pid: null });
      expect(denied.error).toContain("bridge.profile_denied");
      expect((await t.hal0.runs!.wait(beta.run_id, 10_000))!).toMatchObject({ state: "done" });
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a queued run whose profile was removed before it started fails saying so, not that the command could not be started", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box, home } = makeBox(dir, "\n[bridge]\nmax_runs = 1\n");
    const t = await startTestServer({ box });
    try {
      const op: BridgeContext = { d: t.hal0, caller: OPERATOR, profiles: "all" };
      const first = await tool("agent_run_start").run(op, { profile: "alpha", prompt: "first [hang]" }) as any;
      const queued = await tool("agent_run_start").run(op, { profile: "beta", prompt: "queued for beta" }) as any;
      expect(queued.state).toBe("queued");
      rmSync(join(home, "profiles/beta"), { recursive: true });
      await tool("agent_run_cancel").run(op, { run_id: first.run_id });
      const row = (await t.hal0.runs!.wait(queued.run_id, 10_000))!;
      expect(row).toMatchObject({ state: "failed", reason: "profile_not_found", pid: null });
      expect(row.error).toContain("beta");
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a queued run started after [hermes] run_timeout_s was lowered runs no longer than the new limit", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box } = makeBox(dir, "\n[bridge]\nmax_runs = 1\n");
    const t = await startTestServer({ box });
    try {
      const op: BridgeContext = { d: t.hal0, caller: OPERATOR, profiles: "all" };
      const first = await tool("agent_run_start").run(op, { profile: "alpha", prompt: "first [hang]" }) as any;
      const queued = await tool("agent_run_start").run(op, { profile: "alpha", prompt: "queued [hang]" }) as any;
      expect(queued.run).toMatchObject({ state: "queued", timeout_s: 1800 });
      const toml = join(t.config, "hal0.toml");
      writeFileSync(toml, readFileSync(toml, "utf8").replace(`command = ${JSON.stringify(HERMES)}\n`, `command = ${JSON.stringify(HERMES)}\nrun_timeout_s = 1\n`));
      await untilValue(() => t.hal0.box.model(), (m) => m.settings.hermes.run_timeout_s === 1); // the hand edit is read, as the next request would
      await tool("agent_run_cancel").run(op, { run_id: first.run_id });
      const row = (await t.hal0.runs!.wait(queued.run_id, 10_000))!;
      expect(row).toMatchObject({ state: "failed", reason: "timed_out", timeout_s: 1 });
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("one caller queues at most 20 runs; more is run.too_many_queued, and another caller still queues", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box } = makeBox(dir, "\n[bridge]\nmax_runs = 1\n");
    const t = await startTestServer({ box });
    try {
      const ctx: BridgeContext = { d: t.hal0, caller: AGENT, profiles: ["alpha"] };
      const start = (c: BridgeContext, prompt: string) => tool("agent_run_start").run(c, { profile: "alpha", prompt }).then((r: any) => r, (e: unknown) => e);
      expect((await start(ctx, "first [hang]")).state).toBe("running");
      const all = await Promise.all(Array.from({ length: 30 }, (_, i) => start(ctx, `queued ${i} [hang]`)));
      const queued = all.filter((r) => !(r instanceof ApiError));
      const refused = all.filter((r): r is ApiError => r instanceof ApiError);
      expect(queued.map((r) => r.state)).toEqual(Array(20).fill("queued"));
      expect(refused.map((e) => e.code)).toEqual(Array(10).fill("run.too_many_queued"));
      expect(refused[0]!.details).toMatchObject({ max: 20 });
      expect((await start({ d: t.hal0, caller: OPERATOR, profiles: "all" }, "another caller [hang]")).state).toBe("queued");
      await tool("agent_run_cancel").run(ctx, { run_id: queued[0].run_id });
      expect((await start(ctx, "a freed place [hang]")).state).toBe("queued");
      expect((await start(ctx, "still full [hang]")).code).toBe("run.too_many_queued");
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a command that cannot start is a failed run (spawn_failed), and the next queued one still starts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { home } = makeBox(dir);
    const state = join(dir, "state");
    const db = openDb(state);
    let command = join(dir, "no-such-hermes");
    const runs = new RunService({ db, stateDir: state, env: {}, settings: () => Settings.parse({ hermes: { home, command }, bridge: { max_runs: 1 } }) });
    try {
      const bad = await runs.start({ profile: "alpha", prompt: "hi", caller: "operator:root" });
      command = HERMES;
      const good = await runs.start({ profile: "alpha", prompt: "hi again", caller: "operator:root" });
      expect((await runs.wait(bad.id, 10_000))!).toMatchObject({ state: "failed", reason: "spawn_failed" });
      expect(runs.get(bad.id)!.error).toContain("no-such-hermes");
      expect((await runs.wait(good.id, 10_000))!.state).toBe("done");
    } finally {
      await runs.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a run that ends while the database refuses writes is recorded once it takes them again, never left running", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { home } = makeBox(dir);
    const state = join(dir, "state");
    const db = openDb(state);
    const runs = new RunService({ db, stateDir: state, env: { HERMES_FAKE_DELAY_MS: "300", HERMES_FAKE_LINES: "2" }, settings: () => Settings.parse({ hermes: { home, command: HERMES } }) });
    try {
      const r = await runs.start({ profile: "alpha", prompt: "hi", caller: "operator:root" });
      await until(() => runs.get(r.id)!.pid !== null);
      const pid = runs.get(r.id)!.pid!;
      db.pragma("query_only = ON"); // as a full disk: every write refused
      await until(() => !alive(pid) && groupGone(pid), 10_000);
      await new Promise((res) => setTimeout(res, 300));
      expect(runs.get(r.id)!.state).toBe("running");
      db.pragma("query_only = OFF");
      expect((await runs.wait(r.id, 3 * PUMP_MS))!).toMatchObject({ state: "done", reason: "exit", exit_code: 0, session_id: expect.any(String) });
    } finally {
      db.pragma("query_only = OFF");
      await runs.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a run whose log cannot be written fails saying so (spawn_failed); the start answers and the queue goes on once the log can be", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { home } = makeBox(dir);
    const state = join(dir, "state");
    const db = openDb(state);
    writeFileSync(join(state, "runs"), ""); // runs/ is a file: no log can be made there
    const runs = new RunService({ db, stateDir: state, env: {}, settings: () => Settings.parse({ hermes: { home, command: HERMES }, bridge: { max_runs: 1 } }) });
    try {
      const bad = await runs.start({ profile: "alpha", prompt: "hi", caller: "operator:root" });
      expect(runs.get(bad.id)).toMatchObject({ state: "failed", reason: "spawn_failed" });
      expect(runs.get(bad.id)!.error).toContain("cannot write its log");
      rmSync(join(state, "runs"));
      const good = await runs.start({ profile: "alpha", prompt: "hi again", caller: "operator:root" });
      expect((await runs.wait(good.id, 10_000))!.state).toBe("done");
    } finally {
      await runs.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a cancel approved in a CLI command's guest stops the serve's running run (the serve signals its group) and ends a queued one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { home } = makeBox(dir);
    const state = join(dir, "state");
    const settings = () => Settings.parse({ hermes: { home, command: HERMES }, bridge: { max_runs: 1 } });
    const db = openDb(state);
    const serve = new RunService({ db, stateDir: state, env: {}, settings, graceMs: 500 });
    const cliDb = openDb(state);
    const guest = new RunService({ db: cliDb, stateDir: state, env: {}, settings, guest: true, graceMs: 500 });
    try {
      const running = await serve.start({ profile: "alpha", prompt: "busy [hang]", caller: "agent:claude" });
      const queued = await serve.start({ profile: "alpha", prompt: "next [hang]", caller: "agent:claude" });
      await until(() => serve.get(running.id)!.pid !== null);
      const pid = serve.get(running.id)!.pid!;
      expect(await guest.cancel(queued.id)).toMatchObject({ state: "cancelled", reason: "cancelled" });
      expect(await guest.cancel(running.id)).toMatchObject({ state: "cancelled", reason: "cancelled" });
      await until(() => groupGone(pid));
    } finally {
      await guest.close();
      await serve.close();
      cliDb.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a CLI command's guest server on the same database leaves the serve's runs alone; a run it records starts in the serve", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { home } = makeBox(dir);
    const state = join(dir, "state");
    const settings = () => Settings.parse({ hermes: { home, command: HERMES }, bridge: { max_runs: 1 } });
    const db = openDb(state);
    const serve = new RunService({ db, stateDir: state, env: {}, settings });
    const cliDb = openDb(state);
    let guest: RunService | undefined;
    try {
      const running = await serve.start({ profile: "alpha", prompt: "busy [hang]", caller: "agent:claude" });
      const queued = await serve.start({ profile: "alpha", prompt: "next", caller: "agent:claude" });
      await until(() => serve.get(running.id)!.pid !== null);
      const pid = serve.get(running.id)!.pid!;
      // `hal0 agent approvals list` and the like: a guest opens, reads and closes.
      guest = new RunService({ db: cliDb, stateDir: state, env: {}, settings, guest: true });
      await guest.ready;
      expect(guest.list({ profiles: "all" }).map((r) => r.state)).toEqual(["queued", "running"]);
      // An approved agent_run_start run by the guest: recorded queued, not started in the CLI's process.
      const approved = await guest.start({ profile: "alpha", prompt: "approved from the CLI", caller: "agent:claude" });
      expect(approved.state).toBe("queued");
      await guest.close();
      guest = undefined;
      await new Promise((r) => setTimeout(r, 300));
      expect(serve.get(running.id)).toMatchObject({ state: "running", pid });
      expect(alive(pid)).toBe(true);
      expect(serve.get(queued.id)!.state).toBe("queued");
      expect(serve.get(approved.id)!.state).toBe("queued");
      // The serve runs both, in order, once its place is free (the approved one found by its periodic look).
      await serve.cancel(running.id);
      expect((await serve.wait(queued.id, 20_000))!.state).toBe("done");
      await until(() => serve.get(approved.id)!.state !== "queued", 10_000);
      expect((await serve.wait(approved.id, 20_000))!.state).toBe("done");
    } finally {
      await guest?.close();
      await serve.close();
      cliDb.close();
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a restart starts none of the runs a crashed hal0 left queued, even while it still stops one it left running", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { home } = makeBox(dir);
    const state = join(dir, "state");
    const db = openDb(state);
    const left = "run_00000000000000aa";
    const queued = "run_00000000000000bb";
    // What the crashed hal0 left running: a process of the run's group that takes its time to go (SIGTERM ignored).
    const stubborn = spawn(process.execPath, ["-e", "process.on('SIGTERM', () => {}); console.log('ready'); setInterval(() => {}, 1000)"], { detached: true, stdio: ["ignore", "pipe", "ignore"], env: { HAL0_RUN_STATE: resolve(state), HAL0_RUN_ID: left } });
    await new Promise((r) => stubborn.stdout!.once("data", r));
    const insert = db.prepare("INSERT INTO bridge_runs (id, profile, prompt, toolsets, timeout_s, state, caller, created_at, pid) VALUES (?, 'alpha', ?, '[]', 60, ?, 'agent:claude', ?, ?)");
    insert.run(left, "left running", "running", new Date().toISOString(), stubborn.pid);
    insert.run(queued, "left queued", "queued", new Date().toISOString(), null);
    const runs = new RunService({ db, stateDir: state, env: {}, settings: () => Settings.parse({ hermes: { home, command: HERMES } }), graceMs: PUMP_MS + 1500 });
    try {
      await runs.ready;
      expect(runs.get(left)).toMatchObject({ state: "interrupted", reason: "hal0_restart" });
      expect(runs.get(queued)).toMatchObject({ state: "interrupted", reason: "hal0_restart", started_at: null, pid: null });
      await until(() => groupGone(stubborn.pid!));
    } finally {
      await runs.close();
      db.close();
      if (!groupGone(stubborn.pid!)) process.kill(-stubborn.pid!, "SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a run left running before the host restarted is marked interrupted, and a process of this boot with its pid and start time is never signalled", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { home } = makeBox(dir);
    const state = join(dir, "state");
    const db = openDb(state);
    const left = "run_00000000000000cc";
    // A process of this boot that leads its own group, given (by chance, after the reboot) the pid and start time the run had.
    const stranger = spawn(process.execPath, ["-e", "console.log('ready'); setInterval(() => {}, 1000)"], { detached: true, stdio: ["ignore", "pipe", "ignore"] });
    await new Promise((r) => stranger.stdout!.once("data", r));
    const { startTime } = (await procStat(stranger.pid!))!;
    db.prepare("INSERT INTO bridge_runs (id, profile, prompt, toolsets, timeout_s, state, caller, created_at, started_at, pid, pid_start, boot_id) VALUES (?, 'alpha', 'before the reboot', '[]', 60, 'running', 'agent:claude', ?, ?, ?, ?, ?)")
      .run(left, new Date().toISOString(), new Date().toISOString(), stranger.pid, startTime, "00000000-0000-4000-8000-000000000000");
    const runs = new RunService({ db, stateDir: state, env: {}, settings: () => Settings.parse({ hermes: { home, command: HERMES } }), graceMs: 500 });
    try {
      await runs.ready;
      expect(runs.get(left)).toMatchObject({ state: "interrupted", reason: "hal0_restart", error: "the host restarted while the run ran; its process ended with the earlier boot" });
      expect(alive(stranger.pid!)).toBe(true);
    } finally {
      await runs.close();
      db.close();
      process.kill(-stranger.pid!, "SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a restart stops the process group a crashed hal0 left running and marks the run interrupted", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box } = makeBox(dir);
    const state = join(dir, "state");
    const crash = spawn(join(REPO, "node_modules/.bin/vite-node"), [join(REPO, "test/server/bridge-runs-crash.ts"), box, state], { cwd: REPO, stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    crash.stdout.on("data", (c: Buffer) => (out += c.toString()));
    try {
      await until(() => /ready \S+ \d+ \d+\n/.test(out), 30_000);
      const [, id, leaderS, childS] = /ready (\S+) (\d+) (\d+)\n/.exec(out)!;
      const leader = Number(leaderS);
      const child = Number(childS);
      crash.kill("SIGKILL");
      await new Promise((r) => crash.once("exit", r));
      // The crash left the run's group running.
      expect(alive(leader) && alive(child)).toBe(true);
      const t = await startTestServer({ reuse: { dir }, extra: { root: box } });
      try {
        await t.hal0.runs!.ready;
        const row = t.hal0.runs!.get(id!)!;
        expect(row).toMatchObject({ state: "interrupted", reason: "hal0_restart", profile: "alpha", prompt: "work [skill=learnt-before-crash] [child]" });
        // What the run did to skills/ before the crash is compared with the reading its start recorded, and audited.
        expect(JSON.parse(row.skill_changes!)).toEqual({ changes: [{ skill: "learnt-before-crash", change: "added" }], more: 0, complete: true, overlapping: [] });
        expect(row.skills_before).toBeNull();
        expect(t.hal0.audit.query({ target: id! }).items.filter((r) => r.tool === "hermes_skill_change").map((r) => r.args)).toEqual([
          { run_id: id, profile: "alpha", started_by: "operator:crash", skill: "learnt-before-crash", change: "added", complete: true, overlapping: [] },
        ]);
        expect(row.error).toContain("its process group was stopped");
        // Its start recorded the boot it ran in: this one, so its group was looked for and stopped.
        expect(row.boot_id).toBe(readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim());
        await until(() => !alive(leader) && !alive(child) && groupGone(leader));
        const ctx: BridgeContext = { d: t.hal0, caller: OPERATOR, profiles: "all" };
        const ev = await tool("agent_run_events").run(ctx, { run_id: id }) as any;
        expect(ev.done).toBe(true);
        expect(ev.lines).toContain(`child pid: ${child}`);
      } finally {
        await t.close();
      }
    } finally {
      if (crash.exitCode === null) crash.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it("a relative [hermes] home is taken against the config folder, as the wiring takes it: its profiles are listed, run and taught, whatever hal0's working folder", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { box, home } = makeBox(dir);
    const toml = join(box, "hal0.toml");
    writeFileSync(toml, readFileSync(toml, "utf8").replace(`home = ${JSON.stringify(home)}`, 'home = "../hermes"'));
    mkdirSync(join(home, "profiles/alpha/skills/ops/deploy"), { recursive: true });
    writeFileSync(join(home, "profiles/alpha/skills/ops/deploy/SKILL.md"), "---\nname: deploy\ndescription: Deploy.\n---\n# Deploy\n");
    const t = await startTestServer({ extra: { root: box }, env: { HERMES_FAKE_DELAY_MS: "10" } });
    try {
      expect(process.cwd()).not.toBe(box);
      const ctx: BridgeContext = { d: t.hal0, caller: OPERATOR, profiles: "all" };
      expect((await tool("agent_profile_list").run(ctx, {}) as any).profiles.map((p: { name: string }) => p.name)).toEqual(["alpha", "beta"]);
      const r = await tool("agent_run_start").run(ctx, { profile: "alpha", prompt: "hello" }) as any;
      expect((await tool("agent_run_wait").run(ctx, { run_id: r.run_id, timeout_s: 20 }) as any).run).toMatchObject({ profile: "alpha", state: "done", exit_code: 0 });
      const skills = TEACH_TOOLS.find((x) => x.name === "profile_skill_list")!;
      expect(await skills.run!(ctx, { profile: "alpha" })).toMatchObject({ profile: "alpha", count: 1, skills: [expect.objectContaining({ category: "ops", name: "deploy" })] });
    } finally {
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("two processes owning the runs of one state folder start a queued run once: the first to claim it in the database runs it, the other leaves it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-runs-"));
    const { home } = makeBox(dir);
    const state = join(dir, "state");
    const db = openDb(state);
    // A Hermes command that notes each start of a run, then is the stand-in.
    const starts = join(dir, "starts");
    const command = join(dir, "hermes-noting");
    writeFileSync(command, `#!/bin/sh\necho "$HAL0_RUN_ID" >> ${JSON.stringify(starts)}\nexec ${JSON.stringify(HERMES)} "$@"\n`, { mode: 0o755 });
    const owners = [0, 1].map(() => spawn(join(REPO, "node_modules/.bin/vite-node"), [join(REPO, "test/server/bridge-runs-owner.ts"), state, home, command], { cwd: REPO, stdio: ["ignore", "pipe", "inherit"] }));
    const outs = owners.map((o) => {
      const out = { text: "" };
      o.stdout!.on("data", (c: Buffer) => (out.text += c.toString()));
      return out;
    });
    const guest = new RunService({ db, stateDir: state, env: {}, settings: () => Settings.parse({ hermes: { home, command } }), guest: true });
    try {
      await until(() => outs.every((o) => o.text.includes("ready")), 30_000);
      // A run recorded queued (an approved agent_run_start), then the database held by a writer for longer than both
      // owners take to look at the queue: each finds the run queued before either can record that it started it.
      const run = await guest.start({ profile: "alpha", prompt: "once", caller: "operator:root" });
      db.exec("BEGIN IMMEDIATE");
      await new Promise((r) => setTimeout(r, PUMP_MS + 1000));
      db.exec("COMMIT");
      await until(() => guest.get(run.id)!.state === "done", 20_000);
      await new Promise((r) => setTimeout(r, 500));
      expect(readFileSync(starts, "utf8").split("\n").filter(Boolean)).toEqual([run.id]);
    } finally {
      if (db.inTransaction) db.exec("ROLLBACK");
      await guest.close();
      for (const o of owners) if (o.exitCode === null) o.kill("SIGTERM");
      await Promise.all(owners.map((o) => (o.exitCode === null ? new Promise((r) => o.once("exit", r)) : undefined)));
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
