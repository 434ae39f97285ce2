import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { captureIo } from "../cli/helpers.js";
import { startTestServer, type TestServer } from "./harness.js";

/**
 * Issue 16 over HTTP, on a box made by `hal0 init` (its #:schema lines are
 * absolute paths to this package's schema/json/):
 * - point 2: a file hal0 creates gets the #:schema line of its kind; a file
 *   that exists is never given one;
 * - point 3: a null in a slot edit removes the key, and what TOML cannot hold
 *   is a coded refusal, never an uncoded 500.
 */
const PACKAGE = join(import.meta.dirname, "../..");
let base: string;
let s: TestServer;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), "hal0-newfiles-"));
  expect(await main(["init", join(base, "box")], captureIo({}, base))).toBe(0);
  s = await startTestServer({ box: join(base, "box") });
});

afterAll(async () => {
  await s.close();
  rmSync(base, { recursive: true, force: true });
});

const slotText = (name: string) => readFileSync(join(s.config, "slots", `${name}.toml`), "utf8");

describe("files hal0 writes", () => {
  it("POST /api/slots creates slots/<name>.toml with the slot kind's #:schema line, pointing at a file that exists", async () => {
    const res = await s.call("POST", "/api/slots", { body: { name: "scratch", profile: "cpu-small", model: "qwen3-4b", port: 8150, enabled: false } });
    expect(res.status).toBe(201);
    const [first, ...rest] = slotText("scratch").split("\n");
    const target = /^#:schema (\S+)$/.exec(first!)?.[1];
    expect(target).toBe(join(PACKAGE, "schema/json/slot.schema.json"));
    expect(existsSync(target!)).toBe(true);
    expect(rest.join("\n")).toContain('profile = "cpu-small"');
  });

  it("a new stack and a new MCP server file get their kinds' lines too", async () => {
    const stack = await s.call("POST", "/api/stacks", { body: { slug: "quiet", name: "Quiet", slot: [{ slot: "chat", enabled: false }] } });
    expect(stack.status, JSON.stringify(stack.body)).toBe(201);
    expect(readFileSync(join(s.config, "stacks", "quiet.toml"), "utf8").split("\n")[0]).toBe(`#:schema ${join(PACKAGE, "schema/json/stack.schema.json")}`);
    const installed = await s.call("POST", "/api/mcp/install", { body: { manifest: { id: "notes", name: "Notes", transport: "streamable-http", url: "http://127.0.0.1:9/mcp" } } });
    expect(installed.status, JSON.stringify(installed.body)).toBe(201);
    expect(readFileSync(join(s.config, "mcp-servers", "notes.toml"), "utf8").split("\n")[0]).toBe(`#:schema ${join(PACKAGE, "schema/json/mcp-server.schema.json")}`);
  });

  it("editing a file that has no #:schema line does not add one", async () => {
    const path = join(s.config, "slots", "utility.toml");
    const bare = readFileSync(path, "utf8").replace(/^#:schema[^\n]*\n/, "");
    writeFileSync(path, bare);
    const res = await s.call("PUT", "/api/slots/utility/config", { body: { description: "titles and summaries" } });
    expect(res.status).toBe(200);
    const text = slotText("utility");
    expect(text).not.toContain("#:schema");
    expect(text).toContain('description = "titles and summaries"');
  });
});

describe("null in PUT /api/slots/{name}/config", () => {
  it('{"server": {"env": null}} removes server.env and keeps the rest of [server]', async () => {
    expect(slotText("chat")).toContain("env = {");
    const res = await s.call("PUT", "/api/slots/chat/config", { body: { server: { env: null } } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const text = slotText("chat");
    expect(text).not.toMatch(/^env\b/m);
    expect(text).toContain('extra_args = "--metrics --cache-reuse 256"');
    expect(text).toContain("# Prometheus metrics for the dashboard");
    const again = await s.call("PUT", "/api/slots/chat/config", { body: { server: { env: null } } });
    expect(again.status).toBe(200);
    expect(slotText("chat")).toBe(text);
  });

  it("a value TOML cannot hold (null in a list) is a coded refusal (422 config.invalid, diagnostic config.invalid_value), never a 500", async () => {
    const before = slotText("chat");
    const res = await s.call("PUT", "/api/slots/chat/config", { body: { description: ["a", null] } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe("config.invalid");
    expect(res.body.error.details.diagnostics[0]).toMatchObject({ code: "config.invalid_value", file: "slots/chat.toml" });
    expect(slotText("chat")).toBe(before);
  });
});

describe("a box whose files have no #:schema line at all", () => {
  it("a file hal0 creates still gets one, pointing at this package's schema/json/", async () => {
    const bare = await startTestServer();
    try {
      for (const file of ["slots/chat.toml", "slots/utility.toml"]) writeFileSync(join(bare.config, file), readFileSync(join(bare.config, file), "utf8").replace(/^#:schema[^\n]*\n/, ""));
      const res = await bare.call("POST", "/api/slots", { body: { name: "scratch", profile: "cpu-small", model: "qwen3-4b", port: 8151, enabled: false } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(readFileSync(join(bare.config, "slots", "scratch.toml"), "utf8").split("\n")[0]).toBe(`#:schema ${join(PACKAGE, "schema/json/slot.schema.json")}`);
    } finally {
      await bare.close();
    }
  });
});
