import { createHash } from "node:crypto";
import { createReadStream, type Stats } from "node:fs";
import { readdir, realpath, stat } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, resolve, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { z } from "zod";
import { MODELS_FILE, modelTableEdit } from "../../compiler/edits/models.js";
import type { CompiledModelFacts, Model } from "../../compiler/index.js";
import { inspectGguf, type GgufFacts } from "../../reconciler/host/gguf-facts.js";
import { draftCandidates, entryFor, proposeModelId, splitParts } from "../../reconciler/host/model-scan.js";
import { treeFileText } from "../box.js";
import { MODEL_CATALOGUE } from "../../schema/data/model-catalogue.js";
import { ResourceId, SLOT_TYPES } from "../../schema/index.js";
import { ApiError } from "../errors.js";
import { defineRoute, type WriteOutcome } from "../route.js";
import { absolutePath, filesHere, findModel, headerOf, headerReport, inspectable, insideRoots } from "./models-common.js";

const bool = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
const Sha256 = z.string().regex(/^[0-9a-fA-F]{64}$/, "a sha256 in hex (64 digits)").transform((s) => s.toLowerCase());
const PathBody = z.strictObject({ path: z.string().min(1).max(4096) });
const CatalogueQuery = z.strictObject({ type: z.enum(SLOT_TYPES).optional(), installed: bool.optional() });
const HealthQuery = z.strictObject({ verify: bool.default(false), model_id: ResourceId.optional() });
const ConfigWriteBody = z.strictObject({ text: z.string(), base_sha256: Sha256.optional() });
const DryRunQuery = z.strictObject({ dry_run: bool.default(false) });
const AddBody = z.strictObject({ path: z.string().min(1).max(4096), id: ResourceId.optional() });

const written = (o: WriteOutcome) => ({ revision: o.revision, files: o.files, committed: o.committed, plan: o.plan, warnings: o.warnings });
const sha256Text = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");
const isGgufName = (path: string) => path.toLowerCase().endsWith(".gguf");

/** One thing wrong with a registered model's files: a registered code, and which file (`path`, `draft`, `mmproj`). */
interface Problem {
  readonly code: "model.path_missing" | "model.unsupported_format" | "model.size_mismatch" | "model.checksum_mismatch";
  readonly message: string;
  readonly file: "path" | "draft" | "mmproj" | "part";
  readonly [k: string]: unknown;
}

/**
 * More model routes: the curated catalogue (schema/data/model-catalogue.ts)
 * with what of it is here; a health check of every registered model's files;
 * models.toml as text, read and replaced whole (one `text` ChangeSet through
 * the pipeline, guarded by the text's sha256); registering a local file by
 * path, only inside `[models] roots`; and the drafter candidates beside a
 * model file. Reads read; writes only propose.
 */
