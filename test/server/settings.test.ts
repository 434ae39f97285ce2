import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SETTINGS_REGISTRY } from "../../schema/index.js";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
let nudges = 0;
beforeEach(async () => {
  nudges = 0;
  s = await startTestServer({ extra: { nudge: () => void nudges++ } });
});
afterEach(async () => s.close());

const hal0toml = () => readFileSync(join(s.config, "hal0.toml"), "utf8");

describe("GET /api/settings, schema, apply-plan", () => {
  it("returns the effective settings with defaults filled and the revision", async () => {
    const res = await s.call("GET", "/api/settings");
    expect(res.status).toBe(200);
    expect(res.body.revision).toMatch(/^rev_/);
    expect(res.body.slots).toMatchObject({ max_slots: 8, health_timeout_s: 240, parallel: 4, runtime: "process" });
    expect(res.body.bridge).toEqual({ enabled: true, max_runs: 2 });
    expect(res.body.models).toEqual({ roots: ["/var/lib/hal0/models"], store: "models/pulled", pull_parallel: 2, pull_on_apply: false });
    expect(res.body._hal0).toMatchObject({ file: "hal0.toml", valid: true, tree_valid: true });
  });

  it("serves the last good settings, marked invalid, while hal0.toml is broken", async () => {
    writeFileSync(join(s.config, "hal0.toml"), "[slots]\nmax_slots = \"lots\"\n");
    const res = await s.call("GET", "/api/settings");
    expect(res.status).toBe(200);
    expect(res.body.slots.max_slots).toBe(8);
    expect(res.body._hal0).toMatchObject({ valid: false, tree_valid: false });
  });

  it("returns the JSON Schema of hal0.toml, the same one schema/json holds", async () => {
    const res = await s.call("GET", "/api/settings/schema");
    expect(res.status).toBe(200);
    expect(res.body).toEqual(JSON.parse(readFileSync(join(import.meta.dirname, "../../schema/json/hal0.schema.json"), "utf8")));
    expect(res.body.$schema).toBe("http://json-schema.org/draft-07/schema#");
  });

  it("returns the registry of dotted keys and their apply classes", async () => {
    const res = await s.call("GET", "/api/settings/apply-plan");
    expect(res.body.apply_classes).toEqual(["immediate", "service-restart", "manual-restart"]);
    expect(Object.keys(res.body.registry).sort()).toEqual(Object.keys(SETTINGS_REGISTRY).sort());
    expect(res.body.registry["server.port"]).toEqual({ apply_class: "service-restart", services: ["hal0-api"] });
    expect(res.body.registry["slots.max_slots"]).toEqual({ apply_class: "immediate", services: [] });
    expect(res.body.registry["slots.port_range_end"]).toEqual({ apply_class: "manual-restart", services: [] });
  });
});

