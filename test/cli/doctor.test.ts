import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { captureIo } from "./helpers.js";

/** `hal0 doctor`'s runtime and tree rows: a docker engine is asked GET /_ping and /version over its socket. */
let dir: string;
let engine: Server;
const socket = () => join(dir, "engine.sock");

async function doctor(env: Record<string, string>, hal0toml: string) {
  const config = join(dir, `etc-${Math.random().toString(36).slice(2)}`);
  mkdirSync(config);
  writeFileSync(join(config, "hal0.toml"), hal0toml);
  const io = captureIo(env, dir);
  const code = await main(["doctor", "--json", "--config", config, "--state", join(dir, "state")], io);
  const rows = (JSON.parse(io.out()).rows as Array<{ check: string; status: string; message: string }>);
  return { code, row: (check: string) => rows.find((r) => r.check === check)! };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hal0-doctor-"));
  engine = createServer((req, res) => {
    if (req.url === "/_ping") res.end("OK");
    else if (req.url === "/version") res.end(JSON.stringify({ Version: "27.5.1" }));
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => engine.listen(socket(), resolve));
});

afterAll(async () => {
  await new Promise((resolve) => engine.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe("hal0 doctor", () => {
  it("runtime docker: ok with the engine's version when the socket answers /_ping", async () => {
    const { code, row } = await doctor({ DOCKER_HOST: `unix://${socket()}` }, '[slots]\nruntime = "docker"\n');
    expect(code).toBe(0);
    expect(row("runtime")).toMatchObject({ status: "ok", message: expect.stringContaining("docker engine 27.5.1") });
  });

  it("runtime docker: fail (exit 1) when nothing answers; [slots] docker_host wins over DOCKER_HOST", async () => {
    const { code, row } = await doctor({ DOCKER_HOST: `unix://${socket()}` }, `[slots]\nruntime = "docker"\ndocker_host = "unix://${join(dir, "nobody.sock")}"\n`);
    expect(code).toBe(1);
    expect(row("runtime")).toMatchObject({ status: "fail", message: expect.stringContaining("nobody.sock") });
  });

  it("tree: fail (exit 1) when the tree does not compile; the Hermes rows are not checked", async () => {
    const { code, row } = await doctor({}, "[slots]\nruntime = 3\n");
    expect(code).toBe(1);
    expect(row("tree").status).toBe("fail");
    expect(row("hermes_profiles_mcp")).toMatchObject({ status: "warn", message: expect.stringContaining("does not compile") });
  });
});