export const modelExtraRoutes = [
  defineRoute({
    method: "GET", path: "/api/models/catalogue", kind: "read", query: CatalogueQuery, tools: ["model_catalogue"], listKey: "models",
    summary: "A curated list of well-known GGUF models (Hub repo and file, type, quant, size, context, capabilities), each with installed (registered by the same hf_repo + hf_filename and its file is here) and registered_as",
    handle: async ({ query, box }) => {
      const model = await box.model();
      const rows = [];
      for (const c of MODEL_CATALOGUE) {
        if (query.type !== undefined && c.type !== query.type) continue;
        const same = Object.values(model.models).filter((m) => m.hf_repo === c.hf_repo && m.hf_filename === c.hf_filename);
        let registered: string | null = same[0]?.id ?? null;
        let installed = false;
        for (const m of same) {
          if (m.path_abs !== undefined && (await filesHere(m.path_abs))) {
            installed = true;
            registered = m.id;
            break;
          }
        }
        if (query.installed !== undefined && installed !== query.installed) continue;
        rows.push({ ...c, capabilities: [...c.capabilities], installed, registered_as: registered });
      }
      return { models: rows, count: rows.length };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/models/health", kind: "read", query: HealthQuery, tools: ["model_health_check"],
    summary: "Every registered model with a local path: file present, GGUF header readable, size equal to size_bytes (a split model: every part, each against its parts entry, the wrong one named); with verify=true the files are hashed and compared with sha256 (slow on big files)",
    handle: async ({ query, box }) => {
      const model = await box.model();
      const all = query.model_id === undefined ? Object.values(model.models) : [findModel(model, query.model_id)];
      const local = all.filter((m) => m.path_abs !== undefined);
      const rows = [];
      for (const m of local) rows.push(await healthOf(m, query.verify));
      const okCount = rows.filter((r) => r.ok).length;
      return {
        models: rows, ok_count: okCount, problem_count: rows.length - okCount, verify: query.verify,
        not_local: all.filter((m) => m.path_abs === undefined).map((m) => m.id),
      };
    },
  }),
  defineRoute({
    method: "GET", path: "/api/config/models", kind: "read", tools: ["model_config_read"],
    summary: "models.toml as text, as it is on disk (\"\" when absent), with the sha256 of that text (PUT's base_sha256) and the tree's revision",
    handle: async ({ box }) => {
      const snap = await box.snapshot();
      const text = treeFileText(snap, MODELS_FILE);
      return { file: MODELS_FILE, exists: text !== undefined, text: text ?? "", sha256: sha256Text(text ?? ""), revision: snap.revision };
    },
  }),
  defineRoute({
    method: "PUT", path: "/api/config/models", kind: "write", body: ConfigWriteBody, query: DryRunQuery, tools: ["model_config_write"],
    summary: "Replace models.toml's whole text (one change set, compiled and planned before anything is written); base_sha256 (from GET) refuses the write with config.stale when the file moved since",
    handle: async ({ body, query, box }) => {
      const snap = await box.snapshot();
      const current = treeFileText(snap, MODELS_FILE) ?? "";
      const currentSha = sha256Text(current);
      if (body.base_sha256 !== undefined && body.base_sha256 !== currentSha) {
        throw new ApiError("config.stale", `${MODELS_FILE} changed since the text whose sha256 is ${body.base_sha256}; read it again (GET /api/config/models) and retry`, {
          files: [MODELS_FILE], base_sha256: body.base_sha256, current_sha256: currentSha, current: snap.revision,
        });
      }
      return {
        changes: { edits: [{ file: MODELS_FILE, op: "text", text: body.text }], summary: `replace ${MODELS_FILE} (${body.text.length} characters)` },
        dryRun: query.dry_run,
        reply: (o) => ({ file: MODELS_FILE, sha256: o.committed ? sha256Text(body.text) : currentSha, dry_run: query.dry_run, ...written(o) }),
      };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/models/add-from-path", kind: "write", status: 201, body: AddBody, tools: ["model_add"],
    summary: "Register a local GGUF file by path (only inside [models] roots, symlinks resolved): its entry is read from the header, its id defaults to one made from the file name",
    handle: async ({ body, box }) => {
      const model = await box.model();
      const file = await insideRoots(model, body.path);
      const registered = await registeredAs(model, file);
      if (registered !== undefined) {
        throw new ApiError("model.already_exists", `${file} is already registered as model ${registered}`, { model_id: registered, path: file });
      }
      if (body.id !== undefined && model.models[body.id]) {
        throw new ApiError("model.already_exists", `model ${body.id} is already in models.toml; pick another id, or edit it with PUT /api/models/${body.id}`, { model_id: body.id });
      }
      const facts = await headerOf(file);
      if (facts.kind !== "model") throw refusePath(`${file} is a ${facts.kind} file, not a model; name it as a model's ${facts.kind === "mmproj" ? "mmproj" : "file fact"}`);
      if (facts.split && facts.split.no > 1) throw refusePath(`${file} is shard ${facts.split.no} of ${facts.split.count}; add the first shard`);
      const id = body.id ?? proposeModelId(basename(resolve(absolutePath(model.root, body.path))), new Set(Object.keys(model.models)));
      // Relative to the config folder when the file is under it (both with symlinks resolved), else absolute.
      const entry = entryFor(await realpath(model.root).catch(() => model.root), file, facts);
      return {
        changes: { edits: [modelTableEdit(id, entry)], summary: `add model ${id} from ${file}` },
        reply: (o) => ({ model: { id, ...entry }, path_abs: file, gguf: facts, ...written(o) }),
      };
    },
  }),
  defineRoute({
    method: "POST", path: "/api/models/inspect-draft", kind: "read", body: PathBody, tools: ["model_inspect_draft"],
    summary: "The drafter candidates beside a local model file (same tokenizer and vocabulary, smaller) with their header facts and what they share with it; the other GGUF files there with why they are not candidates",
    handle: async ({ body, box, caller }) => {
      const model = await box.model();
      const path = await inspectable(model, body.path, caller);
      const facts = await headerOf(path);
      const owner = Object.values(model.models).find((m) => m.path_abs === path);
      const found = await draftCandidates(path, facts);
      const candidates = [];
      for (const c of found) {
        const g = await inspectGguf(c.path).catch(() => undefined);
        if (!g) continue; // gone or changed since the scan
        const shares = sharesWith(facts, g);
        candidates.push({ path: c.path, name: c.name ?? null, size_bytes: c.size_bytes, quant: c.quant ?? null, shares, usable: shares.tokenizer && shares.vocab_size, gguf: g });
      }
      const taken = new Set(found.map((c) => c.path));
      return {
        path, gguf: facts, registered_as: owner?.id ?? null, current_draft: owner?.draft_abs ?? null,
        candidates, others: await notCandidates(path, facts, taken),
      };
    },
  }),
];

/** A request's path that names no model file (a projector, a later shard): validation.invalid on body.path. */
function refusePath(msg: string): ApiError {
  return new ApiError("validation.invalid", msg, { fields: [{ loc: ["body", "path"], msg, type: "custom" }] });
}

/** `prefix` contains `path` (or is it). */
/** The model whose weights are `file` (its path resolved through symlinks too), if any. */
async function registeredAs(model: Model, file: string): Promise<string | undefined> {
  for (const m of Object.values(model.models)) {
    if (m.path_abs === undefined) continue;
    if (m.path_abs === file || (await realpath(m.path_abs).catch(() => undefined)) === file) return m.id;
  }
  return undefined;
}

/** What a health row carries. */
interface HealthRow {
  readonly id: string;
  readonly path_abs: string;
  readonly ok: boolean;
  readonly problems: Problem[];
  /** The file's size on disk (null when it is not there). */
  readonly size_on_disk: number | null;
  /** What was checked: the GGUF header (a .gguf path), size_bytes (recorded), sha256 (recorded and verify=true). */
  readonly checked: { header: boolean; size: boolean; sha256: boolean };
}

async function healthOf(m: CompiledModelFacts, verify: boolean): Promise<HealthRow> {
  const path = m.path_abs!;
  const problems: Problem[] = [];
  const checked = { header: false, size: false, sha256: false };
  const s = await checkFile(path, "path", m, verify, problems, checked);
  // A split model's other parts, named after its path (`-00002-of-00003.gguf`, …) and beside it, where llama.cpp reads them: each
  // present, readable, of the size and sha256 models.toml records for it (`parts`), the one that is wrong named (`file: "part"`, its
  // `path`). Only those names: a `parts` entry is no way to have another file beside it read and hashed.
  const first = basename(path);
  const recorded = new Map((m.parts ?? []).map((p) => [p.file, p] as const));
  for (const name of splitParts(first).filter((p) => p !== first)) await checkFile(join(dirname(path), name), "part", recorded.get(name) ?? {}, verify, problems, checked);
  for (const [file, abs] of [["draft", m.draft_abs], ["mmproj", m.mmproj_abs]] as const) {
    if (abs === undefined) continue;
    const there = await stat(abs).catch(() => undefined);
    if (!there) {
      problems.push({ code: "model.path_missing", message: `its ${file} file is missing: no file at ${abs}`, file, path: abs });
    } else if (isGgufName(abs)) {
      const report = await headerReport(abs);
      if (report.gguf_error) problems.push({ code: report.gguf_error.code as Problem["code"], message: `its ${file} file: ${report.gguf_error.message}`, file, path: abs, ...(report.gguf_error.reason === undefined ? {} : { reason: report.gguf_error.reason }) });
    }
  }
  return { id: m.id, path_abs: path, ok: problems.length === 0, problems, size_on_disk: s?.isFile() ? s.size : null, checked };
}

/**
 * One file of a model (its `path`, or another part of a split model): present, a file, its GGUF header readable, its size and
 * (with `verify`) sha256 the ones recorded. Adds what is wrong to `problems` (a part's carry its `path`) and what was looked at to
 * `checked`; returns the file's stat (undefined when it is not there).
 */
async function checkFile(
  path: string, file: "path" | "part", want: { readonly size_bytes?: number; readonly sha256?: string }, verify: boolean,
  problems: Problem[], checked: { header: boolean; size: boolean; sha256: boolean },
): Promise<Stats | undefined> {
  const where = file === "part" ? { path } : {};
  const what = file === "part" ? `its part ${basename(path)}: ` : "";
  const s = await stat(path).catch(() => undefined);
  if (!s) {
    problems.push({ code: "model.path_missing", message: `${what}no file at ${path}`, file, ...where });
    return undefined;
  }
  if (!s.isFile()) {
    problems.push({ code: "model.unsupported_format", message: `${what}${path} is not a file`, file, ...where, reason: "not_a_file" });
    return s;
  }
  if (isGgufName(path)) {
    checked.header = true;
    const report = await headerReport(path);
    if (report.gguf_error) problems.push({ code: report.gguf_error.code as Problem["code"], message: `${what}${report.gguf_error.message}`, file, ...where, ...(report.gguf_error.reason === undefined ? {} : { reason: report.gguf_error.reason }) });
  }
  let sizeOk = true;
  if (want.size_bytes !== undefined) {
    checked.size = true;
    if (s.size !== want.size_bytes) {
      sizeOk = false;
      problems.push({ code: "model.size_mismatch", message: `${what}${path} is ${s.size} bytes; models.toml records size_bytes = ${want.size_bytes}`, file, ...where, expected: want.size_bytes, actual: s.size });
    }
  }
  // A file of the wrong size cannot hash right: not read in full for nothing.
  if (verify && want.sha256 !== undefined && sizeOk) {
    checked.sha256 = true;
    const actual = await sha256File(path);
    if (actual !== want.sha256) problems.push({ code: "model.checksum_mismatch", message: `${what}${path} hashes to ${actual}; models.toml records sha256 = ${want.sha256}`, file, ...where, expected: want.sha256, actual });
  }
  return s;
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  await pipeline(createReadStream(path), hash);
  return hash.digest("hex");
}

function sharesWith(main: GgufFacts, other: GgufFacts): { architecture: boolean; tokenizer: boolean; vocab_size: boolean } {
  return {
    architecture: main.architecture !== undefined && other.architecture === main.architecture,
    tokenizer: main.tokenizer !== undefined && other.tokenizer === main.tokenizer,
    vocab_size: main.vocab_size !== undefined && other.vocab_size === main.vocab_size,
  };
}

/** The other GGUF files beside `path` (as draftCandidates looks: sorted, at most 64) that are not candidates, with why. */
async function notCandidates(path: string, facts: GgufFacts & { size_bytes: number }, taken: ReadonlySet<string>): Promise<Array<{ path: string; reason: string }>> {
  const dir = dirname(path);
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => isGgufName(n)).sort().slice(0, 64);
  const out: Array<{ path: string; reason: string }> = [];
  for (const n of names) {
    const p = join(dir, n);
    if (p === path || taken.has(p)) continue;
    const g = await inspectGguf(p).catch((err: Error) => err);
    let reason: string;
    if (g instanceof Error) reason = `unreadable header: ${g.message}`;
    else if (facts.vocab_size === undefined) reason = "the main model's header names no vocabulary";
    else if (g.kind !== "model") reason = `a ${g.kind} file, not a model`;
    else if (g.tokenizer !== facts.tokenizer) reason = `another tokenizer (${g.tokenizer ?? "none"} vs ${facts.tokenizer ?? "none"})`;
    else if (g.vocab_size !== facts.vocab_size) reason = `another vocabulary size (${g.vocab_size ?? "none"} vs ${facts.vocab_size})`;
    else if (g.size_bytes >= facts.size_bytes) reason = "not smaller than the main model";
    else reason = "not offered";
    out.push({ path: p, reason });
  }
  return out;
}
