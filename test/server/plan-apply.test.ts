import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ChangeSet } from "../../compiler/changeset.js";
import { proposeOnly } from "../../server/dispatch.js";
import { routeId } from "../../server/route.js";
import { ROUTES } from "../../server/routes/index.js";
import { startTestServer, type TestServer } from "./harness.js";

/**
 * One write path (issue 15, point 3): a write route's change made through
 * the route, and the same change set saved as a plan and applied by id,
 * give the same tree, the same stable slot ids and the same refusals — the
 * rules and after-effects live in the pipeline, not in the route.
 */
let servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function start(now?: () => number): Promise<TestServer> {
  const s = await startTestServer(now ? { extra: { now } } : {});
  servers.push(s);
  return s;
}

/** Every file of the config folder, by relative path. */
function tree(s: TestServer): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (p.endsWith(".toml")) out[relative(s.config, p)] = readFileSync(p, "utf8");
    }
  };
  walk(s.config);
  return out;
}

async function ids(s: TestServer): Promise<Record<string, string>> {
  const { slots } = (await s.call("GET", "/api/slots")).body as { slots: Array<{ name: string; id: string }> };
  return Object.fromEntries(slots.map((x) => [x.name, x.id]));
}

interface Case {
  readonly route: string;
  readonly params?: Record<string, string>;
  readonly query?: Record<string, string>;
  readonly body?: unknown;
  /** The refusal expected both ways, when the change may not be made. */
  readonly refused?: string;
}

const CASES: readonly Case[] = [
  { route: "POST /api/slots", body: { name: "scratch", profile: "cpu-small", model: "qwen3-4b", port: 8150, enabled: false } },
  { route: "PUT /api/slots/{name}/config", params: { name: "utility" }, body: { tune: { ctx_size: 4096 }, priority: 70 } },
  { route: "POST /api/slots/{name}/unload", params: { name: "utility" } },
  { route: "POST /api/slots/{name}/unload", params: { name: "chat" }, refused: "slot.pinned" },
  { route: "POST /api/slots/{name}/unload", params: { name: "chat" }, query: { force: "true" } },
  { route: "POST /api/slots/{name}/swap", params: { name: "utility" }, body: { model: "gemma-3-12b-it" } },
  { route: "POST /api/slots/{name}/rename", params: { name: "utility" }, body: { to: "helper" } },
  { route: "DELETE /api/slots/{name}", params: { name: "utility" } },
  { route: "DELETE /api/slots/{name}", params: { name: "chat" }, refused: "slot.pinned" },
  { route: "PUT /api/models/{model_id}", params: { model_id: "qwen3-4b" }, body: { name: "Qwen3 4B (small)" } },
  { route: "PUT /api/settings", body: { slots: { max_slots: 10 } } },
  { route: "POST /api/stacks", body: { slug: "lean", name: "Lean", mode: "replace", slot: [{ slot: "utility", tune: { reasoning_effort: "high" } }] } },
  { route: "POST /api/stacks/{slug}/apply", params: { slug: "forge" } },
  { route: "POST /api/backends/npu/load", body: { slot: "npu-qwen" } },
  { route: "POST /api/backends/npu/unload" },
];

describe("a write route's change, applied through the route and as a plan by id", () => {
  for (const c of CASES) {
    it(`${c.route} ${JSON.stringify(c.params ?? {})}${c.query ? ` ?${new URLSearchParams(c.query)}` : ""}${c.refused ? ` (refused: ${c.refused})` : ""}`, async () => {
      const route = ROUTES.find((r) => routeId(r) === c.route)!;
      expect(route, c.route).toBeDefined();
      expect(route.kind).toBe("write");
      const path = route.path.replace(/\{([a-z_]+)\}/g, (_, p: string) => c.params![p]!) + (c.query ? `?${new URLSearchParams(c.query)}` : "");

      // Through the route.
      const a = await start();
      const idsA = await ids(a);
      const viaRoute = await a.call(route.method, path, { body: c.body });

      // The same change set, as a plan applied by id.
      const b = await start();
      const idsB = await ids(b);
      let viaPlan: { status: number; body: any };
      try {
        const { intent } = await proposeOnly(b.hal0, route, { params: c.params ?? {}, query: c.query ?? {}, body: c.body, caller: { kind: "operator", agent: "owner", private: false, via: "rest" }, requestId: "t" });
        const planned = await b.call("POST", "/api/plans", { body: intent.changes });
        viaPlan = planned.status === 201 && planned.body.valid ? await b.call("POST", `/api/plans/${planned.body.id}/apply`) : planned;
      } catch (err) {
        viaPlan = { status: 0, body: { error: { code: (err as { code?: string }).code } } };
      }

      if (c.refused) {
        expect(viaRoute.body.error?.code, JSON.stringify(viaRoute.body)).toBe(c.refused);
        expect(viaPlan.body.error?.code, JSON.stringify(viaPlan.body)).toBe(c.refused);
        expect(tree(a)).toEqual(tree(b));
        return;
      }
      expect(viaRoute.status, JSON.stringify(viaRoute.body)).toBeLessThan(300);
      expect(viaPlan.status, JSON.stringify(viaPlan.body)).toBe(200);
      expect(viaPlan.body.applied).toBe(true);
      expect(tree(b)).toEqual(tree(a));
      // Stable ids: the same slots keep theirs both ways; a rename keeps the id under the new name; a delete drops it.
      const afterA = await ids(a);
      const afterB = await ids(b);
      const moved = (before: Record<string, string>, after: Record<string, string>) => Object.fromEntries(Object.entries(after).map(([name, id]) => [name, Object.entries(before).find(([, x]) => x === id)?.[0] ?? "new"]));
      expect(moved(idsB, afterB)).toEqual(moved(idsA, afterA));
      if (c.route.endsWith("/rename")) expect(afterB.helper).toBe(idsB.utility);
    });
  }

  it("the audit row of a plan applied by id is a write like the route's, with its plan id", async () => {
    const s = await start();
    const planned = await s.call("POST", "/api/plans", { body: { edits: [{ file: "slots/utility.toml", op: "set", path: ["priority"], value: 65 }] } });
    await s.call("POST", `/api/plans/${planned.body.id}/apply`);
    const row = (await s.call("GET", "/api/activity?route=POST%20/api/plans/%7Bid%7D/apply")).body.items[0];
    expect(row).toMatchObject({ outcome: "ok", target: planned.body.id, plan_id: expect.stringMatching(/^sha256:/) });
    // Applying it again is refused: it was applied.
    expect((await s.call("POST", `/api/plans/${planned.body.id}/apply`)).body.error.code).toBe("plan.stale");
  });
});

