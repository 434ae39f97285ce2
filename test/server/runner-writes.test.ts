import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunnerProbe } from "../../reconciler/runner-probe.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/**
 * Every REST and MCP write's plan is made with the runners' facts (the
 * example box's stand-in llama-server, asked --version and --help once): a
 * change that gives a slot an argv its runner would refuse is refused,
 * located, and nothing is written; the resolved spec shows the facts used.
 */
describe("writes are checked against the runner's flag table", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ extra: { runners: new RunnerProbe({ stateDir: null, root: join(import.meta.dirname, "../../fixtures/box") }) } });
  });
  afterAll(async () => s.close());

  it("REST: extra_args with a removed flag is 422 config.invalid with the diagnostic at the word; the file is untouched", async () => {
    const before = readFileSync(join(s.config, "slots/chat.toml"), "utf8");
    const res = await s.call("PUT", "/api/slots/chat/config", { body: { server: { extra_args: "--parallel 2 --draft-max 4" } } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe("config.invalid");
    expect(res.body.error.message).toContain("slot.runner_flag_removed");
    const [d] = res.body.error.details.diagnostics;
    expect(d).toMatchObject({ code: "slot.runner_flag_removed", severity: "error", file: "slots/chat.toml" });
    expect(d.detail).toContain("--spec-draft-n-max");
    expect(readFileSync(join(s.config, "slots/chat.toml"), "utf8")).toBe(before);
    // The replacement the runner names is accepted.
    expect((await s.call("PUT", "/api/slots/chat/config", { body: { server: { extra_args: "--parallel 2 --spec-draft-n-max 4" } } })).status).toBe(200);
  });

  it("MCP: the same refusal reaches an agent's call, before anything is queued for approval", async () => {
    const c = await adminClient(s.url, "hermes__coder");
    const before = readFileSync(join(s.config, "slots/embed.toml"), "utf8");
    const res = await callTool(c, "slot_edit", { name: "embed", server: { extra_args: "--spec-type mtp" } });
    expect(res.isError).toBe(true);
    expect(res.body.error.code).toBe("config.invalid");
    expect(res.body.error.details.diagnostics[0]).toMatchObject({ code: "slot.runner_flag_value", file: "slots/embed.toml" });
    expect(res.body.error.details.diagnostics[0].detail).toContain("Did you mean `draft-mtp`?");
    expect(readFileSync(join(s.config, "slots/embed.toml"), "utf8")).toBe(before);
    expect((await s.call("GET", "/api/agent/approvals?state=pending")).body.approvals).toEqual([]);
    await c.close();
  });

  it("/api/slots/{name}/resolved shows the runner facts the argv was written in and checked against", async () => {
    const res = await s.call("GET", "/api/slots/coder/resolved");
    expect(res.status).toBe(200);
    expect(res.body.runner).toMatchObject({ status: "checked", version: expect.stringContaining("9749"), dialect: expect.stringMatching(/^llama-server:spec-type,/), diagnostics: [] });
    expect(res.body.argv).toContain("--spec-draft-n-max");
    const speech = await s.call("GET", "/api/slots/speech/resolved");
    expect(speech.body.runner).toMatchObject({ status: "not_checked", version: expect.stringContaining("hal0-fake-runner") });
  });
});
