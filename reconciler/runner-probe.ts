import { readFileSync, statSync, type Stats } from "node:fs";
import { delimiter, join } from "node:path";
import type Dockerode from "dockerode";
import { runnerKey, type ImageDigests, type RunnerFacts, type RunnerFactsIndex, type RunnerFlag } from "../compiler/runner-facts.js";
import { FLAG_TABLE_VERSION, parseLlamaHelp, parseRunnerVersion, runnerFacts } from "../compiler/runner-help.js";
import { writeFileAtomic } from "./atomic.js";
import { engineStatus, within } from "./drivers/docker-engine.js";
import { findRunner, HAL0_BIN, runnerPath, spawnErrorWords, type RunnerLookup } from "./drivers/runner.js";
import { killQuietly } from "./drivers/proc.js";
import { runnerBaseEnv } from "./drivers/runner-env.js";
import { spawnProbe } from "./probe-process.js";
import { ensureStateFolder } from "./state-folder.js";

/**
 * The runner probe: hal0 asks each runner binary (process runtime) or runner
 * image (docker runtime) `--version` once, and `--help` once when it is
 * llama.cpp's llama-server, and keeps the raw texts in
 * `<state>/runners.json`. Compile takes the facts built from them
 * (`RunnerFactsIndex`) as data; it never runs anything itself.
 *
 * - A process runner is found as the process driver finds it (`findRunner`),
 *   and known by its absolute path, size and mtime: an unchanged binary is
 *   never run again (not by this process, nor by the next one); a rebuilt or
 *   replaced one is asked again.
 * - An image is known by its id (`docker image inspect`): a re-tag of the same
 *   image costs nothing, a rebuilt one is asked again. Its containers run with
 *   no network, are never pulled, and are always removed (those a hal0 killed
 *   mid-probe left behind, by the next probe that runs one).
 * - Only llama-server is asked `--help`: other runners (TTS, ComfyUI, …) may
 *   start a server when given a flag they do not know.
 * - The texts are stored, and beside a help text the flags parsed from it
 *   under `FLAG_TABLE_VERSION` (read back instead of parsing ~55 KB again at
 *   every command): a better parser (compiler/runner-help.ts, its version
 *   bumped) takes effect without asking any runner again.
 * - A runner that fails or times out is not stored (it is asked again), but
 *   not within `FAILED_PROBE_MEMORY_MS`: a sweep does not start it every pass.
 */

/** A runner to learn: the word a process profile's `runner` starts with (as written), or a docker profile's image reference. */
export interface ProbeTarget {
  readonly runtime: "process" | "docker";
  readonly word: string;
  /**
   * A process runner's PATH when the slot's env sets one (the runner is spawned with it, so its word is looked up
   * and run with it); undefined: hal0's own.
   */
  readonly path?: string;
  /**
   * A process runner's env as its slot declares it (the profile's and the slot's: `spec.env`): the process
   * driver starts the runner with it over the base (runnerBaseEnv), so the probe runs it so too. It is not part
   * of the runner's key: slots of one runner word and PATH share the facts, asked with the first one's env.
   */
  readonly env?: Readonly<Record<string, string>>;
}

/** Why a process runner's word leads to no binary (as `findRunner` says). */
export interface RunnerMissing {
  readonly problem: "not_found" | "not_executable";
  /** The paths tried (the file itself for a word with `/`; each PATH folder, then hal0's bin/, for a bare word). */
  readonly searched: string[];
  /** A file of that name that may not be run (or a folder), when there is one. */
  readonly candidate?: string;
}

/** What one `probe` call learned, by `runnerKey(runtime, word)`. */
export interface ProbeResult {
  /** The facts of every runner known now (from the cache or asked this call). */
  readonly index: RunnerFactsIndex;
  /** Process runners whose word leads to no runnable file. */
  readonly missing: Map<string, RunnerMissing>;
  /** Runners that could not be asked: why (a timeout, a non-zero exit, no engine, an image not present, …). */
  readonly failed: Map<string, string>;
  /** How many processes and containers this call started (0: everything came from the cache). */
  readonly probed: number;
  /** Each docker target's image id on the engine now (inspected every call, whether or not its runner answered): the slots' `observed.image_digest`. */
  readonly images: ImageDigests;
}

export interface RunnerProbeOptions {
  /** The state folder: the cache is `<stateDir>/runners.json`. null: kept in memory only. */
  readonly stateDir: string | null;
  /** The config folder: a runner word with `/` resolves against it, and runners run with it as their working folder. */
  readonly root: string;
  /** The environment runners are looked up (PATH) and run with. Default: process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** hal0's own bin/ folder, searched after PATH. Default HAL0_BIN; null: none. */
  readonly bin?: string | null;
  /** The docker engine, asked only when a docker target is probed; undefined: none configured. */
  readonly docker?: () => Dockerode | undefined;
  /** How long one run (`--version`, `--help`) may take before it is killed. Default 5000. */
  readonly timeoutMs?: number;
}

