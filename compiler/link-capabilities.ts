import {
  BACKEND_KINDS, DEVICES, SLOT_CHILDREN,
  type Backend, type CapabilitiesFile, type Device, type Selection, type Slot, type SlotType,
} from "../schema/index.js";
import type { Catalog } from "./link-slots.js";
import type { CompiledCapabilities } from "./model.js";
import type { Parsed, ResourceFiles } from "./read.js";
import type { Reporter } from "./report.js";
import { didYouMean } from "./suggest.js";

type File = Parsed<CapabilitiesFile>;

/**
 * capabilities.toml against the rest of the tree: backend and catalog ids are
 * unique; each selection names an existing slot, a child that slot's type has,
 * a model of the type that child needs, a declared backend, and a backend that
 * can run that model (its kind serves the model's type, on a device both share).
 */
export function linkCapabilities(file: File | undefined, slots: ResourceFiles<Slot>, catalog: Catalog, reporter: Reporter): void {
  if (!file) return;
  uniqueIds(file, "backend", file.value.backend, reporter);
  uniqueIds(file, "catalog", file.value.catalog, reporter);
  const backends = new Map<string, { backend: Backend; index: number }>();
  file.value.backend.forEach((backend, index) => { if (!backends.has(backend.id)) backends.set(backend.id, { backend, index }); });
  for (const slot of Object.keys(file.value.selection).sort()) {
    if (!slots.names.has(slot)) {
      reporter.report("capability.unknown_slot", { file: file.file, path: ["selection", slot] }, `unknown slot \`${slot}\``,
        `Selections are keyed by slot name, and there is no slots/${slot}.toml.${didYouMean(slot, slots.names.keys())}`);
      continue;
    }
    const type = slots.valid.get(slot)?.value.type;
    const children = file.value.selection[slot]!;
    for (const child of Object.keys(children).sort()) {
      linkSelection({ file, slot, child, type, selection: children[child]!, backends, catalog }, reporter);
    }
  }
}

interface SelectionSite {
  readonly file: File;
  readonly slot: string;
  readonly child: string;
  /** The slot's type; undefined when its file is invalid (child rules are skipped). */
  readonly type?: SlotType;
  readonly selection: Selection;
  readonly backends: ReadonlyMap<string, { backend: Backend; index: number }>;
  readonly catalog: Catalog;
}

function linkSelection(s: SelectionSite, reporter: Reporter): void {
  const at = (key?: string) => ({ file: s.file.file, path: ["selection", s.slot, s.child, ...(key ? [key] : [])], target: key ? ("value" as const) : undefined });
  const allowed: Readonly<Record<string, SlotType>> | undefined = s.type === undefined ? undefined : SLOT_CHILDREN[s.type];
  if (allowed && !Object.hasOwn(allowed, s.child)) {
    const names = Object.keys(allowed);
    reporter.report("capability.unknown_child", at(), `${s.type} slot \`${s.slot}\` has no child capability \`${s.child}\``,
      names.length === 0 ? `A slot of type ${s.type} has no child capabilities.` : `The children of a slot of type ${s.type} are ${names.map((n) => `\`${n}\``).join(", ")}.${didYouMean(s.child, names)}`);
  }
  const model = s.catalog.models.get(s.selection.model);
  if (!model) {
    if (s.catalog.modelsKnown) {
      reporter.report("capability.unknown_model", at("model"), `unknown model \`${s.selection.model}\``,
        `models.toml defines no model \`${s.selection.model}\`.${didYouMean(s.selection.model, s.catalog.models.keys())}`);
    }
  } else if (allowed?.[s.child] !== undefined && allowed[s.child] !== model.type) {
    reporter.report("capability.invalid_selection", at("model"), `\`${s.selection.model}\` is of type ${model.type}; \`${s.child}\` needs type ${allowed[s.child]}`,
      `The \`${s.child}\` child of a slot of type ${s.type} uses a model of type ${allowed[s.child]}; pick one from models.toml.`);
  }
  if (s.selection.backend === undefined) return;
  const declared = s.backends.get(s.selection.backend);
  if (!declared) {
    reporter.report("capability.unknown_backend", at("backend"), `unknown backend \`${s.selection.backend}\``,
      `No \`[[backend]]\` of capabilities.toml has id \`${s.selection.backend}\`.${didYouMean(s.selection.backend, s.backends.keys())}`);
    return;
  }
  if (model) checkPair(s, declared, model.type, model.devices, reporter);
}

/** A backend runs a model when its kind serves the model's type on a device the backend, the model and the selection all allow. */
function checkPair(s: SelectionSite, declared: { backend: Backend; index: number }, type: SlotType, modelDevices: readonly Device[], reporter: Reporter): void {
  const { backend, index } = declared;
  const serves: readonly SlotType[] = BACKEND_KINDS[backend.kind];
  const devices = DEVICES.filter((d) => allows(backend.devices, d) && allows(modelDevices, d) && (s.selection.device === undefined || s.selection.device === d));
  const why = !serves.includes(type)
    ? `backend kind ${backend.kind} serves ${serves.join(", ")} models, not ${type}`
    : devices.length === 0 ? `no device suits \`${backend.id}\` (${list(backend.devices)}), the model (${list(modelDevices)})${s.selection.device ? ` and the selection (${s.selection.device})` : ""}` : undefined;
  if (why === undefined) return;
  reporter.report("capability.illegal_backend_model_pair", { file: s.file.file, path: ["selection", s.slot, s.child, "backend"], target: "value" },
    `backend \`${backend.id}\` cannot run \`${s.selection.model}\``, `${why[0]!.toUpperCase()}${why.slice(1)}.`,
    [{ file: s.file.file, path: ["backend", index, "id"], target: "value", message: `backend \`${backend.id}\` is declared here` }]);
}

function uniqueIds(file: File, table: "backend" | "catalog", rows: ReadonlyArray<{ id: string }>, reporter: Reporter): void {
  const seen = new Map<string, number>();
  rows.forEach((row, index) => {
    const first = seen.get(row.id);
    if (first === undefined) return void seen.set(row.id, index);
    reporter.report("capability.duplicate_id", { file: file.file, path: [table, index, "id"], target: "value" }, `a second ${table} with id \`${row.id}\``,
      `Each \`[[${table}]]\` has its own id.`, [{ file: file.file, path: [table, first, "id"], target: "value", message: "first defined here" }]);
  });
}

/** The compiled capabilities: the file's rows, selections in sorted order. */
export function compileCapabilities(file: File | undefined): CompiledCapabilities {
  const value = file?.value;
  const selections: Record<string, Record<string, Selection>> = {};
  for (const slot of Object.keys(value?.selection ?? {}).sort()) {
    const children = value!.selection[slot]!;
    selections[slot] = Object.fromEntries(Object.keys(children).sort().map((child) => [child, children[child]!]));
  }
  return { file: file?.file, backends: value?.backend ?? [], catalogs: value?.catalog ?? [], selections };
}

function allows(list: readonly Device[], device: Device): boolean {
  return list.length === 0 || list.includes(device);
}

function list(devices: readonly Device[]): string {
  return devices.length === 0 ? "any device" : devices.join(", ");
}
