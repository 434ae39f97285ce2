import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => {
  await s.hal0.box.close();
  await s.close();
});

describe("BoxService: the one write path", () => {
  it("commits a multi-file change set as a whole: when one file fails, every file is rolled back", async () => {
    const chat = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    mkdirSync(join(s.config, "stacks/blocked.toml")); // a folder where a file must go: its rename fails
    const proposal = await s.hal0.box.propose({ edits: [
      { file: "slots/chat.toml", op: "set", path: ["priority"], value: 99 },
      { file: "stacks/blocked.toml", op: "put", doc: { name: "Blocked", slot: [{ slot: "chat" }] } },
    ] });
    await expect(s.hal0.box.commit(proposal)).rejects.toMatchObject({ code: "config.write_failed" });
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toBe(chat);
  });

  it("a change set that removes a file and fails to write another leaves the removed file as it was: its mode, and a link a link", async () => {
    const chat = join(s.config, "slots/npu-qwen.toml");
    chmodSync(chat, 0o600); // a slot file made private by hand
    const kept = join(s.config, "kept-rerank.toml");
    renameSync(join(s.config, "slots/vision.toml"), kept);
    symlinkSync("../kept-rerank.toml", join(s.config, "slots/vision.toml"));
    const before = [readFileSync(chat, "utf8"), readFileSync(kept, "utf8")];
    mkdirSync(join(s.config, "stacks/blocked.toml")); // a folder where a file must go: its rename fails
    const proposal = await s.hal0.box.propose({ edits: [
      { file: "slots/npu-qwen.toml", op: "delete" },
      { file: "slots/vision.toml", op: "delete" },
      { file: "stacks/blocked.toml", op: "put", doc: { name: "Blocked", slot: [{ slot: "embed" }] } },
    ], force: true });
    await expect(s.hal0.box.commit(proposal)).rejects.toMatchObject({ code: "config.write_failed" });
    expect([readFileSync(chat, "utf8"), readFileSync(kept, "utf8")]).toEqual(before);
    expect(statSync(chat).mode & 0o777).toBe(0o600);
    expect(lstatSync(join(s.config, "slots/vision.toml")).isSymbolicLink()).toBe(true);
  });

  it("refuses to commit over a file that changed after the proposal was made", async () => {
    const proposal = await s.hal0.box.propose({ edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value: 99 }] });
    const file = join(s.config, "slots/chat.toml");
    writeFileSync(file, `${readFileSync(file, "utf8")}# late edit\n`);
    await expect(s.hal0.box.commit(proposal)).rejects.toMatchObject({ code: "config.stale", details: { files: ["slots/chat.toml"] } });
    expect(readFileSync(file, "utf8")).toMatch(/# late edit\n$/);
  });

  it("sees a hand edit while watching (from the watcher's event, well before the 1 s re-check)", async () => {
    await s.hal0.box.watch();
    const before = (await s.hal0.box.snapshot()).revision;
    expect((await s.hal0.box.snapshot()).revision).toBe(before);
    const file = join(s.config, "slots/chat.toml");
    writeFileSync(file, `${readFileSync(file, "utf8")}# hand edit\n`);
    let after = before;
    for (let i = 0; i < 30 && after === before; i++) {
      await sleep(20);
      after = (await s.hal0.box.snapshot()).revision;
    }
    expect(after).not.toBe(before);
  });

  it("a link that loops, made in the tree while watching, is the tree's config.read_error, not the end of the process (the watcher's ELOOP went unheard)", async () => {
    await s.hal0.box.watch();
    symlinkSync("loop.toml", join(s.config, "slots/loop.toml"));
    let snap = await s.hal0.box.snapshot();
    for (let i = 0; i < 30 && !snap.diagnostics.some((d) => d.file === "slots/loop.toml"); i++) {
      await sleep(20);
      snap = await s.hal0.box.snapshot();
    }
    expect(snap.diagnostics.filter((d) => d.code === "config.read_error").map((d) => d.file)).toEqual(["slots/loop.toml"]);
    await sleep(300); // the watcher's look at the new entries is done
    const res = await s.call("GET", "/api/slots/chat/config");
    expect(res.status).toBe(200);
  });

  it("a write that names no base, sent right after a hand edit the watcher has not reported yet, is planned again from the file on disk (it was 409 config.stale three times over the same cached tree)", async () => {
    await s.hal0.box.watch();
    const file = join(s.config, "slots/coder.toml");
    // The watcher's event comes some milliseconds after the edit: a write sent at once raced it (about one in three lost here).
    for (let i = 0; i < 12; i++) {
      await s.hal0.box.snapshot();
      writeFileSync(file, `${readFileSync(file, "utf8")}# hand edit ${i}\n`);
      const res = await s.call("PUT", "/api/slots/coder/config", { body: { description: `edited through the API ${i}` } });
      expect([i, res.status, res.body.error?.code]).toEqual([i, 200, undefined]);
      const text = readFileSync(file, "utf8");
      expect(text).toContain(`# hand edit ${i}\n`);
      expect(text).toContain(`description = "edited through the API ${i}"`);
    }
  });

  it("a config folder or a slots folder hal0 cannot list: reads answer from the last tree that compiled, a write is 422 config.invalid naming it (every call was 500 system.internal)", async (ctx) => {
    await s.hal0.box.model();
    const unlistable = (path: string): (() => void) | undefined => {
      chmodSync(path, 0o000);
      try {
        readdirSync(path);
      } catch {
        return () => chmodSync(path, 0o755);
      }
      // root: a folder that stats as one and cannot be read, where the kernel has one for it
      chmodSync(path, 0o755);
      renameSync(path, `${path}.away`);
      symlinkSync("/proc/1/map_files", path);
      try {
        readdirSync(path);
      } catch {
        return () => {
          rmSync(path);
          renameSync(`${path}.away`, path);
        };
      }
      rmSync(path);
      renameSync(`${path}.away`, path);
      return undefined;
    };
    for (const [folder, file] of [[join(s.config, "slots"), "slots"], [s.config, "."]] as const) {
      const restore = unlistable(folder);
      if (restore === undefined) return ctx.skip();
      try {
        const read = await s.call("GET", "/api/slots");
        expect([read.status, read.body.slots?.length > 0]).toEqual([200, true]);
        const write = await s.call("PUT", "/api/models/qwen3-4b", { body: { name: "renamed" } });
        expect([write.status, write.body.error?.code]).toEqual([422, "config.invalid"]);
        expect(write.body.error.details.diagnostics).toContainEqual(expect.objectContaining({ code: "config.read_error", file }));
      } finally {
        restore();
      }
    }
  });

  it("keeps the last good model for reads while the tree on disk does not compile", async () => {
    const good = await s.hal0.box.model();
    writeFileSync(join(s.config, "slots/chat.toml"), "profile = \n");
    const snap = await s.hal0.box.snapshot();
    expect(snap.model).toBeUndefined();
    expect(snap.diagnostics.some((d) => d.code === "config.parse_error")).toBe(true);
    expect(await s.hal0.box.model()).toBe(good);
    await expect(s.hal0.box.propose({ edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value: 1 }] })).rejects.toMatchObject({ code: "config.invalid" });
  });

  it("a file of the tree that cannot be read (not UTF-8, a folder) refuses every write as config.invalid with its read_error, on REST and MCP alike; its slot is never planned as removed; a write of that file itself fixes it", async () => {
    const utility = join(s.config, "slots/utility.toml");
    const good = readFileSync(utility, "utf8");
    writeFileSync(utility, Buffer.concat([Buffer.from(good), Buffer.from("# caf\xe9\n", "latin1")]));
    const coder = readFileSync(join(s.config, "slots/coder.toml"), "utf8");
    const refused = await s.call("PUT", "/api/slots/coder/config", { body: { description: "edited" } });
    expect([refused.status, refused.body.error?.code]).toEqual([422, "config.invalid"]);
    expect(refused.body.error.details.diagnostics).toEqual([expect.objectContaining({ code: "config.read_error", file: "slots/utility.toml", line: good.split("\n").length, column: 6 })]);
    const client = await adminClient(s.url, "hermes__ops");
    try {
      const viaMcp = await callTool(client, "plan_propose", { edits: [{ file: "slots/coder.toml", op: "set", path: ["description"], value: "edited" }] });
      expect(viaMcp.body).toMatchObject({ valid: false, plan: null, diagnostics: [{ code: "config.read_error", file: "slots/utility.toml" }] });
    } finally {
      await client.close();
    }
    expect(readFileSync(join(s.config, "slots/coder.toml"), "utf8")).toBe(coder);
    // A folder where a slot file goes is the same refusal.
    writeFileSync(utility, good);
    mkdirSync(join(s.config, "slots/spare.toml"));
    const folder = await s.call("PUT", "/api/slots/coder/config", { body: { description: "edited" } });
    expect(folder.body.error.details.diagnostics).toEqual([expect.objectContaining({ code: "config.read_error", file: "slots/spare.toml", line: 1, column: 1 })]);
    // Writing the unreadable file itself replaces it: no longer refused.
    writeFileSync(utility, Buffer.concat([Buffer.from(good), Buffer.from("# caf\xe9\n", "latin1")]));
    rmdirSync(join(s.config, "slots/spare.toml"));
    const fixed = await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/utility.toml", op: "text", text: good }] } });
    expect(fixed.body).toMatchObject({ valid: true, files: ["slots/utility.toml"] });
    expect((await s.call("POST", `/api/plans/${fixed.body.id}/apply`)).status).toBe(200);
    expect(readFileSync(utility, "utf8")).toBe(good);
  });
});

