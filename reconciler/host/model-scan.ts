import { readdir, stat } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import type { Model } from "../../compiler/index.js";
import { RESOURCE_ID_PATTERN } from "../../schema/index.js";
import { ggufSlotType, inspectGguf, type GgufFacts } from "./gguf-facts.js";
import { GgufError } from "./gguf.js";

/**
 * A scan of `[models] roots`: every `*.gguf` under them, its header read
 * (bounded), sorted into files a models.toml entry already names (as a
 * model, a drafter or a projector), new models with a proposed id and
 * entry, and files skipped with the reason. Reads files; writes nothing.
 */

export interface ScanRoot {
  readonly root: string;
  readonly path: string;
  readonly exists: boolean;
  readonly files: number;
}

export interface ScanNew {
  readonly id: string;
  readonly path: string;
  /** The `[model.<id>]` table a scan writes. */
  readonly entry: Record<string, unknown>;
  readonly gguf: GgufFacts;
}

export interface ScanReport {
  readonly roots: readonly ScanRoot[];
  readonly new: readonly ScanNew[];
  readonly known: ReadonlyArray<{ readonly path: string; readonly id: string; readonly as: "model" | "draft" | "mmproj" }>;
  readonly skipped: ReadonlyArray<{ readonly path: string; readonly reason: string }>;
  /** Registered models whose file lies under a root and is gone (what `prune` removes). */
  readonly missing: ReadonlyArray<{ readonly id: string; readonly path: string }>;
}

const MAX_DEPTH = 8;
const MAX_FILES = 5000;
const SHARD = /-(\d{5})-of-(\d{5})$/;

export async function scanModels(model: Model): Promise<ScanReport> {
  const roots: ScanRoot[] = [];
  const files: string[] = [];
  for (const root of model.settings.models.roots) {
    const path = isAbsolute(root) ? root : resolve(model.root, root);
    const exists = (await stat(path).catch(() => undefined))?.isDirectory() ?? false;
    const found = exists ? await walk(path, 0, MAX_FILES - files.length) : [];
    roots.push({ root, path, exists, files: found.length });
    files.push(...found);
  }
  const owners = registeredFiles(model);
  const taken = new Set(Object.keys(model.models));
  const report = { roots, new: [] as ScanNew[], known: [] as Array<ScanReport["known"][number]>, skipped: [] as Array<ScanReport["skipped"][number]>, missing: [] as Array<ScanReport["missing"][number]> };
  for (const file of [...new Set(files)].sort()) {
    const owner = owners.get(file);
    if (owner) {
      report.known.push({ path: file, ...owner });
      continue;
    }
    const outcome = await propose(model.root, file, taken);
    if ("reason" in outcome) report.skipped.push({ path: file, reason: outcome.reason });
    else report.new.push(outcome);
  }
  const rootPaths = roots.filter((r) => r.exists).map((r) => r.path);
  for (const m of Object.values(model.models)) {
    if (m.path_abs === undefined || !rootPaths.some((r) => m.path_abs!.startsWith(r + sep))) continue;
    if (!(await stat(m.path_abs).catch(() => undefined))) report.missing.push({ id: m.id, path: m.path_abs });
  }
  return report;
}

async function walk(dir: string, depth: number, budget: number): Promise<string[]> {
  if (depth > MAX_DEPTH || budget <= 0) return [];
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const out: string[] = [];
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (e.name.startsWith(".") || out.length >= budget) continue;
    const path = join(dir, e.name);
    const isDir = e.isDirectory() || (e.isSymbolicLink() && (await stat(path).catch(() => undefined))?.isDirectory() === true);
    if (isDir) out.push(...(await walk(path, depth + 1, budget - out.length)));
    else if (e.name.toLowerCase().endsWith(".gguf")) out.push(path);
  }
  return out;
}

/** Absolute file → the model entry that names it (as its weights, its drafter or its projector). */
function registeredFiles(model: Model): Map<string, { id: string; as: "model" | "draft" | "mmproj" }> {
  const out = new Map<string, { id: string; as: "model" | "draft" | "mmproj" }>();
  for (const m of Object.values(model.models)) {
    if (m.draft_abs) out.set(m.draft_abs, { id: m.id, as: "draft" });
    if (m.mmproj_abs) out.set(m.mmproj_abs, { id: m.id, as: "mmproj" });
  }
  for (const m of Object.values(model.models)) if (m.path_abs) out.set(m.path_abs, { id: m.id, as: "model" });
  return out;
}

