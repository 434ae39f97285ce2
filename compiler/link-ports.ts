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
  /** `[placement] node` (swarm): the slot shares a machine only with slots pinned to the same node. */
  readonly node?: string;
}

export function placeSlot(name: string, { file, value }: Parsed<Slot>, catalog: Catalog): PlacedSlot {
  const profile = catalog.profiles.get(value.profile);
  const device = value.placement.device ?? (profile ? defaultDevice(profile) : undefined);
  return { name, file, port: value.port, enabled: value.enabled, type: value.type, device, node: value.placement.node };
}

export function checkPorts(slots: readonly PlacedSlot[], catalog: Catalog, reporter: Reporter): void {
  const { settings, settingsKnown } = catalog;
  // Under swarm, slots pinned to different nodes may share a port; a slot placed by labels alone may land on any node, so its port is unique box-wide.
  const swarm = settingsKnown && settings.slots.runtime === "swarm";
  const mayMeet = (a: PlacedSlot, b: PlacedSlot) => !swarm || a.node === undefined || b.node === undefined || a.node === b.node;
  const byPort = new Map<number, PlacedSlot[]>();
  for (const slot of slots) {
    const site = { file: slot.file, path: ["port"], target: "value" as const };
    if (settingsKnown && (slot.port < settings.slots.port_range_start || slot.port > settings.slots.port_range_end)) {
      reporter.report("slot.port_out_of_range", site, `port ${slot.port} is outside ${settings.slots.port_range_start}..${settings.slots.port_range_end}`,
        `Slot ports must be within [slots] port_range_start..port_range_end of hal0.toml.`, settingsSite(catalog, ["slots", "port_range_start"], "the port range"));
    }
    if (!slot.enabled) continue;
    const first = byPort.get(slot.port)?.find((s) => mayMeet(s, slot));
    if (first) {
      const where = swarm && slot.node !== undefined && first.node === slot.node ? ` on node ${slot.node}` : "";
      const why = swarm ? (slot.node === undefined || first.node === undefined ? "a slot placed by labels alone may run on any node, so its port must be unique across the box" : "two slots on one node cannot share a port") : "two enabled slots cannot share a port";
      reporter.report("slot.port_conflict", site, `port ${slot.port} is already used by slot \`${first.name}\`${where}`,
        `${why[0]!.toUpperCase()}${why.slice(1)}; give \`${slot.name}\` another one, or disable one of them.`, [{ file: first.file, path: ["port"], target: "value", message: `slot \`${first.name}\` uses port ${slot.port}` }]);
    } else byPort.set(slot.port, [...(byPort.get(slot.port) ?? []), slot]);
    if (settingsKnown && slot.port === settings.server.port) {
      reporter.report("slot.port_conflict", site, `port ${slot.port} is hal0's own server port`, `[server] port of hal0.toml is ${settings.server.port}; a slot cannot use it.`,
        settingsSite(catalog, ["server", "port"], "hal0 serves on this port"));
    }
  }
}

export function checkCapacity(slots: readonly PlacedSlot[], catalog: Catalog, reporter: Reporter): void {
  // Under swarm, max_slots and the NPU are per node, and known only for slots pinned to one (`[placement] node`); where Swarm puts the others is observed.
  const swarm = catalog.settingsKnown && catalog.settings.slots.runtime === "swarm";
  const groups = new Map<string, PlacedSlot[]>();
  for (const s of slots) {
    if (!s.enabled || (swarm && s.node === undefined)) continue;
    const key = swarm ? s.node! : "";
    const group = groups.get(key);
    if (group) group.push(s);
    else groups.set(key, [s]);
  }
  for (const [node, enabled] of [...groups].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const on = swarm ? ` on node ${node}` : "";
    const max = catalog.settings.slots.max_slots;
    if (catalog.settingsKnown && max > 0 && enabled.length > max) {
      const over = enabled.slice(max);
      reporter.report("slot.max_slots_exceeded", { file: catalog.settingsFile ?? over[0]!.file, path: catalog.settingsFile ? ["slots", "max_slots"] : ["enabled"], target: "value" },
        `${enabled.length} enabled slots${on}, max_slots is ${max}${swarm ? " per node" : ""}`, `Disable ${enabled.length - max} slot(s)${on}${swarm ? ", pin them to another node" : ""} or raise [slots] max_slots.`,
        over.map((s) => ({ file: s.file, path: ["enabled"], message: `slot \`${s.name}\` is enabled beyond the limit${on}` })));
    }
    const npu = enabled.filter((s) => s.device === "npu" && s.type === "llm");
    for (const extra of npu.slice(1)) {
      reporter.report("slot.npu_exclusivity_violation", deviceSite(extra, reporter), `the NPU${on} already runs llm slot \`${npu[0]!.name}\``,
        `At most one enabled llm slot can be placed on the NPU${swarm ? " of a node" : ""}.`, [{ ...deviceSite(npu[0]!, reporter), message: `slot \`${npu[0]!.name}\` is on the NPU${on}` }]);
    }
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
