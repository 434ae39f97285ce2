import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { removeStaleTemps, replaceFileKeeping, writeFileAtomic } from "../../reconciler/atomic.js";
import { deadPid, killMidWrite, tempsBeside } from "./kill-write.js";

const folder = () => mkdtempSync(join(tmpdir(), "hal0-atomic-"));

describe("writeFileAtomic: temp files (issue 16)", () => {
  it("a completed write leaves no temp behind", async () => {
    const dir = folder();
    await writeFileAtomic(join(dir, "chat.toml"), "a = 1\n");
    expect(readdirSync(dir)).toEqual(["chat.toml"]);
  });

  it("a writer killed with SIGKILL mid-write leaves a temp named after its pid; a cleanup removes it and the file stays whole", async () => {
    const dir = folder();
    const target = join(dir, "chat.toml");
    const { pid, left } = await killMidWrite(target);
    for (const name of left) expect(name).toMatch(new RegExp(`^\\.chat\\.toml\\.${pid}\\.[0-9a-f]{12}\\.hal0\\.tmp$`));
    // The file itself is an earlier complete write, or absent: never the partial copy.
    const whole = existsSync(target);
    if (whole) {
      const text = readFileSync(target, "utf8");
      const n = /\n# (\d+)\n$/.exec(text)?.[1];
      expect(n).toBeDefined();
      expect(text.length).toBe("# filler\n".length * 4 * 1024 * 1024 + `# ${n}\n`.length);
    }
    const removed = await removeStaleTemps([dir]);
    expect(removed.sort()).toEqual(left.map((n) => join(dir, n)).sort());
    expect(tempsBeside(target)).toEqual([]);
    expect(readdirSync(dir)).toEqual(whole ? ["chat.toml"] : []);
  }, 60_000);

  it("removes only hal0's temps whose writer is dead: a live writer's, another program's and a fresh old-style one are kept", async () => {
    const dir = folder();
    const dead = await deadPid();
    const names = {
      dead: `.chat.toml.${dead}.0123456789ab.hal0.tmp`,
      live: `.chat.toml.${process.pid}.0123456789ab.hal0.tmp`,
      oldStale: ".chat.toml.0123456789ab.tmp",
      oldFresh: ".stack.toml.abcdef012345.tmp",
      swap: ".chat.toml.swp",
      other: `.chat.toml.${dead}.tmp`,
      notDot: `chat.toml.${dead}.0123456789ab.hal0.tmp`,
    };
    for (const n of Object.values(names)) writeFileSync(join(dir, n), "partial");
    mkdirSync(join(dir, `.dir.toml.${dead}.0123456789ab.hal0.tmp`)); // a folder is never removed
    // An old-style temp (no pid in its name, hal0 before issue 16) is removed once it is an hour old: no write takes that long.
    const hourAgo = new Date(Date.now() - 3_700_000);
    utimesSync(join(dir, names.oldStale), hourAgo, hourAgo);
    const removed = await removeStaleTemps([dir, join(dir, "missing")]);
    expect(removed.sort()).toEqual([join(dir, names.dead), join(dir, names.oldStale)].sort());
    expect(readdirSync(dir).sort()).toEqual([names.live, names.oldFresh, names.swap, names.other, names.notDot, `.dir.toml.${dead}.0123456789ab.hal0.tmp`].sort());
  });
});

describe("replaceFileKeeping: a file someone arranged", () => {
  it("writes through a chain of links to the file at its end, which keeps its mode and owner; the links stay", async () => {
    const dir = folder();
    const file = join(dir, "real.yaml");
    writeFileSync(file, "old\n");
    chmodSync(file, 0o640);
    if (process.getuid?.() === 0) chownSync(file, 4321, 4321); // root can give it away: the owner is kept too
    symlinkSync("real.yaml", join(dir, "mid.yaml"));
    symlinkSync(join(dir, "mid.yaml"), join(dir, "config.yaml"));
    expect(await replaceFileKeeping(join(dir, "config.yaml"), "new\n")).toBe(file);
    expect(lstatSync(join(dir, "config.yaml")).isSymbolicLink()).toBe(true);
    expect(lstatSync(join(dir, "mid.yaml")).isSymbolicLink()).toBe(true);
    expect(readFileSync(file, "utf8")).toBe("new\n");
    expect(statSync(file).mode & 0o7777).toBe(0o640);
    if (process.getuid?.() === 0) expect([statSync(file).uid, statSync(file).gid]).toEqual([4321, 4321]);
    expect(readdirSync(dir).sort()).toEqual(["config.yaml", "mid.yaml", "real.yaml"]);
  });

  it("maxMode takes bits away from a replaced file; a new file gets newMode; a link to nothing yet makes the file it names", async () => {
    const dir = folder();
    writeFileSync(join(dir, "env.toml"), "a = 1\n");
    chmodSync(join(dir, "env.toml"), 0o644);
    await replaceFileKeeping(join(dir, "env.toml"), "a = 2\n", { maxMode: 0o700 });
    expect(statSync(join(dir, "env.toml")).mode & 0o7777).toBe(0o600);
    await replaceFileKeeping(join(dir, "new.toml"), "b = 1\n", { newMode: 0o600 });
    expect(statSync(join(dir, "new.toml")).mode & 0o777).toBe(0o600);
    symlinkSync("later.toml", join(dir, "dangling.toml"));
    await replaceFileKeeping(join(dir, "dangling.toml"), "c = 1\n");
    expect(lstatSync(join(dir, "dangling.toml")).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(dir, "later.toml"), "utf8")).toBe("c = 1\n");
  });

  it("a loop of links is refused (ELOOP), and nothing is written or left", async () => {
    const dir = folder();
    symlinkSync("b.toml", join(dir, "a.toml"));
    symlinkSync("a.toml", join(dir, "b.toml"));
    await expect(replaceFileKeeping(join(dir, "a.toml"), "x = 1\n")).rejects.toMatchObject({ code: "ELOOP" });
    expect(readdirSync(dir).sort()).toEqual(["a.toml", "b.toml"]);
    expect(lstatSync(join(dir, "a.toml")).isSymbolicLink()).toBe(true);
  });
});
