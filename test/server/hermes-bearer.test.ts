import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { ProcessDriver } from "../../reconciler/index.js";
import { serve, serveLogger } from "../../server/serve.js";
import { httpCall } from "./harness.js";
import { callMemory, memoryClient } from "./mcp-helpers.js";

/**
 * `hal0 serve`'s own sweep hands each Hermes profile its agent token: the
 * bearer it writes is what hal0-memory then authenticates the profile by,
 * and a rotation reaches the file on the next sweep (the old token is
 * refused from then on).
 */
const base = mkdtempSync(join(tmpdir(), "hal0-hermes-bearer-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));

const bearerIn = (file: string): string | undefined => {
  const servers = (parse(readFileSync(file, "utf8")) as { mcp_servers?: Record<string, { headers?: Record<string, string> }> }).mcp_servers ?? {};
  return /^Bearer (\S+)$/.exec(servers["hal0-memory"]?.headers?.Authorization ?? "")?.[1];
};

async function until<T>(what: () => T | undefined, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = what();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error("timed out");
    await sleep(50);
  }
}

describe("hal0 serve wires Hermes profiles with their agent token", () => {
  it("the sweep writes coder's bearer; hal0-memory knows coder by it; after a rotation the sweep writes the new one and the old one is refused", async () => {
    const config = join(base, "etc");
    const state = join(base, "state");
    const home = join(base, "hermes");
    mkdirSync(config, { recursive: true });
    mkdirSync(join(home, "profiles", "coder"), { recursive: true });
    const file = join(home, "profiles", "coder", "config.yaml");
    writeFileSync(file, "# coder\nmodel:\n  default: qwen3\n");
    writeFileSync(join(config, "hal0.toml"), `[reconcile]\ninterval_s = 3600\n\n[hermes]\nhome = "${home}"\n`);
    const serving = await serve({ root: config, stateDir: state, port: 0, driverFor: async () => new ProcessDriver({ stateDir: state }), logger: serveLogger("silent"), env: {} });
    try {
      const token = await until(() => bearerIn(file));
      expect(serving.server.tokens.verify(token)).toMatchObject({ kind: "agent", name: "hermes__coder" });
      expect(readFileSync(file, "utf8")).not.toContain("X-hal0-Agent");
      const operator = { authorization: `Bearer ${readFileSync(join(state, "operator.token"), "utf8").trim()}` };

      // Hermes sends the headers of its config: the bearer alone says who it is.
      const mem = await memoryClient(serving.url, { token });
      expect((await callMemory(mem, "memory_add", { text: "wired by the sweep" })).isError).toBe(false);
      await mem.close();
      expect((await httpCall(serving.url, "GET", "/api/mcp/hal0-memory/logs?limit=1", { headers: operator })).body.events[0]).toMatchObject({ tool: "memory_add", actor: "agent:hermes__coder" });

      // The server's doctor (the server's own token store) sees coder wired, and shows no token.
      const doctor = await httpCall(serving.url, "GET", "/api/doctor", { headers: operator });
      expect(doctor.status).toBe(200);
      expect(doctor.body.rows.find((r: { check: string }) => r.check === "hermes_profiles_mcp")).toMatchObject({ status: "ok", message: "1/1 wired" });
      expect(JSON.stringify(doctor.body)).not.toContain(token);

      const rotated = serving.server.tokens.rotate("hermes__coder");
      serving.server.box.nudge();
      expect(await until(() => (bearerIn(file) === rotated.token ? true : undefined))).toBe(true);
      const refused = await httpCall(serving.url, "POST", "/mcp/memory", {
        headers: { authorization: `Bearer ${token}`, accept: "application/json, text/event-stream" },
        body: { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "t", version: "1" } } },
      });
      expect(refused.status).toBe(401);
      const again = await memoryClient(serving.url, { token: rotated.token });
      expect((await callMemory(again, "memory_add", { text: "after the rotation" })).isError).toBe(false);
      await again.close();
    } finally {
      await serving.close();
    }
  }, 60_000);
});
