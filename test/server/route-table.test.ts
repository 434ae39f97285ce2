import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { AUTONOMOUS_READ_TOOLS, AUTONOMOUS_WRITE_TOOLS, GATED_TOOLS } from "../../schema/data/seed-tiers.js";
import { HAL0_GATED_TOOLS, HAL0_READ_TOOLS, HAL0_WRITE_TOOLS } from "../../schema/data/hal0-tools.js";
import { routeId } from "../../server/route.js";
import { ROUTES } from "../../server/routes/index.js";

const SEED = [...AUTONOMOUS_READ_TOOLS, ...AUTONOMOUS_WRITE_TOOLS, ...GATED_TOOLS, ...HAL0_READ_TOOLS, ...HAL0_WRITE_TOOLS, ...HAL0_GATED_TOOLS];
const seedRoute = new Map(SEED.map((t) => [t.tool, t.route]));

describe("the route table", () => {
  it("has one route per method and path, each with a summary", () => {
    const ids = ROUTES.map(routeId);
    expect(ids.length).toBe(new Set(ids).size);
    for (const r of ROUTES) expect(r.summary.length, routeId(r)).toBeGreaterThan(5);
  });

  it("aliases each tool once, to exactly the route seed 001 names for it", () => {
    const seen = new Map<string, string>();
    for (const r of ROUTES) {
      for (const tool of r.tools ?? []) {
        expect(seedRoute.get(tool), `${tool} is not a seed 001 tool`).toBeDefined();
        // An in-process host probe is named "in-process" by the seed (it has no REST route).
        expect(`${tool} → ${r.inProcess ? "in-process" : routeId(r)}`).toBe(`${tool} → ${seedRoute.get(tool)}`);
        expect(seen.has(tool), `${tool} aliased twice`).toBe(false);
        seen.set(tool, routeId(r));
      }
    }
  });

  it("declares path params the path has, and only those", () => {
    for (const r of ROUTES) {
      const names = [...r.path.matchAll(/\{([a-z_]+)(?::path)?\}/g)].map((m) => m[1]).sort();
      const declared = r.params && "shape" in r.params ? Object.keys((r.params as unknown as { shape: object }).shape).sort() : [];
      expect(declared, routeId(r)).toEqual(names);
    }
  });

  it("lists the seed tools that have no route yet (a reviewed list: routing one removes it here)", () => {
    const routed = new Set(ROUTES.flatMap((r) => r.tools ?? []));
    // Every seed tool but hal0-memory's (served by its own engine): REST routes and the in-process host probes.
    const missing = SEED.filter((t) => !routed.has(t.tool) && t.route !== "memory")
      .map((t) => `${t.tool} ${t.route}`).sort();
    expect(missing).toMatchSnapshot();
  });

  it("names each seed tool without a route in docs/mcp.md, so an agent's author knows hal0 does not serve it", () => {
    const routed = new Set(ROUTES.flatMap((r) => r.tools ?? []));
    const doc = readFileSync(new URL("../../docs/mcp.md", import.meta.url), "utf8");
    const unnamed = SEED.filter((t) => !routed.has(t.tool) && t.route !== "memory" && !doc.includes(`\`${t.tool}\``)).map((t) => t.tool);
    expect(unnamed).toEqual([]);
  });
});
