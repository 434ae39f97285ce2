import { RESERVED_MCP_IDS, StackSlot, ToolPolicy, Upstream, type McpServer, type Stack } from "../schema/index.js";
import type { Catalog } from "./link-slots.js";
import { tableOf, validEntries, validPart, type Parsed, type ResourceFiles } from "./read.js";
import type { Reporter } from "./report.js";
import { didYouMean } from "./suggest.js";

type StackEntry = Stack["slot"][number];

/**
 * Stack entries must name existing slots, models and profiles, each slot once.
 * A stack file that did not validate is checked too, entry by entry: each
 * entry that is valid on its own (the others already have their diagnostics).
 */
export function linkStacks(stacks: ResourceFiles<Stack>, slotNames: ReadonlyMap<string, string>, catalog: Catalog, reporter: Reporter): void {
  const slugs = [...new Set([...stacks.valid.keys(), ...stacks.broken.keys()])].sort();
  for (const slug of slugs) {
    const valid = stacks.valid.get(slug);
    const file = valid?.file ?? stacks.broken.get(slug)!.file;
    const entries = valid ? valid.value.slot.map((entry, index) => ({ index, entry })) : validEntries(StackSlot, stacks.broken.get(slug)!.value.slot);
    linkStackEntries(file, entries, slotNames, catalog, reporter);
  }
}

function linkStackEntries(file: string, entries: ReadonlyArray<{ index: number; entry: StackEntry }>, slotNames: ReadonlyMap<string, string>, catalog: Catalog, reporter: Reporter): void {
  const seen = new Map<string, number>();
  for (const { index, entry } of entries) {
    const at = (key: string) => ({ file, path: ["slot", index, key], target: "value" as const });
    const first = seen.get(entry.slot);
    if (first !== undefined) {
      reporter.report("stack.duplicate_slot", at("slot"), `slot \`${entry.slot}\` is named twice`, `Each slot appears at most once in a stack.`,
        [{ ...at("slot"), path: ["slot", first, "slot"], message: "first named here" }]);
    } else seen.set(entry.slot, index);
    if (!slotNames.has(entry.slot)) {
      reporter.report("stack.unknown_slot", at("slot"), `unknown slot \`${entry.slot}\``, `There is no slots/${entry.slot}.toml.${didYouMean(entry.slot, slotNames.keys())}`);
    }
    if (entry.model !== undefined && catalog.modelsKnown && !catalog.models.has(entry.model)) {
      reporter.report("stack.unknown_model", at("model"), `unknown model \`${entry.model}\``, `models.toml defines no model \`${entry.model}\`.${didYouMean(entry.model, catalog.models.keys())}`);
    }
    if (entry.profile !== undefined && catalog.profilesKnown && !catalog.profiles.has(entry.profile)) {
      reporter.report("stack.unknown_profile", at("profile"), `unknown profile \`${entry.profile}\``, `No profile \`${entry.profile}\` in profiles.toml or the seeds.${didYouMean(entry.profile, catalog.profiles.keys())}`);
    }
  }
}

/**
 * Upstream names are unique and not `hal0`; a slot upstream names an existing
 * slot. An upstreams.toml that did not validate is checked over its entries
 * that are valid on their own.
 */
export function linkUpstreams(file: Parsed<{ upstream: Upstream[] }> | undefined, broken: Parsed<Record<string, unknown>> | undefined, slotNames: ReadonlyMap<string, string>, reporter: Reporter): void {
  const entries = file ? file.value.upstream.map((entry, index) => ({ index, entry })) : broken ? validEntries(Upstream, broken.value.upstream) : [];
  const at = file?.file ?? broken?.file;
  if (at === undefined) return;
  const seen = new Map<string, number>();
  for (const { index, entry: up } of entries) {
    const site = (key: string) => ({ file: at, path: ["upstream", index, key], target: "value" as const });
    if (up.name === "hal0") {
      reporter.report("upstream.name_reserved", site("name"), "the upstream name `hal0` is reserved", "hal0 advertises the box's own slots as the composite upstream `hal0`; pick another name.");
    }
    const first = seen.get(up.name);
    if (first !== undefined) {
      reporter.report("upstream.duplicate_name", site("name"), `a second upstream named \`${up.name}\``, "Upstream names are unique.",
        [{ ...site("name"), path: ["upstream", first, "name"], message: "first defined here" }]);
    } else seen.set(up.name, index);
    if (up.kind === "slot" && up.slot_name !== undefined && !slotNames.has(up.slot_name)) {
      reporter.report("upstream.unknown_slot", site("slot_name"), `unknown slot \`${up.slot_name}\``, `There is no slots/${up.slot_name}.toml.${didYouMean(up.slot_name, slotNames.keys())}`);
    }
  }
}

/**
 * Installed MCP servers: ids not reserved, `[tools]` lists disjoint. The tool
 * lists of a server file that did not validate (a stdio server without a
 * command) are checked too when `[tools]` itself is valid, so both problems
 * show in one run.
 */
export function linkMcpServers(servers: ResourceFiles<McpServer>, reporter: Reporter): void {
  for (const [id, file] of [...servers.names].sort()) {
    if ((RESERVED_MCP_IDS as readonly string[]).includes(id)) {
      reporter.report("mcp.id_reserved", { file, path: [] }, `\`${id}\` is a bundled server's id`, `hal0 serves ${RESERVED_MCP_IDS.join(", ")} itself; rename the file.`);
    }
  }
  const ids = [...new Set([...servers.valid.keys(), ...servers.broken.keys()])].sort();
  for (const id of ids) {
    const valid = servers.valid.get(id);
    const broken = servers.broken.get(id);
    const file = valid?.file ?? broken!.file;
    const tools = valid ? valid.value.tools : validPart(ToolPolicy, tableOf(broken!.value)?.tools ?? {});
    if (tools === undefined) continue;
    const seen = new Map<string, Array<string | number>>();
    for (const list of ["allow", "gated", "blocked"] as const) {
      tools[list].forEach((tool, index) => {
        const path = ["tools", list, index];
        const first = seen.get(tool);
        if (first) {
          reporter.report("mcp.tools_invalid", { file, path, target: "value" }, `\`${tool}\` is on two tool lists`,
            `A tool is on at most one of allow, gated and blocked; \`${tool}\` is already under \`${String(first[1])}\`.`,
            [{ file, path: first, target: "value", message: "first listed here" }]);
        } else seen.set(tool, path);
      });
    }
  }
}
