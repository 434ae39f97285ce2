import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RUN_TOOLS } from "../../server/bridge/runs/tools.js";
import { TEACH_TOOLS } from "../../server/bridge/teach/tools.js";
import { httpCall, openEventStream, startTestServer, type TestServer } from "./harness.js";
import { webLogin } from "./web-helpers.js";

/**
 * hal0-agents end to end, with the real sixteen tools: a token admitted to
 * the bridge for one profile, over the MCP SDK's client at /mcp/agents,
 * drives a run of the stand-in hermes to its end and teaches the profile a
 * skill, which waits for an operator whose approval card shows the file's
 * diff; a file that moved after the card was made is refused as stale.
 */
const REPO = join(import.meta.dirname, "../..");
const dir = mkdtempSync(join(tmpdir(), "hal0-bridge-e2e-"));
const home = join(dir, "hermes");
let s: TestServer;
let client: Client;

const SKILL = "---\nname: tidy\ndescription: Keep the repository tidy before a commit.\n---\nRun the formatter, then the linter.\n";

beforeAll(async () => {
  const box = join(dir, "box");
  cpSync(join(REPO, "fixtures/box"), box, { recursive: true });
  appendFileSync(join(box, "hal0.toml"), `\n[hermes]\nhome = ${JSON.stringify(home)}\ncommand = ${JSON.stringify(join(REPO, "fixtures/hermes/hermes"))}\n`);
  for (const p of ["alpha", "beta"]) mkdirSync(join(home, "profiles", p, "memories"), { recursive: true });
  writeFileSync(join(home, "profiles/alpha/memories/MEMORY.md"), "The box has 128 GB of unified memory.\n§\nPrefer the utility slot for short prompts.\n");
  s = await startTestServer({ box, env: { HERMES_FAKE_DELAY_MS: "20", HERMES_FAKE_LINES: "3" } });
  const admitted = s.hal0.tokens.mint("agent", "claude-code", ["mcp:agents", "profile:alpha"]);
  client = new Client({ name: "hal0-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp/agents`), { requestInit: { headers: { authorization: `Bearer ${admitted.token}` } } }));
}, 60_000);

afterAll(async () => {
  await client?.close();
  await s?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function call(name: string, args: Record<string, unknown>): Promise<{ isError: boolean; body: any }> {
  const res = (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: Array<{ text?: string }> };
  return { isError: res.isError === true, body: JSON.parse(res.content[0]?.text ?? "null") };
}

describe("hal0-agents with its sixteen tools, for a token admitted to one profile", () => {
  it("lists the sixteen, and feature_list says the bridge is on with them", async () => {
    const names = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(names).toEqual([...RUN_TOOLS, ...TEACH_TOOLS].map((t) => t.name).sort());
    expect(names).toHaveLength(16);
    const features = await s.call("GET", "/api/features");
    expect(features.body.features.find((f: { name: string }) => f.name === "bridge")).toMatchObject({ enabled: true });
    expect(JSON.stringify(features.body.features.find((f: { name: string }) => f.name === "bridge"))).toContain("16");
  });

  it("runs the stand-in hermes to its end and follows it with the events cursor; another profile is refused", async () => {
    expect((await call("agent_profile_list", {})).body).toMatchObject({ profiles: [expect.objectContaining({ name: "alpha" })] });
    const started = await call("agent_run_start", { profile: "alpha", prompt: "say hello" });
    expect(started.isError, JSON.stringify(started.body)).toBe(false);
    const runId = started.body.run_id as string;
    const waited = await call("agent_run_wait", { run_id: runId, timeout_s: 20 });
    expect(waited.body).toMatchObject({ done: true, run: { run_id: runId, profile: "alpha", state: "done" } });
    const first = await call("agent_run_events", { run_id: runId, after: 0 });
    expect(first.body).toMatchObject({ run_id: runId, done: true });
    expect(first.body.lines.length).toBeGreaterThan(0);
    expect((await call("agent_run_events", { run_id: runId, after: first.body.next })).body.lines).toEqual([]);
    const result = await call("agent_run_result", { run_id: runId });
    expect(result.body).toMatchObject({ run_id: runId, state: "done", done: true, exit_code: 0, session_id: expect.any(String) });
    expect(result.body.output).toContain("say hello");
    const denied = await call("agent_run_start", { profile: "beta", prompt: "say hello" });
    expect(denied.isError).toBe(true);
    expect(denied.body.error.code).toMatch(/profile_denied$/);
  });

  it("a skill waits for an operator with its diff on the card, then lands; a file moved since the card is refused as stale", async () => {
    const put = await call("profile_skill_put", { profile: "alpha", category: "coding", name: "tidy", text: SKILL });
    expect(put.body.status, JSON.stringify(put.body)).toBe("pending_approval");
    const file = join(home, "profiles/alpha/skills/coding/tidy/SKILL.md");
    expect(existsSync(file)).toBe(false);
    const card = (await s.call("GET", `/api/agent/approvals/${put.body.approval_id}`)).body;
    const approval = card.approval ?? card;
    expect(approval.effects).toContain("create skills/coding/tidy/SKILL.md");
    expect(approval.effects).toContain("+name: tidy");
    const approved = await s.call("POST", `/api/agent/approvals/${put.body.approval_id}/approve`);
    expect(approved.body.approval.state, JSON.stringify(approved.body)).toBe("executed");
    expect(readFileSync(file, "utf8")).toBe(SKILL);

    // A second put over it is planned against today's file; a hand edit after that is never overwritten.
    const again = await call("profile_skill_put", { profile: "alpha", category: "coding", name: "tidy", text: SKILL.replace("the linter", "the linter and the tests") });
    expect(again.body.status).toBe("pending_approval");
    const edited = `${SKILL}Also update the changelog.\n`;
    writeFileSync(file, edited);
    const stale = await s.call("POST", `/api/agent/approvals/${again.body.approval_id}/approve`);
    expect(stale.body.approval.state, JSON.stringify(stale.body)).toBe("failed");
    expect(JSON.stringify(stale.body.approval.error)).toContain("teach.stale");
    expect(readFileSync(file, "utf8")).toBe(edited);
  });

  it("a pending skill's diff is on the card for operators only: another agent or an anonymous caller listing the queue sees which file it changes", async () => {
    const text = SKILL.replace("name: tidy", "name: private-words").replace("Run the formatter", "Only alpha's callers read this line");
    const put = await call("profile_skill_put", { profile: "alpha", name: "private-words", text });
    expect(put.body.status, JSON.stringify(put.body)).toBe("pending_approval");
    const cardFor = async (as: string) => ((await s.call("GET", "/api/agent/approvals?state=pending", { as })).body.approvals as Array<{ id: string; effects: string[] }>).find((a) => a.id === put.body.approval_id)!;
    expect((await cardFor("operator")).effects).toContain("+Only alpha's callers read this line, then the linter.");
    for (const as of ["agent:not-admitted", "anonymous"]) {
      expect((await cardFor(as)).effects, as).toEqual(["create skills/private-words/SKILL.md"]);
    }
    await s.call("POST", `/api/agent/approvals/${put.body.approval_id}/deny`, { body: {} });
  });

  it("an operator token minted without mcp:agents reads a pending skill's card as another reader does, as it may not approve it: the file it changes, not its diff, on every door", async () => {
    const text = SKILL.replace("name: tidy", "name: ci-hidden").replace("Run the formatter", "Only the bridge's readers see this line");
    const put = await call("profile_skill_put", { profile: "alpha", name: "ci-hidden", text });
    expect(put.body.status, JSON.stringify(put.body)).toBe("pending_approval");
    const id = put.body.approval_id as string;
    const secretLine = "Only the bridge's readers see this line";
    const ci = s.hal0.tokens.mint("operator", "ci-rest", ["rest"]).token;
    const asCi = { headers: { authorization: `Bearer ${ci}` } };
    const listed = ((await s.call("GET", "/api/agent/approvals?state=pending", asCi)).body.approvals as Array<{ id: string; effects: string[]; args: any }>).find((a) => a.id === id)!;
    expect(listed.effects).toEqual(["create skills/ci-hidden/SKILL.md"]);
    expect(JSON.stringify(listed.args)).not.toContain(secretLine);
    const one = await s.call("GET", `/api/agent/approvals/${id}`, asCi);
    expect(one.status).toBe(200);
    expect(JSON.stringify(one.body)).not.toContain(secretLine);
    expect(one.body.approval.effects).toEqual(["create skills/ci-hidden/SKILL.md"]);
    const events = await openEventStream(s.url, "/api/agent/approvals/events", ci, /event: snapshot[^]*?\n\n/);
    await events.done;
    events.close();
    expect(events.text()).toContain(id);
    expect(events.text()).not.toContain(secretLine);
    const page = await httpCall(s.url, "GET", "/", { headers: { cookie: (await webLogin(s, ci)).cookie } });
    expect(String(page.body)).toContain("create skills/ci-hidden/SKILL.md");
    expect(String(page.body)).not.toContain("Only the bridge&#39;s readers");
    expect(String(page.body)).not.toContain("readers see this line");
    // An operator whose token reaches the bridge reads it whole, on the same doors.
    expect(JSON.stringify((await s.call("GET", `/api/agent/approvals/${id}`)).body)).toContain(secretLine);
    expect(String((await httpCall(s.url, "GET", "/", { headers: { cookie: (await webLogin(s)).cookie } })).body)).toContain("readers see this line");
    await s.call("POST", `/api/agent/approvals/${id}/deny`, { body: {} });
  });

  it("profile_memory_add runs at once (autonomous write) and keeps the other entries byte for byte", async () => {
    const memory = join(home, "profiles/alpha/memories/MEMORY.md");
    const before = readFileSync(memory, "utf8");
    const added = await call("profile_memory_add", { profile: "alpha", text: "Runs of alpha are followed over /mcp/agents." });
    expect(added.isError, JSON.stringify(added.body)).toBe(false);
    const after = readFileSync(memory, "utf8");
    expect(after.startsWith(before.trimEnd())).toBe(true);
    expect(after).toContain("Runs of alpha are followed over /mcp/agents.");
  });

  it("the reads return a profile's files as they are, so a skill read, edited and put back keeps a value the redactor would mask", async () => {
    const root = join(home, "profiles/alpha");
    const skill = "---\nname: call-api\ndescription: Call the example API.\n---\nexport API_KEY=example-not-real\ncurl -H \"Authorization: Bearer abcdefgh12345\" https://example.test/\n";
    mkdirSync(join(root, "skills/ops/call-api"), { recursive: true });
    writeFileSync(join(root, "skills/ops/call-api/SKILL.md"), skill);
    writeFileSync(join(root, "SOUL.md"), "You are alpha. password=open-sesame is only an example.\n");
    const memory = join(root, "memories/MEMORY.md");
    writeFileSync(memory, `${readFileSync(memory, "utf8").trimEnd()}\n§\nThe test key is API_KEY=example-not-real.\n`);

    const got = await call("profile_skill_get", { profile: "alpha", category: "ops", name: "call-api" });
    expect(got.body.text).toBe(skill);
    expect((await call("profile_persona_get", { profile: "alpha" })).body.text).toContain("password=open-sesame");
    expect((await call("profile_memory_list", { profile: "alpha" })).body.memory.entries).toContain("The test key is API_KEY=example-not-real.");

    const put = await call("profile_skill_put", { profile: "alpha", category: "ops", name: "call-api", text: `${got.body.text}Then check the reply.\n`, base: { "skills/ops/call-api/SKILL.md": got.body.sha256 } });
    expect(put.body.status, JSON.stringify(put.body)).toBe("pending_approval");
    expect((await s.call("POST", `/api/agent/approvals/${put.body.approval_id}/approve`)).body.approval.state).toBe("executed");
    expect(readFileSync(join(root, "skills/ops/call-api/SKILL.md"), "utf8")).toBe(`${skill}Then check the reply.\n`);
  });

  it("audits each call through the mount once, with a text recorded only as its size and hash", async () => {
    const rows = (tool: string) => s.hal0.audit.query({ actor: "agent:claude-code" }).items.filter((r) => r.tool === tool) as Array<{ outcome: string; target: string | null; args: any }>;
    const text = "The audit keeps only this entry's size.";
    expect((await call("profile_memory_add", { profile: "alpha", text })).isError).toBe(false);
    expect(rows("profile_memory_add").filter((r) => r.args.text_sha256 !== undefined && r.args.text_bytes === Buffer.byteLength(text))).toHaveLength(1);
    const started = await call("agent_run_start", { profile: "alpha", prompt: "audit me once" });
    await call("agent_run_wait", { run_id: started.body.run_id, timeout_s: 20 });
    expect(rows("agent_run_start").filter((r) => r.args.prompt_bytes === Buffer.byteLength("audit me once")).map((r) => [r.outcome, r.target, r.args.prompt])).toEqual([["ok", started.body.run_id, undefined]]);
    const skill = SKILL.replace("Keep the repository tidy", "Say what the audit keeps").replace("tidy", "audit-kept");
    const put = await call("profile_skill_put", { profile: "alpha", name: "audit-kept", text: skill });
    expect(put.body.status, JSON.stringify(put.body)).toBe("pending_approval");
    expect((await s.call("POST", `/api/agent/approvals/${put.body.approval_id}/approve`)).body.approval.state).toBe("executed");
    const puts = rows("profile_skill_put").filter((r) => r.args.name === "audit-kept");
    expect(puts.map((r) => r.outcome).sort()).toEqual(["ok", "pending_approval"]);
    for (const r of puts) expect(r.args).toMatchObject({ text_bytes: Buffer.byteLength(skill), text_sha256: expect.stringMatching(/^sha256:/) });
    const all = JSON.stringify(s.hal0.audit.query({ limit: 1000 }).items);
    expect(all).not.toContain(text);
    expect(all).not.toContain("Say what the audit keeps");
    expect(all).not.toContain("audit me once");
  });

  it("a gated write refused before it could be queued (a bad SKILL.md, a stale base) is audited once too, its text as size and hash", async () => {
    const rows = () => s.hal0.audit.query({ actor: "agent:claude-code" }).items.filter((r) => r.tool === "profile_skill_put" && r.outcome === "error") as Array<{ error_code: string; args: any }>;
    const before = rows().length;
    const bad = await call("profile_skill_put", { profile: "alpha", name: "refused-one", text: "no front matter: words the audit must not keep" });
    expect(bad.body.error.code).toBe("teach.bad_skill");
    const stale = await call("profile_skill_put", { profile: "alpha", name: "refused-two", text: "---\nname: refused-two\ndescription: d\n---\nbody\n", base: { "skills/refused-two/SKILL.md": "sha256:00" } });
    expect(stale.body.error.code).toBe("teach.stale");
    const added = rows().slice(0, rows().length - before);
    expect(added.map((r) => r.error_code).sort()).toEqual(["teach.bad_skill", "teach.stale"]);
    for (const r of added) expect(r.args).toMatchObject({ profile: "alpha", text_bytes: expect.any(Number), text_sha256: expect.stringMatching(/^sha256:/) });
    expect(JSON.stringify(added)).not.toContain("words the audit must not keep");
  });

  it("a request of an agent revoked since it asked does not run when approved; a rotated agent's still does", async () => {
    const connect = async (token: string) => {
      const c = new Client({ name: "hal0-test", version: "1.0.0" });
      await c.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp/agents`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return c;
    };
    const put = async (c: Client, name: string) => {
      const res = (await c.callTool({ name: "profile_skill_put", arguments: { profile: "alpha", name, text: SKILL.replace("name: tidy", `name: ${name}`) } })) as { content: Array<{ text?: string }> };
      return JSON.parse(res.content[0]!.text!) as { status: string; approval_id: string };
    };
    const gone = s.hal0.tokens.mint("agent", "gone-agent", ["mcp:agents", "profile:alpha"]);
    const goneClient = await connect(gone.token);
    const asked = await put(goneClient, "from-gone");
    await goneClient.close();
    expect(asked.status).toBe("pending_approval");
    s.hal0.tokens.revoke(gone.id);
    const approved = await s.call("POST", `/api/agent/approvals/${asked.approval_id}/approve`);
    expect(approved.body.approval).toMatchObject({ state: "failed", error: { code: "auth.invalid_token" } });
    expect(existsSync(join(home, "profiles/alpha/skills/from-gone"))).toBe(false);

    const kept = s.hal0.tokens.mint("agent", "kept-agent", ["mcp:agents", "profile:alpha"]);
    const keptClient = await connect(kept.token);
    const again = await put(keptClient, "from-kept");
    await keptClient.close();
    s.hal0.tokens.rotate("kept-agent");
    expect((await s.call("POST", `/api/agent/approvals/${again.approval_id}/approve`)).body.approval.state).toBe("executed");
    expect(existsSync(join(home, "profiles/alpha/skills/from-kept/SKILL.md"))).toBe(true);
  });

  it("hal0 bridge revoke is enough: an agent keeping a token for hal0-admin has its request refused when approved; admitted again to fewer profiles, it reaches only those", async () => {
    const connect = async (token: string) => {
      const c = new Client({ name: "hal0-test", version: "1.0.0" });
      await c.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp/agents`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
      return c;
    };
    const put = async (token: string, name: string) => {
      const c = await connect(token);
      const res = (await c.callTool({ name: "profile_skill_put", arguments: { profile: "alpha", name, text: SKILL.replace("name: tidy", `name: ${name}`) } })) as { content: Array<{ text?: string }> };
      await c.close();
      return JSON.parse(res.content[0]!.text!) as { status: string; approval_id: string };
    };
    s.hal0.tokens.mint("agent", "two-tokens", ["mcp:admin", "mcp:memory"]);
    const admission = s.hal0.tokens.mint("agent", "two-tokens", ["mcp:agents", "profile:alpha"]);
    const asked = await put(admission.token, "from-unbridged");
    expect(asked.status).toBe("pending_approval");
    s.hal0.tokens.revoke(admission.id); // what `hal0 bridge revoke two-tokens` does: the bridge token only
    const approved = await s.call("POST", `/api/agent/approvals/${asked.approval_id}/approve`);
    expect(approved.body.approval).toMatchObject({ state: "failed", error: { code: "auth.invalid_token" } });
    expect(existsSync(join(home, "profiles/alpha/skills/from-unbridged"))).toBe(false);

    const first = s.hal0.tokens.mint("agent", "narrowed", ["mcp:agents", "profile:alpha", "profile:beta"]);
    const wide = await put(first.token, "from-narrowed");
    s.hal0.tokens.revoke(first.id);
    s.hal0.tokens.mint("agent", "narrowed", ["mcp:agents", "profile:beta"]);
    const refused = await s.call("POST", `/api/agent/approvals/${wide.approval_id}/approve`);
    expect(refused.body.approval).toMatchObject({ state: "failed", error: { code: "bridge.profile_denied" } });
    expect(existsSync(join(home, "profiles/alpha/skills/from-narrowed"))).toBe(false);
  });

  it("the Agents page lists the runs; a run's page follows its output, and its Cancel form stops a running one", async () => {
    const session = await webLogin(s);
    const get = async (path: string) => String((await httpCall(s.url, "GET", path, { headers: { cookie: session.cookie } })).body);
    const hang = await call("agent_run_start", { profile: "alpha", prompt: "wait for ever [hang]" });
    const runId = hang.body.run_id as string;
    await call("agent_run_wait", { run_id: runId, timeout_s: 1 });
    const agents = await get("/agents");
    expect(agents).toContain(`href="/agents/runs/${runId}"`);
    expect(agents).toContain(`action="/agents/runs/${runId}/cancel"`);
    const running = await get(`/agents/runs/${runId}`);
    expect(running).toContain('data-run-state="running"');
    expect(running).toContain('http-equiv="refresh"');
    const post = (fields: Record<string, string>) => httpCall(s.url, "POST", `/agents/runs/${runId}/cancel`, { body: new URLSearchParams(fields).toString(), headers: { cookie: session.cookie, "content-type": "application/x-www-form-urlencoded" }, exactHeaders: true });
    expect((await post({})).status).toBe(403); // no CSRF field: refused, nothing cancelled
    expect((await call("agent_run_status", { run_id: runId })).body.run.state).toBe("running");
    const cancelled = await post({ csrf: session.csrf });
    expect(cancelled.status).toBe(303);
    expect((await call("agent_run_wait", { run_id: runId, timeout_s: 10 })).body.run.state).toBe("cancelled");
    const ended = await get(`/agents/runs/${runId}`);
    expect(ended).toContain('data-run-state="cancelled"');
    expect(ended).not.toContain('http-equiv="refresh"');
    const audit = s.hal0.db.prepare("SELECT actor FROM audit WHERE tool = 'agent_run_cancel'").all() as Array<{ actor: string }>;
    expect(audit.some((row) => row.actor.startsWith("operator"))).toBe(true);
  });

  it("a run's page shows its newest output, its end included, when it printed more than one read", async () => {
    const session = await webLogin(s);
    const started = await call("agent_run_start", { profile: "alpha", prompt: "print a lot [bytes=200000]" });
    const runId = started.body.run_id as string;
    expect((await call("agent_run_wait", { run_id: runId, timeout_s: 20 })).body.run.state).toBe("done");
    const page = String((await httpCall(s.url, "GET", `/agents/runs/${runId}`, { headers: { cookie: session.cookie } })).body);
    const output = /<code data-run-output="[^"]+">([\s\S]*?)<\/code>/.exec(page)![1]!;
    expect(output).toContain("done.");
    expect(output).not.toContain("00000000 ");
    expect(output.split("\n")[0]).toMatch(/^\d{8} x+$/); // from a line's start
    expect(page).toContain("newest 64 KiB");
  });

  it("an operator token minted without mcp:agents neither reads a run's prompt or output on the pages nor cancels it, as it cannot over hal0-agents", async () => {
    const narrow = s.hal0.tokens.mint("operator", "ci-rest", ["rest"]);
    const session = await webLogin(s, narrow.token);
    const get = (path: string) => httpCall(s.url, "GET", path, { headers: { cookie: session.cookie } });
    const hang = await call("agent_run_start", { profile: "alpha", prompt: "a secret plan [hang]" });
    const runId = hang.body.run_id as string;
    await call("agent_run_wait", { run_id: runId, timeout_s: 1 });
    const agents = String((await get("/agents")).body);
    expect(agents).not.toContain(runId);
    expect(agents).not.toContain("a secret plan");
    expect(agents).toContain("mcp:agents");
    const page = await get(`/agents/runs/${runId}`);
    expect(page.status).toBe(403);
    expect(String(page.body)).not.toContain("a secret plan");
    expect(String(page.body)).toContain("mcp:agents");
    const cancel = await httpCall(s.url, "POST", `/agents/runs/${runId}/cancel`, { body: new URLSearchParams({ csrf: session.csrf }).toString(), headers: { cookie: session.cookie, "content-type": "application/x-www-form-urlencoded" }, exactHeaders: true });
    expect(cancel.status).toBe(403);
    expect((await call("agent_run_status", { run_id: runId })).body.run.state).toBe("running");
    await call("agent_run_cancel", { run_id: runId });
  });
});
