import { describe, expect, it } from "vitest";
import { Backoff } from "../../reconciler/backoff.js";

/** The retry schedule alone (pure: times are numbers, on a virtual clock). The sweep's use of it: sweep.test.ts and converge.test.ts. */
describe("Backoff", () => {
  const t0 = 1_000_000;

  it("a transient failure waits 1 s, 2 s, 4 s … up to 5 min", () => {
    let now = t0;
    const b = new Backoff(() => now);
    const waits: number[] = [];
    for (let n = 1; n <= 12; n++) {
      const from = now;
      b.failed("slot.a", "h", "slot.port_in_use");
      while (b.waiting("slot.a", "h") !== undefined) now += 500;
      waits.push((now - from) / 1000);
    }
    expect(waits).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
  });

  it("a failure that needs a fix (spawn_failed, image_missing) waits 30 s, 1 min, 2 min … up to 5 min, never for ever; a new spec or clear() tries at once", () => {
    let now = t0;
    const b = new Backoff(() => now);
    const at = (t: number) => {
      now = t;
      return b.waiting("slot.a", "h");
    };
    b.failed("slot.a", "h", "slot.spawn_failed");
    expect(at(t0 + 29_999)).toBe("slot.spawn_failed: retry in 1 s (failure 1), or at once when its spec changes or on a reload");
    expect(at(t0 + 30_000)).toBeUndefined();
    for (const [n, wait] of [[2, 60], [3, 120], [4, 240], [5, 300], [6, 300]] as const) {
      now = t0;
      b.failed("slot.a", "h", "slot.image_missing");
      expect(at(t0 + wait * 1000 - 1), `failure ${n}`).toMatch(new RegExp(`\\(failure ${n}\\)`));
      expect(at(t0 + wait * 1000), `failure ${n}`).toBeUndefined();
    }
    now = t0 + 1;
    expect(b.waiting("slot.a", "other spec")).toBeUndefined();
    b.clear();
    expect(b.waiting("slot.a", "h")).toBeUndefined();
  });
});
