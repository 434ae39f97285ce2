import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { deadPid } from "../reconciler/kill-write.js";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => {
  await s.hal0.box.close();
  await s.close();
});

describe("BoxService.commit: stale temp files (issue 16)", () => {
  it("removes the temps a dead writer left in the folders the commit writes to, and keeps a live writer's", async () => {
    const dead = await deadPid();
    const stale = join(s.config, `slots/.chat.toml.${dead}.0123456789ab.hal0.tmp`);
    const live = join(s.config, `slots/.chat.toml.${process.pid}.0123456789ab.hal0.tmp`);
    const elsewhere = join(s.config, `stacks/.dev.toml.${dead}.0123456789ab.hal0.tmp`);
    for (const f of [stale, live, elsewhere]) writeFileSync(f, "profile = ");
    const proposal = await s.hal0.box.propose({ edits: [{ file: "slots/chat.toml", op: "set", path: ["priority"], value: 99 }] });
    await s.hal0.box.commit(proposal);
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toMatch(/priority = 99/);
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(live)).toBe(true);
    // Cheap: only the folders this commit writes to are looked at (hal0 serve's start sweeps the rest).
    expect(existsSync(elsewhere)).toBe(true);
  });
});
