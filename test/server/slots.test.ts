import { mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeEach(async () => {
  s = await startTestServer();
});
afterEach(async () => s.close());

const file = (name: string) => join(s.config, "slots", `${name}.toml`);
const read = (name: string) => readFileSync(file(name), "utf8");
const commentLines = (text: string) => text.split("\n").filter((l) => l.includes("#")).map((l) => l.slice(l.indexOf("#")));

describe("slot reads", () => {
  it("lists the roster with stable ids, status and the effective tune", async () => {
    const res = await s.call("GET", "/api/slots");
    expect(res.status).toBe(200);
    expect(res.body.count).toBe(11);
    const chat = res.body.slots.find((x: any) => x.name === "chat");
    expect(chat).toMatchObject({ profile: "rocm-moe", model: "qwen3-30b-a3b", type: "llm", port: 8081, device: "gpu-rocm", enabled: true, pinned: true, priority: 90, status: "stopped" });
    expect(chat.id).toMatch(/^slt_[0-9a-f]{12}$/);
    expect(chat.tune_effective).toMatchObject({ ctx_size: 40960, reasoning_effort: "high" });
    expect(chat.tune_unavailable).toEqual({});
    expect(res.body.slots.find((x: any) => x.name === "image").status).toBe("disabled");
    const again = await s.call("GET", "/api/slots");
    expect(again.body.slots.map((x: any) => x.id)).toEqual(res.body.slots.map((x: any) => x.id));
  });

  it("serves a slot whose name is a static segment of another route (flm, metrics) under /api/slots/{name}/…", async () => {
    writeFileSync(file("flm"), read("utility").replace(/^port = 8084$/m, "port = 8095").replace(/^priority = 60$/m, "priority = 60\nenabled = false"));
    writeFileSync(file("metrics"), read("utility").replace(/^port = 8084$/m, "port = 8096").replace(/^priority = 60$/m, "priority = 60\nenabled = false"));
    const flm = await s.call("GET", "/api/slots/flm");
    expect(flm.status, JSON.stringify(flm.body)).toBe(200);
    expect(flm.body.name).toBe("flm");
    for (const name of ["flm", "metrics"]) {
      const state = await s.call("GET", `/api/slots/${name}/state`);
      expect(state.status, `${name}: ${JSON.stringify(state.body)}`).toBe(200);
    }
    // Where a static route matches the whole path it still wins: /api/slots/metrics is slot_metrics, the slot is by-name.
    expect((await s.call("GET", "/api/slots/metrics")).body.name).toBeUndefined();
    expect((await s.call("GET", "/api/slots/by-name/metrics")).body.name).toBe("metrics");
  });

  it("shows one slot by name, by-name and by id, with the same reply", async () => {
    const one = await s.call("GET", "/api/slots/chat");
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ name: "chat", file: "slots/chat.toml", status: "stopped", runtime: { kind: "process", running: false, pid: null }, last_outcome: null });
    expect(one.body.spec_hash).toMatch(/^sha256:/);
    expect((await s.call("GET", "/api/slots/by-name/chat")).body).toEqual(one.body);
    expect((await s.call("GET", `/api/slots/by-id/${one.body.id}`)).body).toEqual(one.body);
    const unknown = await s.call("GET", "/api/slots/by-id/slt_000000000000");
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe("slot.not_found");
    expect(unknown.body.error.details.known).toContain(one.body.id);
  });

  it("answers an unknown slot on every {name} route with 404 slot.not_found, the known names and a did-you-mean", async () => {
    const routes: Array<[string, string, unknown?]> = [
      ["GET", "/api/slots/chta"], ["GET", "/api/slots/by-name/chta"], ["GET", "/api/slots/chta/resolved"], ["GET", "/api/slots/chta/state"],
      ["GET", "/api/slots/chta/config"], ["GET", "/api/slots/chta/logs"], ["PUT", "/api/slots/chta/config", { priority: 1 }],
      ["POST", "/api/slots/chta/load"], ["POST", "/api/slots/chta/unload"], ["POST", "/api/slots/chta/swap", { model: "qwen3-4b" }],
      ["POST", "/api/slots/chta/rename", { to: "x" }], ["POST", "/api/slots/chta/restart"], ["DELETE", "/api/slots/chta"],
    ];
    for (const [method, path, body] of routes) {
      const res = await s.call(method, path, { body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.error.code).toBe("slot.not_found");
      expect(res.body.error.details.known).toContain("chat");
      expect(res.body.error.message).toContain("did you mean `chat`");
    }
  });

  it("a slot whose file cannot be read is no unknown slot: its file's read and every write of it are 422 config.invalid naming the read error (were 404 slot.not_found)", async () => {
    await s.hal0.box.model(); // a tree that compiled: reads of the model answer from it
    writeFileSync(file("chat"), Buffer.concat([Buffer.from(read("chat")), Buffer.from([0xff, 0x0a])])); // not UTF-8: config.read_error
    const routes: Array<[string, string, unknown?]> = [
      ["GET", "/api/slots/chat/config"], ["PUT", "/api/slots/chat/config", { priority: 1 }], ["POST", "/api/slots/chat/load"],
      ["POST", "/api/slots/chat/unload", undefined], ["POST", "/api/slots/chat/swap", { model: "qwen3-4b" }],
      ["POST", "/api/slots/chat/rename", { to: "talk" }], ["POST", "/api/slots/chat/restart"], ["DELETE", "/api/slots/chat?force=true"],
    ];
    for (const [method, path, body] of routes) {
      const res = await s.call(method, path, { body });
      expect([res.status, res.body.error?.code], `${method} ${path}`).toEqual([422, "config.invalid"]);
      expect(res.body.error.message).toContain("slots/chat.toml");
      expect(res.body.error.details.diagnostics).toContainEqual(expect.objectContaining({ code: "config.read_error", file: "slots/chat.toml" }));
    }
    // Another slot's file that is simply not there is still 404.
    const other = await s.call("PUT", "/api/slots/chta/config", { body: { priority: 1 } });
    expect([other.status, other.body.error?.code]).toEqual([404, "slot.not_found"]);
    // A slots folder that cannot be read (here a link that leads nowhere): no slot's file can be known, so none is "not found".
    renameSync(join(s.config, "slots"), join(s.config, ".slots-away"));
    symlinkSync("/nonexistent-slots", join(s.config, "slots"));
    for (const name of ["utility", "chta"]) {
      const res = await s.call("PUT", `/api/slots/${name}/config`, { body: { priority: 1 } });
      expect([res.status, res.body.error?.code], name).toEqual([422, "config.invalid"]);
      expect(res.body.error.details.diagnostics).toContainEqual(expect.objectContaining({ code: "config.read_error", file: "slots" }));
    }
  });

  it("shows the resolved spec with argv, env and spec_hash; secret-named env values masked", async () => {
    const res = await s.call("GET", "/api/slots/chat/resolved");
    expect(res.status).toBe(200);
    expect(res.body.argv).toContain("--port");
    expect(res.body.argv).toContain("8081");
    expect(res.body.env).toMatchObject({ ROCBLAS_USE_HIPBLASLT: "1" });
    expect(res.body.spec_hash).toBe((await s.call("GET", "/api/slots/chat")).body.spec_hash);
    await s.call("PUT", "/api/slots/chat/config", { body: { server: { env: { HF_TOKEN: "hf_abcdefghijklmnop", OTHER: "1" } } } });
    const masked = await s.call("GET", "/api/slots/chat/resolved");
    expect(masked.body.env).toEqual({ HF_TOKEN: "[redacted]", OTHER: "1" });
    expect(JSON.stringify(masked.body)).not.toContain("hf_abcdefghijklmnop");
  });

  it("shows the lifecycle state with conditions and the last outcome", async () => {
    const res = await s.call("GET", "/api/slots/chat/state");
    expect(res.body).toMatchObject({ name: "chat", state: "offline", enabled: true, running: false, generation: 1, last_outcome: null, step: null });
    // Its conditions now (as hal0 status computes them), not only what a sweep recorded.
    expect(res.body.conditions.map((c: { type: string; reason: string }) => `${c.type}/${c.reason}`)).toEqual(["Ready/NotRunning", "Reconciling/ChangePending", "Stalled/Progressing", "Degraded/AsExpected"]);
    writeFileSync(join(s.state, "outcomes.json"), JSON.stringify({ chat: { ok: false, action: "create", code: "slot.spawn_failed", error: "boom", at: "2026-01-01T00:00:00.000Z" } }));
    writeFileSync(join(s.state, "conditions.json"), JSON.stringify({ "slot.chat": { generation: 3, spec_hash: "x", conditions: [{ type: "Ready", status: "False", reason: "NotRunning", message: "m", lastTransitionTime: "t", observedGeneration: 3 }] } }));
    const failed = await s.call("GET", "/api/slots/chat/state");
    // The recorded generation moves on: it stood for another spec.
    expect(failed.body).toMatchObject({ state: "error", generation: 4, last_outcome: { code: "slot.spawn_failed" } });
    expect(failed.body.conditions.map((c: { type: string; reason: string }) => `${c.type}/${c.reason}`)).toEqual(["Ready/NotRunning", "Reconciling/ChangePending", "Stalled/slot.spawn_failed", "Degraded/slot.spawn_failed"]);
    expect((await s.call("GET", "/api/slots/image/state")).body.state).toBe("offline");
  });

  it("serves the slot file: parsed content, text and revision", async () => {
    const res = await s.call("GET", "/api/slots/chat/config");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "chat", file: "slots/chat.toml", valid: true, content: { port: 8081, tune: { ctx_size: 40960 } } });
    expect(res.body.text).toBe(read("chat"));
    expect(res.body.revision).toMatch(/^rev_/);
  });

  it("counts slots by status, type and device, and reports capacity against max_slots and the port range", async () => {
    const m = await s.call("GET", "/api/slots/metrics");
    expect(m.body).toMatchObject({ total: 11, enabled: 8, pinned: 1, by_status: { running: 0, stopped: 8, disabled: 3 }, running: [], running_not_in_config: [] });
    expect(m.body.by_type.llm).toBe(6);
    expect(m.body.ports_used).toContain(8081);
    const c = await s.call("GET", "/api/slots/capacity");
    expect(c.body).toMatchObject({ max_slots: 8, unlimited: false, total: 11, enabled: 8, remaining: 0, port_range: { start: 8081, end: 8200 }, next_free_port: 8085 });
    expect(c.body.free_ports).toBe(120 - 11);
  });

  it("tails the runner log with secrets masked and ?lines bounded to 1..2000", async () => {
    const none = await s.call("GET", "/api/slots/chat/logs");
    expect(none.body).toMatchObject({ name: "chat", exists: false, lines: [] });
    mkdirSync(join(s.state, "slots", "chat"), { recursive: true });
    const lines = Array.from({ length: 3000 }, (_, i) => `line ${i} ${"x".repeat(60)}`);
    lines.push("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "HF_TOKEN=hf_secretsecretsecret ok");
    writeFileSync(join(s.state, "slots", "chat", "runner.log"), `${lines.join("\n")}\n`);
    const tail = await s.call("GET", "/api/slots/chat/logs?lines=3");
    expect(tail.body.lines).toEqual([lines[2999], "Authorization: Bearer [redacted]", "HF_TOKEN=[redacted] ok"]);
    expect(tail.body.truncated).toBe(true);
    const many = await s.call("GET", "/api/slots/chat/logs?lines=2000");
    expect(many.body.lines).toHaveLength(2000);
    expect(many.body.lines[0]).toBe(lines[1002]);
    expect((await s.call("GET", "/api/slots/chat/logs")).body.lines).toHaveLength(200);
    for (const bad of ["0", "2001", "abc"]) {
      const res = await s.call("GET", `/api/slots/chat/logs?lines=${bad}`);
      expect(res.status).toBe(422);
      expect(res.body.error.details.fields[0].loc).toEqual(["query", "lines"]);
    }
  });
});

