import { parse } from "smol-toml";
import { describe, expect, it } from "vitest";
import { TOML_DATETIME, TOML_FLOAT, TOML_HUGE_INTEGER, mayHoldOddScalars, normalizeScalars } from "../../compiler/scalars.js";
import { rng } from "../helpers/rng.js";

describe("odd TOML scalars", () => {
  const odd = [
    "x = 1.5", "x = 8081.0", "x = -0.0", "x = 1_000.5", "x = 1e6", "x = 6.02E+23", "x = 5e-1", "x = inf", "x = -inf", "x = nan",
    "x = 1979-05-27", "x = 1979-05-27T07:32:00Z", "x = 07:32:00", "x = 1979-05-27 07:32:00",
    "x = 99999999999999999", "x = 0x7FFFFFFFFFFFFFFF", "x = 0xFFFFFFFFFFFFFFFF", "x = 0xffff_ffff_ffff_ffff", "x = 0o7777777777777777777", "x = 0b11111111111111111111111111111111111111111111111111111111",
  ];

  it("the scan flags every float, date-time and huge integer literal", () => {
    for (const text of odd) expect(mayHoldOddScalars(text), text).toBe(true);
  });

  it("the scan passes files of strings, booleans, safe integers, arrays and tables", () => {
    for (const text of ["port = 8081", "a = [1, 2]\n[t]\nb = true", 'name = "Forge"', "x = 0x7FFF", "x = 900719925474", "x = -12"]) {
      expect(mayHoldOddScalars(text), text).toBe(false);
    }
  });

  it("the exact parse marks floats, date-times and huge integers, and keeps the rest", () => {
    const data = normalizeScalars(parse("a = 1.0\nb = 2\nc = 1979-05-27\nd = 99999999999999999\n[t]\ne = [3, 4.5]\nf = 's'", { integersAsBigInt: true }));
    expect(data).toEqual({ a: TOML_FLOAT, b: 2, c: TOML_DATETIME, d: TOML_HUGE_INTEGER, t: { e: [3, TOML_FLOAT], f: "s" } });
  });

  it("both parses agree on a file without odd scalars", () => {
    const text = 'profile = "rocm"\nport = 8081\n[tune]\nctx_size = 32768\nlist = [1, 2, 3]\n';
    expect(normalizeScalars(parse(text, { integersAsBigInt: true }))).toEqual(parse(text));
  });

  it("the scan answers as its one-branch-per-shape form on 20,000 random texts of digits and the characters around them", () => {
    const plain = /[0-9](?:\.[0-9]|[eE][+-]?[0-9]|[0-9]{3}-[0-9]{2}-|[0-9]:[0-9]{2}|[0-9A-Fa-f_]{13}|x[0-9A-Fa-f_]{13})/;
    // Mostly digits and hex letters (long runs are one branch), the rest what sits around a number.
    const hex = "0123456789aAfF_";
    const around = ".eE+-:xgz \"=\n";
    const next = rng(42);
    let flagged = 0;
    for (let i = 0; i < 20_000; i++) {
      const text = Array.from({ length: 4 + Math.floor(next() * 30) }, () => (next() < 0.8 ? hex[Math.floor(next() * hex.length)] : around[Math.floor(next() * around.length)])).join("");
      const want = plain.test(text) || /\b(?:inf|nan)\b/.test(text);
      expect(mayHoldOddScalars(text), JSON.stringify(text)).toBe(want);
      if (want) flagged++;
    }
    expect(flagged).toBeGreaterThan(2_000);
    expect(flagged).toBeLessThan(18_000);
  });
});
