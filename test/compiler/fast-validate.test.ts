import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { describe, expect, it } from "vitest";
import { fastParse, REFUSED } from "../../compiler/fast-validate.js";
import { Reporter } from "../../compiler/report.js";
import { TOML_DATETIME, TOML_FLOAT, TOML_HUGE_INTEGER } from "../../compiler/scalars.js";
import { parseToml } from "../../compiler/validate.js";
import { generateTree } from "../../bench/generate.js";
import { compile } from "../../compiler/index.js";
import { slotView } from "../../reconciler/view.js";
import { classifyPath, FILE_KINDS, SlotViewSchema, type FileKind } from "../../schema/index.js";

/**
 * The fast validation path against zod itself: on every TOML file of the
 * fixtures and a generated tree, and on many variants of each (every value
 * swapped for a wrong type, an edge of its range, removed; an unknown key
 * added), it either refuses (zod then parses) or returns exactly zod's data,
 * key order included — and it never vouches for a value zod refuses.
 */

const FIXTURES = join(import.meta.dirname, "../../fixtures");

function tomlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? tomlFiles(join(dir, e.name)) : e.name.endsWith(".toml") ? [join(dir, e.name)] : []));
}

/** Each fixture file as its tree would read it: its kind from the last one or two parts of its path. */
function corpus(): Array<{ name: string; kind: FileKind; value: Record<string, unknown> }> {
  const out: Array<{ name: string; kind: FileKind; value: Record<string, unknown> }> = [];
  const add = (name: string, rel: string, text: string) => {
    const kind = classifyPath(rel)?.kind;
    const value = kind && parseToml(rel, text, new Reporter(new Map()));
    if (kind && value) out.push({ name, kind, value });
  };
  for (const file of tomlFiles(FIXTURES)) {
    const parts = relative(FIXTURES, file).split(sep);
    const rel = parts.length >= 2 && classifyPath(parts.slice(-2).join("/")) ? parts.slice(-2).join("/") : parts[parts.length - 1]!;
    add(relative(FIXTURES, file), rel, readFileSync(file, "utf8"));
  }
  for (const [rel, text] of generateTree(40).files) add(`generated/${rel}`, rel, text);
  return out;
}

/** A deep copy (symbols kept: structuredClone refuses them). */
function copy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copy);
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copy(v)]));
  return value;
}

const ODD_VALUES: unknown[] = [
  "", "x", "llm", "gpu-rocm", "Bad Name", "../up", 0, -1, 1, 63, 64, 65535, 65536, 2 ** 40, true, false,
  [], ["chat"], [1], {}, { a: "b" }, TOML_FLOAT, TOML_DATETIME, TOML_HUGE_INTEGER, undefined,
];

/** Every path to a value in `value`, tables and arrays included. */
function paths(value: unknown, at: Array<string | number> = []): Array<Array<string | number>> {
  if (Array.isArray(value)) return [at, ...value.flatMap((v, i) => paths(v, [...at, i]))];
  if (value !== null && typeof value === "object") return [at, ...Object.entries(value).flatMap(([k, v]) => paths(v, [...at, k]))];
  return [at];
}

/** `value` with the value at `path` replaced (`undefined` removes a key), or an unknown key added to the table there. */
function variant(value: unknown, path: Array<string | number>, replacement: unknown, addKey = false): unknown {
  const root = copy(value);
  if (path.length === 0) return addKey ? Object.assign(root as object, { not_a_key: 1 }) : replacement;
  let parent = root as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (addKey) {
    const target = parent[last];
    if (target !== null && typeof target === "object" && !Array.isArray(target)) (target as Record<string, unknown>).not_a_key = 1;
  } else if (replacement === undefined && !Array.isArray(parent)) delete parent[last];
  else parent[last] = replacement;
  return root;
}

/** fastParse agrees with zod on `input`: refused, or zod's data exactly. */
function agrees(kind: FileKind, input: unknown): "fast" | "refused" {
  const zod = kind.schema.safeParse(copy(input));
  const fast = fastParse(kind.schema, copy(input));
  if (fast === REFUSED) return "refused";
  expect(zod.success).toBe(true);
  expect(fast).toStrictEqual(zod.data);
  expect(JSON.stringify(fast)).toBe(JSON.stringify(zod.data));
  return "fast";
}

describe("fast validation path", () => {
  const files = corpus();

  it("reads a corpus of every kind", () => {
    const kinds = new Set(files.map((f) => f.kind.id));
    for (const id of ["settings", "profiles", "slot", "models", "stack", "upstreams", "policy", "mcp-server", "agent", "capabilities"]) expect(kinds, id).toContain(id);
  });

  it("vouches for the generated tree's valid files of the hot kinds, with zod's data", () => {
    for (const { name, kind, value } of files.filter((f) => f.name.startsWith("generated/"))) {
      expect(kind.schema.safeParse(value).success, name).toBe(true);
      if (["slot", "models", "profiles", "stack", "settings"].includes(kind.id)) expect(agrees(kind, value), name).toBe("fast");
    }
  });

  it("agrees with zod on every fixture file and every variant of it", () => {
    let fast = 0;
    let refused = 0;
    for (const { kind, value } of files) {
      for (const path of paths(value)) {
        for (const odd of ODD_VALUES) (agrees(kind, variant(value, path, odd)) === "fast" ? fast++ : refused++);
        agrees(kind, variant(value, path, undefined, true));
      }
    }
    // Both answers occur: the variants exercise the fast path, not only the refusal.
    expect(fast).toBeGreaterThan(1000);
    expect(refused).toBeGreaterThan(1000);
  });

  it("agrees with zod on slot views (what the docker and swarm drivers read back from a label), plain objects with nullable keys, and every variant", () => {
    const model = compile(generateTree(12)).model!;
    const kind = { schema: SlotViewSchema } as unknown as FileKind;
    let fast = 0;
    for (const slot of Object.values(model.slots)) {
      const view = JSON.parse(JSON.stringify(slotView(slot))) as Record<string, unknown>;
      expect(agrees(kind, view)).toBe("fast");
      // A plain object drops unknown keys, as zod does; a null model is a value.
      expect(agrees(kind, { ...view, not_a_key: 1 })).toBe("fast");
      expect(agrees(kind, { ...view, model: null })).toBe("fast");
      for (const path of paths(view)) {
        for (const odd of [...ODD_VALUES, null]) if (agrees(kind, variant(view, path, odd)) === "fast") fast++;
        agrees(kind, variant(view, path, undefined, true));
      }
    }
    expect(fast).toBeGreaterThan(100);
  });

  it("has no fast path for a schema it does not model, and refuses what is not a table", () => {
    for (const kind of FILE_KINDS) {
      for (const odd of [null, [], "x", 1, new Date(0), Object.assign(Object.create({ inherited: 1 }), { a: 1 })]) expect(fastParse(kind.schema, odd)).toBe(REFUSED);
    }
  });
});
