import { accessSync, constants, existsSync, statSync, type Stats } from "node:fs";
import type { CompiledModelFacts, Model, ResolvedSlot } from "../compiler/index.js";
import { Locator, type Target } from "../compiler/locate.js";
import type { Diagnostic, KeyPath, RelatedPosition } from "../schema/index.js";
import { findRunner, HAL0_BIN, type RunnerLookup } from "./drivers/runner.js";
import { readGgufHeader } from "./host/gguf.js";
import { ggufFacts } from "./host/gguf-facts.js";
import { modelFiles } from "./host/model-scan.js";

/**
 * The preflight: what `compile()` cannot know because it never reads the disk,
 * checked against the host after it — the things that pass `hal0 validate`
 * today and fail at `hal0 apply` with ENOENT:
 *
 * - every enabled slot on the process runtime: its runner (argv[0] of the
 *   resolved spec) is found and executable, looked up as the runner driver
 *   spawns it (`findRunner`: a word with `/` against the config folder; a bare
 *   word on the runner's PATH, then hal0's bin/). On the docker runtime the
 *   runner is the image's entrypoint: the engine's business, not checked;
 * - every enabled slot's model file, and its drafter, vision projector and
 *   chat template file when the resolved argv uses them, is a readable regular
 *   file (on docker too: those files are bind-mounted from the host). A model
 *   fetched by hf_repo has no file to check;
 * - every enabled slot's model file that is a GGUF (by its magic, whatever its
 *   name), by the header it carries: a `ctx_size` the argv passes above the
 *   model's training context (`<arch>.context_length`, llama.cpp's
 *   n_ctx_train), and a models.toml fact (architecture, context_length) the
 *   header contradicts. Those two are advisory: the runner starts anyway. A
 *   file that is not a GGUF, or whose header does not parse, gives no finding.
 *
 * Reads only (stat, access, and GGUF headers: each once per path per call, and
 * across calls while the file keeps its size and mtime; nothing is run). Each
 * problem is a finding in the diagnostic shape with a registry code, naming
 * the slot and the key that set the file. `hal0 validate` reports them as
 * warnings (errors with --strict), the conditions as Stalled (RunnerNotFound,
 * ModelMissing, …; never for the advisory ones), `hal0 doctor` as rows. Pure
 * callers (compile, the planner) never see them.
 */

export type PreflightCode = "slot.runner_missing" | "slot.model_missing" | "slot.model_unreadable" | "slot.ctx_exceeds_training" | "slot.model_fact_mismatch";

/**
 * What exactly a finding is about, finer than its code (`slot.runner_missing`
 * is either runner problem): what the conditions key their reason by.
 */
export type PreflightProblem =
  | "runner_not_found" | "runner_not_executable" | "model_missing" | "model_unreadable"
  | AdvisoryProblem;

/** The problems apply does not fail on (the runner starts anyway, with a warning of its own): never Stalled nor Degraded. */
export type AdvisoryProblem = "ctx_exceeds_training" | "model_fact_mismatch";

const ADVISORY: ReadonlySet<PreflightProblem> = new Set<AdvisoryProblem>(["ctx_exceeds_training", "model_fact_mismatch"]);

/** Whether `f` is advisory (the slot would still start): a ctx_size above the training context, a models.toml fact the header contradicts. */
export function isAdvisory(f: Pick<Finding, "problem">): boolean {
  return ADVISORY.has(f.problem);
}

/** What a finding is about: the runner, or one of the files the model's keys name. */
export type PreflightSubject = "runner" | "model" | "draft" | "mmproj" | "chat_template";

/**
 * One problem, in the diagnostic shape (`file` relative to the config folder;
 * `line` / `column` null when the caller passed no texts to place it with),
 * plus which slot, what, and the word or absolute path concerned.
 */
export interface Finding {
  readonly code: PreflightCode;
  readonly problem: PreflightProblem;
  readonly severity: "warning";
  readonly summary: string;
  readonly detail: string;
  readonly file: string;
  readonly line: number | null;
  readonly column: number | null;
  readonly path: KeyPath;
  readonly related: readonly RelatedPosition[];
  readonly slot: string;
  readonly subject: PreflightSubject;
  /** The runner word as written, or the absolute file path (the model file, for the header findings). */
  readonly target: string;
}

