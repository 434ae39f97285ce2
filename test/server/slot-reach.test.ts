import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { reachBase, slotReach } from "../../server/slot-reach.js";
import { freePort, until } from "../reconciler/process-helpers.js";

/** The key hal0 sends a slot's runner (its /props, /slots, /metrics reads), against the stand-in runner, which reads keys as llama-server does. */

const RUNNER = join(import.meta.dirname, "../../fixtures/runner/fake-llama-server.mjs");
const children: ChildProcess[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null) {
      child.kill("SIGKILL");
      await once(child, "exit");
    }
  }
});

async function runner(args: string[], env: Record<string, string>): Promise<number> {
  const port = await freePort();
  const child = spawn(process.execPath, [RUNNER, "--port", String(port), ...args], { env: { ...process.env, HAL0_FAKE_LOAD_MS: "0", ...env }, stdio: "ignore" });
  children.push(child);
  await until(async () => (await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.status, () => 0)) === 200);
  return port;
}

const propsStatus = async (spec: Parameters<typeof slotReach>[0]) => {
  const reach = slotReach(spec);
  return (await fetch(`${reachBase(reach)}/props`, { headers: { ...reach.headers } })).status;
};

describe("slotReach's key", () => {
  it("is the key of a LLAMA_API_KEY the slot's env declares (the runner reads it as it reads --api-key): hal0's reads of the runner are let in", async () => {
    const env = { LLAMA_API_KEY: "env-key-one" };
    const port = await runner([], env);
    expect(await propsStatus({ host: "127.0.0.1", port, argv: ["llama-server", "--port", String(port)], env })).toBe(200);
  });

  it("is the first key the runner reads of a list, as llama-server reads it: an empty field is no key, a quoted field keeps its comma", async () => {
    for (const value of [",list-key,second", '"quoted,key",second']) {
      const port = await runner(["--api-key", value], {});
      expect(await propsStatus({ host: "127.0.0.1", port, argv: ["llama-server", "--port", String(port), "--api-key", value] }), value).toBe(200);
    }
  });
});
