import { describe, expect, it } from "vitest";
import { compile, sourceTree, type ImageDigests, type Model } from "../../compiler/index.js";
import { imageMoves } from "../../reconciler/digest.js";
import { withImageId } from "../../reconciler/drivers/docker-container.js";
import { formatPlan } from "../../reconciler/format.js";
import type { Inventory, Observed } from "../../reconciler/observed.js";
import { planChanges } from "../../reconciler/plan.js";
import { slotView } from "../../reconciler/view.js";

/**
 * A docker slot's spec carries its image's digest (`observed.image_digest`,
 * observed by the runner probe and handed to compile as data), so an image
 * whose tag a sync moved re-plans the slots that run it, and the plan says so.
 */
const IMAGE = "127.0.0.1:5000/hal0/runner:1";
const OLD = `sha256:${"a".repeat(64)}`;
const NEW = `sha256:${"b".repeat(64)}`;

function box(runtime: "docker" | "process", images?: ImageDigests, image = IMAGE): Model {
  const { model, diagnostics } = compile(sourceTree("/box", [
    ["hal0.toml", `[slots]\nruntime = "${runtime}"\n`],
    ["profiles.toml", `[profile.fake]\nimage = ${JSON.stringify(image)}\nrunner = ["hal0-fake-runner"]\ndevice_class = "cpu"\n\n[profile.other]\nimage = "other:1"\nrunner = ["hal0-fake-runner"]\ndevice_class = "cpu"\n`],
    ["slots/tts.toml", 'profile = "fake"\ntype = "tts"\nport = 8090\n'],
    ["slots/stt.toml", 'profile = "other"\ntype = "transcription"\nport = 8091\n'],
  ]), [], images === undefined ? {} : { images });
  expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);
  return model!;
}

/** The box as hal0 started `model`: every slot running with its record, in the inventory. */
function running(model: Model): { observed: Observed; inventory: Inventory } {
  const slots: Record<string, Observed["slots"][string]> = {};
  const inv: Record<string, Inventory["slots"][string]> = {};
  for (const s of Object.values(model.slots)) {
    slots[s.name] = { name: s.name, running: true, health: "ok", record: { view: slotView(s), started_at: "2026-12-01T00:00:00.000Z" } };
    inv[s.name] = { created_at: "2026-12-01T00:00:00.000Z", runtime: model.settings.slots.runtime, spec_hash: s.spec_hash };
  }
  return { observed: { slots, foreign_ports: {}, applied_settings: model.settings }, inventory: { version: 1, box: "b", slots: inv } };
}

