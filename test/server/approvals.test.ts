import { spawn } from "node:child_process";
import { appendFileSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { request } from "node:http";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { join } from "node:path";
import { z } from "zod";
import { afterEach, describe, expect, it } from "vitest";
import { procStatNow } from "../../reconciler/drivers/proc.js";
import { ApiError } from "../../server/errors.js";
import { defineRoute, type Route } from "../../server/route.js";
import { ROUTES } from "../../server/routes/index.js";
import { PENDING_PER_CALLER, type Approval } from "../../server/approvals.js";
import { MAX_UNREAD_BYTES } from "../../server/sse.js";
import { httpCall, openEventStream, startTestServer, type TestServer } from "./harness.js";
import { until } from "../helpers/until.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/** A gated write to queue: sets a slot's ctx_size (the real slot routes have their own suite). */
const setCtx = defineRoute({
  method: "PUT", path: "/api/test-only/slots/{name}/ctx", kind: "write",
  params: z.strictObject({ name: z.string() }), body: z.strictObject({ ctx_size: z.number().int() }),
  summary: "test route: set a slot's tune.ctx_size",
  handle: ({ params, body }) => {
    if (params.name === "ghost") throw new ApiError("validation.invalid", "no such slot");
    return { changes: { edits: [{ file: `slots/${params.name}.toml`, op: "set", path: ["tune", "ctx_size"], value: body.ctx_size }], summary: `${params.name}: ctx_size ${body.ctx_size}` } };
  },
});
/** A gated write that removes a slot's file: what it does is a slot deleted (slot_delete's tier), whatever tool asked. */
const dropSlot = defineRoute({
  method: "DELETE", path: "/api/test-only/slots/{name}/file", kind: "write",
  params: z.strictObject({ name: z.string() }),
  summary: "test route: remove a slot's file",
  handle: ({ params }) => ({ changes: { edits: [{ file: `slots/${params.name}.toml`, op: "delete" }], summary: `drop ${params.name}` } }),
});
const routes: Route[] = [...ROUTES, setCtx, dropSlot];
const HAL0 = join(import.meta.dirname, "../../bin/hal0.js");
const agent = { kind: "agent" as const, agent: "hermes__coder", private: false, via: "mcp" as const };
const call = (name: string, ctx: number) => ({ params: { name }, query: {}, body: { ctx_size: ctx }, caller: agent, requestId: "t" });

let servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.reverse()) await s.close();
  servers = [];
});
async function start(extra: Parameters<typeof startTestServer>[0] = {}) {
  const s = await startTestServer({ ...extra, extra: { routes, ...extra.extra } });
  servers.push(s);
  return s;
}

