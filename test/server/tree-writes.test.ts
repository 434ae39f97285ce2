import { chmodSync, lstatSync, mkdtempSync, readdirSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
