import { realpath, stat } from "node:fs/promises";
import { isAbsolute, resolve, sep } from "node:path";
import { DEFAULT_TAG } from "../../compiler/edits/models.js";
import type { CompiledModelFacts, Model } from "../../compiler/index.js";
import { MODEL_LEGACY_TUNE_KEYS } from "../../schema/index.js";
import { ApiError } from "../errors.js";
import type { Caller } from "../route.js";
import { inspectGguf, type GgufFacts } from "../../reconciler/host/gguf-facts.js";
import { GgufError } from "../../reconciler/host/gguf.js";
import { modelFiles } from "../../reconciler/host/model-scan.js";


/** The keys a model row has: what `fields` may name. */
export const ROW_FIELDS = [
  "id", "name", "path", "type", "capabilities", "devices", "hf_repo", "hf_filename", "revision", "sha256", "architecture", "context_length", "size_bytes", "parts", "quant",
  "chat_template", "tokenizer_repo", "jinja", "mtp", "draft", "mmproj", "tags", "installed", "default",
] as const;

export type ModelRow = Record<(typeof ROW_FIELDS)[number], unknown>;

/** One model as the list and show replies carry it: the file facts as written, whether its file is on this host, whether it is its type's default. */
export async function modelRow(m: CompiledModelFacts): Promise<ModelRow> {
  const installed = m.path_abs === undefined ? false : await filesHere(m.path_abs);
  return {
    id: m.id, name: m.name ?? m.id, path: m.path ?? null, type: m.type, capabilities: m.capabilities, devices: m.devices,
    hf_repo: m.hf_repo ?? null, hf_filename: m.hf_filename ?? null, revision: m.revision ?? null, sha256: m.sha256 ?? null, architecture: m.architecture ?? null,
    context_length: m.context_length ?? null, size_bytes: m.size_bytes ?? null, parts: m.parts ?? null,
    quant: m.quant ?? null, chat_template: m.chat_template, tokenizer_repo: m.tokenizer_repo ?? null, jinja: m.jinja, mtp: m.mtp,
    draft: m.draft ?? null, mmproj: m.mmproj ?? null, tags: m.tags, installed, default: m.tags.includes(DEFAULT_TAG),
  };
}

/** Every file a model at `path` is loaded from is here (a split model: each of its parts beside it, as llama.cpp needs them). */
export async function filesHere(path: string): Promise<boolean> {
  for (const file of modelFiles(path)) if (!((await stat(file).catch(() => undefined))?.isFile() ?? false)) return false;
  return true;
}

export function findModel(model: Model, id: string): CompiledModelFacts {
  const m = model.models[id];
  if (!m) throw new ApiError("model.not_found", `no model ${id} in models.toml`, { model_id: id, known: Object.keys(model.models) });
  return m;
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

function under(path: string, prefix: string): boolean {
  return path === prefix || path.startsWith(prefix.endsWith(sep) ? prefix : prefix + sep);
}

/**
 * The file a request names, symlinks resolved, when it lies under one of
 * `[models] roots` (each resolved too); 403 model.path_outside_roots
 * otherwise. A path that does not exist is judged by its lexical place, so
 * the refusal never tells whether a file outside the roots exists.
 */
export async function insideRoots(model: Model, given: string): Promise<string> {
  const abs = resolve(absolutePath(model.root, given));
  const roots: string[] = [];
  for (const r of model.settings.models.roots) {
    const lexical = resolve(isAbsolute(r) ? r : resolve(model.root, r));
    roots.push(lexical);
    const real = await realpath(lexical).catch(() => undefined);
    if (real !== undefined && real !== lexical) roots.push(real);
  }
  const real = await realpath(abs).catch(() => undefined);
  const place = real ?? abs;
  if (!roots.some((r) => under(place, r))) {
    throw new ApiError("model.path_outside_roots", `${given} is not under any of [models] roots (${model.settings.models.roots.join(", ") || "none set"}); move the file into a root, or add its folder to roots in hal0.toml`, {
      path: abs, ...(real !== undefined && real !== abs ? { resolved: real } : {}), roots: model.settings.models.roots,
    });
  }
  if (real === undefined) throw new ApiError("model.path_missing", `no file at ${abs}`, { path: abs });
  return real;
}

/**
 * The file a model read (model_inspect, model_inspect_draft) may open for
 * `caller`: any path for an operator (the person at the box) and for hal0
 * itself (`system`); for an agent
 * or an anonymous caller only a file under `[models] roots` (insideRoots:
 * 403 model.path_outside_roots otherwise, never saying whether it exists) or
 * one a model entry already names. Reading any file hal0 can read would
 * tell them what is on the host (a header's bytes, a size, whether it is there).
 */
export async function inspectable(model: Model, given: string, caller: Caller): Promise<string> {
  const abs = resolve(absolutePath(model.root, given));
  // hal0 itself (`system:pull` registering a model a person approved pulling into the store) reads as the operator does.
  if (caller.kind === "operator" || caller.kind === "system") return abs;
  const named = Object.values(model.models).some((m) => [m.path_abs, m.draft_abs, m.mmproj_abs].includes(abs));
  return named ? abs : insideRoots(model, given);
}
