import { z } from "zod";
import { ProfileName, ResourceId, Slot, type Settings } from "../schema/index.js";
import { checkEnv, checkedWords } from "./catalog.js";
import type { CompiledModelFacts, CompiledProfile, ResolvedSlot } from "./model.js";
import { tableOf, validPart, type Parsed, type ResourceFiles } from "./read.js";
import type { Reporter } from "./report.js";
import { defaultDevice, resolveSlot, type ResolveFacts, type SlotInput } from "./resolve.js";
import { checkCapacity, checkPorts, placeSlot, type PlacedSlot } from "./link-ports.js";
import { didYouMean } from "./suggest.js";

/** Slot types that cannot run without a model. */
const NEEDS_MODEL = new Set(["llm", "embedding", "reranking"]);

export interface Catalog {
  readonly settings: Settings;
  /** False when hal0.toml is present but invalid: settings-dependent rules are skipped. */
  readonly settingsKnown: boolean;
  readonly settingsFile?: string;
  readonly profiles: ReadonlyMap<string, CompiledProfile>;
  readonly profilesKnown: boolean;
  readonly models: ReadonlyMap<string, CompiledModelFacts>;
  readonly modelsKnown: boolean;
}

/**
 * Links every valid slot to its profile and model, then resolves it. A slot
 * file that did not validate is checked too on what is valid of it: its
 * profile and model references, its `[server] extra_args`, and its port
 * (when port, enabled, type and placement are valid, it holds its port).
 */
export function linkSlots(slots: ResourceFiles<Slot>, catalog: Catalog, reporter: Reporter, facts: ResolveFacts = {}): Map<string, ResolvedSlot> {
  const out = new Map<string, ResolvedSlot>();
  for (const name of [...slots.valid.keys()].sort()) {
    const { file, value: slot } = slots.valid.get(name)!;
    const input = linkSlot(name, file, slot, catalog, reporter);
    if (input) out.set(name, resolveSlot(input, catalog.settings, reporter, facts));
  }
  for (const name of [...slots.broken.keys()].sort()) linkBrokenSlot(slots.broken.get(name)!, catalog, reporter);
  // Ports, capacity and the NPU are checked for every slot that holds a port,
  // linked or not: a slot with a typo in its profile still holds its port.
  const placed: PlacedSlot[] = [];
  for (const name of [...slots.names.keys()].sort()) {
    const valid = slots.valid.get(name);
    const broken = valid ? undefined : slots.broken.get(name);
    if (valid) placed.push(placeSlot(name, valid, catalog));
    else if (broken) placed.push(...placeBrokenSlot(name, broken, catalog));
  }
  checkPorts(placed, catalog, reporter);
  checkCapacity(placed, catalog, reporter);
  return out;
}

function linkSlot(name: string, file: string, slot: Slot, catalog: Catalog, reporter: Reporter): SlotInput | undefined {
  const extraArgs = checkedWords(slot.server.extra_args, { file, path: ["server", "extra_args"], target: "value" }, reporter);
  checkEnv(slot.server.env, ["server", "env"], file, reporter);
  // Both references are checked, so one run reports every broken one.
  const { profile, model } = checkReferences(file, slot.profile, slot.model, catalog, reporter);
  if (!profile || (slot.model !== undefined && !model)) return undefined;
  checkSlotFit(name, file, slot, profile, model, catalog, reporter);
  return { name, file, slot, profile, model, extraArgs };
}

/** The slot's profile and model, each reported when the catalog knows its kind and has no such entry. */
function checkReferences(file: string, profileName: string | undefined, modelId: string | undefined, catalog: Catalog, reporter: Reporter): { profile?: CompiledProfile; model?: CompiledModelFacts } {
  const profile = profileName === undefined ? undefined : catalog.profiles.get(profileName);
  if (profileName !== undefined && !profile && catalog.profilesKnown) {
    reporter.report("slot.unknown_profile", { file, path: ["profile"], target: "value" }, `unknown profile \`${profileName}\``,
      `No profile \`${profileName}\` in profiles.toml or the built-in seeds.${didYouMean(profileName, catalog.profiles.keys())}`);
  }
  const model = modelId === undefined ? undefined : catalog.models.get(modelId);
  if (modelId !== undefined && !model && catalog.modelsKnown) {
    reporter.report("slot.unknown_model", { file, path: ["model"], target: "value" }, `unknown model \`${modelId}\``,
      `models.toml defines no model \`${modelId}\`.${didYouMean(modelId, catalog.models.keys())}`);
  }
  return { profile, model };
}

