import { groupArgv, same, type ResolvedSlot, type SlotSpec } from "../compiler/index.js";
import type { SlotView } from "./observed.js";

/**
 * Slot views: what a plan shows as a slot's `before` / `after`, what runtimes
 * record when they start one, and the field-by-field diff of two of them.
 */

/** The view of a desired slot. `tune` is the effective tune (after the model's limits). */
export function slotView(slot: ResolvedSlot): SlotView {
  return {
    profile: slot.profile,
    model: slot.model ?? null,
    type: slot.type,
    port: slot.port,
    device: slot.device,
    tune: slot.tune_effective,
    spec: slot.spec,
    spec_hash: slot.spec_hash,
    // Only a runner probed as llama-server is known to read LLAMA_API_KEY and HF_TOKEN (runner-secrets.ts).
    ...(slot.runner.status === "checked" ? { secrets_in_env: true } : {}),
  };
}

const VIEW_FIELDS = ["profile", "model", "type", "port", "device"] as const;
const SPEC_FIELDS = ["runtime", "image", "host", "port", "device", "gpu_index", "health_path", "spec_version", "model_sha256"] as const;

/**
 * The dotted paths that differ between two views, sorted: view fields,
 * `tune.<key>`, spec fields, `env.<NAME>`, `argv.<flag>` (flags compared by
 * canonical name, all occurrences), and `argv` when only positional words or
 * the order changed. Never empty when the spec hashes differ: `spec_hash` is
 * the fallback when no field explains the difference.
 */
export function viewChangedPaths(before: SlotView, after: SlotView): string[] {
  const paths = new Set<string>();
  for (const key of VIEW_FIELDS) if (!same(before[key], after[key])) paths.add(key);
  for (const key of unionKeys(before.tune, after.tune)) {
    if (!same(valueOf(before.tune, key), valueOf(after.tune, key))) paths.add(`tune.${key}`);
  }
  specPaths(before.spec, after.spec, paths);
  if (paths.size === 0 && before.spec_hash !== after.spec_hash) paths.add("spec_hash");
  return [...paths].sort();
}

function specPaths(a: SlotSpec, b: SlotSpec, into: Set<string>): void {
  for (const key of SPEC_FIELDS) if (!same(a[key], b[key])) into.add(key);
  for (const name of unionKeys(a.env, b.env)) if (a.env[name] !== b.env[name]) into.add(`env.${name}`);
  for (const name of unionKeys(a.observed ?? {}, b.observed ?? {})) if (a.observed?.[name] !== b.observed?.[name]) into.add(`observed.${name}`);
  // Swarm: a move names the placement key (`placement.node`, `placement.labels.<key>`).
  if (a.placement?.node !== b.placement?.node) into.add("placement.node");
  for (const name of unionKeys(a.placement?.labels ?? {}, b.placement?.labels ?? {})) if (a.placement?.labels[name] !== b.placement?.labels[name]) into.add(`placement.labels.${name}`);
  const ga = groupArgv(a.argv);
  const gb = groupArgv(b.argv);
  let flagChanged = false;
  for (const flag of unionKeys(Object.fromEntries(ga.flags), Object.fromEntries(gb.flags))) {
    if (same(ga.flags.get(flag), gb.flags.get(flag))) continue;
    into.add(`argv.${flag}`);
    flagChanged = true;
  }
  if (!same(ga.positional, gb.positional) || (!flagChanged && !same(a.argv, b.argv))) into.add("argv");
}

/**
 * The value a changed path names in a view, for display: `argv.<flag>` is
 * the flag's value (`true` for a flag without one, an array when it occurs
 * more than once, undefined when absent); `argv` is the positional words.
 */
export function slotValueAt(view: SlotView, path: string): unknown {
  const dot = path.indexOf(".");
  const head = dot < 0 ? path : path.slice(0, dot);
  const rest = path.slice(dot + 1);
  if (head === "tune" && dot >= 0) return valueOf(view.tune, rest);
  if (head === "env" && dot >= 0) return view.spec.env[rest];
  if (head === "observed" && dot >= 0) return view.spec.observed?.[rest];
  if (path === "placement.node") return view.spec.placement?.node;
  if (head === "placement" && rest.startsWith("labels.")) return view.spec.placement?.labels[rest.slice("labels.".length)];
  if (head === "argv") return dot < 0 ? groupArgv(view.spec.argv).positional : flagValue(view.spec.argv, rest);
  if ((VIEW_FIELDS as readonly string[]).includes(path) || path === "spec_hash") return valueOf(view, path);
  return valueOf(view.spec, path);
}

function flagValue(argv: readonly string[], flag: string): unknown {
  const values = groupArgv(argv).flags.get(flag);
  if (values === undefined) return undefined;
  const shown = values.map((v) => v ?? true);
  return shown.length === 1 ? shown[0] : shown;
}

function valueOf(object: object, key: string): unknown {
  return Object.hasOwn(object, key) ? (object as Record<string, unknown>)[key] : undefined;
}

function unionKeys(a: object, b: object): string[] {
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
}

/** Deep equality of JSON-like values (key order ignored); lives in compiler/hash.ts, beside canonical JSON. */
export { same };

/**
 * A running slot's image has no digest now (the image is not on the engine,
 * or the engine did not answer the runner probe) while the one it runs was
 * recorded with one: hal0 cannot tell what a replace would start, and without
 * the image it could not start anything. The planner keeps it running (reason
 * `image_unobserved`, a `slot.image_missing` warning) until the digest is read
 * again: the same one is no change, another one replaces it; its conditions
 * say so (ImageUnobserved), not that a change is pending. Only for the image it
 * runs: a profile that names another image asks for that one, which a replace
 * starts (pulling it with `[slots] pull = true`) or fails to.
 */
export function imageUnobserved(before: Pick<SlotView, "spec">, after: Pick<SlotView, "spec">): boolean {
  return after.spec.image !== undefined && after.spec.image === before.spec.image && after.spec.observed?.image_digest === undefined && before.spec.observed?.image_digest !== undefined;
}
