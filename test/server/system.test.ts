import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, hostname, release, totalmem, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SPEC_VERSION } from "../../compiler/index.js";
import { AUTONOMOUS_READ_TOOLS, AUTONOMOUS_WRITE_TOOLS, GATED_TOOLS } from "../../schema/data/seed-tiers.js";
import { probeHardware } from "../../reconciler/host/hardware.js";
import { routeId } from "../../server/route.js";
import { settingsRoutes } from "../../server/routes/settings.js";
import { systemRoutes } from "../../server/routes/system.js";
import { captureIo } from "../cli/helpers.js";
import { main } from "../../cli/main.js";
import { startTestServer, type TestServer } from "./harness.js";

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => s.close());

const pkg = JSON.parse(readFileSync(join(import.meta.dirname, "../../package.json"), "utf8")) as { version: string };

describe("the route table", () => {
  it("aliases every settings and system route with its seed 001 tool, on the seed's exact route", () => {
    const seed = new Map([...AUTONOMOUS_READ_TOOLS, ...AUTONOMOUS_WRITE_TOOLS, ...GATED_TOOLS].map((t) => [t.tool, t.route]));
    for (const route of [...settingsRoutes, ...systemRoutes]) {
      expect(route.tools?.length, routeId(route)).toBeGreaterThan(0);
      for (const tool of route.tools!) expect(seed.get(tool), tool).toBe(routeId(route));
    }
  });
});

