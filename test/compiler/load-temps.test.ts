import { chmodSync, cpSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compile, loadTree } from "../../compiler/index.js";

const FIXTURE_BOX = join(import.meta.dirname, "../../fixtures/box");

describe("loadTree: temp files are not part of the tree (issue 16)", () => {
  it("ignores hal0's temps and any dotfile, even one ending in .toml, so none becomes a diagnostic", async () => {
    const root = mkdtempSync(join(tmpdir(), "hal0-load-"));
    cpSync(FIXTURE_BOX, root, { recursive: true });
    const clean = await loadTree(root);
    const partial = "profile = \"llama-cpu\"\nmodel = "; // a copy cut off mid-write: a parse error if it were read
    for (const name of [
      `slots/.chat.toml.${process.pid}.0123456789ab.hal0.tmp`, // hal0's own (reconciler/atomic.ts)
      "slots/.chat.toml.0123456789ab.tmp", // hal0's before the pid was in the name
      "slots/.chat.toml", // an editor's or sync tool's hidden copy
      "stacks/.#dev.toml",
      ".hal0.toml",
    ]) writeFileSync(join(root, name), partial);
    const loaded = await loadTree(root);
    expect([...loaded.tree.files.keys()]).toEqual([...clean.tree.files.keys()]);
    expect(loaded.diagnostics).toEqual([]);
    const { model, diagnostics } = compile(loaded.tree, loaded.diagnostics);
    expect(model).toBeDefined();
    expect(diagnostics.filter((d) => d.severity === "error")).toEqual([]);
  });
});

