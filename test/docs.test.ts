import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CODES, FILE_KINDS } from "../schema/index.js";

/**
 * The README is what a newcomer reads in ten minutes; the reference lives in
 * docs/ (issue 16). These tests hold code and docs in step: every code in the
 * table of docs/codes.md, every file kind with an example in docs/config.md,
 * the Quickstart's two commands, every doc linked and every link resolving.
 * docs-examples.test.ts runs the examples themselves.
 */
const ROOT = join(import.meta.dirname, "..");
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");
const readme = read("README.md");
const DOCS = readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).sort();

describe("README and docs/", () => {
  it("docs/codes.md lists every diagnostic code with its severity and meaning (npm run docs-codes rewrites the table)", () => {
    const codes = read("docs/codes.md");
    for (const [code, info] of Object.entries(CODES)) {
      expect(codes, code).toContain(`| \`${code}\` | ${info.severity} | ${info.meaning.replaceAll("|", "\\|")} |`);
    }
  });

  it("docs/config.md documents every file kind with an example", () => {
    const config = read("docs/config.md");
    for (const kind of FILE_KINDS) {
      const heading = kind.file ?? `${kind.folder}/`;
      expect(config, kind.id).toMatch(new RegExp(`### \`${heading.replace(/[.]/g, "\\.")}[^\\n]*\\n[\\s\\S]*?\`\`\`toml`));
    }
  });

  it("has a Quickstart of exactly two commands", () => {
    const quickstart = readme.split("## Quickstart")[1]!.split("## ")[0]!;
    const block = quickstart.split("```sh")[1]!.split("```")[0]!.trim().split("\n");
    expect(block).toHaveLength(2);
    expect(block[0]).toMatch(/^npm ci && npx hal0 /);
    expect(block[1]).toMatch(/^npm test\b/);
  });

  it("keeps the README short, links every doc from it, and every relative link in README, ARCHITECTURE and docs/ resolves (file and anchor)", () => {
    expect(readme.split("\n").length).toBeLessThan(150);
    for (const doc of DOCS) expect(readme, doc).toContain(`](docs/${doc})`);
    const anchorsOf = (text: string) => new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1]!)));
    for (const file of ["README.md", "ARCHITECTURE.md", ...DOCS.map((d) => `docs/${d}`)]) {
      const text = read(file);
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue; // a URL
        const [path, anchor] = target!.split("#");
        const resolved = path === "" ? file : join(file, "..", path!);
        expect(existsSync(join(ROOT, resolved)), `${file} → ${target}`).toBe(true);
        if (anchor !== undefined && resolved.endsWith(".md")) expect([...anchorsOf(read(resolved))], `${file} → ${target}`).toContain(anchor);
      }
    }
  });
});

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\- ]/gu, "").replace(/ /g, "-");
}
