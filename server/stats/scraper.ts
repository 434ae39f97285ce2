import { request } from "node:http";
import type { ResolvedSlot } from "../../compiler/index.js";
import { LLAMA_SERVER_TYPES } from "../../reconciler/drivers/runner-secrets.js";
import { readCpuTimes, type CpuTimes } from "../../reconciler/host/system-stats.js";
import type { ObservedSlot } from "../../reconciler/index.js";
import type { SlotDriver } from "../../reconciler/drivers/driver.js";
import { slotReach, type SlotReach } from "../slot-reach.js";
import type { BoxService } from "../box.js";
import { observeLiveness } from "../slot-view.js";
import { parsePromText, valueOf, type PromText } from "./prom-text.js";
import { SampleRing, type Sample } from "./ring.js";

/**
 * The slot scraper: on its own timer (every 60 s under `hal0 serve`, not tied
 * to the sweep), `GET /metrics` of each running llama-server slot (started
 * with `--metrics`), read as Prometheus text, kept in the ring (ring.ts). A
 * slot whose runner answers 501 (no `--metrics`), or is not llama-server, or
 * does not answer, is remembered as unavailable with the reason — never an
 * error. Each tick also keeps a /proc/stat reading, so `system_stats` has a
 * recent CPU window.
 */

const SCRAPE_TIMEOUT_MS = 3000;
/** A runner's /metrics is a few KB; more than this is not llama-server's. */
const MAX_BODY_BYTES = 1 << 20;
/** llama-server's four counters, which every sample needs. */
const COUNTERS = ["prompt_tokens_total", "prompt_seconds_total", "tokens_predicted_total", "tokens_predicted_seconds_total"] as const;

export type ScrapeOutcome = { readonly at: string; readonly ok: true } | { readonly at: string; readonly ok: false; readonly reason: string };

export interface SlotStatsOptions {
  readonly box: BoxService;
  /** Re-roots /proc and /sys (tests write those trees); default `/`. */
  readonly hostRoot?: string;
  /** Bound of the ring in minutes (default 24 h). */
  readonly ringMinutes?: number;
  /** A timer's scrape that failed as a whole (the tree does not compile, the runtime cannot be observed). */
  readonly onError?: (err: unknown) => void;
}

export class SlotStats {
  readonly ring: SampleRing;
  readonly hostRoot: string;
  /** The last scrape's outcome per slot (running slots only). */
  private readonly outcomes = new Map<string, ScrapeOutcome>();
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private cpu: CpuTimes | undefined;
  /** The timer's period, once started. */
  intervalS: number | undefined;

  constructor(private readonly options: SlotStatsOptions) {
    this.ring = new SampleRing(options.box.db, options.ringMinutes);
    this.hostRoot = options.hostRoot ?? "/";
  }

  /** Scrapes every `intervalS` seconds until `close()`; the timer keeps no process alive. */
  start(intervalS: number): void {
    if (this.timer || !(intervalS > 0)) return;
    this.intervalS = intervalS;
    this.timer = setInterval(() => void this.scrapeNow().catch((err) => this.options.onError?.(err)), intervalS * 1000);
    this.timer.unref();
  }

