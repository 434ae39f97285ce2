import type { ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { httpCall } from "../server/harness.js";
import { until } from "../reconciler/process-helpers.js";
import { emptyServeBox, startServe } from "./helpers.js";

/**
 * A real `hal0 serve` on a state folder damaged between runs: a file of it
 * that cannot be read is refused with a code naming it, over REST and in the
 * sweep's log line, never an internal error with a stack.
 */
describe("hal0 serve on a damaged state folder", () => {
  const children: ChildProcess[] = [];
  const bases: string[] = [];
  afterAll(() => {
    for (const child of children) child.kill("SIGKILL");
    for (const base of bases) rmSync(base, { recursive: true, force: true });
  });

  it("a state file that is a folder (outcomes.json) is system.io naming it for the reads that need it, and the sweep logs one line with the code, not a stack", async () => {
    const { config, state } = emptyServeBox("hal0-damaged-");
    bases.push(dirname(config));
    const file = join(state, "outcomes.json");
    mkdirSync(file, { recursive: true });
    const serving = await startServe(config, state);
    children.push(serving.child);
    const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
    const slots = await httpCall(serving.url, "GET", "/api/slots", { headers });
    expect(slots.status).toBe(500);
    expect(slots.body.error).toEqual({ code: "system.io", message: `cannot read the state file ${file}: it is a folder (EISDIR); move the folder away (hal0 writes the file again)`, details: {} });
    // What does not need the file still answers.
    expect((await httpCall(serving.url, "GET", "/api/status", { headers })).status).toBe(200);
    await until(async () => serving.lines().some((l) => l.msg === "sweep failed"), 10_000);
    const failed = serving.lines().filter((l) => l.msg === "sweep failed" || l.msg === "unhandled error");
    expect(failed[0]).toMatchObject({ msg: "sweep failed", code: "system.io", message: expect.stringContaining(file) });
    expect(JSON.stringify(failed)).not.toContain("stack");
  });
});
