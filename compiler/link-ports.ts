import type { Device, Slot, SlotType } from "../schema/index.js";
import type { Catalog } from "./link-slots.js";
import type { Parsed } from "./read.js";
import type { Reporter } from "./report.js";
import { defaultDevice } from "./resolve.js";

/** What the box-wide slot rules need of a slot; known from its file alone. */
export interface PlacedSlot {
  readonly name: string;
  readonly file: string;
  readonly port: number;
  readonly enabled: boolean;
  readonly type: SlotType;
  /** From `[placement] device`, else from the profile when it is known. */
  readonly device?: Device;
}

export function placeSlot(name: string, { file, value }: Parsed<Slot>, catalog: Catalog): PlacedSlot {
  const profile = catalog.profiles.get(value.profile);
  const device = value.placement.device ?? (profile ? defaultDevice(profile) : undefined);
  return { name, file, port: value.port, enabled: value.enabled, type: value.type, device };
}

export function checkPorts(slots: readonly PlacedSlot[], catalog: Catalog, reporter: Reporter): void {
  const { settings, settingsKnown } = catalog;
  const byPort = new Map<number, PlacedSlot>();
  for (const slot of slots) {
    const site = { file: slot.file, path: ["port"], target: "value" as const };
    if (settingsKnown && (slot.port < settings.slots.port_range_start || slot.port > settings.slots.port_range_end)) {
      reporter.report("slot.port_out_of_range", site, `port ${slot.port} is outside ${settings.slots.port_range_start}..${settings.slots.port_range_end}`,
        `Slot ports must be within [slots] port_range_start..port_range_end of hal0.toml.`, settingsSite(catalog, ["slots", "port_range_start"], "the port range"));
    }
    if (!slot.enabled) continue;
    const first = byPort.get(slot.port);
    if (first) {
      reporter.report("slot.port_conflict", site, `port ${slot.port} is already used by slot \`${first.name}\``,
        `Two enabled slots cannot share a port; give \`${slot.name}\` another one, or disable one of them.`, [{ file: first.file, path: ["port"], target: "value", message: `slot \`${first.name}\` uses port ${slot.port}` }]);
    } else byPort.set(slot.port, slot);
    if (settingsKnown && slot.port === settings.server.port) {
      reporter.report("slot.port_conflict", site, `port ${slot.port} is hal0's own server port`, `[server] port of hal0.toml is ${settings.server.port}; a slot cannot use it.`,
        settingsSite(catalog, ["server", "port"], "hal0 serves on this port"));
    }
  }
}

export function checkCapacity(slots: readonly PlacedSlot[], catalog: Catalog, reporter: Reporter): void {
  const enabled = slots.filter((s) => s.enabled);
  const max = catalog.settings.slots.max_slots;
  if (catalog.settingsKnown && max > 0 && enabled.length > max) {
    const over = enabled.slice(max);
    reporter.report("slot.max_slots_exceeded", { file: catalog.settingsFile ?? over[0]!.file, path: catalog.settingsFile ? ["slots", "max_slots"] : ["enabled"], target: "value" },
      `${enabled.length} enabled slots, max_slots is ${max}`, `Disable ${enabled.length - max} slot(s) or raise [slots] max_slots.`,
      over.map((s) => ({ file: s.file, path: ["enabled"], message: `slot \`${s.name}\` is enabled beyond the limit` })));
  }
  const npu = enabled.filter((s) => s.device === "npu" && s.type === "llm");
  for (const extra of npu.slice(1)) {
    reporter.report("slot.npu_exclusivity_violation", deviceSite(extra, reporter), `the NPU already runs llm slot \`${npu[0]!.name}\``,
      "At most one enabled llm slot can be placed on the NPU.", [{ ...deviceSite(npu[0]!, reporter), message: `slot \`${npu[0]!.name}\` is on the NPU` }]);
  }
}

/** What puts a slot on its device: `[placement] device` when spelled, else the profile it derives from. */
function deviceSite(slot: PlacedSlot, reporter: Reporter) {
  const path = reporter.spells(slot.file, ["placement", "device"]) ? ["placement", "device"] : ["profile"];
  return { file: slot.file, path, target: "value" as const };
}

function settingsSite(catalog: Catalog, path: string[], message: string) {
  return catalog.settingsFile ? [{ file: catalog.settingsFile, path, target: "value" as const, message }] : [];
}
