import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { Writable } from "node:stream";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ROUTES } from "../../server/routes/index.js";
import { serveLogger } from "../../server/serve.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/** Coded replies of reads that pass on to something that may not be running here (a runner, the Docker engine). */
const UNAVAILABLE = new Set(["slot.not_ready", "slot.runner_error", "image.engine_unavailable"]);

/**
 * Point 10, "secrets stay secret on every read": distinctive secrets go into
 * the box through real calls (an installed MCP server's env, a slot's env and
 * its `--api-key` flag, agents' gated calls — one approved, two pending —
 * saved plans), then every read is scanned for them and for the bearer
 * tokens: each route of the table that reads, the approvals stream, the
 * pages, hal0-admin's read tools over the SDK's client, the server's log
 * lines, and (for the tokens) the SQLite files byte by byte.
 */

const rand = (n = 24) => randomBytes(n).toString("hex").slice(0, n);
const SECRETS = {
  mcp: `ghp_${rand(36)}`, // GITHUB_PERSONAL_ACCESS_TOKEN of an installed MCP server
  mcpPlain: `plainmcp${rand()}`, // an MCP env value under a harmless name: every MCP env value is masked
  slot: `slotkey${rand()}`, // [server] env API_KEY of slot chat
  flag: `flagkey${rand()}`, // --api-key in chat's extra_args
  approved: `hf_${rand(30)}`, // an agent's gated slot_edit, approved
  pending: `pendingkey${rand()}`, // an agent's gated slot_edit, left pending (the inbox re-plans it)
  streamed: `streamedpw${rand()}`, // queued while the approvals stream is open
  plan: `plankey${rand()}`, // a saved plan's `set` of an env secret
  planMcp: `planmcp${rand()}`, // the same plan's `set` of an MCP env value
  planText: `plantext${rand()}`, // a saved plan's `text` edit with a TOKEN in it
  profile: `hf_${rand(30)}`, // a profile's env HF_TOKEN (its export envelope is a read)
};
const SECRET_VALUES = Object.values(SECRETS);
/** hal0's token shape (server/identity/tokens.ts): anything like it in a read is a leak. */
const TOKEN_SHAPE = /hal0_(?:op|ag)_[A-Za-z0-9_-]{32}/;

const logLines: string[] = [];
let logger: import("pino").Logger;
let s: TestServer;
beforeEach(async () => {
  logLines.length = 0;
  const sink = new Writable({ write: (chunk, _enc, done) => (logLines.push(...String(chunk).split("\n").filter(Boolean)), done()) });
  logger = serveLogger("debug", sink);
  s = await startTestServer({ extra: { logger } });
  const file = join(s.config, "hal0.toml");
  writeFileSync(file, `${readFileSync(file, "utf8")}\n[hermes]\nhome = "${join(s.config, "..", "hermes")}"\n`);
});
afterEach(async () => s.close());

/** Every place a credential or secret must not be: what leaked, or []. */
function leaks(where: string, text: string, tokens: readonly string[]): string[] {
  const found = [...SECRET_VALUES, ...tokens].filter((v) => text.includes(v)).map((v) => `${where}: ${v}`);
  const shaped = TOKEN_SHAPE.exec(text);
  return shaped ? [...found, `${where}: token-shaped ${shaped[0]}`] : found;
}

/** The first server-sent events of `path` (as the operator) until `until` holds for them, or `ms` pass. */
function readEvents(path: string, until: (events: string[]) => boolean, ms = 5000): { events: Promise<string[]>; opened: Promise<void> } {
  const events: string[] = [];
  let opened!: () => void;
  const openedP = new Promise<void>((r) => (opened = r));
  const done = new Promise<string[]>((resolve, reject) => {
    const req = request(`${s.url}${path}`, { headers: { authorization: `Bearer ${s.operator}` } });
    const stop = () => (req.destroy(), resolve(events));
    const timer = setTimeout(stop, ms);
    req.on("response", (res) => {
      expect(res.statusCode).toBe(200);
      let buf = "";
      res.on("data", (c: Buffer) => {
        buf += c.toString();
        for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
          events.push(buf.slice(0, i));
          buf = buf.slice(i + 2);
          if (events.length === 1) opened();
          if (until(events)) (clearTimeout(timer), stop());
        }
      });
    });
    req.on("error", (err) => ((err as NodeJS.ErrnoException).code === "ECONNRESET" ? resolve(events) : reject(err)));
    req.end();
  });
  return { events: done, opened: openedP };
}

