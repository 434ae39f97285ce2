import { describe, expect, it } from "vitest";
import { MAX_TIMER_MS, envSecondsMs } from "../../reconciler/env-seconds.js";
import { IMAGE_STALL_MS, imageStallMs } from "../../reconciler/images.js";

describe("a duration in seconds from the environment", () => {
  it("is the seconds in ms, the default when it is no number above 0, and at most the longest node timer (a longer one fires after 1 ms)", () => {
    expect(envSecondsMs("2.5", 7)).toBe(2500);
    for (const bad of [undefined, "", "abc", "0", "-5", "Infinity", "NaN"]) expect(envSecondsMs(bad, 7), String(bad)).toBe(7);
    expect(envSecondsMs("3000000", 7)).toBe(MAX_TIMER_MS);
    expect(imageStallMs({ HAL0_IMAGE_STALL_S: "1e9" })).toBe(MAX_TIMER_MS);
    expect(imageStallMs({ HAL0_IMAGE_STALL_S: "-1" })).toBe(IMAGE_STALL_MS);
  });
});
