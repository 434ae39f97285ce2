import { execFileSync } from "node:child_process";
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RUN_TOOLS } from "../../server/bridge/runs/tools.js";
import { SKILLS_MAX_ENTRIES, snapshotSkills } from "../../server/bridge/runs/skills-diff.js";
import type { BridgeContext } from "../../server/bridge/tool.js";
import type { Caller } from "../../server/route.js";
import { httpCall, startTestServer, type TestServer } from "./harness.js";
import { webLogin } from "./web-helpers.js";

/**
 * Hermes's own skill_manage writes a profile's skills/ straight to disk during
 * a run, past hal0's gated profile_skill_put: hal0 reads skills/ as each run
 * starts and ends and records the difference on the run and in the audit log.
 * Real processes of the stand-in Hermes (fixtures/hermes/hermes, whose
 * `[skill=NAME]` / `[unskill=NAME]` write and remove a skill as skill_manage
 * does), real SQLite, the run page over real HTTP.
 */

const REPO = join(import.meta.dirname, "../..");
const HERMES = join(REPO, "fixtures/hermes/hermes");
const AGENT: Caller = { kind: "agent", agent: "claude", private: false, via: "mcp" };
const SKILL = (name: string, body = "Do it.") => `---\nname: ${name}\ndescription: a skill\n---\n${body}\n`;

