import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { ROUTES } from "../../server/routes/index.js";
import { MEMORY_ROUTES } from "../../server/memory/service.js";
import { startTestServer, type TestServer } from "../server/harness.js";
import { captureIo } from "./helpers.js";
import { lanAddress } from "../helpers/lan.js";

const slotEdit = ROUTES.find((r) => r.tools?.includes("slot_edit"))!;
const request = (ctx: number) => ({ params: { name: "chat" }, query: {}, body: { tune: { ctx_size: ctx } }, caller: { kind: "agent" as const, agent: "hermes__coder", private: false, via: "mcp" as const }, requestId: "t" });


let s: TestServer | undefined;
afterEach(async () => {
  await s?.close();
  s = undefined;
});

describe("hal0 agent approvals", () => {
  it("lists, shows, approves and denies against the state folder's database", async () => {
    s = await startTestServer({ keep: false });
    const a = await s.hal0.approvals.enqueue("slot_edit", slotEdit, request(20480));
    const b = await s.hal0.approvals.enqueue("slot_edit", slotEdit, request(16384));
    const flags = ["--config", s.config, "--state", s.state];
    const list = captureIo({ USER: "alice" });
    expect(await main(["agent", "approvals", "list", "--only", "pending", ...flags], list)).toBe(0);
    expect(list.out()).toContain(a.id);
    expect(list.out()).toContain("hermes__coder");
    // A state no request can be in is a usage error, not an empty list that reads as "nothing waits".
    const bogus = captureIo();
    expect(await main(["agent", "approvals", "list", "--only", "pendng", ...flags], bogus)).toBe(64);
    expect(bogus.err()).toMatch(/--only "pendng": a request's state is one of pending, approved/);
    const show = captureIo();
    expect(await main(["agent", "approvals", "show", a.id, ...flags], show)).toBe(0);
    expect(JSON.parse(show.out()).approval.args.body).toEqual({ tune: { ctx_size: 20480 } });

    const approve = captureIo({ USER: "alice" });
    expect(await main(["agent", "approvals", "approve", a.id, ...flags], approve)).toBe(0);
    expect(approve.out()).toMatch(/executed/);
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/ctx_size = 20480/);
    expect(s.hal0.approvals.get(a.id)).toMatchObject({ state: "executed", decided_by: "owner" });

    const deny = captureIo();
    expect(await main(["agent", "approvals", "deny", b.id, "--reason", "no", ...flags], deny)).toBe(0);
    const again = captureIo();
    expect(await main(["agent", "approvals", "deny", b.id, ...flags], again)).toBe(1);
    expect(again.err()).toContain("approvals.already_resolved");
  });

  it("prints a request's summary, which an agent chose, with its control characters escaped: no escape sequence reaches the terminal", async () => {
    s = await startTestServer();
    const summary = "harmless\u001b[2K\r\u001b[1Aapr_0000 executed\nforged\u0007 \u202etxt.exe";
    const planned = await s.call("POST", "/api/plans", { as: "agent:hermes__ops", body: { summary, edits: [{ file: "slots/utility.toml", op: "set", path: ["priority"], value: 13 }] } });
    const queued = await s.call("POST", `/api/plans/${planned.body.id}/apply`, { as: "agent:hermes__ops" });
    expect(queued.body, JSON.stringify(queued.body)).toMatchObject({ status: "pending_approval" });
    const list = captureIo();
    expect(await main(["agent", "approvals", "list", "--config", s.config, "--state", s.state], list)).toBe(0);
    expect(list.out()).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    const row = list.out().split("\n").filter((l) => l.includes(queued.body.approval_id));
    expect(row).toHaveLength(1);
    expect(row[0]).toContain("harmless\\u001b[2K\\u000d\\u001b[1Aapr_0000 executed\\u000aforged\\u0007 \\u202etxt.exe");
  });

  it("a $HAL0_TOKEN minted without mcp:memory decides and reads against the database as through the server: it neither approves a hal0-memory request nor reads what it carries", async () => {
    s = await startTestServer();
    const memoryAdd = MEMORY_ROUTES.find((r) => r.path === "/mcp/memory/memory_add")!;
    const a = await s.hal0.approvals.enqueue("memory_add", memoryAdd, { params: {}, query: {}, body: { text: "the vault code is 4471" }, caller: { kind: "agent", agent: "hermes__coder", private: false, via: "mcp" }, requestId: "t" });
    const flags = ["--config", s.config, "--state", s.state];
    const narrow = { HAL0_TOKEN: s.hal0.tokens.mint("operator", "ci", ["rest"]).token };
    const show = captureIo(narrow);
    expect(await main(["agent", "approvals", "show", a.id, "--json", ...flags], show)).toBe(0);
    expect(show.out()).not.toContain("4471");
    const approve = captureIo(narrow);
    expect(await main(["agent", "approvals", "approve", a.id, ...flags], approve)).toBe(1);
    expect(approve.err()).toContain("auth.scope_denied");
    expect(s.hal0.approvals.get(a.id)!.state).toBe("pending");
    // The owner's token (the state folder's) decides it.
    const owner = captureIo();
    expect(await main(["agent", "approvals", "approve", a.id, ...flags], owner)).toBe(0);
    expect(s.hal0.approvals.get(a.id)!.state).toBe("executed");
  });

  it("lists every request through --server, past the server's page of 500", async () => {
    s = await startTestServer();
    const a = await s.hal0.approvals.enqueue("slot_edit", slotEdit, request(20480));
    const cols = "tool, route, args, dedup_key, caller, plan_id, base_revision, summary, effects, judged, created_at, expires_at";
    const copy = s.hal0.db.prepare(`INSERT INTO approvals (id, state, ${cols}) SELECT ?, 'denied', ${cols} FROM approvals WHERE id = ?`);
    s.hal0.db.exec("BEGIN");
    for (let i = 0; i < 520; i++) copy.run(`apr_copy${String(i).padStart(6, "0")}`, a.id);
    s.hal0.db.exec("COMMIT");
    const io = captureIo({ HAL0_TOKEN: s.operator });
    expect(await main(["agent", "approvals", "list", "--server", s.url], io), io.err()).toBe(0);
    expect(io.out().split("\n").filter((l) => l.includes("apr_copy"))).toHaveLength(520);
    expect(io.out()).toContain(a.id);
  });

  it("goes through a running server with --server", async () => {
    s = await startTestServer();
    // The requester still holds a token reaching the door it asked through (hal0-admin): its request may run.
    s.agentToken("hermes__coder", ["mcp:admin"]);
    const a = await s.hal0.approvals.enqueue("slot_edit", slotEdit, request(20480));
    // No credential: refused. An agent's token: refused. The operator's (from the state folder): decides.
    const none = captureIo();
    expect(await main(["agent", "approvals", "approve", a.id, "--server", s.url, "--state", `${s.state}-none`], none)).toBe(1);
    expect(none.err()).toContain("auth.required");
    const asAgent = captureIo({ HAL0_TOKEN: s.agentToken("hermes__coder", ["rest"]) });
    expect(await main(["agent", "approvals", "approve", a.id, "--server", s.url], asAgent)).toBe(1);
    expect(asAgent.err()).toContain("auth.operator_required");
    expect(s.hal0.approvals.get(a.id)!.state).toBe("pending");
    const io = captureIo();
    expect(await main(["agent", "approvals", "approve", a.id, "--server", s.url, "--state", s.state], io)).toBe(0);
    expect(io.out()).toMatch(/executed/);
    expect(s.hal0.approvals.get(a.id)!.decided_by).toBe("owner");
    const missing = captureIo({ HAL0_TOKEN: s.operator });
    expect(await main(["agent", "approvals", "show", "apr_nope", "--server", s.url], missing)).toBe(1);
    expect(missing.err()).toContain("approvals.not_found");
  });

  it("refuses a --server with a ?query (it swallowed the API path) as a usage error, and one that does not answer as hal0 serve (a runner's port, a web page) as approvals.unavailable, not an internal error", async () => {
    const other = createServer((req, res) => {
      if (req.url?.startsWith("/api/agent/approvals/")) res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ status: "ok" }));
      else if (req.url?.startsWith("/api/")) res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ object: "list", data: [] }));
      else res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><p>hello</p>");
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    try {
      const query = captureIo({ HAL0_TOKEN: "hal0_op_x" });
      expect(await main(["agent", "approvals", "list", "--server", `${url}?x=1`], query)).toBe(64);
      expect(query.err()).toContain(`--server "${url}?x=1": expected the URL of a running hal0 serve`);
      for (const args of [["list"], ["show", "apr_1"], ["approve", "apr_1"], ["deny", "apr_1"]]) {
        const io = captureIo({ HAL0_TOKEN: "hal0_op_x" });
        expect(await main(["agent", "approvals", ...args, "--server", url], io), args[0]).toBe(1);
        expect(io.err()).toMatch(new RegExp(`^hal0 agent: approvals\\.unavailable: ${url.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} answered (GET|POST) /api/agent/approvals\\S* with no (list of approvals|approval): it is not a hal0 serve`));
      }
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it("sends the state folder's operator.token to no --server beyond loopback but the one serving that folder: another box (a $HAL0_SERVER left set) is refused before anything is sent; $HAL0_TOKEN is sent where it is told", async () => {
    s = await startTestServer();
    const seen: Array<string | undefined> = [];
    const elsewhere = createServer((req, res) => {
      seen.push(req.headers.authorization);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ approvals: [] }));
    });
    const LAN = lanAddress();
    await new Promise<void>((resolve) => elsewhere.listen(0, LAN, resolve));
    try {
      const url = `http://${LAN}:${(elsewhere.address() as AddressInfo).port}`;
      const io = captureIo({ HAL0_SERVER: url });
      expect(await main(["agent", "approvals", "list", "--state", s.state], io)).toBe(1);
      expect(io.err()).toContain("auth.required");
      expect(io.err()).not.toContain(s.operator);
      expect(seen).toEqual([]);
      // A token named for that server is sent to it.
      const told = captureIo({ HAL0_SERVER: url, HAL0_TOKEN: "hal0_op_elsewhere" });
      expect(await main(["agent", "approvals", "list", "--state", s.state], told)).toBe(0);
      expect(seen).toEqual(["Bearer hal0_op_elsewhere"]);
    } finally {
      await new Promise((resolve) => elsewhere.close(resolve));
    }
  });
});
