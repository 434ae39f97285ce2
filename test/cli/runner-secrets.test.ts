import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { freePort, PROJECT, RUNNER } from "../reconciler/process-helpers.js";
import { captureIo } from "./helpers.js";

/**
 * A whole `hal0 apply`: a slot's `--api-key` leaves the command line every
 * local user reads only for a runner the probe found to be llama-server (it
 * reads LLAMA_API_KEY); any other runner keeps the flag, so it never runs
 * with no key.
 */
describe("a runner's --api-key, by what the runner is", () => {
  const base = mkdtempSync(join(tmpdir(), "hal0-runner-secrets-"));
  const config = join(base, "box");
  const state = join(base, "state");
  afterAll(async () => {
    await main(["down", "--config", config, "--state", state], captureIo());
    rmSync(base, { recursive: true, force: true });
  });

  it("a probed llama-server gets the key in LLAMA_API_KEY, out of its command line; a runner not known to be one (a node wrapper) keeps --api-key in its argv", async () => {
    mkdirSync(join(config, "slots"), { recursive: true });
    copyFileSync(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"), join(config, "tiny.gguf"));
    writeFileSync(join(config, "hal0.toml"), "[slots]\nport_range_start = 1024\nport_range_end = 65535\nhealth_timeout_s = 30\nstop_grace_s = 2\n");
    writeFileSync(join(config, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\n`);
    // The stand-in as one runner word (probed: its --help is llama-server's), and the same script behind `node` (the probe asks node).
    writeFileSync(join(config, "profiles.toml"), [
      `[profile.llama]\nrunner = [${JSON.stringify(join(PROJECT, "bin/hal0-fake-llama-server"))}]\ndevice_class = "cpu"\n`,
      `[profile.wrapped]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`,
    ].join("\n"));
    const ports = { llama: await freePort(), wrapped: 0 };
    do ports.wrapped = await freePort(); while (ports.wrapped === ports.llama);
    for (const [name, port] of Object.entries(ports)) {
      writeFileSync(join(config, "slots", `${name}.toml`), `profile = "${name}"\nmodel = "tiny"\nport = ${port}\n[server]\nextra_args = "--api-key ${name}-key"\nenv = { HAL0_FAKE_LOAD_MS = "0" }\n`);
    }
    const io = captureIo();
    expect(await main(["apply", "--yes", "--config", config, "--state", state], io), io.err()).toBe(0);
    const proc = (name: string) => {
      const pid = (JSON.parse(readFileSync(join(state, "slots", name, "runtime.json"), "utf8")) as { pid: number }).pid;
      return { argv: readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0"), env: readFileSync(`/proc/${pid}/environ`, "utf8").split("\0") };
    };
    const llama = proc("llama");
    expect(llama.argv.join(" ")).not.toContain("llama-key");
    expect(llama.env).toContain("LLAMA_API_KEY=llama-key");
    const wrapped = proc("wrapped");
    expect(wrapped.argv).toEqual(expect.arrayContaining(["--api-key", "wrapped-key"]));
    expect(wrapped.env.some((v) => v.startsWith("LLAMA_API_KEY="))).toBe(false);
    // Both want their key.
    const props = (port: number, key?: string) => fetch(`http://127.0.0.1:${port}/props`, key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);
    expect([await props(ports.llama), await props(ports.llama, "llama-key"), await props(ports.wrapped), await props(ports.wrapped, "wrapped-key")]).toEqual([401, 200, 401, 200]);
    // Nothing re-plans.
    const plan = captureIo();
    expect(await main(["plan", "--detailed-exitcode", "--config", config, "--state", state], plan), plan.out()).toBe(0);
  });
});