const modeOf = (path: string) => statSync(path).mode & 0o7777;
const hal0Temps = (dir: string) => readdirSync(dir).filter((n) => n.endsWith(".hal0.tmp"));

describe("writes to the config tree keep what its owner arranged", () => {
  it("a slot file that is a symbolic link stays one: the file it leads to is written", async () => {
    const outside = mkdtempSync(join(tmpdir(), "hal0-linked-"));
    const link = join(s.config, "slots/chat.toml");
    const target = join(outside, "chat.toml");
    renameSync(link, target);
    symlinkSync(target, link);
    const put = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 77 } });
    expect(put.status).toBe(200);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readFileSync(target, "utf8")).toMatch(/^priority = 77$/m);
    expect(hal0Temps(outside)).toEqual([]);
    expect(hal0Temps(join(s.config, "slots"))).toEqual([]);
    // The next read goes through the link and sees the write.
    expect((await s.call("GET", "/api/slots/chat")).body.priority).toBe(77);
    // A relative link, the way a dotfiles checkout makes them, is followed the same way.
    const rel = join(s.config, "slots/coder.toml");
    renameSync(rel, join(s.config, "coder.shared"));
    symlinkSync("../coder.shared", rel);
    expect((await s.call("PUT", "/api/slots/coder/config", { body: { priority: 12 } })).status).toBe(200);
    expect(lstatSync(rel).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(s.config, "coder.shared"), "utf8")).toMatch(/^priority = 12$/m);
  });

  it("a file keeps its mode: one made 0600 by hand stays 0600 after an edit, and 0640 stays 0640", async () => {
    const chat = join(s.config, "slots/chat.toml");
    const settings = join(s.config, "hal0.toml");
    chmodSync(chat, 0o600);
    chmodSync(settings, 0o640);
    expect((await s.call("PUT", "/api/slots/chat/config", { body: { priority: 61 } })).status).toBe(200);
    expect(modeOf(chat)).toBe(0o600);
    expect(readFileSync(chat, "utf8")).toMatch(/^priority = 61$/m);
    const put = await s.call("PUT", "/api/settings", { body: { slots: { max_slots: 9 } } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(modeOf(settings)).toBe(0o640);
    // A new slot file is 0644 (less the umask), as before.
    const created = await s.call("POST", "/api/slots", { body: { name: "extra", profile: "cpu-small", model: "qwen3-4b", port: 8150, enabled: false } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(modeOf(join(s.config, "slots/extra.toml"))).toBe(0o644 & ~process.umask());
  });

  it("a file written with a secret in it is not left for other users to read: a new one is 0600, one that was 0644 becomes 0640", async () => {
    const created = await s.call("POST", "/api/slots", { body: { name: "keyed", profile: "cpu-small", model: "qwen3-4b", port: 8151, enabled: false, server: { env: { API_KEY: "modekey-51c2" } } } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const keyed = join(s.config, "slots/keyed.toml");
    expect(readFileSync(keyed, "utf8")).toContain("modekey-51c2");
    expect(modeOf(keyed)).toBe(0o600);
    const coder = join(s.config, "slots/coder.toml");
    chmodSync(coder, 0o644);
    const put = await s.call("PUT", "/api/slots/coder/config", { body: { server: { extra_args: "--api-key modekey-77d0" } } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(modeOf(coder)).toBe(0o640);
    // A file without a secret is written as before.
    expect((await s.call("POST", "/api/slots", { body: { name: "plain", profile: "cpu-small", model: "qwen3-4b", port: 8152, enabled: false } })).status).toBe(201);
    expect(modeOf(join(s.config, "slots/plain.toml"))).toBe(0o644 & ~process.umask());
  });

  it("a file that starts with a UTF-8 byte-order mark can be edited (it was config.stale on every write) and keeps the mark; CRLF line ends stay", async () => {
    const coder = join(s.config, "slots/coder.toml");
    const before = readFileSync(coder);
    writeFileSync(coder, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), before]));
    const put = await s.call("PUT", "/api/slots/coder/config", { body: { priority: 33 } });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const after = readFileSync(coder);
    expect([...after.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    expect(after.subarray(3).toString("utf8")).toMatch(/^priority = 33$/m);
    expect(after.subarray(3).toString("utf8").charCodeAt(0)).not.toBe(0xfeff); // one mark, not two
    const chat = join(s.config, "slots/chat.toml");
    writeFileSync(chat, readFileSync(chat, "utf8").replace(/\n/g, "\r\n"));
    expect((await s.call("PUT", "/api/slots/chat/config", { body: { priority: 34 } })).status).toBe(200);
    const text = readFileSync(chat, "utf8");
    expect(text).toMatch(/^priority = 34\r$/m);
    expect(text.split("\n").slice(0, -1).every((line) => line.endsWith("\r"))).toBe(true);
  });
});

describe("the config folder under a running server", () => {
  it("a config folder that goes away (moved, deleted, unmounted) keeps reads on the last good tree; a write is 404 config.not_found, coded; all is back with the folder", async () => {
    expect((await s.call("GET", "/api/slots")).status).toBe(200);
    const away = `${s.config}.away`;
    renameSync(s.config, away);
    await sleep(1100); // past the read window
    const read = await s.call("GET", "/api/slots");
    expect(read.status).toBe(200);
    expect(read.body.slots.map((x: { name: string }) => x.name)).toContain("chat");
    // The reads that say how the box is say the folder is gone, rather than failing with it.
    const status = await s.call("GET", "/api/status");
    expect(status.status, JSON.stringify(status.body)).toBe(200);
    expect(status.body).toMatchObject({ tree_valid: false, revision: null, runtime: "process", tree_error: { code: "config.not_found" } });
    const health = await s.call("GET", "/api/health/system");
    expect(health.status).toBe(200);
    expect(health.body.status).toBe("degraded");
    expect(health.body.checks.find((c: { check: string }) => c.check === "tree")).toMatchObject({ status: "fail" });
    expect(health.body.checks.find((c: { check: string }) => c.check === "tree").message).toContain("is gone");
    const doctor = await s.call("GET", "/api/doctor");
    expect(doctor.status).toBe(200);
    expect(doctor.body).toMatchObject({ ok: false, diagnostics: [] });
    const settings = await s.call("GET", "/api/settings");
    expect(settings.status).toBe(200);
    expect(settings.body).toMatchObject({ revision: null, slots: { runtime: "process" }, _hal0: { tree_valid: false, tree_error: { code: "config.not_found" } } });
    const write = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 5 } });
    expect(write.status).toBe(404);
    expect(write.body.error.code).toBe("config.not_found");
    expect(write.body.error.message).toContain("is gone (moved, deleted or unmounted)");
    expect(existsSync(s.config)).toBe(false); // nothing was made in its place
    renameSync(away, s.config);
    await sleep(1100);
    expect((await s.call("PUT", "/api/slots/chat/config", { body: { priority: 5 } })).status).toBe(200);
  });

  it("a config folder whose path became a loop of symbolic links (a link switch gone wrong) is a folder gone, not a 500 on every read", async () => {
    expect((await s.call("GET", "/api/slots")).status).toBe(200);
    const away = `${s.config}.away`;
    renameSync(s.config, away);
    symlinkSync(s.config, s.config); // a link to itself: ELOOP
    await sleep(1100); // past the read window
    const read = await s.call("GET", "/api/slots");
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    expect(read.body.slots.map((x: { name: string }) => x.name)).toContain("chat");
    const status = await s.call("GET", "/api/status");
    expect(status.status, JSON.stringify(status.body)).toBe(200);
    expect(status.body).toMatchObject({ tree_valid: false, revision: null, tree_error: { code: "config.not_found" } });
    const write = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 5 } });
    expect(write.status).toBe(404);
    expect(write.body.error.code).toBe("config.not_found");
    rmSync(s.config);
    renameSync(away, s.config);
    await sleep(1100);
    expect((await s.call("PUT", "/api/slots/chat/config", { body: { priority: 5 } })).status).toBe(200);
  });
});
