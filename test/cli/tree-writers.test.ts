import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { acquireCommitLock } from "../../reconciler/lock.js";
import { emptyServeBox, startServe } from "./helpers.js";

/**
 * Several processes write one box's config files: `hal0 serve` (REST, MCP,
 * approvals), `hal0 agent approvals approve` and `hal0 model pull` (each
 * committing from its own process). Each commit checks the files it edits and
 * then writes them; `commit.lock` in the state folder keeps another process's
 * write out of the gap between the two.
 */
describe("commits from two processes", () => {
  it("a REST write waits while another process commits, then plans again from what that one wrote: both changes are kept", async () => {
    const { config, state } = emptyServeBox("hal0-tree-writers-");
    const file = join(config, "slots/a.toml");
    writeFileSync(file, `profile = "vulkan"\nmodel = "tiny"\nport = 8101\nenabled = false\n`);
    const { child, url } = await startServe(config, state, ["--no-reconcile"]);
    try {
      const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}`, "content-type": "application/json" };
      // Another hal0 process (an approval run from the CLI) is committing: it holds the lock, and has checked the file as it is.
      const release = await acquireCommitLock(state, "hal0 agent approvals approve (another process)");
      const checked = readFileSync(file, "utf8");
      const put = fetch(`${url}/api/slots/a/config`, { method: "PUT", headers, body: JSON.stringify({ tune: { ctx_size: 4096 } }) })
        .then(async (r) => ({ status: r.status, body: await r.json() }));
      // The server's commit does not write over it meanwhile.
      expect(await Promise.race([put, sleep(1500).then(() => "waiting")])).toBe("waiting");
      expect(readFileSync(file, "utf8")).toBe(checked);
      writeFileSync(file, `${checked}# the other process's change\n`);
      await release();
      const res = await put;
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const text = readFileSync(file, "utf8");
      expect(text).toContain("# the other process's change");
      expect(text).toMatch(/ctx_size = 4096/);
    } finally {
      child.kill("SIGTERM");
    }
  }, 30_000);

  it("a commit lock its holder left behind (killed mid-commit) holds nothing up: the next write takes it over", async () => {
    const { config, state } = emptyServeBox("hal0-tree-writers-dead-");
    const file = join(config, "slots/a.toml");
    writeFileSync(file, `profile = "vulkan"\nmodel = "tiny"\nport = 8101\nenabled = false\n`);
    const { child, url } = await startServe(config, state, ["--no-reconcile"]);
    try {
      const dead = { pid: 2 ** 22 + 7, pid_start: 1, host: (await import("node:os")).hostname(), started_at: "2026-01-01T00:00:00.000Z", command: "a commit to the config files", state };
      writeFileSync(join(state, "commit.lock"), `${JSON.stringify(dead)}\n`);
      const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}`, "content-type": "application/json" };
      const res = await fetch(`${url}/api/slots/a/config`, { method: "PUT", headers, body: JSON.stringify({ tune: { ctx_size: 2048 } }) });
      expect(res.status).toBe(200);
      expect(readFileSync(file, "utf8")).toMatch(/ctx_size = 2048/);
    } finally {
      child.kill("SIGTERM");
    }
  }, 30_000);
});
