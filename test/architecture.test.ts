import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/**
 * The folder arrows of ARCHITECTURE.md ("Who owns what"), held over every
 * import of every source file: schema ← compiler ← reconciler ← server, the
 * memory engines beside the reconciler (schema and compiler only), cli above
 * all. Specifiers come from TypeScript's own parser, so a multi-line import,
 * `import type`, `export … from`, a dynamic `import("…")`, a type-position
 * `import("…").T` and `require("…")` all count.
 */

const ROOT = join(import.meta.dirname, "..");
const LAYERS = ["schema", "compiler", "reconciler", "memory", "server", "cli"] as const;
type Layer = (typeof LAYERS)[number];

/** What each layer may import of ours (besides itself). */
const ALLOWED: Readonly<Record<Layer, readonly Layer[]>> = {
  schema: [],
  compiler: ["schema"],
  reconciler: ["schema", "compiler"],
  memory: ["schema", "compiler"],
  server: ["schema", "compiler", "reconciler", "memory"],
  cli: LAYERS,
};

/** Every module specifier a source text names, wherever it sits. */
function specifiersOf(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: string[] = [];
  const literal = (node: ts.Node | undefined): void => {
    if (node && ts.isStringLiteralLike(node)) out.push(node.text);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) literal(node.moduleSpecifier);
    else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) literal(node.moduleReference.expression);
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) literal(node.argument.literal);
    else if (ts.isCallExpression(node) && (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === "require"))) literal(node.arguments[0]);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** The top folder a relative specifier of `file` (repo-relative) lands in; undefined for a package. */
function topFolderOf(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".")) return undefined;
  const target = relative(ROOT, resolve(ROOT, dirname(file), specifier));
  return target.startsWith("..") ? ".." : target.split(sep)[0];
}

interface Violation {
  readonly file: string;
  readonly specifier: string;
  readonly reason: string;
}

/** The arrows broken by `files` (repo-relative path → text). */
function violations(files: ReadonlyMap<string, string>): Violation[] {
  const out: Violation[] = [];
  for (const [file, text] of files) {
    const layer = file.split("/")[0] as Layer;
    for (const specifier of specifiersOf(file, text)) {
      const top = topFolderOf(file, specifier);
      if (top === undefined || top === layer) continue;
      if (!(LAYERS as readonly string[]).includes(top)) out.push({ file, specifier, reason: `${top}/ is not a layer any source may import` });
      else if (!ALLOWED[layer].includes(top as Layer)) out.push({ file, specifier, reason: `${layer}/ may not import ${top}/ (allowed: ${ALLOWED[layer].join(", ") || "none of ours"})` });
    }
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith(".ts") ? [path] : [];
  });
}

const SOURCES = new Map(LAYERS.flatMap((layer) => sourceFiles(layer)).map((f) => [f, readFileSync(join(ROOT, f), "utf8")]));

describe("the folder arrows of ARCHITECTURE.md", () => {
  it("reads every layer's sources", () => {
    for (const layer of LAYERS) expect([...SOURCES.keys()].filter((f) => f.startsWith(`${layer}/`)).length, layer).toBeGreaterThan(0);
  });

  it("hold over every import of schema/, compiler/, reconciler/, memory/, server/ and cli/", () => {
    expect(violations(SOURCES)).toEqual([]);
  });

  it("schema/ imports zod and nothing else; compiler/ touches the disk in load.ts only", () => {
    const packages = (file: string) => specifiersOf(file, SOURCES.get(file)!).filter((s) => !s.startsWith("."));
    for (const file of SOURCES.keys()) {
      if (file.startsWith("schema/")) for (const p of packages(file)) expect(p, `${file} imports ${p}`).toBe("zod");
      if (file.startsWith("compiler/") && file !== "compiler/load.ts") {
        for (const p of packages(file)) expect(p, `${file} imports ${p}`).not.toMatch(/^(node:)?(fs|child_process|net|http|https)(\/|$)/);
      }
    }
  });

  it("sees every form of import, and fails on one that breaks an arrow", () => {
    const bad = new Map([
      ["reconciler/x.ts", `import {\n  a,\n  b,\n} from "../server/box.js";\nexport type { C } from "../cli/io.js";\nimport type { D } from "../memory/engine.js";`],
      ["memory/y.ts", `const m = await import(\n  "../reconciler/plan.js"\n);\ntype T = import("../server/route.js").Route;`],
      ["compiler/z.ts", `export * from "../reconciler/index.js";\nimport "../test/helpers.js";\nconst r = require("../server/db.js");`],
      ["schema/w.ts", `import { z } from "zod";\nimport { Model } from "../compiler/index.js";`],
      ["server/ok.ts", `import { a } from "../memory/engine.js";\nimport { b } from "../reconciler/index.js";\nimport { c } from "./box.js";`],
      ["cli/ok.ts", `import { a } from "../server/app.js";\nimport { b } from "../memory/embedded.js";`],
    ]);
    expect(violations(bad).map((v) => `${v.file} → ${v.specifier}`)).toEqual([
      "reconciler/x.ts → ../server/box.js",
      "reconciler/x.ts → ../cli/io.js",
      "reconciler/x.ts → ../memory/engine.js",
      "memory/y.ts → ../reconciler/plan.js",
      "memory/y.ts → ../server/route.js",
      "compiler/z.ts → ../reconciler/index.js",
      "compiler/z.ts → ../test/helpers.js",
      "compiler/z.ts → ../server/db.js",
      "schema/w.ts → ../compiler/index.js",
    ]);
  });
});