export interface PreflightOptions {
  /** The environment runners are started with (PATH; each slot's `[server] env` goes over it): default process.env. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** hal0's own bin/ folder, searched after PATH: default HAL0_BIN; null for none. */
  readonly bin?: string | null;
  /** The tree's files by path: findings get the line and column of their key (else null). */
  readonly texts?: ReadonlyMap<string, string>;
}

/** The model keys that name a file the runner opens (checked when the slot's argv carries that file), as `what` reads in a message. */
const MODEL_FILES: ReadonlyArray<{ subject: Exclude<PreflightSubject, "runner">; key: string; abs: keyof CompiledModelFacts; what: string }> = [
  { subject: "model", key: "path", abs: "path_abs", what: "model file" },
  { subject: "draft", key: "draft", abs: "draft_abs", what: "drafter file (draft)" },
  { subject: "mmproj", key: "mmproj", abs: "mmproj_abs", what: "vision projector file (mmproj)" },
  { subject: "chat_template", key: "chat_template", abs: "chat_template_file_abs", what: "chat template file (chat_template)" },
];

const MODELS_FILE = "models.toml";
const PROFILES_FILE = "profiles.toml";

/**
 * Checks the host for every enabled slot of `model`; findings sorted by slot,
 * then runner before files. Each distinct runner lookup and file is checked
 * once per call.
 */
export async function preflight(model: Model, options: PreflightOptions = {}): Promise<Finding[]> {
  // Only PATH matters to a lookup: read once (process.env is slow to read, and slow to spread).
  const hostPath = (options.env ?? process.env).PATH;
  const bin = options.bin === null ? undefined : (options.bin ?? HAL0_BIN);
  const place = placer(options.texts);
  const lookups = new Map<string, Promise<RunnerLookup>>();
  const files = new Map<string, FileCheck>();
  const fileCheck = (path: string) => memoSync(files, path, () => readable(path));
  const headers = new Map<string, Promise<HeaderFacts | undefined>>();
  const perSlot = Object.values(model.slots).filter((s) => s.enabled).sort((a, b) => cmp(a.name, b.name)).map(async (slot) => {
    const out: Finding[] = [];
    if (slot.spec.runtime === "process" && slot.spec.argv[0] !== undefined) {
      const word = slot.spec.argv[0];
      // What the runner is spawned with: hal0's environment, the slot's env over it (runner.ts adds hal0's bin/).
      const PATH = slot.spec.env.PATH ?? hostPath;
      const lookup = await memo(lookups, `${word}\0${PATH ?? "\u0001"}`, () => findRunner(word, model.root, { PATH }, bin));
      if (!lookup.found) out.push(runnerFinding(model, slot, lookup, place));
    }
    const facts = slot.model === undefined ? undefined : model.models[slot.model];
    if (facts) {
      for (const f of MODEL_FILES) {
        const abs = facts[f.abs];
        if (typeof abs !== "string" || !usesWord(slot.spec.argv, abs)) continue;
        const check = fileCheck(abs);
        if (check.state !== "ok") out.push(fileFinding(slot, facts.id, f, abs, check.state, place));
        else if (f.subject === "model") {
          const header = await memo(headers, abs, () => cachedHeader(abs, check.stats));
          if (header !== undefined) out.push(...headerFindings(model, slot, facts, abs, header, place));
        }
      }
    }
    return out;
  });
  return (await Promise.all(perSlot)).flat();
}

/** A finding as a compiler diagnostic (validate's list): `severity` given, unplaced ones at the file's start. */
export function findingDiagnostic(f: Finding, severity: Diagnostic["severity"] = f.severity): Diagnostic {
  return { code: f.code, severity, summary: f.summary, detail: f.detail, file: f.file, line: f.line ?? 1, column: f.column ?? 1, path: [...f.path], related: [...f.related] };
}

/** How long the sweep trusts its last preflight of an unchanged model: a runner installed or a model fetched meanwhile shows within this. */
export const PREFLIGHT_MAX_AGE_MS = 30_000;

/**
 * The sweep's preflight: run again only when the model changes (the tree
 * cache hands back the same Model object while no file of the tree changed)
 * or the last run is older than `maxAgeMs`, so an idle sweep does no lookup
 * of PATH nor stat of a model file. `runs` counts real runs (tests, bench).
 */
