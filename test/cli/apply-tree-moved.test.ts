import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { until } from "../helpers/until.js";
import { freePort, RUNNER } from "../reconciler/process-helpers.js";
import { captureIo } from "./helpers.js";

const HAL0 = join(import.meta.dirname, "../../bin/hal0.js");
const MODEL = join(import.meta.dirname, "../../fixtures/box/models/Qwen3-4B-Q4_K_M.gguf");

/**
 * `hal0 apply` reads the tree, then asks the runners what they are (a first
 * `--version` of a new llama-server build can take seconds) and waits for the
 * lock before it plans. A file that moves meanwhile (hal0 serve committing an
 * edit, a person's save) must not have it converge the box to the text it
 * read before. The seam: a runner whose `--version` waits until the test says go.
 */
describe("hal0 apply when the tree moves while it starts", () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-apply-moved-"));
  const config = join(base, "box");
  const state = join(base, "state");

  afterAll(async () => {
    await main(["down", "--config", config, "--state", state], captureIo());
  });

  it("is refused, plan.stale naming the file, and starts nothing; run again, it applies the files as they are", async () => {
    mkdirSync(join(config, "slots"), { recursive: true });
    const runner = join(base, "paused-runner");
    writeFileSync(runner, `#!/bin/sh\nif [ "$1" = "--version" ]; then\n  touch ${JSON.stringify(join(base, "probing"))}\n  while [ ! -e ${JSON.stringify(join(base, "go"))} ]; do sleep 0.05; done\nfi\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(RUNNER)} "$@"\n`);
    chmodSync(runner, 0o755);
    const port = await freePort();
    writeFileSync(join(config, "hal0.toml"), `[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n`);
    writeFileSync(join(config, "profiles.toml"), `[profile.fake]\nrunner = [${JSON.stringify(runner)}]\ndevice_class = "cpu"\n`);
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(MODEL)}\n`);
    const slot = (ctx: number) => `profile = "fake"\nmodel = "tiny"\nport = ${port}\n[tune]\nctx_size = ${ctx}\n[server]\nenv = { HAL0_FAKE_LOAD_MS = "50" }\n`;
    writeFileSync(join(config, "slots/a.toml"), slot(2048));

    const child = spawn(process.execPath, [HAL0, "apply", "--yes", "--config", config, "--state", state], { stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    // The apply has read the tree and is asking the runner what it is: the edit lands now.
    await until(async () => existsSync(join(base, "probing")), (there) => there, 20_000);
    writeFileSync(join(config, "slots/a.toml"), slot(8192));
    writeFileSync(join(base, "go"), "");
    expect(await exited, err).toBe(1);
    expect(err).toMatch(/plan\.stale: the config changed while hal0 apply was reading it: slots\/a\.toml; nothing was applied/);
    expect(existsSync(join(state, "slots/a/runtime.json"))).toBe(false);

    // Run again (the runner's facts are cached now): it plans from the file as it is.
    const io = captureIo();
    expect(await main(["apply", "--yes", "--config", config, "--state", state], io), io.err()).toBe(0);
    const record = JSON.parse(readFileSync(join(state, "slots/a/runtime.json"), "utf8"));
    expect(JSON.stringify(record)).toContain("8192");
  }, 60_000);
});