/** Queues a gated slot_edit of `slot` over MCP as `agent` with an env secret; returns the approval id. */
async function gatedEdit(agent: string, slot: string, env: Record<string, string>): Promise<string> {
  const c = await adminClient(s.url, agent);
  const res = await callTool(c, "slot_edit", { name: slot, server: { env } });
  await c.close();
  expect(res.body, JSON.stringify(res.body)).toMatchObject({ status: "pending_approval" });
  return res.body.approval_id as string;
}

describe("secrets stay secret on every read", () => {
  it("no secret value and no bearer token in any read route, the approvals stream, the pages, MCP reads, the log; no token in the database", async () => {
    // --- Put the secrets in, each through a real call; check each is where it was put. ---
    const manifest = { id: "ghsecret", name: "GitHub (test)", transport: "stdio", command: "npx", args: ["-y", "@modelcontextprotocol/server-github"], env_required: ["GITHUB_PERSONAL_ACCESS_TOKEN"] };
    const installed = await s.call("POST", "/api/mcp/install", { body: { manifest } });
    expect(installed.status, JSON.stringify(installed.body)).toBe(201);
    const configured = await s.call("PATCH", "/api/mcp/ghsecret/config", { body: { env: { GITHUB_PERSONAL_ACCESS_TOKEN: SECRETS.mcp, GITHUB_HOST: SECRETS.mcpPlain } } });
    expect(configured.status, JSON.stringify(configured.body)).toBe(200);
    const mcpFile = readFileSync(join(s.config, "mcp-servers/ghsecret.toml"), "utf8");
    expect(mcpFile).toContain(SECRETS.mcp);
    expect(mcpFile).toContain(SECRETS.mcpPlain);

    const edited = await s.call("PUT", "/api/slots/chat/config", { body: { server: { extra_args: `--metrics --api-key ${SECRETS.flag}`, env: { API_KEY: SECRETS.slot, ROCBLAS_USE_HIPBLASLT: "1" } } } });
    expect(edited.status, JSON.stringify(edited.body)).toBe(200);
    const chatFile = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    expect(chatFile).toContain(SECRETS.slot);
    expect(chatFile).toContain(SECRETS.flag);
    const resolvedSpec = (await s.hal0.box.model()).slots.chat!.spec;
    expect(resolvedSpec.argv).toContain(SECRETS.flag);
    expect(resolvedSpec.env.API_KEY).toBe(SECRETS.slot);

    const profiled = await s.call("PUT", "/api/profiles/cpu-small", { body: { env: { HF_TOKEN: SECRETS.profile } } });
    expect(profiled.status, JSON.stringify(profiled.body)).toBe(200);
    expect(readFileSync(join(s.config, "profiles.toml"), "utf8")).toContain(SECRETS.profile);

    const approvedId = await gatedEdit("hermes__coder", "coder", { HF_TOKEN: SECRETS.approved });
    const approved = await s.call("POST", `/api/agent/approvals/${approvedId}/approve`);
    expect(approved.body.approval, JSON.stringify(approved.body)).toMatchObject({ state: "executed" });
    expect(approved.body.approval.result).not.toBeNull();
    expect(readFileSync(join(s.config, "slots/coder.toml"), "utf8")).toContain(SECRETS.approved);
    const pendingId = await gatedEdit("hermes__coder", "utility", { OPENAI_API_KEY: SECRETS.pending, OMP_NUM_THREADS: "8" });

    const planSet = await s.call("POST", "/api/plans", { body: { summary: "give rerank its key", edits: [
      { file: "slots/rerank.toml", op: "set", path: ["server", "env", "OPENAI_API_KEY"], value: SECRETS.plan },
      { file: "mcp-servers/ghsecret.toml", op: "set", path: ["env", "GITHUB_HOST"], value: SECRETS.planMcp },
    ] } });
    expect(planSet.status, JSON.stringify(planSet.body)).toBe(201);
    expect(planSet.body.valid).toBe(true);
    const whisper = readFileSync(join(s.config, "slots/whisper.toml"), "utf8");
    const text = whisper.replace('env = { OMP_NUM_THREADS = "4" }', `env = { OMP_NUM_THREADS = "4", SERVICE_TOKEN = "${SECRETS.planText}" }`);
    expect(text).toContain(SECRETS.planText);
    const planText = await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/whisper.toml", op: "text", text }] } });
    expect(planText.status, JSON.stringify(planText.body)).toBe(201);
    expect(planText.body.valid).toBe(true);

    // The approvals stream, open while one more gated call is queued: its snapshot and the enqueued event.
    const stream = readEvents("/api/agent/approvals/events", (ev) => ev.some((e) => /^event: enqueued$/m.test(e)));
    await stream.opened;
    const streamedId = await gatedEdit("hermes__coder", "embed", { SERVICE_PASSWORD: SECRETS.streamed });
    const events = await stream.events;
    expect(events.some((e) => /^event: snapshot$/m.test(e) && e.includes(pendingId))).toBe(true);
    expect(events.some((e) => /^event: enqueued$/m.test(e) && e.includes(streamedId))).toBe(true);

    // The stores keep what execution needs: the plans and the approvals' args are readable in the database.
    const tokens = [s.operator, s.agentToken("hermes__coder"), s.agentToken("scanner")];
    const db = new Database(join(s.state, "hal0.db"), { readonly: true });
    const dump = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((t) => JSON.stringify(db.prepare(`SELECT * FROM "${(t as { name: string }).name}"`).all())).join("\n");
    db.close();
    for (const kept of [SECRETS.plan, SECRETS.planText, SECRETS.pending, SECRETS.streamed]) expect(dump).toContain(kept);

    // --- Scan every read. ---
    const found: string[] = [];
    const scan = (where: string, body: unknown) => found.push(...leaks(where, typeof body === "string" ? body : JSON.stringify(body), tokens));
    scan("SSE /api/agent/approvals/events", events.join("\n\n"));

    const slotId = (await s.call("GET", "/api/slots/chat")).body.id as string;
    const profile = (await s.call("GET", "/api/slots/chat")).body.profile as string;
    const names: Record<string, (path: string) => string[]> = {
      id: (p) => (p.startsWith("/api/plans/") ? [planSet.body.id, planText.body.id] : [approvedId, pendingId, streamedId]),
      name: (p) => (p.startsWith("/api/slots/") ? ["chat", "coder", "utility"] : p.startsWith("/api/profiles/") ? [profile, "cpu-small"] : p.startsWith("/api/upstreams/") ? ["openrouter"] : []),
      slot_id: () => [slotId],
      server_id: () => ["ghsecret", "hal0-admin"],
      model_id: () => ["qwen3-4b"],
      slug: () => ["forge"],
      backend_id: () => ["llama.cpp", "fastflowlm"],
    };
    const reads = ROUTES.filter((r) => r.kind === "read");
    expect(reads.length).toBeGreaterThan(30);
    let scanned = 0;
    for (const route of reads) {
      const params = [...route.path.matchAll(/\{([a-z_]+)(?::path)?\}/g)].map((m) => m[1]!);
      let paths = [route.path];
      for (const p of params) {
        const values = names[p]?.(route.path) ?? [];
        expect(values.length, `a real value for {${p}} of ${route.path}`).toBeGreaterThan(0);
        paths = paths.flatMap((path) => values.map((v) => path.replace(new RegExp(`\\{${p}(?::path)?\\}`), encodeURIComponent(v))));
      }
      for (const path of paths) {
        const extra = path === "/api/agent/approvals" ? ["", "?state=executed", "?state=pending"] : path === "/api/auth/tokens" ? ["", "?all=true"] : path === "/api/slots/chat/logs" ? ["?lines=2000"] : [""];
        for (const q of extra) {
          const res = await s.call(route.method, `${path}${q}`);
          // A read that passes on to a runner or the engine may say, coded, that it is not there (a stopped NPU slot); never a crash.
          if (!UNAVAILABLE.has(res.body?.error?.code)) expect(res.status, `${route.method} ${path}${q}: ${JSON.stringify(res.body).slice(0, 300)}`).toBeLessThan(500);
          scan(`${route.method} ${path}${q}`, res.body);
          scanned++;
        }
      }
    }
    expect(scanned).toBeGreaterThan(reads.length);
    // Every stream of the table is read here: the approvals stream above, the MCP tool-call stream while the tools below run.
    expect(ROUTES.filter((r) => r.kind === "stream").map((r) => r.path).sort()).toEqual(["/api/agent/approvals/events", "/api/mcp/stream", "/api/models/pulls/events", "/api/runner-images/pulls/events"]);
    scan("SSE /api/models/pulls/events", (await readEvents("/api/models/pulls/events", (ev) => ev.some((e) => /^event: snapshot$/m.test(e)), 6000).events).join("\n\n"));
    scan("SSE /api/runner-images/pulls/events", (await readEvents("/api/runner-images/pulls/events", (ev) => ev.some((e) => /^event: snapshot$/m.test(e)), 6000).events).join("\n\n"));
    const mcpStream = readEvents("/api/mcp/stream", (ev) => ev.some((e) => /^event: mcp\.tool\./m.test(e)), 6000);
    await new Promise((r) => setTimeout(r, 100));

    // hal0-admin's read tools over the SDK's client, as an agent.
    const c = await adminClient(s.url, "scanner");
    for (const [tool, args] of [["mcp_server_list", {}], ["slot_config", { name: "chat" }], ["slot_resolved", { name: "chat" }], ["plan_show", { id: planSet.body.id }], ["plan_list", {}], ["approval_list", {}], ["activity_list", {}]] as const) {
      const res = await callTool(c, tool, args);
      expect(res.isError, `${tool}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(false);
      scan(`MCP ${tool}`, res.body);
    }
    await c.close();
    const toolEvents = await mcpStream.events;
    expect(toolEvents.some((e) => /^event: mcp\.tool\.ok$/m.test(e))).toBe(true);
    scan("SSE /api/mcp/stream", toolEvents.join("\n\n"));

    // The pages: the inbox (with the pending requests re-planned), the status page, every plan page.
    const pending = s.hal0.approvals.list("pending");
    expect(pending.map((a) => a.id).sort()).toEqual([pendingId, streamedId].sort());
    const pages = ["/", "/status", `/plans/${planSet.body.id}`, `/plans/${planText.body.id}`, ...pending.map((a) => `/plans/${a.plan_id}`)];
    for (const path of pages) {
      const res = await s.call("GET", path);
      expect(res.status, path).toBe(200);
      scan(`page ${path}`, res.body);
    }
    // The log: the server wrote request lines, and its logger masks a secret handed to it directly.
    logger.info({ headers: { authorization: `Bearer ${s.operator}` }, env: { API_KEY: SECRETS.slot }, note: `retrying with token=${s.agentToken("scanner")} and --api-key ${SECRETS.flag}` }, "probe");
    await new Promise((r) => setImmediate(r));
    expect(logLines.some((l) => l.includes('"msg":"request"'))).toBe(true);
    expect(logLines.some((l) => l.includes('"msg":"probe"'))).toBe(true);
    logLines.forEach((l, i) => scan(`log line ${i}`, l));

    expect(found).toEqual([]);

    // The reads do show the secrets' places, masked.
    const servers = (await s.call("GET", "/api/mcp/servers")).body.servers as Array<{ id: string; env: Record<string, string> }>;
    expect(servers.find((x) => x.id === "ghsecret")!.env).toEqual({ GITHUB_PERSONAL_ACCESS_TOKEN: "[redacted]", GITHUB_HOST: "[redacted]" });
    const config = (await s.call("GET", "/api/slots/chat/config")).body;
    expect(config.content.server.env).toEqual({ API_KEY: "[redacted]", ROCBLAS_USE_HIPBLASLT: "1" });
    expect(config.text).toContain('API_KEY = "[redacted]"');
    expect((await s.call("GET", "/api/slots/chat/resolved")).body.argv).toContain("[redacted]");
    const shown = (await s.call("GET", `/api/plans/${planSet.body.id}`)).body;
    expect(shown.changes.edits.map((e: { value: unknown }) => e.value)).toEqual(["[redacted]", "[redacted]"]);
    expect((await s.call("GET", `/api/agent/approvals/${pendingId}`)).body.approval.args.body.server.env).toEqual({ OPENAI_API_KEY: "[redacted]", OMP_NUM_THREADS: "8" });

    const inbox = (await s.call("GET", "/")).body as string;
    expect(inbox).toContain(pendingId);
    // Re-planned from the stored call, not the masked copy: the same plan as when it was queued.
    expect(inbox).not.toContain("The plan differs");
    expect(inbox).not.toContain("cannot be made again");
    expect(inbox).toContain("[redacted]");
    const diff = (await s.call("GET", `/plans/${pending.find((a) => a.id === pendingId)!.plan_id}`)).body as string;
    expect(diff).toMatch(/OPENAI_API_KEY = &quot;\[redacted\]&quot;/);
    const textPage = (await s.call("GET", `/plans/${planText.body.id}`)).body as string;
    expect(textPage).toMatch(/- env = \{ OMP_NUM_THREADS = &quot;4&quot; \}/);
    expect(textPage).toMatch(/\+ env = \{ OMP_NUM_THREADS = &quot;4&quot;, SERVICE_TOKEN = &quot;\[redacted\]&quot; \}/);

    // No bearer token in the database or its WAL, byte by byte (the agents' args may keep a slot's secret for execution; tokens never).
    const raw = ["hal0.db", "hal0.db-wal"].map((f) => (existsSync(join(s.state, f)) ? readFileSync(join(s.state, f)).toString("latin1") : "")).join("\n");
    expect(raw).toContain(SECRETS.plan); // the bytes are readable: a token there would be found
    for (const t of tokens) expect(raw.includes(t), "the database holds a bearer token").toBe(false);
    expect(TOKEN_SHAPE.exec(raw)?.[0], "the database holds something token-shaped").toBeUndefined();
    for (const t of tokens) expect(dump.includes(t)).toBe(false);
  });

  it("a masked value sent back keeps the secret it stands for (read-modify-write of an MCP server's env, a profile, a slot's file); an export masks before it seals", async () => {
    await s.call("POST", "/api/mcp/install", { body: { manifest: { id: "ghsecret", name: "GitHub (test)", transport: "stdio", command: "npx", env_required: ["GITHUB_PERSONAL_ACCESS_TOKEN"] } } });
    await s.call("PATCH", "/api/mcp/ghsecret/config", { body: { env: { GITHUB_PERSONAL_ACCESS_TOKEN: SECRETS.mcp } } });
    const env = ((await s.call("GET", "/api/mcp/servers")).body.servers as Array<{ id: string; env: Record<string, string> }>).find((x) => x.id === "ghsecret")!.env;
    expect(env).toEqual({ GITHUB_PERSONAL_ACCESS_TOKEN: "[redacted]" });
    expect((await s.call("PATCH", "/api/mcp/ghsecret/config", { body: { env: { ...env, GITHUB_HOST: "github.example" } } })).status).toBe(200);
    const mcpFile = readFileSync(join(s.config, "mcp-servers/ghsecret.toml"), "utf8");
    expect(mcpFile).toContain(SECRETS.mcp);
    expect(mcpFile).toContain("github.example");
    expect(mcpFile).not.toContain("[redacted]");

    // A profile's export masks its secrets before sealing: the envelope still imports (its checksum covers what it carries).
    await s.call("PUT", "/api/profiles/cpu-small", { body: { env: { HF_TOKEN: SECRETS.profile } } });
    const exported = await s.call("POST", "/api/profiles/cpu-small/export");
    expect(exported.body.profile.env).toEqual({ HF_TOKEN: "[redacted]" });
    const imported = await s.call("POST", "/api/profiles/import", { body: { envelope: exported.body, name: "cpu-shared" } });
    expect(imported.status, JSON.stringify(imported.body)).toBe(201);
    expect((await s.call("GET", "/api/profiles/cpu-shared")).body.env).toEqual({ HF_TOKEN: "[redacted]" });
    const prof = (await s.call("GET", "/api/profiles/cpu-small")).body;
    expect(prof.env).toEqual({ HF_TOKEN: "[redacted]" });
    expect((await s.call("PUT", "/api/profiles/cpu-small", { body: { env: prof.env, description: "shared" } })).status).toBe(200);
    expect(readFileSync(join(s.config, "profiles.toml"), "utf8")).toContain(SECRETS.profile);

    await s.call("PUT", "/api/slots/chat/config", { body: { server: { env: { API_KEY: SECRETS.slot } } } });
    const { content } = (await s.call("GET", "/api/slots/chat/config")).body;
    expect(content.server.env.API_KEY).toBe("[redacted]");
    expect((await s.call("PUT", "/api/slots/chat/config", { body: { server: { ...content.server, extra_args: "--metrics" } } })).status).toBe(200);
    const chat = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    expect(chat).toContain(SECRETS.slot);
    expect(chat).toContain("--metrics");
    expect(chat).not.toContain("[redacted]");
  });
});
