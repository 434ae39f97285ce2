import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import fs from "node:fs";
import fsp from "node:fs/promises";
import { afterEach, describe, expect, it, vi } from "vitest";
import { compile, sourceTree, type Model } from "../../compiler/index.js";
import { formatPlan, planJson } from "../../reconciler/format.js";
import type { HermesView, Inventory, Observed } from "../../reconciler/observed.js";
import { planChanges, planSlotChange } from "../../reconciler/plan.js";
import { Plan, type Change } from "../../schema/index.js";
import { buildWorld, ROOT } from "../../fixtures/plans/build.js";
import { CASES, fixtureToken } from "../../fixtures/plans/cases.js";

/**
 * The golden plans: every folder of fixtures/plans/ holds a desired `tree/`,
 * the observed snapshot and inventory it is planned against, and the plan's
 * canonical text (verbose) and JSON. Trees compile at a fixed root.
 */
const FIXTURES = join(import.meta.dirname, "../../fixtures/plans");
const FOLDERS = readdirSync(FIXTURES, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();

function readTree(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (at: string): void => {
    for (const name of readdirSync(at).sort()) {
      const path = join(at, name);
      if (statSync(path).isDirectory()) walk(path);
      else files.set(relative(dir, path).split("\\").join("/"), readFileSync(path, "utf8"));
    }
  };
  walk(dir);
  return files;
}

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, "utf8")) as T;
}

interface Loaded {
  readonly model: Model;
  readonly observed: Observed;
  readonly inventory: Inventory;
}

function load(name: string): Loaded {
  const dir = join(FIXTURES, name);
  const result = compile(sourceTree(ROOT, readTree(join(dir, "tree"))));
  expect(result.diagnostics.filter((d) => d.severity === "error"), name).toEqual([]);
  return { model: result.model!, observed: readJson(join(dir, "observed.json")), inventory: readJson(join(dir, "inventory.json")) };
}

function plan(name: string): Plan {
  const { model, observed, inventory } = load(name);
  return planChanges(model, observed, inventory);
}