/** The cache file's name in the state folder. */
export const RUNNERS_FILE = "runners.json";
/** How long a runner that could not be asked is not asked again (in this process). */
export const FAILED_PROBE_MEMORY_MS = 30_000;
const DEFAULT_TIMEOUT_MS = 5000;
/** Where a spawn with no PATH looks (libuv's `_PATH_DEFPATH`, as findRunner has it). */
const DEFAULT_PATH = "/usr/bin:/bin";
/** Each stream of a run is kept up to this many bytes (llama-server's --help is ~55 KB). */
const MAX_OUTPUT_BYTES = 1 << 20;
/** The cache keeps at most this many binaries, images, lookups and image references (the most recent). */
const MAX_ENTRIES = 64;
const MAX_LOOKUPS = 256;
/** The label every probe container carries (nothing else of hal0 reads it; it tells people what the container was). */
const PROBE_LABEL = "hal0.runner-probe";

/** What a runner printed, as the cache keeps it. */
interface Texts {
  readonly version_text: string;
  /** `--help`'s output (llama-server only), null when not asked. */
  readonly help_text: string | null;
  /**
   * The flags parseLlamaHelp made of `help_text`, and under which FLAG_TABLE_VERSION:
   * read back instead of parsing the text again (~3 ms of a command), while the version is the same.
   */
  readonly flag_table?: StoredFlagTable;
  /** When it was asked (ISO): the newer entry wins when two writers merge. */
  readonly probed_at: string;
}

interface StoredFlagTable {
  readonly version: number;
  readonly flags: readonly RunnerFlag[];
}

interface BinaryEntry extends Texts {
  readonly size: number;
  readonly mtime_ms: number;
}

type ImageEntry = Texts;

/** `<state>/runners.json`. */
interface CacheFile {
  readonly kind: "hal0-runners";
  readonly version: 1;
  /** By absolute path. */
  readonly binaries: Record<string, BinaryEntry>;
  /** By image id (`sha256:…`). */
  readonly images: Record<string, ImageEntry>;
  /** `JSON.stringify([word, root, PATH searched])` → the absolute path it was found at: what `cached()` reads without a lookup. */
  readonly lookups: Record<string, string>;
  /** Image reference → the id it had when last probed: what `cached()` reads without asking the engine. */
  readonly image_refs: Record<string, string>;
}

/** What learning one binary or image came to. */
type Outcome =
  | { readonly ok: true; readonly facts: RunnerFacts; readonly runs: number }
  | { readonly ok: false; readonly why: string; readonly runs: number };

type TargetOutcome = Outcome | { readonly ok: false; readonly missing: RunnerMissing; readonly runs: 0 };

/** One finished run of a runner (process or container). */
type Run = { readonly ok: true; readonly text: string } | { readonly ok: false; readonly why: string };

export class RunnerProbe {
  private readonly stateDir: string | null;
  private readonly root: string;
  private readonly env: Readonly<Record<string, string | undefined>>;
  private readonly bin: string | undefined;
  private readonly dockerOf: (() => Dockerode | undefined) | undefined;
  private readonly timeoutMs: number;
  private loaded = false;
  /** The cache file's size and mtime when this probe last read it (or wrote it). */
  private fileStamp: string | undefined;
  private readonly binaries = new Map<string, BinaryEntry>();
  private readonly images = new Map<string, ImageEntry>();
  private readonly lookups = new Map<string, string>();
  private readonly imageRefs = new Map<string, string>();
  /** Facts built from an entry's texts, by source (built once per entry). */
  private readonly built = new WeakMap<Texts, Map<string, RunnerFacts>>();
  /** Runs under way, by binary (`path size mtime`) or image id: asked twice at once, run once. */
  private readonly inflight = new Map<string, Promise<Outcome>>();
  /** Runners that could not be asked, by the same key: not asked again until `until`. */
  private readonly failures = new Map<string, { why: string; until: number }>();
  private writes: Promise<void> = Promise.resolve();
  private runCount = 0;

