import { readdir, stat } from "node:fs/promises";
import { dirname, isAbsolute, join, resolve } from "node:path";
import type { CompiledModelFacts, Model } from "../../compiler/index.js";
import { MODEL_LEGACY_TUNE_KEYS } from "../../schema/index.js";
import { ApiError } from "../errors.js";
import { inspectGguf, type GgufFacts } from "../gguf-facts.js";
import { GgufError } from "../gguf.js";

/** The tag that marks a type's default model (hal0.toml has no default-model key; models.toml `tags` carries it). */
export const DEFAULT_TAG = "default";

/** The keys a model row has: what `fields` may name. */
export const ROW_FIELDS = [
  "id", "name", "path", "type", "capabilities", "devices", "hf_repo", "hf_filename", "context_length", "size_bytes", "quant",
  "chat_template", "tokenizer_repo", "jinja", "mtp", "draft", "mmproj", "tags", "installed", "default",
] as const;

export type ModelRow = Record<(typeof ROW_FIELDS)[number], unknown>;

/** One model as the list and show replies carry it: the file facts as written, whether its file is on this host, whether it is its type's default. */
export async function modelRow(m: CompiledModelFacts): Promise<ModelRow> {
  const installed = m.path_abs === undefined ? false : ((await stat(m.path_abs).catch(() => undefined))?.isFile() ?? false);
  return {
    id: m.id, name: m.name ?? m.id, path: m.path ?? null, type: m.type, capabilities: m.capabilities, devices: m.devices,
    hf_repo: m.hf_repo ?? null, hf_filename: m.hf_filename ?? null, context_length: m.context_length ?? null, size_bytes: m.size_bytes ?? null,
    quant: m.quant ?? null, chat_template: m.chat_template, tokenizer_repo: m.tokenizer_repo ?? null, jinja: m.jinja, mtp: m.mtp,
    draft: m.draft ?? null, mmproj: m.mmproj ?? null, tags: m.tags, installed, default: m.tags.includes(DEFAULT_TAG),
  };
}

export function findModel(model: Model, id: string): CompiledModelFacts {
  const m = model.models[id];
  if (!m) throw new ApiError("model.not_found", `no model ${id} in models.toml`, { model_id: id, known: Object.keys(model.models) });
  return m;
}

/** The slots, stack entries and capability selections (`<slot>.<child>`) that name model `id`. */
export function usage(model: Model, id: string): { slots: string[]; stacks: string[]; selections: string[] } {
  const slots = Object.values(model.slots).filter((s) => s.model === id).map((s) => s.name);
  const stacks = Object.values(model.stacks).filter((st) => st.slot.some((e) => e.model === id)).map((st) => st.slug);
  const selections = Object.entries(model.capabilities.selections)
    .flatMap(([slot, children]) => Object.entries(children).filter(([, sel]) => sel.model === id).map(([child]) => `${slot}.${child}`));
  return { slots, stacks, selections };
}

export function inUse(u: ReturnType<typeof usage>): boolean {
  return u.slots.length > 0 || u.stacks.length > 0 || u.selections.length > 0;
}

/** A body with the legacy model shapes is refused with their own codes (seed 001), before anything is compiled. */
export function refuseLegacyKeys(body: Record<string, unknown>, id: string): void {
  if ("defaults" in body) {
    throw new ApiError("model.defaults_removed", "models no longer carry defaults: the base tune comes from the profile, per-slot overrides from the slot's [tune]", { model_id: id, key: "defaults" });
  }
  const tuning = Object.keys(body).filter((k) => (MODEL_LEGACY_TUNE_KEYS as readonly string[]).includes(k));
  if (tuning.length > 0) {
    throw new ApiError("model.tune_key_removed", `models hold file facts only; set ${tuning.join(", ")} on the profile's [tune] or the slot's [tune]`, { model_id: id, keys: tuning });
  }
}

/** A path as a person writes it in models.toml or a request: relative ones resolve against the config folder. */
export function absolutePath(root: string, path: string): string {
  return isAbsolute(path) ? path : resolve(root, path);
}

/** The header facts of a file that must exist: 404 model.path_missing, 422 model.unsupported_format. */
export async function headerOf(path: string): Promise<GgufFacts & { size_bytes: number }> {
  const s = await stat(path).catch(() => undefined);
  if (!s) throw new ApiError("model.path_missing", `no file at ${path}`, { path });
  if (!s.isFile()) throw new ApiError("model.unsupported_format", `${path} is not a file`, { path, reason: "not_a_file" });
  try {
    return await inspectGguf(path);
  } catch (err) {
    if (err instanceof GgufError) throw new ApiError("model.unsupported_format", err.message, { path, reason: err.reason });
    throw err;
  }
}

/** The header facts, or why there are none; never throws (show and validate report, they do not refuse). */
export async function headerReport(path: string): Promise<{ gguf?: GgufFacts; gguf_error?: { code: string; message: string; reason?: unknown } }> {
  try {
    return { gguf: await headerOf(path) };
  } catch (err) {
    if (err instanceof ApiError) return { gguf_error: { code: err.code, message: err.message, reason: err.details.reason } };
    return { gguf_error: { code: "model.unsupported_format", message: (err as Error).message } };
  }
}

/**
 * Drafter candidates for a model file: other GGUF models in its folder with
 * the same tokenizer and vocabulary and a smaller file (speculative decoding
 * needs a shared vocabulary).
 */
export async function draftCandidates(path: string, facts: GgufFacts & { size_bytes: number }): Promise<Array<{ path: string; name?: string; size_bytes: number; quant?: string }>> {
  if (facts.vocab_size === undefined) return [];
  const dir = dirname(path);
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => n.toLowerCase().endsWith(".gguf")).sort().slice(0, 64);
  const out: Array<{ path: string; name?: string; size_bytes: number; quant?: string }> = [];
  for (const n of names) {
    const p = join(dir, n);
    if (p === path) continue;
    const other = await inspectGguf(p).catch(() => undefined);
    if (!other || other.kind !== "model" || other.tokenizer !== facts.tokenizer || other.vocab_size !== facts.vocab_size || other.size_bytes >= facts.size_bytes) continue;
    out.push({ path: p, name: other.name, size_bytes: other.size_bytes, quant: other.quant });
  }
  return out;
}