describe("slot writes", () => {
  it("edits a hand-commented slot file over HTTP and every comment survives", async () => {
    const before = read("chat");
    const res = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 95, tune: { ctx_size: 32768, reasoning_effort: null }, description: "edited" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: "chat", committed: true, files: ["slots/chat.toml"] });
    const after = read("chat");
    expect(commentLines(after)).toEqual(commentLines(before));
    expect(after).toContain("# Prometheus metrics for the dashboard");
    expect(after).toMatch(/ctx_size = 32768/);
    expect(after).not.toMatch(/reasoning_effort/);
    expect(after).toMatch(/priority = 95/);
    const slot = (await s.call("GET", "/api/slots")).body.slots.find((x: any) => x.name === "chat");
    expect(slot).toMatchObject({ priority: 95, tune_effective: { ctx_size: 32768 } });
    const cleared = await s.call("PUT", "/api/slots/chat/config", { body: { tune: null } });
    expect(cleared.status).toBe(200);
    expect(read("chat")).not.toMatch(/\[tune\]/);
    expect(read("chat")).toContain("# Prometheus metrics for the dashboard");
  });

  it("refuses root tuning keys with slot.tuning_key_denied and an invalid value with config.invalid, writing nothing", async () => {
    const before = read("chat");
    for (const key of ["ctx_size", "context_size", "enable_thinking", "mtp"]) {
      const res = await s.call("PUT", "/api/slots/chat/config", { body: { [key]: 1 } });
      expect(res.status, key).toBe(400);
      expect(res.body.error).toMatchObject({ code: "slot.tuning_key_denied", details: { keys: [key] } });
    }
    const bad = await s.call("PUT", "/api/slots/chat/config", { body: { tune: { ctx_size: "huge" } } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe("config.invalid");
    expect(bad.body.error.details.diagnostics[0].file).toBe("slots/chat.toml");
    const tune = await s.call("PUT", "/api/slots/chat/config", { body: { tune: 5 } });
    expect(tune.status).toBe(422);
    expect(tune.body.error.code).toBe("validation.invalid");
    expect(read("chat")).toBe(before);
  });

  it("two edits from the same base: the first wins, the second gets 409 config.stale naming the file", async () => {
    const { revision } = (await s.call("GET", "/api/slots/chat/config")).body;
    const first = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 91 }, headers: { "if-match": revision } });
    expect(first.status).toBe(200);
    const second = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 92 }, headers: { "if-match": revision } });
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ code: "config.stale", details: { files: ["slots/chat.toml"], base: revision } });
    const viaBody = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 93, base: revision } });
    expect(viaBody.status).toBe(409);
    expect(read("chat")).toMatch(/priority = 91/);
    // If-Match: * is any revision: no check, as with no header (a quoted "*" is the same)
    for (const any of ["*", '"*"']) expect((await s.call("PUT", "/api/slots/chat/config", { body: { priority: 91 }, headers: { "if-match": any } })).status).toBe(200);
    // an edit of another file from the same base is not stale
    expect((await s.call("PUT", "/api/slots/coder/config", { body: { priority: 71 }, headers: { "if-match": revision } })).status).toBe(200);
  });

  it("If-Match with a list of revisions (RFC 9110) holds when any of them does; a value that is no list of revisions is 400", async () => {
    const { revision: r1 } = (await s.call("GET", "/api/slots/chat/config")).body;
    const first = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 91 }, headers: { "if-match": `"${r1}"` } });
    expect(first.status).toBe(200);
    const r2 = first.body.revision;
    expect(r2).not.toBe(r1);
    // the current revision among others: the write goes ahead (the list was read as one revision, unknown: 409)
    const listed = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 92 }, headers: { "if-match": `"rev_000000000000000000000000", "${r1}", "${r2}"` } });
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect(read("chat")).toMatch(/priority = 92/);
    // none of them holds: stale, naming the known one and the file
    const stale = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 93 }, headers: { "if-match": `"${r1}","${r2}"` } });
    expect(stale.status).toBe(409);
    expect(stale.body.error).toMatchObject({ code: "config.stale", details: { files: ["slots/chat.toml"] } });
    // the header sent twice is one list
    const current = (await s.call("GET", "/api/slots/chat/config")).body.revision;
    const twice = await fetch(`${s.url}/api/slots/chat/config`, { method: "PUT", headers: [["authorization", `Bearer ${s.operator}`], ["content-type", "application/json"], ["if-match", `"${r1}"`], ["if-match", `"${current}"`]], body: JSON.stringify({ priority: 94 }) });
    expect(twice.status).toBe(200);
    // none known: unknown_revision naming each
    const unknown = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 95 }, headers: { "if-match": `"rev_a", "rev_b"` } });
    expect(unknown.status).toBe(409);
    expect(unknown.body.error).toMatchObject({ code: "config.unknown_revision", details: { base: ["rev_a", "rev_b"] } });
    // * among empty elements is any revision
    expect((await s.call("PUT", "/api/slots/chat/config", { body: { priority: 96 }, headers: { "if-match": " , *" } })).status).toBe(200);
    for (const bad of [`"${current}`, `rev a`, `"a"b`]) {
      const res = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 97 }, headers: { "if-match": bad } });
      expect(res.status, bad).toBe(400);
      expect(res.body.error).toMatchObject({ code: "request.invalid_header", details: { header: "if-match" } });
    }
    expect(read("chat")).toMatch(/priority = 96/);
    // A weak tag never matches (If-Match compares strongly): the current revision sent weak is 400, not taken as it (before: 200).
    const now = (await s.call("GET", "/api/slots/chat/config")).body.revision;
    const weak = await s.call("PUT", "/api/slots/chat/config", { body: { priority: 98 }, headers: { "if-match": `W/"${now}"` } });
    expect(weak.status).toBe(400);
    expect(weak.body.error).toMatchObject({ code: "request.invalid_header", details: { header: "if-match" } });
    expect(weak.body.error.message).toContain("a weak tag");
    expect(read("chat")).toMatch(/priority = 96/);
  });

  it("writes that name no base revision, sent at once, each apply to the tree as it is: every one commits, none is lost", async () => {
    const replies = await Promise.all(Array.from({ length: 12 }, (_, i) => s.call("PUT", "/api/slots/chat/config", { body: i % 2 ? { priority: 10 + i } : { tune: { ctx_size: 1024 * (i + 1) } } })));
    expect(replies.map((r) => r.status), JSON.stringify(replies.find((r) => r.status !== 200)?.body)).toEqual(replies.map(() => 200));
    // Each commit is its own revision, planned on the one before it.
    expect(new Set(replies.map((r) => r.body.revision)).size).toBe(12);
    // The file holds one of the values sent for each key, whichever committed last.
    const text = read("chat");
    expect(text).toMatch(/^priority = (1[13579]|21)$/m);
    expect(text).toMatch(/^ctx_size = (1024|3072|5120|7168|9216|11264)\b/m);
  });

  it("creates a slot (201, with an id); an existing name is 409 slot.exists; an invalid one is refused", async () => {
    const created = await s.call("POST", "/api/slots", { body: { name: "scratch", profile: "cpu-small", model: "qwen3-4b", port: 8150, enabled: false, tune: { ctx_size: 4096 } } });
    expect(created.status).toBe(201);
    expect(created.body.id).toMatch(/^slt_/);
    expect(read("scratch")).toMatch(/port = 8150/);
    expect((await s.call("GET", "/api/slots/scratch")).body).toMatchObject({ id: created.body.id, status: "disabled", tune_effective: { ctx_size: 4096 } });
    const dup = await s.call("POST", "/api/slots", { body: { name: "chat", profile: "cpu-small", port: 8151 } });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe("slot.exists");
    const tuning = await s.call("POST", "/api/slots", { body: { name: "other", profile: "cpu-small", model: "qwen3-4b", port: 8152, ctx_size: 4096 } });
    expect(tuning.body.error.code).toBe("slot.tuning_key_denied");
    const tooMany = await s.call("POST", "/api/slots", { body: { name: "other", profile: "cpu-small", model: "qwen3-4b", port: 8152 } });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.error.details.diagnostics.map((d: any) => d.code)).toContain("slot.max_slots_exceeded");
    const badName = await s.call("POST", "/api/slots", { body: { name: "Bad Name", profile: "cpu-small", port: 8153 } });
    expect(badName.status).toBe(422);
    expect(badName.body.error.details.fields[0].loc).toEqual(["body", "name"]);
    expect(existsSync(file("other"))).toBe(false);
  });

  it("loads and unloads; unloading a pinned slot needs ?force=true", async () => {
    const pinned = await s.call("POST", "/api/slots/chat/unload");
    expect(pinned.status).toBe(409);
    expect(pinned.body.error.code).toBe("slot.pinned");
    const forced = await s.call("POST", "/api/slots/chat/unload?force=true");
    expect(forced.status).toBe(200);
    expect(read("chat")).toMatch(/enabled = false/);
    // chat was not running: off, it leaves the runtime as it was, a no-op the reply only counts (the whole plan lists it, reason disabled).
    expect(forced.body.plan.changes.find((c: any) => c.address === "slot.chat")).toBeUndefined();
    expect(forced.body.plan.summary.no_op).toBeGreaterThan(0);
    const loaded = await s.call("POST", "/api/slots/image/load");
    expect(loaded.status).toBe(200);
    expect(read("image")).toMatch(/enabled = true/);
    expect(read("image")).toContain("# Image generation through ComfyUI.");
    expect((await s.call("POST", "/api/slots/coder/unload")).status).toBe(200);
  });

  it("swaps the model; an unknown model is refused with the compiler's diagnostic", async () => {
    const res = await s.call("POST", "/api/slots/utility/swap", { body: { model: "qwen3-30b-a3b" } });
    expect(res.status).toBe(200);
    expect(read("utility")).toMatch(/model = "qwen3-30b-a3b"/);
    const unknown = await s.call("POST", "/api/slots/utility/swap", { body: { model: "nope" } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.details.diagnostics[0].code).toBe("slot.unknown_model");
  });

  it("renames a slot in one change set: the file moves with its comments and keeps its stable id", async () => {
    const before = read("utility");
    const { id } = (await s.call("GET", "/api/slots/utility")).body;
    const res = await s.call("POST", "/api/slots/utility/rename", { body: { to: "helper" } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ from: "utility", to: "helper", id, files: ["slots/helper.toml", "slots/utility.toml"] });
    expect(existsSync(file("utility"))).toBe(false);
    expect(read("helper")).toBe(before);
    expect((await s.call("GET", `/api/slots/by-id/${id}`)).body.name).toBe("helper");
    expect((await s.call("GET", "/api/slots/utility")).status).toBe(404);
    const taken = await s.call("POST", "/api/slots/helper/rename", { body: { to: "chat" } });
    expect(taken.status).toBe(409);
    expect(taken.body.error.code).toBe("slot.exists");
  });

  it("deletes a slot; a pinned one needs ?force=true; its id goes with it; a referenced one is refused", async () => {
    expect((await s.call("DELETE", "/api/slots/chat")).body.error.code).toBe("slot.pinned");
    expect((await s.call("PUT", "/api/slots/utility/config", { body: { pinned: true } })).status).toBe(200);
    const { id } = (await s.call("GET", "/api/slots/utility")).body;
    const pinned = await s.call("DELETE", "/api/slots/utility");
    expect(pinned.status).toBe(409);
    expect(pinned.body.error).toMatchObject({ code: "slot.pinned", details: { name: "utility" } });
    const gone = await s.call("DELETE", "/api/slots/utility?force=true");
    expect(gone.status).toBe(200);
    expect(gone.body.files).toEqual(["slots/utility.toml"]);
    expect(existsSync(file("utility"))).toBe(false);
    expect((await s.call("GET", `/api/slots/by-id/${id}`)).status).toBe(404);
    // upstreams.toml and the forge stack name coder: deleting it would break the tree, so nothing is written
    const referenced = await s.call("DELETE", "/api/slots/coder");
    expect(referenced.status).toBe(422);
    expect(referenced.body.error.details.diagnostics.map((d: any) => d.file)).toContain("upstreams.toml");
    expect(existsSync(file("coder"))).toBe(true);
  });
});