/**
 * The module specifiers a source imports values from: import and export
 * declarations that are not type-only (a declaration whose every named
 * binding is `type` counts as type-only), dynamic `import()` and `require()`.
 */
function valueSpecifiersOf(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: string[] = [];
  const allTypes = (elements: ts.NodeArray<ts.ImportSpecifier | ts.ExportSpecifier>) => elements.length > 0 && elements.every((e) => e.isTypeOnly);
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteralLike(node.moduleSpecifier)) {
      const clause = node.importClause;
      const typeOnly = clause !== undefined && (clause.isTypeOnly || (clause.name === undefined && clause.namedBindings !== undefined && ts.isNamedImports(clause.namedBindings) && allTypes(clause.namedBindings.elements)));
      if (!typeOnly) out.push(node.moduleSpecifier.text);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteralLike(node.moduleSpecifier)) {
      const typeOnly = node.isTypeOnly || (node.exportClause !== undefined && ts.isNamedExports(node.exportClause) && allTypes(node.exportClause.elements));
      if (!typeOnly) out.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === "require"))) {
      const arg = node.arguments[0];
      if (arg && ts.isStringLiteralLike(arg)) out.push(arg.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

const EXECUTOR = "reconciler/execute";

/** Sources (repo-relative) that take a value from the executor, other than converge.ts. */
function executorUsers(files: ReadonlyMap<string, string>): string[] {
  return [...files].flatMap(([file, text]) => {
    if (file === "reconciler/converge.ts" || file === `${EXECUTOR}.ts`) return [];
    const hits = valueSpecifiersOf(file, text).filter((s) => s.startsWith(".") && relative(ROOT, resolve(ROOT, dirname(file), s)).replace(/\.(js|ts)$/, "") === EXECUTOR);
    return hits.length > 0 ? [file] : [];
  }).sort();
}

describe("one converge() (issue 15, point 4)", () => {
  const everything = new Map([...SOURCES, ...sourceFiles("bench").map((f): [string, string] => [f, readFileSync(join(ROOT, f), "utf8")])]);

  it("converge() is the only caller of the executor outside tests: the sweep, apply, down, restart, hermes_sync and reprovision all come through it", () => {
    expect(everything.size).toBeGreaterThan(SOURCES.size);
    expect(executorUsers(everything)).toEqual([]);
    // …and they do come through it.
    for (const file of ["reconciler/sweep.ts", "cli/progress.ts", "server/slot-restart.ts", "server/mcp-servers/hermes-sync.ts", "cli/agent-cmd.ts"]) {
      expect(SOURCES.get(file), file).toMatch(/\bconverge\(/);
    }
  });

  it("sees a value import of the executor in any form, and lets type-only imports through", () => {
    const probe = new Map([
      ["server/a.ts", `import {\n  executePlan,\n} from "../reconciler/execute.js";`],
      ["reconciler/index.ts", `export { executePlan } from "./execute.js";`],
      ["cli/b.ts", `const { executePlan } = await import("../reconciler/execute.js");`],
      ["server/c.ts", `import { type StepResult, executePlan } from "../reconciler/execute.js";`],
      ["cli/ok.ts", `import type { StepResult } from "../reconciler/execute.js";\nimport { type ExecEvent } from "../reconciler/execute.js";`],
      ["reconciler/ok.ts", `export type { ExecEvent } from "./execute.js";`],
    ]);
    expect(executorUsers(probe)).toEqual(["cli/b.ts", "reconciler/index.ts", "server/a.ts", "server/c.ts"]);
  });
});
