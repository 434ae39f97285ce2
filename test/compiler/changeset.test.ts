import { describe, expect, it, vi } from "vitest";
import { applyChangeSet, ChangeSetError, fileHash, movedFiles, revisionFiles, type FileEdit } from "../../compiler/changeset.js";
import { parse as parseToml } from "smol-toml";
import { compile, sourceTree } from "../../compiler/index.js";

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

// The change set's parses and patches of a file's text, counted: how many times a file is read and written back.
const tomlCalls = vi.hoisted(() => ({ parse: 0, patch: 0 }));
vi.mock("@decimalturn/toml-patch", async (importOriginal) => {
  const real = await importOriginal<typeof import("@decimalturn/toml-patch")>();
  return {
    ...real,
    parse: (...args: Parameters<typeof real.parse>) => (tomlCalls.parse++, real.parse(...args)),
    patch: (...args: Parameters<typeof real.patch>) => (tomlCalls.patch++, real.patch(...args)),
  };
});

const tree = (files: Record<string, string>) => sourceTree("/box", Object.entries(files));
const after = (files: Record<string, string>, edits: any[]) => applyChangeSet(tree(files), { edits }).files.map((f) => f.after);

describe("ChangeSet", () => {
  it("keeps a CRLF file's line endings: a new key, a new table and a new nested table come with CRLF too", () => {
    const slot = `# my chat slot\r\nprofile = "rocm" # keep\r\nmodel = "m1"\r\n\r\n[tune]\r\nctx_size = 32768\r\nvision = false\r\n\r\n[server]\r\nextra_args = "--jinja"\r\n`;
    for (const [path, value, line] of [
      [["priority"], 80, "priority = 80"],
      [["tune", "vision"], null, "ctx_size = 32768"],
      [["server", "env", "A_B"], "x", "[server.env]"],
      [["placement", "device"], "cpu", "[placement]"],
    ] as const) {
      const [out] = after({ "slots/chat.toml": slot }, [{ file: "slots/chat.toml", op: "set", path, value }]);
      expect(out!.replace(/\r\n/g, ""), path.join(".")).not.toContain("\n");
      expect(out!.split("\r\n"), path.join(".")).toContain(line);
    }
    // An LF file stays LF.
    const [lf] = after({ "slots/chat.toml": slot.replace(/\r\n/g, "\n") }, [{ file: "slots/chat.toml", op: "set", path: ["server", "env", "A_B"], value: "x" }]);
    expect(lf).not.toContain("\r");
  });

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

describe("ChangeSet: new keys of existing tables", () => {
  const MODELS = `# File facts\n\n# Small generalist.\n[model."qwen3-4b"]\n  path = "q.gguf" # here\n  jinja = true\n\n# ── NPU ──\n\n[model.npu]\npath = "n.q4nx"\n\n# ── Empty ──\n[model.empty]\n`;

  it("goes after the table's last key, in its indentation, not after the comments that introduce the next table", () => {
    const [out] = after({ "models.toml": MODELS }, [
      { file: "models.toml", op: "set", path: ["model", "qwen3-4b", "mtp"], value: true },
      { file: "models.toml", op: "set", path: ["model", "qwen3-4b", "tags"], value: ["small"] },
      { file: "models.toml", op: "set", path: ["model", "empty", "path"], value: "e.gguf" },
    ]);
    expect(out).toBe(`# File facts\n\n# Small generalist.\n[model."qwen3-4b"]\n  path = "q.gguf" # here\n  jinja = true\n  mtp = true\n  tags = [ "small" ]\n\n# ── NPU ──\n\n[model.npu]\npath = "n.q4nx"\n\n# ── Empty ──\n[model.empty]\npath = "e.gguf"\n`);
  });

  it("adding a key then removing it gives back the file byte for byte", () => {
    const added = applyChangeSet(tree({ "models.toml": MODELS }), { edits: [{ file: "models.toml", op: "set", path: ["model", "qwen3-4b", "mtp"], value: true }] }).tree;
    const removed = applyChangeSet(added, { edits: [{ file: "models.toml", op: "set", path: ["model", "qwen3-4b", "mtp"], value: null }] }).tree;
    expect(removed.files.get("models.toml")).toBe(MODELS);
  });

  it("a new top-level key follows the last top-level key; a key under a dotted table is toml-patch's", () => {
    const [out] = after({ "slots/a.toml": `# slot a\nprofile = "cpu"\n\n# the tune\n[tune]\nctx.size = 1\n` }, [
      { file: "slots/a.toml", op: "set", path: ["model"], value: "m1" },
      { file: "slots/a.toml", op: "set", path: ["tune", "ctx", "keep"], value: 2 },
    ]);
    expect(out).toBe(`# slot a\nprofile = "cpu"\nmodel = "m1"\n\n# the tune\n[tune]\nctx.size = 1\nctx.keep = 2\n`);
  });

  it("removing the last table under a parent the file never wrote as [parent] leaves no empty [parent]", () => {
    const [dotted] = after({ "profiles.toml": `# header\n\nprofile.x.backend = "cpu"\n` }, [{ file: "profiles.toml", op: "set", path: ["profile", "x"], value: null }]);
    expect(dotted).toBe("# header\n");
    const [sections] = after({ "profiles.toml": `# header\n\n[profile.x]\nbackend = "cpu"\n` }, [{ file: "profiles.toml", op: "set", path: ["profile", "x"], value: null }]);
    expect(sections).not.toContain("[profile]");
    const [written] = after({ "profiles.toml": `# header\n\n[profile]\nx.backend = "cpu"\n` }, [{ file: "profiles.toml", op: "set", path: ["profile", "x"], value: null }]);
    expect(written).toBe("# header\n\n[profile]\n");
  });
});

describe("ChangeSet: null values (issue 16 point 3)", () => {
  const SLOT = `profile = "rocm"\nport = 8081\n\n[server]\n# flags\nextra_args = "--metrics"\nenv = { A = "1" }\n`;

  it("a set whose table value holds null leaves that key out instead of throwing", () => {
    const [out] = after({ "slots/chat.toml": SLOT }, [{ file: "slots/chat.toml", op: "set", path: ["server"], value: { env: null, extra_args: "--metrics" } }]);
    expect(out).toBe(`profile = "rocm"\nport = 8081\n\n[server]\n# flags\nextra_args = "--metrics"\n`);
    const [deep] = after({ "slots/chat.toml": SLOT }, [{ file: "slots/chat.toml", op: "set", path: ["server", "env"], value: { A: null, B: "2" } }]);
    expect(deep).toContain(`env = { B = "2" }`);
  });

  it("a null set removes the key, and is a no-op when the key, its table or its file is absent", () => {
    const [out] = after({ "slots/chat.toml": SLOT }, [{ file: "slots/chat.toml", op: "set", path: ["server", "env"], value: null }]);
    expect(out).toBe(`profile = "rocm"\nport = 8081\n\n[server]\n# flags\nextra_args = "--metrics"\n`);
    expect(after({ "slots/chat.toml": SLOT }, [{ file: "slots/chat.toml", op: "set", path: ["server", "nope"], value: null }])).toEqual([]);
    expect(after({ "slots/chat.toml": SLOT }, [{ file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value: null }])).toEqual([]);
    expect(after({ "slots/chat.toml": SLOT }, [{ file: "slots/new.toml", op: "set", path: ["port"], value: null }])).toEqual([]);
  });

  it("a put's null members are absent keys", () => {
    const [out] = after({}, [{ file: "slots/x.toml", op: "put", doc: { profile: "rocm", model: null, port: 8085, server: { env: null } } }]);
    expect(out).toBe(`profile = "rocm"\nport = 8085\n\n[server]\n`);
  });

  it("refuses what TOML cannot hold with a coded ChangeSetError, never toml-patch's own error", () => {
    const refusal = (edits: any[]) => {
      try {
        applyChangeSet(tree({ "slots/chat.toml": SLOT }), { edits });
      } catch (err) {
        return err;
      }
      return undefined;
    };
    const nullInList = refusal([{ file: "slots/chat.toml", op: "set", path: ["tags"], value: ["a", null] }]);
    expect(nullInList).toBeInstanceOf(ChangeSetError);
    expect(nullInList).toMatchObject({ code: "config.invalid_value", file: "slots/chat.toml" });
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = { a: deep };
    const tooDeep = refusal([{ file: "slots/chat.toml", op: "set", path: ["server", "env"], value: deep }]);
    expect(tooDeep).toBeInstanceOf(ChangeSetError);
    expect(tooDeep).toMatchObject({ code: "config.invalid_value" });
  });
});

describe("ChangeSet: #:schema lines of new files (issue 16 point 2)", () => {
  const SLOT = `profile = "rocm"\nport = 8081\n`;
  const ABS = `#:schema /opt/hal0/schema/json/slot.schema.json\n${SLOT}`;
  const REL = `#:schema ../../../schema/json/slot.schema.json\n${SLOT}`;
  // As fixtures/box sits in the package: its lines climb to the package's schema/json/.
  const deep = (files: Record<string, string>) => sourceTree("/src/hal0/fixtures/box", Object.entries(files));
  const create = (files: Record<string, string>, file: string, options = {}) =>
    applyChangeSet(deep(files), { edits: [{ file, op: "put", doc: { profile: "vulkan", port: 8090 } }] }, options).files.find((f) => f.file === file)!.after!;

  it("gives a new file the line of its kind in the folder the caller names", () => {
    const out = create({ "slots/chat.toml": SLOT }, "slots/x.toml", { schemaDir: "/usr/lib/hal0/schema/json/" });
    expect(out).toBe(`#:schema /usr/lib/hal0/schema/json/slot.schema.json\nprofile = "vulkan"\nport = 8090\n`);
    expect(create({}, "stacks/s.toml", { schemaDir: "https://hal0.dev/schema" }).split("\n")[0]).toBe("#:schema https://hal0.dev/schema/stack.schema.json");
  });

  it("else follows the tree's own lines: an absolute folder as is, a relative one re-based on the new file's folder", () => {
    expect(create({ "slots/chat.toml": ABS }, "slots/x.toml").split("\n")[0]).toBe("#:schema /opt/hal0/schema/json/slot.schema.json");
    expect(create({ "slots/chat.toml": ABS }, "mcp-servers/m.toml").split("\n")[0]).toBe("#:schema /opt/hal0/schema/json/mcp-server.schema.json");
    expect(create({ "slots/chat.toml": REL }, "slots/x.toml").split("\n")[0]).toBe("#:schema ../../../schema/json/slot.schema.json");
    expect(create({ "slots/chat.toml": REL }, "profiles.toml").split("\n")[0]).toBe("#:schema ../../schema/json/profiles.schema.json");
    expect(create({ "hal0.toml": "#:schema ./schemas/hal0.schema.json\n" }, "agents/a.toml").split("\n")[0]).toBe("#:schema ../schemas/agent.schema.json");
  });

  it("adds none when the tree has none, and never to a file that exists, a renamed one or a text that has one", () => {
    expect(create({ "slots/chat.toml": SLOT }, "slots/x.toml")).toBe(`profile = "vulkan"\nport = 8090\n`);
    const edited = applyChangeSet(tree({ "slots/chat.toml": ABS, "slots/bare.toml": SLOT }), { edits: [{ file: "slots/bare.toml", op: "set", path: ["port"], value: 8099 }] });
    expect(edited.files[0]!.after).toBe(`profile = "rocm"\nport = 8099\n`);
    const renamed = applyChangeSet(tree({ "slots/chat.toml": ABS, "slots/bare.toml": SLOT }), { edits: [{ file: "slots/bare.toml", op: "rename", to: "slots/moved.toml" }] });
    expect(renamed.tree.files.get("slots/moved.toml")).toBe(SLOT);
    const own = "#:schema ./mine.json\nname = \"x\"\n";
    const text = applyChangeSet(tree({ "slots/chat.toml": ABS }), { edits: [{ file: "stacks/s.toml", op: "text", text: own }] });
    expect(text.tree.files.get("stacks/s.toml")).toBe(own);
    const stack = applyChangeSet(tree({ "slots/chat.toml": ABS }), { edits: [{ file: "stacks/t.toml", op: "text", text: "name = \"t\"\n" }] });
    expect(stack.tree.files.get("stacks/t.toml")).toBe("#:schema /opt/hal0/schema/json/stack.schema.json\nname = \"t\"\n");
  });

  it("puts the line after a text's byte-order mark, in its line ends, so the text compiles as it would on disk", () => {
    const texts = { bom: "\uFEFFname = \"t\"\n", crlf: "name = \"t\"\r\nbad = 1\r\n", both: "\uFEFFname = \"t\"\r\n", marked: "\uFEFF#:schema ./mine.json\nname = \"t\"\n" };
    const out = applyChangeSet(tree({ "slots/chat.toml": ABS }), { edits: Object.keys(texts).map((k) => ({ file: `stacks/${k}.toml`, op: "text" as const, text: texts[k as keyof typeof texts] })) }).tree;
    expect(out.files.get("stacks/bom.toml")).toBe("\uFEFF#:schema /opt/hal0/schema/json/stack.schema.json\nname = \"t\"\n");
    expect(out.files.get("stacks/crlf.toml")).toBe("#:schema /opt/hal0/schema/json/stack.schema.json\r\nname = \"t\"\r\nbad = 1\r\n");
    expect(out.files.get("stacks/both.toml")).toBe("\uFEFF#:schema /opt/hal0/schema/json/stack.schema.json\r\nname = \"t\"\r\n");
    expect(out.files.get("stacks/marked.toml")).toBe(texts.marked);
    const diagnostics = compile(out).diagnostics.filter((d) => d.file?.startsWith("stacks/"));
    expect(diagnostics.map((d) => `${d.file}:${d.line}:${d.column} ${d.code}`)).toEqual(["stacks/crlf.toml:3:1 config.unknown_key"]);
  });
});

describe("ChangeSet: many edits of one file", () => {
  const SLOT = `# chat\nprofile = "rocm"\nmodel = "m1"\nport = 8081\n\n[tune]\n# big ctx\nctx_size = 32768\n\n[server]\nenv = { A = "1" }\n`;
  /** The change set applied one edit at a time, each edit its own change set: what the edits mean in order. */
  const oneByOne = (files: Record<string, string>, edits: any[]) => edits.reduce((t, e) => applyChangeSet(t, { edits: [e] }).tree, tree(files));

  it("applies 500 edits of one file with one parse and one patch of its text, not one per edit", () => {
    const edits = Array.from({ length: 500 }, (_, i) => ({ file: "slots/chat.toml", op: "set", path: ["server", "env", `K_${i}`], value: `v${i}` }));
    tomlCalls.parse = 0;
    tomlCalls.patch = 0;
    const [out] = after({ "slots/chat.toml": SLOT }, edits);
    // Edit by edit, the file was parsed and patched 500 times (about 4 s); the schema-line check may parse it once more.
    expect(tomlCalls.patch).toBe(1);
    expect(tomlCalls.parse).toBeLessThanOrEqual(2);
    expect(out).toContain(`K_0 = "v0"`);
    expect(out).toContain(`K_499 = "v499"`);
    expect(out).toContain("# big ctx");
  });

  it("gives what the edits give one by one: interleaved files, a text, a put, a rename, a delete, a null on an absent file", () => {
    const files = { "slots/chat.toml": SLOT, "models.toml": `# models\n[model.m1]\npath = "m1.gguf"\n` };
    const cases: any[][] = [
      [
        { file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value: 65536 },
        { file: "models.toml", op: "set", path: ["model", "m1", "jinja"], value: true },
        { file: "slots/chat.toml", op: "set", path: ["priority"], value: 80 },
        { file: "models.toml", op: "set", path: ["model", "m2", "path"], value: "m2.gguf" },
        { file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value: 4096 },
      ],
      [
        { file: "slots/chat.toml", op: "set", path: ["priority"], value: 80 },
        { file: "slots/chat.toml", op: "text", text: `profile = "cpu"\nmodel = "m1"\nport = 8090\n` },
        { file: "slots/chat.toml", op: "set", path: ["priority"], value: 10 },
      ],
      [
        { file: "slots/new.toml", op: "set", path: ["priority"], value: null },
        { file: "slots/two.toml", op: "set", path: ["priority"], value: null },
        { file: "slots/two.toml", op: "set", path: ["port"], value: 8099 },
        { file: "slots/chat.toml", op: "put", doc: { profile: "cpu", model: "m1", port: 8081 } },
        { file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value: 2048 },
      ],
      [
        { file: "slots/chat.toml", op: "set", path: ["priority"], value: 5 },
        { file: "slots/chat.toml", op: "rename", to: "slots/main.toml" },
        { file: "slots/main.toml", op: "set", path: ["priority"], value: 6 },
        { file: "models.toml", op: "set", path: ["model", "m1", "jinja"], value: true },
        { file: "models.toml", op: "delete" },
        { file: "models.toml", op: "set", path: ["model", "m1", "path"], value: "again.gguf" },
      ],
      [
        { file: "slots/chat.toml", op: "set", path: ["tune", "vision"], value: true },
        { file: "slots/chat.toml", op: "set", path: ["tune", "vision"], value: null },
      ],
    ];
    const docs = (t: ReturnType<typeof tree>) => Object.fromEntries([...t.files].map(([f, text]) => [f, parseToml(text)]));
    for (const edits of cases) {
      const together = applyChangeSet(tree(files), { edits }).tree;
      expect(docs(together), JSON.stringify(edits)).toEqual(docs(oneByOne(files, edits)));
    }
    // What stays keeps its comments.
    expect(applyChangeSet(tree(files), { edits: cases[0]! }).tree.files.get("slots/chat.toml")).toBe(`# chat\nprofile = "rocm"\nmodel = "m1"\nport = 8081\npriority = 80\n\n[tune]\n# big ctx\nctx_size = 4096\n\n[server]\nenv = { A = "1" }\n`);
    // Adding a key and removing it in one change set changes nothing.
    expect(applyChangeSet(tree(files), { edits: cases[4]! }).files).toEqual([]);
  });

  it("names the edit that cannot apply, as edit by edit, and applies none of them", () => {
    const edits: FileEdit[] = [
      { file: "slots/chat.toml", op: "set", path: ["priority"], value: 80 },
      { file: "slots/chat.toml", op: "set", path: ["port", "inner"], value: 1 },
      { file: "slots/chat.toml", op: "set", path: ["tune", "ctx_size"], value: 1024 },
    ];
    expect(() => applyChangeSet(tree({ "slots/chat.toml": SLOT }), { edits })).toThrow(expect.objectContaining({ code: "config.invalid_value", file: "slots/chat.toml", path: ["port", "inner"] }));
    expect(() => applyChangeSet(tree({ "slots/chat.toml": SLOT }), { edits: [edits[0]!, { file: "slots/chat.toml", op: "set", path: ["server", "env", "L"], value: [1, null] }] }))
      .toThrow(expect.objectContaining({ code: "config.invalid_value", path: ["server", "env", "L"] }));
  });
});