describe("observed.image_digest", () => {
  it("is in a docker slot's spec when its image's digest is known, and in no process slot's", () => {
    const docker = box("docker", new Map([[IMAGE, OLD]]));
    expect(docker.slots.tts!.spec.observed).toEqual({ image_digest: OLD });
    expect(docker.slots.stt!.spec.observed).toBeUndefined(); // other:1 is not present: no digest
    expect(box("docker").slots.tts!.spec.observed).toBeUndefined();
    const proc = box("process", new Map([[IMAGE, OLD]]));
    expect(proc.slots.tts!.spec.observed).toBeUndefined();
    expect(proc.slots.tts!.spec_hash).toBe(box("process").slots.tts!.spec_hash);
  });

  it("a moved digest replaces only the slots of that image: observed_changed, and the plan says `image digest changed`", () => {
    const world = running(box("docker", new Map([[IMAGE, OLD], ["other:1", OLD]])));
    const same = planChanges(box("docker", new Map([[IMAGE, OLD], ["other:1", OLD]])), world.observed, world.inventory);
    expect(same.has_changes).toBe(false);
    const plan = planChanges(box("docker", new Map([[IMAGE, NEW], ["other:1", OLD]])), world.observed, world.inventory);
    const tts = plan.changes.find((c) => c.address === "slot.tts")!;
    expect(tts).toMatchObject({ action: "replace", reason: "observed_changed", changed_paths: ["observed.image_digest"] });
    expect(plan.changes.find((c) => c.address === "slot.stt")).toMatchObject({ action: "no-op", reason: "unchanged" });
    const text = formatPlan(plan);
    expect(text).toContain("-/+ slot.tts (observed_changed: image digest changed) [destructive] [downtime]");
    expect(text).toContain(`observed.image_digest: "${OLD}" → "${NEW}"`);
  });

  it("a saved plan made before the tag moved is stale naming the slot, its image and both ids (not only two plan ids)", () => {
    const world = running(box("docker", new Map([[IMAGE, OLD], ["other:1", OLD]])));
    const gone = { ...world.observed, slots: { stt: world.observed.slots.stt! } };
    const saved = planChanges(box("docker", new Map([[IMAGE, OLD], ["other:1", OLD]])), gone, world.inventory);
    const moved = planChanges(box("docker", new Map([[IMAGE, NEW], ["other:1", OLD]])), gone, world.inventory);
    expect(moved.id).not.toBe(saved.id);
    expect(imageMoves(saved, moved)).toEqual([`slot.tts: image ${IMAGE} was ${OLD} when planned; now ${NEW} (pulled or tagged since)`]);
    const removed = planChanges(box("docker", new Map([["other:1", OLD]])), gone, world.inventory);
    expect(imageMoves(saved, removed)).toEqual([`slot.tts: image ${IMAGE} was ${OLD} when planned; now not on the engine (removed or untagged since)`]);
    expect(imageMoves(saved, saved)).toEqual([]);
    // Another image named by the config is a config move, not this one.
    expect(imageMoves(saved, planChanges(box("docker", new Map([["other:2", NEW], ["other:1", OLD]]), "other:2"), gone, world.inventory))).toEqual([]);
  });

  it("a slot whose start pulled its image (its label has no digest) observed with the id its container runs: nothing to do for the same image, `image digest changed` for another, and a config change later is spec_changed, not drift", () => {
    const world = running(box("docker"));
    const tts = world.observed.slots.tts!;
    const filled = { ...world.observed, slots: { ...world.observed.slots, tts: { ...tts, record: { ...tts.record!, view: withImageId(tts.record!.view, OLD) } } } };
    expect(filled.slots.tts!.record!.view.spec_hash).toBe(box("docker", new Map([[IMAGE, OLD]])).slots.tts!.spec_hash);
    expect(planChanges(box("docker", new Map([[IMAGE, OLD]])), filled, world.inventory).has_changes).toBe(false);
    expect(formatPlan(planChanges(box("docker", new Map([[IMAGE, NEW]])), filled, world.inventory))).toContain("-/+ slot.tts (observed_changed: image digest changed)");
    // The inventory holds the hash hal0 started it with (the label's): another config is a spec change, also under drift = "warn".
    const edited = compile(sourceTree("/box", [
      ["hal0.toml", '[slots]\nruntime = "docker"\n\n[reconcile]\ndrift = "warn"\n'],
      ["profiles.toml", `[profile.fake]\nimage = ${JSON.stringify(IMAGE)}\nrunner = ["hal0-fake-runner"]\ndevice_class = "cpu"\n\n[profile.other]\nimage = "other:1"\nrunner = ["hal0-fake-runner"]\ndevice_class = "cpu"\n`],
      ["slots/tts.toml", 'profile = "fake"\ntype = "tts"\nport = 8092\n'],
      ["slots/stt.toml", 'profile = "other"\ntype = "transcription"\nport = 8091\n'],
    ]), [], { images: new Map([[IMAGE, OLD]]) }).model!;
    expect(planChanges(edited, filled, world.inventory).changes.find((c) => c.address === "slot.tts")).toMatchObject({ action: "replace", reason: "spec_changed" });
    // A label without an image (a process-like view) or one that records its digest is left as it is.
    expect(withImageId(tts.record!.view, undefined)).toBe(tts.record!.view);
    const known = running(box("docker", new Map([[IMAGE, OLD]]))).observed.slots.tts!.record!.view;
    expect(withImageId(known, NEW)).toBe(known);
  });

  it("a slot started before its digest was known is replaced once, saying `image digest first observed`", () => {
    const world = running(box("docker"));
    const plan = planChanges(box("docker", new Map([[IMAGE, NEW]])), world.observed, world.inventory);
    expect(formatPlan(plan)).toContain("-/+ slot.tts (observed_changed: image digest first observed)");
  });

  it("a running slot whose image's digest cannot be read now (the image removed, the engine not answering the probe) is left running, not replaced; the digest back, nothing changes", () => {
    const world = running(box("docker", new Map([[IMAGE, OLD], ["other:1", OLD]])));
    const plan = planChanges(box("docker", new Map([["other:1", OLD]])), world.observed, world.inventory);
    expect(plan.has_changes).toBe(false);
    expect(plan.changes.find((c) => c.address === "slot.tts")).toMatchObject({ action: "no-op", reason: "image_unobserved", destructive: false, downtime: false });
    expect(plan.warnings).toContainEqual(expect.objectContaining({ address: "slot.tts", code: "slot.image_missing", message: expect.stringContaining(`keeps running the image it was started with (${OLD})`) }));
    expect(planChanges(box("docker", new Map([[IMAGE, OLD], ["other:1", OLD]])), world.observed, world.inventory).has_changes).toBe(false);
    // Back as another image: that one is replaced.
    expect(planChanges(box("docker", new Map([[IMAGE, NEW], ["other:1", OLD]])), world.observed, world.inventory).changes.find((c) => c.address === "slot.tts")).toMatchObject({ action: "replace", reason: "observed_changed" });
  });

  it("a running slot whose profile now names another image, one the engine has not got yet, is replaced (its start pulls it with [slots] pull = true), not kept on the old one", () => {
    const world = running(box("docker", new Map([[IMAGE, OLD], ["other:1", OLD]])));
    const moved = "127.0.0.1:5000/hal0/runner:2";
    const plan = planChanges(box("docker", new Map([["other:1", OLD]]), moved), world.observed, world.inventory);
    const tts = plan.changes.find((c) => c.address === "slot.tts")!;
    expect(tts).toMatchObject({ action: "replace", reason: "spec_changed" });
    expect(tts.changed_paths).toContain("image");
    expect(plan.warnings.filter((w) => w.code === "slot.image_missing")).toEqual([]);
  });
});
