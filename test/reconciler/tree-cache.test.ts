import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TreeCache } from "../../reconciler/tree-cache.js";

/** A small valid tree on disk (real files): one slot whose ctx_size the tests edit. */
function tree(): string {
  const root = mkdtempSync(join(tmpdir(), "hal0-tree-cache-"));
  mkdirSync(join(root, "slots"));
  writeFileSync(join(root, "hal0.toml"), "[slots]\nport_range_start = 9000\nport_range_end = 9100\n");
  writeFileSync(join(root, "profiles.toml"), `[profile.fake]\nrunner = ["node", "fake.mjs"]\ndevice_class = "cpu"\n`);
  writeFileSync(join(root, "models.toml"), `[model.tiny]\npath = "tiny.gguf"\ncontext_length = 8192\n`);
  writeCtx(root, 2048);
  return root;
}

function writeCtx(root: string, ctx: number): void {
  writeFileSync(join(root, "slots/s.toml"), `profile = "fake"\nmodel = "tiny"\nport = 9001\n[tune]\nctx_size = ${ctx}\n`);
}

describe("the sweep's tree cache", () => {
  it("reuses the model while no file changed, and sees a same-size edit made at once", async () => {
    const root = tree();
    const cache = new TreeCache(root, 0); // no racy window: stats alone decide
    const first = await cache.load();
    expect(cache.lastReuse).toBe("compiled");
    expect(first.model?.slots.s?.tune_effective.ctx_size).toBe(2048);
    expect(await cache.load()).toBe(first);
    expect(cache.lastReuse).toBe("stat");
    writeCtx(root, 4096); // same size, same inode, within the same millisecond or so
    const second = await cache.load();
    expect(cache.lastReuse).toBe("compiled");
    expect(second.model?.slots.s?.tune_effective.ctx_size).toBe(4096);
  });

  it("within the racy window reads the texts: a same-size edit is seen even if every stat were equal", async () => {
    const root = tree();
    const cache = new TreeCache(root); // default 2 s window: these files are all newer
    await cache.load();
    expect((await cache.load()).model?.slots.s?.tune_effective.ctx_size).toBe(2048);
    expect(cache.lastReuse).toBe("text");
    writeCtx(root, 1024);
    expect((await cache.load()).model?.slots.s?.tune_effective.ctx_size).toBe(1024);
    expect(cache.lastReuse).toBe("compiled");
  });

  it("a touch without a content change reads but does not compile; added, removed and broken files compile", async () => {
    const root = tree();
    const cache = new TreeCache(root, 0);
    const first = await cache.load();
    const later = new Date(Date.now() + 5000);
    utimesSync(join(root, "models.toml"), later, later);
    expect(await cache.load()).toBe(first);
    expect(cache.lastReuse).toBe("text");
    writeFileSync(join(root, "slots/t.toml"), `profile = "fake"\nmodel = "tiny"\nport = 9002\n`);
    expect(Object.keys((await cache.load()).model?.slots ?? {})).toEqual(["s", "t"]);
    rmSync(join(root, "slots/t.toml"));
    expect(Object.keys((await cache.load()).model?.slots ?? {})).toEqual(["s"]);
    writeFileSync(join(root, "slots/s.toml"), "port = [\n");
    const broken = await cache.load();
    expect(broken.model).toBeUndefined();
    expect(broken.diagnostics.map((d) => d.code)).toContain("config.parse_error");
    expect(await cache.load()).toBe(broken);
  });
});