export class PreflightCache {
  private readonly last = new WeakMap<Model, { readonly at: number; readonly findings: Promise<Finding[]> }>();
  runs = 0;

  constructor(private readonly options: PreflightOptions & { readonly maxAgeMs?: number; readonly now?: () => number } = {}) {}

  findings(model: Model): Promise<Finding[]> {
    const now = (this.options.now ?? Date.now)();
    const hit = this.last.get(model);
    if (hit !== undefined && now - hit.at < (this.options.maxAgeMs ?? PREFLIGHT_MAX_AGE_MS)) return hit.findings;
    this.runs++;
    const findings = preflight(model, this.options);
    this.last.set(model, { at: now, findings });
    findings.catch(() => this.last.delete(model));
    return findings;
  }
}

type FileState = "ok" | "missing" | "not_a_file" | "unreadable";
type FileCheck = { readonly state: "ok"; readonly stats: Stats } | { readonly state: Exclude<FileState, "ok"> };

/** Synchronous, as `findRunner`'s stats: one stat and one access, a few µs, no thread-pool round trip. */
function readable(path: string): FileCheck {
  try {
    const stats = statSync(path);
    if (!stats.isFile()) return { state: "not_a_file" };
    accessSync(path, constants.R_OK);
    return { state: "ok", stats };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { state: code === "ENOENT" || code === "ENOTDIR" ? "missing" : "unreadable" };
  }
}

/** What the preflight compares from a GGUF header. */
interface HeaderFacts {
  readonly architecture?: string;
  /** `<arch>.context_length`: the training context (llama.cpp's n_ctx_train). */
  readonly context_length?: number;
}

/**
 * Header facts by absolute path, for as long as the file keeps its size, mtime
 * and inode: `hal0 plan`, validate and the sweep on a big box parse each
 * header once, not once per call. One entry per path (a changed file replaces
 * it), at most HEADER_CACHE_MAX paths.
 */
const headerCache = new Map<string, { readonly stamp: string; readonly facts: Promise<HeaderFacts | undefined> }>();
const HEADER_CACHE_MAX = 512;
let headerReads = 0;

/** How many GGUF headers the preflight has parsed in this process (the cache's misses): tests and bench. */
export function preflightHeaderReads(): number {
  return headerReads;
}

/** The header facts of the regular file at `path` (`stats` from its stat), from the cache or read now; undefined for a file that is not a GGUF hal0 can read. */
function cachedHeader(path: string, stats: Stats): Promise<HeaderFacts | undefined> {
  const stamp = `${stats.size}:${stats.mtimeMs}:${stats.ino}`;
  const hit = headerCache.get(path);
  if (hit !== undefined && hit.stamp === stamp) return hit.facts;
  headerReads++;
  const facts = readHeaderFacts(path);
  headerCache.delete(path);
  if (headerCache.size >= HEADER_CACHE_MAX) headerCache.delete(headerCache.keys().next().value!);
  headerCache.set(path, { stamp, facts });
  return facts;
}

/** Never rejects: a file without the GGUF magic, a truncated or malformed header, a read error: no facts. */
async function readHeaderFacts(path: string): Promise<HeaderFacts | undefined> {
  try {
    const f = ggufFacts(await readGgufHeader(path));
    return { architecture: f.architecture, context_length: f.context_length };
  } catch {
    return undefined;
  }
}

type Place = (file: string, path: KeyPath, target?: Target) => { line: number | null; column: number | null };

/** Places key paths in the tree's texts (one Locator per file, built on first use; a key not spelled out: its table); without texts, nowhere. */
function placer(texts: ReadonlyMap<string, string> | undefined): Place {
  const locators = new Map<string, Locator>();
  return (file: string, path: KeyPath, target: Target = "value") => {
    const loc = texts?.has(file) ? memoSync(locators, file, () => new Locator(texts.get(file)!)) : undefined;
    return loc === undefined ? { line: null, column: null } : loc.locate(path, target);
  };
}

function related(place: Place, file: string, path: KeyPath, message: string): RelatedPosition[] {
  const at = place(file, path);
  return at.line === null || at.column === null ? [] : [{ file, line: at.line, column: at.column, message }];
}