  constructor(options: RunnerProbeOptions) {
    this.stateDir = options.stateDir;
    this.root = options.root;
    this.env = options.env ?? process.env;
    this.bin = options.bin === null ? undefined : (options.bin ?? HAL0_BIN);
    this.dockerOf = options.docker;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  /** Processes and containers this probe has started, over its lifetime. */
  get runs(): number {
    return this.runCount;
  }

  /**
   * Learns every target: from the cache when its binary (path, size, mtime) or
   * image (id) is known, else by running it. Distinct targets in parallel; a
   * binary or image asked for twice at once (two words for one file, two
   * concurrent calls) runs once. The cache is written (atomically) when
   * something new was learned. Never throws for a runner's sake.
   */
  async probe(targets: readonly ProbeTarget[]): Promise<ProbeResult> {
    this.load();
    const byKey = new Map<string, ProbeTarget>();
    for (const t of targets) byKey.set(runnerKey(t.runtime, t.word, t.path), t);
    const learned = { any: false };
    const images = new Map<string, string>();
    const outcomes = await Promise.all([...byKey].map(async ([key, t]) => [key, await this.target(t, learned, images)] as const));
    const index = new Map<string, RunnerFacts>();
    const missing = new Map<string, RunnerMissing>();
    const failed = new Map<string, string>();
    let probed = 0;
    for (const [key, outcome] of outcomes) {
      probed += outcome.runs;
      if (outcome.ok) index.set(key, outcome.facts);
      else if ("missing" in outcome) missing.set(key, outcome.missing);
      else failed.set(key, outcome.why);
    }
    if (learned.any) await this.persist();
    return { index, missing, failed, probed, images: new Map([...images].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) };
  }

  /**
   * The facts the cache already holds for `targets`, without running anything
   * and without asking the engine (for `hal0 validate`, which must stay fast).
   * A process runner: the path its word was last found at (for this config
   * folder and PATH), stat'ed once: its facts only while its size and mtime
   * are those that were probed. The word is not looked up again: a runner
   * newly installed earlier on PATH shows from the next `probe`. An image: the
   * id its reference had when last probed (a re-tag shows from the next `probe`).
   */
  cached(targets: readonly ProbeTarget[]): RunnerFactsIndex {
    this.load();
    const index = new Map<string, RunnerFacts>();
    for (const t of targets) {
      const key = runnerKey(t.runtime, t.word, t.path);
      if (index.has(key)) continue;
      try {
        const facts = this.cachedOne(t);
        if (facts !== undefined) index.set(key, facts);
      } catch {
        // texts the parser cannot read: as if not probed (the next probe asks again only if the binary changes)
      }
    }
    return index;
  }

  /**
   * Every runner the cache holds facts for that a slot of this config folder
   * could name (a process runner's word looked up from this folder and PATH,
   * any image reference), read as `cached()` reads them, with the images'
   * last known ids: a guess at what `probe` will find, so one compile can do
   * (runner-observe.ts checks the guess against the probe's answer).
   */
  cachedAll(): { readonly runners: RunnerFactsIndex; readonly images: ImageDigests } {
    this.load();
    const targets: ProbeTarget[] = [];
    for (const key of this.lookups.keys()) {
      const parsed = parseLookupKey(key);
      if (parsed !== undefined && this.lookupKey(parsed) === key) targets.push({ runtime: "process", word: parsed });
    }
    for (const ref of this.imageRefs.keys()) targets.push({ runtime: "docker", word: ref });
    return { runners: this.cached(targets), images: this.cachedImages(targets) };
  }

  private cachedOne(t: ProbeTarget): RunnerFacts | undefined {
    if (t.runtime === "process") {
      const path = this.lookups.get(this.lookupKey(t.word, this.envFor(t.path)));
      const entry = path === undefined ? undefined : this.binaries.get(path);
      if (path === undefined || entry === undefined) return undefined;
      const info = statQuiet(path);
      return info !== undefined && sameFile(entry, info) ? this.factsOf(entry, binarySource(path, entry)) : undefined;
    }
    const id = this.imageRefs.get(t.word);
    const entry = id === undefined ? undefined : this.images.get(id);
    return id !== undefined && entry !== undefined ? this.factsOf(entry, imageSource(t.word, id)) : undefined;
  }

  /**
   * The image id each docker target's reference had when last probed, from
   * the cache (no engine asked): what `cached()` compiles with.
   */
  cachedImages(targets: readonly ProbeTarget[]): ImageDigests {
    this.load();
    const out = new Map<string, string>();
    for (const t of targets) {
      const id = t.runtime === "docker" ? this.imageRefs.get(t.word) : undefined;
      if (id !== undefined) out.set(t.word, id);
    }
    return out;
  }

  private async target(t: ProbeTarget, learned: { any: boolean }, images: Map<string, string>): Promise<TargetOutcome> {
    try {
      return t.runtime === "process" ? await this.processTarget(t.word, this.envFor(t.path), learned, t.env) : await this.imageTarget(t.word, learned, images);
    } catch (err) {
      return { ok: false, why: `the probe failed: ${(err as Error).message ?? String(err)}`, runs: 0 };
    }
  }

  // ---- process runners ----

  private async processTarget(word: string, env: Readonly<Record<string, string | undefined>>, learned: { any: boolean }, slotEnv: Readonly<Record<string, string>> = {}): Promise<TargetOutcome> {
    const lookup = await this.find(word, env);
    if (!lookup.found) {
      const missing: RunnerMissing = { problem: lookup.problem, searched: [...lookup.searched], ...(lookup.candidate !== undefined ? { candidate: lookup.candidate } : {}) };
      return { ok: false, missing, runs: 0 };
    }
    const path = lookup.path;
    const lookupKey = this.lookupKey(word, env);
    if (this.lookups.get(lookupKey) !== path) {
      this.lookups.delete(lookupKey);
      this.lookups.set(lookupKey, path);
      learned.any = true;
    }
    const info = statQuiet(path);
    if (info === undefined) return { ok: false, why: `${path} vanished while it was probed`, runs: 0 };
    const known = (): BinaryEntry | undefined => {
      const entry = this.binaries.get(path);
      return entry !== undefined && sameFile(entry, info) ? entry : undefined;
    };
    const cachedEntry = known() ?? (this.refresh() ? known() : undefined);
    if (cachedEntry !== undefined) {
      const entry = this.withCurrentTable(cachedEntry, this.binaries, path, learned);
      return { ok: true, facts: this.factsOf(entry, binarySource(path, entry)), runs: 0 };
    }
    const id = `binary\0${path}\0${info.size}\0${info.mtimeMs}`;
    return this.once(id, async () => {
      let runs = 0;
      const run = (arg: string): Promise<Run> => {
        runs++;
        this.runCount++;
        return runProcess(path, [arg], this.root, this.runEnv(env, slotEnv), this.timeoutMs);
      };
      const texts = await askRunner(run);
      if (!texts.ok) return { ok: false, why: texts.why, runs };
      const size = info.size;
      const mtime_ms = info.mtimeMs;
      const fresh: BinaryEntry = { size, mtime_ms, ...textsOf(texts), probed_at: new Date().toISOString() };
      // Replaced while it ran: these texts may be the new file's or the old one's; use them now, store nothing.
      const after = statQuiet(path);
      if (after !== undefined && sameFile(fresh, after)) {
        this.binaries.delete(path);
        this.binaries.set(path, fresh);
        learned.any = true;
      }
      return { ok: true, facts: this.factsOf(fresh, binarySource(path, fresh)), runs };
    });
  }

  /**
   * `findRunner`, with no bin/ when `bin` is null: findRunner's `bin`
   * defaults to HAL0_BIN when undefined is passed, so a folder PATH already
   * holds stands in for "none" (runnerPath adds nothing then).
   */
  private find(word: string, given: Readonly<Record<string, string | undefined>> = this.env): Promise<RunnerLookup> {
    if (this.bin !== undefined || word.includes("/")) return findRunner(word, this.root, given, this.bin);
    const env = given.PATH === undefined ? { ...given, PATH: DEFAULT_PATH } : given;
    return findRunner(word, this.root, env, env.PATH!.split(delimiter)[0]!);
  }

  /** The environment a target is looked up and run with: the given one, its PATH the slot's when it sets one. */
  private envFor(path: string | undefined): Readonly<Record<string, string | undefined>> {
    return path === undefined ? this.env : { ...this.env, PATH: path };
  }

  /** The folders a bare word is searched in: PATH, then hal0's bin/ (unless `bin` is null). */
  private searchPath(env: Readonly<Record<string, string | undefined>> = this.env): string {
    return this.bin === undefined ? (env.PATH ?? "") : runnerPath(env, this.bin);
  }

  /**
   * The runner's environment as the process driver starts it: the base (runnerBaseEnv: none of hal0's
   * secrets), the slot's env over it (`slotEnv`: a library path, a variable a wrapper reads), hal0's bin/
   * after its PATH (`env`'s: the slot's PATH when it sets one).
   */
  private runEnv(env: Readonly<Record<string, string | undefined>> = this.env, slotEnv: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
    const PATH = this.searchPath(env);
    const base = { ...runnerBaseEnv(env), ...slotEnv };
    return PATH === (env.PATH ?? "") ? base : { ...base, PATH };
  }

  /** What a word resolves against: itself, the config folder, and the folders it is searched in. */
  private lookupKey(word: string, env: Readonly<Record<string, string | undefined>> = this.env): string {
    return JSON.stringify([word, this.root, word.includes("/") ? "" : this.searchPath(env)]);
  }

  // ---- docker runners ----

  private async imageTarget(ref: string, learned: { any: boolean }, images: Map<string, string>): Promise<Outcome> {
    let docker: Dockerode | undefined;
    try {
      docker = this.dockerOf?.();
    } catch (err) {
      return { ok: false, why: `no Docker engine: ${(err as Error).message}`, runs: 0 };
    }
    if (docker === undefined) return { ok: false, why: "no Docker engine is configured ([slots] docker_host, DOCKER_HOST)", runs: 0 };
    let id: string;
    try {
      id = (await within(() => docker.getImage(ref).inspect())).Id; // a hung engine holds no compile, plan or read
    } catch (err) {
      if (engineStatus(err) === 404) return { ok: false, why: `image ${ref} is not present (the probe pulls nothing; with [slots] pull = true a slot's start pulls it)`, runs: 0 };
      return { ok: false, why: `the Docker engine does not answer: ${(err as Error).message}`, runs: 0 };
    }
    images.set(ref, id);
    if (this.imageRefs.get(ref) !== id) {
      this.imageRefs.delete(ref);
      this.imageRefs.set(ref, id);
      learned.any = true;
    }
    const cachedEntry = this.images.get(id) ?? (this.refresh() ? this.images.get(id) : undefined);
    if (cachedEntry !== undefined) {
      const entry = this.withCurrentTable(cachedEntry, this.images, id, learned);
      return { ok: true, facts: this.factsOf(entry, imageSource(ref, id)), runs: 0 };
    }
    const engine = docker;
    return this.once(`image\0${id}`, async () => {
      await reapProbeContainers(engine);
      let runs = 0;
      const run = (arg: string): Promise<Run> => runContainer(engine, id, ref, [arg], this.timeoutMs, () => {
        runs++;
        this.runCount++;
      });
      const texts = await askRunner(run);
      if (!texts.ok) return { ok: false, why: texts.why, runs };
      const fresh: ImageEntry = { ...textsOf(texts), probed_at: new Date().toISOString() };
      this.images.delete(id);
      this.images.set(id, fresh);
      learned.any = true;
      return { ok: true, facts: this.factsOf(fresh, imageSource(ref, id)), runs };
    });
  }

  // ---- shared ----

  /**
   * Runs `learn` for `id` unless a run of it is under way (then its outcome is
   * shared, with runs 0 for the joiner) or it failed within
   * FAILED_PROBE_MEMORY_MS (then that failure, with nothing run).
   */
  private async once(id: string, learn: () => Promise<Outcome>): Promise<Outcome> {
    const failure = this.failures.get(id);
    // On the monotonic clock: the clock set back a day does not keep a runner unasked for a day.
    if (failure !== undefined && failure.until > performance.now()) return { ok: false, why: failure.why, runs: 0 };
    const running = this.inflight.get(id);
    if (running !== undefined) {
      const outcome = await running;
      return { ...outcome, runs: 0 };
    }
    const job = learn().then((outcome) => {
      if (!outcome.ok) this.failures.set(id, { why: outcome.why, until: performance.now() + FAILED_PROBE_MEMORY_MS });
      else this.failures.delete(id);
      return outcome;
    }).finally(() => this.inflight.delete(id));
    this.inflight.set(id, job);
    return job;
  }

  /**
   * A cached entry whose help text has no flag table of this parser's
   * FLAG_TABLE_VERSION (written before tables were kept, or by an older
   * parser): parsed once more and stored, so the commands after this probe
   * read the table instead of parsing the text each time. The runner is not
   * asked again; `probed_at` stays the entry's.
   */
  private withCurrentTable<E extends Texts>(entry: E, store: Map<string, E>, key: string, learned: { any: boolean }): E {
    if (entry.help_text === null || currentFlags(entry) !== undefined) return entry;
    const upgraded: E = { ...entry, ...textsOf(entry) };
    store.set(key, upgraded);
    learned.any = true;
    return upgraded;
  }

  private factsOf(entry: Texts, source: string): RunnerFacts {
    let bySource = this.built.get(entry);
    if (bySource === undefined) this.built.set(entry, (bySource = new Map()));
    let facts = bySource.get(source);
    if (facts === undefined) {
      bySource.set(source, (facts = runnerFacts(entry.version_text, entry.help_text, source, currentFlags(entry))));
    }
    return facts;
  }

  // ---- the cache file ----

  private get file(): string | undefined {
    return this.stateDir === null ? undefined : join(this.stateDir, RUNNERS_FILE);
  }

  /** Reads the cache file once (synchronously: it is small, and `cached()` is synchronous). Anything unreadable or foreign: an empty cache. */
  private load(): void {
    if (this.loaded) return;
    this.loaded = true;
    this.fileStamp = fileStamp(this.file);
    const read = readCache(this.file);
    if (read !== undefined) this.merge(read);
  }

  /**
   * Before a runner is run: takes in what another process (`hal0 serve`, a
   * CLI command) wrote to the cache file since this probe read it. One stat
   * when the file has not changed. True when something was read.
   */
  private refresh(): boolean {
    const stamp = fileStamp(this.file);
    if (stamp === undefined || stamp === this.fileStamp) return false;
    this.fileStamp = stamp;
    const read = readCache(this.file);
    if (read === undefined) return false;
    this.merge(read);
    return true;
  }

  /** Takes `other`'s entries this probe does not have, or has older ones of (by `probed_at`); this probe's lookups and references win. */
  private merge(other: CacheFile): void {
    for (const [path, entry] of Object.entries(other.binaries)) {
      const mine = this.binaries.get(path);
      if (mine === undefined || mine.probed_at < entry.probed_at) this.binaries.set(path, entry);
    }
    for (const [id, entry] of Object.entries(other.images)) {
      const mine = this.images.get(id);
      if (mine === undefined || mine.probed_at < entry.probed_at) this.images.set(id, entry);
    }
    for (const [key, path] of Object.entries(other.lookups)) if (!this.lookups.has(key)) this.lookups.set(key, path);
    for (const [ref, id] of Object.entries(other.image_refs)) if (!this.imageRefs.has(ref)) this.imageRefs.set(ref, id);
  }

  /**
   * Writes the cache, one write at a time: what another process wrote since
   * this one read it is merged in first (so `hal0 serve` and a CLI command do
   * not erase each other's runners). A write that fails (a read-only state
   * folder) is dropped: the runners are asked again next time, nothing breaks.
   */
  private persist(): Promise<void> {
    const file = this.file;
    if (file === undefined) return Promise.resolve();
    this.writes = this.writes.then(async () => {
      const current = readCache(file);
      if (current !== undefined) this.merge(current);
      const out: CacheFile = {
        kind: "hal0-runners",
        version: 1,
        binaries: newest(this.binaries, MAX_ENTRIES),
        images: newest(this.images, MAX_ENTRIES),
        lookups: Object.fromEntries([...this.lookups].slice(-MAX_LOOKUPS)),
        image_refs: Object.fromEntries([...this.imageRefs].slice(-MAX_LOOKUPS)),
      };
      await ensureStateFolder(this.stateDir!);
      await writeFileAtomic(file, `${JSON.stringify(out, null, 2)}\n`);
      this.fileStamp = fileStamp(file);
    }).catch(() => undefined);
    return this.writes;
  }
}

/** The flags stored beside an entry's help text, when this parser's FLAG_TABLE_VERSION made them; else undefined. */
function currentFlags(entry: Texts): readonly RunnerFlag[] | undefined {
  return entry.flag_table?.version === FLAG_TABLE_VERSION ? entry.flag_table.flags : undefined;
}

/** What the cache keeps of a runner's answers: the texts, and the flags parsed from its help (under FLAG_TABLE_VERSION). */
function textsOf(texts: { version_text: string; help_text: string | null }): Omit<Texts, "probed_at"> {
  if (texts.help_text === null) return { version_text: texts.version_text, help_text: null };
  return { version_text: texts.version_text, help_text: texts.help_text, flag_table: { version: FLAG_TABLE_VERSION, flags: parseLlamaHelp(texts.help_text).flags } };
}

/**
 * `--version`, then (llama-server only) `--help`, through `run`. A non-zero
 * exit or a timeout of either is a failure (nothing is stored of it).
 */
async function askRunner(run: (arg: string) => Promise<Run>): Promise<{ ok: true; version_text: string; help_text: string | null } | { ok: false; why: string }> {
  const version = await run("--version");
  if (!version.ok) return { ok: false, why: `--version: ${version.why}` };
  if (parseRunnerVersion(version.text).kind !== "llama-server") return { ok: true, version_text: version.text, help_text: null };
  const help = await run("--help");
  if (!help.ok) return { ok: false, why: `--help: ${help.why}` };
  return { ok: true, version_text: version.text, help_text: help.text };
}

/** stdout, then stderr (llama.cpp prints its version on stderr, its help on stdout): one text, in a stable order. */
function joinStreams(stdout: string, stderr: string): string {
  if (stdout === "" || stderr === "") return stdout + stderr;
  return stdout.endsWith("\n") ? stdout + stderr : `${stdout}\n${stderr}`;
}

function firstLine(text: string): string {
  return text.split("\n").map((l) => l.trim()).find(Boolean)?.slice(0, 160) ?? "";
}

function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(3))} s`;
}

/**
 * Runs `<path> <args>` in `cwd` with `env`, stdin closed, both streams kept
 * (up to MAX_OUTPUT_BYTES each). In its own process group: at the timeout the
 * whole group is SIGKILLed, and the answer comes once the runner is reaped,
 * so nothing it started outlives the probe; the group is killed too when
 * hal0 ends first (a Ctrl-C while it waits: probe-process.ts).
 */
function runProcess(path: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Run> {
  return new Promise((resolve) => {
    const out: Buffer[][] = [[], []];
    const size = [0, 0];
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    let timedOut = false;
    let settled = false;
    const finish = (run: Run) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(run);
    };
    const child = spawnProbe(path, args, { cwd, env });
    const take = (i: 0 | 1) => (chunk: Buffer) => {
      if (size[i]! >= MAX_OUTPUT_BYTES) return;
      out[i]!.push(chunk);
      size[i]! += chunk.length;
    };
    child.stdout!.on("data", take(0));
    child.stderr!.on("data", take(1));
    const text = () => joinStreams(Buffer.concat(out[0]!).toString("utf8").slice(0, MAX_OUTPUT_BYTES), Buffer.concat(out[1]!).toString("utf8").slice(0, MAX_OUTPUT_BYTES));
    const answer = () => {
      if (timedOut && exit?.signal === "SIGKILL") return finish({ ok: false, why: `no answer within ${seconds(timeoutMs)}; stopped it` });
      const all = text();
      if (exit?.code === 0) return finish({ ok: true, text: all });
      const how = exit?.signal ? `killed by ${exit.signal}` : `exited with code ${exit?.code}`;
      const first = firstLine(all);
      finish({ ok: false, why: `${how}${first ? `: ${first}` : ""}` });
    };
    const timer = setTimeout(() => {
      // Exited but a stream is still held open (by something it left behind): take what came; else it never answered.
      if (exit === undefined) timedOut = true;
      killGroup(child.pid, () => child.kill("SIGKILL"));
      child.stdout!.destroy();
      child.stderr!.destroy();
      if (exit !== undefined) answer();
    }, timeoutMs);
    child.once("error", (err: NodeJS.ErrnoException) => finish({ ok: false, why: `cannot run it: ${spawnErrorWords(path, err)}` }));
    child.once("exit", (code, signal) => {
      exit = { code, signal };
      if (timedOut) answer(); // the streams were destroyed: 'close' may not follow
    });
    child.once("close", () => answer());
  });
}

function killGroup(pid: number | undefined, fallback: () => void): void {
  if (pid !== undefined && !killQuietly(-pid)) fallback();
}

/**
 * Runs a container of image `id` with `cmd` (after the image's entrypoint):
 * no network, no pull, no mounts; waits for its exit up to `timeoutMs` (then
 * kills it); reads both streams; removes it, whatever happened. `started` is
 * called once the engine has made it.
 */
async function runContainer(docker: Dockerode, id: string, ref: string, cmd: readonly string[], timeoutMs: number, started: () => void): Promise<Run> {
  let container: Dockerode.Container;
  try {
    container = await docker.createContainer({
      Image: id,
      Cmd: [...cmd],
      Labels: { [PROBE_LABEL]: ref },
      AttachStdin: false,
      Tty: false,
      HostConfig: { NetworkMode: "none", RestartPolicy: { Name: "no" } },
    });
  } catch (err) {
    if (engineStatus(err) === 404) return { ok: false, why: `image ${ref} is not present (the probe pulls nothing; with [slots] pull = true a slot's start pulls it)` };
    return { ok: false, why: `docker could not create a container of ${ref}: ${(err as Error).message}` };
  }
  started();
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  try {
    await container.start();
    const waited = container.wait({ condition: "not-running", abortSignal: abort.signal }).then(
      (r: { StatusCode?: number }) => ({ code: typeof r?.StatusCode === "number" ? r.StatusCode : null }),
      (err: unknown) => (abort.signal.aborted ? "timeout" as const : { error: err as Error }),
    );
    const deadline = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), timeoutMs)));
    const result = await Promise.race([waited, deadline]);
    if (result === "timeout") {
      abort.abort();
      await container.kill().catch(() => undefined);
      return { ok: false, why: `no answer within ${seconds(timeoutMs)}; stopped it` };
    }
    if ("error" in result) return { ok: false, why: `docker lost the container: ${result.error.message}` };
    const raw = (await container.logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer;
    const { stdout, stderr } = demux(raw);
    const text = joinStreams(stdout, stderr);
    if (result.code === 0) return { ok: true, text };
    const first = firstLine(text);
    return { ok: false, why: `exited with code ${result.code ?? "?"}${first ? `: ${first}` : ""}` };
  } catch (err) {
    return { ok: false, why: `docker could not run a container of ${ref}: ${(err as Error).message}` };
  } finally {
    clearTimeout(timer);
    abort.abort();
    await container.remove({ force: true }).catch(() => undefined);
  }
}

