import { describe, expect, it } from "vitest";
import { Locator } from "../../compiler/locate.js";

const text = `#:schema ../x.json
profile = "rocm"
server.env.A = "1"
[tune]
ctx_size = 4096
[[slot]]
slot = "a"
[slot.tune]
vision = true
[[slot]]
slot = "b"
list = [1, { k = 2 }]
inline = { deep = { x = 1 } }
`;

describe("Locator", () => {
  const loc = new Locator(text);

  it("places keys and values, 1-based", () => {
    expect(loc.locate(["profile"], "key")).toEqual({ line: 2, column: 1 });
    expect(loc.locate(["profile"], "value")).toEqual({ line: 2, column: 11 });
    expect(loc.locate(["tune", "ctx_size"], "value")).toEqual({ line: 5, column: 12 });
  });

  it("indexes arrays of tables and sub-tables of their last element", () => {
    expect(loc.locate(["slot", 0, "slot"], "value")).toEqual({ line: 7, column: 8 });
    expect(loc.locate(["slot", 0, "tune", "vision"], "key")).toEqual({ line: 9, column: 1 });
    expect(loc.locate(["slot", 1, "slot"], "value")).toEqual({ line: 11, column: 8 });
  });

  it("indexes inline arrays and tables, and dotted keys", () => {
    expect(loc.locate(["slot", 1, "list", 1, "k"], "value")).toEqual({ line: 12, column: 18 });
    expect(loc.locate(["slot", 1, "inline", "deep", "x"], "key")).toEqual({ line: 13, column: 21 });
    expect(loc.locate(["server", "env", "A"], "value")).toEqual({ line: 3, column: 16 });
    expect(loc.locate(["server", "env"], "key")).toEqual({ line: 3, column: 1 });
  });

  it("falls back to the closest spelled-out ancestor, then the file start", () => {
    expect(loc.locate(["tune", "vision"], "key")).toEqual({ line: 4, column: 2 });
    expect(loc.locate(["nowhere", "deep"], "key")).toEqual({ line: 1, column: 1 });
  });

  it("never throws on text the CST parser refuses", () => {
    expect(new Locator("a = = =\n[[[").locate(["a"], "value")).toEqual({ line: 1, column: 1 });
  });
});