describe("the stack pointer is the commit's, not the route's", () => {
  const OWNER = { kind: "operator", agent: "owner", private: false, via: "rest" } as const;
  const applyRoute = ROUTES.find((r) => routeId(r) === "POST /api/stacks/{slug}/apply")!;
  const pointerText = (s: TestServer): string => readFileSync(join(s.state, "stacks-state.json"), "utf8");
  /** The stack apply route's change set, proposed and not committed. */
  const stackChanges = async (s: TestServer, slug: string): Promise<ChangeSet> =>
    (await proposeOnly(s.hal0, applyRoute, { params: { slug }, query: {}, body: undefined, caller: OWNER, requestId: "t" })).intent.changes;
  /** `changes` saved as a plan, then applied by id. */
  async function viaPlan(s: TestServer, changes: ChangeSet): Promise<{ id: string; applied: any }> {
    const planned = await s.call("POST", "/api/plans", { body: changes });
    expect(planned.status, JSON.stringify(planned.body)).toBe(201);
    expect(planned.body.valid).toBe(true);
    const applied = await s.call("POST", `/api/plans/${planned.body.id}/apply`);
    expect(applied.status, JSON.stringify(applied.body)).toBe(200);
    expect(applied.body.applied).toBe(true);
    return { id: planned.body.id, applied: applied.body };
  }

  it("a stack apply saved as a plan and applied by id writes the pointer the route writes", async () => {
    const at = Date.parse("2025-06-01T12:00:00.000Z");
    const a = await start(() => at);
    const b = await start(() => at);

    const viaRoute = await a.call("POST", "/api/stacks/forge/apply");
    expect(viaRoute.status, JSON.stringify(viaRoute.body)).toBe(200);
    expect(viaRoute.body.pointer).toMatchObject({ active_slug: "forge", applied_at: "2025-06-01T12:00:00.000Z" });

    const changes = await stackChanges(b, "forge");
    const { id } = await viaPlan(b, changes);
    // The mark is saved with the plan and read back with it.
    expect((await b.call("GET", `/api/plans/${id}`)).body.changes.stack).toEqual({ slug: "forge" });

    expect(tree(b)).toEqual(tree(a));
    expect(pointerText(b)).toBe(pointerText(a));
    expect(JSON.parse(pointerText(b))).toEqual(viaRoute.body.pointer);
    expect((await b.call("GET", "/api/stacks")).body).toMatchObject({ active: "forge", drift: "clean" });
  });

  it("only a stack apply the committed tree holds moves it: slot edits (even ones that leave the tree holding another stack) do not", async () => {
    let clock = Date.parse("2025-06-01T12:00:00.000Z");
    const s = await start(() => clock);
    await viaPlan(s, await stackChanges(s, "forge"));
    const forge = pointerText(s);
    expect(JSON.parse(forge)).toMatchObject({ active_slug: "forge", applied_at: "2025-06-01T12:00:00.000Z" });

    // An unrelated slot edit through its route.
    clock += 60_000;
    const edited = await s.call("PUT", "/api/slots/coder/config", { body: { priority: 75 } });
    expect(edited.status, JSON.stringify(edited.body)).toBe(200);
    expect(edited.body.committed).toBe(true);
    expect(pointerText(s)).toBe(forge);

    // Voice's slot edits made by hand as a plan (no stack mark): the tree now holds voice, but no stack was applied.
    clock += 60_000;
    const { stack: _mark, ...voiceByHand } = await stackChanges(s, "voice");
    expect(_mark).toEqual({ slug: "voice" });
    expect((await viaPlan(s, voiceByHand)).applied.files.length).toBeGreaterThan(0);
    expect(pointerText(s)).toBe(forge);
    expect((await s.call("GET", "/api/stacks")).body).toMatchObject({ active: "forge", drift: "modified" });

    // A mark the committed tree does not hold (forge's replace no longer holds) moves nothing either.
    clock += 60_000;
    await viaPlan(s, { edits: [{ file: "slots/utility.toml", op: "set", path: ["priority"], value: 65 }], stack: { slug: "forge" } });
    expect(pointerText(s)).toBe(forge);

    // Applying voice through its route does: the pointer names it, with this commit's time.
    clock += 60_000;
    const voice = await s.call("POST", "/api/stacks/voice/apply");
    expect(voice.body.files).toEqual([]);
    expect(voice.body.pointer).toMatchObject({ active_slug: "voice", applied_at: "2025-06-01T12:04:00.000Z" });
    expect(JSON.parse(pointerText(s))).toEqual(voice.body.pointer);
  });
});