describe("fixtures/plans", () => {
  it("holds at least 15 cases, exactly those of cases.ts, each with a README line", () => {
    expect(FOLDERS.length).toBeGreaterThanOrEqual(15);
    expect(FOLDERS).toEqual(CASES.map((c) => c.name).sort());
    for (const name of FOLDERS) expect(readFileSync(join(FIXTURES, name, "README.md"), "utf8"), name).toMatch(/^\S.*\S\n$/);
  });

  it.each(CASES.map((c) => [c.name, c] as const))("%s: inputs are what generate.ts makes from cases.ts", (name, c) => {
    const dir = join(FIXTURES, name);
    expect(Object.fromEntries(readTree(join(dir, "tree")))).toEqual(c.after);
    const { observed, inventory } = buildWorld(c);
    expect(readJson(join(dir, "observed.json"))).toEqual(observed);
    expect(readJson(join(dir, "inventory.json"))).toEqual(inventory);
  });

  it.each(FOLDERS)("%s: matches its golden text and JSON", async (name) => {
    const p = plan(name);
    await expect(`${formatPlan(p, { verbose: true })}\n`).toMatchFileSnapshot(join(FIXTURES, name, "plan.txt"));
    await expect(`${planJson(p)}\n`).toMatchFileSnapshot(join(FIXTURES, name, "plan.json"));
  });

  it.each(FOLDERS)("%s: is a valid Plan with a stable id", (name) => {
    const first = plan(name);
    expect(Plan.parse(first)).toEqual(first);
    expect(plan(name).id).toBe(first.id);
    expect(first.id).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

/** `address → "action reason"` for the changes that are not no-ops. */
function acting(p: Plan): Record<string, string> {
  return Object.fromEntries(p.changes.filter((c) => c.action !== "no-op").map((c) => [c.address, `${c.action} ${c.reason}`]));
}

function change(p: Plan, address: string): Change {
  const found = p.changes.find((c) => c.address === address);
  if (!found) throw new Error(`no change for ${address}`);
  return found;
}

function codes(p: Plan): string[] {
  return p.warnings.map((w) => `${w.address} ${w.code}`);
}

/** What each case's plan must say, beyond its golden text. */
const CHECKS: Record<string, (p: Plan) => void> = {
  "nothing-to-do": (p) => {
    expect(p.has_changes).toBe(false);
    expect(p.summary).toEqual({ create: 0, update: 0, replace: 0, delete: 0, no_op: 6 });
  },
  "first-apply": (p) => {
    expect(acting(p)).toEqual({ "slot.agent": "create new", "slot.chat": "create new", "slot.coder": "create new", "slot.embed": "create new" });
    expect(change(p, "settings").action).toBe("no-op");
    expect(Object.keys(p.base.observed)).toEqual(["settings"]);
  },
  "tune-ctx-size": (p) => {
    expect(acting(p)).toEqual({ "slot.chat": "replace spec_changed" });
    expect(change(p, "slot.chat").changed_paths).toEqual(["argv.--ctx-size", "tune.ctx_size"]);
    expect(change(p, "slot.chat")).toMatchObject({ destructive: true, downtime: true, apply_class: "immediate" });
  },
  "model-swap": (p) => expect(change(p, "slot.chat").changed_paths).toEqual(["argv.--alias", "argv.--model", "model"]),
  "profile-flags": (p) => {
    expect(Object.keys(acting(p))).toEqual(["slot.agent", "slot.chat", "slot.coder"]);
    for (const a of ["slot.agent", "slot.chat", "slot.coder"]) expect(change(p, a).changed_paths).toEqual(["argv.--batch-size", "argv.--ubatch-size"]);
  },
  "slot-file-removed": (p) => {
    expect(acting(p)).toEqual({ "slot.agent": "delete removed_from_config" });
    expect(change(p, "slot.agent")).toMatchObject({ after: null, destructive: true, downtime: true });
  },
  "slot-renamed": (p) => expect(acting(p)).toEqual({ "slot.code": "create new", "slot.coder": "delete removed_from_config" }),
  "slot-disabled": (p) => {
    expect(acting(p)).toEqual({ "slot.coder": "delete disabled" });
    expect(change(p, "slot.spare")).toMatchObject({ action: "no-op", reason: "disabled" });
  },
  "port-change": (p) => expect(change(p, "slot.embed").changed_paths).toEqual(["argv.--port", "port"]),
  "settings-only": (p) => {
    expect(acting(p)).toEqual({ settings: "update changed" });
    expect(p.settings).toEqual({
      immediate: ["slots.health_timeout_s"],
      service_restart: { "hal0-api": ["server.allowed_hosts", "server.port"], slots: ["models.store"] },
      manual_restart: ["slots.port_range_start"],
      unknown: [],
    });
    expect(change(p, "settings").apply_class).toBe("manual-restart");
  },
  "drift-warn-stopped": (p) => {
    expect(p.changes.find((c) => c.address === "slot.chat")).toMatchObject({ action: "no-op", reason: "not_running" });
    expect(p.warnings.map((w) => `${w.address} ${w.code}`)).toEqual(["slot.chat slot.drifted", "slot.chat slot.not_running"]);
    expect(p.has_changes).toBe(false);
  },
  "drifted-behind-back": (p) => {
    const coder = p.changes.find((c) => c.address === "slot.coder")!;
    expect(coder).toMatchObject({ action: "replace", reason: "drifted" });
    expect(coder.changed_paths).toEqual(expect.arrayContaining(["tune.ctx_size", "argv.--ctx-size"]));
    expect(p.summary).toMatchObject({ replace: 1, create: 0, delete: 0 });
  },
  "runner-died": (p) => {
    expect(acting(p)).toEqual({ "slot.chat": "create not_running" });
    expect(codes(p)).toEqual(["slot.chat slot.not_running", "slot.chat slot.runner_unchecked"]);
  },
  "port-taken-by-hand": (p) => {
    expect(acting(p)).toEqual({ "slot.embed": "create new" });
    // Planned without runner facts: the plan says the argv was not checked.
    expect(codes(p)).toEqual(["slot.embed slot.port_in_use", "slot.embed slot.runner_unchecked"]);
    expect(p.warnings[0]!.message).toContain("port 8084 is held by pid 5150 (python3 -m http.server 8084)");
  },
  "pid-reused": (p) => {
    expect(acting(p)).toEqual({ "slot.coder": "create not_running" });
    expect(p.warnings[0]).toMatchObject({ code: "slot.not_running", message: expect.stringContaining("pid 4103 now belongs to another program") });
  },
  "stack-replace": (p) => {
    expect(acting(p)).toEqual({ "slot.agent": "delete disabled", "slot.chat": "replace spec_changed", "slot.embed": "delete disabled" });
    expect(change(p, "slot.coder").reason).toBe("unchanged");
  },
  "tune-unavailable": (p) => {
    expect(change(p, "slot.agent").after).toMatchObject({ tune: { ctx_size: 40960 } });
    expect(codes(p)).toEqual(["slot.agent slot.runner_unchecked", "slot.agent slot.tune_unavailable"]);
  },
  "env-and-extra-args": (p) => {
    expect(change(p, "slot.chat").changed_paths).toEqual(["argv.--cache-reuse", "argv.--no-warmup", "env.LLAMA_ARG_THREADS"]);
  },
  "runtime-docker": (p) => {
    expect(p.summary).toMatchObject({ update: 1, replace: 4 });
    expect(p.settings.service_restart).toEqual({ slots: ["slots.runtime"] });
    expect(change(p, "slot.embed").changed_paths).toEqual(["argv", "image", "runtime"]);
  },
  "hermes-new-profile": (p) => {
    expect(acting(p)).toEqual({ "hermes.coder": "update new", "hermes.writer": "update new" });
    const coder = change(p, "hermes.coder");
    expect(coder).toMatchObject({ kind: "hermes", apply_class: "immediate", destructive: false, downtime: false });
    expect(coder.changed_paths).toEqual(["mcp_servers.hal0-admin", "mcp_servers.hal0-memory", "mcp_servers.inventory"]);
    expect(coder.after).toMatchObject({ file: "/srv/hermes/profiles/coder/config.yaml", identity: "hermes__coder", managed_ids: ["inventory"] });
    // The bearer is a placeholder (the executor writes the token); X-hal0-Agent is no longer written: the server trusts only the token.
    expect((coder.after as HermesView).mcp_servers["hal0-admin"]).toEqual({ type: "http", url: "http://127.0.0.1:8080/mcp/admin", timeout: 60, headers: { Authorization: "Bearer [redacted]" } });
    expect((coder.after as HermesView).mcp_servers.inventory).not.toHaveProperty("headers");
    expect(change(p, "hermes.writer").after).toMatchObject({ mcp_servers: { "hal0-memory": { headers: { Authorization: "Bearer [redacted]", "X-hal0-Private": "1" } } } });
    expect(Object.keys(p.base.observed)).toEqual(expect.arrayContaining(["hermes.coder", "hermes.writer"]));
  },
  "hermes-drifted": (p) => {
    expect(acting(p)).toEqual({ "hermes.coder": "update drifted" });
    // The bearer in the file is the one hal0 hands on: only the hand-edited url differs.
    expect(change(p, "hermes.coder").changed_paths).toEqual(["mcp_servers.hal0-admin.url"]);
    expect(change(p, "hermes.ops")).toMatchObject({ action: "no-op", reason: "unchanged" });
  },
  "hermes-token-rotated": (p) => {
    expect(acting(p)).toEqual({ "hermes.coder": "update changed" });
    const coder = change(p, "hermes.coder");
    expect(coder.changed_paths).toEqual(["mcp_servers.hal0-admin.headers.Authorization", "mcp_servers.hal0-memory.headers.Authorization"]);
    for (const side of [coder.before, coder.after]) {
      for (const id of ["hal0-admin", "hal0-memory"]) expect((side as HermesView).mcp_servers[id]).toMatchObject({ headers: { Authorization: "Bearer [redacted]" } });
    }
    expect(formatPlan(p)).toContain('mcp_servers.hal0-admin.headers.Authorization: "Bearer [redacted]" → "Bearer [redacted]" (another token)');
    expect(change(p, "hermes.ops")).toMatchObject({ action: "no-op", reason: "unchanged" });
  },
  "hermes-agent-header": (p) => {
    expect(acting(p)).toEqual({ "hermes.coder": "update changed" });
    expect(change(p, "hermes.coder").changed_paths).toEqual([
      "mcp_servers.hal0-admin.headers.Authorization", "mcp_servers.hal0-admin.headers.X-hal0-Agent",
      "mcp_servers.hal0-memory.headers.Authorization", "mcp_servers.hal0-memory.headers.X-hal0-Agent",
    ]);
  },
  "hermes-opted-out": (p) => {
    expect(acting(p)).toEqual({ "hermes.coder": "update opted_out" });
    expect(change(p, "hermes.coder").after).toMatchObject({ mcp_servers: {}, managed_ids: [] });
    expect(change(p, "hermes.coder").changed_paths).toEqual(["mcp_servers.hal0-admin", "mcp_servers.hal0-memory", "mcp_servers.inventory"]);
    expect(change(p, "hermes.quiet")).toMatchObject({ action: "no-op", reason: "opted_out" });
  },
  "hermes-server-moved": (p) => {
    expect(acting(p)).toEqual({ "hermes.coder": "update changed", settings: "update changed" });
    expect(change(p, "hermes.coder").changed_paths).toEqual(["mcp_servers.hal0-admin.url", "mcp_servers.hal0-memory.url"]);
  },
  "unmanaged-slot": (p) => {
    expect(p.has_changes).toBe(false);
    expect(change(p, "slot.scratch")).toMatchObject({ action: "no-op", reason: "unmanaged", destructive: false });
    expect(codes(p)).toEqual(["slot.scratch slot.unmanaged"]);
  },
};

describe("Hermes bearers in plans", () => {
  it.each(FOLDERS.filter((f) => f.startsWith("hermes-")))("%s: neither the text nor the JSON holds a token, though the observed files do", (name) => {
    const p = plan(name);
    const observed = readFileSync(join(FIXTURES, name, "observed.json"), "utf8");
    for (const out of [formatPlan(p, { verbose: true }), planJson(p)]) {
      expect(out).not.toMatch(/hal0_ag_/);
      for (const profile of ["coder", "ops", "writer", "quiet"]) for (const n of [1, 2]) expect(out).not.toContain(fixtureToken(profile, n));
    }
    if (name !== "hermes-new-profile" && name !== "hermes-agent-header") expect(observed).toContain(`Bearer ${fixtureToken("coder")}`);
  });

  it("without credentials in the observation (no hermes_tokens), hal0's servers get no Authorization header and a bearer in the file is not compared", () => {
    const { model, observed, inventory } = load("hermes-token-rotated");
    const { hermes_tokens: _tokens, ...bare } = observed;
    const coder = planChanges(model, bare, inventory).changes.find((c) => c.address === "hermes.coder")!;
    expect((coder.after as HermesView).mcp_servers["hal0-admin"]).not.toHaveProperty("headers");
    expect(coder.changed_paths).toEqual(["mcp_servers.hal0-admin.headers", "mcp_servers.hal0-memory.headers"]);
    // The before side is still redacted.
    expect(JSON.stringify(coder.before)).not.toContain("hal0_ag_");
  });

  it("a revoked or never-minted token (fingerprint null) makes a wired profile's bearer a change; its own fingerprint is no change", () => {
    const { model, observed, inventory } = load("hermes-drifted");
    const ops = (tokens: Observed["hermes_tokens"]) => planChanges(model, { ...observed, hermes_tokens: tokens }, inventory).changes.find((c) => c.address === "hermes.ops")!;
    expect(ops({ ...observed.hermes_tokens, hermes__ops: null })).toMatchObject({ action: "update", reason: "changed", changed_paths: ["mcp_servers.hal0-admin.headers.Authorization", "mcp_servers.hal0-memory.headers.Authorization"] });
    expect(ops(observed.hermes_tokens)).toMatchObject({ action: "no-op", reason: "unchanged" });
    // Another profile's token in ops' file is not ops' token.
    expect(ops({ ...observed.hermes_tokens, hermes__ops: observed.hermes_tokens!.hermes__coder! }).action).toBe("update");
  });

  it("a rotation moves the profile's digest, so a plan saved before it is stale", () => {
    const { model, observed, inventory } = load("hermes-token-rotated");
    const before = planChanges(model, { ...observed, hermes_tokens: { ...observed.hermes_tokens, hermes__coder: "0000000000000000" } }, inventory);
    expect(before.base.observed["hermes.coder"]).not.toBe(plan("hermes-token-rotated").base.observed["hermes.coder"]);
    expect(before.base.observed["hermes.ops"]).toBe(plan("hermes-token-rotated").base.observed["hermes.ops"]);
  });
});

describe("plan semantics per case", () => {
  it("checks every case", () => expect(Object.keys(CHECKS).sort()).toEqual(FOLDERS));
  it.each(FOLDERS)("%s", (name) => CHECKS[name]!(plan(name)));
});

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

describe("planning is side-effect free", () => {
  afterEach(() => vi.restoreAllMocks());

  it.each(FOLDERS)("%s: frozen inputs are neither mutated nor written; no fetch, file write, clock or randomness", (name) => {
    const { model, observed, inventory } = load(name);
    const copies = structuredClone({ observed, inventory });
    const expected = planChanges(model, observed, inventory);
    const refuse = (what: string) => () => {
      throw new Error(`planning called ${what}`);
    };
    vi.spyOn(globalThis, "fetch").mockImplementation(refuse("fetch"));
    vi.spyOn(fs, "writeFile").mockImplementation(refuse("fs.writeFile"));
    vi.spyOn(fs, "writeFileSync").mockImplementation(refuse("fs.writeFileSync"));
    vi.spyOn(fsp, "writeFile").mockImplementation(refuse("fs/promises.writeFile"));
    vi.spyOn(Date, "now").mockImplementation(refuse("Date.now"));
    vi.spyOn(Math, "random").mockImplementation(refuse("Math.random"));
    const frozen = planChanges(deepFreeze(model), deepFreeze(observed), deepFreeze(inventory));
    vi.restoreAllMocks();
    expect(frozen).toEqual(expected);
    expect({ observed, inventory }).toEqual(copies);
  });
});

describe("the planner's imports", () => {
  const PURE = ["plan.ts", "view.ts", "digest.ts", "settings-plan.ts", "slot-warnings.ts", "format.ts", "hermes-plan.ts", "hermes-wire.ts", "nodes.ts"];
  // `yaml` parses a Hermes file in memory (hermes-wire.ts): pure, no I/O; yaml-lazy.ts only loads it on first use.
  const ALLOWED = /^(yaml|\.\.\/compiler\/index\.js|\.\.\/schema\/index\.js|\.\/(plan|view|digest|settings-plan|slot-warnings|observed|nodes|hermes-plan|hermes-wire|yaml-lazy)\.js)$/;

  it.each(PURE)("reconciler/%s imports no driver, no node: module, only schema, compiler, yaml and pure siblings", (file) => {
    const text = readFileSync(join(import.meta.dirname, "../../reconciler", file), "utf8");
    const specifiers = [...text.matchAll(/^import .* from "([^"]+)";$/gm)].map((m) => m[1]!);
    expect(specifiers.length).toBeGreaterThan(0);
    for (const s of specifiers) expect(s, `${file} imports ${s}`).toMatch(ALLOWED);
  });
});

describe("destroy plans (hal0 down)", () => {
  it("delete every inventory member, reason down, and leave unmanaged slots alone", () => {
    for (const name of ["nothing-to-do", "unmanaged-slot"]) {
      const { model, observed, inventory } = load(name);
      const destroy = planChanges(model, observed, inventory, { destroy: true });
      const deletes = destroy.changes.filter((c) => c.action === "delete");
      expect(deletes.map((c) => c.address).sort(), name).toEqual(Object.keys(inventory.slots).map((s) => `slot.${s}`).sort());
      for (const c of deletes) expect(c.reason).toBe("down");
      expect(destroy.changes.filter((c) => c.action === "create" || c.action === "replace")).toEqual([]);
    }
  });
});

describe("planner options: what converge() is asked to do is decided here", () => {
  it("replace restarts a running slot (replace, reason restart) and starts a stopped one (create); nothing else moves", () => {
    const { model, observed, inventory } = load("runner-died");
    const p = planChanges(model, observed, inventory, { replace: ["slot.agent", "slot.chat"] });
    expect(acting(p)).toEqual({ "slot.agent": "replace restart", "slot.chat": "create not_running" });
    expect(change(p, "slot.agent")).toMatchObject({ changed_paths: ["restart"], destructive: true, downtime: true });
    expect(Plan.parse(p)).toEqual(p);
  });

  it("replace of a slot with a pending change keeps the change's paths; of a disabled slot it changes nothing", () => {
    const tuned = load("tune-ctx-size");
    const p = planChanges(tuned.model, tuned.observed, tuned.inventory, { replace: ["slot.chat"] });
    expect(change(p, "slot.chat")).toMatchObject({ action: "replace", reason: "restart", changed_paths: ["argv.--ctx-size", "tune.ctx_size"] });
    const disabled = load("slot-disabled");
    const q = planChanges(disabled.model, disabled.observed, disabled.inventory, { replace: ["slot.coder", "slot.spare"] });
    expect(acting(q)).toEqual(acting(plan("slot-disabled")));
  });

  it("only keeps the changes and warnings of the kinds and addresses named, and the settings buckets only with the settings", () => {
    const { model, observed, inventory } = load("hermes-drifted");
    const hermes = planChanges(model, observed, inventory, { only: { kinds: ["hermes"] } });
    expect(hermes.changes.map((c) => c.address)).toEqual(["hermes.coder", "hermes.ops"]);
    expect(hermes.summary).toEqual({ create: 0, update: 1, replace: 0, delete: 0, no_op: 1 });
    const one = load("runner-died");
    const chat = planChanges(one.model, one.observed, one.inventory, { only: { addresses: ["slot.chat"] } });
    expect(chat.changes.map((c) => c.address)).toEqual(["slot.chat"]);
    expect(codes(chat)).toEqual(["slot.chat slot.not_running", "slot.chat slot.runner_unchecked"]);
    expect(chat.settings).toEqual({ immediate: [], service_restart: {}, manual_restart: [], unknown: [] });
    expect(planChanges(one.model, one.observed, one.inventory, { only: { addresses: ["slot.agent"] } }).warnings).toEqual([]);
  });

  it.each(FOLDERS)("%s: only (one address, one kind) and planSlotChange give what the whole plan gives for them", (name) => {
    const { model, observed, inventory } = load(name);
    const whole = planChanges(model, observed, inventory);
    for (const c of whole.changes) {
      const one = planChanges(model, observed, inventory, { only: { addresses: [c.address] } });
      expect(one.changes, c.address).toEqual([c]);
      expect(one.warnings, c.address).toEqual(whole.warnings.filter((w) => w.address === c.address));
      expect(one.base, c.address).toEqual(whole.base);
      if (c.kind === "slot") expect(planSlotChange(model, observed, inventory, c.address.slice("slot.".length)), c.address).toEqual(c);
    }
    for (const kind of ["slot", "settings", "hermes"] as const) {
      expect(planChanges(model, observed, inventory, { only: { kinds: [kind] } }).changes, kind).toEqual(whole.changes.filter((c) => c.kind === kind));
    }
  });

  it("a plan of one slot, and planSlotChange, read that slot's inputs alone: no other slot, no Hermes profile (one slot of a big box costs one slot)", () => {
    const { model, observed, inventory } = load("hermes-drifted");
    const slots = Object.keys(model.slots);
    expect(slots.length).toBeGreaterThan(1);
    expect(Object.keys(observed.hermes_profiles!).length).toBeGreaterThan(0);
    const reads = new Set<string>();
    /** `record` with each key read (or every key listed: "*") noted as `<what>.<key>`. */
    const counted = <T extends object>(what: string, record: T): T => new Proxy(record, {
      get: (o, k, r) => (typeof k === "string" && reads.add(`${what}.${k}`), Reflect.get(o, k, r)),
      has: (o, k) => (typeof k === "string" && reads.add(`${what}.${k}`), Reflect.has(o, k)),
      getOwnPropertyDescriptor: (o, k) => (typeof k === "string" && reads.add(`${what}.${k}`), Reflect.getOwnPropertyDescriptor(o, k)),
      ownKeys: (o) => (reads.add(`${what}.*`), Reflect.ownKeys(o)),
    });
    const watched = () => ({
      model: { ...model, slots: counted("model", model.slots) },
      observed: { ...observed, slots: counted("observed", observed.slots), hermes_profiles: counted("hermes", observed.hermes_profiles!) },
      inventory: { ...inventory, slots: counted("inventory", inventory.slots) },
    });
    const name = slots[0]!;
    const w = watched();
    planSlotChange(w.model, w.observed, w.inventory, name, { replace: [`slot.${name}`] });
    expect([...reads].sort()).toEqual([`inventory.${name}`, `model.${name}`, `observed.${name}`]);
    reads.clear();
    const v = watched();
    const plan = planChanges(v.model, v.observed, v.inventory, { only: { addresses: [`slot.${name}`] } });
    expect(plan.changes.map((c) => c.address)).toEqual([`slot.${name}`]);
    // Its base still digests every observed resource (a saved plan's staleness check reads it), but no other slot is planned.
    expect([...reads].filter((r) => r.startsWith("model.") || r.startsWith("inventory.")).sort()).toEqual([`inventory.${name}`, `model.${name}`]);
  });

  it("hermesDefault plans the default profile (address hermes) from its observed text, enforcing over drift = warn; without it the sweep never sees it", () => {
    const { model, observed, inventory } = load("hermes-drifted");
    const text = observed.hermes_profiles!.coder!.text;
    const warned = { ...model, settings: { ...model.settings, reconcile: { ...model.settings.reconcile, drift: "warn" as const } } };
    const withDefault = { ...observed, hermes_default: { text }, hermes_managed: { ...observed.hermes_managed!, default: observed.hermes_managed!.profiles.coder } };
    const p = planChanges(warned, withDefault, inventory, { hermesDefault: true, only: { addresses: ["hermes"] } });
    expect(p.changes).toHaveLength(1);
    expect(p.changes[0]).toMatchObject({ address: "hermes", kind: "hermes", action: "update", reason: "drifted" });
    expect(p.changes[0]!.kind === "hermes" && p.changes[0]!.after.identity).toBe("hermes");
    expect(planChanges(warned, withDefault, inventory).changes.some((c) => c.address === "hermes")).toBe(false);
  });
});

describe("the typed plan", () => {
  const saved = (): Record<string, unknown> & { changes: Array<Record<string, unknown>> } => JSON.parse(planJson(plan("tune-ctx-size")));
  const slotAt = (p: ReturnType<typeof saved>) => p.changes.find((c) => c.address === "slot.chat")!;

  it("a change is a union on kind: its before/after are the kind's own view, so consumers read them without casts", () => {
    const p = Plan.parse(saved());
    const chat = p.changes.find((c) => c.address === "slot.chat")!;
    if (chat.kind !== "slot" || chat.after === null) throw new Error("expected a slot change with a desired view");
    expect(chat.after.spec.argv).toContain("--ctx-size");
    const settings = p.changes.find((c) => c.kind === "settings")!;
    if (settings.kind !== "settings") throw new Error("expected the settings change");
    expect(settings.after.slots.runtime).toBe("process");
  });

  it("refuses a reason outside the kind's closed set, an address of another form, another kind's view and an action the kind has not", () => {
    const cases: Array<[string, (p: ReturnType<typeof saved>) => void]> = [
      ["a slot reason on settings", (p) => void (p.changes.find((c) => c.kind === "settings")!.reason = "spec_changed")],
      ["an unknown reason", (p) => void (slotAt(p).reason = "because")],
      ["a slot at a settings address", (p) => void (slotAt(p).address = "settings")],
      ["a bare slot address", (p) => void (slotAt(p).address = "slot.")],
      ["settings as a slot's after", (p) => void (slotAt(p).after = p.changes.find((c) => c.kind === "settings")!.after)],
      ["an update of a slot", (p) => void (slotAt(p).action = "update")],
      ["a warning at no address", (p) => void ((p.warnings as unknown[]).push({ address: "chat", code: "x", message: "y" }))],
    ];
    expect(Plan.safeParse(saved()).success).toBe(true);
    for (const [what, mutate] of cases) {
      const p = saved();
      mutate(p);
      expect(Plan.safeParse(p).success, what).toBe(false);
    }
  });
});