/**
 * How old a probe container must be before a probe removes it: older than
 * any probe still running or reading its log (a run is killed at its
 * timeout), so it is one a hal0 that died mid-probe (a Ctrl-C, kill -9) left
 * behind: stopped, or still running when its runner hangs.
 */
export const STALE_PROBE_CONTAINER_S = 120;

/** Removes the probe containers (label hal0.runner-probe) older than STALE_PROBE_CONTAINER_S, running or not; best effort. */
async function reapProbeContainers(docker: Dockerode): Promise<void> {
  const listed = await docker.listContainers({ all: true, filters: { label: [PROBE_LABEL] } }).catch(() => []);
  const before = Date.now() / 1000 - STALE_PROBE_CONTAINER_S;
  await Promise.all(listed.filter((c) => c.Created < before).map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
}

/** A non-tty container's log: frames of `[stream, 0, 0, 0, length(4, BE)]` + payload; stream 1 stdout, 2 stderr. */
function demux(raw: Buffer): { stdout: string; stderr: string } {
  const parts: Buffer[][] = [[], []];
  let at = 0;
  while (at + 8 <= raw.length && raw[at + 1] === 0 && raw[at + 2] === 0 && raw[at + 3] === 0) {
    const length = raw.readUInt32BE(at + 4);
    parts[raw[at] === 2 ? 1 : 0]!.push(raw.subarray(at + 8, at + 8 + length));
    at += 8 + length;
  }
  if (at === 0 && raw.length > 0) return { stdout: raw.toString("utf8"), stderr: "" }; // not framed (a tty container)
  return { stdout: Buffer.concat(parts[0]!).toString("utf8"), stderr: Buffer.concat(parts[1]!).toString("utf8") };
}

// ---- helpers ----

/** The word of a lookup key (`JSON.stringify([word, root, PATH])`); undefined for anything else. */
function parseLookupKey(key: string): string | undefined {
  try {
    const parsed = JSON.parse(key) as unknown;
    return Array.isArray(parsed) && typeof parsed[0] === "string" ? parsed[0] : undefined;
  } catch {
    return undefined;
  }
}

function statQuiet(path: string): Stats | undefined {
  try {
    const info = statSync(path, { throwIfNoEntry: false });
    return info?.isFile() ? info : undefined;
  } catch {
    return undefined;
  }
}

function fileStamp(file: string | undefined): string | undefined {
  const info = file === undefined ? undefined : statQuiet(file);
  return info === undefined ? undefined : `${info.size} ${info.mtimeMs} ${info.ino}`;
}

function sameFile(entry: BinaryEntry, info: Stats): boolean {
  return entry.size === info.size && entry.mtime_ms === info.mtimeMs;
}

function binarySource(path: string, entry: BinaryEntry): string {
  return `${path} (size ${entry.size} bytes, modified ${new Date(entry.mtime_ms).toISOString()})`;
}

function imageSource(ref: string, id: string): string {
  return ref === id ? `image ${id}` : `image ${ref} (${id})`;
}

function newest<T extends Texts>(entries: ReadonlyMap<string, T>, max: number): Record<string, T> {
  const all = [...entries];
  if (all.length > max) all.sort((a, b) => (a[1].probed_at < b[1].probed_at ? -1 : a[1].probed_at > b[1].probed_at ? 1 : 0));
  return Object.fromEntries(all.slice(-max));
}

/** The cache file, its well-formed entries only; undefined when it is missing, unreadable, not JSON or not hal0's runners file. */
function readCache(file: string | undefined): CacheFile | undefined {
  if (file === undefined) return undefined;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    return undefined;
  }
  if (!isRecord(raw) || raw.kind !== "hal0-runners" || raw.version !== 1) return undefined;
  const texts = (v: Record<string, unknown>): boolean =>
    typeof v.version_text === "string" && (v.help_text === null || typeof v.help_text === "string") && typeof v.probed_at === "string" &&
    (v.flag_table === undefined || isStoredFlagTable(v.flag_table));
  const section = <T>(value: unknown, ok: (v: Record<string, unknown>) => boolean): Record<string, T> => {
    if (!isRecord(value)) return {};
    return Object.fromEntries(Object.entries(value).filter(([, v]) => isRecord(v) && ok(v))) as Record<string, T>;
  };
  const strings = (value: unknown): Record<string, string> =>
    isRecord(value) ? Object.fromEntries(Object.entries(value).filter(([, v]) => typeof v === "string")) as Record<string, string> : {};
  return {
    kind: "hal0-runners",
    version: 1,
    binaries: section<BinaryEntry>(raw.binaries, (v) => texts(v) && Number.isFinite(v.size) && Number.isFinite(v.mtime_ms)),
    images: section<ImageEntry>(raw.images, texts),
    lookups: strings(raw.lookups),
    image_refs: strings(raw.image_refs),
  };
}

/** A stored flag table of the shape RunnerFlag has (an entry with a malformed one is dropped, and its runner asked again). */
function isStoredFlagTable(value: unknown): value is StoredFlagTable {
  if (!isRecord(value) || !Number.isInteger(value.version) || !Array.isArray(value.flags)) return false;
  const strings = (v: unknown): boolean => Array.isArray(v) && v.every((w) => typeof w === "string");
  const stringOrNull = (v: unknown): boolean => v === null || typeof v === "string";
  return value.flags.every((f: unknown) => isRecord(f) && strings(f.names) && (f.names as string[]).length > 0 && typeof f.canonical === "string" &&
    typeof f.takes_value === "boolean" && stringOrNull(f.placeholder) && (f.values === null || strings(f.values)) && typeof f.list === "boolean" &&
    (f.deprecated === null || (isRecord(f.deprecated) && stringOrNull(f.deprecated.replacement))) &&
    (f.removed === null || (isRecord(f.removed) && typeof f.removed.hint === "string")) && stringOrNull(f.env) && typeof f.description === "string");
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
