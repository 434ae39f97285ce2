import { mkdtempSync, readFileSync, lstatSync, symlinkSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { CONTAINER_LOG_MAX_BYTES, containerLogPath, saveContainerLog } from "../../reconciler/drivers/container-log.js";

/** The docker runtime's container.log: a removed container's last output, appended, bounded, masked. */
describe("container.log", () => {
  it("appends each removed container's lines and footer, masked, and keeps only the newest whole lines within the bound", async () => {
    const state = mkdtempSync(join(tmpdir(), "hal0-clog-"));
    const mask = (line: string) => line.replace(/sk-\w+/g, "[redacted]");
    await saveContainerLog(state, "a", ["first sk-secretvalue", "second"], "--- one ---", mask);
    const file = containerLogPath(state, "a");
    expect(readFileSync(file, "utf8")).toBe("first [redacted]\nsecond\n--- one ---\n");
    const many = Array.from({ length: 2000 }, (_, i) => `line ${i} ${"x".repeat(60)}`);
    await saveContainerLog(state, "a", many, "--- two ---", mask);
    const text = readFileSync(file, "utf8");
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(CONTAINER_LOG_MAX_BYTES);
    expect(text).toMatch(/^line \d+ x+\n/); // no cut first line
    expect(text.endsWith(`line 1999 ${"x".repeat(60)}\n--- two ---\n`)).toBe(true);
    expect(text).not.toContain("--- one ---");
  });

  it("never reads through a link in its place: the link is replaced, what it leads to is untouched", async () => {
    const state = mkdtempSync(join(tmpdir(), "hal0-clog-"));
    const outside = join(state, "outside.txt");
    writeFileSync(outside, "not a log\n");
    const file = containerLogPath(state, "b");
    mkdirSync(dirname(file), { recursive: true });
    symlinkSync(outside, file);
    await saveContainerLog(state, "b", ["kept"], "--- end ---", (l) => l);
    expect(lstatSync(file).isFile()).toBe(true);
    expect(readFileSync(file, "utf8")).toBe("kept\n--- end ---\n");
    expect(readFileSync(outside, "utf8")).toBe("not a log\n");
  });
});
