import { describe, expect, it } from "vitest";
import { CODES } from "../../schema/index.js";

describe("code registry", () => {
  it("keeps every code: removing or renaming one is a reviewed change to this snapshot", () => {
    const rows = Object.entries(CODES).map(([code, info]) => `${code} ${info.stage} ${info.severity} ${info.http}`);
    expect(rows).toMatchSnapshot();
  });

  it("names every code ns.reason with a one-line meaning", () => {
    for (const [code, info] of Object.entries(CODES)) {
      expect(code).toMatch(/^[a-z]+\.[a-z_]+$/);
      expect(info.meaning.length).toBeGreaterThan(10);
      expect(info.meaning).not.toContain("\n");
      expect(info.http).toBeGreaterThanOrEqual(400);
    }
  });
});