describe("loadTree: links, folders and files hal0 does not read", () => {
  const box = () => {
    const root = mkdtempSync(join(tmpdir(), "hal0-load-"));
    cpSync(FIXTURE_BOX, root, { recursive: true });
    return root;
  };
  const at = (ds: readonly { file: string | null; code: string; severity: string }[]) => ds.map((d) => `${d.file} ${d.severity} ${d.code}`);

  it("reads a symbolic link as what it leads to: a slot's file, the settings, a whole resource folder", async () => {
    const root = box();
    const elsewhere = mkdtempSync(join(tmpdir(), "hal0-load-target-"));
    const clean = await loadTree(root);
    renameSync(join(root, "slots/utility.toml"), join(elsewhere, "utility.toml"));
    symlinkSync(join(elsewhere, "utility.toml"), join(root, "slots/utility.toml"));
    renameSync(join(root, "hal0.toml"), join(elsewhere, "hal0.toml"));
    symlinkSync(join(elsewhere, "hal0.toml"), join(root, "hal0.toml"));
    renameSync(join(root, "stacks"), join(elsewhere, "stacks"));
    symlinkSync(join(elsewhere, "stacks"), join(root, "stacks"));
    const loaded = await loadTree(root);
    expect(loaded.diagnostics).toEqual([]);
    expect(loaded.tree.files).toEqual(clean.tree.files);
    expect(compile(loaded.tree, loaded.diagnostics).model?.slots.utility).toBeDefined();
  });

  it("a link that leads nowhere, a loop, a .toml that is a folder: config.read_error at each, and the tree is invalid (no slot is planned away)", async () => {
    const root = box();
    rmSync(join(root, "slots/utility.toml"));
    symlinkSync("/nonexistent/utility.toml", join(root, "slots/utility.toml"));
    symlinkSync(join(root, "slots/loop-b.toml"), join(root, "slots/loop-a.toml"));
    symlinkSync(join(root, "slots/loop-a.toml"), join(root, "slots/loop-b.toml"));
    mkdirSync(join(root, "upstreams.toml.d"));
    rmSync(join(root, "capabilities.toml"));
    mkdirSync(join(root, "capabilities.toml"));
    const loaded = await loadTree(root);
    expect(at(loaded.diagnostics)).toEqual([
      "capabilities.toml error config.read_error",
      "slots/loop-a.toml error config.read_error",
      "slots/loop-b.toml error config.read_error",
      "slots/utility.toml error config.read_error",
    ]);
    expect(loaded.diagnostics.map((d) => d.detail)).toEqual([
      expect.stringContaining("it is a folder, not a file"),
      expect.stringContaining("leads to no file"),
      expect.stringContaining("leads to no file"),
      expect.stringContaining("leads to no file"),
    ]);
    expect(compile(loaded.tree, loaded.diagnostics).model).toBeUndefined();
  });

  it("a resource folder's name that is not a folder (a link that leads nowhere or loops, a file) is config.read_error there: its slots are unknown, never planned away", async () => {
    const root = box();
    const elsewhere = mkdtempSync(join(tmpdir(), "hal0-load-target-"));
    renameSync(join(root, "slots"), join(elsewhere, "slots"));
    symlinkSync(join(elsewhere, "slots"), join(root, "slots"));
    expect(compile((await loadTree(root)).tree).model?.slots.chat).toBeDefined();
    rmSync(join(root, "slots"));
    symlinkSync(join(elsewhere, "unmounted/slots"), join(root, "slots")); // the disk it was on is not mounted
    symlinkSync(join(root, "agents"), join(root, "agents.link"));
    rmSync(join(root, "agents"), { recursive: true });
    renameSync(join(root, "agents.link"), join(root, "agents")); // a link to itself
    rmSync(join(root, "stacks"), { recursive: true });
    writeFileSync(join(root, "stacks"), "");
    const loaded = await loadTree(root);
    expect(at(loaded.diagnostics)).toEqual(["agents error config.read_error", "slots error config.read_error", "stacks error config.read_error"]);
    expect(loaded.diagnostics.map((d) => d.detail)).toEqual([
      expect.stringContaining("leads to no folder"),
      expect.stringContaining("leads to no folder"),
      expect.stringContaining("it is not a folder"),
    ]);
    const { model, diagnostics } = compile(loaded.tree, loaded.diagnostics);
    expect(model).toBeUndefined();
    expect(at(diagnostics.filter((d) => ["agents", "slots", "stacks"].includes(d.file!)))).toEqual(["agents error config.read_error", "slots error config.read_error", "stacks error config.read_error"]);
  });

  it("a resource folder hal0 cannot list (permission denied) is config.read_error there, not a failed load (hal0 serve answered every read 500 system.internal)", async (ctx) => {
    const root = box();
    // A folder that stats as one and cannot be read: 0000 for anyone but root; /proc/1/map_files for root without CAP_SYS_ADMIN.
    chmodSync(join(root, "stacks"), 0o000);
    let listable = true;
    try {
      readdirSync(join(root, "stacks"));
    } catch {
      listable = false;
    }
    if (listable) {
      chmodSync(join(root, "stacks"), 0o755);
      rmSync(join(root, "stacks"), { recursive: true });
      symlinkSync("/proc/1/map_files", join(root, "stacks"));
      try {
        readdirSync(join(root, "stacks"));
        ctx.skip(); // no folder here that this process cannot list
      } catch {
        // unlistable: the case
      }
    }
    const loaded = await loadTree(root);
    if (!listable) chmodSync(join(root, "stacks"), 0o755);
    expect(at(loaded.diagnostics)).toEqual(["stacks error config.read_error"]);
    expect(loaded.diagnostics[0]!.detail).toContain("it cannot be listed");
    expect(loaded.diagnostics[0]!.summary).toBe("cannot read stacks: it cannot be listed: permission denied");
    expect(compile(loaded.tree, loaded.diagnostics).model).toBeUndefined();
  });

  it("a config folder hal0 cannot list is config.read_error (a tree that cannot be known), not a failed load nor an empty box", async (ctx) => {
    const parent = mkdtempSync(join(tmpdir(), "hal0-load-"));
    const root = join(parent, "box");
    cpSync(FIXTURE_BOX, root, { recursive: true });
    chmodSync(root, 0o000);
    let listable = true;
    try {
      readdirSync(root);
    } catch {
      listable = false;
    }
    if (listable) {
      chmodSync(root, 0o755);
      rmSync(root, { recursive: true });
      symlinkSync("/proc/1/map_files", root);
      try {
        readdirSync(root);
        ctx.skip();
      } catch {
        // unlistable: the case
      }
    }
    const loaded = await loadTree(root);
    if (!listable) chmodSync(root, 0o755);
    expect(at(loaded.diagnostics)).toEqual([". error config.read_error"]);
    expect(loaded.diagnostics[0]!.detail).toMatch(/^hal0 could not read this folder: the config folder cannot be listed: /);
    expect(loaded.diagnostics[0]!.summary).toBe("cannot read .: the config folder cannot be listed: permission denied");
    expect(loaded.tree.files.size).toBe(0);
    expect(compile(loaded.tree, loaded.diagnostics).model).toBeUndefined();
  });

  it("a .toml file in a folder hal0 does not read (a typo'd slot/, a folder below slots/) is a config.unknown_file warning, not silence", async () => {
    const root = box();
    mkdirSync(join(root, "slot"));
    writeFileSync(join(root, "slot/extra.toml"), 'profile = "llama-cpu"\n');
    mkdirSync(join(root, "slots/old"));
    writeFileSync(join(root, "slots/old/chat.toml"), 'profile = "llama-cpu"\n');
    writeFileSync(join(root, "slots/old/notes.txt"), "not toml\n");
    const loaded = await loadTree(root);
    expect(at(loaded.diagnostics)).toEqual(["slot/extra.toml warning config.unknown_file", "slots/old/chat.toml warning config.unknown_file"]);
    const { model } = compile(loaded.tree, loaded.diagnostics);
    expect(model).toBeDefined();
  });
});

