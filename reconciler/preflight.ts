import { accessSync, constants, statSync } from "node:fs";
import type { CompiledModelFacts, Model, ResolvedSlot } from "../compiler/index.js";
import { Locator, type Target } from "../compiler/locate.js";
import type { Diagnostic, KeyPath, RelatedPosition } from "../schema/index.js";
import { findRunner, HAL0_BIN, type RunnerLookup } from "./drivers/runner.js";

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
 *   fetched by hf_repo has no file to check.
 *
 * Reads only (stat and access; nothing is run). Each problem is a finding in
 * the diagnostic shape with a registry code, naming the slot and the key that
 * set the file. `hal0 validate` reports them as warnings (errors with
 * --strict), the conditions as Stalled (RunnerNotFound, ModelMissing, …),
 * `hal0 doctor` as rows. Pure callers (compile, the planner) never see them.
 */

export type PreflightCode = "slot.runner_not_found" | "slot.runner_not_executable" | "slot.model_missing" | "slot.model_unreadable";

/** What a finding is about: the runner, or one of the files the model's keys name. */
export type PreflightSubject = "runner" | "model" | "draft" | "mmproj" | "chat_template";

/**
 * One problem, in the diagnostic shape (`file` relative to the config folder;
 * `line` / `column` null when the caller passed no texts to place it with),
 * plus which slot, what, and the word or absolute path concerned.
 */
export interface Finding {
  readonly code: PreflightCode;
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
  /** The runner word as written, or the absolute file path. */
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
  const files = new Map<string, FileState>();
  const fileState = (path: string) => memoSync(files, path, () => readable(path));
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
        const state = fileState(abs);
        if (state !== "ok") out.push(fileFinding(slot, facts.id, f, abs, state, place));
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

/** Synchronous, as `findRunner`'s stats: one stat and one access, a few µs, no thread-pool round trip. */
function readable(path: string): FileState {
  try {
    if (!statSync(path).isFile()) return "not_a_file";
    accessSync(path, constants.R_OK);
    return "ok";
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT" || code === "ENOTDIR" ? "missing" : "unreadable";
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
  const code: PreflightCode = lookup.problem === "not_found" ? "slot.runner_not_found" : "slot.runner_not_executable";
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
    code, severity: "warning", summary, detail: `hal0 apply would fail to start slot ${slot.name}. ${where} ${fix}`,
    file: site.file, ...place(site.file, site.path), path: site.path, related: rel, slot: slot.name, subject: "runner", target: word,
  };
}

function fileFinding(slot: ResolvedSlot, id: string, f: (typeof MODEL_FILES)[number], abs: string, state: Exclude<FileState, "ok">, place: Place): Finding {
  const path = ["model", id, f.key];
  const code: PreflightCode = state === "missing" ? "slot.model_missing" : "slot.model_unreadable";
  const how = state === "missing" ? "does not exist" : state === "not_a_file" ? "is not a regular file" : "is not readable by hal0";
  const fix = state === "missing"
    ? `Fix [model.${id}] ${f.key} in models.toml (relative paths are taken against the config folder), or put the file there.`
    : `Make it a file hal0 and the runner can read (its permissions, or the path).`;
  return {
    code, severity: "warning", summary: `the ${f.what} of slot ${slot.name} ${how}: ${abs}`,
    detail: `Model \`${id}\`; the runner would exit at load and hal0 apply would fail. ${fix}`,
    file: MODELS_FILE, ...place(MODELS_FILE, path), path, related: related(place, slot.file, ["model"], `slot ${slot.name} serves model \`${id}\``),
    slot: slot.name, subject: f.subject, target: abs,
  };
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
