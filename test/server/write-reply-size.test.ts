import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { adminClient, callTool } from "./mcp-helpers.js";
import { startTestServer, type TestServer } from "./harness.js";

const PARKED = 60;
let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
  // A bigger box: 60 more slots, off and not running, so each plans as a no-op.
  for (let i = 0; i < PARKED; i++) {
    writeFileSync(join(s.config, "slots", `parked-${i}.toml`), `profile = "comfyui"\nmodel = "flux1-schnell"\nport = ${8122 + i}\ntype = "image"\nenabled = false\npriority = 10\n\n[placement]\ndevice = "gpu-rocm"\n`);
  }
});
afterEach(async () => s.close());

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));
type Row = { address: string; action: string };

describe("a write's reply carries what the write does, not the whole box's plan", () => {
  it("an edit of one slot answers without the no-op changes (counted in summary.no_op); plan_propose keeps them all", async () => {
    const whole = await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/chat.toml", op: "set", path: ["description"], value: "edited once" }] } });
    expect(whole.status, JSON.stringify(whole.body)).toBe(201);
    const noOps = whole.body.plan.changes.filter((c: Row) => c.action === "no-op").length;
    expect(noOps).toBeGreaterThanOrEqual(PARKED);
    expect(whole.body.plan.summary.no_op).toBe(noOps);

    const res = await s.call("PUT", "/api/slots/chat/config", { body: { description: "edited once" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { plan } = res.body;
    expect(plan.changes.filter((c: Row) => c.action === "no-op")).toEqual([]);
    expect(plan.changes).toEqual(whole.body.plan.changes.filter((c: Row) => c.action !== "no-op"));
    expect(plan.summary.no_op).toBe(noOps);
    expect(plan).toMatchObject({ id: whole.body.plan.id, has_changes: whole.body.plan.has_changes, settings: whole.body.plan.settings, warnings: whole.body.plan.warnings, base: whole.body.plan.base });
    // The whole plan carries a before/after of every parked slot; the write's reply none of them.
    expect(bytes(whole.body.plan)).toBeGreaterThan(20_000);
    expect(bytes(res.body)).toBeLessThan(bytes(whole.body.plan) - PARKED * 150);
    // The saved plan still reads whole.
    const shown = await s.call("GET", `/api/plans/${whole.body.id}`);
    expect(shown.body.plan.changes).toHaveLength(whole.body.plan.changes.length);
  });

  it("over MCP too: slot_edit's and plan_submit's replies leave the no-op changes out", async () => {
    const c = await adminClient(s.url, { token: s.operator });
    try {
      const res = await callTool(c, "slot_edit", { name: "chat", description: "edited over MCP" });
      expect(res.isError, JSON.stringify(res.body).slice(0, 500)).toBe(false);
      expect(res.body.plan.changes.filter((x: Row) => x.action === "no-op")).toEqual([]);
      expect(res.body.plan.summary.no_op).toBeGreaterThanOrEqual(PARKED);
      expect(bytes(res.body)).toBeLessThan(20_000);

      const proposed = await callTool(c, "plan_propose", { edits: [{ file: "slots/chat.toml", op: "set", path: ["description"], value: "by plan" }] });
      expect(proposed.body.plan.changes.length).toBeGreaterThanOrEqual(PARKED);
      const applied = await callTool(c, "plan_submit", { id: proposed.body.id });
      expect(applied.isError, JSON.stringify(applied.body).slice(0, 500)).toBe(false);
      expect(applied.body.plan.changes.filter((x: Row) => x.action === "no-op")).toEqual([]);
      expect(bytes(applied.body)).toBeLessThan(20_000);
    } finally {
      await c.close();
    }
  });
});
