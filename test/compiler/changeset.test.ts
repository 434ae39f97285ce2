import { describe, expect, it } from "vitest";
import { applyChangeSet, ChangeSetError, fileHash, movedFiles, revisionFiles } from "../../compiler/changeset.js";
import { sourceTree } from "../../compiler/index.js";

const PROFILES = `# profiles of this box
[profile.a]
image = "a" # inline a
[profile.a.tune]
ctx_size = 1

# ── This box's own ──
# about b
[profile.b]
image = "b"

# trailing comment of file
`;

const tree = (files: Record<string, string>) => sourceTree("/box", Object.entries(files));
const after = (files: Record<string, string>, edits: any[]) => applyChangeSet(tree(files), { edits }).files.map((f) => f.after);

describe("ChangeSet", () => {
  it("sets and removes keys keeping every comment and the layout", () => {
    const slot = `# my chat slot\nprofile = "rocm" # keep\nmodel = "m1"\n\n[tune]\n# big ctx\nctx_size = 32768\nvision = false\n`;
    const [out] = after({ "slots/chat.toml": slot }, [
      { file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value: 65536 },
      { file: "slots/chat.toml", op: "set", path: ["tune", "vision"], value: null },
      { file: "slots/chat.toml", op: "set", path: ["server", "extra_args"], value: "--jinja" },
    ]);
    expect(out).toBe(`# my chat slot\nprofile = "rocm" # keep\nmodel = "m1"\n\n[tune]\n# big ctx\nctx_size = 65536\n\n[server]\nextra_args = "--jinja"\n`);
  });

  it("deletes a table without taking the comments that introduce what follows it", () => {
    const [a] = after({ "profiles.toml": PROFILES }, [{ file: "profiles.toml", op: "set", path: ["profile", "a"], value: null }]);
    expect(a).toBe(`# profiles of this box\n\n# ── This box's own ──\n# about b\n[profile.b]\nimage = "b"\n\n# trailing comment of file\n`);
    const [b] = after({ "profiles.toml": PROFILES }, [{ file: "profiles.toml", op: "put", doc: { profile: { a: { image: "a", tune: { ctx_size: 1 } } } } }]);
    expect(b).toContain("# trailing comment of file");
    expect(b).toContain("# ── This box's own ──");
    expect(b).not.toContain("[profile.b]");
  });

  it("creates, replaces and deletes files; leaves the input tree alone", () => {
    const input = tree({ "models.toml": "[model.x]\npath = \"x.gguf\"\n" });
    const r = applyChangeSet(input, { edits: [
      { file: "slots/new.toml", op: "put", doc: { profile: "cpu", model: "x", port: 9000 } },
      { file: "models.toml", op: "delete" },
      { file: "upstreams.toml", op: "text", text: "# none yet\n" },
    ] });
    expect(r.files.map((f) => [f.file, f.before === null, f.after === null])).toEqual([["models.toml", false, true], ["slots/new.toml", true, false], ["upstreams.toml", true, false]]);
    expect([...r.tree.files.keys()]).toEqual(["slots/new.toml", "upstreams.toml"]);
    expect(input.files.has("models.toml")).toBe(true);
  });

  it("refuses files outside the tree and key edits of a file that does not parse", () => {
    expect(() => applyChangeSet(tree({}), { edits: [{ file: "../etc/passwd", op: "text", text: "" }] })).toThrow(ChangeSetError);
    expect(() => applyChangeSet(tree({}), { edits: [{ file: "slots/a/b.toml", op: "delete" }] })).toThrow(/not a file of the tree/);
    expect(() => applyChangeSet(tree({ "hal0.toml": "[server\n" }), { edits: [{ file: "hal0.toml", op: "set", path: ["server", "port"], value: 1 }] }))
      .toThrow(expect.objectContaining({ code: "config.parse_error", file: "hal0.toml" }));
  });

  it("names the touched files whose text moved between two revisions", () => {
    const base = revisionFiles(tree({ "hal0.toml": "a", "models.toml": "b" }));
    const now = revisionFiles(tree({ "hal0.toml": "a2", "models.toml": "b", "slots/x.toml": "c" }));
    expect(movedFiles(base, now, ["models.toml", "hal0.toml", "slots/x.toml", "slots/y.toml"])).toEqual(["hal0.toml", "slots/x.toml"]);
    expect(fileHash(null)).toBe("absent");
  });
});

describe("ChangeSet: arrays of tables", () => {
  it("writes a new file's first [[slot]] and adds one to a file that has other keys", () => {
    const [fresh] = after({}, [{ file: "stacks/s.toml", op: "put", doc: { name: "S", slot: [{ slot: "chat", model: "m" }] } }]);
    expect(fresh).toBe(`name = "S"\n\n[[slot]]\nslot = "chat"\nmodel = "m"\n`);
    const [added] = after({ "stacks/s.toml": "# my stack\nname = \"S\" # named\n" }, [{ file: "stacks/s.toml", op: "put", doc: { name: "S", slot: [{ slot: "chat" }] } }]);
    expect(added).toBe(`# my stack\nname = "S" # named\n\n[[slot]]\nslot = "chat"\n`);
  });
});

describe("ChangeSet: new tables", () => {
  it("adds a table under a parent as a section at the end, sub-tables as their own sections", () => {
    const models = `# The daily driver\n[model."qwen3-30b-a3b"]\npath = "a.gguf" # fast\n`;
    const [out] = after({ "models.toml": models }, [{ file: "models.toml", op: "set", path: ["model", "tiny.v2"], value: { path: "t.gguf", capabilities: ["chat"], extra: { k: 1 } } }]);
    expect(out).toBe(`${models}\n[model."tiny.v2"]\npath = "t.gguf"\ncapabilities = [ "chat" ]\n\n[model."tiny.v2".extra]\nk = 1\n`);
  });
});