describe("a pinned slot moved and stopped in one change set", () => {
  it("is refused as slot.pinned without force, whichever way it goes (renamed then disabled, deleted, or moved out of slots/); a plain rename and a forced one pass", async () => {
    expect((await s.call("PUT", "/api/slots/utility/config", { body: { pinned: true } })).status).toBe(200);
    const before = readFileSync(join(s.config, "slots/utility.toml"), "utf8");
    const plan = (edits: unknown[], force?: boolean) => s.call("POST", "/api/plans", { body: { edits, ...(force ? { force } : {}) } });
    for (const edits of [
      [{ file: "slots/utility.toml", op: "rename", to: "slots/helper.toml" }, { file: "slots/helper.toml", op: "set", path: ["enabled"], value: false }],
      [{ file: "slots/utility.toml", op: "rename", to: "slots/helper.toml" }, { file: "slots/helper.toml", op: "delete" }],
      [{ file: "slots/utility.toml", op: "rename", to: "stacks/utility.toml" }],
      [{ file: "slots/utility.toml", op: "rename", to: "slots/helper.toml" }, { file: "slots/helper.toml", op: "rename", to: "slots/aide.toml" }, { file: "slots/aide.toml", op: "set", path: ["enabled"], value: false }],
      [{ file: "slots/utility.toml", op: "rename", to: "slots/helper.toml" }, { file: "slots/helper.toml", op: "set", path: ["pinned"], value: false }, { file: "slots/helper.toml", op: "set", path: ["enabled"], value: false }],
    ]) {
      const refused = await plan(edits);
      expect([refused.status, refused.body.error?.code], JSON.stringify(edits)).toEqual([409, "slot.pinned"]);
      expect(refused.body.error.details).toEqual({ name: "utility" });
    }
    const moved = await plan([{ file: "slots/utility.toml", op: "rename", to: "slots/helper.toml" }]);
    expect(moved.status, JSON.stringify(moved.body)).toBe(201);
    const forced = await plan([{ file: "slots/utility.toml", op: "rename", to: "slots/helper.toml" }, { file: "slots/helper.toml", op: "delete" }], true);
    expect(forced.status, JSON.stringify(forced.body)).toBe(201);
    expect(readFileSync(join(s.config, "slots/utility.toml"), "utf8")).toBe(before);
  });
});

