import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";
import { openDb } from "../../server/db.js";
import { parsePromText, PromParseError, type PromSample } from "../../server/stats/prom-text.js";
import { grew, RING_MINUTES, SampleRing, windowS, type Sample } from "../../server/stats/ring.js";
import { sampleOf } from "../../server/stats/scraper.js";
import { throughputHistory } from "../../server/stats/views.js";

const parseReference = createRequire(import.meta.url)("parse-prometheus-text-format") as (text: string) => Array<{ name: string; type: string; help: string; metrics: Array<{ value: string; labels?: Record<string, string>; timestamp_ms?: string }> }>;

/** The reference parser's families, flattened to samples as ours gives them. */
function referenceSamples(text: string): PromSample[] {
  return parseReference(text).flatMap((f) => f.metrics.map((m) => ({
    name: f.name, labels: m.labels ?? {}, value: Number(m.value.replace(/^\+?Inf$/, "Infinity").replace(/^-Inf$/, "-Infinity")),
    ...(m.timestamp_ms === undefined ? {} : { timestamp: Number(m.timestamp_ms) }),
  })));
}

const REAL = readFileSync(join(import.meta.dirname, "../../fixtures/llama-server/metrics.txt"), "utf8");

describe("the Prometheus text reader", () => {
  it("reads the real llama-server's /metrics as parse-prometheus-text-format does, with its types and help", () => {
    const ours = parsePromText(REAL);
    expect(ours.samples).toEqual(referenceSamples(REAL));
    expect(ours.samples).toHaveLength(14);
    expect(ours.types["llamacpp:prompt_tokens_total"]).toBe("counter");
    expect(ours.types["llamacpp:requests_processing"]).toBe("gauge");
    expect(ours.help["llamacpp:n_decode_total"]).toBe("Total number of llama_decode() calls");
    expect(ours.samples.find((s) => s.name === "llamacpp:prompt_seconds_total")?.value).toBe(0.013);
  });

  it("reads NaN and ±Inf in every spelling Prometheus reads, and -nan, as a C++ stream writes them; still refuses other words", () => {
    const values = parsePromText("a nan\nb -nan\nc inf\nd -inf\ne +Infinity\nf INF\ng NaN\n").samples.map((x) => x.value);
    expect(values).toEqual([NaN, NaN, Infinity, -Infinity, Infinity, Infinity, NaN]);
    expect(() => parsePromText("a nope\n")).toThrow('line 1: not a number: "nope"');
    expect(() => parsePromText("a infinit\n")).toThrow("not a number");
  });

  it("reads labels with escapes, trailing commas, NaN and ±Inf, exponents, timestamps and comments as the reference does", () => {
    const text = [
      "# a plain comment", "# HELP http_requests_total The total number of HTTP requests.", "# TYPE http_requests_total counter",
      'http_requests_total{method="post",code="200"} 1027 1395066363000', 'http_requests_total{method="post",code="400"}    3 1395066363000', "",
      'msdos_file_access_time_seconds{path="C:\\\\DIR\\\\FILE.TXT",error="Cannot find file:\\n\\"FILE.TXT\\""} 1.458255915e9',
      "metric_without_timestamp_and_labels 12.47", 'something_weird{problem="division by zero"} +Inf -3982045',
      "negative -Inf", "not_a_number NaN", 'jvm_gc_collection_seconds_count{gc="Copy",} 104.0', "colons:in:name 1", "",
    ].join("\n");
    const ours = parsePromText(text);
    const ref = referenceSamples(text);
    // NaN is not equal to itself: compare it apart.
    expect(ours.samples.filter((s) => !Number.isNaN(s.value))).toEqual(ref.filter((s) => !Number.isNaN(s.value)));
    expect(ours.samples.find((s) => s.name === "not_a_number")?.value).toBeNaN();
    expect(ours.samples.find((s) => s.name === "msdos_file_access_time_seconds")?.labels).toEqual({ path: "C:\\DIR\\FILE.TXT", error: 'Cannot find file:\n"FILE.TXT"' });
    expect(ours.samples.find((s) => s.name === "something_weird")).toMatchObject({ value: Infinity, timestamp: -3982045 });
  });

  it("refuses what is not the format, naming the line", () => {
    for (const [text, message] of [
      ["ok 1\nbad-name 2", /line 2: expected a space after bad/],
      ['x{a="1" 2', /line 1: expected , or } after label a/],
      ['x{a="1} 2', /line 1: unterminated value of label a/],
      ["x{a=1} 2", /line 1: expected a quoted value for label a/],
      ['x{a="\\t"} 2', /bad escape \\t/],
      ['x{a="1",a="2"} 3', /label a given twice/],
      ["x one", /not a number: "one"/],
      ["x 1 2 3", /expected a value and an optional timestamp/],
      ["x 1 1.5", /not a timestamp/],
      ["x", /expected a value/],
      ["# TYPE x countre", /unknown metric type "countre"/],
      ["<html>", /expected a metric name/],
    ] as const) {
      expect(() => parsePromText(text), text).toThrow(PromParseError);
      expect(() => parsePromText(text), text).toThrow(message);
    }
  });

  it("quotes at most 80 characters of the runner's text in its error: the reason is kept and shown in every stats reply", () => {
    const huge = "z".repeat(1_000_000);
    for (const text of [`llamacpp:prompt_tokens_total ${huge}`, `x 1 ${huge}`, `# TYPE x ${huge}`, `# HELP ${huge}- x`, `${"a".repeat(1_000_000)}{b="1" 2`, `${"a".repeat(1_000_000)}-`, `<${huge}`]) {
      let message = "";
      try {
        parsePromText(text);
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message, text.slice(0, 40)).toMatch(/^line 1: /);
      expect(message.length, message.slice(0, 120)).toBeLessThan(200);
    }
  });
});

