import { z } from "zod";
import {
  BACKEND_KINDS, Backend, CapabilitiesFile, CatalogSource, CHILD_NAME_PATTERN, DEVICES, SLOT_CHILDREN, SLOT_NAME_PATTERN, Selection,
  type Device, type Slot, type SlotType,
} from "../schema/index.js";
import type { Catalog } from "./link-slots.js";
import type { CompiledCapabilities } from "./model.js";
import { tableOf, validEntries, validPart, type Parsed, type ResourceFiles } from "./read.js";
import type { Reporter } from "./report.js";
import { didYouMean } from "./suggest.js";

type File = Parsed<CapabilitiesFile>;

/**
 * capabilities.toml against the rest of the tree: backend and catalog ids are
 * unique; each selection names an existing slot, a child that slot's type has,
 * a model of the type that child needs, a declared backend, and a backend that
 * can run that model (its kind serves the model's type, on a device both share).
 * A capabilities.toml that did not validate is checked too, over its rows and
 * selections that are valid on their own (not when its schema_version is one
 * hal0 does not read).
 */
export function linkCapabilities(file: File | undefined, broken: Parsed<Record<string, unknown>> | undefined, slots: ResourceFiles<Slot>, catalog: Catalog, reporter: Reporter): void {
  const view = file ? viewOfValid(file) : broken ? viewOfBroken(broken) : undefined;
  if (!view) return;
  uniqueIds(view.file, "backend", view.backend, reporter);
  uniqueIds(view.file, "catalog", view.catalog, reporter);
  const backends = new Map<string, { backend: Backend; index: number }>();
  for (const { index, entry: backend } of view.backend) if (!backends.has(backend.id)) backends.set(backend.id, { backend, index });
  for (const slot of Object.keys(view.selection).sort()) {
    if (!slots.names.has(slot)) {
      reporter.report("capability.unknown_slot", { file: view.file, path: ["selection", slot] }, `unknown slot \`${slot}\``,
        `Selections are keyed by slot name, and there is no slots/${slot}.toml.${didYouMean(slot, slots.names.keys())}`);
      continue;
    }
    const type = slots.valid.get(slot)?.value.type;
    const children = view.selection[slot]!;
    for (const child of Object.keys(children).sort()) {
      linkSelection({ file: view.file, slot, child, type, selection: children[child]!, backends, backendIds: view.backendIds, catalog }, reporter);
    }
  }
}

/** What the rules read of capabilities.toml: rows with their index in the file, selections by slot and child. */
interface CapabilitiesView {
  readonly file: string;
  readonly backend: ReadonlyArray<{ index: number; entry: Backend }>;
  readonly catalog: ReadonlyArray<{ index: number; entry: { id: string } }>;
  /**
   * Every `[[backend]]` id the file spells, valid row or not, and in a broken file the ids of the rows under a
   * misspelled top-level key (`[[backends]]`): a selection naming one is not an unknown backend.
   */
  readonly backendIds: ReadonlySet<string>;
  readonly selection: Readonly<Record<string, Readonly<Record<string, Selection>>>>;
}

function viewOfValid(file: File): CapabilitiesView {
  const { backend, catalog, selection } = file.value;
  return {
    file: file.file,
    backend: backend.map((entry, index) => ({ index, entry })),
    catalog: catalog.map((entry, index) => ({ index, entry })),
    backendIds: new Set(backend.map((b) => b.id)),
    selection,
  };
}

const SlotKey = z.string().regex(SLOT_NAME_PATTERN);
const ChildKey = z.string().regex(CHILD_NAME_PATTERN);

function viewOfBroken({ file, value: raw }: Parsed<Record<string, unknown>>): CapabilitiesView | undefined {
  if (raw.schema_version !== undefined && raw.schema_version !== 2) return undefined;
  // The rows of `[[backend]]` and of any top-level key the file does not have (`[[backends]]`: its own config.unknown_key).
  const rows = Object.entries(raw).flatMap(([key, value]) => ((key === "backend" || !Object.hasOwn(CapabilitiesFile.shape, key)) && Array.isArray(value) ? value : []));
  const selection: Record<string, Record<string, Selection>> = {};
  for (const [slot, children] of Object.entries(tableOf(raw.selection) ?? {})) {
    if (!SlotKey.safeParse(slot).success) continue;
    const valid: Record<string, Selection> = {};
    for (const [child, value] of Object.entries(tableOf(children) ?? {})) {
      const entry = ChildKey.safeParse(child).success ? validPart(Selection, value) : undefined;
      if (entry !== undefined) valid[child] = entry;
    }
    selection[slot] = valid;
  }
  return {
    file,
    backend: validEntries(Backend, raw.backend),
    catalog: validEntries(CatalogSource, raw.catalog),
    backendIds: new Set(rows.map((row) => tableOf(row)?.id).filter((id): id is string => typeof id === "string")),
    selection,
  };
}

