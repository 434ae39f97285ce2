import { describe, expect, it } from "vitest";
import type { Model } from "../../compiler/index.js";
import { statusRows } from "../../cli/status-cmd.js";
import type { ObservedSlot } from "../../reconciler/index.js";

describe("hal0 status rows", () => {
  const model = { slots: {} } as unknown as Model;
  /** A container labelled as this box's slot by hand, without hal0's record (no hal0.view label): its port is unknown. */
  const stray: ObservedSlot = { name: "stray", running: true, health: "unknown", detail: "container hal0-slot-stray has no readable hal0.view label" };

  it("a running slot that is neither in the config nor in the inventory is unmanaged, not disabled, and one with no record to probe is never starting", () => {
    const [row] = statusRows(model, { stray }, {}, true, {}, { slots: {} });
    expect(row).toMatchObject({ name: "stray", enabled: false, state: "error", unmanaged: true, last_error: stray.detail });
    // One hal0 started (its inventory names it) and then removed from the config is not unmanaged: the next apply stops it.
    const [kept] = statusRows(model, { stray }, {}, true, {}, { slots: { stray: { created_at: "T", runtime: "docker" } } as never });
    expect(kept!.unmanaged).toBeUndefined();
    // While an apply starts it, it is starting.
    const [starting] = statusRows(model, { stray }, {}, true, { stray: { action: "create", phase: "starting", since: "T" } as never }, { slots: {} });
    expect(starting!.state).toBe("starting");
  });
});
