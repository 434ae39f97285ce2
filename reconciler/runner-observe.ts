import { compile, runnerKey, type CompileResult, type ImageDigests, type Model, type RunnerFacts, type RunnerFactsIndex, type SourceTree } from "../compiler/index.js";
import type { Diagnostic } from "../schema/index.js";
import type { ProbeResult, ProbeTarget, RunnerProbe } from "./runner-probe.js";

/**
 * Runner facts into compile: the observe side of the argv check. Compile is
 * pure, so the facts enter as data, in two steps: compile once to learn
 * which runners the enabled slots use, ask the probe for their facts (from
 * its cache, or by running `--version` / `--help`), and compile again with
 * them: each slot's argv is then written in its runner's dialect and checked
 * against its flag table. When the probe knows no runner, the first result is
 * the answer (every slot unprobed: the newest known dialect). When the cache
 * already holds the runners' facts, the first compile is given them
 * (compileFromCache) and is the answer when the probe agrees: one compile.
 */

/** The runners the enabled slots use: each process runner word, or each image on the docker runtime. */
export function runnerTargets(model: Model): ProbeTarget[] {
  const runtime = model.settings.slots.runtime;
  const out = new Map<string, ProbeTarget>();
  for (const slot of Object.values(model.slots)) {
    if (!slot.enabled) continue;
    const profile = model.profiles[slot.profile];
    // Swarm runs images too: they are probed on the manager's engine, as docker images.
    const engine = runtime === "process" ? "process" : "docker";
    const word = engine === "docker" ? profile?.image : profile?.runner[0];
    // A process runner is looked up on the PATH its slot's env sets and run with that env, as the process driver spawns it.
    const path = engine === "process" ? slot.spec.env.PATH : undefined;
    const env = engine === "process" && Object.keys(slot.spec.env).length > 0 ? { env: slot.spec.env } : {};
    const key = runnerKey(engine, word ?? "", path);
    if (word && !out.has(key)) out.set(key, { runtime: engine, word, ...(path !== undefined ? { path } : {}), ...env });
  }
  return [...out.values()];
}

/** How the facts are found: `probe` runs what the cache does not know; `cached` reads the cache only (plain `hal0 validate`). */
export type RunnerFactsMode = "probe" | "cached";

export interface ObservedCompile {
  readonly result: CompileResult;
  /** The facts compile was given (empty: none known). */
  readonly runners: RunnerFactsIndex;
  /** The runner images' digests compile was given (empty: none known). */
  readonly images: ImageDigests;
  /** What the probe said (`probe` mode only): missing and failed runners. */
  readonly probe?: ProbeResult;
}

/** Runner facts as compile takes them. */
export interface GivenFacts {
  readonly runners: RunnerFactsIndex;
  readonly images: ImageDigests;
}

/** `compile(tree, carried)` with the facts of the runners its slots use. */
export async function compileWithRunners(tree: SourceTree, carried: readonly Diagnostic[], probe: RunnerProbe, mode: RunnerFactsMode = "probe"): Promise<ObservedCompile> {
  if (mode === "cached") return withRunners(compile(tree, carried), tree, carried, probe, mode);
  const { first, given } = compileFromCache(tree, carried, probe);
  return withRunners(first, tree, carried, probe, mode, given);
}

/**
 * The first step, guessing from the probe's cache so that one compile can
 * do: when the cache knows runners, compile with every cached runner's facts
 * (`given`); `withRunners` then keeps that result when the probe answers with
 * the same facts for every slot's runner. Which slots there are and which
 * runners they name does not depend on the facts. A tree with errors: the
 * result of a compile without facts (its diagnostics are the ones reported).
 */
export function compileFromCache(tree: SourceTree, carried: readonly Diagnostic[], probe: RunnerProbe): { readonly first: CompileResult; readonly given?: GivenFacts } {
  const guess = probe.cachedAll();
  if (guess.runners.size === 0 && guess.images.size === 0) return { first: compile(tree, carried) };
  const guessed = compile(tree, carried, guess);
  return guessed.model === undefined ? { first: compile(tree, carried) } : { first: guessed, given: guess };
}

/**
 * The second step alone, for a caller that holds the first result already:
 * compiled without facts, or with `given` (compileFromCache). Compile reads
 * facts only by each slot's runner key and image, so when the probe answers
 * with the very facts and image ids `given` holds for every slot's runner,
 * `first` is the result compiling again with the answer would give.
 */
export async function withRunners(first: CompileResult, tree: SourceTree, carried: readonly Diagnostic[], probe: RunnerProbe, mode: RunnerFactsMode = "probe", given?: GivenFacts): Promise<ObservedCompile> {
  if (first.model === undefined) return { result: first, runners: new Map(), images: new Map() };
  const targets = runnerTargets(first.model);
  if (mode === "cached") {
    if (targets.length === 0) return { result: first, runners: new Map(), images: new Map() };
    const runners = probe.cached(targets);
    const images = probe.cachedImages(targets);
    return { result: runners.size === 0 && images.size === 0 ? first : compile(tree, carried, { runners, images }), runners, images };
  }
  const found = targets.length === 0 ? undefined : await probe.probe(targets);
  const runners = found?.index ?? new Map<string, RunnerFacts>();
  const images = found?.images ?? new Map<string, string>();
  const answer = { runners, images };
  const result = given !== undefined ? (sameFacts(first.model, given, answer) ? first : compile(tree, carried, answer))
    : runners.size === 0 && images.size === 0 ? first : compile(tree, carried, answer);
  return { result, runners, images, ...(found ? { probe: found } : {}) };
}

/** True when every slot's runner has the same facts (the same object) and image id in `a` as in `b`: what compile reads of them. */
function sameFacts(model: Model, a: GivenFacts, b: GivenFacts): boolean {
  const imaged = model.settings.slots.runtime !== "process";
  for (const slot of Object.values(model.slots)) {
    const profile = model.profiles[slot.profile];
    const key = slot.runner.key;
    if (a.runners.get(key) !== b.runners.get(key)) return false;
    if (imaged && profile?.image && a.images.get(profile.image) !== b.images.get(profile.image)) return false;
  }
  return true;
}

/**
 * A stable text of a facts index (each runner's key, source and version)
 * and of the images' digests: equal texts, equal facts, so a cached compile
 * stays valid while it holds.
 */
export function runnersFingerprint(index: RunnerFactsIndex, images: ImageDigests = new Map()): string {
  const runners = [...index].map(([key, f]) => `${key}\u0000${f.source}\u0000${f.version.line}\u0000${f.dialect?.id ?? ""}`);
  const digests = [...images].map(([ref, id]) => `image\u0000${ref}\u0000${id}`);
  return [...runners, ...digests].sort().join("\n");
}

/** The argv check's errors over the model's enabled slots: what `hal0 plan` and `hal0 apply` refuse to go on with. */
export function runnerErrors(model: Model): Diagnostic[] {
  const enabled = new Set(Object.values(model.slots).filter((s) => s.enabled).flatMap((s) => s.runner.diagnostics));
  return model.runnerDiagnostics.filter((d) => d.severity === "error" && [...enabled].some((e) => e.code === d.code && e.file === d.file && e.line === d.line && e.column === d.column && e.summary === d.summary));
}