/** The rules of one slot that read only keys valid on their own in a slot file that did not validate. */
function linkBrokenSlot({ file, value: raw }: Parsed<Record<string, unknown>>, catalog: Catalog, reporter: Reporter): void {
  const extraArgs = tableOf(raw.server)?.extra_args;
  if (typeof extraArgs === "string") checkedWords(extraArgs, { file, path: ["server", "extra_args"], target: "value" }, reporter);
  checkReferences(file, validPart(ProfileName, raw.profile), validPart(ResourceId, raw.model), catalog, reporter);
}

/** What of a slot decides its port and device, unknown keys beside them ignored. */
const SlotPlace = z.object({ port: Slot.shape.port, enabled: Slot.shape.enabled, type: Slot.shape.type, placement: Slot.shape.placement });

function placeBrokenSlot(name: string, { file, value: raw }: Parsed<Record<string, unknown>>, catalog: Catalog): PlacedSlot[] {
  const place = validPart(SlotPlace, raw);
  if (place === undefined) return [];
  const profileName = validPart(ProfileName, raw.profile);
  const profile = profileName === undefined ? undefined : catalog.profiles.get(profileName);
  const device = place.placement.device ?? (profile ? defaultDevice(profile) : undefined);
  return [{ name, file, port: place.port, enabled: place.enabled, type: place.type, device }];
}

function checkSlotFit(name: string, file: string, slot: Slot, profile: CompiledProfile, model: CompiledModelFacts | undefined, catalog: Catalog, reporter: Reporter): void {
  if (slot.enabled && slot.model === undefined && NEEDS_MODEL.has(slot.type)) {
    reporter.report("slot.model_required", { file, path: ["model"] }, `${slot.type} slot \`${name}\` names no model`, `An enabled ${slot.type} slot needs \`model = "<model id>"\`; disable the slot or name a model.`);
  }
  if (model && model.type !== slot.type) {
    reporter.report("slot.model_type_mismatch", { file, path: ["model"], target: "value" }, `model \`${model.id}\` is ${model.type}, the slot is ${slot.type}`,
      `${article(slot.type)} ${slot.type} slot serves ${slot.type} models; \`${model.id}\` has type = "${model.type}" in models.toml.`, [modelSite(model, "type")]);
  }
  const device = slot.placement.device ?? defaultDevice(profile);
  if (!deviceFits(device, profile)) {
    reporter.report("profile.device_class_mismatch", { file, path: slot.placement.device ? ["placement", "device"] : ["profile"], target: "value" },
      `device ${device} does not fit profile \`${profile.name}\``,
      `Profile \`${profile.name}\` is device_class "${profile.device_class}"${profile.backend ? ` with backend "${profile.backend}"` : ""}; it cannot run on ${device}.`, profileSite(profile));
  }
  if (model && model.devices.length > 0 && !model.devices.includes(device)) {
    reporter.report("slot.device_unsupported", { file, path: slot.placement.device ? ["placement", "device"] : ["model"], target: "value" },
      `model \`${model.id}\` does not list ${device}`, `models.toml lists ${model.devices.join(", ")} for \`${model.id}\`.`, [modelSite(model, "devices")]);
  }
  const runtime = catalog.settings.slots.runtime;
  if (slot.enabled && runtime !== "process" && profile.image === undefined) {
    reporter.report("profile.image_required", { file, path: ["profile"], target: "value" }, `profile \`${profile.name}\` has no image`,
      `The ${runtime} runtime runs each slot from its profile's image; set \`image\` on profile \`${profile.name}\`.`, profileSite(profile));
  }
  if (catalog.settingsKnown && runtime !== "swarm") {
    for (const key of ["node", "labels"] as const) {
      if (key === "labels" ? Object.keys(slot.placement.labels).length === 0 : slot.placement.node === undefined) continue;
      reporter.report("slot.placement_ignored", { file, path: ["placement", key], target: "key" }, `\`[placement] ${key}\` places a slot on a node of a swarm; this box's runtime is ${runtime}`,
        `Only \`[slots] runtime = "swarm"\` runs slots on several machines; on one box \`${key}\` is ignored. Remove it, or set runtime = "swarm" in hal0.toml.`);
    }
  }
}

function deviceFits(device: string, profile: CompiledProfile): boolean {
  switch (profile.device_class) {
    case "cpu": return device === "cpu";
    case "npu": return device === "npu";
    case "img": return device.startsWith("gpu-");
    case "gpu": return profile.backend === undefined ? device.startsWith("gpu-") : device === `gpu-${profile.backend}`;
  }
}

function modelSite(model: CompiledModelFacts, key: string) {
  return { file: "models.toml", path: ["model", model.id, key], target: "value" as const, message: `model \`${model.id}\`` };
}

function profileSite(profile: CompiledProfile) {
  return profile.origin === "file" ? [{ file: "profiles.toml", path: ["profile", profile.name], message: `profile \`${profile.name}\` is defined here` }] : [];
}

/** "A" or "An" before a slot type. */
function article(word: string): string {
  return /^[aeiou]/.test(word) ? "An" : "A";
}
