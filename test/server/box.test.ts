import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";

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

  it("keeps the last good model for reads while the tree on disk does not compile", async () => {
    const good = await s.hal0.box.model();
    writeFileSync(join(s.config, "slots/chat.toml"), "profile = \n");
    const snap = await s.hal0.box.snapshot();
    expect(snap.model).toBeUndefined();
    expect(snap.diagnostics.some((d) => d.code === "config.parse_error")).toBe(true);
    expect(await s.hal0.box.model()).toBe(good);
    await expect(s.hal0.box.propose({ edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value: 1 }] })).rejects.toMatchObject({ code: "config.invalid" });
  });
});
