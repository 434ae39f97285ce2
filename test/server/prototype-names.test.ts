import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routeId } from "../../server/route.js";
import { ROUTES } from "../../server/routes/index.js";
import { startTestServer, type TestServer } from "./harness.js";
import { adminClient, callTool } from "./mcp-helpers.js";

/**
 * Names that are also properties of every JavaScript object (`constructor`,
 * `toString`, `__proto__`, …) name nothing in a box: a lookup by such a name
 * answers exactly as for any other name that is not there. Each route with a
 * path parameter is called with each of them and with a twin of the same
 * grammar that names nothing (`constructor` is a valid name; `toString` is
 * not, nor is `toStrinq`), as the operator, and the two replies must agree:
 * status and error code. Nothing may be written by either.
 */
const TWINS: ReadonlyArray<[string, string]> = [
  ["constructor", "constructer"],
  ["hasownproperty", "hasownpropertz"],
  ["toString", "toStrinq"],
  ["valueOf", "valueOq"],
  ["__proto__", "__proxo__"],
  ["isPrototypeOf", "isPrototypeOq"],
];

/** A body that gets past each kind of route's body check, so the lookup itself is reached. */
const BODIES: Record<string, unknown> = {
  "PUT /api/profiles/{name}": { flags: "-fa on" },
  "PUT /api/models/{id}": { mtp: true },
  "POST /api/models/{id}/default": { default: true },
  "PATCH /api/mcp/{id}/exposure": { hermes: true },
  "PATCH /api/mcp/{id}/config": { env: { A: "1" } },
  "PATCH /api/mcp/{id}/tools": { disabled: [] },
  "PATCH /api/upstreams/{name}": { timeout_seconds: 30 },
  "PUT /api/slots/{name}/config": { tune: { ctx_size: 4096 } },
};

const fill = (path: string, name: string) => path.replace(/\{[a-z_]+(?::path)?\}/g, encodeURIComponent(name));

/** The box's files, by path: what a reply must leave as it was. */
function files(dir: string, rel = ""): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) for (const [k, v] of files(dir, p)) out.set(k, v);
    else if (p.endsWith(".toml")) out.set(p, readFileSync(join(dir, p), "utf8"));
  }
  return out;
}

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

describe("names that are properties of every object", () => {
  const routes = ROUTES.filter((r) => /\{/.test(r.path) && !r.inProcess && r.kind !== "stream");

  it("get the reply any other missing name gets, on every route with a path parameter, and write nothing", async () => {
    expect(routes.length).toBeGreaterThan(40);
    const before = files(s.config);
    const differ: string[] = [];
    for (const r of routes) {
      const body = BODIES[routeId(r)] ?? (r.method === "GET" || r.method === "DELETE" ? undefined : {});
      for (const [name, twin] of TWINS) {
        const query = r.method === "POST" && r.path.endsWith("/apply") ? "?dry_run=true" : "";
        const a = await s.call(r.method, fill(r.path, name) + query, { body });
        const b = await s.call(r.method, fill(r.path, twin) + query, { body });
        const said = (x: { status: number; body: any }) => `${x.status} ${x.body?.error?.code ?? "-"}`;
        if (said(a) !== said(b) || a.status >= 500) differ.push(`${routeId(r)} ${name}: ${said(a)} (${twin}: ${said(b)})`);
      }
    }
    expect(differ).toEqual([]);
    expect(files(s.config)).toEqual(before);
  });

  it("are no tool over MCP, and no model, stack or server a tool can find", async () => {
    const c = await adminClient(s.url, "hermes__ops");
    try {
      for (const name of ["constructor", "toString", "__proto__"]) {
        const res = await callTool(c, name, {});
        expect(res.body.error.code, name).toBe("mcp.unknown_tool");
      }
      for (const [tool, key] of [["model_show", "model_id"], ["stack_status", "slug"], ["profile_show", "name"]] as const) {
        for (const [name, twin] of TWINS.slice(0, 2)) {
          const a = await callTool(c, tool, { [key]: name });
          const b = await callTool(c, tool, { [key]: twin });
          expect(`${tool} ${name}: ${a.body.error?.code}`).toBe(`${tool} ${name}: ${b.body.error?.code}`);
          expect(a.body.error?.code, `${tool} ${name}`).not.toBe("system.internal");
        }
      }
    } finally {
      await c.close();
    }
  });
});