function runnerFinding(model: Model, slot: ResolvedSlot, lookup: Extract<RunnerLookup, { found: false }>, place: Place): Finding {
  const profile = model.profiles[slot.profile];
  const word = lookup.word;
  // The key that set the runner: a profiles.toml profile's `runner` (its table when it takes the default), else the slot's `profile` (a seed's runner).
  const inFile = profile?.origin === "file";
  const site = inFile ? { file: PROFILES_FILE, path: ["profile", slot.profile, "runner"] } : { file: slot.file, path: ["profile"] };
  const rel = inFile ? related(place, slot.file, ["profile"], `slot ${slot.name} uses profile \`${slot.profile}\``) : [];
  const bare = !word.includes("/");
  const problem: PreflightProblem = lookup.problem === "not_found" ? "runner_not_found" : "runner_not_executable";
  const summary = lookup.problem === "not_executable"
    ? `the runner \`${word}\` of slot ${slot.name} is not executable: ${lookup.candidate}`
    : bare
      ? `the runner \`${word}\` of slot ${slot.name} is not on PATH nor in hal0's bin/`
      : `the runner \`${word}\` of slot ${slot.name} does not exist: ${lookup.searched[0]}`;
  const where = bare ? `Looked in: ${lookup.searched.join(", ") || "(an empty PATH)"}.` : `A runner with a / is a path; a relative one is taken against the config folder (${model.root}).`;
  const fix = lookup.problem === "not_executable"
    ? `Make it executable (chmod +x), or set profile \`${slot.profile}\`'s runner to one that is.`
    : `Install it, put its folder on hal0's PATH, or set profile \`${slot.profile}\`'s runner (profiles.toml) to the command that starts it.`;
  return {
    code: "slot.runner_missing", problem, severity: "warning", summary, detail: `hal0 apply would fail to start slot ${slot.name}. ${where} ${fix}`,
    file: site.file, ...place(site.file, site.path), path: site.path, related: rel, slot: slot.name, subject: "runner", target: word,
  };
}

function fileFinding(slot: ResolvedSlot, id: string, f: (typeof MODEL_FILES)[number], abs: string, state: Exclude<FileState, "ok">, place: Place): Finding {
  const path = ["model", id, f.key];
  const problem = state === "missing" ? "model_missing" : "model_unreadable";
  const how = state === "missing" ? "does not exist" : state === "not_a_file" ? "is not a regular file" : "is not readable by hal0";
  const fix = state === "missing"
    ? `Fix [model.${id}] ${f.key} in models.toml (relative paths are taken against the config folder), or put the file there.`
    : `Make it a file hal0 and the runner can read (its permissions, or the path).`;
  return {
    code: `slot.${problem}`, problem, severity: "warning", summary: `the ${f.what} of slot ${slot.name} ${how}: ${abs}`,
    detail: `Model \`${id}\`; the runner would exit at load and hal0 apply would fail. ${fix}`,
    file: MODELS_FILE, ...place(MODELS_FILE, path), path, related: related(place, slot.file, ["model"], `slot ${slot.name} serves model \`${id}\``),
    slot: slot.name, subject: f.subject, target: abs,
  };
}

/**
 * The header's findings for a slot whose model file is a GGUF: its argv's
 * `--ctx-size` above the training context (at the tune key that set ctx_size,
 * as compile's tune warnings), and each models.toml fact (architecture,
 * context_length; only when set) the header contradicts (at that key).
 */
