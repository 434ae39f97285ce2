import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import * as digest from "../../reconciler/digest.js";
import * as hermesPlan from "../../reconciler/hermes-plan.js";
import { PROJECT, RUNNER } from "../reconciler/process-helpers.js";
import { startTestServer, type TestServer } from "./harness.js";

// The planner's whole-box work, counted (the real functions underneath): the digests of every
// observed resource a plan's base holds, and each Hermes profile's plan.
vi.mock("../../reconciler/digest.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../reconciler/digest.js")>();
  return { ...real, observedDigests: vi.fn(real.observedDigests) };
});
vi.mock("../../reconciler/hermes-plan.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../reconciler/hermes-plan.js")>();
  return { ...real, planHermesProfile: vi.fn(real.planHermesProfile) };
});
const digests = vi.mocked(digest.observedDigests);
const hermesPlans = vi.mocked(hermesPlan.planHermesProfile);

/**
 * service_list prices each slot's actions with the planner. On a box of many
 * slots and Hermes profiles that must be one slot's plan per action, not a
 * whole plan of the box per slot (which made GET /api/services on a box of
 * 1000 slots and 50 profiles take most of a minute, and service_action, which
 * looks its service up in the list, as long).
 */
const SLOTS = 60;
const PROFILES = 8;
const base = mkdtempSync(join(tmpdir(), "hal0-services-scale-"));
let s: TestServer & { dir: string };

beforeAll(async () => {
  const box = join(base, "box");
  mkdirSync(join(box, "slots"), { recursive: true });
  writeFileSync(join(box, "hal0.toml"), `[slots]\nport_range_start = 20000\nport_range_end = 21000\n\n[reconcile]\ninterval_s = 3600\n\n[hermes]\nhome = "${join(base, "hermes")}"\n`);
  writeFileSync(join(box, "profiles.toml"), `[profile.fake]\nrunner = ["node", ${JSON.stringify(RUNNER)}]\ndevice_class = "cpu"\n`);
  writeFileSync(join(box, "models.toml"), `[model.tiny]\npath = ${JSON.stringify(join(PROJECT, "fixtures/box/models/Qwen3-4B-Q4_K_M.gguf"))}\n`);
  for (let i = 0; i < SLOTS; i++) {
    // Half enabled (stop and restart priced), half disabled (start priced); none is started.
    writeFileSync(join(box, `slots/s${i}.toml`), `profile = "fake"\nmodel = "tiny"\nport = ${20000 + i}\ntype = "llm"\nenabled = ${i % 2 === 0}\n\n[placement]\ndevice = "cpu"\n`);
  }
  for (let i = 0; i < PROFILES; i++) {
    mkdirSync(join(base, `hermes/profiles/p${i}`), { recursive: true });
    writeFileSync(join(base, `hermes/profiles/p${i}/config.yaml`), "model:\n  default: x\n");
  }
  s = await startTestServer({ box });
});

afterAll(async () => {
  await s?.close();
  rmSync(base, { recursive: true, force: true });
});

beforeEach(() => {
  digests.mockClear();
  hermesPlans.mockClear();
});

describe("the services of a box of many slots and Hermes profiles", () => {
  it("GET /api/services prices every slot's actions without planning the whole box once per slot", async () => {
    const res = await s.call("GET", "/api/services");
    expect(res.status).toBe(200);
    const slots = (res.body.services as any[]).filter((x) => x.kind === "slot");
    expect(slots).toHaveLength(SLOTS);
    expect(slots.find((x) => x.id === "slot.s0").actions).toEqual([
      { action: "stop", cost: expect.objectContaining({ plan: { action: "no-op", reason: "disabled" } }) },
      { action: "restart", cost: expect.objectContaining({ plan: { action: "create", reason: "new" } }) },
    ]);
    expect(slots.find((x) => x.id === "slot.s1").actions).toEqual([{ action: "start", cost: expect.objectContaining({ plan: { action: "create", reason: "new" } }) }]);
    // 90 actions priced: no digest of the box's resources and no Hermes profile planned for any of them.
    expect(digests.mock.calls.length).toBe(0);
    expect(hermesPlans.mock.calls.length).toBe(0);
  });

  it("service_action on one slot looks it up without a whole plan per slot either", async () => {
    const res = await s.call("POST", "/api/services/slot.s1/action", { body: { action: "restart" } });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe("service.action_not_allowed");
    expect(digests.mock.calls.length).toBe(0);
    expect(hermesPlans.mock.calls.length).toBe(0);
  });
});
