import { execFileSync } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { logFilePath, RotatingLog } from "../../server/log-file.js";
import { ProcessDriver } from "../../reconciler/index.js";
import { serve, serveLogger } from "../../server/serve.js";
import { httpCall, startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/**
 * logs_tail and journal_snapshot: hal0's own log file written by serveLogger
 * (the logger of hal0 serve) with secrets in its lines, read back over REST
 * and over MCP (gated, approved); nothing secret leaves.
 */
let s: TestServer;
let secrets: string[];
const sink = new Writable({ write: (_c, _e, cb) => cb() });

beforeAll(async () => {
  s = await startTestServer();
  // This box's policy blocks logs_tail for everyone; here it is gated, as seed 001 has it.
  writeFileSync(join(s.config, "policy.toml"), readFileSync(join(s.config, "policy.toml"), "utf8").replace(/^blocked = \["logs_tail"\]$/m, ""));
  const hal0Token = s.hal0.tokens.mint("operator", "leaky").token;
  secrets = ["s3cr3tBearerValue123456", "hf_AbCdEfGhIjKlMnOpQrStUv", "sk-proj-ABCDEFGHIJKLMNOPQRSTUV123", hal0Token, "plainEnvSecret42"];
  const logger = serveLogger("debug", sink, new RotatingLog(logFilePath(s.state)));
  // An old line (another writer, before the redacting stream): the reader masks it all the same.
  mkdirSync(join(s.state, "logs"), { recursive: true });
  appendFileSync(logFilePath(s.state), `${JSON.stringify({ level: 50, time: "2020-01-01T00:00:00.000Z", msg: `old: Authorization: Bearer ${secrets[0]} HF_TOKEN=${secrets[1]}` })}\n`);
  logger.debug("debug noise");
  logger.info("sweep: + slot.utility (new)");
  logger.info("started slot utility-big");
  logger.info({ slot: "utility" }, `calling upstream with Authorization: Bearer ${secrets[0]}`);
  logger.warn(`runner env HF_TOKEN=${secrets[1]} OPENAI_API_KEY=${secrets[4]}`);
  logger.error({ err: new Error(`upstream refused key ${secrets[2]}`) }, "upstream failed");
  logger.info(`minted ${secrets[3]}`);
  logger.flush();
  mkdirSync(join(s.state, "slots/utility"), { recursive: true });
  writeFileSync(join(s.state, "slots/utility/runner.log"), `hal0 starts: llama-server --api-key ${secrets[2]}\nloaded model\n`);
});

afterAll(async () => {
  await s.close();
});

function noSecret(text: string): void {
  for (const secret of secrets) expect(text).not.toContain(secret);
}

describe("logs_tail", () => {
  it("the file holds the lines already redacted", () => {
    const text = readFileSync(logFilePath(s.state), "utf8");
    expect(text).toContain("upstream failed");
    // The old line was appended raw; every line serveLogger wrote is masked.
    noSecret(text.split("\n").slice(1).join("\n"));
    expect(statSync(logFilePath(s.state)).mode & 0o777).toBe(0o600);
  });

  it("tails hal0's log over REST for an operator: redacted, with level, since and slot filters", async () => {
    const all = await s.call("GET", "/api/logs");
    expect(all.status).toBe(200);
    noSecret(JSON.stringify(all.body));
    expect(all.body.lines.map((l: any) => l.msg)).toEqual([
      expect.stringContaining("old: Authorization: Bearer [redacted]"),
      "debug noise",
      "sweep: + slot.utility (new)",
      "started slot utility-big",
      "calling upstream with Authorization: Bearer [redacted]",
      expect.stringContaining("HF_TOKEN=[redacted] OPENAI_API_KEY=[redacted]"),
      "upstream failed",
      "minted [redacted]",
    ]);
    expect(all.body.lines[6]).toMatchObject({ level: "error", err: { message: "upstream refused key [redacted]" } });

    const warn = await s.call("GET", "/api/logs?level=warn");
    expect(warn.body.lines.map((l: any) => l.level)).toEqual(["error", "warn", "error"]);
    const recent = await s.call("GET", "/api/logs?since=1h&level=warn");
    expect(recent.body.lines.map((l: any) => l.msg)).toEqual([expect.stringContaining("HF_TOKEN=[redacted]"), "upstream failed"]);
    const after = await s.call("GET", `/api/logs?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`);
    expect(after.body.lines).toEqual([]);
    const two = await s.call("GET", "/api/logs?lines=2");
    expect(two.body).toMatchObject({ count: 2, truncated: true });
    expect(two.body.lines.map((l: any) => l.msg)).toEqual(["upstream failed", "minted [redacted]"]);

    const slot = await s.call("GET", "/api/logs?slot=utility");
    // Its `slot` field or its address; not a slot whose name only starts the same.
    expect(slot.body.lines.map((l: any) => l.msg)).toEqual(["sweep: + slot.utility (new)", "calling upstream with Authorization: Bearer [redacted]"]);
    expect(slot.body.slot).toMatchObject({ name: "utility", exists: true, lines: ["hal0 starts: llama-server --api-key [redacted]", "loaded model"] });
    noSecret(JSON.stringify(slot.body));
  });

  it("reads a since without an offset as UTC, as hal0 writes every time, whatever the server's time zone (logs and throughput history)", async () => {
    const tz = process.env.TZ;
    process.env.TZ = "Pacific/Kiritimati"; // UTC+14: a local reading would be 14 hours early
    try {
      for (const since of ["2026-12-02T14:00:00", "2026-12-02T14:00", "2026-12-02 14:00:00.000", "2026-12-02T14:00:00Z", "2026-12-03T04:00:00+14:00"]) {
        const r = await s.call("GET", `/api/logs?since=${encodeURIComponent(since)}&lines=1`);
        expect(r.status, since).toBe(200);
        expect(r.body.filters.since, since).toBe("2026-12-02T14:00:00.000Z");
      }
      const at = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3_600_000); // the start of the last hour but one
      const history = await s.call("GET", `/api/stats/throughput/history?step=3600&since=${encodeURIComponent(at.toISOString().replace(/\.000Z$/, ""))}`);
      expect(history.status, JSON.stringify(history.body)).toBe(200);
      expect(history.body.since).toBe(at.toISOString());
    } finally {
      if (tz === undefined) delete process.env.TZ;
      else process.env.TZ = tz;
    }
  });

  it("refuses a bad filter or an unknown slot with a code", async () => {
    // A day the calendar lacks (Date.parse would roll it into the next month) and junk after a time are refused too.
    for (const q of ["level=loud", "since=yesterday", "since=2026-02-30T10:00:00Z", "since=2026-04-31", "since=2026-12-02T14:00:00Z%00junk", "since=2026-12-02Tnoon", "lines=0", "lines=100000", "slot=../x", "extra=1"]) {
      const r = await s.call("GET", `/api/logs?${q}`);
      expect(r.status, q).toBe(422);
      expect(r.body.error.code).toBe("validation.invalid");
    }
    // A time ago beyond any date is every line, not a 500.
    for (const since of ["999999999d", "999999999h"]) {
      const all = await s.call("GET", `/api/logs?since=${since}&lines=1`);
      expect(all.status, since).toBe(200);
      expect(all.body.filters.since).toBe("1970-01-01T00:00:00.000Z");
      expect(all.body.count).toBe(1);
    }
    const unknown = await s.call("GET", "/api/logs?slot=nosuch");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("slot.not_found");
  });

  it("a runner.log that is a link, a folder or a pipe is slot.log_unreadable (409), not read: no other file's bytes, no 500, no wait", async () => {
    const log = join(s.state, "slots/utility/runner.log");
    const kept = readFileSync(log);
    const outside = join(s.state, "not-a-log.txt");
    writeFileSync(outside, "a file of the operator's that is not a runner log\n");
    try {
      for (const [what, plant] of [
        ["a symbolic link", () => symlinkSync(outside, log)],
        ["a folder", () => mkdirSync(log)],
        ["a pipe", () => execFileSync("mkfifo", [log])],
      ] as const) {
        rmSync(log, { recursive: true, force: true });
        plant();
        for (const path of ["/api/slots/utility/logs?lines=5", "/api/logs?slot=utility&lines=5"]) {
          const r = await s.call("GET", path);
          expect(r.status, `${what} ${path}: ${JSON.stringify(r.body)}`).toBe(409);
          expect(r.body.error.code).toBe("slot.log_unreadable");
          expect(r.body.error.message).toContain(what);
          expect(JSON.stringify(r.body)).not.toContain("not a runner log");
        }
      }
    } finally {
      rmSync(log, { recursive: true, force: true });
      writeFileSync(log, kept);
      rmSync(outside, { force: true });
    }
  });

  it("is gated for an agent over MCP; once an operator approves, the result is redacted too", async () => {
    const client = await adminClient(s.url, "hermes__ops");
    try {
      const queued = await callTool(client, "logs_tail", { level: "info", lines: 50 });
      expect(queued.body, JSON.stringify(queued.body)).toMatchObject({ status: "pending_approval" });
      const approved = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
      expect(approved.body.approval.state, JSON.stringify(approved.body)).toBe("executed");
      const lines = approved.body.approval.result.lines as any[];
      expect(lines.map((l) => l.msg)).toContain("minted [redacted]");
      expect(lines.map((l) => l.level)).not.toContain("debug");
      noSecret(JSON.stringify(approved.body));
      // The stored request, as the CLI and the inbox read it.
      noSecret(JSON.stringify((await s.call("GET", `/api/agent/approvals/${queued.body.approval_id}`)).body));
    } finally {
      await client.close();
    }
  });
});