function headerFindings(model: Model, slot: ResolvedSlot, facts: CompiledModelFacts, abs: string, header: HeaderFacts, place: Place): Finding[] {
  const out: Finding[] = [];
  const id = facts.id;
  const trained = header.context_length;
  const ctxKey = `${header.architecture ?? "<arch>"}.context_length`;
  const ctx = slot.tune_effective.ctx_size;
  const base = { severity: "warning" as const, slot: slot.name, subject: "model" as const, target: abs };
  if (trained !== undefined && ctx > trained && passes(slot.spec.argv, "--ctx-size", String(ctx))) {
    const site = ctxSite(model, slot);
    out.push({
      ...base, code: "slot.ctx_exceeds_training", problem: "ctx_exceeds_training",
      summary: `slot ${slot.name} asks ctx_size ${ctx} > the model's training context ${trained} (n_ctx_train in ${abs})`,
      detail: `Model \`${id}\`'s GGUF header says ${ctxKey} = ${trained}. The runner starts, warning of a possible training context overflow: past ${trained} tokens the model's output may degrade unless the runner scales RoPE for it. Lower [tune] ctx_size to ${trained} or less, or serve a model trained for a longer context.`,
      file: site.file, ...place(site.file, site.path), path: site.path, related: related(place, MODELS_FILE, ["model", id, "path"], `model \`${id}\`'s file`),
    });
  }
  // models.toml's facts as written (`architecture` only when the schema has it and it is set).
  const written: ReadonlyArray<{ key: "architecture" | "context_length"; value: unknown; actual: string | number | undefined; where: string }> = [
    { key: "architecture", value: (facts as { architecture?: unknown }).architecture, actual: header.architecture, where: "general.architecture" },
    { key: "context_length", value: facts.context_length, actual: trained, where: ctxKey },
  ];
  for (const w of written) {
    if ((typeof w.value !== "string" && typeof w.value !== "number") || w.actual === undefined || w.value === w.actual) continue;
    const path = ["model", id, w.key];
    out.push({
      ...base, code: "slot.model_fact_mismatch", problem: "model_fact_mismatch",
      summary: `models.toml says ${w.key} = ${JSON.stringify(w.value)} for model \`${id}\` (slot ${slot.name}), but its GGUF header says ${JSON.stringify(w.actual)} (${w.where} in ${abs})`,
      detail: `The header is what the runner reads. Fix [model.${id}] ${w.key} in models.toml to ${JSON.stringify(w.actual)} (or drop it), or point path at the model it describes.${w.key === "context_length" ? " hal0 limits ctx_size by models.toml's context_length." : ""}`,
      file: MODELS_FILE, ...place(MODELS_FILE, path), path, related: related(place, slot.file, ["model"], `slot ${slot.name} serves model \`${id}\``),
    });
  }
  return out;
}

/** The key that set a slot's ctx_size (compile's `tuneSite`): the slot's [tune], its profiles.toml profile's [tune], else the slot's profile key (a seed's, or the default). */
function ctxSite(model: Model, slot: ResolvedSlot): { file: string; path: KeyPath } {
  if (slot.tune.ctx_size !== undefined) return { file: slot.file, path: ["tune", "ctx_size"] };
  const profile = model.profiles[slot.profile];
  if (profile?.origin === "file" && profile.tune.ctx_size !== undefined) return { file: PROFILES_FILE, path: ["profile", profile.name, "tune", "ctx_size"] };
  return { file: slot.file, path: ["profile"] };
}

/** Whether `argv` passes `flag value` (or `flag=value`). */
function passes(argv: readonly string[], flag: string, value: string): boolean {
  return argv.some((w, i) => (w === flag && argv[i + 1] === value) || w === `${flag}=${value}`);
}

/** Whether `argv` passes `word` (as a word, or as the value of `--flag=word`). */
function usesWord(argv: readonly string[], word: string): boolean {
  return argv.some((w) => w === word || (w.startsWith("-") && w.endsWith(`=${word}`)));
}

function memo<T>(map: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  let hit = map.get(key);
  if (hit === undefined) map.set(key, (hit = make()));
  return hit;
}

function memoSync<T>(map: Map<string, T>, key: string, make: () => T): T {
  let hit = map.get(key);
  if (hit === undefined) map.set(key, (hit = make()));
  return hit;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The Hub models enabled slots use whose file is not on this host: what `hal0 plan` notes and `hal0 apply` pulls with `[models] pull_on_apply`. */
export function notInstalled(model: Model): Array<{ id: string; hf_repo: string; hf_filename: string; slots: string[] }> {
  const out = new Map<string, { id: string; hf_repo: string; hf_filename: string; slots: string[] }>();
  for (const slot of Object.values(model.slots)) {
    const m = slot.enabled && slot.model ? model.models[slot.model] : undefined;
    // Installed when every file it is loaded from is here: a split model missing a later part is not.
    if (!m?.hf_repo || !m.hf_filename || (m.path_abs !== undefined && modelFiles(m.path_abs).every((f) => existsSync(f)))) continue;
    const row = out.get(m.id) ?? { id: m.id, hf_repo: m.hf_repo, hf_filename: m.hf_filename, slots: [] };
    row.slots.push(slot.name);
    out.set(m.id, row);
  }
  return [...out.values()];
}
