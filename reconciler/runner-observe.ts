import { compile, runnerKey, type CompileResult, type ImageDigests, type Model, type RunnerFactsIndex, type SourceTree } from "../compiler/index.js";
import type { Diagnostic } from "../schema/index.js";
import type { ProbeResult, ProbeTarget, RunnerProbe } from "./runner-probe.js";

/**
 * Runner facts into compile: the observe side of the argv check. Compile is
 * pure, so the facts enter as data, in two steps: compile once to learn
 * which runners the enabled slots use, ask the probe for their facts (from
 * its cache, or by running `--version` / `--help`), and compile again with
 * them: each slot's argv is then written in its runner's dialect and checked
 * against its flag table. When the probe knows no runner, the first result is
 * the answer (every slot unprobed: the newest known dialect).
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
    if (word) out.set(runnerKey(engine, word), { runtime: engine, word });
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

/** `compile(tree, carried)` with the facts of the runners its slots use. */
export async function compileWithRunners(tree: SourceTree, carried: readonly Diagnostic[], probe: RunnerProbe, mode: RunnerFactsMode = "probe"): Promise<ObservedCompile> {
  const first = compile(tree, carried);
  return withRunners(first, tree, carried, probe, mode);
}

/** The second step alone, for a caller that holds the fact-free result already. */
export async function withRunners(first: CompileResult, tree: SourceTree, carried: readonly Diagnostic[], probe: RunnerProbe, mode: RunnerFactsMode = "probe"): Promise<ObservedCompile> {
  if (first.model === undefined) return { result: first, runners: new Map(), images: new Map() };
  const targets = runnerTargets(first.model);
  if (targets.length === 0) return { result: first, runners: new Map(), images: new Map() };
  if (mode === "cached") {
    const runners = probe.cached(targets);
    const images = probe.cachedImages(targets);
    return { result: runners.size === 0 && images.size === 0 ? first : compile(tree, carried, { runners, images }), runners, images };
  }
  const found = await probe.probe(targets);
  const { index: runners, images } = found;
  return { result: runners.size === 0 && images.size === 0 ? first : compile(tree, carried, { runners, images }), runners, images, probe: found };
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