describe("journal_snapshot", () => {
  it("without systemd: available false, with the reason and the tail of hal0's own file (redacted)", async () => {
    const prior = process.env.INVOCATION_ID;
    delete process.env.INVOCATION_ID;
    try {
      const r = await s.call("GET", "/api/journal?lines=3");
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ available: false, reason: expect.stringContaining("INVOCATION_ID"), count: 3 });
      expect(r.body.lines.at(-1).msg).toBe("minted [redacted]");
      noSecret(JSON.stringify(r.body));
      // hal0's log is what logs_tail reads, and logs_tail is no autonomous read: not for anonymous callers either.
      const anonymous = await s.call("GET", "/api/journal?lines=3", { as: "anonymous" });
      expect(anonymous.status).toBe(401);
      expect(anonymous.body.error.code).toBe("auth.required");
    } finally {
      if (prior !== undefined) process.env.INVOCATION_ID = prior;
    }
  });

  it("is judged with logs_tail, which reads the same log: queued for an agent where logs_tail is gated, and the approved result redacted", async () => {
    const client = await adminClient(s.url, "hermes__ops");
    const prior = process.env.INVOCATION_ID;
    delete process.env.INVOCATION_ID;
    try {
      const queued = await callTool(client, "journal_snapshot", { lines: 10 });
      expect(queued.body, JSON.stringify(queued.body)).toMatchObject({ status: "pending_approval" });
      const rest = await s.call("GET", "/api/journal?lines=10", { as: "agent:hermes__ops" });
      expect(rest.status, JSON.stringify(rest.body)).toBe(202);
      const approved = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
      expect(approved.body.approval.state, JSON.stringify(approved.body)).toBe("executed");
      expect(approved.body.approval.result.lines.map((l: any) => l.msg)).toContain("minted [redacted]");
      noSecret(JSON.stringify(approved.body));
    } finally {
      if (prior !== undefined) process.env.INVOCATION_ID = prior;
      await client.close();
    }
  });

  it.runIf(existsSync("/usr/bin/journalctl") || existsSync("/bin/journalctl"))("under systemd (INVOCATION_ID set): asks journalctl -o json for this invocation (this machine keeps no journal: no entries)", async () => {
    const prior = process.env.INVOCATION_ID;
    process.env.INVOCATION_ID = "0123456789abcdef0123456789abcdef";
    try {
      const r = await s.call("GET", "/api/journal");
      expect(r.body).toMatchObject({ available: true, invocation_id: "0123456789abcdef0123456789abcdef", lines: [], count: 0 });
      process.env.INVOCATION_ID = "not-an-id";
      expect((await s.call("GET", "/api/journal")).body).toMatchObject({ available: false, reason: expect.stringContaining("not a systemd invocation id") });
    } finally {
      if (prior === undefined) delete process.env.INVOCATION_ID;
      else process.env.INVOCATION_ID = prior;
    }
  });
});

