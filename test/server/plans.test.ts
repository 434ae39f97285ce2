import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from "vitest";
import { openDb } from "../../server/db.js";
import { PlanStore, UNAPPLIED_PLANS_PER_CALLER } from "../../server/plans.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());

const ctxEdit = (value: unknown) => ({ edits: [{ file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value }], summary: "chat: bigger context" });

describe("plans over REST", () => {
  it("plans a change set without writing, then applies it", async () => {
    const before = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    const made = await s.call("POST", "/api/plans", { body: ctxEdit(20480) });
    expect(made.status).toBe(201);
    expect(made.body.valid).toBe(true);
    expect(made.body.files).toEqual(["slots/chat.toml"]);
    expect(JSON.stringify(made.body.plan.changes.find((c: any) => c.address === "slot.chat").after)).toContain("20480");
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toBe(before);

    const got = await s.call("GET", `/api/plans/${made.body.id}`);
    expect(got.body.changes.summary).toBe("chat: bigger context");
    expect((await s.call("GET", "/api/plans")).body.plans.map((p: any) => p.id)).toContain(made.body.id);

    const applied = await s.call("POST", `/api/plans/${made.body.id}/apply`);
    expect(applied.status).toBe(200);
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/ctx_size = 20480/);
  });

  it("applies a plan whose change the tree already holds: applied, no file written, and then refused as applied", async () => {
    const before = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    const made = await s.call("POST", "/api/plans", { body: ctxEdit(40960) }); // chat's ctx_size already
    expect(made.body.files).toEqual([]);
    const applied = await s.call("POST", `/api/plans/${made.body.id}/apply`);
    expect(applied.status).toBe(200);
    expect(applied.body).toMatchObject({ id: made.body.id, applied: true, files: [] });
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toBe(before);
    expect((await s.call("GET", `/api/plans/${made.body.id}`)).body.state).toBe("applied");
    expect((await s.call("POST", `/api/plans/${made.body.id}/apply`)).body.error.message).toMatch(/already applied/);
  });

  it("returns diagnostics for a change set that would break the tree, and writes nothing", async () => {
    const made = await s.call("POST", "/api/plans", { body: ctxEdit("huge") });
    expect(made.status).toBe(201);
    expect(made.body.valid).toBe(false);
    expect(made.body.diagnostics[0]).toMatchObject({ code: "config.invalid_type", file: "slots/chat.toml" });
    const applied = await s.call("POST", `/api/plans/${made.body.id}/apply`);
    expect(applied.status).toBe(422);
    expect(applied.body.error.code).toBe("config.invalid");
  });

  it("refuses an invalid plan's apply with its diagnostics as the caller reads the plan: another agent gets their words masked, as plan_show masks them", async () => {
    const made = await s.call("POST", "/api/plans", { as: "agent:alice", body: { edits: [{ file: "slots/utility.toml", op: "set", path: ["profile"], value: "alices-unshared-words" }] } });
    expect(made.body.valid).toBe(false);
    expect(JSON.stringify((await s.call("GET", `/api/plans/${made.body.id}`, { as: "agent:bob" })).body)).not.toContain("alices-unshared-words");
    const bobs = await s.call("POST", `/api/plans/${made.body.id}/apply`, { as: "agent:bob" });
    expect(bobs.status).toBe(422);
    expect(bobs.body.error.code).toBe("config.invalid");
    expect(bobs.body.error.details.diagnostics[0]).toMatchObject({ code: "slot.unknown_profile", file: "slots/utility.toml", path: ["profile"], summary: "[redacted]" });
    expect(JSON.stringify(bobs.body)).not.toContain("alices-unshared-words");
    const bob = await adminClient(s.url, "bob");
    try {
      const submitted = await callTool(bob, "plan_submit", { id: made.body.id });
      expect(submitted.isError).toBe(true);
      expect(submitted.body.error.code).toBe("config.invalid");
      expect(JSON.stringify(submitted.body)).not.toContain("alices-unshared-words");
    } finally {
      await bob.close();
    }
    // Its proposer and an operator read them whole.
    for (const as of ["agent:alice", "operator"]) {
      const whole = await s.call("POST", `/api/plans/${made.body.id}/apply`, { as });
      expect(whole.body.error.details.diagnostics[0].summary, as).toContain("alices-unshared-words");
    }
  });

  it("refuses a plan whose file moved since, naming the file", async () => {
    const made = await s.call("POST", "/api/plans", { body: ctxEdit(20480) });
    writeFileSync(join(s.config, "slots/chat.toml"), `${readFileSync(join(s.config, "slots/chat.toml"), "utf8")}# edited by hand\n`);
    const applied = await s.call("POST", `/api/plans/${made.body.id}/apply`);
    expect(applied.status).toBe(409);
    expect(applied.body.error).toMatchObject({ code: "plan.stale", details: { moved: ["slots/chat.toml"] } });
  });

  it("refuses a plan when a file it names but leaves as it is moved since: applying it would change that file unshown", async () => {
    // ctx_size is 40960 already: the plan changes only utility.toml, and shows only that.
    const made = await s.call("POST", "/api/plans", { body: { edits: [
      { file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value: 40960 },
      { file: "slots/utility.toml", op: "set", path: ["priority"], value: 11 },
    ] } });
    expect(made.body.files).toEqual(["slots/utility.toml"]);
    const chat = join(s.config, "slots/chat.toml");
    writeFileSync(chat, readFileSync(chat, "utf8").replace("ctx_size = 40960", "ctx_size = 16384"));
    const applied = await s.call("POST", `/api/plans/${made.body.id}/apply`);
    expect(applied.status).toBe(409);
    expect(applied.body.error).toMatchObject({ code: "plan.stale", details: { moved: ["slots/chat.toml"] } });
    expect(readFileSync(chat, "utf8")).toMatch(/ctx_size = 16384/);
  });

  it("refuses a plan whose change would now run what it never showed: the profile it switches a slot to got other flags since (a file it reads, not one it names)", async () => {
    const made = await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/chat.toml", op: "set", path: ["profile"], value: "rocm-dnse" }] } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    const profiles = join(s.config, "profiles.toml");
    const text = readFileSync(profiles, "utf8");
    const dnse = text.indexOf("[profile.rocm-dnse]");
    const flags = text.indexOf("flags = ", dnse);
    writeFileSync(profiles, `${text.slice(0, flags)}flags = "--mlock --no-mmap"\n${text.slice(text.indexOf("\n", flags) + 1)}`);
    const chat = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    const applied = await s.call("POST", `/api/plans/${made.body.id}/apply`);
    expect(applied.status, JSON.stringify(applied.body)).toBe(409);
    expect(applied.body.error).toMatchObject({ code: "plan.stale", details: { moved: ["slot.chat"] } });
    expect(applied.body.error.message).toMatch(/what it does changed since it was made .*--mlock --no-mmap/);
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toBe(chat);
    expect((await s.call("GET", `/api/plans/${made.body.id}`)).body).toMatchObject({ state: "stale" });
  });

  it("applies a plan while a file it reads moved in a way that does not change what it does (another profile's flags)", async () => {
    const made = await s.call("POST", "/api/plans", { body: ctxEdit(20480) });
    const profiles = join(s.config, "profiles.toml");
    const text = readFileSync(profiles, "utf8");
    const moe = text.indexOf("[profile.rocm-moe]");
    const flags = text.indexOf("flags = ", moe);
    // chat's own profile: chat runs it either way, with or without this plan.
    writeFileSync(profiles, `${text.slice(0, flags)}flags = "-fa on --parallel 2"\n${text.slice(text.indexOf("\n", flags) + 1)}`);
    const applied = await s.call("POST", `/api/plans/${made.body.id}/apply`);
    expect(applied.status, JSON.stringify(applied.body)).toBe(200);
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/ctx_size = 20480/);
  });

  it("judges a plan on the tree it is planned from: a hand edit landing just before the apply plans (after the plan's own checks) is plan.stale", async () => {
    const made = await s.call("POST", "/api/plans", { body: { edits: [
      { file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value: 40960 },
      { file: "slots/utility.toml", op: "set", path: ["priority"], value: 11 },
    ] } });
    const chat = join(s.config, "slots/chat.toml");
    const box = s.hal0.box;
    const propose = box.propose.bind(box);
    // The edit lands at the one moment between the route reading the saved plan and the pipeline reading the tree.
    box.propose = async (...args: Parameters<typeof propose>) => {
      writeFileSync(chat, readFileSync(chat, "utf8").replace("ctx_size = 40960", "ctx_size = 16384"));
      box.propose = propose;
      return propose(...args);
    };
    const utility = readFileSync(join(s.config, "slots/utility.toml"), "utf8");
    const applied = await s.call("POST", `/api/plans/${made.body.id}/apply`);
    expect(applied.body.error).toMatchObject({ code: "plan.stale", details: { moved: ["slots/chat.toml"] } });
    expect(readFileSync(join(s.config, "slots/utility.toml"), "utf8")).toBe(utility);
  });

  it("two applies of one plan at once (each with If-Match): one commits it, the other is refused as already applied, and the plan stays applied", async () => {
    const made = await s.call("POST", "/api/plans", { body: ctxEdit(20480) });
    const apply = () => s.call("POST", `/api/plans/${made.body.id}/apply`, { headers: { "if-match": made.body.revision } });
    const box = s.hal0.box;
    const propose = box.propose.bind(box);
    let first: Awaited<ReturnType<typeof apply>> | undefined;
    // The other apply runs whole between this one reading the saved plan and this one planning from the tree.
    box.propose = async (...args: Parameters<typeof propose>) => {
      box.propose = propose;
      first = await apply();
      return propose(...args);
    };
    const second = await apply();
    expect(first!.status, JSON.stringify(first!.body)).toBe(200);
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe("plan.stale");
    expect(second.body.error.message).toMatch(/was already applied at/);
    const record = (await s.call("GET", `/api/plans/${made.body.id}`)).body;
    expect(record).toMatchObject({ state: "applied", stale_reason: null });
    expect(record.applied_at).toEqual(expect.any(String));
  });

  it("answers unknown plans, bad JSON and unknown routes with the error envelope", async () => {
    expect((await s.call("GET", "/api/plans/pln_nope")).body.error.code).toBe("plan.not_found");
    const bad = await s.call("POST", "/api/plans", { body: "{nope" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("request.invalid_json");
    expect((await s.call("POST", "/api/plans", { body: "[1]" })).body.error.code).toBe("request.not_an_object");
    const invalid = await s.call("POST", "/api/plans", { body: { edits: [] } });
    expect(invalid.status).toBe(422);
    expect(invalid.body.error.code).toBe("validation.invalid");
    expect(invalid.body.error.details.fields[0].loc).toEqual(["body", "edits"]);
    expect((await s.call("GET", "/api/nothing")).status).toBe(404);
    const wrong = await s.call("DELETE", "/api/plans");
    expect(wrong.status).toBe(405);
    expect(wrong.body.error.details.allowed).toEqual(["GET", "HEAD", "POST"]);
  });

  it("a caller keeps its newest 50 unapplied plans: one more drops its oldest, but never an applied one, one a queued apply names, or another caller's", async () => {
    const propose = async (body: unknown, as: string) => {
      const made = await s.call("POST", "/api/plans", { body, as });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      return made.body.id as string;
    };
    const exists = async (id: string) => (await s.call("GET", `/api/plans/${id}`)).status === 200;
    const theirs = await propose(ctxEdit(8192), "agent:other");
    const applied = await propose({ edits: [{ file: "slots/utility.toml", op: "set", path: ["priority"], value: 11 }] }, "agent:ruth");
    expect((await s.call("POST", `/api/plans/${applied}/apply`)).status).toBe(200);
    // A slot edit is gated in the example box: its apply by the agent waits for a person, naming the plan.
    const queued = await propose(ctxEdit(20480), "agent:ruth");
    const waiting = await s.call("POST", `/api/plans/${queued}/apply`, { as: "agent:ruth" });
    expect(waiting.status, JSON.stringify(waiting.body)).toBe(202);
    const oldest = await propose(ctxEdit(24576), "agent:ruth");
    const loop: string[] = [];
    for (let i = 0; i < 50; i++) loop.push(await propose(ctxEdit(4096 + i), "agent:ruth"));
    expect(await exists(oldest)).toBe(false);
    expect((await s.call("GET", `/api/plans/${oldest}`)).body.error.code).toBe("plan.not_found");
    for (const id of [theirs, applied, queued, ...loop]) expect(await exists(id), id).toBe(true);
    const ruths = (await s.call("GET", "/api/plans?limit=500")).body.plans.filter((p: any) => p.actor === "ruth");
    expect(ruths).toHaveLength(52);
    // The queued apply still runs its plan once approved.
    const approved = await s.call("POST", `/api/agent/approvals/${waiting.body.approval_id}/approve`);
    expect(approved.body.approval.state, JSON.stringify(approved.body)).toBe("executed");
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/ctx_size = 20480/);
  }, 60_000);

  it("a plan being applied when its proposer's 51st plan drops its oldest is kept, as applied: the commit it made stays in the history", async () => {
    const propose = async (body: unknown) => {
      const made = await s.call("POST", "/api/plans", { body, as: "agent:ruth" });
      expect(made.status, JSON.stringify(made.body)).toBe(201);
      return made.body.id as string;
    };
    const oldest = await propose(ctxEdit(20480));
    for (let i = 0; i < 49; i++) await propose(ctxEdit(4096 + i));
    const box = s.hal0.box;
    const plan = box.propose.bind(box);
    // The agent proposes once more while the operator's apply of its oldest plan is planning.
    box.propose = async (...args: Parameters<typeof plan>) => {
      box.propose = plan;
      await propose(ctxEdit(8192));
      return plan(...args);
    };
    const applied = await s.call("POST", `/api/plans/${oldest}/apply`);
    expect(applied.status, JSON.stringify(applied.body)).toBe(200);
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/ctx_size = 20480/);
    const record = await s.call("GET", `/api/plans/${oldest}`);
    expect(record.status, JSON.stringify(record.body)).toBe(200);
    expect(record.body).toMatchObject({ id: oldest, actor: "ruth", actor_kind: "agent", state: "applied", changes: ctxEdit(20480) });
    // Applying it again is refused as applied, not as unknown.
    expect((await s.call("POST", `/api/plans/${oldest}/apply`)).body.error.message).toMatch(/already applied/);
  }, 60_000);

  it("refuses a Host outside the allowlist with 421", async () => {
    const res = await s.call("GET", "/api/plans", { headers: { host: "evil.example" } });
    expect(res.status).toBe(421);
    expect(res.body.error.code).toBe("request.host_denied");
    const origin = await s.call("GET", "/api/plans", { headers: { origin: "http://evil.example" } });
    expect(origin.status).toBe(421);
    expect(origin.body.error.code).toBe("request.origin_denied");
  });
});

