import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CODES, FILE_KINDS } from "../schema/index.js";

const readme = readFileSync(join(import.meta.dirname, "../README.md"), "utf8");

describe("README", () => {
  it("lists every diagnostic code with its severity and meaning", () => {
    for (const [code, info] of Object.entries(CODES)) {
      expect(readme, code).toContain(`| \`${code}\` | ${info.severity} | ${info.meaning} |`);
    }
  });

  it("documents every file kind with an example", () => {
    for (const kind of FILE_KINDS) {
      const heading = kind.file ?? `${kind.folder}/`;
      expect(readme, kind.id).toMatch(new RegExp(`### \`${heading.replace(/[.]/g, "\\.")}[^\\n]*\\n[\\s\\S]*?\`\`\`toml`));
    }
  });

  it("has a Quickstart of exactly two commands", () => {
    const quickstart = readme.split("## Quickstart")[1]!.split("## ")[0]!;
    const block = quickstart.split("```sh")[1]!.split("```")[0]!.trim().split("\n");
    expect(block).toHaveLength(2);
    expect(block[0]).toMatch(/^npm ci && npx hal0 /);
    expect(block[1]).toMatch(/^npm test\b/);
  });
});