interface SelectionSite {
  readonly file: string;
  readonly slot: string;
  readonly child: string;
  /** The slot's type; undefined when its file is invalid (child rules are skipped). */
  readonly type?: SlotType;
  readonly selection: Selection;
  readonly backends: ReadonlyMap<string, { backend: Backend; index: number }>;
  readonly backendIds: ReadonlySet<string>;
  readonly catalog: Catalog;
}

function linkSelection(s: SelectionSite, reporter: Reporter): void {
  const at = (key?: string) => ({ file: s.file, path: ["selection", s.slot, s.child, ...(key ? [key] : [])], target: key ? ("value" as const) : undefined });
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
  if (s.selection.backend === undefined) {
    if (model) checkDevice(s, model.devices, reporter);
    return;
  }
  const declared = s.backends.get(s.selection.backend);
  if (!declared) {
    // A row of a broken file that spells this id has its own diagnostic already.
    if (s.backendIds.has(s.selection.backend)) return;
    reporter.report("capability.unknown_backend", at("backend"), `unknown backend \`${s.selection.backend}\``,
      `No \`[[backend]]\` of capabilities.toml has id \`${s.selection.backend}\`.${didYouMean(s.selection.backend, s.backends.keys())}`);
    return;
  }
  if (s.selection.enabled && !declared.backend.enabled) {
    reporter.report("capability.backend_disabled", at("backend"), `backend \`${declared.backend.id}\` is disabled`,
      `This selection is on, but its backend has \`enabled = false\`: enable the backend, pick another, or set \`enabled = false\` on the selection.`,
      [{ file: s.file, path: ["backend", declared.index, "enabled"], target: "value", message: `backend \`${declared.backend.id}\` is disabled here` }]);
  }
  if (model) checkPair(s, declared, model.type, model.devices, reporter);
}

/**
 * With no backend (the slot's own runner), a selection's device must be one
 * its model lists (a model that lists none runs anywhere); with a backend,
 * `checkPair` weighs the backend's devices too.
 */
function checkDevice(s: SelectionSite, modelDevices: readonly Device[], reporter: Reporter): void {
  const device = s.selection.device;
  if (device === undefined || allows(modelDevices, device)) return;
  reporter.report("capability.device_unsupported", { file: s.file, path: ["selection", s.slot, s.child, "device"], target: "value" },
    `\`${s.selection.model}\` does not run on ${device}`,
    `models.toml lists ${modelDevices.join(", ")} for \`${s.selection.model}\`; pick one of them, or drop \`device\` to use the slot's own.`,
    [{ file: "models.toml", path: ["model", s.selection.model, "devices"], target: "value", message: `model \`${s.selection.model}\` lists its devices here` }]);
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
  reporter.report("capability.illegal_backend_model_pair", { file: s.file, path: ["selection", s.slot, s.child, "backend"], target: "value" },
    `backend \`${backend.id}\` cannot run \`${s.selection.model}\``, `${why[0]!.toUpperCase()}${why.slice(1)}.`,
    [{ file: s.file, path: ["backend", index, "id"], target: "value", message: `backend \`${backend.id}\` is declared here` }]);
}

function uniqueIds(file: string, table: "backend" | "catalog", rows: ReadonlyArray<{ index: number; entry: { id: string } }>, reporter: Reporter): void {
  const seen = new Map<string, number>();
  for (const { index, entry: row } of rows) {
    const first = seen.get(row.id);
    if (first === undefined) {
      seen.set(row.id, index);
      continue;
    }
    reporter.report("capability.duplicate_id", { file, path: [table, index, "id"], target: "value" }, `a second ${table} with id \`${row.id}\``,
      `Each \`[[${table}]]\` has its own id.`, [{ file, path: [table, first, "id"], target: "value", message: "first defined here" }]);
  }
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
