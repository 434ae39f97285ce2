import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { freePort, RUNNER } from "../reconciler/process-helpers.js";
import { captureIo } from "./helpers.js";

describe("hal0 reconcile --once", () => {
  const root = mkdtempSync(join(tmpdir(), "hal0-rec-"));
  const state = mkdtempSync(join(tmpdir(), "hal0-rec-state-"));
  const args = ["--config", root, "--state", state];
  afterAll(async () => {
    await main(["down", ...args], captureIo());
  });

  it("converges, then has nothing to do, then refuses a broken tree without touching the box", async () => {
    const port = await freePort();
    mkdirSync(join(root, "slots"));
    writeFileSync(join(root, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\n`);
    writeFileSync(join(root, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(root, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"))}\n`);
    writeFileSync(join(root, "slots/s.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n`);
    const first = captureIo();
    expect(await main(["reconcile", "--once", ...args], first)).toBe(0);
    expect(first.out()).toMatch(/sweep: converged \(.*create slot\.s.*\)/);
    const second = captureIo();
    expect(await main(["reconcile", "--once", ...args], second)).toBe(0);
    expect(second.out()).toMatch(/sweep: nothing_to_do\n$/);
    writeFileSync(join(root, "slots/s.toml"), `profile = "fake"\nport = "x"\n`);
    const broken = captureIo();
    expect(await main(["reconcile", "--once", "--json", ...args], broken)).toBe(1);
    const report = JSON.parse(broken.out());
    expect(report.outcome).toBe("invalid_config");
    expect(report.diagnostics[0]).toMatchObject({ file: "slots/s.toml", code: "config.invalid_type", line: 2 });
    writeFileSync(join(root, "slots/s.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${port}\n`);
    expect(await main(["reconcile", "--once", ...args], captureIo())).toBe(0);
  });

  it("a sweep refused by a held lock names the holder, as hal0 apply does (text and --json), exit 1", async () => {
    const box = mkdtempSync(join(tmpdir(), "hal0-rec-locked-"));
    const held = mkdtempSync(join(tmpdir(), "hal0-rec-locked-state-"));
    mkdirSync(join(box, "slots"));
    writeFileSync(join(box, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\n`);
    writeFileSync(join(box, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(box, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"))}\n`);
    writeFileSync(join(box, "slots/s.toml"), `profile = "fake"\nmodel = "tiny"\nport = ${await freePort()}\n`);
    const holder = spawn("sleep", ["60"], { stdio: "ignore" });
    try {
      writeFileSync(join(held, "apply.lock"), `${JSON.stringify({ pid: holder.pid, host: hostname(), started_at: "2026-12-05T00:00:00.000Z", command: "hal0 apply" })}\n`);
      const json = captureIo();
      expect(await main(["reconcile", "--once", "--json", "--config", box, "--state", held], json)).toBe(1);
      const report = JSON.parse(json.out());
      expect(report.outcome).toBe("locked");
      expect(report.locked).toMatchObject({ code: "apply.locked", holder: { pid: holder.pid, command: "hal0 apply" } });
      expect(report.results).toEqual([]);
      const text = captureIo();
      expect(await main(["reconcile", "--once", "--config", box, "--state", held], text)).toBe(1);
      expect(text.out()).toContain(`sweep: locked: apply.locked: another apply holds the lock: pid ${holder.pid} on ${hostname()}, \`hal0 apply\`, since 2026-12-05T00:00:00.000Z\n`);
    } finally {
      holder.kill();
    }
  });

  it("is an error (exit 1, config.not_found), not a usage error, on a missing config folder", async () => {
    const io = captureIo();
    expect(await main(["reconcile", "--once", "--config", "/nonexistent/hal0", "--state", state], io)).toBe(1);
    expect(io.err()).toBe("hal0 reconcile: config.not_found: config folder not found: /nonexistent/hal0\n");
  });

  it("the loop (no --once) says so at once and exits 1 on a missing config folder, or one that is a file; before, it swept and failed for ever", async () => {
    const file = join(state, "..", "a-file");
    writeFileSync(file, "not a folder\n");
    for (const config of ["/nonexistent/hal0", file]) {
      const io = captureIo();
      const code = await Promise.race([main(["reconcile", "--config", config, "--state", state], io), new Promise<string>((r) => setTimeout(() => r("still running"), 3000))]);
      expect(code).toBe(1);
      const why = config === file ? " is a file; the config is the folder that holds hal0.toml and the other files" : "";
      expect(io.err()).toBe(`hal0 reconcile: config.not_found: config folder not found: ${config}${why}\n`);
    }
  });
});
