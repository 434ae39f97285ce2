import { describe, expect, it } from "vitest";
import { compileFixture } from "../../fixtures/plans/build.js";
import { BASE } from "../../fixtures/plans/base.js";
import { formatPlan, planJson } from "../../reconciler/format.js";
import type { SlotView } from "../../reconciler/observed.js";
import { planChanges } from "../../reconciler/plan.js";
import { slotValueAt, slotView, viewChangedPaths } from "../../reconciler/view.js";
import { Plan, type Change, type PlanWarning, type SlotChange } from "../../schema/index.js";

const CHAT: SlotView = slotView(compileFixture(BASE).slots.chat!);

/** CHAT with its spec's argv (and optionally env) replaced. */
function withArgv(argv: string[], env: Record<string, string> = CHAT.spec.env): SlotView {
  return { ...CHAT, spec: { ...CHAT.spec, argv, env }, spec_hash: `sha256:${argv.join(" ")}` };
}

function slotChange(over: Partial<SlotChange>): SlotChange {
  return {
    address: "slot.chat", kind: "slot", action: "replace", reason: "spec_changed", changed_paths: [], before: CHAT, after: CHAT,
    apply_class: "immediate", destructive: true, downtime: true, ...over,
  };
}

function planOf(changes: Change[], over: Partial<Plan> = {}): Plan {
  const count = (a: string) => changes.filter((c) => c.action === a).length;
  return {
    format_version: 1, id: "sha256:x", base: { config_digest: "sha256:c", observed: {} },
    has_changes: changes.some((c) => c.action !== "no-op"), changes,
    settings: { immediate: [], service_restart: {}, manual_restart: [], unknown: [] }, warnings: [],
    summary: { create: count("create"), update: count("update"), replace: count("replace"), delete: count("delete"), no_op: count("no-op") },
    ...over,
  };
}

describe("viewChangedPaths", () => {
  it("compares argv per canonical flag: aliases, --flag=value, repeatable flags, value-less flags", () => {
    const before = withArgv(["llama-server", "-t", "8", "--lora", "a.gguf", "--metrics"]);
    const after = withArgv(["llama-server", "--threads=16", "--lora", "a.gguf", "--lora", "b.gguf"]);
    expect(viewChangedPaths(before, after)).toEqual(["argv.--lora", "argv.--metrics", "argv.--threads"]);
    expect(slotValueAt(before, "argv.--threads")).toBe("8");
    expect(slotValueAt(after, "argv.--lora")).toEqual(["a.gguf", "b.gguf"]);
    expect(slotValueAt(before, "argv.--metrics")).toBe(true);
    expect(slotValueAt(after, "argv.--metrics")).toBeUndefined();
  });

  it("reports positional and order-only changes as `argv`", () => {
    expect(viewChangedPaths(withArgv(["llama-server", "-a", "1", "-b", "2"]), withArgv(["llama-server", "-b", "2", "-a", "1"]))).toEqual(["argv"]);
    expect(viewChangedPaths(withArgv(["llama-server", "-a", "1"]), withArgv(["llama", "-a", "1"]))).toEqual(["argv"]);
  });

  it("names env keys, and falls back to spec_hash when no field explains a hash change", () => {
    expect(viewChangedPaths(CHAT, withArgv([...CHAT.spec.argv], { X: "1" }))).toEqual(["env.X"]);
    expect(viewChangedPaths(CHAT, { ...CHAT, spec_hash: "sha256:other" })).toEqual(["spec_hash"]);
  });
});

describe("formatPlan", () => {
  it("hides no-ops unless verbose, and says so when nothing changes", () => {
    const plan = planOf([slotChange({ action: "no-op", reason: "unchanged", destructive: false, downtime: false })]);
    expect(formatPlan(plan)).toBe("No changes. The box matches the configuration.");
    expect(formatPlan(plan, { verbose: true })).toBe("= slot.chat (unchanged)\n\nNo changes. The box matches the configuration.");
  });

  it("says a down with nothing to do has nothing to stop: the box is down, it does not match the configuration", () => {
    const plan = planOf([]);
    expect(formatPlan(plan, { command: "down" })).toBe("Nothing to stop: no slot hal0 started runs.");
    expect(formatPlan(planOf([], { warnings: [{ address: "slot.x", code: "slot.unmanaged", message: "m" }] }), { command: "down" })).toMatch(/\n\nNothing to stop; the warnings above need a person\.$/);
  });

  it("prints one block per change with markers and before → after values, JSON-quoted", () => {
    const after = withArgv(["llama-server", "-b", "2", "-a", "1", "--metrics"]);
    const before = withArgv(["llama-server", "-a", "1", "-b", "2"]);
    const text = formatPlan(planOf([slotChange({ changed_paths: viewChangedPaths(before, after), before, after })]));
    expect(text).toBe([
      "-/+ slot.chat (spec_changed) [destructive] [downtime]",
      "    argv.--metrics: (none) → true",
      "",
      "Plan: 0 to create, 0 to update, 1 to replace, 0 to delete, 0 unchanged.",
    ].join("\n"));
  });

  it("says `reordered` when only the order of argv changed", () => {
    const before = withArgv(["llama-server", "-a", "1", "-b", "2"]);
    const after = withArgv(["llama-server", "-b", "2", "-a", "1"]);
    expect(formatPlan(planOf([slotChange({ changed_paths: ["argv"], before, after })]))).toContain("\n    argv: reordered\n");
  });

  it("shows the key facts of a created and a deleted slot", () => {
    const text = formatPlan(planOf([
      slotChange({ action: "create", reason: "new", before: null, destructive: false, downtime: false }),
      slotChange({ address: "slot.old", action: "delete", reason: "disabled", after: null, downtime: false }),
    ]));
    expect(text.split("\n").slice(0, 8)).toEqual([
      "+ slot.chat (new)", '    model: "qwen3-4b-2507"', "    port: 8081", '    profile: "gpu"',
      "- slot.old (disabled) [destructive]", '    model: "qwen3-4b-2507"', "    port: 8081", '    profile: "gpu"',
    ]);
  });

  it("prints warnings, the settings buckets and the summary last", () => {
    const settings = { immediate: ["slots.pull"], service_restart: { "hal0-api": ["server.port"] }, manual_restart: ["meta.schema_version"], unknown: ["x.y"] };
    const warnings: PlanWarning[] = [{ address: "slot.chat", code: "slot.port_in_use", message: "port 8081 is held by pid 1" }];
    const text = formatPlan(planOf([slotChange({ action: "create", reason: "new", before: null, destructive: false, downtime: false })], { settings, warnings }));
    expect(text.split("\n").slice(4)).toEqual([
      "",
      "! slot.chat: slot.port_in_use: port 8081 is held by pid 1",
      "",
      "Settings to apply:",
      "    immediate: slots.pull",
      "    restart hal0-api: server.port",
      "    manual restart: meta.schema_version",
      "    unknown: x.y",
      "",
      "Plan: 1 to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged.",
    ]);
  });
});

describe("planJson", () => {
  it("is the plan as 2-space JSON that parses back to an equal, valid Plan", () => {
    const model = compileFixture(BASE);
    const plan = planChanges(model, { slots: {}, foreign_ports: {} }, { version: 1, box: "b", slots: {} });
    const text = planJson(plan);
    expect(text.startsWith('{\n  "format_version": 1,\n  "id": "sha256:')).toBe(true);
    expect(Plan.parse(JSON.parse(text))).toEqual(plan);
  });
});