  /** One scrape of every running slot (a call while one runs joins it). */
  scrapeNow(): Promise<void> {
    this.inFlight ??= this.scrape().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  outcome(slot: string): ScrapeOutcome | undefined {
    return this.outcomes.get(slot);
  }

  /** The CPU reading `system_stats` measures its recent window from (the last tick's or call's). */
  get cpuReading(): CpuTimes | undefined {
    return this.cpu;
  }

  /** Keeps a new CPU reading, unless the kept one is under a second old (so quick calls still measure a window). */
  keepCpu(next: CpuTimes | undefined): void {
    if (next && (!this.cpu || next.at - this.cpu.at >= 1000)) this.cpu = next;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.intervalS = undefined;
    await this.inFlight?.catch(() => {});
  }

  private async scrape(): Promise<void> {
    const { box } = this.options;
    const now = box.now();
    this.keepCpu(await readCpuTimes(this.hostRoot, now));
    const model = await box.model();
    const [seen, driver] = await Promise.all([observeLiveness(box, model), box.driver(model)]);
    for (const name of [...this.outcomes.keys()]) if (!seen.get(name)?.running) this.outcomes.delete(name);
    await Promise.all(Object.values(model.slots).map(async (slot) => {
      const observed = seen.get(slot.name);
      if (!observed?.running) return;
      // A runner found running without its record (runtime.json unreadable): its port and key are not known, so it is not scraped, and says why.
      const outcome = observed.record
        ? await this.scrapeSlot(slot, observed, driver)
        : { at: new Date(box.now()).toISOString(), ok: false as const, reason: `its runner runs but its runtime record cannot be read, so hal0 does not know where to scrape it${observed.detail ? ` (${observed.detail})` : ""}` };
      this.outcomes.set(slot.name, outcome);
    }));
  }

  private async scrapeSlot(slot: ResolvedSlot, seen: ObservedSlot, driver: SlotDriver): Promise<ScrapeOutcome> {
    const { box } = this.options;
    const got = await scrapeRunner(slot.name, slot.type, slotReach(seen.record!.view.spec, seen, driver), seen.record!.started_at, () => box.now());
    if ("reason" in got) return { at: new Date(box.now()).toISOString(), ok: false, reason: got.reason };
    this.ring.insert(got.sample);
    return { at: new Date(got.sample.ts).toISOString(), ok: true };
  }
}

/**
 * One slot's `/metrics` as a ring sample, or why there is none: a runner that
 * is not llama-server, a 501 (started without `--metrics`), another status,
 * text that is not Prometheus', counters missing, or no answer.
 */
export async function scrapeRunner(slot: string, type: ResolvedSlot["type"], at: SlotReach, run: string | null, now: () => number): Promise<{ sample: Sample } | { reason: string }> {
  if (!LLAMA_SERVER_TYPES.has(type)) return { reason: notLlama(type) };
  const reply = await getMetrics(at.host, at.port, at.headers);
  if ("error" in reply) return { reason: `GET /metrics on port ${at.port}: ${reply.error}` };
  if (reply.status === 501) return { reason: "the runner answers 501 to GET /metrics: it was started without --metrics (it gets the flag when it is restarted)" };
  if (reply.status !== 200) {
    const said = runnerMessage(reply.body, at.headers);
    const answered = `GET /metrics on port ${at.port} answered ${reply.status}${said === undefined ? "" : ` (${said})`}`;
    if (reply.status === 503) return { reason: `${answered}: the runner is not ready yet (llama-server answers 503 while it loads its model); it is scraped again at the next tick` };
    if (reply.status === 401 || reply.status === 403) return { reason: `${answered}: the runner refuses the key hal0 sends it (the slot's --api-key); hal0 sends the first key of the --api-key it started the runner with` };
    return { reason: `${answered}: not a llama-server with --metrics` };
  }
  let text: PromText;
  try {
    text = parsePromText(reply.body);
  } catch (err) {
    return { reason: `GET /metrics is not Prometheus text: ${(err as Error).message}` };
  }
  const sample = sampleOf(slot, now(), run, text);
  return sample ? { sample } : { reason: counterProblem(text) };
}

/**
 * Why the text gives no sample: none of the four counters (not llama-server's metrics), or which of them are
 * missing or not a finite number ≥ 0, with the value the runner served.
 */
export function counterProblem(text: PromText): string {
  const values = COUNTERS.map((name) => [`llamacpp:${name}`, valueOf(text, `llamacpp:${name}`)] as const);
  if (values.every(([, v]) => v === undefined)) return "GET /metrics has no llamacpp:prompt_tokens_total / tokens_predicted_total counters: not llama-server's metrics";
  const bad = values.flatMap(([name, v]) => (v === undefined ? [`${name} is missing`] : !Number.isFinite(v) || v < 0 ? [`${name} is ${promNumber(v)}`] : []));
  return `GET /metrics: ${bad.join(", ")} (each of llama-server's four counters must be there, a finite number ≥ 0)`;
}

/** A value as Prometheus text writes it (NaN, +Inf, -Inf, else the number). */
function promNumber(v: number): string {
  return Number.isNaN(v) ? "NaN" : v === Infinity ? "+Inf" : v === -Infinity ? "-Inf" : String(v);
}

/**
 * The message of a runner's error reply (llama-server's `{"error": {"message"}}`), quoted and cut at 80 characters,
 * with any key hal0 sent masked; undefined when the body carries none.
 */
function runnerMessage(body: string, headers: Readonly<Record<string, string>>): string | undefined {
  let message: unknown;
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown } | null;
    message = typeof parsed?.error === "object" ? parsed.error?.message : (parsed?.error ?? parsed?.message);
  } catch {
    return undefined;
  }
  if (typeof message !== "string" || message.trim() === "") return undefined;
  let text = message.trim();
  for (const value of Object.values(headers)) {
    const key = value.replace(/^Bearer\s+/i, "");
    if (key !== "") text = text.split(key).join("***");
  }
  return text.length > 80 ? `${JSON.stringify(text.slice(0, 80))}…` : JSON.stringify(text);
}