describe("the plan store and the clock", () => {
  it("after the clock is set back, a caller's next plan is kept and its oldest dropped: oldest is the order they were saved in, not their times", () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-plans-clock-"));
    const db = openDb(dir);
    onTestFinished(() => {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    });
    let clock = Date.parse("2026-12-07T12:00:00Z");
    const plans = new PlanStore(db, () => clock);
    const save = () => plans.save({ actor: { kind: "agent", agent: "ruth" }, changes: { edits: [] }, revision: "rev_x", baseFiles: {}, diagnostics: [] });
    const saved: string[] = [];
    for (let i = 0; i < UNAPPLIED_PLANS_PER_CALLER; i++, clock += 1000) saved.push(save().id);
    // NTP steps the box's clock back an hour (it ran ahead): the next plan bears the earliest created_at of all.
    clock -= 3_600_000;
    const next = save();
    expect(next?.id).toMatch(/^pln_/);
    expect(plans.get(next.id)?.created_at).toBe(new Date(clock).toISOString());
    expect(plans.get(saved[0]!)).toBeUndefined();
    for (const id of saved.slice(1)) expect(plans.get(id), id).toBeDefined();
    expect(plans.list(500, 0).total).toBe(UNAPPLIED_PLANS_PER_CALLER);
  });
});
