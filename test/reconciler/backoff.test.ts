import { describe, expect, it } from "vitest";
import { Backoff } from "../../reconciler/backoff.js";

/** The retry schedule alone (pure: times are numbers). The sweep's use of it: sweep.test.ts and converge.test.ts. */
describe("Backoff", () => {
  const t0 = 1_000_000;

  it("a transient failure waits 1 s, 2 s, 4 s … up to 5 min", () => {
    const b = new Backoff();
    const waits: number[] = [];
    for (let n = 1, now = t0; n <= 12; n++) {
      b.failed("slot.a", "h", "slot.port_in_use", now);
      let until = now;
      while (b.waiting("slot.a", "h", until) !== undefined) until += 500;
      waits.push((until - now) / 1000);
      now = until;
    }
    expect(waits).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
  });

  it("a failure that needs a fix (spawn_failed, image_missing) waits 30 s, 1 min, 2 min … up to 5 min, never for ever; a new spec or clear() tries at once", () => {
    const b = new Backoff();
    b.failed("slot.a", "h", "slot.spawn_failed", t0);
    expect(b.waiting("slot.a", "h", t0 + 29_999)).toBe("slot.spawn_failed: retry in 1 s (failure 1), or at once when its spec changes or on a reload");
    expect(b.waiting("slot.a", "h", t0 + 30_000)).toBeUndefined();
    for (const [n, wait] of [[2, 60], [3, 120], [4, 240], [5, 300], [6, 300]] as const) {
      b.failed("slot.a", "h", "slot.image_missing", t0);
      expect(b.waiting("slot.a", "h", t0 + wait * 1000 - 1), `failure ${n}`).toMatch(new RegExp(`\\(failure ${n}\\)`));
      expect(b.waiting("slot.a", "h", t0 + wait * 1000), `failure ${n}`).toBeUndefined();
    }
    expect(b.waiting("slot.a", "other spec", t0 + 1)).toBeUndefined();
    b.clear();
    expect(b.waiting("slot.a", "h", t0 + 1)).toBeUndefined();
  });
});