describe("a pinned slot while the tree on disk does not compile (a hand edit in progress)", () => {
  it("is judged as the box runs it, by the last tree that compiled: a change that fixes the typo and stops or deletes it is slot.pinned without force", async () => {
    const file = join(s.config, "slots/chat.toml");
    const text = readFileSync(file, "utf8");
    expect(text).toContain("pinned = true");
    // A typo in another file: the tree on disk no longer compiles.
    const utility = join(s.config, "slots/utility.toml");
    writeFileSync(utility, readFileSync(utility, "utf8").replace("port = 8084", "port = 0"));
    expect((await s.hal0.box.snapshot()).model).toBeUndefined();
    const fix = { file: "slots/utility.toml", op: "set", path: ["port"], value: 8084 };
    for (const stop of [{ file: "slots/chat.toml", op: "set", path: ["enabled"], value: false }, { file: "slots/chat.toml", op: "delete" }]) {
      const refused = await s.call("POST", "/api/plans", { body: { edits: [fix, stop] } });
      expect([refused.status, refused.body.error?.code], JSON.stringify(refused.body)).toEqual([409, "slot.pinned"]);
    }
    const forced = await s.call("POST", "/api/plans", { body: { edits: [fix, { file: "slots/chat.toml", op: "set", path: ["enabled"], value: false }], force: true } });
    expect(forced.status, JSON.stringify(forced.body)).toBe(201);
    expect(readFileSync(file, "utf8")).toBe(text);
  });
});