describe("loadTree and compile: a file larger than hal0 reads", () => {
  it("a 50 MB slot file on disk is config.read_error at it, left unread (present and broken: no model, so no plan)", async () => {
    const root = mkdtempSync(join(tmpdir(), "hal0-load-"));
    try {
      cpSync(FIXTURE_BOX, root, { recursive: true });
      // 50 MB of keys hal0 does not know: compiled, each one's diagnostic took minutes and gigabytes.
      let keys = "";
      for (let i = 0; keys.length < 1024 * 1024; i++) keys += `k${i} = ${i}\n`;
      writeFileSync(join(root, "slots/chat.toml"), keys.repeat(50));
      const started = performance.now();
      const loaded = await loadTree(root);
      expect(loaded.tree.files.has("slots/chat.toml")).toBe(false);
      expect(loaded.diagnostics.map((d) => [d.code, d.file, d.line, d.column])).toEqual([["config.read_error", "slots/chat.toml", 1, 1]]);
      expect(loaded.diagnostics[0]!.detail).toMatch(/more than the 1048576 \(1 MiB\) hal0 reads of one file/);
      const { model, diagnostics } = compile(loaded.tree, loaded.diagnostics);
      expect(model).toBeUndefined();
      expect(diagnostics.filter((d) => d.severity === "error").map((d) => d.code)).toEqual(["config.read_error"]);
      expect(performance.now() - started).toBeLessThan(5000);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("a change's text over 1 MiB is the same config.read_error, the file present and broken; 1 MiB itself is read", async () => {
    const { tree } = await loadTree(FIXTURE_BOX);
    const over = `description = "${"é".repeat(512 * 1024)}"\n`; // 1 MiB and a few bytes of UTF-8, in half as many characters
    const big = compile({ root: tree.root, files: new Map([...tree.files, ["policy.toml", over]]) });
    expect(big.model).toBeUndefined();
    expect(big.diagnostics.filter((d) => d.file === "policy.toml").map((d) => [d.code, d.line, d.column])).toEqual([["config.read_error", 1, 1]]);
    const padded = `# ${"x".repeat(1024 * 1024 - 3)}\n`;
    expect(padded.length).toBe(1024 * 1024);
    expect(compile({ root: tree.root, files: new Map([...tree.files, ["policy.toml", padded]]) }).model).toBeDefined();
  });
});

describe("loadTree: a file saved as UTF-16", () => {
  it("is config.read_error that says so and how to fix it (little- and big-endian), not a bad byte at 1:1", async () => {
    const root = mkdtempSync(join(tmpdir(), "hal0-load-"));
    try {
      cpSync(FIXTURE_BOX, root, { recursive: true });
      const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('[policy]\n', "utf16le")]);
      writeFileSync(join(root, "policy.toml"), le);
      writeFileSync(join(root, "slots/chat.toml"), Buffer.from(le.map((_, i) => le[i ^ 1]!)));
      const { diagnostics } = await loadTree(root);
      expect(diagnostics.map((d) => `${d.file}:${d.line}:${d.column}: ${d.code}: ${d.summary} | ${d.detail}`)).toEqual([
        "policy.toml:1:1: config.read_error: cannot read policy.toml: it is UTF-16 text, not UTF-8 | hal0 could not read this file: it is UTF-16 text (it starts with the byte-order mark 0xff 0xfe), not UTF-8: save it as UTF-8.",
        "slots/chat.toml:1:1: config.read_error: cannot read slots/chat.toml: it is UTF-16 text, not UTF-8 | hal0 could not read this file: it is UTF-16 text (it starts with the byte-order mark 0xfe 0xff), not UTF-8: save it as UTF-8.",
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("loadTree: a file that is not UTF-8 after text outside the BMP", () => {
  it("gives the bad byte's column in UTF-16 code units, as the parser's and the locator's columns count (an emoji is two)", async () => {
    const root = mkdtempSync(join(tmpdir(), "hal0-load-"));
    try {
      cpSync(FIXTURE_BOX, root, { recursive: true });
      writeFileSync(join(root, "policy.toml"), Buffer.concat([Buffer.from('# 🎉🎉 x\n# 🎉 é'), Buffer.from([0xff]), Buffer.from("\n")]));
      const { diagnostics } = await loadTree(root);
      expect(diagnostics.map((d) => [d.code, d.file, d.line, d.column])).toEqual([["config.read_error", "policy.toml", 2, 7]]);
      expect(diagnostics[0]!.detail).toBe("hal0 could not read this file: it is not valid UTF-8 text: byte 0xff at line 2, column 7.");
      // The same emoji before a value the schema refuses: the column counts it as two there too.
      writeFileSync(join(root, "policy.toml"), 'x = "🎉"; y = 1\n');
      const tree = (await loadTree(root)).tree;
      const parse = compile(tree).diagnostics.find((d) => d.file === "policy.toml")!;
      expect([parse.code, parse.line, parse.column]).toEqual(["config.parse_error", 1, 9]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
