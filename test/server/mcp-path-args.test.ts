import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkPathArgs, encodePath } from "../../server/path-args.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/** Seed 001's path-argument cases, each through a real slot_status call; the mirror cases must reach the handler exactly as sent. */
const REFUSED: Array<[string, unknown, string]> = [
  ["null", null, "mcp.invalid_arg"],
  ["true", true, "mcp.invalid_arg"],
  ["false", false, "mcp.invalid_arg"],
  ["a float", 1.5, "mcp.invalid_arg"],
  ["2^53", 2 ** 53, "mcp.invalid_arg"],
  ["a list", ["chat"], "mcp.invalid_arg"],
  ["an object", { name: "chat" }, "mcp.invalid_arg"],
  ["empty", "", "mcp.invalid_arg"],
  [".", ".", "mcp.invalid_arg"],
  ["..", "..", "mcp.invalid_arg"],
  ["a /", "a/b", "mcp.invalid_arg"],
  ["a leading /", "/chat", "mcp.invalid_arg"],
  ["a NUL", "ch\u0000at", "mcp.invalid_arg"],
  ["a newline", "chat\n", "mcp.invalid_arg"],
  ["DEL", "chat\u007f", "mcp.invalid_arg"],
  ["a zero-width space", "ch\u200bat", "mcp.invalid_arg"],
  ["a bidi override", "\u202echat", "mcp.invalid_arg"],
  ["a bidi isolate", "chat\u2066", "mcp.invalid_arg"],
  ["a byte-order mark", "\ufeffchat", "mcp.invalid_arg"],
  ["a word joiner", "ch\u2060at", "mcp.invalid_arg"],
];
const PASSED: Array<[string, string | number, string]> = [
  ["?", "a?b", "a?b"],
  ["#", "a#b", "a#b"],
  ["%", "100%", "100%"],
  ["%2F stays text", "a%2Fb", "a%2Fb"],
  ["a space", "my slot", "my slot"],
  [":", "a:b", "a:b"],
  ["non-ASCII", "モデル-ü", "モデル-ü"],
  ["2^53 − 1", 2 ** 53 - 1, "9007199254740991"],
  ["a negative integer", -3, "-3"],
  ["dots inside", "a..b", "a..b"],
];

let s: TestServer;
let client: Client;
beforeAll(async () => {
  s = await startTestServer();
  client = await adminClient(s.url, "hermes__coder");
});
afterAll(async () => {
  await client.close();
  await s.close();
});

describe("path arguments over MCP (seed 001)", () => {
  it.each(REFUSED)("refuses %s with %s", async (_what, value, code) => {
    const res = await callTool(client, "slot_status", { name: value });
    expect(res.isError).toBe(true);
    expect(res.body).toMatchObject({ status: "error", error: { code, details: { arg: "name" } } });
  });

  it.each(PASSED)("lets %s through to the handler exactly as sent", async (_what, value, seen) => {
    const res = await callTool(client, "slot_status", { name: value });
    expect(res.body.error).toMatchObject({ code: "slot.not_found", details: { name: seen } });
  });

  it("reports a missing argument, and checks a gated call before queueing it", async () => {
    expect((await callTool(client, "slot_status", {})).body.error.code).toBe("mcp.missing_arg");
    const gated = await callTool(client, "slot_delete", { name: "../etc" });
    expect(gated.body.error.code).toBe("mcp.invalid_arg");
    expect((await s.call("GET", "/api/agent/approvals")).body.approvals).toEqual([]);
  });

  it("checks {x:path} arguments segment by segment and encodes each segment on its own", () => {
    const route = { path: "/api/comfyui/files/{subdir}/{relpath:path}" };
    expect(checkPathArgs(route, { subdir: "styles", relpath: "a b/c?.safetensors" })).toEqual({ subdir: "styles", relpath: "a b/c?.safetensors" });
    expect(encodePath(route, { subdir: "st#yles", relpath: "a b/c?.safetensors" })).toBe("/api/comfyui/files/st%23yles/a%20b/c%3F.safetensors");
    for (const bad of ["/a", "a/", "a//b", "a/./b", "a/../b", "a/\u200bb"]) {
      expect(() => checkPathArgs(route, { subdir: "s", relpath: bad }), bad).toThrow(expect.objectContaining({ code: "mcp.invalid_arg" }));
    }
    expect(() => checkPathArgs(route, { subdir: "a/b", relpath: "x" })).toThrow(expect.objectContaining({ code: "mcp.invalid_arg" }));
  });
});
