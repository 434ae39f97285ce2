import { describe, expect, it } from "vitest";
import { compile, sourceTree, type Model } from "../../compiler/index.js";
import { npuLoadChanges, npuTarget } from "../../compiler/edits/npu.js";
import { swapPhase } from "../../server/npu-view.js";

/**
 * Under the swarm runtime each node has its own NPU: the compiler allows one
 * enabled llm slot on the NPU per node, so loading one node's NPU leaves a
 * slot pinned to another node alone, and two nodes each serving their own
 * are no NPU changing hands.
 */
const MODELS = `
[model.small]
path = "models/small.q4nx"
type = "llm"
context_length = 4096
`;

const npuSlot = (port: number, node: string | undefined, enabled: boolean) =>
  `profile = "flm"\nmodel = "small"\nport = ${port}\nenabled = ${enabled}\n[placement]\ndevice = "npu"\n${node ? `node = "${node}"\n` : ""}`;

function build(runtime: "swarm" | "process", slots: Record<string, string>): Model {
  const files = Object.fromEntries(Object.entries(slots).map(([name, text]) => [`slots/${name}.toml`, text]));
  const result = compile(sourceTree("/box", Object.entries({ "hal0.toml": `[slots]\nruntime = "${runtime}"\n`, "models.toml": MODELS, ...files })));
  const errors = result.diagnostics.filter((d) => d.severity === "error");
  expect(errors, JSON.stringify(errors, null, 2)).toEqual([]);
  return result.model!;
}

describe("the NPU of each node under swarm", () => {
  it("npu_backend_load disables the llm slot on the same node's NPU, not the one pinned to another node", () => {
    const model = build("swarm", { "a-one": npuSlot(8100, "a", true), "a-two": npuSlot(8101, "a", false), "b-one": npuSlot(8102, "b", true) });
    const changes = npuLoadChanges(model, npuTarget(model, { slot: "a-two" }), false);
    expect(changes.edits.map((e) => [e.file, e.op === "set" ? e.value : e.op])).toEqual([["slots/a-two.toml", true], ["slots/a-one.toml", false]]);
    expect(changes.summary).toBe("load a-two on the NPU in place of a-one");
  });

  it("a slot placed by labels alone may land on any node: loading it still disables the others", () => {
    const model = build("swarm", { "a-one": npuSlot(8100, "a", true), "any": npuSlot(8101, undefined, false), "b-one": npuSlot(8102, "b", true) });
    expect(npuLoadChanges(model, npuTarget(model, { slot: "any" }), false).edits.map((e) => e.file)).toEqual(["slots/any.toml", "slots/a-one.toml", "slots/b-one.toml"]);
  });

  it("on one box the other enabled llm slot on the NPU is disabled, as ever", () => {
    const model = build("process", { one: npuSlot(8100, undefined, true), two: npuSlot(8101, undefined, false) });
    expect(npuLoadChanges(model, npuTarget(model, { slot: "two" }), false).edits.map((e) => [e.file, e.op === "set" ? e.value : e.op])).toEqual([["slots/two.toml", true], ["slots/one.toml", false]]);
  });

  it("npu_swap_status: two nodes each serving the llm slot the files want there is idle, not stopping one of them", () => {
    const row = (name: string, enabled: boolean, status: string, state: string) => ({ name, type: "llm", enabled, status, state });
    expect(swapPhase([row("a-one", true, "running", "ready"), row("b-one", true, "running", "ready")])).toEqual({ phase: "idle", stopping: [], starting: null });
    expect(swapPhase([row("a-one", false, "running", "ready"), row("a-two", true, "stopped", "starting"), row("b-one", true, "running", "ready")])).toEqual({ phase: "stopping", stopping: ["a-one"], starting: null });
    expect(swapPhase([row("a-two", true, "running", "warming"), row("b-one", true, "running", "ready")])).toEqual({ phase: "starting", stopping: [], starting: "a-two" });
    expect(swapPhase([row("a-two", true, "running", "error"), row("b-one", true, "running", "ready")])).toEqual({ phase: "failed", stopping: [], starting: null });
    expect(swapPhase([row("a-one", false, "disabled", "offline")])).toEqual({ phase: "idle", stopping: [], starting: null });
  });
});