describe("approvals", () => {
  it("one caller has at most PENDING_PER_CALLER requests waiting: one more is 429 approvals.too_many_pending, over REST too; the same request still answers; another caller is not held", async () => {
    const s = await start();
    for (let i = 0; i < PENDING_PER_CALLER; i++) await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 4096 + i));
    const err = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 2048)).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "approvals.too_many_pending", status: 429, details: { pending: PENDING_PER_CALLER, max: PENDING_PER_CALLER } });
    expect((await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 4096))).state).toBe("pending");
    const other = await s.hal0.approvals.enqueue("slot_edit", setCtx, { ...call("chat", 2048), caller: { ...agent, agent: "hermes__ops" } });
    expect(other.state).toBe("pending");
    const viaRest = await s.call("PUT", "/api/slots/chat/config", { as: "agent:hermes__coder", body: { tune: { ctx_size: 3072 } } });
    expect(viaRest.status).toBe(429);
    expect(viaRest.body.error.code).toBe("approvals.too_many_pending");
    // A decision makes room.
    const first = s.hal0.approvals.list("pending").find((a) => a.caller.agent === "hermes__coder")!;
    s.hal0.approvals.deny(first.id, { kind: "operator", name: "owner" } as never);
    expect((await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 2048))).state).toBe("pending");
  });

  it("queues a gated write with its plan and base, dedups the exact same call, and runs it when approved", async () => {
    const s = await start();
    const a = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480));
    expect(a).toMatchObject({ state: "pending", tool: "slot_edit", caller: agent });
    expect(a.summary).toMatch(/^chat: ctx_size 20480 — plan: /);
    expect(a.plan_id).toMatch(/^sha256:/);
    expect(a.base_revision).toMatch(/^rev_/);
    expect((await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480))).id).toBe(a.id);
    expect((await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 16384))).id).not.toBe(a.id);

    const listed = await s.call("GET", "/api/agent/approvals?state=pending");
    expect(listed.body.approvals.map((x: any) => x.id)).toContain(a.id);
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).not.toMatch(/ctx_size = 20480/);

    const approved = await s.call("POST", `/api/agent/approvals/${a.id}/approve`);
    expect(approved.status).toBe(200);
    expect(approved.body.approval).toMatchObject({ state: "executed", decided_by: "owner" });
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/ctx_size = 20480/);
    const again = await s.call("POST", `/api/agent/approvals/${a.id}/approve`);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: "approvals.already_resolved", details: { state: "executed" } });
    expect((await s.call("POST", "/api/agent/approvals/apr_nope/deny", { body: {} })).body.error.code).toBe("approvals.not_found");
    expect((await s.call("GET", "/api/agent/approvals/apr_nope")).status).toBe(404);
  });

  it("a caller's limit holds for calls sent at once: PENDING_PER_CALLER + 10 different ones asked together queue PENDING_PER_CALLER, the rest 429", async () => {
    const s = await start();
    const asked = await Promise.allSettled(Array.from({ length: PENDING_PER_CALLER + 10 }, (_, i) => s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 4096 + i))));
    expect(asked.filter((r) => r.status === "fulfilled")).toHaveLength(PENDING_PER_CALLER);
    expect(asked.filter((r) => r.status === "rejected").map((r) => (r as PromiseRejectedResult).reason.code)).toEqual(Array(10).fill("approvals.too_many_pending"));
    expect(s.hal0.approvals.list("pending")).toHaveLength(PENDING_PER_CALLER);
  });

  it("the same call sent several times at once (a client's retries) is one request, not one per copy", async () => {
    const s = await start();
    const replies = await Promise.all(Array.from({ length: 5 }, () => s.call("PUT", "/api/slots/chat/config", { as: "agent:hermes__ops", body: { tune: { ctx_size: 12288 } } })));
    expect(replies.map((r) => r.status)).toEqual([202, 202, 202, 202, 202]);
    expect(new Set(replies.map((r) => r.body.approval_id)).size).toBe(1);
    expect(s.hal0.approvals.list("pending").filter((a) => a.caller.agent === "hermes__ops").map((a) => a.id)).toEqual([replies[0]!.body.approval_id]);
  });

  it("does not run a request whose tool, or what it does, policy.toml blocked for the agent since it asked: failed, mcp.tool_not_allowed, nothing written", async () => {
    const s = await start();
    const edit = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480));
    const drop = await s.hal0.approvals.enqueue("slot_edit", dropSlot, { params: { name: "utility" }, query: {}, body: undefined, caller: agent, requestId: "t" });
    const policy = join(s.config, "policy.toml");
    writeFileSync(policy, readFileSync(policy, "utf8").replace('blocked = ["model_delete", "stack_apply"]', 'blocked = ["model_delete", "stack_apply", "slot_edit", "slot_delete"]'));
    const chat = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    const edited = (await s.call("POST", `/api/agent/approvals/${edit.id}/approve`)).body.approval;
    expect(edited).toMatchObject({ state: "failed", error: { code: "mcp.tool_not_allowed" } });
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toBe(chat);
    // Its tool aside, what a request does meets the tiers as they are now: a slot file removed is slot_delete's, blocked.
    writeFileSync(policy, readFileSync(policy, "utf8").replace('"stack_apply", "slot_edit", "slot_delete"]', '"stack_apply", "slot_delete"]'));
    const dropped = (await s.call("POST", `/api/agent/approvals/${drop.id}/approve`)).body.approval;
    expect(dropped).toMatchObject({ state: "failed", error: { code: "mcp.tool_not_allowed" } });
    expect(readFileSync(join(s.config, "slots/utility.toml"), "utf8")).toContain("profile");
    // A request of a route no tool names (queued by REST with its tool "") is judged by the route's own floor: it runs.
    const untooled = await s.hal0.approvals.enqueue("", setCtx, call("chat", 12288));
    expect((await s.call("POST", `/api/agent/approvals/${untooled.id}/approve`)).body.approval).toMatchObject({ state: "executed" });
  });

  it("does not run a write whose route another tool aliases that policy.toml blocked for the agent since it asked, as a fresh call of it is refused", async () => {
    const s = await start();
    const queued = await s.call("PUT", "/api/slots/chat/config", { as: "agent:hermes__ops", body: { tune: { ctx_size: 12288 } } });
    expect(queued.body, JSON.stringify(queued.body)).toMatchObject({ status: "pending_approval" });
    const policy = join(s.config, "policy.toml");
    writeFileSync(policy, `${readFileSync(policy, "utf8")}\n[agents.hermes__ops]\nblocked = ["model_assign"]\n`);
    await new Promise((r) => setTimeout(r, 1100)); // past the read window
    const fresh = await s.call("PUT", "/api/slots/chat/config", { as: "agent:hermes__ops", body: { tune: { ctx_size: 16384 } } });
    expect([fresh.status, fresh.body.error?.code]).toEqual([403, "mcp.tool_not_allowed"]);
    const chat = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    const approved = (await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`)).body.approval;
    expect(approved, JSON.stringify({ state: approved.state, error: approved.error })).toMatchObject({ state: "failed", error: { code: "mcp.tool_not_allowed" } });
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toBe(chat);
  });

  it("refuses an approval whose files moved since it was requested: stale, naming them, and writes nothing", async () => {
    const s = await start();
    const a = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480));
    const file = join(s.config, "slots/chat.toml");
    const edited = `${readFileSync(file, "utf8")}# a person was here\n`;
    writeFileSync(file, edited);
    const res = await s.call("POST", `/api/agent/approvals/${a.id}/approve`);
    expect(res.body.approval.state).toBe("stale");
    expect(res.body.approval.reason).toContain("slots/chat.toml");
    expect(readFileSync(file, "utf8")).toBe(edited);
  });

  it("an approval while another file is saved half edited (the tree stopped compiling since the request) is refused, not the request: it stays pending and runs once the file is fixed", async () => {
    const s = await start();
    const a = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480));
    const utility = join(s.config, "slots/utility.toml");
    const text = readFileSync(utility, "utf8");
    writeFileSync(utility, `${text}\nctx_size = \n`); // a person's edit of another slot, saved mid-way
    const refused = await s.call("POST", `/api/agent/approvals/${a.id}/approve`);
    expect(refused.status, JSON.stringify(refused.body)).toBe(422);
    expect(refused.body.error).toMatchObject({ code: "config.invalid", details: { id: a.id, files: ["slots/utility.toml"] } });
    expect(refused.body.error.message).toMatch(/the request stays pending/);
    expect(s.hal0.approvals.get(a.id)!.state).toBe("pending");
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).not.toMatch(/ctx_size = 20480/);
    writeFileSync(utility, text);
    const approved = await s.call("POST", `/api/agent/approvals/${a.id}/approve`);
    expect(approved.body.approval).toMatchObject({ state: "executed" });
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/ctx_size = 20480/);
  });

  it("runs only what the card showed: a stack apply whose stack file (read, not edited) moved since the request is stale, saying what it would do now, and writes nothing", async () => {
    const s = await start();
    const queued = await s.call("POST", "/api/stacks/voice/apply", { as: "agent:hermes__ops" });
    expect(queued.status, JSON.stringify(queued.body)).toBe(202);
    expect(queued.body.effects.join("\n")).not.toMatch(/chat/);
    // Someone adds a slot switch to the stack after the request was made: no file the apply edits has moved.
    const stack = join(s.config, "stacks/voice.toml");
    writeFileSync(stack, `${readFileSync(stack, "utf8")}\n[[slot]]\nslot = "chat"\nprofile = "rocm"\n`);
    const chat = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    const res = await s.call("POST", `/api/agent/approvals/${queued.body.approval_id}/approve`);
    expect(res.body.approval, JSON.stringify(res.body)).toMatchObject({ state: "stale" });
    expect(res.body.approval.reason).toMatch(/^what it does changed since it was requested \(a file it reads moved\); it would now: .*switches slot chat to profile "rocm"/);
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toBe(chat);
    expect(readFileSync(join(s.config, "slots/whisper.toml"), "utf8")).not.toMatch(/enabled = true/);
    // Asked again, it is judged afresh: the new card names the switch.
    const again = await s.call("POST", "/api/stacks/voice/apply", { as: "agent:hermes__ops" });
    expect(again.status).toBe(202);
    expect(again.body.effects.join("\n")).toMatch(/switches slot chat to profile "rocm"/);
  });

  it("a request whose process is killed while it runs does not stay executing: the next read finds it failed, approvals.interrupted", async () => {
    // An upstream that takes connections and never answers: testing it runs until its timeout.
    const held: Socket[] = [];
    const hole = createServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => hole.listen(0, "127.0.0.1", resolve));
    const port = (hole.address() as AddressInfo).port;
    try {
      const s = await start({ env: { HAL0_UPSTREAM_ALLOW: `127.0.0.1:${port}` } });
      appendFileSync(join(s.config, "upstreams.toml"), `\n[[upstream]]\nname = "silent"\nkind = "remote"\nurl = "http://127.0.0.1:${port}/v1"\n`);
      appendFileSync(join(s.config, "policy.toml"), `\n[agents.hermes__ops]\ngated = ["upstream_test"]\n`);
      const queued = await s.call("POST", "/api/upstreams/silent/test?timeout_ms=30000", { as: "agent:hermes__ops" });
      expect(queued.status, JSON.stringify(queued.body)).toBe(202);
      const id = queued.body.approval_id as string;
      // A person approves it from the CLI (against the database), then that process is killed while the test runs.
      const cli = spawn(process.execPath, [HAL0, "agent", "approvals", "approve", id, "--config", s.config, "--state", s.state], { stdio: "ignore", env: { ...process.env, HAL0_TOKEN: "", HAL0_UPSTREAM_ALLOW: `127.0.0.1:${port}` } });
      const exited = new Promise((resolve) => cli.once("exit", resolve));
      await until(async () => s.hal0.approvals.unredacted(id)?.state, (state) => state === "executing", 20_000);
      cli.kill("SIGKILL");
      await exited;
      const after = s.hal0.approvals.list().find((a) => a.id === id)!;
      expect(after, JSON.stringify(after)).toMatchObject({ state: "failed", decided_by: "owner", error: { code: "approvals.interrupted" } });
      expect(after).not.toHaveProperty("executor"); // who ran it is the store's business, not a reader's
      expect((after.error as { message: string }).message).toMatch(/^the process that ran this approved request \(pid \d+\) stopped before it ended/);
      // A request this process runs is its own to finish: the same read leaves it alone.
      const mine = await s.call("POST", "/api/upstreams/silent/test?timeout_ms=1500", { as: "agent:hermes__ops" });
      const deciding = s.call("POST", `/api/agent/approvals/${mine.body.approval_id}/approve`);
      await until(async () => s.hal0.approvals.unredacted(mine.body.approval_id)?.state, (state) => state === "executing");
      expect(s.hal0.approvals.list().find((a) => a.id === mine.body.approval_id)!.state).toBe("executing");
      expect((await deciding).body.approval).toMatchObject({ state: "executed", result: { ok: false } });
    } finally {
      for (const socket of held) socket.destroy();
      hole.close();
    }
  }, 40_000);

  it("a request left executing when the host restarted is failed, approvals.interrupted, even when a process of the new boot has its executor's pid and start time", async () => {
    const s = await start();
    const a = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480));
    // As the serve before the reboot recorded itself; the serve started at this boot got the same pid and start time (this process's here).
    const executor = { host: hostname(), ns: readlinkSync("/proc/self/ns/pid"), boot: "00000000-0000-4000-8000-000000000000", pid: process.pid, start: procStatNow(process.pid)!.startTime };
    s.hal0.db.prepare("UPDATE approvals SET state = 'executing', decided_by = 'owner', executor = ? WHERE id = ?").run(JSON.stringify(executor), a.id);
    expect(s.hal0.approvals.list().find((x) => x.id === a.id)).toMatchObject({ state: "failed", error: { code: "approvals.interrupted" } });
  });

  it("denies with a reason; refuses at enqueue a call that would break the tree", async () => {
    const s = await start();
    const a = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480));
    const alice = s.hal0.tokens.mint("operator", "alice").token;
    const denied = await s.call("POST", `/api/agent/approvals/${a.id}/deny`, { body: { reason: "not today" }, headers: { authorization: `Bearer ${alice}` } });
    expect(denied.body.approval).toMatchObject({ state: "denied", reason: "not today", decided_by: "alice" });
    await expect(s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", -5))).rejects.toMatchObject({ code: "config.invalid" });
  });

  it("refuses a gated call whose arguments the route refuses (validation.invalid, over REST and MCP), and queues nothing", async () => {
    const s = await start();
    const token = s.agentToken("hermes__coder", ["rest", "mcp:admin"]);
    // slot_logs is gated for agents in the example box: a valid call is queued, one out of bounds is refused at once.
    const bad = await s.call("GET", "/api/slots/chat/logs?lines=99999", { headers: { authorization: `Bearer ${token}` } });
    expect(bad.status, JSON.stringify(bad.body)).toBe(422);
    expect(bad.body.error).toMatchObject({ code: "validation.invalid", details: { fields: [{ loc: ["query", "lines"] }] } });
    const c = await adminClient(s.url, "hermes__coder");
    try {
      const viaMcp = await callTool(c, "slot_logs", { name: "chat", lines: 99999 });
      expect(viaMcp.body, JSON.stringify(viaMcp.body)).toMatchObject({ error: { code: "validation.invalid" } });
    } finally {
      await c.close();
    }
    expect(s.hal0.approvals.list("pending")).toEqual([]);
    // A gated action the route could only refuse is refused at once too: no slot, a disabled slot, no such server, no supervisor.
    const ops = s.agentToken("hermes__ops", ["rest"]);
    const refusals: Array<[string, number, string]> = [
      ["/api/slots/nosuch/restart", 404, "slot.not_found"],
      ["/api/slots/vision/restart", 409, "slot.illegal_transition"],
      ["/api/mcp/nosuch/start", 404, "mcp.not_found"],
    ];
    for (const [path, status, code] of refusals) {
      const r = await s.call("POST", path, { headers: { authorization: `Bearer ${ops}` } });
      expect([r.status, r.body.error?.code], path).toEqual([status, code]);
    }
    const installed = (await s.call("GET", "/api/mcp/servers")).body.servers.find((x: { bundled?: boolean; id: string }) => !x.bundled);
    const unsupervised = await s.call("POST", `/api/mcp/${installed.id}/restart`, { headers: { authorization: `Bearer ${ops}` } });
    expect([unsupervised.status, unsupervised.body.error?.code]).toEqual([501, "mcp.supervisor_unavailable"]);
    expect(s.hal0.approvals.list("pending")).toEqual([]);
    // Each refusal is an audit row of its own (REST and MCP), with its code.
    const rows = s.hal0.audit.query({ actor: "agent:hermes__coder", outcome: "error", limit: 50, offset: 0 }).items.filter((r) => r.error_code === "validation.invalid");
    expect(rows.map((r) => r.kind).sort()).toEqual(["mcp", "rest"]);
    // A gated write that would break the tree, refused while being queued: audited too.
    const broken = await s.call("PUT", "/api/slots/chat/config", { headers: { authorization: `Bearer ${token}` }, body: { tune: { ctx_size: "big" } } });
    expect(broken.status, JSON.stringify(broken.body)).toBe(422);
    expect(s.hal0.audit.query({ actor: "agent:hermes__coder", outcome: "error", limit: 50, offset: 0 }).items.some((r) => r.error_code === broken.body.error.code && r.route === "PUT /api/slots/{name}/config")).toBe(true);
    const good = await s.call("GET", "/api/slots/chat/logs?lines=5", { headers: { authorization: `Bearer ${token}` } });
    expect(good.status).toBe(202);
    expect(good.body.status).toBe("pending_approval");
  });

  it("keeps pending requests across a restart, and expires them after the TTL", async () => {
    let now = Date.parse("2026-11-30T12:00:00Z");
    const first = await startTestServer({ keep: true, extra: { routes, now: () => now } });
    const a = await first.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480));
    await first.close();
    const second = await start({ reuse: { dir: first.dir }, extra: { routes, now: () => now } });
    expect((await second.call("GET", `/api/agent/approvals/${a.id}`)).body.approval.state).toBe("pending");
    expect(a.expires_at).toBe("2026-11-30T20:00:00.000Z"); // fixtures/box: [approvals] ttl_s = 28800
    now += 28_800_000;
    expect((await second.call("GET", `/api/agent/approvals/${a.id}`)).body.approval.state).toBe("pending");
    expect((await second.call("GET", "/api/agent/approvals?state=expired")).body.approvals.map((x: any) => x.id)).toEqual([a.id]);
    expect((await second.call("POST", `/api/agent/approvals/${a.id}/approve`)).body.error.code).toBe("approvals.already_resolved");
  });

  it("a pending request asked before the clock was set back is expired, not approvable for its whole TTL again: how long it waited is not known", async () => {
    let now = Date.parse("2026-11-30T12:00:00Z");
    const s = await start({ extra: { routes, now: () => now } });
    const a = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480));
    now += 60_000;
    expect(s.hal0.approvals.get(a.id)!.state).toBe("pending");
    now -= 24 * 3600_000; // NTP steps the clock back a day: a TTL of 8 h would now end 32 h from here
    const approved = await s.call("POST", `/api/agent/approvals/${a.id}/approve`);
    expect(approved.body.error.code).toBe("approvals.already_resolved");
    const expired = (await s.call("GET", `/api/agent/approvals/${a.id}`)).body.approval;
    expect(expired).toMatchObject({ state: "expired", reason: expect.stringMatching(/^the clock was set back past the time it was asked/) });
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).not.toMatch(/ctx_size = 20480/);
    // A step of a few seconds (NTP as the host boots) expires nothing: within CLOCK_STEP_GRACE_MS.
    const c = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 16384));
    now -= 3_000;
    expect((await s.call("GET", "/api/agent/approvals?state=pending")).body.approvals.map((x: any) => x.id)).toContain(c.id);
    now += 3_000;
    expect((await s.call("POST", `/api/agent/approvals/${c.id}/deny`, { body: { reason: "not now" } })).status).toBe(200);
    // One asked after the step lives its TTL from then, as any other.
    const b = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 24576));
    now += 60_000;
    expect(s.hal0.approvals.get(b.id)!.state).toBe("pending");
  });

  it("the inbox's Recently decided lists the last decided first: an old request decided just now is on the page", async () => {
    let now = Date.parse("2026-11-30T12:00:00Z");
    const s = await start({ extra: { routes, now: () => now } });
    const owner = { kind: "operator" as const, name: "owner" };
    const old = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 4096));
    const later: string[] = [];
    for (let i = 1; i <= 20; i++) {
      now += 1_000;
      const a = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 4096 + i * 512));
      s.hal0.approvals.deny(a.id, owner);
      later.push(a.id);
    }
    now += 1_000;
    s.hal0.approvals.deny(old.id, owner);
    const inbox = await httpCall(s.url, "GET", "/", { headers: { authorization: `Bearer ${s.operator}` } });
    expect(inbox.status).toBe(200);
    const shown = [...String(inbox.body).matchAll(/<article class="card decided" id="([^"]+)"/g)].map((m) => m[1]);
    expect(shown).toEqual([old.id, ...later.reverse().slice(0, 19)]);
  });

  it("streams a snapshot, then every transition, as server-sent events", async () => {
    const s = await start();
    const pending = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 16384));
    const events: Array<{ event: string; data: any }> = [];
    const req = request(`${s.url}/api/agent/approvals/events`, { headers: { authorization: `Bearer ${s.operator}` } });
    const got = (n: number) => new Promise<void>((resolve) => {
      const check = setInterval(() => events.length >= n && (clearInterval(check), resolve()), 20);
    });
    req.on("response", (res) => {
      expect(res.headers["content-type"]).toBe("text/event-stream");
      let buf = "";
      res.on("data", (c: Buffer) => {
        buf += c.toString();
        for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event && data) events.push({ event, data: JSON.parse(data) });
        }
      });
    });
    req.end();
    await got(1);
    expect(events[0]!.event).toBe("snapshot");
    expect(events[0]!.data.approvals.map((x: any) => x.id)).toEqual([pending.id]);
    const b = await s.hal0.approvals.enqueue("slot_edit", setCtx, call("chat", 20480));
    await s.call("POST", `/api/agent/approvals/${b.id}/approve`);
    await got(4);
    expect(events.slice(1).map((e) => `${e.event} ${e.data.approval.id}`)).toEqual([`enqueued ${b.id}`, `approved ${b.id}`, `executed ${b.id}`]);
    req.destroy();
  });

  it("cuts an events stream whose client never reads, once it holds MAX_UNREAD_BYTES unread, instead of keeping its events for ever", async () => {
    const s = await start();
    const { port } = new URL(s.url);
    // A client that asks for the stream and never reads a byte of it.
    const socket = connect(Number(port), "127.0.0.1");
    socket.pause();
    socket.write(`GET /api/agent/approvals/events HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${s.operator}\r\n\r\n`);
    await until(async () => s.hal0.approvals.listenerCount("event"), (n) => n === 1);
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    const [approval] = s.hal0.approvals.list();
    const big = { ...(approval ?? {}), id: "apr_0000000000000000", summary: "x".repeat(100_000) } as unknown as Approval;
    // Far more than the kernel's socket buffers and MAX_UNREAD_BYTES hold.
    for (let i = 0; i * 100_000 < 8 * MAX_UNREAD_BYTES && s.hal0.approvals.listenerCount("event") > 0; i++) {
      s.hal0.approvals.emit("event", { type: "enqueued", approval: big });
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(s.hal0.approvals.listenerCount("event")).toBe(0);
    socket.resume();
    await closed;
  });

  it("serves any number of open events streams without node's listener-leak warning, and lets each go when it closes", async () => {
    const s = await start();
    const warnings: string[] = [];
    const onWarning = (w: Error) => void warnings.push(`${w.name}: ${w.message}`);
    process.on("warning", onWarning);
    try {
      const streams = await Promise.all(Array.from({ length: 12 }, () => openEventStream(s.url, "/api/agent/approvals/events", s.operator, /event: snapshot/)));
      await Promise.all(streams.map((st) => st.done));
      expect(s.hal0.approvals.listenerCount("event")).toBe(12);
      for (const st of streams) st.close();
      await until(async () => s.hal0.approvals.listenerCount("event"), (n) => n === 0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.startsWith("MaxListenersExceededWarning"))).toEqual([]);
    } finally {
      process.off("warning", onWarning);
    }
  });
});