async function propose(configRoot: string, file: string, taken: Set<string>): Promise<ScanNew | { reason: string }> {
  let facts: GgufFacts & { size_bytes: number };
  try {
    facts = await inspectGguf(file);
  } catch (err) {
    if (err instanceof GgufError) return { reason: `${err.reason}: ${err.message}` };
    return { reason: `unreadable: ${(err as Error).message}` };
  }
  if (facts.kind !== "model") return { reason: `a ${facts.kind} file, not a model (name it as a model's ${facts.kind === "mmproj" ? "mmproj" : "file fact"})` };
  if (facts.split && facts.split.no > 1) return { reason: `shard ${facts.split.no} of ${facts.split.count}; the first shard is the model's path` };
  const id = proposeModelId(basename(file), taken);
  taken.add(id);
  return { id, path: file, entry: entryFor(configRoot, file, facts), gguf: facts };
}

const SPLIT = /^(.*)-(\d{5})-of-(\d{5})(\.gguf)$/i;

/**
 * Every part of the split set a file name belongs to, first part first
 * (`m-00002-of-00003.gguf` → `m-00001-of-00003.gguf`, …, `m-00003-of-00003.gguf`);
 * the name alone for any other file.
 */
export function splitParts(file: string): string[] {
  const m = SPLIT.exec(file);
  const n = m ? Number(m[3]) : 0;
  if (!m || n < 2 || Number(m[2]) < 1 || Number(m[2]) > n) return [file];
  return Array.from({ length: n }, (_, i) => `${m[1]}-${String(i + 1).padStart(5, "0")}-of-${m[3]}${m[4]}`);
}

/** The files a model whose `path` is `path` is loaded from: that file, and a split model's other parts beside it. */
export function modelFiles(path: string): string[] {
  const first = basename(path);
  return [path, ...splitParts(first).filter((p) => p !== first).map((p) => join(dirname(path), p))];
}

/** Where pulls land, absolute: `store` (default `[models] store`), else the first of `[models] roots`; relative to the config folder. */
export function storeDir(model: Model, store = model.settings.models.store): string {
  const dir = store || model.settings.models.roots[0] || "models";
  return resolve(isAbsolute(dir) ? dir : join(model.root, dir));
}

/** A file's path as models.toml writes it: relative to the config folder when under it (with `/`), else absolute. */
export function configPath(configRoot: string, file: string): string {
  const inside = relative(configRoot, file);
  return inside.startsWith("..") || isAbsolute(inside) ? file : inside.split(sep).join("/");
}

/** A models.toml table from a header: file facts only. */
export function entryFor(configRoot: string, file: string, f: GgufFacts & { size_bytes: number }): Record<string, unknown> {
  const type = ggufSlotType(f);
  const capabilities = type === "llm"
    ? [...(f.chat_template ? ["chat"] : []), ...(f.chat_template_tools ? ["tools"] : []), ...(f.chat_template_thinking ? ["reasoning"] : [])]
    : [{ embedding: "embedding", reranking: "rerank", image: "image" }[type]];
  const entry: Record<string, unknown> = {
    name: f.name ?? basename(file).replace(/\.gguf$/i, ""),
    path: configPath(configRoot, file),
    type,
    capabilities,
  };
  if (f.context_length !== undefined) entry.context_length = f.context_length;
  if (f.architecture !== undefined && /^[a-z0-9][a-z0-9_.-]*$/.test(f.architecture)) entry.architecture = f.architecture;
  entry.size_bytes = f.size_bytes;
  if (f.quant !== undefined) entry.quant = f.quant;
  if (f.chat_template_tools) entry.jinja = true;
  if ((f.mtp_layers ?? 0) > 0) entry.mtp = true;
  return entry;
}

/** `Qwen3-4B-Q4_K_M.gguf` → `qwen3-4b-q4_k_m`; shard suffixes dropped; `-2`, `-3`… when the id is taken. */
export function proposeModelId(fileName: string, taken: ReadonlySet<string>): string {
  const stem = fileName.replace(/\.gguf$/i, "").replace(SHARD, "");
  let id = stem.toLowerCase().replace(/[^a-z0-9._-]+/g, "-").replace(/\.{2,}/g, ".").replace(/^[^a-z0-9]+/, "").slice(0, 60).replace(/[._-]+$/, "");
  if (id === "") id = "model";
  let candidate = id;
  for (let i = 2; taken.has(candidate) || !RESOURCE_ID_PATTERN.test(candidate); i++) candidate = `${id}-${i}`;
  return candidate;
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
