import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ApiError } from "../../server/errors.js";
import type { BridgeContext, BridgeProposal } from "../../server/bridge/tool.js";
import { TEACH_TOOLS } from "../../server/bridge/teach/tools.js";
import { CODES } from "../../schema/index.js";
import { startTestServer, type TestServer } from "./harness.js";
import { deadPid } from "../reconciler/kill-write.js";

const FIXTURE_BOX = join(import.meta.dirname, "../../fixtures/box");

const SKILL = `---
name: deploy
description: Deploy the web service with make deploy.
# a comment in the front matter, kept
tags: [ops]
---
<!-- written by hand: keep this comment -->
# Deploy

1. Run \`make deploy\`.
2. Watch the logs.
`;

const MEMORY = `<!-- hand-kept notes: do not reorder -->
The box runs Ubuntu 24.04 with Docker.
§
Deploys go through \`make deploy\` (never push to main).
  An indented second line, kept as is.
§
User prefers short answers.`;

/**
 * The seven teaching tools of hal0-agents, run as the mount runs them (the
 * tool's `run`, and `propose` for what an approval card shows) with a
 * BridgeContext of a real server: a written Hermes home with two profiles,
 * the agent admitted to one of them.
 */
describe("teaching tools over a Hermes profile's files", () => {
  let s: TestServer;
  let dir: string;
  let home: string;
  let work: string;
  let ctx: BridgeContext;

  const tool = (name: string) => {
    const t = TEACH_TOOLS.find((x) => x.name === name);
    if (!t) throw new Error(`no tool ${name}`);
    return t;
  };
  const run = (name: string, args: Record<string, unknown>, c: BridgeContext = ctx): Promise<any> => tool(name).run(c, tool(name).input.parse(args));
  const propose = (name: string, args: Record<string, unknown>): Promise<BridgeProposal> => tool(name).propose!(ctx, tool(name).input.parse(args));
  const refusal = async (p: Promise<unknown>): Promise<ApiError> => {
    const err = await p.then(() => undefined, (e: unknown) => e);
    expect(err, "expected a refusal").toBeInstanceOf(ApiError);
    return err as ApiError;
  };
  /** Every file under a folder (hidden ones too), by relative path. */
  const tree = (root: string): Record<string, string> => {
    const out: Record<string, string> = {};
    const walk = (rel: string) => {
      for (const e of readdirSync(join(root, rel), { withFileTypes: true })) {
        const sub = rel === "" ? e.name : `${rel}/${e.name}`;
        if (e.isDirectory()) walk(sub);
        else out[sub] = readFileSync(join(root, sub), "utf8");
      }
    };
    walk("");
    return out;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "hal0-teach-"));
    home = join(dir, "hermes");
    const box = join(dir, "box");
    cpSync(FIXTURE_BOX, box, { recursive: true });
    writeFileSync(join(box, "hal0.toml"), `${readFileSync(join(box, "hal0.toml"), "utf8")}\n[hermes]\nhome = ${JSON.stringify(home)}\n`);
    s = await startTestServer({ box });
    ctx = { d: s.hal0, caller: { kind: "agent", agent: "claude-laptop", private: false, via: "mcp" }, profiles: ["work"] };
  }, 60_000);
  afterAll(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(() => {
    rmSync(home, { recursive: true, force: true });
    work = join(home, "profiles", "work");
    for (const d of ["memories", "skills/ops/deploy/references", "skills/notes"]) mkdirSync(join(work, d), { recursive: true });
    writeFileSync(join(work, "config.yaml"), "model:\n  default: qwen3\nmemory:\n  memory_char_limit: 400\n");
    writeFileSync(join(work, "SOUL.md"), "# Soul\nYou are the box's careful operator.\n");
    writeFileSync(join(work, "memories/MEMORY.md"), MEMORY);
    writeFileSync(join(work, "memories/USER.md"), "Name: Sam\n§\nTimezone: UTC\n");
    writeFileSync(join(work, "skills/ops/deploy/SKILL.md"), SKILL);
    writeFileSync(join(work, "skills/ops/deploy/references/runbook.md"), "# Runbook\n");
    writeFileSync(join(work, "skills/notes/SKILL.md"), "---\nname: notes\ndescription: Take notes.\n---\nWrite them down.\n");
    mkdirSync(join(home, "profiles", "private"), { recursive: true });
    writeFileSync(join(home, "profiles", "private", "SOUL.md"), "secret persona\n");
  });

  it("has the seven tools with their default tiers, and every code it uses is registered", () => {
    expect(TEACH_TOOLS.map((t) => [t.name, t.defaultTier])).toEqual([
      ["profile_skill_list", "autonomous_read"], ["profile_skill_get", "autonomous_read"], ["profile_skill_put", "gated"], ["profile_skill_delete", "gated"],
      ["profile_memory_list", "autonomous_read"], ["profile_memory_add", "autonomous_write"], ["profile_persona_get", "autonomous_read"],
    ]);
    expect(TEACH_TOOLS.filter((t) => t.propose).map((t) => t.name)).toEqual(["profile_skill_put", "profile_skill_delete", "profile_memory_add"]);
    for (const code of ["teach.invalid_name", "bridge.profile_denied", "teach.profile_not_found", "teach.not_found", "teach.bad_skill", "teach.bad_entry", "teach.too_large", "teach.memory_full", "teach.unsafe_path", "teach.stale", "teach.write_failed"]) {
      expect(CODES, code).toHaveProperty([code]);
    }
  });

  it("lists and reads skills, memory and persona", async () => {
    const list = await run("profile_skill_list", { profile: "work" });
    expect(list).toEqual({ profile: "work", count: 2, skills: [
      { category: null, name: "notes", file: "skills/notes/SKILL.md", description: "Take notes." },
      { category: "ops", name: "deploy", file: "skills/ops/deploy/SKILL.md", description: "Deploy the web service with make deploy." },
    ] });
    const got = await run("profile_skill_get", { profile: "work", category: "ops", name: "deploy" });
    expect(got).toMatchObject({ file: "skills/ops/deploy/SKILL.md", text: SKILL, front_matter: { name: "deploy", description: "Deploy the web service with make deploy.", tags: ["ops"] } });
    expect(got.sha256).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect((await run("profile_skill_get", { profile: "work", name: "notes" })).text).toContain("Write them down.");

    const memory = await run("profile_memory_list", { profile: "work" });
    expect(memory.memory).toMatchObject({ file: "memories/MEMORY.md", count: 3, limit: 400, entries: [
      "<!-- hand-kept notes: do not reorder -->\nThe box runs Ubuntu 24.04 with Docker.",
      "Deploys go through `make deploy` (never push to main).\n  An indented second line, kept as is.",
      "User prefers short answers.",
    ] });
    expect(memory.user).toMatchObject({ file: "memories/USER.md", entries: ["Name: Sam", "Timezone: UTC"], limit: 1375 });

    expect(await run("profile_persona_get", { profile: "work" })).toMatchObject({ file: "SOUL.md", text: "# Soul\nYou are the box's careful operator.\n" });
  });

  it("refuses bad names, other profiles and missing things with codes", async () => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ["profile_skill_get", { profile: "work", category: "..", name: "deploy" }, "mcp.invalid_arg"],
      ["profile_skill_get", { profile: "work", category: "ops", name: "a/b" }, "mcp.invalid_arg"],
      ["profile_skill_get", { profile: "work", category: "ops", name: "dep\u200bloy" }, "mcp.invalid_arg"],
      ["profile_skill_get", { profile: "work", category: "Ops", name: "deploy" }, "teach.invalid_name"],
      ["profile_skill_get", { profile: "work", category: "ops", name: "-deploy" }, "teach.invalid_name"],
      ["profile_persona_get", { profile: ".." }, "mcp.invalid_arg"],
      ["profile_persona_get", { profile: "wo rk" }, "teach.invalid_name"],
      ["profile_persona_get", { profile: "private" }, "bridge.profile_denied"],
      ["profile_skill_get", { profile: "work", category: "ops", name: "missing" }, "teach.not_found"],
    ];
    for (const [name, args, code] of cases) expect((await refusal(run(name, args))).code, JSON.stringify(args)).toBe(code);
    // Not admitted: refused before the disk is looked at (a profile that does not exist reads the same).
    expect((await refusal(run("profile_persona_get", { profile: "nosuch" }))).code).toBe("bridge.profile_denied");
    const operator: BridgeContext = { ...ctx, caller: { kind: "operator", agent: "admin", private: false, via: "mcp" }, profiles: "all" };
    expect((await run("profile_persona_get", { profile: "private" }, operator)).text).toBe("secret persona\n");
    const missing = await refusal(run("profile_persona_get", { profile: "nosuch" }, operator));
    expect([missing.code, missing.status]).toEqual(["teach.profile_not_found", 404]);
    rmSync(join(work, "SOUL.md"));
    expect((await refusal(run("profile_persona_get", { profile: "work" }))).code).toBe("teach.not_found");
  });

  it("puts a new skill: the proposal shows its diff and writes nothing; the run writes it atomically", async () => {
    const text = "---\nname: backup\ndescription: Back up the box nightly.\n---\n# Backup\n\nRun `hal0 backup`.\n";
    const before = tree(work);
    const p = await propose("profile_skill_put", { profile: "work", category: "ops", name: "backup", text });
    expect(p.summary).toBe("create skill ops/backup of Hermes profile work");
    expect(p.base).toEqual({ "skills/ops/backup/SKILL.md": null });
    expect(p.files).toEqual([{ file: "skills/ops/backup/SKILL.md", action: "create", before_sha256: null, after_sha256: expect.stringMatching(/^sha256:/), diff:
      "--- /dev/null\n+++ b/skills/ops/backup/SKILL.md\n@@ -0,0 +1,7 @@\n+---\n+name: backup\n+description: Back up the box nightly.\n+---\n+# Backup\n+\n+Run `hal0 backup`.\n" }]);
    expect(tree(work)).toEqual(before);

    const done = await run("profile_skill_put", { profile: "work", category: "ops", name: "backup", text, base: p.base });
    expect(done).toMatchObject({ committed: true, files: [{ file: "skills/ops/backup/SKILL.md", action: "create" }] });
    expect(readFileSync(join(work, "skills/ops/backup/SKILL.md"), "utf8")).toBe(text);
    expect(tree(work)).toEqual({ ...before, "skills/ops/backup/SKILL.md": text }); // no temp file left, nothing else touched
    expect((await run("profile_skill_list", { profile: "work" })).skills.map((x: { name: string }) => x.name)).toEqual(["notes", "backup", "deploy"]);
  });

  it("puts over an existing skill with a diff of what changes, keeping the mode", async () => {
    const text = SKILL.replace("2. Watch the logs.\n", "2. Watch the logs.\n3. Tell the channel.\n");
    const p = await propose("profile_skill_put", { profile: "work", category: "ops", name: "deploy", text });
    expect(p.files[0]).toMatchObject({ action: "update", before_sha256: (await run("profile_skill_get", { profile: "work", category: "ops", name: "deploy" })).sha256 });
    expect(p.files[0]!.diff).toBe("--- a/skills/ops/deploy/SKILL.md\n+++ b/skills/ops/deploy/SKILL.md\n@@ -9,3 +9,4 @@\n \n 1. Run `make deploy`.\n 2. Watch the logs.\n+3. Tell the channel.\n");
    const file = join(work, "skills/ops/deploy/SKILL.md");
    const { chmodSync } = await import("node:fs");
    chmodSync(file, 0o640);
    await run("profile_skill_put", { profile: "work", category: "ops", name: "deploy", text, base: p.base });
    expect(readFileSync(file, "utf8")).toBe(text);
    expect(statSync(file).mode & 0o777).toBe(0o640);
  });

  it("refuses a bad SKILL.md, a bad name or an oversize one with a code, and writes nothing", async () => {
    const before = tree(work);
    const put = (name: string, text: string, category: string | undefined = "ops") => refusal(run("profile_skill_put", { profile: "work", ...(category === undefined ? {} : { category }), name, text }));
    const cases: Array<[Promise<ApiError>, string, RegExp]> = [
      [put("x", "# no front matter\n"), "teach.bad_skill", /must start with/],
      [put("x", "---\nname: x\ndescription: open\n# never closed\n"), "teach.bad_skill", /not closed/],
      [put("x", "---\nname: [x\n---\nbody\n"), "teach.bad_skill", /not YAML/],
      [put("x", "---\n- a list\n---\nbody\n"), "teach.bad_skill", /mapping/],
      [put("x", "---\nname: y\ndescription: d\n---\nbody\n"), "teach.bad_skill", /must be `x`/],
      [put("x", "---\nname: x\n---\nbody\n"), "teach.bad_skill", /description/],
      [put("x", "---\nname: x\ndescription: d\n---\n\n"), "teach.bad_skill", /instructions/],
      [put("x", `---\nname: x\ndescription: ${"d".repeat(1025)}\n---\nbody\n`), "teach.bad_skill", /1024/],
      [put("x", `---\nname: x\ndescription: d\n---\n${"y".repeat(64 * 1024)}\n`), "teach.too_large", /65536/],
      [put("deploy", "---\nname: deploy\ndescription: d\n---\nbody\n", "misc"), "teach.bad_skill", /already has a skill named `deploy`/],
      [put("x", "---\nname: x\ndescription: d\n---\nbody\n", ".."), "mcp.invalid_arg", /must not be `\.\.`/],
      [put("../x", "---\nname: x\ndescription: d\n---\nbody\n"), "mcp.invalid_arg", /`\/`/],
      [put("X", "---\nname: X\ndescription: d\n---\nbody\n"), "teach.invalid_name", /must match/],
    ];
    for (const [p, code, message] of cases) {
      const err = await p;
      expect(err.code).toBe(code);
      expect(err.message).toMatch(message);
    }
    expect(tree(work)).toEqual(before);
  });

  it("deletes a skill's whole folder after proposing each file's removal", async () => {
    const p = await propose("profile_skill_delete", { profile: "work", category: "ops", name: "deploy" });
    expect(p.summary).toBe("delete skill ops/deploy (its whole folder) of Hermes profile work");
    expect(p.files.map((f) => [f.file, f.action])).toEqual([["skills/ops/deploy/SKILL.md", "delete"], ["skills/ops/deploy/references/runbook.md", "delete"]]);
    expect(p.files[0]!.diff).toMatch(/^--- a\/skills\/ops\/deploy\/SKILL.md\n\+\+\+ \/dev\/null\n@@ -1,11 \+0,0 @@\n----\n-name: deploy\n/);
    expect(readdirSync(join(work, "skills/ops"))).toEqual(["deploy"]);
    await run("profile_skill_delete", { profile: "work", category: "ops", name: "deploy", base: p.base });
    expect(readdirSync(join(work, "skills/ops"))).toEqual([]); // no folder renamed aside left behind
    expect((await refusal(run("profile_skill_delete", { profile: "work", category: "ops", name: "deploy" }))).code).toBe("teach.not_found");
  });

  it("removes a skill folder a crashed delete left set aside, at the next write in its category; a live writer's is kept", async () => {
    const dead = await deadPid();
    const left = join(work, `skills/ops/.old.${dead}.0123456789ab.hal0.removed`);
    const live = join(work, `skills/ops/.busy.${process.pid}.0123456789ab.hal0.removed`);
    for (const d of [left, live]) {
      mkdirSync(join(d, "references"), { recursive: true });
      writeFileSync(join(d, "SKILL.md"), "---\nname: old\ndescription: Gone.\n---\nGone.\n");
    }
    const text = "---\nname: backup\ndescription: Back up the box nightly.\n---\n# Backup\n";
    await run("profile_skill_put", { profile: "work", category: "ops", name: "backup", text });
    expect(readdirSync(join(work, "skills/ops")).sort()).toEqual([`.busy.${process.pid}.0123456789ab.hal0.removed`, "backup", "deploy"]);
  });

  it("profile_memory_add appends one entry and keeps every other byte of MEMORY.md", async () => {
    const entry = "The GPU is gfx1151; use ROCm images.\nA second line of the same entry.";
    const p = await propose("profile_memory_add", { profile: "work", text: `  ${entry}\n` });
    expect(p.files[0]!.diff).toBe("--- a/memories/MEMORY.md\n+++ b/memories/MEMORY.md\n@@ -5,3 +5,6 @@\n   An indented second line, kept as is.\n §\n User prefers short answers.\n+§\n+The GPU is gfx1151; use ROCm images.\n+A second line of the same entry.\n");
    const done = await run("profile_memory_add", { profile: "work", text: `  ${entry}\n` });
    expect(done).toMatchObject({ committed: true, added: true, entries: 4, limit: 400 });
    expect(readFileSync(join(work, "memories/MEMORY.md"), "utf8")).toBe(`${MEMORY}\n§\n${entry}`);
    expect((await run("profile_memory_list", { profile: "work" })).memory.entries.at(-1)).toBe(entry);

    // The same entry again: Hermes keeps one of each, nothing is written.
    expect(await run("profile_memory_add", { profile: "work", text: entry })).toMatchObject({ committed: false, added: false, duplicate: true });
    expect(readFileSync(join(work, "memories/MEMORY.md"), "utf8")).toBe(`${MEMORY}\n§\n${entry}`);

    // A file that ends with a newline keeps it, and its separator reuses it.
    writeFileSync(join(work, "memories/MEMORY.md"), `${MEMORY}\n`);
    await run("profile_memory_add", { profile: "work", text: "Backups run at 03:00." });
    expect(readFileSync(join(work, "memories/MEMORY.md"), "utf8")).toBe(`${MEMORY}\n§\nBackups run at 03:00.\n`);

    // No MEMORY.md yet: it is made with the one entry.
    rmSync(join(work, "memories"), { recursive: true });
    await run("profile_memory_add", { profile: "work", text: "First note." });
    expect(readFileSync(join(work, "memories/MEMORY.md"), "utf8")).toBe("First note.");
  });

  it("memory entries added at once all land, one after the other (no base sent, so none is stale)", async () => {
    const notes = Array.from({ length: 6 }, (_, i) => `Note ${i}.`);
    const done = await Promise.all(notes.map((text) => run("profile_memory_add", { profile: "work", text })));
    expect(done.map((d) => d.committed)).toEqual(notes.map(() => true));
    expect((await run("profile_memory_list", { profile: "work" })).memory.entries.slice(-6).sort()).toEqual(notes);
    expect(readFileSync(join(work, "memories/MEMORY.md"), "utf8").startsWith(MEMORY)).toBe(true);
    writeFileSync(join(work, "memories/MEMORY.md"), MEMORY);
  });

  it("refuses a memory entry that is empty, holds a § line, or overflows the store, and writes nothing", async () => {
    const cases: Array<[string, string]> = [
      ["   \n", "teach.bad_entry"],
      ["one\n§\ntwo", "teach.bad_entry"],
      ["x".repeat(401), "teach.too_large"],
      ["y".repeat(300), "teach.memory_full"], // config.yaml's memory_char_limit: 400
    ];
    for (const [text, code] of cases) expect((await refusal(run("profile_memory_add", { profile: "work", text }))).code, text.slice(0, 20)).toBe(code);
    expect(readFileSync(join(work, "memories/MEMORY.md"), "utf8")).toBe(MEMORY);
  });

  it("refuses a write whose files moved between the proposal and the run (teach.stale), leaving the other writer's change", async () => {
    const text = SKILL.replace("# Deploy", "# Deploy safely");
    const p = await propose("profile_skill_put", { profile: "work", category: "ops", name: "deploy", text });
    writeFileSync(join(work, "skills/ops/deploy/SKILL.md"), `${SKILL}edited by hand meanwhile\n`);
    const err = await refusal(run("profile_skill_put", { profile: "work", category: "ops", name: "deploy", text, base: p.base }));
    expect([err.code, err.details]).toEqual(["teach.stale", { files: ["skills/ops/deploy/SKILL.md"] }]);
    expect(readFileSync(join(work, "skills/ops/deploy/SKILL.md"), "utf8")).toBe(`${SKILL}edited by hand meanwhile\n`);

    const m = await propose("profile_memory_add", { profile: "work", text: "A new fact." });
    writeFileSync(join(work, "memories/MEMORY.md"), `${MEMORY}\n§\nHermes wrote this meanwhile.`);
    expect((await refusal(run("profile_memory_add", { profile: "work", text: "A new fact.", base: m.base }))).code).toBe("teach.stale");
    expect(readFileSync(join(work, "memories/MEMORY.md"), "utf8")).toBe(`${MEMORY}\n§\nHermes wrote this meanwhile.`);

    // A file added to a skill folder after its deletion was proposed: the deletion is stale too.
    const d = await propose("profile_skill_delete", { profile: "work", category: "ops", name: "deploy" });
    writeFileSync(join(work, "skills/ops/deploy/references/new.md"), "new\n");
    expect((await refusal(run("profile_skill_delete", { profile: "work", category: "ops", name: "deploy", base: d.base }))).details).toEqual({ files: ["skills/ops/deploy/references/new.md"] });
    expect(readdirSync(join(work, "skills/ops/deploy/references")).sort()).toEqual(["new.md", "runbook.md"]);
  });

  it("masks a token in the diff an approval card shows, and writes the text as given", async () => {
    const text = "---\nname: api\ndescription: Call the API.\n---\ncurl -H 'Authorization: Bearer abcdefghijklmnop' http://box\n";
    const p = await propose("profile_skill_put", { profile: "work", category: "ops", name: "api", text });
    expect(p.files[0]!.diff).toContain("Bearer [redacted]");
    expect(p.files[0]!.diff).not.toContain("abcdefghijklmnop");
    await run("profile_skill_put", { profile: "work", category: "ops", name: "api", text, base: p.base });
    expect(readFileSync(join(work, "skills/ops/api/SKILL.md"), "utf8")).toBe(text);
  });

  it("does not write through a symbolic link", async () => {
    const outside = join(dir, "outside");
    mkdirSync(outside, { recursive: true });
    symlinkSync(outside, join(work, "skills/linked"));
    const err = await refusal(run("profile_skill_put", { profile: "work", category: "linked", name: "x", text: "---\nname: x\ndescription: d\n---\nbody\n" }));
    expect(err.code).toBe("teach.unsafe_path");
    expect(readdirSync(outside)).toEqual([]);
  });

  it("does not read through a linked folder either", async () => {
    const outside = join(dir, "outside-read");
    mkdirSync(join(outside, "peek"), { recursive: true });
    writeFileSync(join(outside, "peek/SKILL.md"), "---\nname: peek\ndescription: outside the profile\n---\nsecret body\n");
    symlinkSync(outside, join(work, "skills/elsewhere"));
    const err = await refusal(run("profile_skill_get", { profile: "work", category: "elsewhere", name: "peek" }));
    expect(err.code).toBe("teach.unsafe_path");
    expect(JSON.stringify(err)).not.toContain("secret body");
  });

  it("does not list the skills of a skills folder that is a link out of the profile", async () => {
    const outside = join(dir, "outside-list");
    mkdirSync(join(outside, "hidden-name"), { recursive: true });
    const profile = join(home, "profiles/linked-skills");
    mkdirSync(profile, { recursive: true });
    symlinkSync(outside, join(profile, "skills"));
    const err = await refusal(run("profile_skill_list", { profile: "linked-skills" }, { ...ctx, profiles: ["linked-skills"] }));
    expect(err.code).toBe("teach.unsafe_path");
    expect(JSON.stringify(err)).not.toContain("hidden-name");
  });

  it("records an audit row for each write, with the text as its size and hash", async () => {
    const text = "---\nname: audit-me\ndescription: d\n---\nbody\n";
    const auditor: BridgeContext = { ...ctx, caller: { ...ctx.caller, agent: "auditor" } };
    await run("profile_skill_put", { profile: "work", category: "ops", name: "audit-me", text }, auditor);
    await refusal(run("profile_skill_put", { profile: "work", category: "ops", name: "audit-me", text, base: { "skills/ops/audit-me/SKILL.md": null } }, auditor));
    await run("profile_memory_add", { profile: "work", text: "Audited fact." }, auditor);
    await run("profile_skill_list", { profile: "work" }, auditor); // a read: the mount's to audit, not the tool's
    const rows = s.hal0.audit.query({ actor: "agent:auditor" }).items.reverse();
    expect(rows.map((r) => [r.route, r.tool, r.target, r.outcome, r.error_code, r.kind])).toEqual([
      ["POST /mcp/agents/profile_skill_put", "profile_skill_put", "work/ops/audit-me", "ok", null, "mcp"],
      ["POST /mcp/agents/profile_skill_put", "profile_skill_put", "work/ops/audit-me", "error", "teach.stale", "mcp"],
      ["POST /mcp/agents/profile_memory_add", "profile_memory_add", "work", "ok", null, "mcp"],
    ]);
    expect(rows[0]!.args).toEqual({ profile: "work", category: "ops", name: "audit-me", text_bytes: Buffer.byteLength(text), text_sha256: expect.stringMatching(/^sha256:/) });
    expect(JSON.stringify(rows)).not.toContain("Audited fact.");
  });
});
