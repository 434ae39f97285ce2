import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { httpCall } from "./harness.js";
import { startServe, writeFakeBox } from "../cli/helpers.js";
import { until } from "../reconciler/process-helpers.js";

/**
 * hal0 serve watches the tree's folders. chokidar, which it used, read a
 * folder again (a stat of each of its files) after each event in it, so a
 * plan applied to 150 of 400 slot files cost about 150 × 400 stats in the
 * server (500 of 1000: 194 000 stats, 5 s of CPU, per watcher). The watch now
 * costs nothing per event: the stats of the apply are the commit's own.
 */
const base = mkdtempSync(join(tmpdir(), "hal0-watch-scale-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

describe("hal0 serve on a folder of many slot files", () => {
  it("applying a plan that writes 150 of 400 slot files makes no stat per file of the folder per write", async () => {
    const FILES = 400;
    const EDITED = 150;
    const config = join(base, "box");
    const state = join(base, "state");
    const counts = join(base, "stats.txt");
    await writeFakeBox(config, []);
    for (let i = 0; i < FILES; i++) writeFileSync(join(config, `slots/bulk${i}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${20000 + i}\nenabled = false\n`);
    const env = { ...process.env, NODE_OPTIONS: `-r ${join(import.meta.dirname, "../helpers/count-stats.cjs")}`, HAL0_TEST_STATS_FILE: counts };
    const { child, url } = await startServe(config, state, ["--no-reconcile"], undefined, env);
    try {
      const headers = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };
      const edits = Array.from({ length: EDITED }, (_, i) => ({ file: `slots/bulk${i}.toml`, op: "set", path: ["priority"], value: 7 }));
      const plan = await httpCall(url, "POST", "/api/plans", { headers, body: { summary: "bulk", edits } });
      expect(plan.status, JSON.stringify(plan.body).slice(0, 500)).toBe(201);
      const read = () => readFileSync(counts, "utf8").trim().split("\n").map(Number);
      const mark = async () => {
        const before = (() => { try { return read().length; } catch { return 0; } })();
        child.kill("SIGUSR2");
        await until(async () => { try { return read().length > before; } catch { return false; } });
        return read().at(-1)!;
      };
      const start = await mark();
      const applied = await httpCall(url, "POST", `/api/plans/${plan.body.id}/apply`, { headers });
      expect(applied.status, JSON.stringify(applied.body).slice(0, 500)).toBe(200);
      expect(applied.body.files).toHaveLength(EDITED);
      await sleep(1500); // the watcher's events have come in
      const stats = (await mark()) - start;
      // The commit looks at each file it writes a few times; a folder read per write would be tens of thousands.
      expect(stats).toBeLessThan(EDITED * 4);
    } finally {
      child.kill("SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
    }
  }, 60_000);
});