function sample(slot: string, ts: number, prompt: number, predicted: number, run = "2026-12-02T10:00:00.000Z"): Sample {
  return { slot, ts, run, prompt_tokens: prompt, prompt_seconds: prompt / 20_000, predicted_tokens: predicted, predicted_seconds: predicted / 2000, decodes: null, requests_processing: 0, requests_deferred: 0, busy_slots_per_decode: null, kv_usage_ratio: null, kv_tokens: null };
}

describe("the sample ring in hal0.db", () => {
  const dir = mkdtempSync(join(tmpdir(), "hal0-ring-"));
  const db = openDb(dir);
  afterAll(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const T0 = Date.parse("2026-12-02T12:00:00.000Z");

  it("keeps one row per slot per minute (the minute's last scrape) and stays at 24 h of minutes per slot when filled past it", () => {
    const ring = new SampleRing(db);
    expect(ring.minutes).toBe(RING_MINUTES);
    expect(RING_MINUTES).toBe(24 * 60);
    ring.insert(sample("a", T0, 10, 1));
    ring.insert(sample("a", T0 + 30_000, 20, 2)); // same minute: replaces
    expect(ring.count("a")).toBe(1);
    expect(ring.lastTwo("a")).toMatchObject([{ ts: T0 + 30_000, prompt_tokens: 20 }]);
    for (let m = 1; m < RING_MINUTES + 100; m++) ring.insert(sample("a", T0 + m * 60_000, 20 + m, 2 + m));
    expect(ring.count("a")).toBe(RING_MINUTES);
    const rows = db.prepare("SELECT MIN(minute) AS lo, MAX(minute) AS hi FROM slot_samples WHERE slot = 'a'").get() as { lo: number; hi: number };
    expect(rows.hi - rows.lo + 1).toBe(RING_MINUTES);
    // Another slot's old rows fall out by age when any slot inserts.
    db.prepare("INSERT INTO slot_samples (slot, minute, ts, run, prompt_tokens, prompt_seconds, predicted_tokens, predicted_seconds) VALUES ('gone', ?, ?, NULL, 1, 1, 1, 1)").run(Math.floor(T0 / 60_000), T0);
    ring.insert(sample("a", T0 + (RING_MINUTES + 100) * 60_000, 5000, 5000));
    expect(ring.count("gone")).toBe(0);
    expect(ring.count("a")).toBe(RING_MINUTES);
    db.prepare("DELETE FROM slot_samples").run();
  });

  it("counts a restart's sample whole (counters from zero), over the time since the new run started", () => {
    const a = sample("s", T0, 1000, 500, "2026-12-02T11:00:00.000Z");
    const same = sample("s", T0 + 60_000, 1300, 560, "2026-12-02T11:00:00.000Z");
    expect(grew(a, same, "prompt_tokens")).toBe(300);
    expect(windowS(a, same)).toBe(60);
    const restarted = sample("s", T0 + 60_000, 40, 12, "2026-12-02T12:00:30.000Z");
    expect(grew(a, restarted, "prompt_tokens")).toBe(40);
    expect(grew(a, restarted, "predicted_tokens")).toBe(12);
    expect(windowS(a, restarted)).toBe(30);
    // A counter that went down with no run recorded is a reset too.
    const unknownRun = { ...sample("s", T0 + 60_000, 7, 3), run: null };
    expect(grew({ ...a, run: null }, unknownRun, "predicted_tokens")).toBe(3);
  });

  it("drops the rows a clock set back left in its future: the new samples are the slot's last ones, and the bound still holds", () => {
    const ring = new SampleRing(db);
    const ahead = T0 + 3 * 86_400_000; // the box booted three days ahead, then synced its clock
    onTestFinished(() => void db.prepare("DELETE FROM slot_samples").run());
    ring.insert(sample("a", ahead, 900, 90));
    ring.insert(sample("a", ahead + 60_000, 960, 96));
    ring.insert(sample("b", ahead, 10, 1));
    ring.insert(sample("c", T0 + 60_000, 5, 5)); // scraped in the same tick, a minute's turn later
    ring.insert(sample("a", T0, 10, 1, "2026-12-02T11:59:00.000Z"));
    ring.insert(sample("a", T0 + 60_000, 70, 7, "2026-12-02T11:59:00.000Z"));
    expect(ring.lastTwo("a")).toMatchObject([{ ts: T0, predicted_tokens: 1 }, { ts: T0 + 60_000, predicted_tokens: 7 }]);
    expect(ring.count("a")).toBe(2);
    expect(ring.count("b")).toBe(0);
    expect(ring.count("c")).toBe(1);
    expect(throughputHistory(ring, T0, T0 + 120_000, 60, "a").slots[0]!.points.map((p) => p.generated_tokens)).toEqual([null, 6]);
  });

  it("buckets the growth per slot and in total, null where nothing was measured", () => {
    const ring = new SampleRing(db);
    ring.insert(sample("x", T0, 100, 10));
    ring.insert(sample("x", T0 + 60_000, 700, 130)); // +600, +120 in minute 1
    ring.insert(sample("x", T0 + 120_000, 700, 130)); // quiet minute 2
    ring.insert(sample("x", T0 + 240_000, 50, 20, "2026-12-02T12:03:30.000Z")); // restarted: +50, +20 over 30 s in minute 4
    ring.insert(sample("y", T0 + 60_000, 0, 0));
    ring.insert(sample("y", T0 + 120_000, 60, 60));
    const h = throughputHistory(ring, T0 + 30_000, T0 + 300_000, 60);
    expect(h.since).toBe(new Date(T0).toISOString());
    const x = h.slots.find((s) => s.slot === "x")!.points;
    expect(x.map((p) => p.generated_tokens)).toEqual([null, 120, 0, null, 20]);
    expect(x.map((p) => p.generated_tokens_per_s)).toEqual([null, 2, 0, null, 0.667]);
    expect(x[1]).toMatchObject({ prompt_tokens: 600, prompt_tokens_per_s: 10 });
    expect(h.total.map((p) => p.generated_tokens)).toEqual([null, 120, 60, null, 20]);
    expect(throughputHistory(ring, T0, T0 + 300_000, 120, "y").slots).toMatchObject([{ slot: "y", points: [{ generated_tokens: null }, { generated_tokens: 60, generated_tokens_per_s: 1 }, { generated_tokens: null }] }]);
    db.prepare("DELETE FROM slot_samples").run();
  });

  it("takes a sample from llama-server's counters, and none from text without them", () => {
    const s = sampleOf("chat", T0, null, parsePromText(REAL))!;
    expect(s).toMatchObject({ prompt_tokens: 29, prompt_seconds: 0.013, predicted_tokens: 4, predicted_seconds: 0.002, decodes: 4, requests_processing: 0, requests_deferred: 0, busy_slots_per_decode: 1, kv_usage_ratio: null });
    expect(sampleOf("chat", T0, null, parsePromText("process_cpu_seconds_total 3\n"))).toBeUndefined();
    // A counter below 0 is not llama-server's: taken, it would make the tokens/s negative.
    expect(sampleOf("chat", T0, null, parsePromText(REAL.replace(/^llamacpp:tokens_predicted_total .*$/m, "llamacpp:tokens_predicted_total -5000")))).toBeUndefined();
    expect(sampleOf("chat", T0, null, parsePromText(`${REAL}llamacpp:kv_cache_usage_ratio 0.25\nllamacpp:kv_cache_tokens 512\n`))).toMatchObject({ kv_usage_ratio: 0.25, kv_tokens: 512 });
  });
});
