import { afterEach, describe, expect, it, vi } from "vitest";
import { ImagePulls } from "../../server/image-pulls.js";
import type { BoxService } from "../../server/box.js";

afterEach(() => void vi.useRealTimers());

describe("an image pull's progress events and the clock", () => {
  it("still go out every 250 ms of the same status after the wall clock was set back a day", () => {
    // Date and the monotonic clock are faked: time is moved by hand, and the wall clock stepped back a day as NTP steps it.
    vi.useFakeTimers({ toFake: ["Date", "performance"] });
    const pulls = new ImagePulls({ box: {} as BoxService, env: {} });
    const inner = pulls as unknown as { put(job: unknown, event?: string): unknown; due(id: string, status: string | null): boolean };
    const job = { id: "p1", image: "example/runner:1", state: "pulling", progress: { status: "Downloading" } };
    const sent: unknown[] = [];
    pulls.events.on("progress", (j) => sent.push(j));
    inner.put(job, "progress");
    expect(inner.due("p1", "Downloading")).toBe(false); // the same status at once: held back
    vi.advanceTimersByTime(300);
    expect(inner.due("p1", "Downloading")).toBe(true);
    inner.put(job, "progress");
    vi.setSystemTime(Date.now() - 24 * 3600_000);
    vi.advanceTimersByTime(300);
    expect(inner.due("p1", "Downloading")).toBe(true); // not held back for the day the clock stepped
    expect(sent).toHaveLength(2);
  });
});
