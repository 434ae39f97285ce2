import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { compile, loadTree, sourceTree, type SourceTree } from "../../compiler/index.js";
import { Diagnostic } from "../../schema/index.js";
import { rng } from "../helpers/rng.js";

const JUNK_VALUES = ['"x"', "1.5", "true", "[]", "{}", "-1", "99999999999", '"../x"', '"\u200b"', "[1, \"a\"]", "{ a = { b = 1 } }", "1979-05-27T07:32:00Z", '""', "nan"];
const JUNK_TEXT = ["[", "]]", "=", '"', "\u0000", "\ufeff", "\u202e", "[[slot]]", "[tune]", "\n[model.x]\n", "a.b.c = 1\n", "é", "\\u"];

type Mutation = (text: string, pick: <T>(xs: readonly T[]) => T, r: () => number) => string;

const MUTATIONS: Mutation[] = [
  (t, _p, r) => dropLine(t, r),
  (t, _p, r) => t.slice(0, Math.floor(r() * t.length)),
  (t, p, r) => replaceValue(t, p(JUNK_VALUES), r),
  (t, p, r) => insertAt(t, p(JUNK_TEXT), r),
  (t, _p, r) => insertAt(t, String.fromCharCode(...Array.from({ length: 1 + Math.floor(r() * 8) }, () => Math.floor(r() * 0xffff))), r),
  (t, _p, r) => duplicateLine(t, r),
  (t) => t.replace(/^(\s*)([a-z_]+)(\s*=)/m, (_m, a: string, k: string, b: string) => `${a}${k.split("").reverse().join("")}${b}`),
];

