import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../cli/index.js";
import { compile, loadTree } from "../../compiler/index.js";
import { classifyPath } from "../../schema/index.js";
import { freePort } from "../reconciler/process-helpers.js";
import { captureIo, hal0ForNobody, healthWithin } from "./helpers.js";

/**
 * `hal0 init DIR` (issue 16 point 1): the example box, written where a person
 * asks, with `#:schema` lines an editor can follow from there, valid as
 * written, and able to start its slots with the process runtime.
 */
const PACKAGE = join(import.meta.dirname, "../..");
const EXAMPLE = join(PACKAGE, "fixtures/box");

let base: string;

async function hal0(...args: string[]) {
  const io = captureIo({}, base);
  const code = await main(args, io);
  return { code, out: io.out(), err: io.err() };
}

/** Every file under `dir`, relative, sorted. */
function filesUnder(dir: string, prefix = ""): string[] {
  return readdirSync(join(dir, prefix), { withFileTypes: true }).flatMap((e) => {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    return e.isDirectory() ? filesUnder(dir, rel) : [rel];
  }).sort();
}

beforeAll(() => {
  base = mkdtempSync(join(tmpdir(), "hal0-init-"));
});

afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

describe("hal0 init DIR", () => {
  const dir = () => join(base, "box");

  it("writes every file of the example box, models included, and prints the next steps (exit 0)", async () => {
    const res = await hal0("init", "box");
    expect(res.err).toBe("");
    expect(res.code).toBe(0);
    expect(filesUnder(dir())).toEqual([".gitignore", ...filesUnder(EXAMPLE)].sort());
    // The state folder the next steps name is inside the box: a `git add .` there must not take its operator.token.
    expect(readFileSync(join(dir(), ".gitignore"), "utf8")).toMatch(/^\/\.state\/$/m);
    expect(res.out).toContain("The .gitignore keeps .state/ (the database and operator.token) out of git.");
    // The stand-in model files models.toml names relatively are tiny fakes, copied as they are.
    for (const rel of filesUnder(EXAMPLE).filter((f) => f.startsWith("models/"))) {
      expect(readFileSync(join(dir(), rel))).toEqual(readFileSync(join(EXAMPLE, rel)));
    }
    expect(res.out).toContain(`hal0 validate --config ${dir()}`);
    expect(res.out).toContain(`hal0 apply --yes --config ${dir()} --state ${join(dir(), ".state")}`);
    expect(res.out).toContain(`hal0 serve --config ${dir()} --state ${join(dir(), ".state")}`);
  });

  it("points every #:schema line at this package's schema/json/<kind>.schema.json, an existing absolute path", () => {
    const tomls = filesUnder(dir()).filter((f) => f.endsWith(".toml"));
    expect(tomls.length).toBeGreaterThan(10);
    for (const rel of tomls) {
      const text = readFileSync(join(dir(), rel), "utf8");
      const first = text.split("\n")[0]!;
      const target = /^#:schema (\S+)$/.exec(first)?.[1];
      expect(target, rel).toBe(join(PACKAGE, "schema/json", classifyPath(rel)!.kind.jsonSchema));
      expect(existsSync(target!), `${rel} → ${target}`).toBe(true);
      // Only the line moved: the rest of the file is the example's, comments and all.
      const example = readFileSync(join(EXAMPLE, rel), "utf8");
      expect(text.split("\n").slice(1)).toEqual(example.split("\n").slice(1));
      expect(text.match(/^#:schema/gm)).toHaveLength(1);
    }
  });

  it("keeps an installed server's files private (0700 folder, 0600 files), as the server writes them", () => {
    expect(statSync(join(dir(), "mcp-servers")).mode & 0o777).toBe(0o700);
    for (const rel of filesUnder(dir()).filter((f) => f.startsWith("mcp-servers/"))) expect(statSync(join(dir(), rel)).mode & 0o777).toBe(0o600);
  });

  it("under a umask of 000 writes no folder or file another user may write (folders 0755 as files 0644, the private ones 0700/0600)", async () => {
    const open = join(base, "umask-000", "box");
    const before = process.umask(0o000);
    try {
      expect((await hal0("init", open)).code).toBe(0);
    } finally {
      process.umask(before);
    }
    const modes = [join(base, "umask-000"), open, ...filesUnder(open).flatMap((f) => [join(open, f), join(open, f, "..")])];
    const writable = [...new Set(modes)].filter((p) => (statSync(p).mode & 0o022) !== 0);
    expect(writable).toEqual([]);
    expect(statSync(join(open, "slots")).mode & 0o777).toBe(0o755);
    expect(statSync(join(open, "mcp-servers")).mode & 0o777).toBe(0o700);
  });

  it("is valid as written: hal0 validate exits 0; asked, its runners take every slot's argv (no removed, unknown or deprecated flag)", async () => {
    const res = await hal0("validate", "--config", dir(), "--state", join(base, "validate-state"), "--runners", "--json");
    expect(res.err).toBe("");
    expect(res.code).toBe(0);
    const doc = JSON.parse(res.out) as { diagnostics: Array<{ code: string }>; runners: Array<{ runner: string; status: string }> };
    expect(doc.diagnostics.map((d) => d.code)).toEqual([]);
    expect(doc.runners.map((r) => `${r.runner} ${r.status}`).sort()).toEqual(["hal0-fake-llama-server checked", "hal0-fake-runner not_checked"]);
    const { tree, diagnostics } = await loadTree(dir());
    expect(compile(tree, diagnostics).diagnostics).toEqual([]);
  });

  it("refuses a folder that is not empty with init.not_empty (exit 1) and writes nothing", async () => {
    const before = filesUnder(dir()).map((f) => [f, readFileSync(join(dir(), f), "utf8")]);
    const again = await hal0("init", dir());
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/^hal0 init: init\.not_empty: .*is not empty/);
    expect(filesUnder(dir()).map((f) => [f, readFileSync(join(dir(), f), "utf8")])).toEqual(before);
    const other = join(base, "notes");
    mkdirSync(other);
    writeFileSync(join(other, "todo.txt"), "keep me\n");
    const notes = await hal0("init", other);
    expect(notes.code).toBe(1);
    expect(notes.err).toContain("init.not_empty");
    expect(readdirSync(other)).toEqual(["todo.txt"]);
    const file = await hal0("init", join(other, "todo.txt"));
    expect(file.code).toBe(1);
    expect(file.err).toContain("init.not_empty");
  });

  it("refuses a symbolic link to nothing, or a path below one or below a file, with cli.not_a_folder naming the part (exit 1), and makes nothing; a link to an empty folder is written through", async () => {
    const link = join(base, "moved");
    symlinkSync(join(base, "gone", "box"), link);
    const dangling = await hal0("init", link);
    expect(dangling.code).toBe(1);
    expect(dangling.err).toBe(`hal0 init: cli.not_a_folder: folder ${link} is a symbolic link to ${join(base, "gone", "box")}, which does not exist; make that folder first, or name another\n`);
    const below = await hal0("init", join(link, "inner"));
    expect(below.code).toBe(1);
    expect(below.err).toContain(`cli.not_a_folder: folder ${join(link, "inner")} cannot be made: ${link} is a symbolic link to`);
    expect(existsSync(join(base, "gone"))).toBe(false);
    writeFileSync(join(base, "plain"), "");
    const file = await hal0("init", join(base, "plain", "box"));
    expect(file.code).toBe(1);
    expect(file.err).toContain(`cli.not_a_folder: folder ${join(base, "plain", "box")} cannot be made: ${join(base, "plain")} is a file, not a folder`);
    // The same for a state folder so named: said before anything is read or written.
    const token = await hal0("token", "list", "--state", link);
    expect(token.code).toBe(1);
    expect(token.err).toContain(`cli.not_a_folder: state folder ${link} is a symbolic link to`);
    expect(existsSync(join(base, "gone"))).toBe(false);
    mkdirSync(join(base, "gone", "box"), { recursive: true });
    expect((await hal0("init", link)).code).toBe(0);
    expect(existsSync(join(base, "gone", "box", "hal0.toml"))).toBe(true);
  });

  it("writes into a folder that holds only dot entries (git init DIR first); a .gitignore there is kept as it was, with a note", async () => {
    const repo = join(base, "repo");
    mkdirSync(join(repo, ".git"), { recursive: true });
    writeFileSync(join(repo, ".git", "HEAD"), "ref: refs/heads/main\n");
    writeFileSync(join(repo, ".gitignore"), "*.log\n");
    const res = await hal0("init", repo);
    expect(res.err).toBe("");
    expect(res.code).toBe(0);
    expect(readFileSync(join(repo, ".gitignore"), "utf8")).toBe("*.log\n");
    expect(readFileSync(join(repo, ".git", "HEAD"), "utf8")).toBe("ref: refs/heads/main\n");
    expect(res.out).toContain(`note: ${join(repo, ".gitignore")} was there and is left as it is: add /.state/ to it`);
    expect(filesUnder(repo).filter((f) => !f.startsWith("."))).toEqual(filesUnder(EXAMPLE));
    // The example box's .gitignore does not make the tree any less valid.
    const { tree, diagnostics } = await loadTree(repo);
    expect(compile(tree, diagnostics).diagnostics).toEqual([]);
  });

  it("run by npx (npm_command=exec), writes its next steps as npx hal0 …, since hal0 itself is on no PATH", async () => {
    const io = captureIo({ npm_command: "exec" }, base);
    expect(await main(["init", "by-npx"], io)).toBe(0);
    const next = io.out().split("\n").filter((l) => l.startsWith("  "));
    expect(next.map((l) => l.trim().split(" ").slice(0, 3).join(" "))).toEqual(["npx hal0 validate", "npx hal0 apply", "npx hal0 serve", "npx hal0 down"]);
    expect(io.out()).toContain(`  npx hal0 serve --config ${join(base, "by-npx")} --state ${join(base, "by-npx", ".state")}`);
  });

  it.runIf(process.getuid?.() === 0)("run by a user who may not write DIR (root's empty folder), is system.io saying to name a folder of the user's; nothing is written", () => {
    const roots = join(base, "root's empty");
    mkdirSync(roots, { mode: 0o755 });
    chmodSync(base, 0o755); // mkdtemp's 0700 would keep nobody out before DIR
    const r = spawnSync("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", process.execPath, hal0ForNobody(), "init", roots], { encoding: "utf8", env: { PATH: process.env.PATH! } });
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toBe(`hal0 init: system.io: could not mkdir ${join(roots, "agents")}: permission denied (EACCES); hal0 init writes the box into a new or empty folder you may write: name one of your own, such as ~/mybox\n`);
    expect(readdirSync(roots)).toEqual([]);
  });

  it("writes into an existing empty folder; a missing or second DIR is a usage error", async () => {
    const empty = join(base, "empty");
    mkdirSync(empty);
    expect((await hal0("init", empty)).code).toBe(0);
    expect(existsSync(join(empty, "hal0.toml"))).toBe(true);
    const none = await hal0("init");
    expect(none.code).not.toBe(0);
    expect(none.code).not.toBe(1);
    expect(none.err).toContain("DIR");
    expect((await hal0("init", join(base, "a"), join(base, "b"))).code).not.toBe(0);
    expect(existsSync(join(base, "a"))).toBe(false);
  });

  it("on a disk that fills up half-way (a real 40 KiB tmpfs) is system.io naming the file (exit 1) and leaves nothing of the box, so it can run again", async () => {
    const disk = join(base, "disk");
    mkdirSync(disk);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=40k", "tmpfs", disk]);
    try {
      const repo = join(disk, "repo");
      mkdirSync(join(repo, ".git"), { recursive: true });
      for (const target of [repo, join(disk, "new", "box")]) {
        const res = await hal0("init", target);
        expect(res.code, res.err).toBe(1);
        expect(res.err).toMatch(/^hal0 init: system\.io: could not write .*: no space left on device \(ENOSPC\)$/m);
        expect(res.err).not.toContain("internal error");
      }
      expect(readdirSync(disk).sort()).toEqual(["repo"]);
      expect(readdirSync(repo)).toEqual([".git"]);
      // Nothing is left to make it not empty: with room, it runs again.
      execFileSync("mount", ["-o", "remount,size=4m", disk]);
      expect((await hal0("init", repo)).code).toBe(0);
    } finally {
      execFileSync("umount", ["-l", disk]);
    }
  });
});

