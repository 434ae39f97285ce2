import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { sourceTree, treeDigest } from "../../compiler/index.js";

/** The digest's bytes, written out: each file's path, its length in UTF-16 units and its text, NUL-separated, in path order. */
function expected(files: ReadonlyArray<readonly [string, string]>): string {
  const hash = createHash("sha256");
  for (const [rel, text] of [...files].sort(([a], [b]) => (a < b ? -1 : 1))) hash.update(Buffer.from(`${rel}\0${text.length}\0${text}\0`, "utf8"));
  return `sha256:${hash.digest("hex")}`;
}

function slots(count: number, note: string): Array<[string, string]> {
  return Array.from({ length: count }, (_, i) => [`slots/s${String(i).padStart(4, "0")}.toml`, `# ${note}\nprofile = "cpu-small"\nport = ${9000 + i}\n`] as [string, string]);
}

describe("treeDigest", () => {
  // A small tree is joined and hashed in one call, a large one streamed: both must hash the same bytes.
  for (const [label, count] of [["a small tree (joined)", 3], ["a large tree (streamed)", 2000]] as const) {
    it(`hashes the documented bytes for ${label}`, () => {
      const files = [["hal0.toml", "[slots]\nruntime = \"process\"\n"] as [string, string], ...slots(count, "naïve café ✓ 𝄞")];
      const size = files.reduce((n, [, text]) => n + text.length, 0);
      expect(size > 64 * 1024).toBe(count > 100);
      const tree = sourceTree("/box", files.reverse());
      expect(treeDigest(tree)).toBe(expected(files));
    });
  }

  it("changes when one character of one file of a large tree changes", () => {
    const files = slots(2000, "a");
    const before = treeDigest(sourceTree("/box", files));
    files[1234] = [files[1234]![0], files[1234]![1].replace("# a", "# b")];
    expect(treeDigest(sourceTree("/box", files))).not.toBe(before);
  });
});