describe("PUT /api/settings", () => {
  it("deep-merges a section, keeps every comment, and splits the apply plan by dotted leaf key", async () => {
    writeFileSync(join(s.config, "hal0.toml"), hal0toml().replace("[reconcile]\n", "[reconcile]\n# hand note: keep the sweep fast, the NAS is flaky\n"));
    const res = await s.call("PUT", "/api/settings", { body: { slots: { max_slots: 10, port_range_end: 8190 }, server: { port: 8070 }, models: { store: "/srv/models" } } });
    expect(res.status).toBe(200);
    expect(res.body._hal0.apply_plan).toEqual({
      immediate: ["slots.max_slots"],
      service_restart: { "hal0-api": ["server.port"], slots: ["models.store"] },
      manual_restart: ["slots.port_range_end"],
      unknown: [],
    });
    expect(res.body._hal0.committed).toBe(true);
    expect(res.body._hal0.files).toEqual(["hal0.toml"]);
    expect(res.body).toMatchObject({ slots: { max_slots: 10, port_range_end: 8190, health_timeout_s: 240 }, server: { port: 8070, allowed_hosts: ["hal0.local"] } });
    const text = hal0toml();
    expect(text).toContain("# hand note: keep the sweep fast, the NAS is flaky");
    expect(text).toContain("# 128 GB of unified memory fits about eight resident models at our quants;");
    expect(text).toMatch(/max_slots = 10/);
    expect(text).toMatch(/port = 8070/);
    expect(text).toMatch(/\[models\]\n# Pulled models land [^\n]*\nstore = "\/srv\/models"/);
    const after = await s.call("GET", "/api/settings");
    expect(after.body.revision).toBe(res.body.revision);
    expect(after.body.server.port).toBe(8070);
    expect(nudges).toBe(1);
  });

  it("replaces lists whole and removes a key given null (back to its default)", async () => {
    const res = await s.call("PUT", "/api/settings", { body: { server: { allowed_hosts: ["box.lan"] }, approvals: { ttl_s: null } } });
    expect(res.status).toBe(200);
    expect(res.body.server.allowed_hosts).toEqual(["box.lan"]);
    expect(res.body.approvals.ttl_s).toBe(86_400);
    expect(res.body._hal0.changed).toEqual(["approvals.ttl_s", "server.allowed_hosts"]);
    expect(res.body._hal0.apply_plan.service_restart).toEqual({ "hal0-api": ["server.allowed_hosts"] });
    expect(hal0toml()).not.toMatch(/ttl_s/);
    expect(hal0toml()).toMatch(/allowed_hosts = \["box.lan"\]/);
  });

  it("takes a GET reply back as a no-op: nothing written, empty apply plan", async () => {
    const before = hal0toml();
    const got = await s.call("GET", "/api/settings");
    const res = await s.call("PUT", "/api/settings", { body: got.body });
    expect(res.status).toBe(200);
    expect(res.body._hal0.apply_plan).toEqual({ immediate: [], service_restart: {}, manual_restart: [], unknown: [] });
    expect(hal0toml()).toBe(before);
  });

  it("plans without writing on ?dry_run=true", async () => {
    const before = hal0toml();
    const res = await s.call("PUT", "/api/settings?dry_run=true", { body: { reconcile: { interval_s: 30 } } });
    expect(res.status).toBe(200);
    expect(res.body._hal0).toMatchObject({ committed: false, apply_plan: { immediate: ["reconcile.interval_s"] } });
    expect(res.body.reconcile.interval_s).toBe(30);
    expect(hal0toml()).toBe(before);
  });

  it("refuses a bad value with 422 config.invalid and leaves hal0.toml byte-for-byte", async () => {
    const before = hal0toml();
    const res = await s.call("PUT", "/api/settings", { body: { slots: { max_slots: "many" } } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe("config.invalid");
    expect(res.body.error.details.diagnostics[0]).toMatchObject({ code: "config.invalid_type", file: "hal0.toml" });
    const range = await s.call("PUT", "/api/settings", { body: { slots: { port_range_end: 8000 } } });
    expect(range.status).toBe(422);
    expect(range.body.error.details.diagnostics[0]).toMatchObject({ code: "config.invalid_value", file: "hal0.toml" });
    expect(hal0toml()).toBe(before);
  });

  it("refuses an unknown key with 422 and the did-you-mean diagnostic", async () => {
    const before = hal0toml();
    const res = await s.call("PUT", "/api/settings", { body: { server: { prot: 9000 } } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe("config.invalid");
    const diag = res.body.error.details.diagnostics[0];
    expect(diag).toMatchObject({ code: "config.unknown_key", file: "hal0.toml" });
    expect(diag.detail).toBe("`[server]` has no key `prot`. Did you mean `port`?");
    expect(diag.path).toEqual(["server", "prot"]);
    expect((await s.call("PUT", "/api/settings", { body: { telemetry: { enabled: true } } })).body.error.details.diagnostics[0].code).toBe("config.unknown_key");
    expect(hal0toml()).toBe(before);
  });

  it("refuses a body that is not an object with 400", async () => {
    for (const body of ["[1]", "\"x\"", "3"]) {
      const res = await s.call("PUT", "/api/settings", { body });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe("request.not_an_object");
    }
    expect((await s.call("PUT", "/api/settings", { body: "{nope" })).body.error.code).toBe("request.invalid_json");
    const dry = await s.call("PUT", "/api/settings?dry_run=maybe", { body: {} });
    expect(dry.status).toBe(422);
    expect(dry.body.error.code).toBe("validation.invalid");
  });

  it("refuses a write based on a revision whose hal0.toml moved since (409 config.stale)", async () => {
    const { revision } = (await s.call("GET", "/api/settings")).body;
    writeFileSync(join(s.config, "hal0.toml"), `${hal0toml()}# edited by hand\n`);
    const res = await s.call("PUT", "/api/settings", { body: { slots: { max_slots: 2 } }, headers: { "if-match": revision } });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: "config.stale", details: { files: ["hal0.toml"] } });
  });
});

describe("POST /api/settings/reload and GET /api/settings/models/store", () => {
  it("re-reads the tree, nudges the sweep and summarizes its diagnostics", async () => {
    const first = await s.call("POST", "/api/settings/reload");
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ valid: true, errors: 0, nudged: true });
    writeFileSync(join(s.config, "hal0.toml"), "[slots]\nmax_slots = -1\n");
    const broken = await s.call("POST", "/api/settings/reload");
    expect(broken.body).toMatchObject({ valid: false, errors: 1 });
    expect(broken.body.revision).not.toBe(first.body.revision);
    expect(broken.body.diagnostics[0]).toMatchObject({ code: "config.out_of_range", file: "hal0.toml", severity: "error" });
    expect(nudges).toBe(2);
  });

  it("reports the store and each root with whether it exists", async () => {
    const store = mkdtempSync(join(tmpdir(), "hal0-store-"));
    try {
      const none = await s.call("GET", "/api/settings/models/store");
      // The example box's store (models/pulled, made by its first pull) does not exist yet.
      expect(none.body.store).toMatchObject({ set: true, exists: false });
      await s.call("PUT", "/api/settings", { body: { models: { store, roots: ["models", "/nonexistent/hal0-models"] } } });
      const res = await s.call("GET", "/api/settings/models/store");
      expect(res.status).toBe(200);
      expect(res.body.store).toEqual({ path: store, set: true, resolved: store, exists: true, is_dir: true });
      expect(res.body.roots).toEqual([
        { path: "models", resolved: join(s.config, "models"), exists: true, is_dir: true },
        { path: "/nonexistent/hal0-models", resolved: "/nonexistent/hal0-models", exists: false, is_dir: false },
      ]);
    } finally {
      rmSync(store, { recursive: true, force: true });
    }
  });
});