describe("the box hal0 init wrote starts its slots", () => {
  const dir = join(tmpdir(), `hal0-init-apply-${process.pid}`);
  const state = `${dir}.state`;
  const ports = new Map<string, number>();

  beforeAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    const io = captureIo({}, tmpdir());
    expect(await main(["init", dir], io)).toBe(0);
    // Other suites run the example box on its own ports at the same time: each
    // slot moves to a free port (and the range opens up), nothing else changes.
    for (const file of readdirSync(join(dir, "slots"))) {
      const path = join(dir, "slots", file);
      const port = await freePort();
      ports.set(file.replace(/\.toml$/, ""), port);
      writeFileSync(path, readFileSync(path, "utf8").replace(/^port = \d+$/m, `port = ${port}`));
    }
    const settings = join(dir, "hal0.toml");
    writeFileSync(settings, readFileSync(settings, "utf8").replace(/^port_range_start = \d+$/m, "port_range_start = 1024").replace(/^port_range_end = \d+$/m, "port_range_end = 65535"));
  });

  afterAll(async () => {
    await main(["down", "--config", dir, "--state", state], captureIo({}, tmpdir()));
    rmSync(dir, { recursive: true, force: true });
    rmSync(state, { recursive: true, force: true });
  });

  it("hal0 apply --yes starts every enabled slot (process runtime, the stand-in runner), hal0 down stops them", async () => {
    const io = captureIo({}, tmpdir());
    const code = await main(["apply", "--yes", "--config", dir, "--state", state], io);
    expect(io.err()).toBe("");
    expect(code).toBe(0);
    for (const name of ["chat", "coder", "embed", "utility"]) expect(await healthWithin(ports.get(name)!, 10_000), name).toBe(200);
    const down = captureIo({}, tmpdir());
    expect(await main(["down", "--config", dir, "--state", state], down)).toBe(0);
    expect(await healthWithin(ports.get("chat")!, 300)).not.toBe(200);
  }, 120_000);
});