describe("ports, status, system info", () => {
  it("lists hal0's port and every slot's, with the range's free count", async () => {
    const res = await s.call("GET", "/api/ports");
    expect(res.status).toBe(200);
    const ports = res.body.ports as Array<{ port: number; owner: string; slot?: string; enabled?: boolean; running?: boolean; in_range: boolean }>;
    expect(ports[0]).toEqual({ port: 8080, owner: "hal0", host: "127.0.0.1", in_range: false });
    const slotFiles = readdirSync(join(s.config, "slots")).filter((f) => f.endsWith(".toml"));
    expect(ports.filter((p) => p.owner === "slot")).toHaveLength(slotFiles.length);
    expect(ports.find((p) => p.slot === "chat")).toMatchObject({ port: 8081, enabled: true, running: false, in_range: true });
    expect(ports.map((p) => p.port)).toEqual([...ports.map((p) => p.port)].sort((a, b) => a - b));
    const used = new Set(ports.filter((p) => p.in_range).map((p) => p.port)).size;
    expect(res.body.range).toEqual({ start: 8081, end: 8200, size: 120, used, free: 120 - used });
  });

  it("reports hal0's version, Node's, the spec version, uptime, runtime and revision", async () => {
    const res = await s.call("GET", "/api/status");
    expect(res.status).toBe(200);
    const { revision } = (await s.call("GET", "/api/settings")).body;
    expect(res.body).toMatchObject({ name: "hal0", version: pkg.version, node: process.version, spec_version: SPEC_VERSION, runtime: "process", revision, tree_valid: true });
    expect(res.body.uptime_s).toBeGreaterThanOrEqual(0);
  });

  it("describes the OS, the machine and the config and state folders", async () => {
    const res = await s.call("GET", "/api/system-info");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ kernel: release(), hostname: hostname(), config_dir: s.config, state_dir: s.state, node: { version: process.version, pid: process.pid } });
    expect(res.body.cpus.count).toBe(cpus().length);
    expect(res.body.memory.total_bytes).toBe(totalmem());
    expect(res.body.os.platform).toBe(process.platform);
  });

  it("answers a wrong method with 405 naming the allowed one", async () => {
    const res = await s.call("POST", "/api/status");
    expect(res.status).toBe(405);
    expect(res.body.error).toMatchObject({ code: "route.method_not_allowed", details: { allowed: ["GET", "HEAD"] } });
    expect((await s.call("GET", "/api/hardware/probe")).body.error.details.allowed).toEqual(["POST"]);
  });

  it("a route that takes no body refuses one with anything in it (a typo is never ignored); {} is no body", async () => {
    const typo = await s.call("POST", "/api/hardware/probe", { body: { forse: true } });
    expect([typo.status, typo.body.error?.code], JSON.stringify(typo.body)).toEqual([422, "validation.invalid"]);
    expect(typo.body.error.details.fields[0].loc).toEqual(["body"]);
    expect((await s.call("POST", "/api/hardware/probe", { body: {} })).status).toBe(200);
    // An agent's gated call with a stray field is refused, not queued as one more request for the same action.
    const agent = await s.call("POST", "/api/slots/chat/restart", { as: "agent:hermes__ops", body: { zzz: 1 } });
    expect([agent.status, agent.body.error?.code]).toEqual([422, "validation.invalid"]);
    expect(s.hal0.approvals.list("pending").filter((a) => a.tool === "slot_restart")).toEqual([]);
  });

  it("a static path with another method is tried as a param route with its params (a slot named like a static path), and a stream's HEAD is 405", async () => {
    // No slot `capacity`: the slot route answers for it (not 422 for a name it never got).
    const none = await s.call("DELETE", "/api/slots/capacity");
    expect([none.status, none.body.error?.code], JSON.stringify(none.body)).toEqual([404, "slot.not_found"]);
    // A slot of that name is deleted through the same route.
    const utility = readFileSync(join(s.config, "slots/utility.toml"), "utf8").replace(/^port = \d+$/m, "port = 8199");
    writeFileSync(join(s.config, "slots/capacity.toml"), utility);
    const deleted = await s.call("DELETE", "/api/slots/capacity");
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expect(existsSync(join(s.config, "slots/capacity.toml"))).toBe(false);
    const head = await s.call("HEAD", "/api/agent/approvals/events");
    expect(head.status).toBe(405);
    expect(head.headers.get("allow")).toBe("GET");
  });

  it("answers HEAD on every read route as its GET would, headers without a body; HEAD is allowed wherever GET is", async () => {
    const get = await s.call("GET", "/api/status");
    const head = await s.call("HEAD", "/api/status");
    expect(head.status).toBe(200);
    expect(head.body).toBe("");
    expect(head.headers.get("content-type")).toBe(get.headers.get("content-type"));
    expect(head.headers.get("x-request-id")).toBeTruthy();
    // A gated read refuses HEAD as it refuses GET, and a missing resource is the same 404.
    const anonymous = await s.call("HEAD", "/api/status", { headers: { authorization: "Bearer nope" } });
    expect(anonymous.status).toBe((await s.call("GET", "/api/status", { headers: { authorization: "Bearer nope" } })).status);
    expect((await s.call("HEAD", "/api/slots/nosuch")).status).toBe(404);
    expect((await s.call("HEAD", "/api/ports")).status).toBe(200);
    // A stream is not opened for HEAD, and an action has no HEAD: both 405, naming what is allowed.
    const stream = await s.call("HEAD", "/api/models/pulls/events");
    expect(stream.status).toBe(405);
    expect(stream.headers.get("allow")).toBe("DELETE, GET"); // DELETE: a pull named `events`
    const action = await s.call("HEAD", "/api/hardware/probe");
    expect(action.status).toBe(405);
    expect(action.headers.get("allow")).toBe("POST");
    // And a wrong method's Allow names HEAD beside GET.
    expect((await s.call("POST", "/api/status")).headers.get("allow")).toBe("GET, HEAD");
    // The operator's pages and their assets answer HEAD too.
    for (const page of ["/", "/status", "/assets/style.css", "/login"]) {
      const [g, h] = [await s.call("GET", page), await s.call("HEAD", page)];
      expect([h.status, h.headers.get("content-type")], page).toEqual([g.status, g.headers.get("content-type")]);
      expect(h.body, page).toBe("");
    }
  });

  it("a path with control characters (a NUL, an escape sequence, a line break, percent-encoded) is named in the message as sent, encoded, never raw", async () => {
    const missing = await s.call("GET", "/api/x%00%1b[31mRED%0a%C2%85");
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ code: "route.not_found", message: "no route for GET /api/x%00%1B[31mRED%0A%C2%85" });
    // A path a route has, with a method it does not take: the name segment is shown the same way.
    const refused = await s.call("PUT", "/api/status%07");
    const wrong = await s.call("PATCH", "/api/slots/a%1b]0;title%07");
    expect(refused.body.error.code).toBe("route.not_found");
    expect(refused.body.error.message).toBe("no route for PUT /api/status%07");
    expect(wrong.status).toBe(405);
    expect(wrong.body.error.message).toBe("PATCH is not allowed on /api/slots/a%1B]0;title%07");
  });

  it("a name with control characters quoted by a refusal (no slot, no plan, no upstream) is written out in the message, the line feeds of hal0's own messages kept", async () => {
    const slot = await s.call("GET", "/api/slots/a%1b[31m");
    expect(slot.status).toBe(404);
    expect(slot.body.error).toMatchObject({ code: "slot.not_found", message: "no slot `a\\u001b[31m`" });
    // details keep the name as it was given: a client compares it, and JSON carries it escaped.
    expect(slot.body.error.details.name).toBe("a\u001b[31m");
    const plan = await s.call("GET", "/api/plans/a%1b]0;title%07");
    expect(plan.body.error).toMatchObject({ code: "plan.not_found", message: "no plan a\\u001b]0;title\\u0007" });
    // A carriage return and a bidi override too; a tab and a line feed stay.
    const upstream = await s.call("GET", "/api/upstreams/a%0d%e2%80%aeb%09c%0a");
    expect(upstream.body.error.code).toBe("upstream.not_found");
    expect(upstream.body.error.message).toContain("a\\u000d\\u202eb\tc\n");
    for (const res of [slot, plan, upstream]) expect(res.body.error.message).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/);
  });

  it("a path only an in-process MCP probe has is no REST route: 404, not a 405 naming a method it refuses", async () => {
    for (const method of ["GET", "POST"]) {
      const res = await s.call(method, "/in-process/npu_status");
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe("route.not_found");
    }
  });
});

