import { describe, expect, it } from "vitest";
import { benchPull } from "../../bench/pull.js";

/** The bench's pull part runs whole (it is timed only by `npm run bench`; here it must just finish with its rows). */
describe("npm run bench: the pull part", () => {
  it("pulls a GGUF file from the stand-in Hub beside curl and prints its rows", async () => {
    const lines = await benchPull({ mib: 8, rounds: 1 });
    expect(lines[0]).toMatch(/^8 MiB pull from a local stand-in Hub/);
    expect(lines.join("\n")).toMatch(/→ \d+\.\d\d× \(target ≥ 0\.9×: (PASS|MISS)\)/);
  }, 60_000);
});
