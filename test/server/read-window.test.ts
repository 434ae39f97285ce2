import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessDriver } from "../../reconciler/index.js";
import { READ_WINDOW_MS } from "../../server/box.js";
import { startTestServer, type TestServer } from "./harness.js";

/**
 * The read window (server/box.ts READ_WINDOW_MS): the roster is served from
 * a liveness observation at most that old, and a watched tree is re-checked
 * at least that often. What hal0 changes itself is read at once; what
 * changes behind its back is read by any request made after the window.
 */
let s: TestServer;
let port: number;

/** A free loopback port in the box's slot range, not one of the example box's own. */
async function freePort(): Promise<number> {
  const taken = new Set([8081, 8082, 8083, 8084, 8090, 8091, 8100, 8101, 8120, 8121, 8188]);
  const ports = Array.from({ length: 120 }, (_, i) => 8081 + i).filter((p) => !taken.has(p)).sort(() => Math.random() - 0.5);
  for (const candidate of ports) {
    const free = await new Promise<boolean>((resolve) => {
      const probe = createServer().once("error", () => resolve(false)).listen(candidate, "127.0.0.1", () => probe.close(() => resolve(true)));
    });
    if (free) return candidate;
  }
  throw new Error("no free port in 8081-8200");
}

beforeAll(async () => {
  s = await startTestServer();
  await s.hal0.box.watch();
  cpSync(join(import.meta.dirname, "../../fixtures/runner"), join(s.config, "../runner"), { recursive: true });
  port = await freePort();
  const moved = await s.call("PUT", "/api/slots/utility/config", { body: { port } });
  expect(moved.status, JSON.stringify(moved.body)).toBe(200);
});

afterAll(async () => {
  await new ProcessDriver({ stateDir: s.state }).stop("utility", 2);
  await s.hal0.box.close();
  await s.close();
});

const statusOf = async (name: string): Promise<string> => {
  const res = await s.call("GET", "/api/slots");
  expect(res.status).toBe(200);
  return res.body.slots.find((x: { name: string }) => x.name === name).status;
};

describe("the read window of GET /api/slots", () => {
  it("a restart through the API is read at once; a runner killed behind hal0's back reads as stopped after the window", async () => {
    expect(await statusOf("utility")).toBe("stopped"); // the observation now held says stopped
    const restarted = await s.call("POST", "/api/slots/utility/restart");
    expect(restarted.status, JSON.stringify(restarted.body)).toBe(200);
    expect(await statusOf("utility")).toBe("running"); // no wait: the restart forgot the held observation

    const { pid } = JSON.parse(readFileSync(join(s.state, "slots", "utility", "runtime.json"), "utf8")) as { pid: number };
    process.kill(-pid, "SIGKILL");
    for (let i = 0; i < 100; i++) {
      try {
        process.kill(pid, 0);
      } catch {
        break;
      }
      await sleep(20);
    }
    await sleep(READ_WINDOW_MS + 50);
    expect(await statusOf("utility")).toBe("stopped");
    const detail = await s.call("GET", "/api/slots/utility");
    expect(detail.body.runtime).toMatchObject({ running: false, detail: `process exited (pid ${pid})` });
  });

  it("a write through the API is in the next read's roster", async () => {
    const before = (await s.call("GET", "/api/slots")).body.slots.find((x: { name: string }) => x.name === "chat");
    const write = await s.call("PUT", "/api/slots/chat/config", { body: { priority: before.priority + 7 } });
    expect(write.status, JSON.stringify(write.body)).toBe(200);
    const after = (await s.call("GET", "/api/slots")).body.slots.find((x: { name: string }) => x.name === "chat");
    expect(after.priority).toBe(before.priority + 7);
  });

  it("a hand edit of a slot file is in a read made after the window", async () => {
    const file = join(s.config, "slots/coder.toml");
    const before = (await s.call("GET", "/api/slots")).body.slots.find((x: { name: string }) => x.name === "coder");
    writeFileSync(file, readFileSync(file, "utf8").replace(/^priority = \d+$/m, `priority = ${before.priority + 3}`));
    await sleep(READ_WINDOW_MS + 50);
    const after = (await s.call("GET", "/api/slots")).body.slots.find((x: { name: string }) => x.name === "coder");
    expect(after.priority).toBe(before.priority + 3);
  });

  it("decides identity per request: a token revoked between two reads of the same roster is refused", async () => {
    const token = s.hal0.tokens.mint("agent", "reader", ["rest"]);
    const headers = { authorization: `Bearer ${token.token}` };
    expect((await s.call("GET", "/api/slots", { headers })).status).toBe(200);
    s.hal0.tokens.revoke(token.id);
    const refused = await s.call("GET", "/api/slots", { headers });
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe("auth.invalid_token");
  });

  it("takes the sweep's observation for liveness reads, unless hal0 changed the runtime after it started", async () => {
    const model = await s.hal0.box.model();
    const slots = [{ name: "chat", running: false, health: "unknown" as const, detail: "seeded by a sweep" }];
    s.hal0.box.seedLiveness(model, slots, performance.now());
    expect((await s.hal0.box.liveness(model)).get("chat")?.detail).toBe("seeded by a sweep");
    const startedAt = performance.now();
    s.hal0.box.forgetLiveness();
    s.hal0.box.seedLiveness(model, [{ ...slots[0]!, detail: "taken before the change" }], startedAt);
    expect((await s.hal0.box.liveness(model)).get("chat")?.detail).not.toBe("taken before the change");
  });
});
