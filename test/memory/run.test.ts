import { describe, expect, it } from "vitest";
import { ApiError } from "../../server/errors.js";
import { defaultDataset, deleteNeedsApproval, parseMemoryArgs, scopeOf } from "../../server/memory/run.js";
import { MEMORY_TOOLS } from "../../server/memory/tools.js";
import { AUTONOMOUS_READ_TOOLS, AUTONOMOUS_WRITE_TOOLS, GATED_TOOLS } from "../../schema/index.js";
import type { Caller } from "../../server/route.js";

const alice: Caller = { kind: "agent", agent: "alice", private: false, via: "mcp" };
const alicePrivate: Caller = { ...alice, private: true };

function code(f: () => unknown): string | undefined {
  try {
    f();
  } catch (err) {
    return (err as ApiError).code;
  }
  return undefined;
}

describe("the memory tool table", () => {
  it("has seed 001's 26 tools, each in the tier the seed tables give it", () => {
    expect(MEMORY_TOOLS).toHaveLength(26);
    const seedTier = new Map<string, string>();
    for (const t of AUTONOMOUS_READ_TOOLS) seedTier.set(t.tool, "read");
    for (const t of AUTONOMOUS_WRITE_TOOLS) seedTier.set(t.tool, "write");
    for (const t of GATED_TOOLS) seedTier.set(t.tool, "gated");
    for (const tool of MEMORY_TOOLS) expect(seedTier.get(tool.name), tool.name).toBe(tool.tier);
    expect([...seedTier.keys()].filter((n) => n.startsWith("memory_")).sort()).toEqual(MEMORY_TOOLS.map((t) => t.name).sort());
  });
});

describe("namespaces", () => {
  it("defaults to shared, or private:<agent> with X-hal0-Private", () => {
    expect(defaultDataset(alice)).toBe("shared");
    expect(defaultDataset(alicePrivate)).toBe("private:alice");
    expect(scopeOf(undefined, alicePrivate)).toEqual({ datasets: ["private:alice"], owner: "alice" });
    expect(scopeOf(["shared", "private:alice", "shared"], alice)).toEqual({ datasets: ["private:alice", "shared"], owner: "alice" });
  });

  it("refuses another caller's private dataset, except for an approved request", () => {
    expect(code(() => scopeOf("private:bob", alice))).toBe("memory.dataset_forbidden");
    expect(code(() => scopeOf(["shared", "private:bob"], alicePrivate))).toBe("memory.dataset_forbidden");
    expect(scopeOf("private:bob", { ...alice, via: "approval" }).datasets).toEqual(["private:bob"]);
    expect(scopeOf("team", alice).datasets).toEqual(["team"]);
  });

  it("gates memory_delete beyond one id in the caller's own datasets", () => {
    expect(deleteNeedsApproval({ ids: ["a"] }, alice)).toBeUndefined();
    expect(deleteNeedsApproval({ ids: ["a"], dataset: "private:alice" }, alice)).toBeUndefined();
    expect(deleteNeedsApproval({ ids: ["a"], dataset: "team" }, alice)).toBeUndefined();
    expect(deleteNeedsApproval({ ids: ["a", "b"] }, alice)).toBe("deletes 2 memory ids");
    expect(deleteNeedsApproval({ ids: ["a", "a"] }, alice)).toBeUndefined(); // one id, given twice
    expect(deleteNeedsApproval({ ids: ["a"], dataset: ["shared"] }, alice)).toMatch(/across datasets/);
    expect(deleteNeedsApproval({ ids: ["a"], dataset: "private:bob" }, alice)).toMatch(/another caller's dataset/);
  });
});

describe("arguments", () => {
  it("applies defaults and refuses source, unknown fields and empty updates with mcp.memory_schema", () => {
    expect(parseMemoryArgs("memory_search", { query: "x" }).input).toMatchObject({ query: "x", limit: 10 });
    expect(parseMemoryArgs("memory_recall", { query: "x" }).input).toMatchObject({ max_tokens: 4096 });
    expect(parseMemoryArgs("memory_list", undefined).input).toMatchObject({ limit: 50, include_invalid: false });
    for (const [tool, args] of [["memory_add", { text: "x", source: "me" }], ["memory_add", { text: "x", extra: 1 }], ["memory_curate", { id: "mem_1" }], ["memory_mental_model_update", { id: "mm_1" }], ["memory_add", []]] as const) {
      expect(code(() => parseMemoryArgs(tool, args)), `${tool} ${JSON.stringify(args)}`).toBe("mcp.memory_schema");
    }
    expect(code(() => parseMemoryArgs("memory_nothing", {}))).toBe("mcp.unknown_tool");
  });
});
