import { describe, expect, it } from "vitest";
import { closest } from "../../compiler/suggest.js";

describe("closest", () => {
  it("finds typos, transpositions and case slips", () => {
    expect(closest("ctx_sise", ["ctx_size", "enable_thinking"])).toBe("ctx_size");
    expect(closest("slot_lsit", ["slot_list", "slot_edit"])).toBe("slot_list");
    expect(closest("Profile", ["profile", "port"])).toBe("profile");
  });

  it("stays quiet when nothing is close", () => {
    expect(closest("banana", ["ctx_size", "port"])).toBeUndefined();
    expect(closest("x", ["y"])).toBeUndefined();
  });
});
