import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { removeStaleTemps, writeFileAtomic } from "../../reconciler/atomic.js";
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