function lines(t: string): string[] {
  return t.split("\n");
}
function dropLine(t: string, r: () => number): string {
  const ls = lines(t);
  ls.splice(Math.floor(r() * ls.length), 1);
  return ls.join("\n");
}
function duplicateLine(t: string, r: () => number): string {
  const ls = lines(t);
  const i = Math.floor(r() * ls.length);
  ls.splice(i, 0, ls[i] ?? "");
  return ls.join("\n");
}
function insertAt(t: string, s: string, r: () => number): string {
  const i = Math.floor(r() * (t.length + 1));
  return t.slice(0, i) + s + t.slice(i);
}
function replaceValue(t: string, value: string, r: () => number): string {
  const ls = lines(t);
  const candidates = ls.map((l, i) => (/^\s*[\w".-]+\s*=/.test(l) ? i : -1)).filter((i) => i >= 0);
  if (candidates.length === 0) return t;
  const i = candidates[Math.floor(r() * candidates.length)]!;
  ls[i] = ls[i]!.replace(/=.*$/, `= ${value}`);
  return ls.join("\n");
}

function mutate(tree: SourceTree, seed: number): SourceTree {
  const r = rng(seed);
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const files = new Map(tree.files);
  const rounds = 1 + Math.floor(r() * 3);
  for (let n = 0; n < rounds; n++) {
    const name = pick([...files.keys()]);
    if (r() < 0.05) files.delete(name);
    else files.set(name, pick(MUTATIONS)(files.get(name)!, pick, r));
  }
  return sourceTree(tree.root, files);
}

describe("compiler robustness", () => {
  let box: SourceTree;
  beforeAll(async () => {
    box = (await loadTree(join(import.meta.dirname, "../../fixtures/box"))).tree;
  });

  it("starts from a valid box", () => {
    expect(box.files.size).toBeGreaterThan(10);
    expect(compile(box).model).toBeDefined();
  });

  it("returns only well-formed diagnostics for 3000 random mutations, never throws", () => {
    const seen = new Set<string>();
    for (let seed = 1; seed <= 3000; seed++) {
      const tree = mutate(box, seed);
      let result;
      try {
        result = compile(tree);
      } catch (err) {
        throw new Error(`compile threw for mutation seed ${seed}: ${(err as Error).stack}`);
      }
      const errors = result.diagnostics.filter((d) => d.severity === "error");
      if ((errors.length === 0) !== (result.model !== undefined)) throw new Error(`seed ${seed}: model presence disagrees with errors`);
      for (const d of result.diagnostics) {
        const parsed = Diagnostic.safeParse(d);
        if (!parsed.success) throw new Error(`seed ${seed}: malformed diagnostic ${JSON.stringify(d)}`);
        const text = tree.files.get(d.file);
        if (text !== undefined && d.line > lines(text).length + 1) throw new Error(`seed ${seed}: ${d.file}:${d.line} is past the end`);
        seen.add(d.code);
      }
    }
    // The mutations must actually reach the compiler's rules, not only the parser.
    expect(seen.size).toBeGreaterThan(8);
  });

  it("lists the first 200 diagnostics of a tree and one more that counts the rest, by severity: a file of 20 000 bad keys is not 20 000 located diagnostics", () => {
    const keys = Array.from({ length: 20_000 }, (_, i) => `k${i} = 1\n`).join("");
    const result = compile(sourceTree(box.root, new Map([...box.files, ["slots/wide.toml", `profile = "cpu"\nport = 8100\n${keys}`]])));
    expect(result.model).toBeUndefined();
    expect(result.diagnostics).toHaveLength(201);
    expect(result.diagnostics.slice(1).map((d) => [d.code, d.line])).toEqual(Array.from({ length: 200 }, (_, i) => ["config.unknown_key", i + 3]));
    expect(result.diagnostics[0]).toMatchObject({ code: "config.too_many_diagnostics", severity: "error", file: ".", summary: expect.stringMatching(/^198\d\d more diagnostics not listed$/) });
    expect(result.diagnostics[0]!.detail).toMatch(/^hal0 lists the first 200 diagnostics of a tree; it found 198\d\d errors besides\./);
    // A real tree's diagnostics are all listed, with no count.
    const few = compile(sourceTree(box.root, new Map([...box.files, ["slots/wide.toml", `profile = "cpu"\nport = 8100\nk1 = 1\nk2 = 2\n`]])));
    expect(few.diagnostics.filter((d) => d.file === "slots/wide.toml").map((d) => d.code)).toEqual(["slot.unknown_profile", "slot.port_conflict", "config.unknown_key", "config.unknown_key"]);
    expect(few.diagnostics.some((d) => d.code === "config.too_many_diagnostics")).toBe(false);
  });

  it("refuses a file nested deeper than 64 levels as a parse error at its key, in linear time: a dotted key or a table header of 100 000 parts neither throws nor takes minutes", () => {
    const parts = (n: number) => Array.from({ length: n }, () => "a").join(".");
    const cases: Array<[string, string, number, number]> = [
      ["slots/deep.toml", `profile = "cpu"\nport = 8100\n${parts(100_000)} = 1\n`, 3, 1],
      ["policy.toml", `# deep\n[${parts(100_000)}]\nb = 1\n`, 2, 200_000],
      // A value as deep (0.5 makes the parse the exact one, whose scalars are rewritten by a recursive walk).
      ["profiles.toml", `x = 0.5\n${parts(20_000)} = 1\n`, 2, 1],
    ];
    for (const [file, text, line, column] of cases) {
      const started = performance.now();
      const result = compile(sourceTree(box.root, new Map([...box.files, [file, text]])));
      expect(performance.now() - started, file).toBeLessThan(10_000);
      expect(result.model, file).toBeUndefined();
      const found = result.diagnostics.filter((d) => d.file === file);
      expect(found.map((d) => [d.code, d.line, d.column, d.summary]), file).toEqual([["config.parse_error", line, column, "invalid TOML: nested more than 64 levels deep"]]);
    }
    // 64 tables deep is read (an unknown key, not a parse error).
    const ok = compile(sourceTree(box.root, new Map([...box.files, ["policy.toml", `${parts(64)} = 1\n`]])));
    expect(ok.diagnostics.filter((d) => d.file === "policy.toml").map((d) => d.code)).toEqual(["config.unknown_key"]);
  }, 60_000);
});