export function notLlama(type: string): string {
  return `a ${type} slot: its runner is not llama-server and has no llamacpp metrics`;
}

/**
 * llama-server's counters and gauges as a ring sample; undefined when its four counters are not all there, each a
 * finite number ≥ 0 (a counter never is below 0: one that is would make the tokens and tokens/s negative).
 */
export function sampleOf(slot: string, ts: number, run: string | null, text: PromText): Sample | undefined {
  const v = (name: string) => valueOf(text, `llamacpp:${name}`);
  const [prompt_tokens, prompt_seconds, predicted_tokens, predicted_seconds] = COUNTERS.map(v);
  if ([prompt_tokens, prompt_seconds, predicted_tokens, predicted_seconds].some((n) => n === undefined || !Number.isFinite(n) || n < 0)) return undefined;
  const g = (name: string) => {
    const n = v(name);
    return n === undefined || !Number.isFinite(n) ? null : n;
  };
  return {
    slot, ts, run, prompt_tokens: prompt_tokens!, prompt_seconds: prompt_seconds!, predicted_tokens: predicted_tokens!, predicted_seconds: predicted_seconds!,
    decodes: g("n_decode_total"), requests_processing: g("requests_processing"), requests_deferred: g("requests_deferred"), busy_slots_per_decode: g("n_busy_slots_per_decode"),
    kv_usage_ratio: g("kv_cache_usage_ratio"), kv_tokens: g("kv_cache_tokens"),
  };
}

/** The runner's own key (`--api-key a,b`: the first), which it wants for /metrics too. */

/**
 * `GET http://host:port/metrics`, at most 3 s for the whole reply (a runner that trickles bytes gets no longer) and
 * 1 MiB; the error never carries the key.
 */
function getMetrics(host: string, port: number, auth: Readonly<Record<string, string>>): Promise<{ status: number; body: string } | { error: string }> {
  return new Promise((settle) => {
    let timer: NodeJS.Timeout | undefined;
    const resolve = (v: { status: number; body: string } | { error: string }) => {
      clearTimeout(timer);
      settle(v);
    };
    const headers: Record<string, string> = { ...auth, connection: "close", accept: "text/plain" };
    const req = request({ host, port, path: "/metrics", method: "GET", agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) {
          req.destroy();
          resolve({ error: `the reply is over ${MAX_BODY_BYTES} bytes` });
        } else chunks.push(c);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", (err) => resolve({ error: err.message }));
    });
    timer = setTimeout(() => {
      req.destroy();
      resolve({ error: `no whole reply within ${SCRAPE_TIMEOUT_MS / 1000} s` });
    }, SCRAPE_TIMEOUT_MS);
    req.on("error", (err) => resolve({ error: (err as NodeJS.ErrnoException).code ?? err.message }));
    req.end();
  });
}
