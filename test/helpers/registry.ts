import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, it } from "vitest";

/**
 * A private image registry for tests: Debian's `docker-registry` (the
 * distribution project's registry 2.x), started on a free loopback port
 * with its storage in a temp folder and stopped by its pid. The engine pulls
 * from 127.0.0.0/8 over plain HTTP without any configuration (dockerd trusts
 * loopback registries). `.ci/run` installs the package.
 */

export const REGISTRY_BIN = process.env.HAL0_DOCKER_REGISTRY || "/usr/bin/docker-registry";

/**
 * Whether the registry binary is there. Call at a suite file's top level:
 * without it, a failing test under CI (a required service is missing),
 * else a notice; gate the suite with `describe.skipIf(!registry)`.
 */
export function registryAvailable(suite: string): boolean {
  try {
    accessSync(REGISTRY_BIN, constants.X_OK);
    return true;
  } catch {
    // absent
  }
  if (process.env.CI) {
    describe(suite, () => {
      it("needs Debian's docker-registry: a required service is missing", () => {
        throw new Error(`no image registry at ${REGISTRY_BIN}; .ci/run installs Debian's docker-registry package`);
      });
    });
  } else {
    console.warn(`[hal0 tests] SKIPPED ${suite}: no image registry at ${REGISTRY_BIN}. Install it with \`apt-get install docker-registry\` (or set HAL0_DOCKER_REGISTRY), then rerun.`);
  }
  return false;
}

export interface TestRegistry {
  /** `127.0.0.1:<port>`: the prefix of the images it serves. */
  readonly host: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Starts a registry and waits until `GET /v2/` answers 200 (a port taken meanwhile: another one is tried). */
export async function startRegistry(): Promise<TestRegistry> {
  const dir = mkdtempSync(join(tmpdir(), "hal0-registry-"));
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const config = join(dir, "config.yml");
    writeFileSync(config, [
      "version: 0.1",
      "log:", "  level: error", "  accesslog:", "    disabled: true",
      "storage:", "  filesystem:", `    rootdirectory: ${join(dir, "data")}`, "  delete:", "    enabled: true",
      "http:", `  addr: 127.0.0.1:${port}`, "  secret: hal0-test-registry",
      "",
    ].join("\n"));
    const child: ChildProcess = spawn(REGISTRY_BIN, ["serve", config], { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    child.stderr!.on("data", (c: Buffer) => (log = (log + c.toString("utf8")).slice(-4000)));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await Promise.race([exited, sleep(5000).then(() => child.kill("SIGKILL"))]);
    };
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && child.exitCode === null) {
      const ok = await fetch(`http://127.0.0.1:${port}/v2/`).then((r) => r.status === 200, () => false);
      if (ok) {
        return { host: `127.0.0.1:${port}`, stop: async () => { await stop(); rmSync(dir, { recursive: true, force: true }); } };
      }
      await sleep(100);
    }
    await stop();
    if (!/address already in use/.test(log)) throw new Error(`docker-registry did not answer on 127.0.0.1:${port}: ${log.trim() || "(no output)"}`);
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error("docker-registry could not bind a free loopback port in 3 attempts");
}