describe("hal0 serve's own logger", () => {
  it("writes <state>/logs/hal0.log beside stdout", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-logs-serve-"));
    const state = join(dir, "state");
    cpSync(join(import.meta.dirname, "../../fixtures/box"), join(dir, "box"), { recursive: true });
    const serving = await serve({ root: join(dir, "box"), stateDir: state, port: 0, reconcile: false, driverFor: async () => new ProcessDriver({ stateDir: state }), env: {} });
    try {
      const text = readFileSync(logFilePath(state), "utf8");
      expect(text).toContain('"msg":"hal0 serve listening"');
      const r = await httpCall(serving.url, "GET", "/api/logs?lines=5", { headers: { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` } });
      expect(r.body.lines.map((l: any) => l.msg)).toContain("hal0 serve listening");
    } finally {
      await serving.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the log file's bound", () => {
  it("rotates to one .1 file at the bound: never more than twice the bound on disk, the newest lines kept", () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-logs-"));
    try {
      const file = join(dir, "logs", "hal0.log");
      const log = new RotatingLog(file, 4096);
      for (let i = 0; i < 500; i++) log.write(`${JSON.stringify({ level: 30, time: new Date().toISOString(), msg: `line ${i} ${"x".repeat(60)}` })}\n`);
      log.write(`${"y".repeat(10_000)}\n`); // one line over the bound is cut to it
      log.write(`${JSON.stringify({ level: 30, msg: "last" })}\n`);
      log.close();
      expect(readdirSync(join(dir, "logs")).sort()).toEqual(["hal0.log", "hal0.log.1"]);
      expect(statSync(file).size).toBeLessThanOrEqual(4096);
      expect(statSync(`${file}.1`).size).toBeLessThanOrEqual(4096);
      expect(readFileSync(file, "utf8")).toMatch(/"msg":"last"/);
      expect(statSync(join(dir, "logs")).mode & 0o777).toBe(0o700);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("journal_snapshot beside logs_tail in other policies", () => {
  it("logs_tail opened to an autonomous read still meets slot_logs' tier, since ?slot= adds that slot's runner log: queued where slot_logs is gated, refused where it is blocked", async () => {
    const box = await startTestServer();
    try {
      mkdirSync(join(box.state, "slots/utility"), { recursive: true });
      writeFileSync(join(box.state, "slots/utility/runner.log"), "prompt: what the user asked the runner\n");
      const tiers = async (lines: string): Promise<void> => {
        writeFileSync(join(box.config, "policy.toml"), `[tiers]\n${lines}\n`);
        await box.hal0.box.snapshot();
      };
      await tiers('autonomous_read = ["logs_tail"]');
      // slot_logs is gated (seed 001): the runner log is not an agent's to read at once, whichever tool it asks with.
      const queued = await box.call("GET", "/api/logs?slot=utility", { as: "agent:hermes__ops" });
      expect(queued.status, JSON.stringify(queued.body)).toBe(202);
      expect(JSON.stringify(queued.body)).not.toContain("what the user asked");
      const client = await adminClient(box.url, "hermes__ops");
      try {
        expect((await callTool(client, "logs_tail", { slot: "utility" })).body).toMatchObject({ status: "pending_approval" });
      } finally {
        await client.close();
      }
      await tiers('autonomous_read = ["logs_tail"]\nblocked = ["slot_logs"]');
      const refused = await box.call("GET", "/api/logs?slot=utility", { as: "agent:hermes__ops" });
      expect(refused.status).toBe(403);
      expect(refused.body.error).toMatchObject({ code: "mcp.tool_not_allowed", details: { tool: "slot_logs" } });
      // slot_logs itself is judged as before: logs_tail's tier does not reach it.
      await tiers('autonomous_read = ["slot_logs"]\nblocked = ["logs_tail"]');
      const own = await box.call("GET", "/api/slots/utility/logs", { as: "agent:hermes__ops" });
      expect(own.status, JSON.stringify(own.body)).toBe(200);
      expect(own.body.lines).toEqual(["prompt: what the user asked the runner"]);
    } finally {
      await box.close();
    }
  });

  it("blocked where logs_tail is (the example box's policy): not listed, refused over MCP and REST; an autonomous read where logs_tail is one", async () => {
    const box = await startTestServer();
    try {
      const client = await adminClient(box.url, "hermes__ops");
      try {
        expect((await client.listTools()).tools.map((t) => t.name)).not.toContain("journal_snapshot");
        const refused = await callTool(client, "journal_snapshot", {});
        expect(refused.body.error.code).toBe("mcp.tool_not_allowed");
      } finally {
        await client.close();
      }
      const rest = await box.call("GET", "/api/journal", { as: "agent:hermes__ops" });
      expect(rest.status).toBe(403);
      expect(rest.body.error.code).toBe("mcp.tool_not_allowed");
      expect((await box.call("GET", "/api/journal")).status).toBe(200); // an operator reads it
      // logs_tail opened to an autonomous read: journal_snapshot answers at once.
      const policy = join(box.config, "policy.toml");
      writeFileSync(policy, readFileSync(policy, "utf8").replace(/^blocked = \["logs_tail"\]$/m, 'autonomous_read = ["logs_tail"]'));
      await box.hal0.box.snapshot();
      const open = await adminClient(box.url, "hermes__ops");
      try {
        const r = await callTool(open, "journal_snapshot", { lines: 5 });
        expect(r.isError, JSON.stringify(r.body)).toBe(false);
        expect(r.body.available).toBe(false);
      } finally {
        await open.close();
      }
    } finally {
      await box.close();
    }
  });
});