describe("hardware", () => {
  it("reads this machine's /proc and /sys, and reports what is not there as absent", async () => {
    const res = await s.call("GET", "/api/stats/hardware");
    expect(res.status).toBe(200);
    const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
    expect(res.body.cpu.logical).toBe(cpuinfo.match(/^processor\s*:/gm)!.length);
    expect(res.body.cpu.present).toBe(true);
    const memKb = Number(readFileSync("/proc/meminfo", "utf8").match(/^MemTotal:\s*(\d+)/m)![1]);
    expect(res.body.memory.total_bytes).toBe(memKb * 1024);
    expect(res.body.load.present).toBe(true);
    const cards = existsSync("/sys/class/drm") ? readdirSync("/sys/class/drm").filter((n) => /^card\d+$/.test(n)) : [];
    expect(res.body.gpus.devices.map((g: { card: string }) => g.card)).toEqual(cards.sort());
    expect(res.body.gpus.present).toBe(cards.length > 0);
    const accel = existsSync("/sys/class/accel") || existsSync("/dev/accel");
    if (!accel) expect(res.body.npus).toEqual({ present: false, devices: [] });
    if (!existsSync("/sys/class/hwmon")) expect(res.body.temperatures).toMatchObject({ present: false, sensors: [] });
  });

  it("serves one probe until a reprobe replaces it", async () => {
    const a = await s.call("GET", "/api/stats/hardware");
    await new Promise((r) => setTimeout(r, 5));
    expect((await s.call("GET", "/api/stats/hardware")).body.probed_at).toBe(a.body.probed_at);
    const fresh = await s.call("POST", "/api/hardware/probe");
    expect(fresh.status).toBe(200);
    expect(fresh.body.probed_at > a.body.probed_at).toBe(true);
    expect((await s.call("GET", "/api/stats/hardware")).body.probed_at).toBe(fresh.body.probed_at);
  });

  it("parses GPUs, NPUs and temperatures from a sysfs layout (a copy of a Strix Halo's files)", async () => {
    const root = mkdtempSync(join(tmpdir(), "hal0-sysfs-"));
    const put = (path: string, text: string) => {
      mkdirSync(dirname(join(root, path)), { recursive: true });
      writeFileSync(join(root, path), `${text}\n`);
    };
    try {
      put("sys/class/drm/card1/device/vendor", "0x1002");
      put("sys/class/drm/card1/device/device", "0x1586");
      put("sys/class/drm/card1/device/uevent", "DRIVER=amdgpu\nPCI_CLASS=38000\nPCI_SLOT_NAME=0000:c5:00.0");
      put("sys/class/drm/card1/device/mem_info_vram_total", "103079215104");
      put("sys/class/drm/card1-DP-1/status", "disconnected");
      put("sys/class/accel/accel0/device/vendor", "0x1022");
      put("sys/class/accel/accel0/device/device", "0x17f0");
      put("sys/class/accel/accel0/device/uevent", "DRIVER=amdxdna");
      put("sys/class/hwmon/hwmon2/name", "k10temp");
      put("sys/class/hwmon/hwmon2/temp1_input", "48250");
      put("sys/class/hwmon/hwmon2/temp1_label", "Tctl");
      const hw = await probeHardware(root);
      expect(hw.gpus.devices).toEqual([{ card: "card1", vendor_id: "0x1002", vendor: "AMD", device_id: "0x1586", driver: "amdgpu", pci_slot: "0000:c5:00.0", vram_total_bytes: 103079215104, gtt_total_bytes: null }]);
      expect(hw.npus).toEqual({ present: true, devices: [{ name: "accel0", source: "/sys/class/accel", vendor_id: "0x1022", vendor: "AMD", device_id: "0x17f0", driver: "amdxdna" }] });
      expect(hw.temperatures.sensors).toEqual([{ chip: "k10temp", sensor: "temp1", label: "Tctl", celsius: 48.25 }]);
      expect(hw.cpu).toMatchObject({ present: false, logical: 0, model: null, cores: null });
      expect(hw.memory).toMatchObject({ present: false, total_bytes: null });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("health, doctor, features", () => {
  it("is ok on a good box, with each check named", async () => {
    const res = await s.call("GET", "/api/health/system");
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("ok");
    expect(res.body.checks.map((c: { check: string }) => c.check)).toEqual(["tree", "state_folder", "runtime", "database"]);
    expect(res.body.checks.find((c: { check: string }) => c.check === "database").status).toBe("ok");
  });

  it("returns the same rows as hal0 doctor --json", async () => {
    const res = await s.call("GET", "/api/doctor");
    expect(res.status).toBe(200);
    const io = captureIo({}, s.config);
    await main(["doctor", "--json", "--config", s.config, "--state", s.state], io);
    expect(res.body).toEqual(JSON.parse(io.out()));
  });

  it("lists the features of this build with whether each is on", async () => {
    const res = await s.call("GET", "/api/features");
    expect(res.status).toBe(200);
    const on = Object.fromEntries(res.body.features.map((f: { name: string; enabled: boolean }) => [f.name, f.enabled]));
    expect(on).toMatchObject({ "runtime.process": true, "runtime.docker": false, memory: true, bridge: true, approvals: true, mcp: true, "drift.enforce": true });
    const put = await s.call("PUT", "/api/settings", { body: { bridge: { enabled: false }, memory: { enabled: false } } });
    expect(put.status).toBe(200);
    const after = Object.fromEntries((await s.call("GET", "/api/features")).body.features.map((f: { name: string; enabled: boolean }) => [f.name, f.enabled]));
    expect(after).toMatchObject({ bridge: false, memory: false });
  });

  it("turns degraded when the tree stops compiling, and the doctor says why", async () => {
    const file = join(s.config, "hal0.toml");
    const before = readFileSync(file, "utf8");
    writeFileSync(file, "[slots]\nmax_slots = \"lots\"\n");
    try {
      const res = await s.call("GET", "/api/health/system");
      expect(res.body.status).toBe("degraded");
      expect(res.body.checks[0]).toMatchObject({ check: "tree", status: "fail" });
      const doc = await s.call("GET", "/api/doctor");
      expect(doc.body.ok).toBe(false);
      expect(doc.body.rows.find((r: { check: string }) => r.check === "runtime")).toMatchObject({ status: "warn", message: "not checked: the config tree does not compile" });
    } finally {
      writeFileSync(file, before);
    }
  });
});
