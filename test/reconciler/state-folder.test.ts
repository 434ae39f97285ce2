import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { missingFolder, removeMadeFolder } from "../../reconciler/state-folder.js";

describe("a state folder a failed start made", () => {
  it("goes with the parents made for it, but a parent something else wrote into meanwhile is kept", async () => {
    const base = mkdtempSync(join(tmpdir(), "hal0-made-"));
    const state = join(base, "new", "box", "state");
    const made = missingFolder(state)!;
    expect(made).toBe(join(base, "new"));
    mkdirSync(state, { recursive: true });
    writeFileSync(join(state, "operator.token"), "x");
    writeFileSync(join(base, "new", "notes.txt"), "someone else's");
    await removeMadeFolder(made, state);
    expect([existsSync(join(base, "new", "box")), existsSync(join(base, "new", "notes.txt"))]).toEqual([false, true]);
    // Nothing else in the way: every folder made goes.
    mkdirSync(state, { recursive: true });
    writeFileSync(join(state, "hal0.db"), "x");
    await removeMadeFolder(join(base, "new", "box"), state);
    expect([existsSync(join(base, "new", "box")), existsSync(join(base, "new"))]).toEqual([false, true]);
  });
});