describe("what a Hermes run does to its profile's skills", () => {
  let t: TestServer & { dir: string };
  let agent: BridgeContext;
  let dir: string;
  let skills: string;
  const call = (name: string, args: unknown = {}) => RUN_TOOLS.find((x) => x.name === name)!.run(agent, args) as Promise<any>;
  const run = async (prompt: string) => {
    const r = await call("agent_run_start", { profile: "alpha", prompt });
    return (await call("agent_run_wait", { run_id: r.run_id, timeout_s: 30 })).run;
  };
  const auditOf = (runId: string) => t.hal0.audit.query({ target: runId }).items.filter((r) => r.tool === "hermes_skill_change").map((r) => ({ actor: r.actor, args: r.args })).reverse();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "hal0-run-skills-"));
    const box = join(dir, "box");
    const home = join(dir, "hermes");
    cpSync(join(REPO, "fixtures/box"), box, { recursive: true });
    appendFileSync(join(box, "hal0.toml"), `\n[hermes]\nhome = ${JSON.stringify(home)}\ncommand = ${JSON.stringify(HERMES)}\n`);
    skills = join(home, "profiles/alpha/skills");
    mkdirSync(skills, { recursive: true });
    t = await startTestServer({ box, env: { HERMES_FAKE_DELAY_MS: "5", HERMES_FAKE_LINES: "1" } });
    agent = { d: t.hal0, caller: AGENT, profiles: ["alpha"] };
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a run that adds, changes and removes skills itself has them on its record and one audit row each, naming the run, its starter and the profile", async () => {
    for (const s of ["keep", "old", "ops/deploy"]) {
      mkdirSync(join(skills, s), { recursive: true });
      writeFileSync(join(skills, s, "SKILL.md"), SKILL(s.split("/").at(-1)!));
    }
    mkdirSync(join(skills, "keep/references"));
    writeFileSync(join(skills, "keep/references/notes.md"), "unchanged\n");
    const r = await run("learn [skill=ops-notes] [skill=ops/deploy] [unskill=old]");
    expect(r.state).toBe("done");
    expect(r.skill_changes).toEqual({
      changes: [{ skill: "old", change: "removed" }, { skill: "ops-notes", change: "added" }, { skill: "ops/deploy", change: "changed" }],
      more: 0, complete: true, overlapping: [],
    });
    expect((await call("agent_run_status", { run_id: r.run_id })).run.skill_changes).toEqual(r.skill_changes);
    expect(auditOf(r.run_id)).toEqual([
      { actor: "system:hermes", args: { run_id: r.run_id, profile: "alpha", started_by: "agent:claude", skill: "old", change: "removed", complete: true, overlapping: [] } },
      { actor: "system:hermes", args: { run_id: r.run_id, profile: "alpha", started_by: "agent:claude", skill: "ops-notes", change: "added", complete: true, overlapping: [] } },
      { actor: "system:hermes", args: { run_id: r.run_id, profile: "alpha", started_by: "agent:claude", skill: "ops/deploy", change: "changed", complete: true, overlapping: [] } },
    ]);

    // The run's page shows them too.
    const session = await webLogin(t);
    const page = String((await httpCall(t.url, "GET", `/agents/runs/${r.run_id}`, { headers: { cookie: session.cookie } })).body);
    const list = String((await httpCall(t.url, "GET", "/agents", { headers: { cookie: session.cookie } })).body);
    expect(list).toContain(`<td data-run-skill-count="${r.run_id}">3</td>`);
    expect(page).toContain('data-run-skills="changed"');
    expect(page).toContain('<li data-skill-change="added">added ops-notes</li>');
    expect(page).toContain('<li data-skill-change="removed">removed old</li>');
  });

  it("a run that leaves skills/ as it was records no change and writes no audit row", async () => {
    const r = await run("just answer");
    expect(r.skill_changes).toEqual({ changes: [], more: 0, complete: true, overlapping: [] });
    expect(auditOf(r.run_id)).toEqual([]);
  });

  it("two runs of one profile at once both report a skill either wrote, and each names the other as overlapping", async () => {
    const a = await call("agent_run_start", { profile: "alpha", prompt: "wait [hang]" });
    await call("agent_run_wait", { run_id: a.run_id, timeout_s: 1 });
    const b = await run("learn [skill=from-b]");
    expect(b.skill_changes).toEqual({ changes: [{ skill: "from-b", change: "added" }], more: 0, complete: true, overlapping: [a.run_id] });
    const ended = (await call("agent_run_cancel", { run_id: a.run_id })).run;
    expect(ended.state).toBe("cancelled");
    expect(ended.skill_changes).toEqual({ changes: [{ skill: "from-b", change: "added" }], more: 0, complete: true, overlapping: [b.run_id] });
    const session = await webLogin(t);
    const page = String((await httpCall(t.url, "GET", `/agents/runs/${a.run_id}`, { headers: { cookie: session.cookie } })).body);
    expect(page).toContain(`a change may be theirs: ${b.run_id}`);
    rmSync(join(skills, "from-b"), { recursive: true });
  });

  it("a skills/ of thousands of files and a huge file is read within its bounds: the run ends promptly, says the reading was partial, and still sees the skill it wrote", async () => {
    const big = join(skills, "zz-bulk");
    mkdirSync(big);
    writeFileSync(join(big, "SKILL.md"), SKILL("zz-bulk"));
    for (let i = 0; i < SKILLS_MAX_ENTRIES + 500; i++) writeFileSync(join(big, `f${i}.txt`), `file ${i}\n`);
    const huge = join(skills, "keep/references/huge.bin");
    writeFileSync(huge, "");
    truncateSync(huge, 4 * 1024 * 1024 * 1024); // 4 GiB, sparse: hashing it whole would take far longer than the run
    const started = Date.now();
    const snap = snapshotSkills(join(skills, ".."));
    expect(Date.now() - started).toBeLessThan(5000);
    expect(snap.partial).toBe(true);
    expect(snap.files.size).toBeLessThanOrEqual(SKILLS_MAX_ENTRIES);

    const r = await run("learn [skill=aaa-first]");
    expect(r.state).toBe("done");
    expect(r.skill_changes.complete).toBe(false);
    // Only what both readings reached is compared: the bulk skill, whose last files the new one pushed past the bound, is not reported.
    expect(r.skill_changes.changes).toEqual([{ skill: "aaa-first", change: "added" }]);
    expect(Date.parse(r.ended_at) - Date.parse(r.started_at)).toBeLessThan(15_000);
    rmSync(big, { recursive: true });
    rmSync(huge);
  });
});

describe("reading skills/ never blocks hal0", () => {
  it("a file swapped for a FIFO (or a link to one) after the listing is not waited on: its hash is unknown at once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hal0-run-skills-fifo-"));
    try {
      const fifo = join(dir, "SKILL.md");
      execFileSync("mkfifo", [fifo]);
      symlinkSync(fifo, join(dir, "link.md"));
      // In a process of its own: a blocking open of a FIFO with no writer never returns, and would hang this one.
      const script = `import { hashFile } from ${JSON.stringify(join(REPO, "server/bridge/runs/skills-diff.ts"))};
        console.log(JSON.stringify([hashFile(${JSON.stringify(fifo)}) ?? null, hashFile(${JSON.stringify(join(dir, "link.md"))}) ?? null]));`;
      writeFileSync(join(dir, "probe.ts"), script);
      const out = execFileSync(join(REPO, "node_modules/.bin/vite-node"), [join(dir, "probe.ts")], { cwd: REPO, timeout: 20_000, killSignal: "SIGKILL", encoding: "utf8" });
      expect(JSON.parse(out.trim().split("\n").at(-1)!)).toEqual([null, null]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
